"""Reservations over time, in SQLite (default: a file, nothing to install) or PostgreSQL (``postgresql://...``,
driver psycopg 3), through SQLAlchemy 2 Core (the ``provider`` extra; imported lazily). The schema is created on
first use (never by a read-only open: ``capacity check`` and ``show`` do not create a database file).

Tables: ``reservations`` (id, job, kind, state, start, end, created, note, idem_key, hold_until, device: the
catalog device the placement was made on, schema 3; the plan's numbers the booking was made for, schema 4:
:data:`FIGURES`, from :class:`~.placement.Figures`; ``maintenance_agreed``, schema 5: the provider maintenance
the job's request agreed to, :func:`agreement_text`; ``copy_nodes``, schema 6: the machines one copy of the model
spans, :data:`COPY_NODES`),
``holds`` (reservation, resource, amount, start, end: the placement's items), ``resource_locks`` (one row per
resource, locked while a booking re-checks capacity), ``audit`` (append-only: who, what, when, before -> after),
``meta`` (schema version), ``login_failures`` (the console's failed sign-ins per client, so every ``serve`` process
sharing the store shares the limit: :meth:`Store.login_wait`).

The booking lifecycle is an explicit state machine. Capacity-holding states: ``held``, ``confirmed``, ``active``.

=============  ==========================================  ====================================================
state          may go to                                   meaning
=============  ==========================================  ====================================================
(new)          requested, held, confirmed                  ``book`` (``--state``; ``--tentative`` = held)
requested      held*, confirmed*, released, expired        asked for, holds nothing yet
held           confirmed*, released, expired               a tentative hold until ``hold_until``, then expired
confirmed      active*, released                           the provider has agreed
active         finished, released                          running
finished       -                                           ran to its end (terminal)
released       -                                           cancelled / given back (terminal)
expired        -                                           a request or hold that lapsed (terminal)
=============  ==========================================  ====================================================

``*``: a transition into a capacity-holding state. Each of them (and every new booking into one) re-checks
capacity INSIDE the transaction that writes it: SQLite ``BEGIN IMMEDIATE`` (a write lock on the whole file);
PostgreSQL ``SELECT ... FOR UPDATE`` on the lock rows of every resource the booking holds, in a fixed order, then
on the reservation's own row. It re-reads the holds of those resources in holding states and refuses with
:class:`BookingConflict` when the booking would push one over capacity at any moment. A transition not in the table
(confirm a released booking) raises :class:`IllegalTransition`. Every transition, the first one included, appends
one ``audit`` row in the same transaction, so the audit log replays to the stored states.

Idempotency: a booking may carry a key (``capacity book``: sha256 of the request's canonical content and the job
name); booking a key that already has a booking in a live state (requested/held/confirmed/active) returns that
booking instead of a second one.
"""

from __future__ import annotations

import datetime as _dt
import functools
import getpass
import json
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import InputError, LlmsizerError
from ..numbers import DEFAULT_HOLD_HOURS
from ..request.windows import Agreement
from .inventory import Inventory, Quota
from .placement import Booking, Item, Placement, format_amount, overflow
from .quota import USAGE, check_quota, usage_resource

SCHEMA_VERSION = 6
#: schema 6: the machines one copy of a booking's model spans (placement.JobNeed.copy_nodes: a service whose tensor
#: parallelism crosses machines, re-placed only on nodes of one fabric). NULL in a booking made before schema 6: 1
COPY_NODES = "copy_nodes"
#: schema 5: the provider maintenance a booking's request agreed to (windows.Agreement: whether it accepts any and
#: the windows it states), JSON text (:func:`agreement_text`). NULL in a booking made before schema 5: not known
AGREED = "maintenance_agreed"
#: schema 4: the plan's numbers a booking carries (placement.Figures), one column each, with its SQL type: memory per
#: device [B], device count, the run's seconds (NULL: held until released), cost and cost per month [USD] (NULL: the
#: plan has no price). NULL in a booking made before schema 4.
FIGURES = (("memory_per_device", "BIGINT"), ("devices", "INTEGER"), ("seconds", "FLOAT"), ("cost", "FLOAT"),
           ("cost_per_month", "FLOAT"))
STATES = ("requested", "held", "confirmed", "active", "finished", "released", "expired")
HOLDING = ("held", "confirmed", "active")
#: console sign-in limit: at most LOGIN_FAILURES failed sign-ins per client within LOGIN_WINDOW (counted from the
#: first failure), then none until the window ends. OWASP Authentication Cheat Sheet, "Protect Against Automated
#: Attacks" / account lockout: a threshold of failed attempts, an observation window and a lockout duration; the
#: numbers are this project's choice (a person mistyping a token five times waits at most 15 minutes)
LOGIN_FAILURES = 5
LOGIN_WINDOW = _dt.timedelta(minutes=15)
LIVE = ("requested", *HOLDING)
TERMINAL = ("finished", "released", "expired")
#: before -> the states it may go to (None: a new booking). The one table of allowed transitions.
TRANSITIONS: dict[str | None, tuple[str, ...]] = {
    None: ("requested", "held", "confirmed"),
    "requested": ("held", "confirmed", "released", "expired"),
    "held": ("confirmed", "released", "expired"),
    "confirmed": ("active", "released"),
    "active": ("finished", "released"),
    "finished": (),
    "released": (),
    "expired": (),
}
ALIASES = {"tentative": "held"}  # schema 1 and ``--tentative``
DEFAULT_HOLD = _dt.timedelta(hours=DEFAULT_HOLD_HOURS)  # numbers.DEFAULT_HOLD_HOURS: one home


class StoreError(LlmsizerError, RuntimeError):
    """The reservation store cannot be opened or used."""


class BookingConflict(InputError):
    """A booking no longer fits: capacity was taken since the check."""


class IllegalTransition(InputError):
    """A lifecycle transition not in :data:`TRANSITIONS` (e.g. confirm a released booking)."""


class PastWindow(InputError):
    """A booking whose window starts before now."""


@dataclass(frozen=True)
class Submitted:
    id: str
    job: str
    existing: bool  # True: the idempotency key matched a live booking, nothing new was written
    state: str


def utcnow() -> _dt.datetime:
    return _dt.datetime.now(_dt.timezone.utc).replace(tzinfo=None)


def default_actor() -> str:
    try:
        return getpass.getuser()
    except Exception:  # noqa: BLE001 - no user name in this environment
        return "unknown"


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


