"""review8 #4: `confirm` (and `hold`/`activate`) apply the orphan rule of `check` and `book` (provider/store.py
`orphaned`, one home): a held booking on a node that now holds another device, or that the inventory no longer has,
is refused with the one-line message that names the node and the booking ids (exit 2), and the web console's queue
check says the same instead of "would hold 1 of 0"."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest
from tests.provider.test_inventory_bookings_disagree import NOW, TRAIN, _edited, _imported, run

pytest.importorskip("sqlalchemy")
from llmsizer.provider.store import Store  # noqa: E402


def _held(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> tuple[Path, str, str]:
    """One LoRA job booked as held on the real A40 node."""
    inv = _imported(tmp_path)
    db = str(tmp_path / "b.db")
    req = tmp_path / "tr1.yaml"
    req.write_text(TRAIN.format(n=1))
    capsys.readouterr()
    assert run("capacity", "book", str(req), "--inventory", str(inv), "--db", db, "--state", "held", "--json",
               *NOW) == 0
    (b,) = json.loads(capsys.readouterr().out)["reservations"]
    assert b["state"] == "held" and b["nodes"] == ["gpunode-1"]
    return inv, db, b["id"]


@pytest.mark.parametrize("old, new, why", [
    ("device: a40", "device: l40s", "booked on a40, the inventory now has l40s"),
    ("id: gpunode-1", "id: gpunode-9", "the inventory has no such node"),
])
def test_confirm_refuses_a_booking_the_inventory_cannot_place(tmp_path, capsys, old, new, why):
    inv, db, rid = _held(tmp_path, capsys)
    changed = _edited(tmp_path, inv, old, new)
    # before: the re-equipped node confirmed (exit 0); the renamed one said "would hold 1 of 0" (exit 1)
    assert run("capacity", "confirm", rid, "--inventory", str(changed), "--db", db) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "node 'gpunode-1'" in err and rid in err and why in err
    # the levers it names reach this booking whatever its window (review10 #1/#2): by id
    assert f"capacity re-place {rid} --inventory" in err and f"capacity release {rid}" in err
    assert [r["state"] for r in Store(db).reservations()] == ["held"]  # nothing changed
    # the inventory as booked still confirms
    assert run("capacity", "confirm", rid, "--inventory", str(inv), "--db", db) == 0
    assert [r["state"] for r in Store(db).reservations()] == ["confirmed"]


def test_the_console_queue_uses_the_same_rule(tmp_path, capsys):
    pytest.importorskip("fastapi")
    from llmsizer.web.api_capacity import console_view
    inv, db, rid = _held(tmp_path, capsys)
    changed = _edited(tmp_path, inv, "device: a40", "device: l40s")

    def queue(path: Path) -> dict:
        args = argparse.Namespace(inventory=str(path), db=db, auth=None, hardware_file=[], actor="t",
                                  token_file=None, json=True, at=None, audit=True, svg=None, html=None)
        (q,) = console_view(args)["queue"]
        return q

    assert queue(inv)["fits"] is True
    q = queue(changed)  # before: fits True (the capacity rule alone: an l40s holds one device too)
    assert q["fits"] is False and "booked on a40, the inventory now has l40s" in q["binding"]
