"""Small helpers shared by the job planners: a section builder and the assumption/warning accumulator."""

from __future__ import annotations

import datetime as _dt
import math
from typing import Any

from ..request.spec import Deadline, Job, Request
from ..result import Assumption, Notes
from .result import Figure, Section


class Sec:
    """Collects the figures of one section in order."""

    def __init__(self, key: str, title: str) -> None:
        self.key, self.title = key, title
        self.figures: list[Figure] = []
        self.notes: list[str] = []

    def add(self, key: str, label: str, value: Any, unit: str = "", formula: str = "", source: str = "") -> Any:
        self.figures.append(Figure(key, label, value, unit, formula, source))
        return value

    def value(self, key: str, default: Any = None) -> Any:
        f = next((x for x in self.figures if x.key == key), None)
        return default if f is None or f.value is None else f.value

    def note(self, text: str) -> None:
        self.notes.append(text)

    def build(self) -> Section:
        return Section(self.key, self.title, tuple(self.figures), tuple(self.notes))


class JobNotes(Notes):
    """Assumptions (each default named), warnings, FAQ advice and facts of one job."""

    given_why = "given in the request"

    def __init__(self) -> None:
        super().__init__()
        self.advice: list[str] = []
        self.facts: dict[str, Any] = {}


def deadline_seconds(job: Job, req: Request, today: _dt.date, notes: JobNotes) -> float | None:
    """Seconds from the job's start to its deadline (a date deadline without a start counts from today)."""
    d: Deadline | None = job.deadline
    if d is None:
        return None
    if d.seconds is not None:
        return d.seconds
    start = job.start or req.start
    if start is None:
        start = today
        notes.assumptions.append(Assumption("start", today.isoformat(), True, "no start date given: counted from "
                                            "the day the plan was made"))
    if d.date is None:  # pragma: no cover - a Deadline holds a date or seconds
        return None
    return float((d.date - start).days * 86400)


def geometric_points(low: int, high: int, also: int | None = None, n_max: int = 8) -> list[int]:
    """Powers of two from ``low`` to ``high`` (plus ``also``), at most ``n_max`` points, for chart sweeps."""
    pts: list[int] = []
    x = max(1, low)
    while x <= high and len(pts) < 32:
        pts.append(x)
        x *= 2
    if also is not None and also not in pts:
        pts.append(also)
    pts = sorted(set(pts))
    if len(pts) > n_max:
        step = math.ceil(len(pts) / n_max)
        keep = set(pts[::step])
        if also is not None:
            keep.add(also)
        pts = sorted(keep)
    return pts


# the cost-per-option chart's mark on the request's own option where the plan's memory check says it does not fit
# (its section memory's 'fits' False): a price of hardware the job does not run on is no real option (probe24 D5)
NOT_FITTING = ", does not fit"