def sqlite_path(url: str) -> str | None:
    """The file of a ``sqlite:///`` URL (None for memory or another database)."""
    if not url.startswith("sqlite:///"):
        return None
    path = url[len("sqlite:///"):].split("?", 1)[0]
    return path if path and path != ":memory:" else None


def creation_hint(path: str) -> str:
    """What creates the SQLite store file ``path`` that is not there: the first ``capacity book`` creates the file,
    not a missing folder above it (SQLite opens no file in a folder that does not exist; probe23 C5)."""
    parent = Path(path).expanduser().parent
    if parent.is_dir():
        return "`llmsizer capacity book` creates it"
    return (f"its folder {parent} does not exist either, and `llmsizer capacity book` creates the file, not the "
            "folder: create the folder first")


def state_name(state: str) -> str:
    s = ALIASES.get(state, state)
    if s not in STATES:
        raise InputError(f"unknown state {state!r}; one of {', '.join(STATES)}")
    return s


class Store:
    def __init__(self, db: str | None = None, *, readonly: bool = False) -> None:
        """Open (and, unless ``readonly``, create) the store. ``readonly`` on a SQLite file that does not exist
        raises :class:`FileNotFoundError`-like :class:`StoreError`; use :meth:`exists` first to avoid it."""
        try:
            import sqlalchemy as sa
        except ImportError:
            raise StoreError("the reservation store needs SQLAlchemy 2: pip install 'llmsizer[provider]'") from None
        self.sa = sa
        self.url = db_url(db)
        self.sqlite = self.url.startswith("sqlite")
        self.readonly = readonly
        try:
            if self.sqlite:
                path = sqlite_path(self.url)
                if not readonly and path is not None and not Path(path).expanduser().parent.is_dir():
                    # creating the file would fail inside SQLite ("unable to open database file"): said in one
                    # line, nothing created (probe23 C5)
                    raise StoreError(f"cannot create the reservation store {path}: its folder "
                                     f"{Path(path).expanduser().parent} does not exist (the store is created as a "
                                     "file, not its folder): create the folder first; nothing was written")
                if readonly and path is not None:
                    if not Path(path).exists():
                        raise StoreError(f"no reservation store at {path}")
                    url = f"sqlite:///file:{Path(path).resolve()}?mode=ro&uri=true"
                else:
                    url = self.url
                self.engine = sa.create_engine(url, connect_args={"timeout": 60})

                @sa.event.listens_for(self.engine, "connect")
                def _no_autobegin(dbapi_conn: Any, _rec: Any) -> None:
                    dbapi_conn.isolation_level = None  # let the "begin" hook below issue BEGIN itself

                @sa.event.listens_for(self.engine, "begin")
                def _immediate(conn: Any) -> None:
                    conn.exec_driver_sql("BEGIN" if readonly else "BEGIN IMMEDIATE")
            else:
                self.engine = sa.create_engine(self.url, pool_pre_ping=True)
        except StoreError:
            raise
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
            sa.Column("note", sa.Text, default=""), sa.Column("idem_key", sa.String(64), index=True),
            sa.Column("hold_until", sa.DateTime), sa.Column("device", sa.String(200)),
            sa.Column("memory_per_device", sa.BigInteger), sa.Column("devices", sa.Integer),
            sa.Column("seconds", sa.Float), sa.Column("cost", sa.Float), sa.Column("cost_per_month", sa.Float),
            sa.Column(AGREED, sa.Text), sa.Column(COPY_NODES, sa.Integer))
        self.holds = sa.Table(
            "holds", md, sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
            sa.Column("reservation", sa.String(64), sa.ForeignKey("reservations.id"), nullable=False, index=True),
            sa.Column("resource", sa.String(200), nullable=False, index=True),
            sa.Column("amount", sa.Float, nullable=False), sa.Column("start", sa.DateTime, nullable=False),
            sa.Column("end", sa.DateTime, nullable=False))
        self.locks = sa.Table("resource_locks", md, sa.Column("resource", sa.String(200), primary_key=True))
        self.audit_t = sa.Table(
            "audit", md, sa.Column("seq", sa.Integer, primary_key=True, autoincrement=True),
            sa.Column("at", sa.DateTime, nullable=False), sa.Column("actor", sa.String(200), nullable=False),
            sa.Column("action", sa.String(40), nullable=False),
            sa.Column("reservation", sa.String(64), nullable=False, index=True),
            sa.Column("before", sa.String(20)), sa.Column("after", sa.String(20), nullable=False),
            sa.Column("detail", sa.Text, default=""))
        self.logins = sa.Table(
            "login_failures", md, sa.Column("client", sa.String(64), primary_key=True),
            sa.Column("failures", sa.Integer, nullable=False), sa.Column("since", sa.DateTime, nullable=False))
        self.empty = False
        if readonly:
            try:  # a database nobody has booked into yet has no tables: nothing is held
                self.empty = not sa.inspect(self.engine).has_table("reservations")
            except sa.exc.SQLAlchemyError as e:
                raise StoreError(f"cannot open the reservation store {self.url.split('@')[-1]}: "
                                 f"{str(e).splitlines()[0]}") from None
            return
        try:
            md.create_all(self.engine)  # idempotent: creates what is missing
            self._migrate()
        except sa.exc.IntegrityError:
            pass  # another process created it at the same moment
        except sa.exc.SQLAlchemyError as e:
            raise StoreError(f"cannot open the reservation store {self.url.split('@')[-1]}: "
                             f"{str(e).splitlines()[0]}") from None

    def _migrate(self) -> None:
        """Schema 1 -> 2: the idem_key and hold_until columns; state ``tentative`` is now ``held``. 2 -> 3: the
        device column (the booked device type; empty for bookings made before, which are then checked by node only,
        :func:`orphaned`). 3 -> 4: the :data:`FIGURES` columns (NULL for bookings made before). 4 -> 5: the
        :data:`AGREED` column (NULL for bookings made before: whether a service agreed to a window is not known).
        5 -> 6: the :data:`COPY_NODES` column (NULL for bookings made before: read as 1, each copy in one machine)."""
        sa = self.sa
        with self.engine.connect() as c:
            row = c.execute(sa.select(self.meta.c.value).where(self.meta.c.key == "schema_version")).first()
        if row is not None and row[0] == str(SCHEMA_VERSION):
            return
        for name, typ in (("idem_key", "VARCHAR(64)"), ("hold_until", "TIMESTAMP"), ("device", "VARCHAR(200)"),
                          *FIGURES, (AGREED, "TEXT"), (COPY_NODES, "INTEGER")):
            if name not in {c["name"] for c in sa.inspect(self.engine).get_columns("reservations")}:
                try:
                    with self.engine.begin() as c:
                        c.exec_driver_sql(f"ALTER TABLE reservations ADD COLUMN {name} {typ}")
                except sa.exc.SQLAlchemyError:  # another process added it at the same moment
                    if name not in {c["name"] for c in sa.inspect(self.engine).get_columns("reservations")}:
                        raise
        with self.engine.begin() as c:
            c.execute(sa.update(self.res).where(self.res.c.state == "tentative").values(state="held"))
            if row is not None and c.execute(sa.select(sa.func.count()).select_from(self.audit_t)).scalar() == 0:
                # reservations written before the audit log: one "migrate" entry each, so the log replays
                now = utcnow()
                for rid, st in c.execute(sa.select(self.res.c.id, self.res.c.state).order_by(self.res.c.created)
                                         ).all():
                    self._log(c, rid, None, st, "migration", now, "migrate", "recorded before the audit log")
            row = c.execute(sa.select(self.meta.c.value).where(self.meta.c.key == "schema_version")).first()
            if row is None:
                c.execute(self.meta.insert().values(key="schema_version", value=str(SCHEMA_VERSION)))
            else:
                c.execute(sa.update(self.meta).where(self.meta.c.key == "schema_version")
                          .values(value=str(SCHEMA_VERSION)))

    @staticmethod
    def exists(db: str | None) -> bool:
        """False only for a SQLite file that is not there (a server database is taken to exist)."""
        path = sqlite_path(db_url(db))
        return path is None or Path(path).exists()

    def close(self) -> None:
        self.engine.dispose()

    # ------------------------------------------------------------------ reading
    def bookings(self, *, include_tentative: bool = True, also: Sequence[str] = (),
                 requested: bool = False) -> list[Booking]:
        """Reservations that hold capacity (held, confirmed, active; without held ones when
        ``include_tentative`` is false) with their holds, the reservations ``also`` names in any state (a
        requested booking about to be held), and with ``requested`` every requested one (holds planned, none taken
        yet: what ``orphaned`` checks for re-place, ``release --orphans`` and ``show``; never capacity)."""
        sa = self.sa
        if self.empty:
            return []
        # "tentative": a schema-1 file opened read-only (not migrated) still counts its holds
        states = (*HOLDING, "tentative") if include_tentative else ("confirmed", "active")
        states = (*states, "requested") if requested else states
        with self.engine.connect() as c:
            have = self._columns()
            cols = [*self._base_cols(), *(self.res.c[k] for k in ("device", AGREED, COPY_NODES) if k in have)]
            live = self.res.c.state.in_(states)
            if also:
                live = sa.or_(live, self.res.c.id.in_(list(also)))
            rows = c.execute(sa.select(*cols).where(live)).mappings().all()
            holds = c.execute(sa.select(self.holds).join(self.res, self.holds.c.reservation == self.res.c.id)
                              .where(live)).mappings().all()
        by: dict[str, list[Item]] = {}
        for h in holds:
            by.setdefault(h["reservation"], []).append(Item(h["resource"], h["amount"], h["start"], h["end"]))
        return [booking_of(dict(r), tuple(by.get(r["id"], []))) for r in rows]

    def _columns(self) -> set[str]:
        """The reservations table's columns (a store opened read-only is not migrated: those it has)."""
        if not self.readonly:
            return {c.name for c in self.res.columns}
        return {c["name"] for c in self.sa.inspect(self.engine).get_columns("reservations")}

    def _base_cols(self) -> list[Any]:
        """The columns of schema 1 (present in every version)."""
        return [self.res.c[k] for k in ("id", "job", "kind", "state", "start", "end", "created", "note")]

    def _figure_cols(self) -> list[Any]:
        """Schema 4's :data:`FIGURES` columns (a store opened read-only is not migrated: only those it has)."""
        have = self._columns()
        return [self.res.c[k] for k, _ in FIGURES if k in have]

    def reservations(self) -> list[dict[str, Any]]:
        """Every reservation, by start: schema 1's columns and the plan's numbers (:func:`with_figures`)."""
        sa = self.sa
        if self.empty:
            return []
        with self.engine.connect() as c:
            agreed = [self.res.c[k] for k in ("device", AGREED, COPY_NODES) if k in self._columns()]
            rows = c.execute(sa.select(*self._base_cols(), *self._figure_cols(), *agreed)
                             .order_by(self.res.c.start, self.res.c.created)).mappings().all()
        return [with_figures({**r, "state": ALIASES.get(r["state"], r["state"])}) for r in rows]

    def records(self, ids: Sequence[str]) -> dict[str, dict[str, Any]]:
        """id -> the booking record of each of ``ids``: its reservation row (:meth:`reservations`' keys) and the
        nodes its holds are on. What ``book`` answers for a new booking and an existing one alike."""
        rows = {r["id"]: r for r in self.reservations() if r["id"] in set(ids)}
        return {rid: {**r, "nodes": sorted({i.resource[5:] for i in self.holds_of(rid) if i.resource.startswith("node:")})}
                for rid, r in rows.items()}

    def audit(self) -> list[dict[str, Any]]:
        """The audit log, oldest first."""
        sa = self.sa
        if self.empty or (self.readonly and not sa.inspect(self.engine).has_table("audit")):
            return []
        with self.engine.connect() as c:
            rows = c.execute(sa.select(self.audit_t).order_by(self.audit_t.c.seq)).mappings().all()
        return [dict(r) for r in rows]

    def live_by_key(self, keys: Sequence[str]) -> dict[str, tuple[str, str]]:
        """key -> (id, state) of the oldest live booking (requested/held/confirmed/active) with that key."""
        sa = self.sa
        out: dict[str, tuple[str, str]] = {}
        if not keys or self.empty:  # a read-only open of a store nobody has booked into: no tables, no keys
            return out
        with self.engine.connect() as c:
            for r in c.execute(sa.select(self.res.c.id, self.res.c.idem_key, self.res.c.state)
                               .where(self.res.c.idem_key.in_(list(keys)), self.res.c.state.in_(LIVE))
                               .order_by(self.res.c.created)).all():
                out.setdefault(r[1], (r[0], r[2]))
        return out

    def holds_of(self, rid: str) -> list[Item]:
        sa = self.sa
        with self.engine.connect() as c:
            rows = c.execute(sa.select(self.holds).where(self.holds.c.reservation == rid)).mappings().all()
        return [Item(r["resource"], r["amount"], r["start"], r["end"]) for r in rows]

    # ------------------------------------------------------------------ writing
    def _log(self, c: Any, rid: str, before: str | None, after: str, actor: str, now: _dt.datetime,
             action: str, detail: str = "") -> None:
        c.execute(self.audit_t.insert().values(at=now, actor=actor, action=action, reservation=rid, before=before,
                                               after=after, detail=detail))

    def _lock(self, c: Any, names: Sequence[str]) -> None:
        """PostgreSQL: lock the rows of ``names`` (created when missing) in a fixed order. SQLite: the whole
        file is already write-locked by ``BEGIN IMMEDIATE``."""
        if self.sqlite or not names:
            return
        sa = self.sa
        names = sorted(set(names))
        self._ensure_locks(names)
        c.execute(sa.select(self.locks.c.resource).where(self.locks.c.resource.in_(names))
                  .order_by(self.locks.c.resource).with_for_update()).all()

    def _held_items(self, c: Any, resources: Sequence[str], lo: _dt.datetime, hi: _dt.datetime,
                    exclude: str | Sequence[str] | None = None) -> list[Item]:
        sa = self.sa
        q = (sa.select(self.holds).join(self.res, self.holds.c.reservation == self.res.c.id)
             .where(self.res.c.state.in_(HOLDING), self.holds.c.resource.in_(list(resources)),
                    self.holds.c.start < hi, self.holds.c.end > lo))
        if isinstance(exclude, str):
            q = q.where(self.res.c.id != exclude)
        elif exclude:
            q = q.where(self.res.c.id.notin_(list(exclude)))
        return [Item(r["resource"], r["amount"], r["start"], r["end"]) for r in c.execute(q).mappings().all()]

    def book(self, placement: Placement, capacity: dict[str, float], *, state: str = "confirmed",
             note: str = "", **kw: Any) -> str:
        """Record ``placement`` atomically; raise :class:`BookingConflict` when it no longer fits."""
        return self.book_all([placement], capacity, state=state, note=note, **kw)[0]

    def book_all(self, placements: Sequence[Placement], capacity: dict[str, float], *, state: str = "confirmed",
                 note: str = "", **kw: Any) -> list[str]:
        """Record every placement of one request in ONE transaction, all or none (see :meth:`submit`).
        Returns the ids, in order."""
        return [s.id for s in self.submit(placements, capacity, state=state, note=note, **kw)]

    def submit(self, placements: Sequence[Placement], capacity: dict[str, float], *, state: str = "confirmed",
               note: str = "", keys: Sequence[str | None] | None = None, actor: str | None = None,
               now: _dt.datetime | None = None, hold_for: _dt.timedelta = DEFAULT_HOLD,
               not_before: _dt.datetime | None = None, quotas: Sequence[Quota] = ()) -> list[Submitted]:
        """Record every placement of one request in ONE transaction, all or none: under the locks of every
        resource they hold, re-check each against the stored holds plus the placements before it; when one no
        longer fits, raise :class:`BookingConflict` naming its job and record nothing. A placement whose key
        (``keys``, one per placement) already has a live booking is answered with that booking (``existing``).
        ``not_before``: refuse (:class:`PastWindow`) a placement starting before it. ``quotas``: the inventory's
        team quotas, re-checked in the same transaction (under the locks of every cohort member's usage)."""
        sa = self.sa
        state = state_name(state)
        if state not in TRANSITIONS[None]:
            raise IllegalTransition(f"a new booking may be {', '.join(TRANSITIONS[None])}, not {state}")
        if not placements:
            return []
        keys = list(keys) if keys is not None else [None] * len(placements)
        if len(keys) != len(placements):
            raise InputError("one idempotency key per placement")
        if not_before is not None:
            for p in placements:
                if p.start < not_before:
                    raise PastWindow(f"job {p.job!r}: the window starts {p.start:%Y-%m-%d %H:%M}, before now "
                                     f"({not_before:%Y-%m-%d %H:%M} UTC); give a later start or use --earliest")
        actor = actor or default_actor()
        now = now or utcnow()
        self.expire_due(now, actor=actor)
        resources = sorted({i.resource for p in placements for i in p.items})
        devices = {i.resource.rsplit(":", 1)[1] for p in placements for i in p.items if i.resource.startswith(USAGE)}
        usage_res = sorted({usage_resource(q.team, q.device) for q in quotas if q.device in devices})
        resources = sorted({*resources, *usage_res})
        out: list[Submitted] = []
        try:
            with self.engine.begin() as c:  # SQLite: BEGIN IMMEDIATE (see __init__)
                self._lock(c, [*resources, *(f"key:{k}" for k in keys if k)])
                found: dict[str, tuple[str, str]] = {}
                live_keys = [k for k in keys if k]
                if live_keys:
                    for r in c.execute(sa.select(self.res.c.id, self.res.c.idem_key, self.res.c.state)
                                       .where(self.res.c.idem_key.in_(live_keys), self.res.c.state.in_(LIVE))
                                       .order_by(self.res.c.created)).all():
                        found.setdefault(r[1], (r[0], r[2]))
                new = [(p, k) for p, k in zip(placements, keys, strict=True) if not (k and k in found)]
                if state in HOLDING and new:
                    items_all = [i for p, _ in new for i in p.items]
                    lo_all = min((i.start for i in items_all), default=new[0][0].start)
                    hi_all = max((i.end for i in items_all), default=new[0][0].end)
                    existing = self._held_items(c, resources, lo_all, hi_all)
                    usage = self._held_items(c, usage_res, _dt.datetime.min, _dt.datetime.max) if usage_res else []
                    for placement, _ in new:
                        others = "; nothing of this request was booked" if len(placements) > 1 else ""
                        held = [*(i for i in existing if not i.resource.startswith(USAGE)), *usage]  # usage once
                        why = taking_refusal(placement.job, placement.items, held, capacity, quotas, suffix=others,
                                             again=True)
                        if why:
                            raise BookingConflict(why)
                        existing.extend(placement.items)  # the next job of the request counts on these too
                        usage.extend(i for i in placement.items if i.resource.startswith(USAGE))
                for placement, key in zip(placements, keys, strict=True):
                    if key and key in found:
                        rid, st = found[key]
                        out.append(Submitted(rid, placement.job, True, st))
                        continue
                    rid = uuid.uuid4().hex[:12]
                    c.execute(self.res.insert().values(
                        id=rid, job=placement.job, kind=placement.kind, state=state, start=placement.start,
                        end=placement.end, created=now, note=note, idem_key=key, device=placement.device,
                        **placement.figures.to_dict(), **{AGREED: agreement_text(placement.agreement)},
                        **{COPY_NODES: placement.copy_nodes},
                        hold_until=now + hold_for if state in ("held", "requested") else None))
                    if placement.items:
                        c.execute(self.holds.insert(), [dict(reservation=rid, resource=i.resource, amount=i.amount,
                                                             start=i.start, end=i.end) for i in placement.items])
                    self._log(c, rid, None, state, actor, now, "book", note)
                    out.append(Submitted(rid, placement.job, False, state))
        except sa.exc.OperationalError as e:
            raise StoreError(f"booking failed: {str(e).splitlines()[0]}") from None
        return out

    # ------------------------------------------------------------------ console sign-in limit
    def login_wait(self, client: str, *, now: _dt.datetime | None = None) -> float:
        """Seconds ``client`` (a key naming who signs in from where) must wait before its next sign-in attempt: 0
        unless it has failed ``LOGIN_FAILURES`` times within ``LOGIN_WINDOW``, then until that window (counted
        from its first failure) ends. Kept in the store, so every server process answers alike."""
        sa = self.sa
        now = now or utcnow()
        with self.engine.connect() as c:
            row = c.execute(sa.select(self.logins.c.failures, self.logins.c.since)
                            .where(self.logins.c.client == client)).first()
        if row is None or row.failures < LOGIN_FAILURES:
            return 0.0
        return max(0.0, (row.since + LOGIN_WINDOW - now).total_seconds())

    def login_failed(self, client: str, *, now: _dt.datetime | None = None) -> int:
        """Count a failed sign-in of ``client`` (one transaction; a window that has ended starts again); returns
        the failures in the current window."""
        sa = self.sa
        now = now or utcnow()
        t = self.logins
        for _ in range(3):  # two processes inserting the first failure at once: the loser updates
            try:
                with self.engine.begin() as c:
                    row = c.execute(sa.select(t.c.failures, t.c.since).where(t.c.client == client)).first()
                    if row is None:
                        c.execute(t.insert().values(client=client, failures=1, since=now))
                        return 1
                    if row.since + LOGIN_WINDOW <= now:
                        c.execute(sa.update(t).where(t.c.client == client).values(failures=1, since=now))
                        return 1
                    c.execute(sa.update(t).where(t.c.client == client).values(failures=t.c.failures + 1))
                    return int(row.failures) + 1
            except sa.exc.IntegrityError:
                continue
        raise StoreError("could not count a failed sign-in (the store kept refusing the write)")

    def login_succeeded(self, client: str) -> None:
        """A sign-in of ``client`` worked: its failures are forgotten."""
        with self.engine.begin() as c:
            c.execute(self.sa.delete(self.logins).where(self.logins.c.client == client))

    def log_denied(self, action: str, detail: str, *, actor: str | None = None, now: _dt.datetime | None = None) -> None:
        """Append a refused operation (no role for it) to the audit log: reservation ``-``, after ``denied``."""
        with self.engine.begin() as c:
            self._log(c, "-", None, "denied", actor or default_actor(), now or utcnow(), f"denied:{action}", detail)

    def log_inventory(self, before: str, after: str, detail: str, *, actor: str | None = None,
                      now: _dt.datetime | None = None) -> None:
        """Append an edit of the inventory (before/after: the files' sha256 prefixes) to the audit log: reservation
        ``-``, action ``inventory``; it changes no booking (a replay of bookings skips reservation ``-``)."""
        with self.engine.begin() as c:
            self._log(c, "-", before, after, actor or default_actor(), now or utcnow(), "inventory", detail)

    def _ensure_locks(self, resources: Sequence[str]) -> None:
        from sqlalchemy.dialects.postgresql import insert
        with self.engine.begin() as c:
            c.execute(insert(self.locks).values([{"resource": r} for r in resources]).on_conflict_do_nothing())

    def transition(self, rid: str, to: str, capacity: dict[str, float] | None = None, *,
                   actor: str | None = None, now: _dt.datetime | None = None, quotas: Sequence[Quota] = ()) -> str:
        """Move reservation ``rid`` to state ``to`` in one transaction; returns the state before. Into a
        capacity-holding state it re-checks capacity (``capacity`` is then required) and the team's quota
        (``quotas``) under the locks of the reservation's resources and of its cohort's usage; a held booking past
        its ``hold_until`` is expired instead and refused."""
        sa = self.sa
        to = state_name(to)
        actor = actor or default_actor()
        now = now or utcnow()
        items = self.holds_of(rid)  # a reservation's holds never change after it is written
        devices = {i.resource.rsplit(":", 1)[1] for i in items if i.resource.startswith(USAGE)}
        usage_res = sorted({usage_resource(q.team, q.device) for q in quotas if q.device in devices})
        try:
            with self.engine.begin() as c:
                self._lock(c, [*(i.resource for i in items), *usage_res])
                q = sa.select(self.res).where(self.res.c.id == rid)
                row = c.execute(q if self.sqlite else q.with_for_update()).mappings().first()
                if row is None:
                    raise InputError(f"no reservation {rid!r} (list them with `llmsizer capacity show`)")
                before = row["state"]
                if to == before:
                    raise IllegalTransition(f"{rid} is already {before}")
                if to not in TRANSITIONS.get(before, ()):
                    allowed = ", ".join(TRANSITIONS.get(before, ())) or "nothing: it is final"
                    raise IllegalTransition(f"{rid} ({row['job']}) is {before}; it cannot become {to} "
                                            f"(from {before} it may go to: {allowed})")
                lapsed = before in ("held", "requested") and row["hold_until"] is not None and \
                    row["hold_until"] <= now and to != "released"
                if lapsed and to != "expired":
                    c.execute(sa.update(self.res).where(self.res.c.id == rid).values(state="expired"))
                    self._log(c, rid, before, "expired", actor, now, "expire", f"hold lapsed at {row['hold_until']}")
                if not lapsed and to in HOLDING and items:
                    if capacity is None:
                        raise InputError(f"becoming {to} re-checks capacity: give --inventory")
                    lo = min(i.start for i in items)
                    hi = max(i.end for i in items)
                    others = self._held_items(c, sorted({i.resource for i in items if not i.resource.startswith(
                        USAGE)}), lo, hi, exclude=rid)  # the team usage: once, over all time (the quota's period)
                    if usage_res:
                        others += self._held_items(c, usage_res, _dt.datetime.min, _dt.datetime.max, exclude=rid)
                    why = taking_refusal(row["job"], items, others, capacity, quotas)
                    if why:
                        raise BookingConflict(why)
                if not lapsed or to == "expired":
                    c.execute(sa.update(self.res).where(self.res.c.id == rid)
                              .values(state=to, hold_until=None if to not in ("held", "requested") else
                                      row["hold_until"]))
                    self._log(c, rid, before, to, actor, now, {"held": "hold", "confirmed": "confirm",
                                                               "active": "activate", "finished": "finish",
                                                               "released": "release", "expired": "expire"}[to])
        except sa.exc.OperationalError as e:
            raise StoreError(f"{rid}: the change failed: {str(e).splitlines()[0]}") from None
        if lapsed and to != "expired":
            raise IllegalTransition(f"{rid} ({row['job']}): its hold lapsed at {row['hold_until']:%Y-%m-%d %H:%M} "
                                    f"UTC and is now expired; book again")
        return str(before)

    def move(self, moves: Sequence[Any], capacity: dict[str, float], *, actor: str | None = None,
             now: _dt.datetime | None = None) -> None:
        """Re-place orphaned bookings (``moves``: :class:`replace.Move`, each a reservation id, the node holds it
        was planned from and its new items) in ONE transaction, all or none: under the locks of every resource
        the old and new holds name and of the reservations' rows, each booking must still be capacity-holding and
        still hold what the move was planned from (else another change came first: :class:`BookingConflict`,
        nothing written), and its new holds are re-checked against every other booking's and the moves' before it
        (as :meth:`submit`). A requested booking (its holds planned, none taken) moves the same way, re-checked as
        well, but counts against no later move (it holds nothing until ``hold``). The quota usage hold moves unchanged
        (same team, device, count and window), so the team's quota is as it was. Each move appends one ``re-place``
        audit row (state unchanged)."""
        sa = self.sa
        if not moves:
            return
        actor = actor or default_actor()
        now = now or utcnow()
        ids = sorted(m.id for m in moves)
        planned = {m.id: m.before for m in moves}
        resources = sorted({i.resource for m in moves for i in (*m.items, *m.before)})
        try:
            with self.engine.begin() as c:
                self._lock(c, resources)
                q = sa.select(self.res).where(self.res.c.id.in_(ids)).order_by(self.res.c.id)
                rows = {r["id"]: r for r in c.execute(q if self.sqlite else q.with_for_update()).mappings().all()}
                for m in moves:
                    row = rows.get(m.id)
                    held = self._holds_in(c, m.id)
                    if row is None or row["state"] not in LIVE or sorted(held, key=repr) != \
                            sorted(planned[m.id], key=repr):
                        raise BookingConflict(f"{m.id} ({m.job}) changed since it was read (moved, released or "
                                              "re-booked by another change): nothing was moved; run it again")
                items = [i for m in moves for i in m.items]
                existing = self._held_items(c, resources, min(i.start for i in items), max(i.end for i in items),
                                            exclude=ids)
                for m in moves:
                    why = taking_refusal(m.job, m.items, existing, capacity, suffix="; nothing was moved")
                    if why:  # capacity only: the quota usage hold moves unchanged
                        raise BookingConflict(why)
                    if rows[m.id]["state"] in HOLDING:
                        existing.extend(m.items)
                for m in moves:
                    c.execute(sa.delete(self.holds).where(self.holds.c.reservation == m.id))
                    c.execute(self.holds.insert(), [dict(reservation=m.id, resource=i.resource, amount=i.amount,
                                                         start=i.start, end=i.end) for i in m.items])
                    state = rows[m.id]["state"]
                    self._log(c, m.id, state, state, actor, now, "re-place",
                              f"{', '.join(m.old_nodes)} -> {', '.join(m.placement.nodes)} ({m.how})")
        except sa.exc.OperationalError as e:
            raise StoreError(f"re-placing failed: {str(e).splitlines()[0]}") from None

    def _holds_in(self, c: Any, rid: str) -> list[Item]:
        rows = c.execute(self.sa.select(self.holds).where(self.holds.c.reservation == rid)).mappings().all()
        return [Item(r["resource"], r["amount"], r["start"], r["end"]) for r in rows]

    def expire_due(self, now: _dt.datetime | None = None, *, actor: str | None = None) -> list[str]:
        """Expire every requested/held booking whose ``hold_until`` has passed; returns their ids."""
        sa = self.sa
        now = now or utcnow()
        actor = actor or default_actor()
        with self.engine.connect() as c:
            due = c.execute(sa.select(self.res.c.id, self.res.c.state)
                            .where(self.res.c.state.in_(("held", "requested")), self.res.c.hold_until <= now)).all()
        done = []
        for rid, st in due:
            with self.engine.begin() as c:
                n = c.execute(sa.update(self.res).where(self.res.c.id == rid, self.res.c.state == st)
                              .values(state="expired")).rowcount
                if n:
                    self._log(c, rid, st, "expired", actor, now, "expire", "hold lapsed")
                    done.append(rid)
        return done

    def set_state(self, rid: str, state: str, capacity: dict[str, float] | None = None, **kw: Any) -> None:
        """Compatibility wrapper of :meth:`transition`."""
        self.transition(rid, state, capacity, **kw)

    def release(self, rid: str, **kw: Any) -> None:
        self.transition(rid, "released", **kw)



