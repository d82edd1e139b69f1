"""The booking lifecycle (#14): a state machine whose every transition into a capacity-holding state re-checks
capacity in the same transaction; illegal transitions refused; holds that expire; idempotent bookings; the audit
log replays to the stored states. On real SQLite files and a real PostgreSQL server."""

from __future__ import annotations

import datetime as dt
import multiprocessing as mp
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("sqlalchemy", reason="the reservation store needs SQLAlchemy 2 (the 'provider' extra)")

from llmsizer.provider.placement import Item, Placement  # noqa: E402
from llmsizer.provider.store import (  # noqa: E402
    BookingConflict,
    IllegalTransition,
    PastWindow,
    Store,
    utilisation,
)

from .pg_databases import fresh_database
from .test_cli_capacity import LORA, NOW, run  # noqa: E402

T0 = dt.datetime(2025, 10, 1)
CAP = {"node:n1": 4.0}
NOW_T = dt.datetime(2025, 9, 1)

# the lifecycle of the issue, written out independently of store.TRANSITIONS
ALLOWED = {
    ("requested", "held"), ("requested", "confirmed"), ("requested", "released"), ("requested", "expired"),
    ("held", "confirmed"), ("held", "released"), ("held", "expired"),
    ("confirmed", "active"), ("confirmed", "released"),
    ("active", "finished"), ("active", "released"),
}
STATES = ["requested", "held", "confirmed", "active", "finished", "released", "expired"]
PATH_TO = {  # how to reach each state from a new booking
    "requested": ("requested", []), "held": ("held", []), "confirmed": ("confirmed", []),
    "active": ("confirmed", ["active"]), "finished": ("confirmed", ["active", "finished"]),
    "released": ("held", ["released"]), "expired": ("held", ["expired"]),
}


def placement(job: str, devices: float = 1, window: int = 0) -> Placement:
    start = T0 + dt.timedelta(days=10 * window)
    end = start + dt.timedelta(days=2)
    return Placement(job, "training", start, end, "s1", ("n1",), int(devices), "h100-sxm", None,
                     (Item("node:n1", devices, start, end),))


def held_at(store: Store, t: dt.datetime) -> float:
    return utilisation(store.bookings(), CAP, t)["node:n1"] * CAP["node:n1"]


def test_confirm_released_booking_cannot_over_book(tmp_path):
    """The issue's case on the store: 4 of 4 booked, one released, the freed device booked again; confirming the
    released booking must be refused and leave the node at 4 of 4."""
    s = Store(str(tmp_path / "b.db"))
    ids = [s.book(placement(f"j{k}"), CAP, now=NOW_T) for k in range(4)]
    s.release(ids[0], now=NOW_T)
    s.book(placement("j4"), CAP, now=NOW_T)
    with pytest.raises(IllegalTransition, match=r"is released; it cannot become confirmed") as e:
        s.transition(ids[0], "confirmed", CAP, now=NOW_T)
    assert "\n" not in str(e.value)
    assert held_at(s, T0) == 4.0
    assert {r["id"]: r["state"] for r in s.reservations()}[ids[0]] == "released"


def test_every_transition_into_holding_rechecks_capacity(tmp_path):
    s = Store(str(tmp_path / "b.db"))
    asked = s.book(placement("asked", devices=2), CAP, state="requested", now=NOW_T)  # holds nothing yet
    assert held_at(s, T0) == 0
    s.book(placement("big", devices=3), CAP, now=NOW_T)
    for to in ("held", "confirmed"):
        with pytest.raises(BookingConflict, match=r"job 'asked' no longer fits: node:n1 would hold 5 of 4"):
            s.transition(asked, to, CAP, now=NOW_T)
    assert held_at(s, T0) == 3.0
    with pytest.raises(ValueError, match="re-checks capacity"):
        s.transition(asked, "held", None, now=NOW_T)
    small = s.book(placement("small"), CAP, state="requested", now=NOW_T)
    s.transition(small, "held", CAP, now=NOW_T)
    s.transition(small, "confirmed", CAP, now=NOW_T)
    s.transition(small, "active", CAP, now=NOW_T)
    assert held_at(s, T0) == 4.0
    s.transition(small, "finished", now=NOW_T)
    assert held_at(s, T0) == 3.0


