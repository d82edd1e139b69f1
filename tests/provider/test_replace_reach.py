"""review10 #1, #2, #5: what `capacity re-place` reaches and what it moves.

#1: a *requested* booking on a renamed node is refused by `hold` (store.py ``moving_refusal``), so re-place and
`release --orphans` must reach it (before: "no orphaned booking", exit 0; `re-place ID` exit 2).
#2: without ids re-place takes what the refusal of `check` takes (``orphaned(inv, live, now)``): a window that has
ended is neither moved nor able to block the others.
#5: a two-node booking with one node removed keeps the node that was never orphaned.

The expected holds are the holds `book`/`submit` wrote with only the orphaned node's name changed (the rule), never
anything re-place computes."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

import pytest

pytest.importorskip("sqlalchemy")
from llmsizer.provider.placement import Item, Placement  # noqa: E402
from llmsizer.provider.store import Store  # noqa: E402

from .test_replace_orphans import INV, NOW, _inv, _renamed, run  # noqa: E402

JOB = """  - name: {name}
    kind: training
    model: {{name: qwen2.5-0.5b}}
    method: lora
    dataset: {{tokens: 2M}}
    resources: {{device: a40, count: {count}}}
    start: {start}
"""

# a requested booking whose hold must outlast this test's `capacity hold` (made at the real clock): booked today,
# for a window a month on, held the longest `--hold-hours` takes (numbers.HOLD_HOURS: a year)
_today = dt.datetime.now(dt.timezone.utc).date()
TODAY = ("--now", _today.isoformat())
LATER = (_today + dt.timedelta(days=30)).isoformat()
HOLD = "8784"


def _json(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, object]:
    capsys.readouterr()
    code = run(*argv, "--json")
    out = capsys.readouterr().out
    return code, json.loads(out) if out.strip() else None


def _book(tmp_path: Path, capsys: pytest.CaptureFixture[str], jobs: str, *extra: str,
          now: tuple[str, str] = NOW) -> tuple[Path, str, list]:
    inv = _inv(tmp_path, "inv.yaml", "gpu-07")
    req = tmp_path / "req.yaml"
    req.write_text("version: 1\njobs:\n" + jobs)
    db = str(tmp_path / "b.db")
    code, answer = _json(capsys, "capacity", "book", str(req), "--inventory", str(inv), "--db", db, *now, *extra)
    booked = answer["reservations"]  # type: ignore[index]
    assert code == 0 and all(b["nodes"] == ["gpu-07"] for b in booked)
    return inv, db, booked  # type: ignore[return-value]


def test_a_requested_booking_on_a_renamed_node_is_reached(tmp_path, capsys):
    job = JOB.format(name="tune-r", count=1, start=LATER)
    _, db, (b,) = _book(tmp_path, capsys, job, "--state", "requested", "--hold-hours", HOLD, now=TODAY)
    rid = b["id"]
    s = Store(db)
    before = s.holds_of(rid)
    s.close()
    renamed = _inv(tmp_path, "renamed.yaml", "gpu-7")
    # hold refuses, and names the command that reaches this very booking
    capsys.readouterr()
    assert run("capacity", "hold", rid, "--inventory", str(renamed), "--db", db) == 2
    err = capsys.readouterr().err
    assert f"capacity re-place {rid} --inventory" in err, err
    # re-place as the refusal says: moved, state kept (before: "not an orphaned booking", exit 2)
    code, out = _json(capsys, "capacity", "re-place", rid, "--inventory", str(renamed), "--db", db, *TODAY)
    assert code == 0 and out["written"] and [m["to"] for m in out["moved"]] == [["gpu-7"]], out  # type: ignore[index]
    s = Store(db)
    assert sorted(s.holds_of(rid), key=repr) == _renamed(before, "gpu-07", "gpu-7")
    assert {r["id"]: r["state"] for r in s.reservations()} == {rid: "requested"}
    s.close()
    # ... and hold now goes through on the renamed inventory
    assert run("capacity", "hold", rid, "--inventory", str(renamed), "--db", db) == 0


def test_without_ids_a_requested_orphan_is_moved_and_release_orphans_reaches_one(tmp_path, capsys):
    job = JOB.format(name="tune-r", count=1, start=LATER)
    _, db, (b,) = _book(tmp_path, capsys, job, "--state", "requested", "--hold-hours", HOLD, now=TODAY)
    renamed = _inv(tmp_path, "renamed.yaml", "gpu-7")
    code, out = _json(capsys, "capacity", "re-place", "--inventory", str(renamed), "--db", db, *TODAY)
    assert code == 0 and [m["id"] for m in out["moved"]] == [b["id"]]  # type: ignore[index]
    # release --orphans: a requested booking on a node the inventory has not (before: nothing released)
    gone = _inv(tmp_path, "gone.yaml", "gpu-99", device="l40s")
    code, out = _json(capsys, "capacity", "release", "--orphans", "--inventory", str(gone), "--db", db)
    assert code == 0 and out["transitions"] == [  # type: ignore[index]
        {"id": b["id"], "before": "requested", "after": "released"}], out


def test_an_ended_window_is_left_alone_and_blocks_nothing(tmp_path, capsys):
    jobs = JOB.format(name="past-a", count=2, start="2026-02-01") + JOB.format(name="future-b", count=1,
                                                                                start="2027-01-10")
    _, db, booked = _book(tmp_path, capsys, jobs)
    ids = {b["job"]: b["id"] for b in booked}
    s = Store(db)
    before = {rid: sorted(s.holds_of(rid), key=repr) for rid in ids.values()}
    s.close()
    spare = "  - {id: gpu-08, site: s1, device: a40, devices: 1, ram: 128 GiB, pools: [training, serving]}\n"
    reequip = _inv(tmp_path, "reequip.yaml", "gpu-07", device="l40s", extra=spare)
    later = ("--now", "2026-06-01")  # past-a's window (2026-02-01, a few minutes) has ended, future-b's has not
    # check names only future-b; re-place takes that same set (before: exit 1, past-a cannot fit, nothing moved)
    req = tmp_path / "fut.yaml"
    req.write_text("version: 1\njobs:\n" + JOB.format(name="c", count=1, start="2027-02-01"))
    capsys.readouterr()
    assert run("capacity", "check", str(req), "--inventory", str(reequip), "--db", db, *later) == 2
    err = capsys.readouterr().err
    assert ids["future-b"] in err and ids["past-a"] not in err
    code, out = _json(capsys, "capacity", "re-place", "--inventory", str(reequip), "--db", db, *later)
    assert code == 0 and out["cannot"] == [], out  # type: ignore[index]
    assert [(m["id"], m["to"]) for m in out["moved"]] == [(ids["future-b"], ["gpu-08"])]  # type: ignore[index]
    s = Store(db)
    assert sorted(s.holds_of(ids["past-a"]), key=repr) == before[ids["past-a"]]  # its finished window untouched
    assert sorted(s.holds_of(ids["future-b"]), key=repr) == _renamed(before[ids["future-b"]], "gpu-07", "gpu-08")
    s.close()
    # named explicitly, the ended booking is still reachable (and here cannot fit: 2 A40s on no node)
    code, out = _json(capsys, "capacity", "re-place", ids["past-a"], "--inventory", str(reequip), "--db", db, *later)
    assert code == 1 and [c["id"] for c in out["cannot"]] == [ids["past-a"]]  # type: ignore[index]


def test_a_two_node_booking_keeps_the_node_never_orphaned(tmp_path, capsys):
    nodes = "".join(f"  - {{id: {n}, site: s1, device: a40, devices: {d}, pools: [training, serving]}}\n"
                    for n, d in (("gpu-05", 2), ("gpu-06", 2), ("gpu-08", 4)))
    inv = tmp_path / "inv.yaml"
    inv.write_text(INV.format(node="gpu-07", device="a40", extra=nodes))
    db = str(tmp_path / "svc.db")
    start, end = dt.datetime(2031, 5, 1), dt.datetime(2031, 5, 1, 3)
    items = (Item("node:gpu-07", 1, start, end), Item("node:gpu-08", 1, start, end))
    s = Store(db)
    (sub,) = s.submit([Placement("svc", "inference", start, end, "s1", ("gpu-07", "gpu-08"), 1, "a40", None, items)],
                      {"node:gpu-07": 2.0, "node:gpu-08": 4.0}, now=dt.datetime(2031, 1, 1))
    s.close()
    removed = tmp_path / "removed.yaml"  # gpu-07 taken out, no rename; gpu-08 as it was
    removed.write_text("sites: [{id: s1}]\nnodes:\n" + nodes + "storage: [{id: fs, site: s1, capacity: 100 TB}]\n")
    code, out = _json(capsys, "capacity", "re-place", "--inventory", str(removed), "--db", db,
                      "--now", "2031-01-01")
    assert code == 0, out
    (m,) = out["moved"]  # type: ignore[index]
    # gpu-08 was never orphaned: kept (before: both moved to the first free nodes, gpu-05 and gpu-06); gpu-07's
    # share goes to a free node, and the reason says no node was renamed and none was found busy
    assert "gpu-08" in m["to"] and len(m["to"]) == 2 and set(m["to"]) - {"gpu-08"} <= {"gpu-05", "gpu-06"}, m
    assert "gpu-08 kept" in m["how"] and "new name" not in m["how"] and "not free" not in m["how"], m
    s = Store(db)
    held = s.holds_of(sub.id)
    s.close()
    assert Item("node:gpu-08", 1, start, end) in held and not any(i.resource == "node:gpu-07" for i in held)