def taking_refusal(job: str, items: Sequence[Item], others: Sequence[Item], capacity: dict[str, float],
                   quotas: Sequence[Quota] = (), *, suffix: str = "", again: bool = False) -> str | None:
    """Why a booking's ``items`` may not take capacity (book, hold, confirm, activate), or None: the one rule of
    :meth:`Store.submit` and :meth:`Store.transition` (under their locks) and of the web console's queue column
    (web/api_capacity.py ``console_view``, over the same bookings read without a lock). ``others``: the holds of
    every other booking that holds capacity, its ``team:`` usage holds included. First capacity
    (:func:`.placement.overflow` of every resource ``items`` hold), then each usage hold's team quota
    (:func:`.quota.check_quota`, Kueue's rule). ``suffix`` is added to the reason; ``again``: a quota refusal ends
    with the advice to check again (as a capacity refusal always does)."""
    bad = overflow(items, others, capacity) if items else []
    if bad:
        lo = min(i.start for i in items)
        hi = max(i.end for i in items)
        res, load, cap = bad[0]
        return (f"job {job!r} no longer fits: {res} would hold {format_amount(res, load)} of "
                f"{format_amount(res, cap)} between {lo:%Y-%m-%d %H:%M} and {hi:%Y-%m-%d %H:%M}{suffix}; run "
                "`llmsizer capacity check` again")
    usage = [i for i in others if i.resource.startswith(USAGE)]
    for u in [i for i in items if i.resource.startswith(USAGE) and quotas]:
        team, device = u.resource[len(USAGE):].rsplit(":", 1)
        ans = check_quota(team, device, int(u.amount), u.start, u.end, quotas,
                          lambda res, lo, hi: [i for i in usage if i.resource == res and i.start < hi and i.end > lo])
        if ans is not None and not ans.fits:
            return f"job {job!r} no longer fits: {ans.text}{suffix}" + ("; run `llmsizer capacity check` again"
                                                                        if again else "")
    return None