@pytest.mark.parametrize("before", STATES)
@pytest.mark.parametrize("after", STATES)
def test_transition_table(tmp_path, before, after):
    s = Store(str(tmp_path / "b.db"))
    first, steps = PATH_TO[before]
    rid = s.book(placement("j"), CAP, state=first, now=NOW_T)
    for st in steps:
        s.transition(rid, st, CAP, now=NOW_T)
    if (before, after) in ALLOWED:
        assert s.transition(rid, after, CAP, now=NOW_T) == before
        assert s.reservations()[0]["state"] == after
    else:
        with pytest.raises(IllegalTransition):
            s.transition(rid, after, CAP, now=NOW_T)
        assert s.reservations()[0]["state"] == before


def test_holds_expire(tmp_path):
    s = Store(str(tmp_path / "b.db"))
    rid = s.book(placement("j", devices=4), CAP, state="held", now=NOW_T, hold_for=dt.timedelta(hours=1))
    later = NOW_T + dt.timedelta(hours=2)
    with pytest.raises(IllegalTransition, match="hold lapsed .* now expired"):
        s.transition(rid, "confirmed", CAP, now=later)
    assert s.reservations()[0]["state"] == "expired" and held_at(s, T0) == 0
    # a lapsed hold is swept before the next booking, which may then take its devices
    rid2 = s.book(placement("k", devices=4), CAP, state="held", now=later, hold_for=dt.timedelta(hours=1))
    assert s.expire_due(later + dt.timedelta(minutes=30)) == []
    s.book(placement("m", devices=4), CAP, now=later + dt.timedelta(hours=1, minutes=1))
    assert {r["id"]: r["state"] for r in s.reservations()}[rid2] == "expired"


def test_idempotency_and_past_window(tmp_path):
    s = Store(str(tmp_path / "b.db"))
    a = s.submit([placement("j")], CAP, keys=["k1"], now=NOW_T)
    b = s.submit([placement("j")], CAP, keys=["k1"], now=NOW_T)
    assert b[0].id == a[0].id and b[0].existing and not a[0].existing
    assert len(s.reservations()) == 1
    s.release(a[0].id, now=NOW_T)
    c = s.submit([placement("j")], CAP, keys=["k1"], now=NOW_T)  # released: a new booking
    assert c[0].id != a[0].id and not c[0].existing
    with pytest.raises(PastWindow, match=r"job 'j': the window starts 2025-10-01 00:00, before now"):
        s.submit([placement("j")], CAP, not_before=T0 + dt.timedelta(hours=1))


# ------------------------------------------------------------------------------------------ audit log

def replay(audit: list[dict[str, Any]]) -> dict[str, str]:
    state: dict[str, str] = {}
    for e in audit:
        if e["action"].startswith("denied:") or e["reservation"] == "-":
            continue  # a refused operation (no role) or an inventory edit: changes no booking
        assert state.get(e["reservation"]) == e["before"], e  # each entry starts where the last one ended
        state[e["reservation"]] = e["after"]
    return state


def test_audit_log_replays_to_final_state(tmp_path):
    s = Store(str(tmp_path / "b.db"))
    ids = [s.book(placement(f"j{k}"), CAP, now=NOW_T, actor="alice") for k in range(4)]
    s.release(ids[0], now=NOW_T, actor="bob")
    h = s.book(placement("h"), CAP, state="held", now=NOW_T, actor="alice", hold_for=dt.timedelta(hours=1))
    with pytest.raises(IllegalTransition):
        s.transition(ids[0], "confirmed", CAP, now=NOW_T, actor="mallory")  # refused: not logged as a change
    s.transition(ids[1], "active", CAP, now=NOW_T, actor="bob")
    s.expire_due(NOW_T + dt.timedelta(hours=2), actor="sweeper")
    log = s.audit()
    assert replay(log) == {r["id"]: r["state"] for r in s.reservations()}
    assert [(e["actor"], e["action"], e["before"], e["after"]) for e in log if e["reservation"] in (ids[0], h)] == [
        ("alice", "book", None, "confirmed"), ("bob", "release", "confirmed", "released"),
        ("alice", "book", None, "held"), ("sweeper", "expire", "held", "expired")]
    assert all(e["at"] is not None for e in log)


