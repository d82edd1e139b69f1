"""Property-based test of the booking lifecycle (hypothesis stateful testing) on a real SQLite file: any sequence
of book (with or without an idempotency key) / hold / confirm / activate / finish / release / expire (and time
passing, so holds lapse) keeps every node within capacity at every instant; the store agrees with an independent
model of the state table (a key with a live booking gets that booking back, never a second one), and the audit log
replays to the stored states."""

from __future__ import annotations

import datetime as dt
import shutil
import sqlite3
import tempfile
from pathlib import Path

import pytest

pytest.importorskip("sqlalchemy", reason="the reservation store needs SQLAlchemy 2 (the 'provider' extra)")
pytest.importorskip("hypothesis")

from hypothesis import HealthCheck, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402
from hypothesis.stateful import Bundle, RuleBasedStateMachine, invariant, rule  # noqa: E402

from llmsizer.provider.placement import Item, Placement  # noqa: E402
from llmsizer.provider.store import BookingConflict, IllegalTransition, Store  # noqa: E402

from .test_lifecycle import ALLOWED  # noqa: E402

CAP = {"node:a": 3.0, "node:b": 2.0}
T0 = dt.datetime(2025, 10, 1)
HOLD = dt.timedelta(hours=2)
HOLDING = {"held", "confirmed", "active"}
LIVE = {"requested", *HOLDING}
STATES = ["requested", "held", "confirmed", "active", "finished", "released", "expired"]

item_st = st.tuples(st.sampled_from(sorted(CAP)), st.integers(1, 3), st.integers(0, 4), st.integers(1, 3))


def fits(items: list[tuple[str, float, dt.datetime, dt.datetime]]) -> bool:
    """Independent truth: at every moment something starts, the amounts held on each resource sum to at most
    its capacity."""
    for res, cap in CAP.items():
        mine = [i for i in items if i[0] == res]
        for _, _, t, _ in mine:
            if sum(a for r, a, s, e in mine if s <= t < e) > cap + 1e-9:
                return False
    return True


class Lifecycle(RuleBasedStateMachine):
    ids = Bundle("ids")

    def __init__(self) -> None:
        super().__init__()
        self.dir = tempfile.mkdtemp(prefix="llmsizer-prop-")
        self.path = str(Path(self.dir) / "b.db")
        self.store = Store(self.path)
        self.now = dt.datetime(2025, 9, 1)
        self.state: dict[str, str] = {}
        self.until: dict[str, dt.datetime] = {}
        self.items: dict[str, list[tuple[str, float, dt.datetime, dt.datetime]]] = {}
        self.keys: dict[str, str | None] = {}

    def teardown(self) -> None:
        self.store.close()
        shutil.rmtree(self.dir, ignore_errors=True)

    def _holding(self, exclude: str | None = None) -> list[tuple[str, float, dt.datetime, dt.datetime]]:
        return [i for rid, s in self.state.items() if s in HOLDING and rid != exclude for i in self.items[rid]]

    def _sweep(self) -> None:
        for rid, s in self.state.items():
            if s in ("requested", "held") and self.until[rid] <= self.now:
                self.state[rid] = "expired"

    @rule(target=ids, items=st.lists(item_st, min_size=1, max_size=2, unique_by=lambda x: x[0]),
          state=st.sampled_from(["requested", "held", "confirmed"]), key=st.sampled_from([None, "k1", "k2"]))
    def book(self, items, state, key):
        its = [(r, float(a), T0 + dt.timedelta(days=d), T0 + dt.timedelta(days=d + n)) for r, a, d, n in items]
        p = Placement("j", "training", min(i[2] for i in its), max(i[3] for i in its), "s", ("n",), 1, "x", None,
                      tuple(Item(*i) for i in its))
        self._sweep()  # every booking expires lapsed holds first
        # idempotency: a key with a live booking (requested, held, confirmed, active) gets that booking back
        live = [rid for rid, k in self.keys.items() if key and k == key and self.state[rid] in LIVE]
        assert len(live) <= 1  # never two live bookings of one key
        expect = bool(live) or state not in HOLDING or fits(self._holding() + its)
        try:
            (got,) = self.store.submit([p], CAP, state=state, keys=[key], now=self.now, hold_for=HOLD)
        except BookingConflict:
            assert not expect
            return "none"
        assert expect
        if live:
            assert got.existing and got.id == live[0] and got.state == self.state[live[0]]
            return got.id
        assert not got.existing and got.id not in self.state
        rid = got.id
        self.state[rid], self.until[rid], self.items[rid], self.keys[rid] = state, self.now + HOLD, its, key
        return rid

    @rule(rid=ids, to=st.sampled_from(STATES))
    def transition(self, rid, to):
        if rid == "none":
            return
        before = self.state[rid]
        lapsed = before in ("requested", "held") and self.until[rid] <= self.now and to != "released"
        try:
            self.store.transition(rid, to, CAP, now=self.now)
            ok = True
        except IllegalTransition:
            ok = False
            assert (before, to) not in ALLOWED or (lapsed and to != "expired")
            if lapsed and (before, to) in ALLOWED:
                self.state[rid] = "expired"
            return
        except BookingConflict:
            assert (before, to) in ALLOWED and to in HOLDING and not lapsed
            assert not fits(self._holding(exclude=rid) + self.items[rid])
            return
        assert ok and (before, to) in ALLOWED
        if to in HOLDING:
            assert not lapsed and fits(self._holding(exclude=rid) + self.items[rid])
        self.state[rid] = to

    @rule(hours=st.sampled_from([1, 3]))
    def time_passes(self, hours):
        self.now += dt.timedelta(hours=hours)

    @rule()
    def expire_due(self):
        self.store.expire_due(self.now)
        self._sweep()

    @invariant()
    def within_capacity_at_every_instant(self):
        con = sqlite3.connect(self.path)  # read the file directly, not through the store
        try:
            rows = con.execute("SELECT h.resource, h.amount, h.start, h.\"end\" FROM holds h JOIN reservations r "
                               "ON r.id = h.reservation WHERE r.state IN ('held', 'confirmed', 'active')").fetchall()
            states = dict(con.execute("SELECT id, state FROM reservations").fetchall())
            audit = con.execute("SELECT reservation, before, after FROM audit ORDER BY seq").fetchall()
        finally:
            con.close()
        items = [(r, a, dt.datetime.fromisoformat(s), dt.datetime.fromisoformat(e)) for r, a, s, e in rows]
        assert fits(items)
        assert states == self.state
        replay: dict[str, str] = {}
        for rid, before, after in audit:
            assert replay.get(rid) == before
            replay[rid] = after
        assert replay == states


Lifecycle.TestCase.settings = settings(max_examples=60, stateful_step_count=25, deadline=None,
                                       suppress_health_check=[HealthCheck.too_slow])
TestLifecycle = Lifecycle.TestCase