def agreement_text(a: Agreement) -> str:
    """The :data:`AGREED` column's text: ``{"accepts": bool, "windows": [text, ...]}``."""
    return json.dumps(a.to_dict())


def agreement_read(text: str | None) -> Agreement | None:
    """The :data:`AGREED` column read back; None for a booking made before schema 5 (NULL, or no column)."""
    return None if text is None else _agreement(text)


@functools.lru_cache(maxsize=256)
def _agreement(text: str) -> Agreement:
    """Parsed once per distinct text: most bookings of a store share a few (10,000 bookings read in tens of ms)."""
    return Agreement.from_dict(json.loads(text))


def booking_of(row: dict[str, Any], items: tuple[Item, ...]) -> Booking:
    """A reservation row (schema 1's id, job, kind, state; the device and the agreement where the store has them)
    with its holds, as both readers build it."""
    return Booking(row["id"], row["job"], row["kind"], items, ALIASES.get(row["state"], row["state"]),
                   row.get("device") or "", agreement_read(row.get(AGREED)), row.get(COPY_NODES))


def with_figures(row: dict[str, Any]) -> dict[str, Any]:
    """A reservation row as both readers return it: every :data:`FIGURES` key (None where the store predates
    schema 4), :data:`COPY_NODES` (the machines one copy of the model spans; None where the booking predates
    schema 6, read as 1 by placement) and ``figures_text``, those numbers as the plan words them (None without
    them); the stored
    :data:`AGREED` column read as ``agreement`` (``{"accepts", "windows"}``, with :func:`.disagree.agreed`'s rule
    for a booking made before schema 5: a training run agreed to none, a service's is unknown, None) and
    ``agreement_text``, it in words (:func:`agreement_words`). One record, which the text, ``--json``, ``--html``
    and the console render."""
    from .disagree import agreed  # here: disagree.py reads this module
    out = {k: v for k, v in row.items() if k != AGREED}
    out.update({k: row.get(k) for k, _ in FIGURES})
    out[COPY_NODES] = row.get(COPY_NODES)  # None: booked before schema 6 (read as 1 by placement)
    out["figures_text"] = figures_text(out) if out.get("devices") else None
    a = agreed(booking_of(row, ()))
    out["agreement"] = None if a is None else a.to_dict()
    out["agreement_text"] = agreement_words(a)
    return out


