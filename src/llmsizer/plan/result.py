"""The plan objects: per job and in total, figures with their formulas, checks with severity, chart data.

Renderers (terminal, Markdown, HTML, JSON) only read these objects; ``Plan.to_dict()`` is the stable JSON
structure (``schema_version`` bumps on incompatible changes). Figures hold plain numbers in base units; the
``unit`` names how to show them:

====================  =============================================================
unit                  meaning / display
====================  =============================================================
``B``                 memory bytes, shown binary (GiB)
``B_disk``            disk or transfer bytes, shown decimal (GB, TB) as disks are sold
``B/s``               bytes per second, shown decimal (GB/s) and in bits (Gb/s)
``s``                 seconds, shown as min / h / days
``USD``, ``USD/h``    US dollars, per hour
``tokens``, ``count``, ``steps``, ``FLOP``, ``1/s``, ``share``, ``bool``, ``text``
====================  =============================================================
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..estimate.fit import devices_text, worst_copy_machines
from ..result import SCHEMA_VERSION, Assumption, Estimate, json_data

SEVERITIES = ("error", "warning", "info")


@dataclass(frozen=True)
class Figure:
    """One number of the plan: value in base units, how it was computed and from what source."""

    key: str
    label: str
    value: Any
    unit: str = ""
    formula: str = ""
    source: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {"key": self.key, "label": self.label, "value": self.value, "unit": self.unit,
                "formula": self.formula, "source": self.source}


@dataclass(frozen=True)
class Section:
    key: str
    title: str
    figures: tuple[Figure, ...] = ()
    notes: tuple[str, ...] = ()

    def get(self, key: str) -> Figure | None:
        return next((f for f in self.figures if f.key == key), None)

    def value(self, key: str, default: Any = None) -> Any:
        f = self.get(key)
        return default if f is None or f.value is None else f.value

    def to_dict(self) -> dict[str, Any]:
        return {"key": self.key, "title": self.title, "figures": [f.to_dict() for f in self.figures],
                "notes": list(self.notes)}


@dataclass(frozen=True)
class Series:
    name: str
    points: tuple[tuple[float, float], ...]

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "points": [list(p) for p in self.points]}


@dataclass(frozen=True)
class Chart:
    """Data for one chart. ``kind``: 'lines' (series of (x, y) points), 'stacked-bars' (one bar per category;
    each series gives a segment per category as (category index, value)), 'bars' (one series, (index, value)).
    ``markers`` are horizontal reference lines (label, y); ``limits`` per-category reference ticks."""

    id: str
    title: str
    kind: str
    x_label: str
    y_label: str
    y_unit: str
    series: tuple[Series, ...]
    x_unit: str = ""
    categories: tuple[str, ...] = ()
    markers: tuple[tuple[str, float], ...] = ()
    limits: tuple[tuple[int, float], ...] = ()
    job: str | None = None
    note: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.id, "title": self.title, "kind": self.kind, "job": self.job, "x_label": self.x_label,
                "x_unit": self.x_unit, "y_label": self.y_label, "y_unit": self.y_unit,
                "categories": list(self.categories), "series": [s.to_dict() for s in self.series],
                "markers": [list(m) for m in self.markers], "limits": [list(lim) for lim in self.limits],
                "note": self.note}


@dataclass(frozen=True)
class Check:
    """A problem or advice a careful reviewer would raise. ``severity``: error (fix before resources can be
    agreed), warning (should be addressed), info (advice)."""

    id: str
    severity: str
    title: str
    message: str
    job: str | None = None
    field: str | None = None
    line: int | None = None
    advice: str = ""

    def __post_init__(self) -> None:
        if self.severity not in SEVERITIES:
            raise ValueError(f"unknown severity {self.severity}")

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.id, "severity": self.severity, "title": self.title, "message": self.message,
                "job": self.job, "field": self.field, "line": self.line, "advice": self.advice}


@dataclass(frozen=True)
class Hardware:
    """The hardware a job is planned on: what the request names, or what llmsizer suggests."""

    origin: str  # requested | suggested | none
    device: str | None = None
    device_name: str = ""
    device_kind: str = ""
    count: int = 0
    nodes: int = 1
    instance: str | None = None
    memory_per_device: int | None = None  # usable bytes before headroom: the JSON's device_memory
    price_per_hour: float | None = None
    price_basis: str = "unknown"
    pool: str | None = None
    link_bandwidth: float | None = None  # between the devices of one machine, per direction [B/s]
    node_bandwidth: float | None = None  # of each machine to the others [B/s]
    engine: str | None = None
    tensor_parallel: int = 1
    # pipeline stages of each replica (fit's pipeline_parallel: a replica is tensor_parallel x pipeline_parallel devices,
    # count / replicas); 1: none, left out of the JSON as fit --json leaves it out
    pipeline_parallel: int = 1
    # data-parallel ranks of each replica, the routed experts split over all of them (fit's data_parallel,
    # expert_parallel: a replica is tensor_parallel x data_parallel devices); 1 / False: none, left out of the JSON
    data_parallel: int = 1
    expert_parallel: bool = False
    replicas: int = 1
    # the devices of one machine where they are not the count's equal share: bare devices named with no
    # resources.nodes are machines of fit's size (plan/hardware.py ``machine_size``: 12 are 8 + 4); 0: count / nodes
    machine_devices: int = 0

    @property
    def per_node(self) -> int:
        """The devices of one machine (its first, where the last is partly filled: fit's 8 + 4 of 12 bare GPUs)."""
        return self.machine_devices or max(1, self.count // max(1, self.nodes))

    @property
    def copy_nodes(self) -> int:
        """The machines one copy of the model spans: its devices (count / replicas: a service's tensor-parallel
        group, a llama.cpp split; a training run's model-parallel group) over the devices of a machine, rounded up,
        at most the machines there are (estimate/fit.py ``worst_copy_machines``, fit's rule for a degree past a
        machine). 1: each copy runs inside one machine, with no collective between machines."""
        return self.copy_nodes_on(self.per_node)

    def copy_nodes_on(self, per_node: int) -> int:
        """:attr:`copy_nodes` with the copies laid out in rank order on machines of ``per_node`` devices (the provider's
        booking, ``ceil(count / nodes)`` per node: estimate/fit.py ``worst_copy_machines``)."""
        copies = max(1, self.replicas)
        return min(max(1, self.nodes), worst_copy_machines(max(1, self.count // copies), per_node, copies))

    @property
    def label(self) -> str:
        if self.origin == "none" or self.device is None:
            return "no hardware"
        # the one spelling of a devices line (estimate/fit.py devices_text), as recommend's options name theirs
        # each machine a copy of the model only where the replicas are the machines (a service's copies); a job
        # spread over its machines (training, a model split across nodes) names them as machines
        # (a training job has no engine: its data-parallel replicas are one job, never copies)
        return devices_text(self.count, self.device, self.nodes, self.instance,
                            copies=self.replicas == self.nodes and bool(self.engine))

    def to_dict(self) -> dict[str, Any]:
        d = {k: getattr(self, k) for k in self.__dataclass_fields__  # machine_devices: said as per_node
             if k != "machine_devices" and (k != "pipeline_parallel" or self.pipeline_parallel > 1)
             and (k not in ("data_parallel", "expert_parallel") or self.data_parallel > 1)}
        # the memory of one device before any headroom is `device_memory` (docs/nomenclature.md), not fit's
        # memory_per_device (what a workload takes of it); the old key is a deprecated alias, kept for one release
        d["device_memory"] = self.memory_per_device
        d["per_node"] = self.per_node
        d["label"] = self.label
        return d


@dataclass(frozen=True)
class JobPlan:
    name: str
    kind: str
    model: str
    summary: str
    hardware: Hardware
    sections: tuple[Section, ...]
    estimate: Estimate | None = None
    assumptions: tuple[Assumption, ...] = ()
    warnings: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()
    charts: tuple[Chart, ...] = ()
    options: tuple[dict[str, Any], ...] = ()
    facts: dict[str, Any] = field(default_factory=dict)
    # warnings this plan's figures already state (decided in plan/): the text face leaves them out, the JSON keeps them
    said_in_figures: tuple[str, ...] = ()
    # a service's speed estimate at peak: fit's own (estimate/speed_result.py SpeedEstimate), its assumptions and
    # calibrated ranges with their coverage; None for training (its duration is a section) or where there is no fit
    speed: Any = None

    def __post_init__(self) -> None:
        # each warning once (the memory and the speed estimate both carry some, e.g. a newer engine release): every
        # face prints this list as it is
        object.__setattr__(self, "warnings", tuple(dict.fromkeys(self.warnings)))

    def section(self, key: str) -> Section:
        for s in self.sections:
            if s.key == key:
                return s
        return Section(key, key)

    def value(self, section: str, key: str, default: Any = None) -> Any:
        return self.section(section).value(key, default)

    def to_dict(self) -> dict[str, Any]:
        return json_data({"name": self.name, "kind": self.kind, "model": self.model, "summary": self.summary,
                "hardware": self.hardware.to_dict(), "sections": [s.to_dict() for s in self.sections],
                "memory_estimate": self.estimate.to_dict() if self.estimate else None,
                "speed_estimate": self.speed.to_dict() if self.speed is not None else None,
                "assumptions": [a.to_dict() for a in self.assumptions], "warnings": list(self.warnings),
                "notes": list(self.notes), "charts": [c.to_dict() for c in self.charts],
                "options": list(self.options), "facts": dict(self.facts)})


@dataclass(frozen=True)
class Plan:
    """A checked plan for a whole request."""

    title: str
    source: str
    jobs: tuple[JobPlan, ...]
    totals: Section
    checks: tuple[Check, ...]
    charts: tuple[Chart, ...] = ()
    notes: tuple[str, ...] = ()
    assumptions: tuple[Assumption, ...] = ()
    request: dict[str, Any] = field(default_factory=dict)

    def job(self, name: str) -> JobPlan:
        for j in self.jobs:
            if j.name == name:
                return j
        raise KeyError(name)

    def checks_of(self, severity: str) -> tuple[Check, ...]:
        return tuple(c for c in self.checks if c.severity == severity)

    @property
    def ok(self) -> bool:
        """True when no check has severity 'error'."""
        return not self.checks_of("error")

    def summary_counts(self) -> dict[str, int]:
        """What a plan's summary counts, the one rule of every face (text, Markdown, HTML, notebook): the request
        checks by severity (``error``, ``warning``, ``info``) and ``job_warnings``, the warnings the jobs carry
        (each printed under its job, apart from the checks), so a summary never reads "0 warning(s)" or "no
        problems" above warning lines (probe28 D6)."""
        counts = {s: len(self.checks_of(s)) for s in SEVERITIES}
        counts["job_warnings"] = sum(len(j.warnings) for j in self.jobs)
        # of them, those a job's figures already state (the text face prints them as the figure, not a warning line)
        counts["job_warnings_in_figures"] = sum(len(set(j.warnings) & set(j.said_in_figures)) for j in self.jobs)
        return counts

    def summary_line(self, figures_apart: bool = False) -> str:
        """The summary in words, naming what each count counts: 'request checks: 0 error(s), 0 warning(s), 1
        note(s); job warnings: 2 (under each job)'. ``figures_apart``: the face prints a warning its figures state
        as the figure only (the text face, JobPlan.said_in_figures), and the line says how many."""
        c = self.summary_counts()
        n, said = c["job_warnings"], c["job_warnings_in_figures"] if figures_apart else 0
        where = ("" if not n else " (under each job)" if not said else " (stated by the jobs' figures)" if said == n
                 else f" ({n - said} under the jobs, {said} stated by their figures)")
        return (f"request checks: {c['error']} error(s), {c['warning']} warning(s), {c['info']} note(s); "
                f"job warnings: {n}{where}")

    def to_dict(self) -> dict[str, Any]:
        # the summary's counts (summary_counts, the one rule every face reads): the request checks by severity, and
        # the warnings the jobs carry beside them (review38 N2: the JSON recounted the checks itself and had no
        # job warnings count)
        summary = self.summary_counts()
        counts = {s: summary[s] for s in SEVERITIES}
        return json_data({"schema_version": SCHEMA_VERSION, "kind": "plan", "title": self.title, "source": self.source,
                "ok": self.ok, "check_counts": counts, "job_warning_count": summary["job_warnings"],
                "checks": [c.to_dict() for c in self.checks],
                "totals": self.totals.to_dict(), "jobs": [j.to_dict() for j in self.jobs],
                "charts": [c.to_dict() for c in self.charts], "notes": list(self.notes),
                "assumptions": [a.to_dict() for a in self.assumptions], "request": self.request})

    def __str__(self) -> str:
        """The summary ``llmsizer plan`` prints: checks, each job's figures, totals."""
        from ..render.notebook import plan_text
        return plan_text(self)

    def _repr_html_(self) -> str:
        """Jupyter's rendering: checks, totals and each job's figures, assumptions and warnings (escaped HTML)."""
        from ..render.notebook import plan_html
        return plan_html(self)