def test_cli_lifecycle_and_audit(tmp_path, capsys, monkeypatch):
    """The issue's case end to end: 4 of 4 serving devices booked (4 requests), one released, the freed device
    booked again; `capacity confirm` of the released id is refused (exit 1) and the node stays at 100%."""
    inv = tmp_path / "inv.yaml"
    inv.write_text("sites: [{id: s1, public_addresses: 8, isolated_segments: 8}]\n"
                   "storage: [{id: fs, site: s1, capacity: 1 PB}]\n"
                   "nodes: [{id: serve-01, site: s1, device: a100-pcie-80gb, devices: 4, pools: [serving, serving-cluster]}]\n")
    db = str(tmp_path / "b.db")
    text = Path(LORA).read_text()
    ids = []
    for k in range(5):
        req = tmp_path / f"r{k}.yaml"
        req.write_text(text.replace("support-chat", f"support-chat-{k}"))
        code = run("capacity", "book", str(req), "--inventory", str(inv), "--db", db, "--job", f"support-chat-{k}",
                   "--actor", "alice", *NOW)
        out = capsys.readouterr()
        if k < 4:
            assert code == 0
            ids.append(out.out.split()[1].rstrip(":"))
        else:
            assert code == 1 and "not booked" in out.err  # 4 of 4 held
    assert run("capacity", "release", ids[0], "--db", db, "--actor", "bob") == 0
    assert run("capacity", "book", str(tmp_path / "r4.yaml"), "--inventory", str(inv), "--db", db, "--job",
               "support-chat-4", *NOW) == 0
    capsys.readouterr()
    assert run("capacity", "confirm", ids[0], "--inventory", str(inv), "--db", db) == 1
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"{ids[0]}: refused: ") and "released; it cannot become confirmed" in err
    assert "\n" not in err
    assert run("capacity", "confirm", ids[0], "--db", db) == 2  # holding states need the capacities
    assert run("capacity", "show", "--inventory", str(inv), "--db", db, "--at", "2025-10-01", "--audit") == 0
    out = capsys.readouterr().out
    assert "node:serve-01                    100%" in out
    assert f"bob          release   {ids[0]}  confirmed -> released" in out
    assert "audit log: 6 change(s)" in out
    assert run("capacity", "release", "nope", "--db", db) == 2


# ------------------------------------------------------------------------------------------ races

PROCESSES = 6


def _confirmer(url: str, rid: str, barrier: Any, out: Any) -> None:
    store = Store(url)
    barrier.wait()
    try:
        store.transition(rid, "confirmed", {"node:n1": 2.0}, now=NOW_T)
        out.put(("ok", rid))
    except BookingConflict:
        out.put(("conflict", rid))
    except Exception as e:  # noqa: BLE001
        out.put(("error", f"{type(e).__name__}: {e}"))
    store.close()


def confirm_race(url: str) -> None:
    """Six requested bookings of 1 device each on a 2-device node, confirmed at once from six processes:
    exactly two succeed, and the audit log replays."""
    s = Store(url)
    ids = [s.book(placement(f"r{k}"), {"node:n1": 2.0}, state="requested", now=NOW_T) for k in range(PROCESSES)]
    ctx = mp.get_context("spawn")
    barrier = ctx.Barrier(PROCESSES)
    out = ctx.Queue()
    procs = [ctx.Process(target=_confirmer, args=(url, rid, barrier, out)) for rid in ids]
    for p in procs:
        p.start()
    results = [out.get(timeout=240) for _ in procs]
    for p in procs:
        p.join(timeout=60)
    assert not [r for r in results if r[0] == "error"], results
    ok = sorted(r[1] for r in results if r[0] == "ok")
    assert len(ok) == 2
    assert sorted(b.id for b in s.bookings()) == ok
    assert replay(s.audit()) == {r["id"]: r["state"] for r in s.reservations()}


