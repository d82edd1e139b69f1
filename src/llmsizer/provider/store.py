"""Reservations over time, in SQLite (default: a file, nothing to install) or PostgreSQL (``postgresql://...``,
driver psycopg 3), through SQLAlchemy 2 Core (the ``provider`` extra; imported lazily). The schema is created on
first use.

Tables: ``reservations`` (id, job, kind, state tentative/confirmed/released, start, end, created, note),
``holds`` (reservation, resource, amount, start, end: the placement's items), ``resource_locks`` (one row per
resource, locked while a booking re-checks capacity), ``meta`` (schema version).

:meth:`Store.book` and :meth:`Store.book_all` (every job of one request, all or none) are atomic: inside one transaction it takes a lock (SQLite: ``BEGIN IMMEDIATE``, a write lock
on the whole file; PostgreSQL: ``SELECT ... FOR UPDATE`` on the lock rows of every resource it holds, in a fixed
order), re-reads the holds of those resources, re-checks capacity over time and only then inserts. Two bookings
racing for the same devices cannot both succeed; the loser gets :class:`BookingConflict`.
"""

from __future__ import annotations

import datetime as _dt
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ..errors import InputError, LlmsizerError
from .placement import Booking, Item, Placement, overflow

SCHEMA_VERSION = 1
STATES = ("tentative", "confirmed", "released")


class StoreError(LlmsizerError, RuntimeError):
    """The reservation store cannot be opened or used."""


class BookingConflict(InputError):
    """A booking no longer fits: capacity was taken since the check."""


def db_url(db: str | None) -> str:
    """``None`` -> ``sqlite:///llmsizer-bookings.db``; a path -> a SQLite file; a URL is kept
    (``postgresql://`` uses psycopg 3)."""
    if not db:
        db = "llmsizer-bookings.db"
    if "://" not in db:
        return f"sqlite:///{Path(db).expanduser()}"
    if db.startswith("postgresql://") or db.startswith("postgres://"):
        return "postgresql+psycopg://" + db.split("://", 1)[1]
    return db


