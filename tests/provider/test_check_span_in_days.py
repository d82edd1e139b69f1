"""`capacity check` says a service's span in days (probe20 C4): a request file's month is 730 h (request/quantities.py),
no calendar month, and "6.0 months from 2026-12-14 00:00 -> 2027-06-14 12:00" read as a booking that ends half a
day late. The span printed is the distance between the dates printed beside it."""

from __future__ import annotations

import datetime as dt
import re
from pathlib import Path

import pytest

from llmsizer.cli.main import main

ROOT = Path(__file__).resolve().parents[2]
INV = str(ROOT / "examples" / "provider" / "inventory.yaml")
LORA = ROOT / "examples" / "lora-finetune-and-chat.yaml"  # support-chat serves from 2025-09-08, 12 months


@pytest.mark.parametrize("months", [6, 12])
def test_the_span_is_the_days_between_the_dates(months: int, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    text = LORA.read_text("utf-8")
    assert "      duration: 12 months\n" in text
    req = tmp_path / "r.yaml"
    req.write_text(text.replace("      duration: 12 months\n", f"      duration: {months} months\n"), "utf-8")
    assert main(["capacity", "check", str(req), "--inventory", INV, "--no-db", "--now", "2025-09-01"]) == 0
    out = capsys.readouterr().out
    lines = out.splitlines()
    i = next(i for i, ln in enumerate(lines) if ln.startswith("support-chat (inference)"))
    head = re.search(r", ([\d,.]+) days from (\d{4}-\d\d-\d\d \d\d:\d\d),", lines[i])
    fits = re.search(r"(\d{4}-\d\d-\d\d \d\d:\d\d) -> (\d{4}-\d\d-\d\d \d\d:\d\d)$", lines[i + 1])
    assert head and fits and "month" not in lines[i], out
    start, end = (dt.datetime.strptime(t, "%Y-%m-%d %H:%M") for t in fits.groups())
    assert head.group(2) == fits.group(1)
    assert float(head.group(1).replace(",", "")) == round((end - start) / dt.timedelta(days=1), 1)
