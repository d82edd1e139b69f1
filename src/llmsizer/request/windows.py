"""A service's agreed maintenance windows (``service.maintenance_windows``, free text) read as time intervals, so a
provider's maintenance can be checked against them. Understood forms (UTC; a trailing ``UTC``/``Z`` is allowed):

* recurring: ``Sundays 02:00-04:00``, ``Sun 23:00-01:00`` (crossing midnight), ``Mon,Thu 01:00-02:00``,
  ``Mon-Fri 01:00-02:00``, ``daily 03:00-04:00`` (also ``every day``, ``weekdays``, ``weekends``); days alone
  (``Sat``, ``Sundays``, ``weekends``): each of those days whole, 00:00-24:00;
* one-off: ``2025-11-15 06:00-18:00`` or ``2025-11-15 06:00 - 2025-11-16 06:00``.

Anything else (another time zone, prose) is not understood: :func:`parse_window` returns ``None``."""

from __future__ import annotations

import datetime as _dt
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

DAYS = ("mon", "tue", "wed", "thu", "fri", "sat", "sun")
_TIME = r"(\d{1,2}):(\d{2})"
_DATE = r"(\d{4})-(\d{2})-(\d{2})"
_RECUR = re.compile(rf"^(?P<days>[a-z ,\-]+?)\s+(?:at\s+|from\s+)?{_TIME}\s*(?:-|–|to)\s*{_TIME}$")
_ONE_SAME_DAY = re.compile(rf"^{_DATE}[ t]{_TIME}\s*(?:-|–|to)\s*{_TIME}$")
_ONE_SPAN = re.compile(rf"^{_DATE}[ t]{_TIME}\s*(?:-|–|to)\s*{_DATE}[ t]{_TIME}$")

#: the understood forms, as a refusal of another lists them
FORMS = ("UTC: 'Sundays 02:00-04:00', 'Mon-Fri 01:00-02:00', 'daily 03:00-04:00', 'Sat' (the whole day), "
         "'2025-11-15 06:00-18:00' or '2025-11-15 06:00 - 2025-11-16 06:00'")
Window = Callable[[_dt.datetime, _dt.datetime], bool]  # does [start, end) lie inside one occurrence?


FULL = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")


def _day(word: str) -> int | None:
    w = word.strip().lower().rstrip(".")
    for k, (d, full) in enumerate(zip(DAYS, FULL, strict=True)):
        if w in (d, d + "s", full, full + "s"):
            return k
    return None


def _days(text: str) -> set[int] | None:
    t = re.sub(r"^(every|each|on)\s+", "", text.strip().lower())
    if t in ("daily", "day", "every day", "nightly", "night"):
        return set(range(7))
    if t in ("weekday", "weekdays"):
        return set(range(5))
    if t in ("weekend", "weekends"):
        return {5, 6}
    out: set[int] = set()
    for part in re.split(r"\s*(?:,|\band\b)\s*", t):
        if not part:
            continue
        if "-" in part:
            a, b = (_day(x) for x in part.split("-", 1))
            if a is None or b is None:
                return None
            k = a
            while True:
                out.add(k)
                if k == b:
                    break
                k = (k + 1) % 7
        else:
            d = _day(part)
            if d is None:
                return None
            out.add(d)
    return out or None


def _t(h: str, m: str) -> _dt.timedelta | None:
    hh, mm = int(h), int(m)
    if hh > 24 or mm > 59 or (hh == 24 and mm):
        return None
    return _dt.timedelta(hours=hh, minutes=mm)


def parse_window(text: str) -> Window | None:
    """The window as a test on an interval, or ``None`` when the text is not understood."""
    t = re.sub(r"\s+(utc|z|gmt)$", "", " ".join(text.strip().lower().split()))
    m = _ONE_SPAN.match(t)
    if m:
        g = m.groups()
        try:
            a = _dt.datetime(int(g[0]), int(g[1]), int(g[2]), int(g[3]), int(g[4]))
            b = _dt.datetime(int(g[5]), int(g[6]), int(g[7]), int(g[8]), int(g[9]))
        except ValueError:
            return None
        return (lambda s, e: a <= s and e <= b) if b > a else None
    m = _ONE_SAME_DAY.match(t)
    if m:
        g = m.groups()
        try:
            day = _dt.datetime(int(g[0]), int(g[1]), int(g[2]))
        except ValueError:
            return None
        t1, t2 = _t(g[3], g[4]), _t(g[5], g[6])
        if t1 is None or t2 is None:
            return None
        a, b = day + t1, day + t2 if t2 > t1 else day + t2 + _dt.timedelta(days=1)
        return lambda s, e: a <= s and e <= b
    m = _RECUR.match(t)
    whole = None if m else _days(t)  # days alone ('Sat', 'weekends'): those days whole, consecutive ones joined
    if whole:
        agreed: set[int] = whole

        def whole_days(s: _dt.datetime, e: _dt.datetime) -> bool:
            last = (e - _dt.timedelta(microseconds=1)).date() if e > s else s.date()
            return all((s.date() + _dt.timedelta(days=k)).weekday() in agreed
                       for k in range(min(8, (last - s.date()).days + 1)))
        return whole_days
    if m:
        days = _days(m.group("days"))
        t1, t2 = _t(m.group(2), m.group(3)), _t(m.group(4), m.group(5))
        if days is None or t1 is None or t2 is None or t1 == t2:
            return None
        length = t2 - t1 if t2 > t1 else t2 + _dt.timedelta(days=1) - t1

        def recurring(s: _dt.datetime, e: _dt.datetime) -> bool:
            for back in (0, 1):  # the occurrence starting on the day of s, or the day before (across midnight)
                d0 = _dt.datetime(s.year, s.month, s.day) - _dt.timedelta(days=back)
                if d0.weekday() in days:
                    a = d0 + t1
                    if a <= s and e <= a + length:
                        return True
            return False
        return recurring
    return None


def within(start: _dt.datetime, end: _dt.datetime, windows: Sequence[str]) -> bool:
    """Does [start, end) lie inside one of the agreed ``windows``? True as soon as one of them is not understood
    (the agreement cannot be checked, so it is taken as accepting the provider's windows, as before). A request
    cannot state such a window any more (provider/needs.py ``_agreed_windows`` refuses it): only a booking stored
    before that check can carry one."""
    parsed = [parse_window(w) for w in windows]
    if any(p is None for p in parsed):
        return True
    return any(p(start, end) for p in parsed if p is not None)


@dataclass(frozen=True)
class Agreement:
    """Which provider maintenance a job agreed to run across: none (``accepts`` False: every training run, and a
    service whose request states no window), any (``accepts`` with no ``windows``), or only a window lying inside
    one occurrence of one of ``windows`` (the request's ``service.maintenance_windows`` then ``interruptible``
    periods, as written). The one acceptance rule: placement places by it (placement.py ``_maintenance_ok``), the
    store records it with each booking (schema 5) and disagree.py checks a window added later by it."""

    accepts: bool = False
    windows: tuple[str, ...] = ()

    def covers(self, start: _dt.datetime, end: _dt.datetime) -> bool:
        """Does the job accept a provider maintenance window over [start, end)?"""
        return self.accepts and (not self.windows or within(start, end, self.windows))

    def to_dict(self) -> dict[str, Any]:
        return {"accepts": self.accepts, "windows": list(self.windows)}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Agreement:
        return cls(bool(d.get("accepts")), tuple(str(w) for w in d.get("windows") or ()))
