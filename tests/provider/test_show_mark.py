"""`capacity show`'s timeline states its step as a duration people read (s7probe): it printed Python's timedelta
repr, "(each mark: 18:43:04.615385)", for a one-month booking."""

from __future__ import annotations

import datetime as dt
import re
from pathlib import Path

import pytest

pytest.importorskip("sqlalchemy", reason="the reservation store needs SQLAlchemy 2 (the 'provider' extra)")

from llmsizer.cli.main import main  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
INV = str(ROOT / "examples" / "provider" / "inventory.yaml")
PRE = str(ROOT / "examples" / "pretraining-multinode.yaml")
UNIT_S = {"s": 1, "min": 60, "h": 3600, "days": 86400}


def test_each_mark_is_the_span_over_the_marks(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    db = str(tmp_path / "b.db")
    assert main(["capacity", "book", PRE, "--inventory", INV, "--db", db, "--now", "2025-09-01"]) == 0
    capsys.readouterr()
    assert main(["capacity", "show", "--inventory", INV, "--db", db]) == 0
    out = capsys.readouterr().out
    m = re.search(r"devices held, (\S+ \S+) \.\. (\S+ \S+) \(each mark: ([\d.]+) (s|min|h|days)\)", out)
    assert m is not None, out
    bars = re.search(r"\|([^|]*)\| peak", out)
    assert bars is not None
    start, end = (dt.datetime.strptime(m.group(i), "%Y-%m-%d %H:%M") for i in (1, 2))
    step = (end - start).total_seconds() / (len(bars.group(1)) - 1)
    assert float(m.group(3)) * UNIT_S[m.group(4)] == pytest.approx(step, rel=0.06, abs=60)
