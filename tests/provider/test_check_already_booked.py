"""`capacity check` of a request already booked (probe10 defect 2): `book` recognises the request's idempotency key
(its canonical content and the job) and answers "already booked ID", exit 0; `check` answered DOES NOT FIT against
the request's own booking ([busy], exit 1), so the two gave opposite exit codes for the same input. Now check
recognises the key by the same rule (`capacity_cmd.already_booked`) and answers with book's line. On a real SQLite
file (read by the standard library, as `check` reads it) and a real PostgreSQL server."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytest.importorskip("sqlalchemy", reason="the reservation store needs SQLAlchemy 2 (the 'provider' extra)")

from .pg_databases import fresh_database
from .test_cli_capacity import INV, NOW, PRE, run  # noqa: E402


def _round_trip(db: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert run("capacity", "book", PRE, "--inventory", INV, "--db", db, "--json", *NOW) == 0
    (booked,) = json.loads(capsys.readouterr().out)["reservations"]
    assert run("capacity", "check", PRE, "--inventory", INV, "--db", db, *NOW) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"already booked {booked['id']}: pretrain-8b (confirmed)") and "DOES NOT FIT" not in out
    assert run("capacity", "check", PRE, "--inventory", INV, "--db", db, "--json", *NOW) == 0
    (entry,) = json.loads(capsys.readouterr().out)["jobs"]
    assert entry == {"job": "pretrain-8b", "fits": True, "existing": True, "id": booked["id"], "state": "confirmed"}
    # the same words as book's answer for the same input
    assert run("capacity", "book", PRE, "--inventory", INV, "--db", db, *NOW) == 0
    assert capsys.readouterr().out == out
    # another request (other content: another key) still meets that booking: not hidden by the rule
    other = tmp_path / "other.yaml"
    other.write_text(Path(PRE).read_text().replace("title: \"", "title: \"another team: "))
    assert run("capacity", "check", str(other), "--inventory", INV, "--db", db, "--json", *NOW) == 1
    (entry,) = json.loads(capsys.readouterr().out)["jobs"]
    assert entry["existing"] is False and entry["fits"] is False and entry["binding"] == "busy"
    # released: the key has no live booking, the request is checked again (and fits)
    assert run("capacity", "release", booked["id"], "--db", db) == 0
    capsys.readouterr()
    assert run("capacity", "check", PRE, "--inventory", INV, "--db", db, *NOW) == 0
    assert "FITS     at fra1" in capsys.readouterr().out


def test_check_of_a_booked_request_says_already_booked_sqlite(tmp_path, capsys):
    _round_trip(str(tmp_path / "b.db"), tmp_path, capsys)


def test_check_of_a_booked_request_says_already_booked_postgresql(pg_url, tmp_path, capsys):
    url = fresh_database(pg_url, "llmsizer_check_booked")
    _round_trip(url, tmp_path, capsys)