def test_confirm_race_sqlite(tmp_path):
    confirm_race(str(tmp_path / "race.db"))


def test_confirm_race_postgresql(pg_url):
    confirm_race(fresh_database(pg_url, "llmsizer_lifecycle"))


# ------------------------------------------------------------------------------------------ CLI: item 2 of #14

SMALL = ("sites: [{id: s1, public_addresses: 8, isolated_segments: 8}]\n"
         "storage: [{id: fs, site: s1, capacity: 1 PB}]\n"
         "nodes: [{id: serve-01, site: s1, device: a100-pcie-80gb, devices: 1, pools: [serving, serving-cluster]}]\n")


def test_cli_same_request_twice_returns_the_booking(tmp_path, capsys):
    inv = tmp_path / "inv.yaml"
    inv.write_text(SMALL)
    db = str(tmp_path / "b.db")
    args = ("capacity", "book", LORA, "--inventory", str(inv), "--db", db, "--job", "support-chat", *NOW)
    assert run(*args) == 0
    first = capsys.readouterr().out.split()[1].rstrip(":")
    # the same request again (a later --now changes nothing: same content, same job)
    assert run(*args[:-1], "2025-09-02") == 0
    out = capsys.readouterr().out
    assert out.startswith(f"already booked {first}: support-chat (confirmed)") and "nothing new" in out
    assert [r["id"] for r in Store(db).reservations()] == [first]


def test_cli_past_window_refused(tmp_path, capsys):
    inv = tmp_path / "inv.yaml"
    inv.write_text(SMALL)
    db = tmp_path / "b.db"
    # the example's service starts 2025-09-08; on 2025-10-01 that window has passed: invalid input, exit 2
    assert run("capacity", "book", LORA, "--inventory", str(inv), "--db", str(db), "--job", "support-chat",
               "--now", "2025-10-01") == 2
    assert not db.exists()
    # --earliest searches from now instead
    assert run("capacity", "book", LORA, "--inventory", str(inv), "--db", str(db), "--job", "support-chat",
               "--now", "2025-10-01", "--earliest", "--json") == 0
    import json
    assert json.loads(capsys.readouterr().out)["reservations"][0]["start"] == "2025-10-01T00:00:00"


def test_cli_check_creates_no_database(tmp_path, capsys):
    inv = tmp_path / "inv.yaml"
    inv.write_text(SMALL)
    db = tmp_path / "never.db"
    assert run("capacity", "check", LORA, "--inventory", str(inv), "--db", str(db),
               *NOW) in (0, 1)
    assert run("capacity", "show", "--inventory", str(inv), "--db", str(db)) == 0
    assert "0 reservation(s)" in capsys.readouterr().out
    assert not db.exists() and list(tmp_path.iterdir()) == [inv]


def test_cli_earliest_loser_of_a_race_tries_the_next_window(tmp_path, capsys, monkeypatch):
    """The first check sees a stale (empty) store: another process took the device since. With --earliest the
    conflict is not an exit 2: the request is checked again and booked in the next free window."""
    inv = tmp_path / "inv.yaml"
    inv.write_text(SMALL)
    db = str(tmp_path / "b.db")
    s = Store(db)
    # another booking holds the only device from 2025-09-08 for 30 days
    start = dt.datetime(2025, 9, 8)
    end = start + dt.timedelta(days=30)
    s.book(Placement("other", "inference", start, end, "s1", ("serve-01",), 1, "a100-pcie-80gb", None,
                     (Item("node:serve-01", 1, start, end),)), {"node:serve-01": 1.0}, now=NOW_T)
    real = Store.bookings
    calls = []

    def stale(self, include_tentative=True):
        calls.append(1)
        return [] if len(calls) == 1 else real(self, include_tentative=include_tentative)
    monkeypatch.setattr(Store, "bookings", stale)
    assert run("capacity", "book", LORA, "--inventory", str(inv), "--db", db, "--job", "support-chat",
               "--earliest", "--json", *NOW) == 0
    import json
    out = capsys.readouterr()
    assert "lost a race" in out.err and "trying the next window" in out.err
    assert json.loads(out.out)["reservations"][0]["start"] == "2025-10-08T00:00:00"


