"""Read a SQLite reservation store with the standard library alone (``sqlite3``), read-only: what ``capacity check``
and ``capacity show`` need (the holding bookings, the reservations, the audit log). So a check against a SQLite file
works without the ``provider`` extra (SQLAlchemy), opens the file with ``mode=ro`` (never creates or changes it)
and reads 10,000 bookings in a few tens of milliseconds. Writing stays in :mod:`.store`.

The tables and columns are the ones :class:`~.store.Store` creates (schema 1 to 5); a file with no tables yet
holds nothing."""

from __future__ import annotations

import datetime as _dt
import sqlite3
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from .placement import Booking, Item
from .store import AGREED, ALIASES, COPY_NODES, FIGURES, HOLDING, LIVE, StoreError, booking_of, with_figures

BASE_COLS = ("id", "job", "kind", "state", "start", "end", "created", "note")


def _time(v: Any) -> Any:
    return _dt.datetime.fromisoformat(v) if isinstance(v, str) else v


class ReadOnlySqlite:
    """The read side of :class:`~.store.Store` for a SQLite file, on ``sqlite3`` in read-only mode."""

    readonly = True

    def __init__(self, path: str | Path) -> None:
        p = Path(path)
        if not p.exists():
            raise StoreError(f"no reservation store at {p}")
        try:
            self.con = sqlite3.connect(f"file:{p.resolve()}?mode=ro", uri=True, timeout=60)
            tables = {r[0] for r in self.con.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        except sqlite3.Error as e:
            raise StoreError(f"cannot read the reservation store {p}: {e}") from None
        self.path = p
        self.tables = tables
        self.empty = "reservations" not in tables

    def close(self) -> None:
        self.con.close()

    def _rows(self, sql: str, params: tuple[Any, ...] = ()) -> list[dict[str, Any]]:
        try:
            cur = self.con.execute(sql, params)
        except sqlite3.Error as e:
            raise StoreError(f"cannot read the reservation store {self.path}: {e}") from None
        names = [d[0] for d in cur.description]
        return [dict(zip(names, r, strict=True)) for r in cur.fetchall()]

    def bookings(self, *, include_tentative: bool = True, also: Sequence[str] = (),
                 requested: bool = False) -> list[Booking]:
        """Reservations that hold capacity (held, confirmed, active; a schema-1 ``tentative`` counts as held), the
        reservations ``also`` names in any state, and with ``requested`` every requested one (as
        :meth:`Store.bookings`)."""
        if self.empty:
            return []
        states = (*HOLDING, "tentative") if include_tentative else ("confirmed", "active")
        states = (*states, "requested") if requested else states
        marks = ",".join("?" * len(states))
        named = f' OR {{t}}id IN ({",".join("?" * len(also))})' if also else ""
        where = (f"state IN ({marks})" + named).format(t="")
        where_r = (f"r.state IN ({marks})" + named).format(t="r.")
        args = (*states, *also)
        with self.con:  # one read transaction: the holds belong to the rows read
            have = {r["name"] for r in self._rows("PRAGMA table_info(reservations)")}
            extra = "".join(f", {k}" for k in ("device", AGREED, COPY_NODES) if k in have)  # schema 3's, 5's, 6's
            rows = self._rows(f'SELECT id, job, kind, state{extra} FROM reservations WHERE {where}', args)
            holds = self._rows(f'SELECT h.reservation, h.resource, h.amount, h.start, h."end" FROM holds h JOIN '
                               f'reservations r ON h.reservation = r.id WHERE {where_r}', args)
        by: dict[str, list[Item]] = {}
        for h in holds:
            by.setdefault(h["reservation"], []).append(
                Item(h["resource"], float(h["amount"]), _time(h["start"]), _time(h["end"])))
        return [booking_of(r, tuple(by.get(r["id"], []))) for r in rows]

    def live_by_key(self, keys: Sequence[str]) -> dict[str, tuple[str, str]]:
        """key -> (id, state) of the oldest live booking with that key (as :meth:`Store.live_by_key`); a schema-1
        file has no keys: nothing."""
        if self.empty or not keys or "idem_key" not in {r["name"] for r in self._rows("PRAGMA table_info("
                                                                                      "reservations)")}:
            return {}
        out: dict[str, tuple[str, str]] = {}
        rows = self._rows(f'SELECT id, idem_key, state FROM reservations WHERE idem_key IN ({",".join("?" * len(keys))})'
                          f' AND state IN ({",".join("?" * len(LIVE))}) ORDER BY created', (*keys, *LIVE))
        for r in rows:
            out.setdefault(r["idem_key"], (r["id"], r["state"]))
        return out

    def reservations(self) -> list[dict[str, Any]]:
        if self.empty:
            return []
        have = {r["name"] for r in self._rows("PRAGMA table_info(reservations)")}
        cols = ", ".join(f'"{c}"' for c in (*BASE_COLS, *(k for k, _ in FIGURES if k in have),
                                             *(k for k in ("device", AGREED, COPY_NODES) if k in have)))
        rows = self._rows(f"SELECT {cols} FROM reservations ORDER BY start, created")
        for r in rows:
            for k in ("start", "end", "created"):
                r[k] = _time(r[k])
            r["state"] = ALIASES.get(r["state"], r["state"])
        return [with_figures(r) for r in rows]

    def audit(self) -> list[dict[str, Any]]:
        if "audit" not in self.tables:
            return []
        rows = self._rows("SELECT * FROM audit ORDER BY seq")
        for r in rows:
            r["at"] = _time(r["at"])
        return rows
