"""A service booking records the maintenance windows its request agreed to (schema 5), so a window added over it
later is told from one it agreed to: `show`, the console and hold/confirm/activate list and refuse exactly the
windows the booking's job did not agree to (provider/disagree.py), by placement's own acceptance rule
(windows.Agreement). A store from before schema 5 lists its service bookings with the agreement unknown, not
refused. On real SQLite files and a real PostgreSQL server (the suite's, tests/provider/conftest.py)."""

from __future__ import annotations

import datetime as dt
import json
import sqlite3
from pathlib import Path

import pytest

pytest.importorskip("sqlalchemy", reason="the reservation store needs SQLAlchemy 2 (the 'provider' extra)")

from llmsizer.provider.disagree import in_maintenance, maintenance_refusal  # noqa: E402
from llmsizer.provider.placement import Booking, Item, JobNeed, NoFit, try_window  # noqa: E402
from llmsizer.request.windows import Agreement  # noqa: E402

from .conftest import inv  # noqa: E402
from .pg_databases import fresh_database  # noqa: E402
from .test_cli_capacity import run  # noqa: E402

INVENTORY = """\
sites: [{id: s1}]
storage: [{id: fs, site: s1, capacity: 10 TB}]
nodes:
  - {id: gpunode-1, site: s1, device: a40, devices: 1, pools: [serving]}
"""
# 2027-01-10 is a Sunday (datetime says so: asserted below); the service agrees to Sundays 02:00-04:00 UTC
AGREED = "maintenance: [{start: 2027-01-10T02:00, end: 2027-01-10T03:00, nodes: [gpunode-1], note: agreed}]\n"
LATER = ("  - {start: 2027-01-11T10:00, end: 2027-01-11T11:00, nodes: [gpunode-1], note: added-later}\n")
REQUEST = """\
version: 1
title: chat
jobs:
  - name: chat
    kind: inference
    model: {name: qwen2.5-0.5b}
    precision: bf16
    engine: vllm
    traffic: {concurrency: {typical: 2}, context: {typical: 2k}}
    service: {duration: 3 days, maintenance_windows: ["Sundays 02:00-04:00 UTC"]}
    resources: {device: a40, count: 1, nodes: 1}
    start: 2027-01-10
"""
T = dt.datetime(2027, 1, 10)
SUNDAYS = Agreement(True, ("Sundays 02:00-04:00 UTC",))


def _with_later() -> str:
    return INVENTORY + "maintenance:\n  - {start: 2027-01-10T02:00, end: 2027-01-10T03:00, nodes: [gpunode-1], " \
        "note: agreed}\n" + LATER


def _svc(agreement: Agreement | None) -> Booking:
    return Booking("s", "chat", "inference", (Item("node:gpunode-1", 1, T, T + dt.timedelta(days=3)),), "confirmed",
                   "a40", agreement)


def test_the_rule_lists_exactly_the_windows_not_agreed_to():
    assert T.weekday() == 6  # a Sunday
    i = inv(_with_later())
    # agreed to Sundays 02:00-04:00: only the Monday window is listed, refused, the agreement named
    (f,) = in_maintenance(i, [_svc(SUNDAYS)])
    assert (f.window.note, f.refused) == ("added-later", True)
    assert f.to_dict()["agreed_windows"] == ["Sundays 02:00-04:00 UTC"]
    why = maintenance_refusal(i, [_svc(SUNDAYS)], "s")
    assert why is not None and "2027-01-11 10:00-2027-01-11 11:00 added-later" in why
    assert "outside the maintenance windows its request agreed to (Sundays 02:00-04:00 UTC)" in why
    assert "2027-01-10 02:00" not in why  # the agreed window is not named
    # agreed to none (a service stating no window): both refused; to any: none listed
    assert [f.window.note for f in in_maintenance(i, [_svc(Agreement())])] == ["agreed", "added-later"]
    assert in_maintenance(i, [_svc(Agreement(True))]) == []
    # not recorded (booked before schema 5): both listed, not refused, stated unknown
    found = in_maintenance(i, [_svc(None)])
    assert [(f.refused, f.to_dict()["agreed_windows"]) for f in found] == [(False, None)] * 2
    assert "unknown" in found[0].why() and maintenance_refusal(i, [_svc(None)], "s") is None
    # a training booking recorded before schema 5 agreed to none (placement never accepts a window for training)
    train = Booking("t", "lora", "training", _svc(None).items, "confirmed")
    assert [f.refused for f in in_maintenance(i, [train])] == [True, True]