class Store:
    def __init__(self, db: str | None = None) -> None:
        try:
            import sqlalchemy as sa
        except ImportError:
            raise StoreError("the reservation store needs SQLAlchemy 2: pip install 'llmsizer[provider]'") from None
        self.sa = sa
        self.url = db_url(db)
        self.sqlite = self.url.startswith("sqlite")
        try:
            if self.sqlite:
                self.engine = sa.create_engine(self.url, connect_args={"timeout": 60})

                @sa.event.listens_for(self.engine, "connect")
                def _no_autobegin(dbapi_conn: Any, _rec: Any) -> None:
                    dbapi_conn.isolation_level = None  # let the "begin" hook below issue BEGIN itself

                @sa.event.listens_for(self.engine, "begin")
                def _immediate(conn: Any) -> None:
                    conn.exec_driver_sql("BEGIN IMMEDIATE")
            else:
                self.engine = sa.create_engine(self.url, pool_pre_ping=True)
        except Exception as e:  # bad URL, missing driver
            raise StoreError(f"cannot open the reservation store {db!r}: {e}") from None
        md = sa.MetaData()
        self.meta = sa.Table("meta", md, sa.Column("key", sa.String(64), primary_key=True),
                             sa.Column("value", sa.String(200)))
        self.res = sa.Table(
            "reservations", md, sa.Column("id", sa.String(64), primary_key=True),
            sa.Column("job", sa.String(200), nullable=False), sa.Column("kind", sa.String(20), nullable=False),
            sa.Column("state", sa.String(20), nullable=False), sa.Column("start", sa.DateTime, nullable=False),
            sa.Column("end", sa.DateTime, nullable=False), sa.Column("created", sa.DateTime, nullable=False),
            sa.Column("note", sa.Text, default=""))
        self.holds = sa.Table(
            "holds", md, sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
            sa.Column("reservation", sa.String(64), sa.ForeignKey("reservations.id"), nullable=False, index=True),
            sa.Column("resource", sa.String(200), nullable=False, index=True),
            sa.Column("amount", sa.Float, nullable=False), sa.Column("start", sa.DateTime, nullable=False),
            sa.Column("end", sa.DateTime, nullable=False))
        self.locks = sa.Table("resource_locks", md, sa.Column("resource", sa.String(200), primary_key=True))
        try:
            md.create_all(self.engine)  # idempotent: creates what is missing
            with self.engine.begin() as c:
                if c.execute(sa.select(self.meta.c.value).where(self.meta.c.key == "schema_version")).first() is None:
                    c.execute(self.meta.insert().values(key="schema_version", value=str(SCHEMA_VERSION)))
        except sa.exc.IntegrityError:
            pass  # another process created it at the same moment
        except sa.exc.SQLAlchemyError as e:
            raise StoreError(f"cannot open the reservation store {self.url.split('@')[-1]}: "
                             f"{str(e).splitlines()[0]}") from None

    def close(self) -> None:
        self.engine.dispose()

    # ------------------------------------------------------------------ reading
    def bookings(self, *, include_tentative: bool = True) -> list[Booking]:
        """Active reservations (not released) with their holds."""
        sa = self.sa
        states = ("tentative", "confirmed") if include_tentative else ("confirmed",)
        with self.engine.connect() as c:
            rows = c.execute(sa.select(self.res).where(self.res.c.state.in_(states))).mappings().all()
            holds = c.execute(sa.select(self.holds).join(self.res, self.holds.c.reservation == self.res.c.id)
                              .where(self.res.c.state.in_(states))).mappings().all()
        by: dict[str, list[Item]] = {}
        for h in holds:
            by.setdefault(h["reservation"], []).append(Item(h["resource"], h["amount"], h["start"], h["end"]))
        return [Booking(r["id"], r["job"], r["kind"], tuple(by.get(r["id"], [])), r["state"]) for r in rows]

    def reservations(self) -> list[dict[str, Any]]:
        sa = self.sa
        with self.engine.connect() as c:
            rows = c.execute(sa.select(self.res).order_by(self.res.c.start)).mappings().all()
        return [dict(r) for r in rows]

    # ------------------------------------------------------------------ writing
    def book(self, placement: Placement, capacity: dict[str, float], *, state: str = "confirmed",
             note: str = "") -> str:
        """Record ``placement`` atomically; raise :class:`BookingConflict` when it no longer fits."""
        return self.book_all([placement], capacity, state=state, note=note)[0]

    def book_all(self, placements: Sequence[Placement], capacity: dict[str, float], *, state: str = "confirmed",
                 note: str = "") -> list[str]:
        """Record every placement of one request in ONE transaction, all or none: under the locks of every
        resource they hold, re-check each against the stored holds plus the placements before it; when one no
        longer fits, raise :class:`BookingConflict` naming its job and record nothing. Returns the ids, in order."""
        sa = self.sa
        if state not in ("tentative", "confirmed"):
            raise InputError(f"state must be tentative or confirmed, not {state!r}")
        if not placements:
            return []
        resources = sorted({i.resource for p in placements for i in p.items})
        rids = [uuid.uuid4().hex[:12] for _ in placements]
        try:
            with self.engine.begin() as c:  # SQLite: BEGIN IMMEDIATE (see __init__)
                if not self.sqlite and resources:
                    self._ensure_locks(resources)
                    c.execute(sa.select(self.locks.c.resource).where(self.locks.c.resource.in_(resources))
                              .order_by(self.locks.c.resource).with_for_update()).all()
                lo_all = min((i.start for p in placements for i in p.items), default=placements[0].start)
                hi_all = max((i.end for p in placements for i in p.items), default=placements[0].end)
                rows = c.execute(
                    sa.select(self.holds).join(self.res, self.holds.c.reservation == self.res.c.id)
                    .where(self.res.c.state != "released", self.holds.c.resource.in_(resources),
                           self.holds.c.start < hi_all, self.holds.c.end > lo_all)).mappings().all()
                existing = [Item(r["resource"], r["amount"], r["start"], r["end"]) for r in rows]
                for placement in placements:
                    bad = overflow(placement.items, existing, capacity)
                    if bad:
                        lo, hi = placement.start, placement.end
                        res, load, cap = bad[0]
                        others = "; nothing of this request was booked" if len(placements) > 1 else ""
                        raise BookingConflict(f"job {placement.job!r} no longer fits: {res} would hold {load:g} of "
                                              f"{cap:g} between {lo:%Y-%m-%d %H:%M} and {hi:%Y-%m-%d %H:%M}"
                                              f"{others}; run `llmsizer capacity check` again")
                    existing.extend(placement.items)  # the next job of the request counts on these too
                now = _dt.datetime.now(_dt.timezone.utc).replace(tzinfo=None)
                for rid, placement in zip(rids, placements, strict=True):
                    c.execute(self.res.insert().values(id=rid, job=placement.job, kind=placement.kind, state=state,
                                                       start=placement.start, end=placement.end, created=now,
                                                       note=note))
                    if placement.items:
                        c.execute(self.holds.insert(), [dict(reservation=rid, resource=i.resource, amount=i.amount,
                                                             start=i.start, end=i.end) for i in placement.items])
        except sa.exc.OperationalError as e:
            raise StoreError(f"booking failed: {str(e).splitlines()[0]}") from None
        return rids

    def _ensure_locks(self, resources: Sequence[str]) -> None:
        from sqlalchemy.dialects.postgresql import insert
        with self.engine.begin() as c:
            c.execute(insert(self.locks).values([{"resource": r} for r in resources]).on_conflict_do_nothing())

    def set_state(self, rid: str, state: str) -> None:
        if state not in STATES:
            raise InputError(f"unknown state {state!r}; one of {', '.join(STATES)}")
        sa = self.sa
        with self.engine.begin() as c:
            n = c.execute(sa.update(self.res).where(self.res.c.id == rid).values(state=state)).rowcount
        if not n:
            raise InputError(f"no reservation {rid!r} (list them with `llmsizer capacity show`)")

    def release(self, rid: str) -> None:
        self.set_state(rid, "released")


def utilisation(bookings: Sequence[Booking], capacity: dict[str, float], at: _dt.datetime) -> dict[str, float]:
    """Share of each resource held at moment ``at`` (0..1)."""
    load: dict[str, float] = {}
    for b in bookings:
        for i in b.items:
            if i.start <= at < i.end:
                load[i.resource] = load.get(i.resource, 0.0) + i.amount
    return {r: load.get(r, 0.0) / c for r, c in capacity.items() if c}
