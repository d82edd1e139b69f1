"""The reservation store: booking, conflicts, release; and concurrent bookings racing for scarce devices against
a real SQLite file and a real PostgreSQL server."""

from __future__ import annotations

import datetime as dt
import multiprocessing as mp
from typing import Any

import pytest

pytest.importorskip("sqlalchemy", reason="the reservation store needs SQLAlchemy 2 (the 'provider' extra)")

from llmsizer.provider.placement import Item, Placement  # noqa: E402
from llmsizer.provider.store import BookingConflict, Store, StoreError, db_url, utilisation  # noqa: E402

from .pg_databases import fresh_database

T0 = dt.datetime(2025, 10, 1)
CAP = {"node:n1": 2.0, "storage:fs": 10e12}
PROCESSES = 8
ATTEMPTS = 5
WINDOWS = 3  # attempt k books window k % WINDOWS: each window holds 2 devices


def placement(job: str, window: int = 0, devices: float = 1, storage: float = 0) -> Placement:
    start = T0 + dt.timedelta(days=10 * window)
    end = start + dt.timedelta(days=2)
    items = [Item("node:n1", devices, start, end)]
    if storage:
        items.append(Item("storage:fs", storage, start + dt.timedelta(days=1), end))
    return Placement(job, "training", start, end, "s1", ("n1",), int(devices), "h100-sxm", "fs", tuple(items))


def test_db_url():
    assert db_url(None) == "sqlite:///llmsizer-bookings.db"
    assert db_url("x.db") == "sqlite:///x.db"
    assert db_url("postgresql://u@h/db") == "postgresql+psycopg://u@h/db"


def test_book_conflict_release(tmp_path):
    s = Store(str(tmp_path / "b.db"))
    a = s.book(placement("a"), CAP)
    b = s.book(placement("b"), CAP, state="tentative")
    with pytest.raises(BookingConflict, match="job 'c' no longer fits: node:n1 would hold 3 of 2"):
        s.book(placement("c"), CAP)
    assert {x.job: x.state for x in s.bookings()} == {"a": "confirmed", "b": "held"}
    assert utilisation(s.bookings(), CAP, T0 + dt.timedelta(hours=1))["node:n1"] == 1.0
    s.release(b)
    assert s.book(placement("c"), CAP)
    s.set_state(a, "released")
    assert [x.job for x in s.bookings()] == ["c"]
    assert len(s.reservations()) == 3  # released ones stay on record
    with pytest.raises(ValueError, match="no reservation 'nope'"):
        s.release("nope")
    # storage held from day 1 counts over time too
    with pytest.raises(BookingConflict, match="storage:fs"):
        s.book(placement("d", storage=11e12), CAP)
    s.close()
    # the schema is created once; reopening the file keeps the bookings
    assert [x.job for x in Store(str(tmp_path / "b.db")).bookings()] == ["c"]


def test_book_all_is_all_or_none(tmp_path):
    s = Store(str(tmp_path / "b.db"))
    x = s.book(placement("x", window=0), CAP)  # 1 of the 2 devices in window 0
    n_before = len(s.reservations())
    # the first job fits (window 1), the second (2 devices in window 0) no longer does: nothing is written
    with pytest.raises(BookingConflict, match=r"job 'b' no longer fits: node:n1 would hold 3 of 2.*nothing of this "
                                              r"request was booked") as e:
        s.book_all([placement("a", window=1), placement("b", window=0, devices=2)], CAP)
    assert "\n" not in str(e.value)
    assert len(s.reservations()) == n_before == 1
    assert [b.id for b in s.bookings()] == [x]
    # jobs of one request count on each other: 1 + 1 fits beside nothing, but not beside x
    with pytest.raises(BookingConflict, match="job 'd' no longer fits"):
        s.book_all([placement("c", window=2), placement("d", window=2, devices=2)], CAP)
    assert len(s.reservations()) == 1
    ids = s.book_all([placement("a", window=1), placement("b", window=0)], CAP, state="tentative")
    assert len(ids) == 2 and {b.job: b.state for b in s.bookings()} == {"x": "confirmed", "a": "held",
                                                                         "b": "held"}
    assert s.book_all([], CAP) == []
    s.close()


def test_bad_store():
    with pytest.raises(StoreError):
        Store("sqlite:////nonexistent-folder/x/y.db")


# ------------------------------------------------------------------------------------------ concurrency

def _worker(url: str, wid: int, barrier: Any, out: Any) -> None:
    store = Store(url)
    results = []
    barrier.wait()
    for k in range(ATTEMPTS):
        job = f"w{wid}-{k}"
        try:
            rid = store.book(placement(job, window=k % WINDOWS), CAP)
            results.append(("ok", job, rid))
        except BookingConflict:
            results.append(("conflict", job, ""))
        except Exception as e:  # noqa: BLE001 - anything else is a failure of the test
            results.append(("error", job, f"{type(e).__name__}: {e}"))
    store.close()
    out.put(results)


def race(url: str) -> None:
    Store(url).close()  # create the schema before the race, as the CLI would on first use
    ctx = mp.get_context("spawn")
    barrier = ctx.Barrier(PROCESSES)
    out = ctx.Queue()
    procs = [ctx.Process(target=_worker, args=(url, i, barrier, out)) for i in range(PROCESSES)]
    for p in procs:
        p.start()
    results = [r for _ in procs for r in out.get(timeout=240)]
    for p in procs:
        p.join(timeout=60)
    errors = [r for r in results if r[0] == "error"]
    assert not errors, errors
    ok = [r for r in results if r[0] == "ok"]
    assert len(results) == PROCESSES * ATTEMPTS
    stored = Store(url).bookings()
    # capacity never exceeded: 2 devices per window, each booking takes 1
    per_window: dict[dt.datetime, int] = {}
    for b in stored:
        per_window[b.items[0].start] = per_window.get(b.items[0].start, 0) + 1
    assert all(n <= 2 for n in per_window.values()), per_window
    # nothing lost: every success is stored, nothing else is, and every window was filled
    assert sorted(r[2] for r in ok) == sorted(b.id for b in stored)
    assert len(ok) == 2 * WINDOWS


def test_concurrent_bookings_sqlite(tmp_path):
    race(str(tmp_path / "race.db"))


def test_concurrent_bookings_postgresql(pg_url):
    url = fresh_database(pg_url, "llmsizer_race")
    race(url)