@pytest.mark.parametrize("window", [
    ("2027-01-10T02:00", "2027-01-10T04:00"),  # the whole agreed occurrence
    ("2027-01-10T01:30", "2027-01-10T02:30"),  # starts before it
    ("2027-01-10T03:00", "2027-01-10T05:00"),  # ends after it
    ("2027-01-11T02:00", "2027-01-11T03:00"),  # a Monday
])
def test_the_rule_is_placements(window):
    """A window is listed over a booking exactly when placement would not have placed the job across it."""
    w = f"maintenance: [{{start: {window[0]}, end: {window[1]}, nodes: [gpunode-1]}}]\n"
    i = inv(INVENTORY + w)
    need = JobNeed("chat", "inference", "a40", 1, seconds=3 * 86400, start=T, accepts_maintenance=True,
                   maintenance_windows=SUNDAYS.windows)
    try:
        p = try_window(need, i, [], T)
        placed = True
        assert p.agreement == SUNDAYS  # what the store records
    except NoFit as e:
        placed = False
        assert e.binding == "maintenance"
    assert placed == (in_maintenance(i, [_svc(need.agreement)]) == [])


def _db(kind: str, tmp_path: Path, request: pytest.FixtureRequest) -> str:
    if kind == "sqlite":
        return str(tmp_path / "b.db")
    return fresh_database(request.getfixturevalue("pg_url"), "llmsizer_svcwin")


def _sql(kind: str, db: str, *statements: str) -> list[tuple]:
    """Run ``statements`` on the store directly (SQLite file or PostgreSQL database), committed; the last one's
    rows."""
    rows: list[tuple] = []
    if kind == "sqlite":
        con = sqlite3.connect(db)
        for s in statements:
            rows = list(con.execute(s).fetchall())
        con.commit()
        con.close()
        return rows
    import sqlalchemy as sa

    from llmsizer.provider.store import db_url
    eng = sa.create_engine(db_url(db))
    with eng.begin() as c:
        for s in statements:
            r = c.exec_driver_sql(s)
            rows = [tuple(x) for x in r.fetchall()] if r.returns_rows else []
    eng.dispose()
    return rows


def _book(kind: str, tmp_path: Path, db: str, capsys: pytest.CaptureFixture[str]) -> tuple[dict, Path, Path]:
    agreed, later = tmp_path / "agreed.yaml", tmp_path / "later.yaml"
    agreed.write_text(INVENTORY + AGREED)
    later.write_text(_with_later())
    req = tmp_path / "req.yaml"
    req.write_text(REQUEST)
    assert run("capacity", "book", str(req), "--inventory", str(agreed), "--db", db, "--json", "--now",
               "2027-01-01") == 0
    (b,) = json.loads(capsys.readouterr().out)["reservations"]
    assert json.loads(_sql(kind, db, "SELECT maintenance_agreed FROM reservations")[0][0]) == {
        "accepts": True, "windows": ["Sundays 02:00-04:00 UTC"]}  # recorded with the booking
    # booked across the agreed window (its start is in the window's run, on the window's node)
    assert (b["nodes"], b["start"], b["state"]) == (["gpunode-1"], "2027-01-10T00:00:00", "confirmed")
    return b, agreed, later