def test_schema_1_file_is_read_then_migrated(tmp_path):
    """A store written before the lifecycle (states tentative/confirmed/released, no idem_key/hold_until/audit):
    read-only opens count its holds without changing the file; the first write migrates it (tentative -> held)."""
    import sqlite3
    path = tmp_path / "old.db"
    con = sqlite3.connect(path)
    con.executescript("""
        CREATE TABLE meta (key VARCHAR(64) PRIMARY KEY, value VARCHAR(200));
        INSERT INTO meta VALUES ('schema_version', '1');
        CREATE TABLE reservations (id VARCHAR(64) PRIMARY KEY, job VARCHAR(200) NOT NULL, kind VARCHAR(20) NOT NULL,
            state VARCHAR(20) NOT NULL, start DATETIME NOT NULL, "end" DATETIME NOT NULL, created DATETIME NOT NULL,
            note TEXT);
        CREATE TABLE holds (id INTEGER PRIMARY KEY AUTOINCREMENT, reservation VARCHAR(64) NOT NULL
            REFERENCES reservations(id), resource VARCHAR(200) NOT NULL, amount FLOAT NOT NULL,
            start DATETIME NOT NULL, "end" DATETIME NOT NULL);
        CREATE TABLE resource_locks (resource VARCHAR(200) PRIMARY KEY);
        INSERT INTO reservations VALUES ('old1', 'j', 'training', 'tentative', '2025-10-01 00:00:00.000000',
            '2025-10-03 00:00:00.000000', '2025-09-01 00:00:00.000000', '');
        INSERT INTO holds (reservation, resource, amount, start, "end") VALUES ('old1', 'node:n1', 4,
            '2025-10-01 00:00:00.000000', '2025-10-03 00:00:00.000000');
    """)
    con.commit()
    con.close()
    before = path.read_bytes()
    ro = Store(str(path), readonly=True)
    assert [(b.id, b.state) for b in ro.bookings()] == [("old1", "held")] and ro.audit() == []
    ro.close()
    assert path.read_bytes() == before
    s = Store(str(path))
    with pytest.raises(BookingConflict, match="would hold 5 of 4"):
        s.book(placement("new"), CAP, now=NOW_T)
    assert s.reservations()[0]["state"] == "held"
    s.transition("old1", "confirmed", CAP, now=NOW_T)
    assert [(e["actor"], e["before"], e["after"]) for e in s.audit()] == [("migration", None, "held"),
                                                                          (s.audit()[1]["actor"], "held", "confirmed")]
    assert replay(s.audit()) == {"old1": "confirmed"}


def test_check_on_an_empty_postgresql_database(pg_url, capsys):
    import sqlalchemy as sa

    from llmsizer.provider.store import db_url
    url = fresh_database(pg_url, "llmsizer_empty")
    from .test_cli_capacity import INV, PRE
    assert run("capacity", "check", PRE, "--inventory", INV, "--db", url, *NOW) == 0
    eng = sa.create_engine(db_url(url))
    assert not sa.inspect(eng).has_table("reservations")  # check created nothing
    eng.dispose()


# ------------------------------------------------------------------------------------------ --earliest race (#14)

RACE_REQ = """\
version: 1
title: race {k}
team: chat team
jobs:
  - name: chat
    kind: inference
    model: {{name: llama-3.1-8b}}
    precision: bf16
    engine: vllm
    traffic: {{concurrency: {{typical: 4}}, context: {{typical: 2k}}}}
    service: {{duration: 10 days}}
    resources: {{device: a100-pcie-80gb, count: 1}}
    start: 2025-10-01
"""


