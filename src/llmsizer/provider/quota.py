"""Team quotas per device type, with borrowing inside a cohort: Kueue's ClusterQueue semantics.

Kueue (site/content/en/docs/concepts/cluster_queue.md, "Flavors and borrowing semantics"): a workload's request
for a resource fits a flavor if the sum of requests

1. is at most the unused ``nominalQuota`` of the flavor in the ClusterQueue; or
2. is at most the sum of unused ``nominalQuota`` of the flavor in the ClusterQueues of the cohort, and
3. is at most the unused ``nominalQuota + borrowingLimit`` of the flavor in the ClusterQueue
   (no ``borrowingLimit``: up to what the cohort has unused).

(2)-(3) without (1) is *borrowing*. "Unused in the cohort" is the cohort's nominal quota minus the cohort's usage
(a queue that borrows uses up what it borrowed: Kueue's cohort quota minus cohort usage), so with team-b idle
team-a reaches 12 + 9 = 21 and no more, as in the documentation's borrowing example. Here a ClusterQueue is a team's :class:`~.inventory.Quota` for one device type
(``request.team`` names the team), the flavor is the device type, and two quantities are checked that way:

* ``devices`` held at once, at every moment of the job's window (the team's and the cohort's usage moment by
  moment, from the ``team:<team>:<device>`` usage holds every booking records);
* ``device_hours`` booked inside the quota's period [start, end) (each booking's devices x hours in the period).

A team without a quota for the device is not limited. Pure: usage comes in through ``usage(resource, lo, hi)``,
the holds of one usage resource overlapping [lo, hi) (``placement.Held``).
"""

from __future__ import annotations

import datetime as _dt
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from .inventory import Quota

USAGE = "team:"  # prefix of the usage resources: not a capacity, a record of who holds what


def usage_resource(team: str, device: str) -> str:
    return f"{USAGE}{team}:{device}"


@dataclass(frozen=True)
class QuotaAnswer:
    fits: bool
    binding: str  # which quota decides: "team X h100-sxm devices" ...
    text: str  # the reason (refused) or how it fits (within nominal / borrowing)


Usage = Callable[[str, _dt.datetime, _dt.datetime], Sequence[Any]]  # -> items with start, end, amount


def _at(items: Sequence[Any], p: _dt.datetime) -> float:
    return float(sum(i.amount for i in items if i.start <= p < i.end))


def _hours_in(items: Sequence[Any], lo: _dt.datetime, hi: _dt.datetime) -> float:
    return sum(i.amount * max(0.0, (min(i.end, hi) - max(i.start, lo)).total_seconds()) / 3600 for i in items)


def _kueue(own: float, ask: float, nominal: float, cohort_unused: float, limit: float | None) -> str | None:
    """Which of Kueue's conditions admits ``ask`` ("nominal", "borrow") or None."""
    if own + ask <= nominal + 1e-9:
        return "nominal"
    cap = nominal + limit if limit is not None else float("inf")
    if ask <= cohort_unused + 1e-9 and own + ask <= cap + 1e-9:
        return "borrow"
    return None


def check_quota(team: str | None, device: str, devices: int, start: _dt.datetime, end: _dt.datetime,
                quotas: Sequence[Quota], usage: Usage) -> QuotaAnswer | None:
    """The quota answer for ``devices`` x ``device`` held by ``team`` over [start, end); None when no quota applies."""
    mine = next((q for q in quotas if team and q.team == team and q.device == device), None)
    if mine is None:
        return None
    members = [q for q in quotas if q.device == device and (q is mine or (mine.cohort and q.cohort == mine.cohort))]
    name = f"team {team!r} {device}"
    notes: list[str] = []
    if mine.devices is not None:
        held = {q.team: list(usage(usage_resource(q.team, device), start, end)) for q in members}
        points = {start} | {i.start for its in held.values() for i in its if start < i.start < end}
        worst: tuple[str, float, float, float] | None = None
        borrowed = 0.0
        for p in sorted(points):
            own = _at(held[mine.team], p)
            unused = sum((q.devices or 0) - _at(held[q.team], p) for q in members if q.devices is not None)
            how = _kueue(own, devices, mine.devices, unused, mine.borrowing_limit)
            if how is None:
                worst = (p.strftime("%Y-%m-%d %H:%M"), own, unused, float(mine.devices))
                break
            if how == "borrow":
                borrowed = max(borrowed, own + devices - mine.devices)
        if worst is not None:
            at, own, unused, nom = worst
            lim = "no borrowing limit" if mine.borrowing_limit is None else f"borrowing limit {mine.borrowing_limit}"
            cohort = f"cohort {mine.cohort!r} has {unused:g} unused" if mine.cohort else "no cohort to borrow from"
            return QuotaAnswer(False, f"{name} devices", f"quota of {name}: {own:g} held + {devices} asked at {at} "
                               f"> nominal {nom:g}; {cohort} ({lim})")
        notes.append(f"borrows {borrowed:g} {device} from cohort {mine.cohort!r} (nominal {mine.devices})"
                     if borrowed else f"within {name} nominal quota of {mine.devices} devices")
    if mine.device_hours is not None:
        lo = mine.start or _dt.datetime.min
        hi = mine.end or _dt.datetime.max
        ask = devices * max(0.0, (min(end, hi) - max(start, lo)).total_seconds()) / 3600
        if ask > 0:
            booked = {q.team: _hours_in(usage(usage_resource(q.team, device), lo, hi), lo, hi) for q in members}
            unused = sum((q.device_hours or 0) - booked[q.team] for q in members if q.device_hours is not None)
            how = _kueue(booked[mine.team], ask, mine.device_hours, unused, mine.borrowing_limit_hours)
            period = f" in {lo:%Y-%m-%d}..{hi:%Y-%m-%d}" if mine.start or mine.end else ""
            if how is None:
                cohort = f"cohort {mine.cohort!r} has {unused:,.0f} unused" if mine.cohort else \
                    "no cohort to borrow from"
                return QuotaAnswer(False, f"{name} device-hours", f"quota of {name}: {booked[mine.team]:,.0f} "
                                   f"device-hours booked{period} + {ask:,.0f} asked > nominal "
                                   f"{mine.device_hours:,.0f}; {cohort}")
            notes.append(f"borrows device-hours from cohort {mine.cohort!r}" if how == "borrow" else
                         f"{booked[mine.team] + ask:,.0f} of {mine.device_hours:,.0f} device-hours{period}")
    return QuotaAnswer(True, f"{name}", "; ".join(notes))
