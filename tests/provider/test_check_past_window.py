"""`capacity check` and `capacity book` agree about a window that has passed (s7probe): check answered "FITS ...
2025-10-01 00:00 -> 2025-10-18 16:05" (exit 0) for the pretraining example a year after that window, with nothing
said, while book of the same request refuses it (exit 2, "before now"); the help promised exit 2 for both."""

from __future__ import annotations

from pathlib import Path

import pytest

from llmsizer.cli.main import main

ROOT = Path(__file__).resolve().parents[2]
INV = str(ROOT / "examples" / "provider" / "inventory.yaml")
PRE = str(ROOT / "examples" / "pretraining-multinode.yaml")  # start: 2025-10-01


def test_check_says_what_book_refuses(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("sqlalchemy", reason="booking needs the 'provider' extra")
    later = ("--now", "2026-06-01")  # after the request's window
    assert main(["capacity", "check", PRE, "--inventory", INV, "--no-db", *later]) == 0
    out = capsys.readouterr().out
    assert "starts before now (2026-06-01 00:00 UTC): `capacity book` refuses it" in out
    assert main(["capacity", "book", PRE, "--inventory", INV, "--db", str(tmp_path / "b.db"), *later]) == 2
    assert "before now" in capsys.readouterr().err
    assert main(["capacity", "check", PRE, "--inventory", INV, "--no-db", "--now", "2025-09-01"]) == 0
    assert "before now" not in capsys.readouterr().out  # a window still ahead: nothing to say


LORA = str(ROOT / "examples" / "lora-finetune-and-chat.yaml")  # support-chat: 2025-09-08
# every serving node shares fra1's firmware window (2025-11-15), which support-chat's run crosses
PARTNER_ONLY = str(Path(__file__).resolve().parent / "data" / "partner_only_inventory.yaml")


def test_the_later_window_check_offers_is_not_in_the_past(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """check offered "start later: from 2025-11-15 18:00" a year after that moment (probe4), a window `book` refuses
    as before now, while its own note sends the user to `book --earliest`, which searches from now: the window
    offered is now the one book --earliest places."""
    pytest.importorskip("sqlalchemy", reason="booking needs the 'provider' extra")
    now = ("--now", "2026-06-01")
    assert main(["capacity", "check", LORA, "--inventory", PARTNER_ONLY, "--no-db", *now]) == 1
    out = capsys.readouterr().out
    (line,) = [ln for ln in out.splitlines() if "start later: from" in ln]
    assert "start later: from 2026-06-01 00:00 " in line, out
    db = str(tmp_path / "b.db")
    assert main(["capacity", "book", LORA, "--inventory", PARTNER_ONLY, "--db", db, "--job", "support-chat", "--earliest",
                 "--json", *now]) == 0
    assert '"2026-06-01T00:00:00"' in capsys.readouterr().out