def figures_text(r: dict[str, Any]) -> str:
    """The plan's numbers a booking record carries, as the plan words them: '1 x 23.31 GiB/device, 3.6 h, $5.43';
    a service whose one copy spans machines says so: '16 x 62.1 GiB/device, one copy spans 2 machines, ...'."""
    from ..units import format_bytes, format_seconds, format_usd
    parts = [f"{r['devices']} x {format_bytes(r['memory_per_device'])}/device"]
    if (r.get(COPY_NODES) or 1) > 1:
        parts.append(f"one copy spans {r[COPY_NODES]} machines")
    if r.get("seconds") is not None:
        parts.append(format_seconds(r["seconds"]))
    if r.get("cost") is not None:
        parts.append(format_usd(r["cost"]))
    if r.get("cost_per_month") is not None:
        parts.append(f"{format_usd(r['cost_per_month'])}/month")
    return ", ".join(parts)


def agreement_words(a: Agreement | None) -> str:
    """The provider maintenance a booking's job agreed to, in words (``show``'s reservation rows)."""
    if a is None:
        return "maintenance agreement unknown (booked before the store recorded it)"
    if not a.accepts:
        return "agreed to no maintenance window"
    if not a.windows:
        return "agreed to any maintenance window (interruptible)"
    return f"agreed maintenance windows: {'; '.join(a.windows)}"