def test_cli_earliest_racers_all_book_disjoint_windows(tmp_path):
    """Six `capacity book --earliest` processes, six different requests for the one device, started at once
    against one SQLite file: every loser of a race re-checks and books the next window, so all exit 0 and no
    two bookings overlap (before the fix, a loser exited 2)."""
    import subprocess
    import sys
    inv = tmp_path / "inv.yaml"
    inv.write_text(SMALL)
    db = str(tmp_path / "race.db")
    code = "import sys; from llmsizer.cli.main import main; sys.exit(main())"
    src = str(Path(__file__).resolve().parents[2] / "src")
    procs = []
    for k in range(PROCESSES):
        req = tmp_path / f"req{k}.yaml"
        req.write_text(RACE_REQ.format(k=k))
        procs.append(subprocess.Popen(
            [sys.executable, "-c", code, "capacity", "book", str(req), "--inventory", str(inv), "--db", db,
             "--earliest", "--now", "2025-09-01"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
            env={**__import__("os").environ, "PYTHONPATH": src}))
    results = [(p.wait(timeout=300), p.stdout.read(), p.stderr.read()) for p in procs]  # type: ignore[union-attr]
    assert [r[0] for r in results] == [0] * PROCESSES, results
    windows = sorted((b.items[0].start, b.items[0].end) for b in Store(db).bookings())
    assert len(windows) == PROCESSES
    assert all(a[1] <= b[0] for a, b in zip(windows, windows[1:], strict=False))  # disjoint: never 2 of 1


def test_sqlite_check_without_the_provider_extra(tmp_path):
    """SQLAlchemy hidden (an import of it fails, as when the `provider` extra is not installed): `check` and `show`
    read a SQLite store with the standard library, leave the file byte for byte unchanged, and `book` says in one
    line what to install (exit 2)."""
    import hashlib
    import os
    import subprocess
    import sys
    inv = tmp_path / "inv.yaml"
    inv.write_text(SMALL)
    db = tmp_path / "b.db"
    req = tmp_path / "req.yaml"
    req.write_text(RACE_REQ.format(k=0))
    start = dt.datetime(2025, 10, 1)
    Store(str(db)).book(Placement("other", "inference", start, start + dt.timedelta(days=30), "s1", ("serve-01",), 1,
                                  "a100-pcie-80gb", None, (Item("node:serve-01", 1, start,
                                                                start + dt.timedelta(days=30)),)),
                        {"node:serve-01": 1.0}, now=NOW_T)
    digest = hashlib.sha256(db.read_bytes()).hexdigest()
    hide = tmp_path / "hide" / "sqlalchemy"
    hide.mkdir(parents=True)
    (hide / "__init__.py").write_text("raise ImportError('sqlalchemy is hidden by the test')\n")
    src = str(Path(__file__).resolve().parents[2] / "src")
    env = {**os.environ, "PYTHONPATH": f"{hide.parent}{os.pathsep}{src}"}
    code = "import sys; from llmsizer.cli.main import main; sys.exit(main())"

    def cli(*argv: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-c", code, *argv], capture_output=True, text=True, env=env,
                              timeout=120)
    probe = subprocess.run([sys.executable, "-c", "import sqlalchemy"], capture_output=True, text=True, env=env)
    assert probe.returncode == 1 and "hidden by the test" in probe.stderr  # the extra is really absent
    r = cli("capacity", "check", str(req), "--inventory", str(inv), "--db", str(db), "--now", "2025-09-01")
    assert r.returncode == 1, r.stderr  # answered: the device is booked in the window
    assert "DOES NOT FIT" in r.stdout and "[busy]" in r.stdout and "start later: from 2025-10-31" in r.stdout
    r = cli("capacity", "show", "--inventory", str(inv), "--db", str(db), "--audit")
    assert r.returncode == 0 and "1 reservation(s)" in r.stdout and "other" in r.stdout, r.stderr
    assert "audit log: 1 change(s)" in r.stdout
    r = cli("capacity", "book", str(req), "--inventory", str(inv), "--db", str(db), "--earliest", "--now",
            "2025-09-01")
    assert r.returncode == 2 and r.stderr.strip().count("\n") == 0 and "llmsizer[provider]" in r.stderr, r.stderr
    assert "Traceback" not in r.stderr
    assert hashlib.sha256(db.read_bytes()).hexdigest() == digest