@pytest.mark.parametrize("kind", ["sqlite", "postgresql"])
def test_agreed_window_activates_a_window_added_later_refuses(kind, tmp_path, capsys, request):
    db = _db(kind, tmp_path, request)
    b, agreed, later = _book(kind, tmp_path, db, capsys)
    # the agreed window: nothing to list
    assert run("capacity", "show", "--inventory", str(agreed), "--db", db, "--json") == 0
    out = capsys.readouterr()
    assert "maintenance" not in json.loads(out.out) and "maintenance window" not in out.err
    # a window added later outside the agreement: listed (the agreed one is not), and activate refuses it
    assert run("capacity", "show", "--inventory", str(later), "--db", db, "--json") == 0
    out = capsys.readouterr()
    (m,) = json.loads(out.out)["maintenance"]
    assert (m["reservation"], m["start"], m["refused"], m["agreed_windows"]) == (
        b["id"], "2027-01-11T10:00:00", True, ["Sundays 02:00-04:00 UTC"])
    assert "2027-01-10 02:00" not in out.err and "2027-01-11 10:00-2027-01-11 11:00 added-later" in out.err
    assert run("capacity", "activate", b["id"], "--inventory", str(later), "--db", db, "--json") == 1
    (r,) = json.loads(capsys.readouterr().out)["transitions"]
    assert r["id"] == b["id"] and "maintenance window 2027-01-11 10:00-2027-01-11 11:00 added-later" in r["refused"]
    assert "Sundays 02:00-04:00 UTC" in r["refused"]
    # on the inventory with only the window it agreed to, it activates
    assert run("capacity", "activate", b["id"], "--inventory", str(agreed), "--db", db) == 0
    assert f"{b['id']}: confirmed -> active" in capsys.readouterr().out


@pytest.mark.parametrize("kind", ["sqlite", "postgresql"])
def test_an_old_schema_stores_service_bookings_are_listed_as_unknown(kind, tmp_path, capsys, request):
    """A store from before schema 5 (no maintenance_agreed column): read as it is, its service booking across a
    window is listed with the agreement unknown and not refused; the next change migrates it (the column NULL, still
    unknown)."""
    db = _db(kind, tmp_path, request)
    b, agreed, later = _book(kind, tmp_path, db, capsys)
    _sql(kind, db, "ALTER TABLE reservations DROP COLUMN maintenance_agreed",
         "UPDATE meta SET value = '4' WHERE key = 'schema_version'")
    assert run("capacity", "show", "--inventory", str(later), "--db", db, "--json") == 0
    out = capsys.readouterr()
    found = json.loads(out.out)["maintenance"]
    assert [(m["reservation"], m["note"], m["refused"], m["agreed_windows"]) for m in found] == [
        (b["id"], "agreed", False, None), (b["id"], "added-later", False, None)]
    assert "whether it agreed to this one is unknown (listed, not refused)" in out.err
    assert run("capacity", "activate", b["id"], "--inventory", str(later), "--db", db) == 0  # migrates, unknown
    assert f"{b['id']}: confirmed -> active" in capsys.readouterr().out
    assert _sql(kind, db, "SELECT value FROM meta WHERE key = 'schema_version'") == [("6",)]
    assert _sql(kind, db, "SELECT maintenance_agreed FROM reservations") == [(None,)]
    assert run("capacity", "show", "--inventory", str(later), "--db", db, "--json") == 0
    assert [m["refused"] for m in json.loads(capsys.readouterr().out)["maintenance"]] == [False, False]


@pytest.mark.parametrize(("agreement", "moved"), [(SUNDAYS, True), (None, False)])
def test_re_place_moves_a_service_as_it_agreed(agreement, moved):
    """`capacity re-place` places the stored job again by placement's rule: with the agreement recorded, a service
    moves onto the renamed node across the window it agreed to; a booking from before schema 5 moves as a job that
    accepts no maintenance, and is kept where it is (binding `maintenance`)."""
    from llmsizer.provider.replace import plan_moves
    i = inv(INVENTORY.replace("gpunode-1", "gpunode-01") + AGREED.replace("gpunode-1", "gpunode-01"))
    moves, stuck = plan_moves(i, [_svc(agreement)], ["s"], {"a40": "gpu"})
    assert [m.placement.nodes for m in moves] == ([("gpunode-01",)] if moved else [])
    assert [s.binding for s in stuck] == ([] if moved else ["maintenance"])