def utilisation(bookings: Sequence[Booking], capacity: dict[str, float], at: _dt.datetime) -> dict[str, float]:
    """Share of each resource held at moment ``at`` (0..1)."""
    load: dict[str, float] = {}
    for b in bookings:
        for i in b.items:
            if i.start <= at < i.end:
                load[i.resource] = load.get(i.resource, 0.0) + i.amount
    return {r: load.get(r, 0.0) / c for r, c in capacity.items() if c}


@dataclass(frozen=True)
class Orphan:
    """Live bookings that hold a node the inventory no longer has as booked: ``node`` is gone from it (removed, or
    renamed: the same machine under a new id would look free and be booked twice), or now holds another device
    than the one booked (``why`` says which)."""

    node: str
    ids: tuple[str, ...]
    why: str

    def to_dict(self) -> dict[str, Any]:
        return {"node": self.node, "reservations": list(self.ids), "why": self.why}


def orphaned(inv: Inventory, bookings: Sequence[Booking], now: _dt.datetime | None = None,
             devices: Sequence[str] | None = None) -> list[Orphan]:
    """The one rule for bookings the inventory cannot place: every booking of ``bookings`` (held, confirmed,
    active; requested ones where the caller passes them) with a hold on ``node:<id>`` that has not ended by ``now``
    (every hold when None), where the
    inventory has no node ``<id>`` or the node's device is not the booked one (bookings made before schema 3 carry
    no device and are checked by node only). Grouped per node and reason, in the order first seen. ``devices``:
    only the bookings a placement on those device types could collide with (:func:`touching`); None: all."""
    nodes = {n.id: n for n in inv.nodes}
    out: dict[tuple[str, str], list[str]] = {}
    for b in bookings:
        if devices is not None and b.device and b.device not in devices:
            continue
        for i in b.items:
            if not i.resource.startswith("node:") or (now is not None and i.end <= now):
                continue
            nid = i.resource[len("node:"):]
            n = nodes.get(nid)
            if n is None:
                why = "the inventory has no such node (removed or renamed)"
            elif b.device and n.device != b.device:
                why = f"booked on {b.device}, the inventory now has {n.device} there"
            else:
                continue
            ids = out.setdefault((nid, why), [])
            if b.id not in ids:
                ids.append(b.id)
    return [Orphan(nid, tuple(ids), why) for (nid, why), ids in out.items()]


def out_of_service(inv: Inventory, bookings: Sequence[Booking], now: _dt.datetime | None = None) -> list[Orphan]:
    """Live bookings (holds not ended by ``now``) on a node the inventory keeps but marks out of service
    (``Node.out_of_service``: drained, down). Not orphans: the machine and its id are still the provider's, so
    nothing can book it twice and no check is blocked; the bookings stay visible, with a warning
    (:func:`out_of_service_text`), since their jobs may not run there until the node is back."""
    nodes = {n.id: n for n in inv.nodes if n.out_of_service}
    out: dict[str, list[str]] = {}
    for b in bookings:
        for i in b.items:
            nid = i.resource[len("node:"):] if i.resource.startswith("node:") else ""
            if nid in nodes and (now is None or i.end > now) and b.id not in out.setdefault(nid, []):
                out[nid].append(b.id)
    return [Orphan(nid, tuple(ids), f"out of service: {nodes[nid].out_of_service}") for nid, ids in out.items()
            if ids]


def out_of_service_text(found: Sequence[Orphan]) -> str:
    """The one warning of bookings on out-of-service nodes (``check``, ``book``, ``show``)."""
    ids = " ".join(dict.fromkeys(i for o in found for i in o.ids))
    return (f"{orphan_text(found)}: kept booked (the node is in the inventory, not removed), but no new job is "
            f"placed there and these may not run until it is back; to run elsewhere, release them "
            f"(`llmsizer capacity release {ids}`) and book again")