@pytest.mark.parametrize("key, text", [("maintenance_windows", "Sundays 02:00-04:00 CET"),
                                       ("interruptible", "outside office hours")])
def test_an_unreadable_agreed_window_is_bad_input_on_the_cli_and_over_http(key, text, tmp_path, capsys):
    """provider9 #2: a window text parse_window cannot read is refused (exit 2; HTTP 4xx), one line naming the file,
    the line of the field and the field; before, the service was placed as agreeing to every provider window."""
    inventory = tmp_path / "inv.yaml"
    inventory.write_text(INVENTORY + AGREED)
    body = REQUEST.replace('maintenance_windows: ["Sundays 02:00-04:00 UTC"]', f'{key}: ["{text}"]')
    assert text in body
    req = tmp_path / "req.yaml"
    req.write_text(body)
    line = 1 + next(k for k, s in enumerate(body.splitlines()) if text in s)
    from llmsizer.cli.main import main
    assert main(["capacity", "check", str(req), "--inventory", str(inventory), "--no-db", "--now", "2027-01-01"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1, err
    assert err.startswith(f"llmsizer: error: {req}:{line}: job 'chat' (inference): service.{key}: {text!r} is not a window "
                          "llmsizer can read"), err
    # review12 D2: the request reader refuses it, so request check and plan give capacity's line (one answer)
    for argv in (["request", "check", str(req)], ["plan", str(req), "-o", str(tmp_path / "p.html")]):
        assert main(argv) == 2, argv
        assert capsys.readouterr().err.strip() == err, argv
    pytest.importorskip("fastapi")
    from fastapi.testclient import TestClient

    from llmsizer.web.api_capacity import ProviderConfig
    from llmsizer.web.app import create_app
    with TestClient(create_app(provider=ProviderConfig(inventory=str(inventory), db=str(tmp_path / "b.db")))) as c:
        r = c.post("/api/v1/capacity/check", json={"request": body})
    assert r.status_code == 400, r.text
    assert f":{line}: job 'chat' (inference): service.{key}: {text!r} is not a window llmsizer can read" in r.text


def test_a_day_alone_is_that_whole_day() -> None:
    """'Sat' / 'Sundays' / 'weekends' with no hours: each of those days whole, 00:00-24:00 UTC (tests/plan's requests
    say `maintenance_windows: [Sun]`; the request reader refused them as unreadable once it checked every window)."""
    import datetime as dt

    from llmsizer.request.windows import parse_window
    sat = parse_window("Sat")
    assert sat is not None
    assert sat(dt.datetime(2026, 12, 5, 0, 0), dt.datetime(2026, 12, 6, 0, 0))        # 2026-12-05 is a Saturday
    assert not sat(dt.datetime(2026, 12, 5, 23, 0), dt.datetime(2026, 12, 6, 1, 0))   # into Sunday
    assert not sat(dt.datetime(2026, 12, 4, 12, 0), dt.datetime(2026, 12, 4, 13, 0))  # a Friday
    weekends = parse_window("weekends")
    assert weekends is not None and weekends(dt.datetime(2026, 12, 6, 10), dt.datetime(2026, 12, 6, 11))
    assert parse_window("Sundays") is not None and parse_window("lunchtime") is None
    # consecutive days join (review14: Saturday 22:00 - Sunday 02:00 fell outside 'weekends'); 'daily' is any time
    assert weekends(dt.datetime(2026, 12, 5, 22), dt.datetime(2026, 12, 6, 2))
    assert not weekends(dt.datetime(2026, 12, 6, 22), dt.datetime(2026, 12, 7, 2))     # into Monday
    daily = parse_window("daily")
    assert daily is not None and daily(dt.datetime(2026, 12, 1, 22), dt.datetime(2026, 12, 20, 2))