def orphan_text(orphans: Sequence[Orphan]) -> str:
    return "; ".join(f"node {o.node!r} holds live booking(s) {', '.join(o.ids)}: {o.why}" for o in orphans)


#: how the inventory is named in a refusal answered over HTTP (the server's path is not the caller's business, as
#: the auth file's is not: cli/capacity_cmd.py WEB_AUTH_SOURCE)
WEB_INVENTORY_SOURCE = "the provider's inventory"


def orphan_remedy(source: str, ids: str, *, named: bool, web: bool) -> str:
    """What to do about orphaned bookings, the one wording: the operator's commands on the command line
    (``source``: the inventory file; ``ids``: the bookings a ``named`` refusal reaches), the console's actions over
    HTTP, where the caller may be a requester and the server's files and commands are not its business."""
    if web:
        return (f"an operator restores the node in {WEB_INVENTORY_SOURCE} (the console's inventory editor), moves "
                "those bookings to a node that holds them (re-place), or releases them (the console's release)")
    move, drop = (f"re-place {ids}", f"release {ids}") if named else ("re-place", "release --orphans")
    return (f"restore the node in the inventory, move those bookings to a node that holds them (`llmsizer capacity "
            f"{move} --inventory {source}`), or release them (`llmsizer capacity {drop}"
            + ("`)" if named else f" --inventory {source}`)"))


def orphan_refusal(inv: Inventory, bookings: Sequence[Booking], now: _dt.datetime | None = None, *,
                   named: bool = False, web: bool = False, devices: Sequence[str] | None = None) -> str | None:
    """The one line every capacity-taking step (``check``, ``book``, ``hold``/``confirm``/``activate``, the web
    console's queue check) refuses with when :func:`orphaned` finds any; None when the inventory and the store
    agree. The commands it suggests reach exactly what it names: ``re-place`` without ids moves what
    ``orphaned(inv, live, now)`` finds (windows not ended), so a refusal over whole windows (``named``: the
    bookings a lifecycle step moves, past windows too) names their ids. ``web``: answered over HTTP, naming no
    server path or command (:func:`orphan_remedy`). ``devices``: the device types the step places on; only orphans
    booked on one of them (or on a device not recorded) refuse it (:func:`orphaned`)."""
    found = orphaned(inv, bookings, now, devices)
    if not found:
        return None
    ids = " ".join(dict.fromkeys(i for o in found for i in o.ids))
    where = WEB_INVENTORY_SOURCE if web else inv.source
    return (f"{where}: {orphan_text(found)}; the inventory and the bookings disagree, so a renamed or re-equipped "
            f"node could be booked twice: {orphan_remedy(inv.source, ids, named=named, web=web)}")


def moving_refusal(inv: Inventory, live: Sequence[Booking], moving: Sequence[str],
                   now: _dt.datetime | None, *, web: bool = False) -> str | None:
    """:func:`orphan_refusal` for a step that makes bookings ``moving`` take capacity (hold, confirm, activate):
    those are checked whole (a window already past is no licence to confirm them on a node that is gone), every
    other live booking from ``now`` on, as ``check`` and ``book`` do."""
    ids = set(moving)
    mine = [b for b in live if b.id in ids]
    devices = None if any(not b.device for b in mine) else [b.device for b in mine]
    return orphan_refusal(inv, mine, named=True, web=web) or orphan_refusal(inv, live, now, web=web, devices=devices)


def refuse_orphans(inv: Inventory, bookings: Sequence[Booking], now: _dt.datetime | None = None, *,
                   web: bool = False, devices: Sequence[str] | None = None) -> None:
    """Raise :class:`InputError` (one line, exit 2) when :func:`orphaned` finds any: the inventory and the store
    disagree, and placing on the inventory as it stands could give a renamed or re-equipped machine twice.
    ``devices``: the device types the step places on. A removed or renamed node's booking blocks only a placement
    on the device it was booked on: a renamed machine keeps its device, so only such a placement could take it a
    second time (a re-equipped node keeps its id, whose holds every placement already counts); a booking that
    records no device (before schema 3) blocks all."""
    why = orphan_refusal(inv, bookings, now, web=web, devices=devices)
    if why is not None:
        raise InputError(why)
