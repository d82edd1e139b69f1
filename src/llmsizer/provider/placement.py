"""Where and when each job of a request fits in a provider's inventory, given the bookings already made.

Pure logic, no I/O. A booking holds *items*: an amount of one resource over a time interval. Resources are named

===================  ========================================  ================================
resource             capacity                                  held by
===================  ========================================  ================================
``node:<id>``        the node's devices                        devices per node, whole run
``ram:<id>``         the node's RAM [B]                        CPU jobs: their memory need;
                                                               GPU jobs: the node's RAM share
``storage:<id>``     the pool's capacity [B]                   fixed data for the whole run, plus
                                                               checkpoints in steps as they accumulate
``addr:<site>``      the site's public/fixed addresses         1 when access.fixed_address
``seg:<site>``       the site's isolated network segments      1 when access.isolation is not none
===================  ========================================  ================================

Rules: a job runs only at a site its data may sit at (policy: data with ``offsite_allowed: false``, or
confidential/restricted data that does not state it, never at a ``partner`` site; data more sensitive than a
site's ``max_sensitivity`` never there); a training job runs only on nodes labelled ``training``, a service only on ``serving`` nodes, and a
node never hosts a training job and a service at the same time; a multi-node training job, and a service whose
one copy of the model spans machines (``JobNeed.one_fabric``), takes all its nodes from one fabric; a job that states no maintenance window of its own does not run across a provider's
maintenance window on its nodes, and a service that states its own maintenance windows or interruptible periods
accepts the provider's only inside one of them; storage is checked over the whole run (the peak of fixed data + accumulated
checkpoints against the pool's capacity minus what other bookings hold at each moment).
"""

from __future__ import annotations

import bisect
import datetime as _dt
import math
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Protocol

from ..request.fields import SENSITIVITY
from ..request.windows import Agreement
from ..units import format_bits, format_bytes, format_seconds
from .inventory import SERVING, TRAINING, Inventory, Node, Site
from .quota import USAGE, check_quota, usage_resource

SERVICE_HORIZON = 365 * 86400.0  # the span of a timeline when every booking is open-ended
#: an ongoing service (``service.ongoing``, or no ``service.duration``) holds its devices until it is released:
#: its holds end at this moment, so no later booking can take them
ONGOING_END = _dt.datetime(9999, 1, 1)
MAX_STORAGE_STEPS = 20
# How far ahead ``earliest`` looks for a start, and how many candidate starts it tries. Search bounds, not
# measurements: a start more than two years out is no window a capacity plan acts on (twice SERVICE_HORIZON, the
# span of a timeline of open-ended bookings), and each candidate places the job once (``try_window``), so MAX_TRIES
# bounds the time one answer takes. Both are said where no window is found (NO_WINDOW: `capacity check`'s
# text and `capacity book`'s refusal).
EARLIEST_HORIZON = 2 * 365 * 86400.0
MAX_TRIES = 400
NO_WINDOW = (f"no window found within {format_seconds(EARLIEST_HORIZON)} (at most {MAX_TRIES} later starts tried: "
             "the moments a hold or maintenance window ends)")


def format_amount(resource: str, amount: float) -> str:
    """An amount of ``resource`` for people, through the one bytes formatter (units.format_bytes): a storage pool's
    bytes decimal (TB, as disks are sold: the plan's ``B_disk``), a node's RAM binary (GiB, as memory is), devices,
    addresses and segments as counts."""
    kind = resource.split(":", 1)[0]
    if kind == "storage":
        return format_bytes(amount, binary=False)
    if kind == "ram":
        return format_bytes(amount)
    return f"{amount:g}"


@dataclass(frozen=True)
class Item:
    """An amount of one resource held from ``start`` to ``end`` (UTC, end excluded)."""

    resource: str
    amount: float
    start: _dt.datetime
    end: _dt.datetime

    def to_dict(self) -> dict[str, Any]:
        return {"resource": self.resource, "amount": self.amount, "start": self.start.isoformat(),
                "end": self.end.isoformat()}


@dataclass(frozen=True)
class Booking:
    """A reservation already made (tentative or confirmed; released ones are not passed here)."""

    id: str
    job: str
    kind: str  # training | inference
    items: tuple[Item, ...]
    state: str = "confirmed"
    device: str = ""  # the catalog device the placement was made on ('' : booked before schema 3 recorded it)
    # the provider maintenance its request agreed to, as recorded at booking (schema 5); None: not recorded (booked
    # before schema 5, or a booking built by hand)
    agreement: Agreement | None = None
    # the machines one copy of the model spans (JobNeed.copy_nodes), as recorded at booking (schema 6); None: not
    # recorded (booked before schema 6, or a booking built by hand), taken as 1 (each copy inside one machine)
    copy_nodes: int | None = None


@dataclass(frozen=True)
class Quantized:
    """A service re-estimated at a smaller weight format on some devices (plan/inference.py ``quantized_fit``: the
    format recommend's chooser picks, sized by ``fit`` at that format)."""

    weights_format: str
    engine: str
    device_kind: str
    memory_per_device: int  # [B] fit's memory per device (a CPU's: the RAM it holds)
    memory: str  # fit's memory line (render/fit_text.py memory_line): per device against its budget
    # the tensor-parallel layout it was sized at where the request pins one (plan/inference.py at_jobs_degree): the
    # pin, or fit's choice and why the pin does not hold there; '' where none is pinned
    layout: str = ""
    verdict_need_per_device: int = 0  # [B] what fit's verdict compared (estimate/fit.py verdict_need)
    # the better format that fits in memory but misses the job's limits or reading speed (plan/inference.py
    # Alternative.passed_over, the search's sentence); '' where none was passed over
    passed_over: str = ""


@dataclass(frozen=True)
class DeviceFit:
    """A job sized by ``fit`` on some devices of another type (a service: plan/inference.py ``device_fit``, ``fit
    MODEL --device D --count N`` at the plan's engine, weights and peak load; a training run: plan/training.py
    ``device_fit``, ``fit --train``), given only where it fits there."""

    device_kind: str
    memory_per_device: int  # [B] fit's memory per device (a CPU's: the RAM it holds)
    memory: str  # fit's memory line (render/fit_text.py memory_line): per device against its budget
    layout: str = ""  # a service's tensor-parallel layout where the request pins one (as Quantized.layout)
    verdict_need_per_device: int = 0  # [B] what fit's verdict compared (estimate/fit.py verdict_need)


class Replanner(Protocol):
    """The job planned again with its resources naming (device, devices, nodes) and, where given, ``network``: the
    network of each machine to the others [B/s] (its ``resources.network``), as the need the request gets when it
    names them (provider/needs.py ``_replanner``, plan/compose.py)."""

    def __call__(self, device: str, devices: int, nodes: int, network: float | None = None) -> JobNeed: ...


@dataclass(frozen=True)
class JobNeed:
    """What one job needs from the provider, in base units (bytes, seconds)."""

    name: str
    kind: str  # training | inference
    device: str  # catalog device id
    devices: int
    nodes: int = 1
    seconds: float = 3600.0
    start: _dt.datetime = _dt.datetime(2025, 1, 1)
    deadline: _dt.datetime | None = None
    # per device [B], fit's names (docs/nomenclature.md): what the job takes of each device and what a placement
    # books of it (fit's memory_per_device: for a pool engine, vLLM or SGLang, its pool + the CUDA context, taken
    # whole at start whatever the load, so a device it runs on is not shared; a CPU job's is held of its node's RAM),
    # and what the plan's verdict compared (fit's verdict_need_per_device: for a pool engine the workload's share of
    # its pool; else the same number)
    memory_per_device: int = 0
    verdict_need_per_device: int = 0
    device_kind: str = "gpu"
    storage_fixed: int = 0  # [B] held for the whole run
    # disk reserved per checkpoint [B]: the plan's one checkpoint (checkpoint_file_bytes) with the plan's disk
    # headroom (disk_headroom, formulas/storage.py DISK_HEADROOM, eq. (11)) added, as every stored byte is reserved
    checkpoint_bytes: int = 0
    checkpoint_file_bytes: int = 0  # [B] one checkpoint as the plan sizes it (storage "checkpoint_one")
    disk_headroom: float = 0.0  # share added over the plan's storage subtotal (total / subtotal - 1)
    checkpoint_interval: float = 0.0  # [s]
    checkpoints_max: int = 0  # checkpoints held at once (0: no checkpoints)
    fixed_address: bool = False
    isolation: str | None = None
    accepts_maintenance: bool = False
    # the service's agreed windows (service.maintenance_windows and service.interruptible periods): a provider's
    # maintenance on its nodes is accepted only inside one of them; empty: any, when accepts_maintenance
    maintenance_windows: tuple[str, ...] = ()
    # the job's data (request dataset.sensitivity and dataset.offsite_allowed): where it may be placed
    sensitivity: str | None = None
    offsite_allowed: bool | None = None
    # a training run's wall-clock seconds on (device, devices, nodes), from the one duration rule
    # (plan/training.py run_seconds -> estimate/duration.py): how long an alternative device runs. None: not known
    # (alternatives that change the device or the count are then not offered for training)
    run_seconds: Callable[[str, int, int], float | None] | None = field(default=None, compare=False, repr=False)
    # a service re-estimated at a smaller weight format on (device, devices; the RAM per device of that device's
    # largest node, which a CPU holds its model in), from the estimate core (plan/inference.py quantized_fit via
    # provider/needs.py); None: not known (a training run, a hand-made need), and no quantized alternative is offered
    quantized: Callable[[str, int, int], Quantized | None] | None = field(default=None, compare=False, repr=False)
    # the job on (device, devices, nodes; the RAM per device of that device's largest node, which a CPU holds its
    # model in) as `fit` sizes it, from the estimate core (plan/inference.py and plan/training.py device_fit via
    # provider/needs.py); the answer None where it does not fit there; the field None: not known (a hand-made need),
    # and no other device type is offered
    fit_on: Callable[[str, int, int, int], DeviceFit | None] | None = field(default=None, compare=False, repr=False)
    # the request's resources.pool (a pool the job must run in), resources.jurisdiction (where it must run: a
    # site's jurisdiction or one of its regions) and the network per node the plan assumed [B/s] (a multi-node
    # job's fabric must give at least that)
    pool: str | None = None
    jurisdiction: str | None = None
    network: float | None = None
    # the fabric (its id) whose bandwidth the job was planned again at (on_fabric: ``network``, ``seconds`` and the
    # rest of the plan's figures there): a multi-node run whose request states no network, placed on that fabric;
    # '' when the plan's own network (or none) timed it
    timed_on_fabric: str = ""
    ongoing: bool = False  # a service with no planned end: held until released (ONGOING_END)
    # the plan's memory verdict when the job does not fit its device's memory (plan facts "fits" False): why, in one
    # line; '' when it fits or is not known. No window or node can help then.
    memory_verdict: str = ""
    # what binds that verdict (plan facts "binding": estimate/fit.py ``FitResult.binding``): 'memory', 'rate' or
    # 'context window' (the engine will not start past the model's window: no device or node helps)
    memory_binding: str = "memory"
    # a training run the plan could not time (a device with no sourced peak FLOP/s): where ``seconds`` came from
    # (the request's expected_duration), or, with no figure at all, why it cannot be placed; '' when the plan timed it
    duration_basis: str = ""
    duration_verdict: str = ""
    # the plan's warnings on the job (JobPlan.warnings, as `plan` prints them: e.g. a duration timed over the link
    # inside one machine, a lower bound), carried so that `capacity check` and `book` say what the plan says
    warnings: tuple[str, ...] = ()
    team: str | None = None  # request.team: whose quota (inventory quotas) the job counts against
    # the plan's cost [USD] of the job (its facts cost_total: a run's, a service's over its stated duration) and a
    # service's per month (cost_month); None where the plan has no price. Carried into the booking (Figures)
    cost: float | None = None
    cost_per_month: float | None = None
    # the request names the job's hardware (resources.device/instance); False: the plan's device is its suggestion
    # from the whole catalog, and the check sizes the job on the inventory's own device types (on_inventory)
    hardware_named: bool = True
    # the job planned again with its resources naming (device, devices, nodes[, network]), from the plan composer
    # (plan/compose.py make_plan via provider/needs.py): the need the same request gets when it names that hardware.
    # None: not known (a hand-made need); on_inventory's moved need is then used as it is, and a multi-node run
    # whose request states no network keeps the plan's time (fabric_timed)
    replan: Replanner | None = field(default=None, compare=False, repr=False)
    # the machines one copy of the model spans (plan/result.py ``Hardware.copy_nodes``: a service whose tensor
    # parallelism crosses machines, 2 for 405B at TP 16 on 2 x 8 GPUs); 1: each copy inside one machine (a
    # service's replicas, one per machine), or not known (a hand-made need, a booking stored before schema 6)
    copy_nodes: int = 1
    # the machines one tensor-parallel group of a copy spans, laid out as ``copy_nodes`` is (estimate/fit.py
    # ``worst_copy_machines`` on the tensor-parallel degree): 1 where each TP group stays inside a machine and only a
    # copy's pipeline stages cross machines; None: not known (a hand-made need, a re-placed booking)
    tp_nodes: int | None = None
    # the request names its node count (resources.nodes); False: the plan's machines are its own assumption (bare
    # devices laid out on machines of fit's size), so a service may be laid out on the inventory's nodes instead
    nodes_named: bool = True
    # the link between the devices of one machine [B/s, per direction] (plan/result.py Hardware.link_bandwidth): what
    # the plan timed a spanning copy's traffic over when it knows no network between machines; None: not known
    link_bandwidth: float | None = None
    # a service's speed at its peak load as its plan times it (plan facts ttft_peak, tps_user_peak: estimate/fit.py's
    # speed, over the network its request or instance gives, or over the fabric it is placed on: on_fabric): the
    # time to first token [s] and the output tokens/s each user gets; None: not timed (a training run, no speed)
    ttft: float | None = None
    tokens_per_second_per_user: float | None = None

    @property
    def per_node(self) -> int:
        return math.ceil(self.devices / max(1, self.nodes))

    @property
    def one_fabric(self) -> bool:
        """Whether the job's nodes must share one fabric: the job runs collectives between its nodes. A training run
        over several nodes does (its data-parallel gradients at least); a service does where one copy of its model
        spans machines (``copy_nodes`` > 1: its tensor-parallel all-reduces cross the network every layer,
        estimate/fit.py ``machines_spanned``). A service whose copies each fit one machine runs none between them."""
        return self.nodes > 1 and (self.kind == "training" or self.copy_nodes > 1)

    @property
    def end(self) -> _dt.datetime:
        return window_end(self, self.start)

    @property
    def label(self) -> str:
        return TRAINING if self.kind == "training" else SERVING

    @property
    def agreement(self) -> Agreement:
        """The provider maintenance the job accepts (its ``accepts_maintenance`` and ``maintenance_windows``)."""
        return Agreement(self.accepts_maintenance, self.maintenance_windows)

    @property
    def memory_need(self) -> int:
        """Deprecated name of ``verdict_need_per_device`` (the same number), kept for one release."""
        return self.verdict_need_per_device

    @property
    def storage_peak(self) -> int:
        return self.storage_fixed + self.checkpoint_bytes * self.checkpoints_max

    def to_dict(self) -> dict[str, Any]:
        d = {k: getattr(self, k) for k in self.__dataclass_fields__
             if k not in ("run_seconds", "quantized", "fit_on", "replan")}
        for k in ("start", "deadline"):
            d[k] = d[k].isoformat() if d[k] else None
        # memory_need: the deprecated name of verdict_need_per_device, the same number, kept for one release
        d["memory_need"] = self.verdict_need_per_device
        return d


@dataclass(frozen=True)
class Figures:
    """The plan's numbers a booking carries, so it can be reconciled with the plan after booking: those of the need
    it was placed for (provider/needs.py reads them from the plan's facts; nothing here recomputes them). Memory per
    device [B] (fit's ``memory_per_device``), the device count, the run's seconds (None: a service held until
    released), its cost [USD] (the plan's ``cost_total``: a run's, or a service's over its stated duration; None
    when the plan has no price) and a service's cost per month [USD] (``cost_month``)."""

    memory_per_device: int = 0
    devices: int = 0
    seconds: float | None = None
    cost: float | None = None
    cost_per_month: float | None = None

    @classmethod
    def of(cls, need: JobNeed) -> Figures:
        return cls(need.memory_per_device, need.devices, None if need.ongoing else need.seconds, need.cost,
                   need.cost_per_month)

    def to_dict(self) -> dict[str, Any]:
        return {"memory_per_device": self.memory_per_device, "devices": self.devices, "seconds": self.seconds,
                "cost": self.cost, "cost_per_month": self.cost_per_month}


@dataclass(frozen=True)
class Placement:
    job: str
    kind: str
    start: _dt.datetime
    end: _dt.datetime
    site: str
    nodes: tuple[str, ...]
    devices_per_node: int
    device: str
    storage_pool: str | None
    items: tuple[Item, ...]
    quota: str = ""  # how the team's quota admits it (within nominal, or borrowing from the cohort)
    figures: Figures = Figures()  # the plan's numbers, recorded with the booking
    agreement: Agreement = Agreement()  # the provider maintenance the job accepts, recorded with the booking
    copy_nodes: int = 1  # the machines one copy of the model spans (JobNeed.copy_nodes), recorded with the booking

    def to_dict(self) -> dict[str, Any]:
        return {"job": self.job, "kind": self.kind, "start": self.start.isoformat(), "end": self.end.isoformat(),
                "site": self.site, "nodes": list(self.nodes), "devices_per_node": self.devices_per_node,
                "device": self.device, "storage_pool": self.storage_pool, "quota": self.quota,
                "items": [i.to_dict() for i in self.items]}


@dataclass(frozen=True)
class JobCheck:
    """The answer for one job: fits in the requested window or not, why not, and what would."""

    need: JobNeed
    fits: bool
    placement: Placement | None  # in the requested window, else the earliest one found (or None)
    # device|memory|duration|pool|policy|node-size|busy|maintenance|fabric|storage|addresses|isolation
    binding: str | None = None
    reason: str = ""
    alternatives: tuple[str, ...] = ()
    assumption: str = ""  # how the need was chosen when the request names no hardware (on_inventory), else ''
    #: False when the binding constraint does not change with time (device, pool, policy, node size, no storage
    #: pool at the site, ...): no later window can lift it, so "no window found" would be the wrong answer
    waits: bool = True
    #: what the check adds to the plan's warnings on how the placement was sized (timing_note: a run timed on the
    #: fabric it is placed on, or held for the plan's lower bound where the fabric states no bandwidth)
    notes: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {"job": self.need.name, "fits": self.fits, "need": self.need.to_dict(),
                "placement": self.placement.to_dict() if self.placement else None, "binding": self.binding,
                "reason": self.reason, "alternatives": list(self.alternatives), "assumption": self.assumption,
                "waits": self.waits, "notes": list(self.notes)}


def moment_after(t: _dt.datetime, seconds: float, cap: _dt.datetime = ONGOING_END) -> _dt.datetime:
    """``t`` + ``seconds``, or ``cap`` where that moment is past it or past the calendar (Python's datetime ends at
    9999-12-31; a stored booking or a plan's run time may reach beyond): ONGOING_END by default, the store's
    "until released". Every moment computed from a booking or a need's start goes through here, so a far date
    cannot raise OverflowError (the request reader bounds its own dates: request/quantities.py LATEST_DATE)."""
    if not seconds < (cap - t).total_seconds():  # NaN too
        return max(cap, t)
    return t + _dt.timedelta(seconds=seconds)


def window_end(need: JobNeed, start: _dt.datetime) -> _dt.datetime:
    """When ``need`` started at ``start`` ends: ONGOING_END for an ongoing service, else start + its seconds; a run
    that would end past ONGOING_END has no window (:class:`NoFit`, binding 'duration')."""
    if need.ongoing:
        return ONGOING_END
    end = moment_after(start, math.ceil(need.seconds) if math.isfinite(need.seconds) else need.seconds)
    if end >= ONGOING_END:
        raise NoFit("duration", f"the run ({format_seconds(need.seconds)} from {start:%Y-%m-%d}) would end after "
                    f"{ONGOING_END:%Y-%m-%d}, the end of the bookings' calendar", waits=False)
    return end


class NoFit(Exception):
    """No placement: ``binding`` names the constraint. ``waits``: whether a later start could lift it (a booking or
    maintenance window ends); False for what the inventory itself decides (device type, pool, policy, node size, a
    site with no storage pool, addresses or segments)."""

    def __init__(self, binding: str, reason: str, *, waits: bool = True) -> None:
        super().__init__(reason)
        self.binding = binding
        self.reason = reason
        self.waits = waits


# ------------------------------------------------------------------------------------------ capacity over time

def capacities(inv: Inventory) -> dict[str, float]:
    cap: dict[str, float] = {}
    for n in inv.nodes:
        cap[f"node:{n.id}"] = n.devices
        if n.ram:
            cap[f"ram:{n.id}"] = n.ram
    for s in inv.storage:
        cap[f"storage:{s.id}"] = s.capacity
    for site in inv.sites:
        cap[f"addr:{site.id}"] = site.public_addresses
        cap[f"seg:{site.id}"] = site.isolated_segments
    return cap


def peak(items: Iterable[Item], lo: _dt.datetime, hi: _dt.datetime) -> float:
    """The largest total amount that ``items`` (of one resource) hold at any moment in [lo, hi)."""
    its = [i for i in items if i.start < hi and i.end > lo]
    points = {lo} | {i.start for i in its if lo <= i.start < hi}
    return max((sum(i.amount for i in its if i.start <= p < i.end) for p in points), default=0.0)


def overflow(new: Sequence[Item], existing: Iterable[Item], cap: dict[str, float]) -> list[tuple[str, float, float]]:
    """(resource, peak load, capacity) for each resource that ``new`` items would push over its capacity."""
    by_res: dict[str, list[Item]] = {}
    for i in existing:
        by_res.setdefault(i.resource, []).append(i)
    out = []
    for res in dict.fromkeys(i.resource for i in new if not i.resource.startswith(USAGE)):
        mine = [i for i in new if i.resource == res]
        load = 0.0
        for m in mine:
            load = max(load, peak([*by_res.get(res, []), *mine], m.start, m.end))
        c = cap.get(res, 0.0)
        if load > c + 1e-9:
            out.append((res, load, c))
    return out


def storage_items(need: JobNeed, pool: str, start: _dt.datetime, end: _dt.datetime) -> list[Item]:
    """Fixed data for the whole run, then checkpoints added in at most 20 steps as they are written (each step
    reserved from the time of its first checkpoint: slightly early, never late)."""
    res = f"storage:{pool}"
    items = [Item(res, need.storage_fixed, start, end)] if need.storage_fixed else []
    n = need.checkpoints_max
    if n and need.checkpoint_bytes and need.checkpoint_interval > 0:
        steps = min(n, MAX_STORAGE_STEPS)
        prev = 0
        for s in range(1, steps + 1):
            upto = round(s * n / steps)
            t = moment_after(start, need.checkpoint_interval * (prev + 1))
            if t < end and upto > prev:
                items.append(Item(res, need.checkpoint_bytes * (upto - prev), t, end))
            prev = upto
    return items


# ------------------------------------------------------------------------------------------ one window

def site_refusal(need: JobNeed, site: Site) -> str | None:
    """Why ``need`` may not run at ``site`` (None: it may): its jurisdiction, or where its data may sit."""
    if need.jurisdiction:
        want = need.jurisdiction.casefold()
        if want != site.jurisdiction.casefold() and want not in {r.casefold() for r in site.regions}:
            where = ", ".join(x for x in (site.jurisdiction, *site.regions) if x) or "no stated jurisdiction"
            return f"{site.id} is in {where}; the job must run in {need.jurisdiction} (resources.jurisdiction)"
    data = f"the data ({need.sensitivity})" if need.sensitivity else "the data"
    if site.operator == "partner":
        if need.offsite_allowed is False:
            return f"{site.id} is a partner data centre and {data} may not sit off-site (offsite_allowed: false)"
        if need.offsite_allowed is None and need.sensitivity in ("confidential", "restricted"):
            return (f"{site.id} is a partner data centre and {data} does not state offsite_allowed "
                    "(say whether it may sit in a partner data centre)")
    if need.sensitivity in SENSITIVITY and SENSITIVITY.index(need.sensitivity) > SENSITIVITY.index(
            site.max_sensitivity):
        return f"{site.id} is cleared for data up to {site.max_sensitivity}, {data} is more sensitive"
    return None


class Held:
    """The holds of the bookings as an interval index: per resource, the holds sorted by start and the longest
    hold's length there, so the holds overlapping ``[lo, hi)`` are those starting in ``[lo - longest, hi)``
    (two bisections) that end after ``lo``. Built once per check, O(n log n); a query costs O(log n + k) instead
    of a pass over every booking. ``add`` keeps it sorted (the jobs of one request held while checking the next)."""

    def __init__(self, bookings: Iterable[Booking] = ()) -> None:
        self.bookings: list[Booking] = []
        self._starts: dict[str, list[_dt.datetime]] = {}
        self._items: dict[str, list[tuple[Item, str]]] = {}  # (hold, kind of its booking), sorted by start
        self._longest: dict[str, _dt.timedelta] = {}
        grouped: dict[str, list[tuple[Item, str]]] = {}
        for bk in bookings:
            self.bookings.append(bk)
            for i in bk.items:
                grouped.setdefault(i.resource, []).append((i, bk.kind))
        for res, its in grouped.items():
            its.sort(key=lambda e: e[0].start)
            self._items[res] = its
            self._starts[res] = [e[0].start for e in its]
            self._longest[res] = max(e[0].end - e[0].start for e in its)

    def add(self, bk: Booking) -> None:
        self.bookings.append(bk)
        for i in bk.items:
            starts = self._starts.setdefault(i.resource, [])
            k = bisect.bisect_right(starts, i.start)
            starts.insert(k, i.start)
            self._items.setdefault(i.resource, []).insert(k, (i, bk.kind))
            self._longest[i.resource] = max(self._longest.get(i.resource, _dt.timedelta(0)), i.end - i.start)

    def overlapping(self, res: str, lo: _dt.datetime, hi: _dt.datetime) -> list[tuple[Item, str]]:
        """(hold, kind) of every hold on ``res`` that overlaps ``[lo, hi)``."""
        starts = self._starts.get(res)
        if not starts:
            return []
        its = self._items[res]
        longest = self._longest[res]
        first = 0 if lo - _dt.datetime.min <= longest else bisect.bisect_right(starts, lo - longest)
        last = bisect.bisect_left(starts, hi)
        return [e for e in its[first:last] if e[0].end > lo]

    def overflow(self, new: Sequence[Item], cap: dict[str, float]) -> list[tuple[str, float, float]]:
        """:func:`overflow` of ``new`` against the indexed holds."""
        out = []
        for res in dict.fromkeys(i.resource for i in new if not i.resource.startswith(USAGE)):
            mine = [i for i in new if i.resource == res]
            lo, hi = min(i.start for i in mine), max(i.end for i in mine)
            near = [e[0] for e in self.overlapping(res, lo, hi)]
            load = max(peak([*near, *mine], m.start, m.end) for m in mine)
            c = cap.get(res, 0.0)
            if load > c + 1e-9:
                out.append((res, load, c))
        return out

    def ends(self, resources: Iterable[str], lo: _dt.datetime, hi: _dt.datetime) -> set[_dt.datetime]:
        """The moments in ``(lo, hi)`` when a hold on one of ``resources`` ends."""
        out: set[_dt.datetime] = set()
        for res in resources:
            for i, _ in self.overlapping(res, lo, hi):
                if lo < i.end < hi:
                    out.add(i.end)
        return out


def as_held(bookings: Sequence[Booking] | Held) -> Held:
    return bookings if isinstance(bookings, Held) else Held(bookings)


def _capacities(inv: Inventory) -> dict[str, float]:
    """:func:`capacities`, computed once per inventory (an inventory never changes after it is read)."""
    cap: dict[str, float] | None = inv.__dict__.get("_capacities")
    if cap is None:
        cap = capacities(inv)
        inv.__dict__["_capacities"] = cap
    return cap


def suitable(need: JobNeed, inv: Inventory) -> list[Node]:
    """The nodes that could ever take ``need`` (device type, pool, data policy, node size), whatever the time;
    raise :class:`NoFit` naming the constraint when none can (waiting does not help then)."""
    per_node = need.per_node
    of_type = [n for n in inv.nodes if n.device == need.device]
    if not of_type:
        have = ", ".join(inv.device_types) or "none"
        raise NoFit("device", f"no node holds {need.device} (this inventory has: {have})", waits=False)
    if need.memory_verdict:
        raise NoFit(need.memory_binding, need.memory_verdict, waits=False)
    if need.duration_verdict:
        raise NoFit("duration", need.duration_verdict, waits=False)
    working = [n for n in of_type if not n.out_of_service]
    if not working:
        down = _few([f"{n.id}: {n.out_of_service}" for n in of_type], 2)
        raise NoFit("device", f"every {need.device} node is out of service ({down}): none takes new work until "
                    "its out_of_service: is removed from the inventory", waits=False)
    of_type = working
    pooled = [n for n in of_type if need.label in n.pools]
    if not pooled:
        raise NoFit("pool", f"the {len(of_type)} {need.device} node(s) are not in the {need.label} pool "
                    f"(training and serving run on separate resources): add {need.label} to their pools: in the "
                    f"inventory, or import them with `llmsizer capacity import --pools {need.label}`", waits=False)
    if need.pool:
        named = [n for n in pooled if need.pool in n.pools]
        if not named:
            pools = sorted({p for n in inv.nodes for p in n.pools} - {TRAINING, SERVING})
            raise NoFit("pool", f"the request names pool {need.pool!r} (resources.pool); no {need.label} "
                        f"{need.device} node is in it (named pools of this inventory besides training and serving: "
                        f"{', '.join(pools) or 'none'})", waits=False)
        pooled = named
    refused_at = {s.id: r for s in inv.sites if (r := site_refusal(need, s)) is not None}
    allowed = [n for n in pooled if n.site not in refused_at]
    if not allowed:
        why = "; ".join(refused_at[s] for s in dict.fromkeys(n.site for n in pooled))
        raise NoFit("policy", f"no {need.label} {need.device} node at a site the job may run at: {why}", waits=False)
    big = [n for n in allowed if n.devices >= per_node]
    if not big:
        raise NoFit("node-size", f"{per_node} {need.device} per node needed; the largest {need.label} node has "
                    f"{max(n.devices for n in allowed)}", waits=False)
    ram = need.memory_per_device * per_node if need.device_kind == "cpu" else 0  # what _node_items holds of ram:<id>
    if ram and all(n.ram and n.ram < ram for n in big):
        # a CPU job's memory is the node's RAM: a node with less never takes it, whatever is booked (not "busy")
        raise NoFit("node-size", f"{format_bytes(ram)} of RAM per node needed (the plan's memory per device x "
                    f"{per_node}); the largest "
                    f"{need.label} {need.device} node has {format_bytes(max(n.ram or 0 for n in big))}", waits=False)
    big = [n for n in big if not ram or not n.ram or n.ram >= ram]
    if need.nodes > 1 and need.network:
        fabrics = {f.id: f for site in inv.sites for f in site.fabrics}
        slow = {n.fabric for n in big if n.fabric and (fabrics[n.fabric].bandwidth or 0) < need.network
                and fabrics[n.fabric].bandwidth is not None}
        fast = [n for n in big if n.fabric not in slow]
        if not fast:
            have = ", ".join(f"{f} {format_bits(fabrics[f].bandwidth or 0, 'Gb/s')}" for f in sorted(slow))
            raise NoFit("fabric", f"a {need.nodes}-node job needs {format_bits(need.network, 'Gb/s')} per node between "
                        f"its nodes (the network its plan assumes); the fabrics of the suitable nodes give less "
                        f"({have})", waits=False)
        big = fast
    if need.one_fabric:
        # a job with collectives between its nodes stays inside one fabric (try_window's rule): the inventory
        # decides how many suitable nodes share one, so too few is no constraint a later window lifts
        share: dict[tuple[str, str], int] = {}
        for n in big:
            if n.fabric is not None:
                share[(n.site, n.fabric)] = share.get((n.site, n.fabric), 0) + 1
        most = max(share.values(), default=0)
        if most < need.nodes:
            bare = [n.id for n in big if n.fabric is None]
            fix = (f"; these nodes state no fabric: {_few(bare)} (name the fabric their network forms under the "
                   "site's fabrics: and give each node fabric: in the inventory; `capacity import` writes none)"
                   if bare else "")
            raise NoFit("fabric", f"{len(big)} suitable {need.device} node(s), but at most {most} on one fabric; a "
                        f"{_why_fabric(need)} must stay inside one fabric{fix}", waits=False)
    return big


def _why_fabric(need: JobNeed) -> str:
    """Why ``need`` stays inside one fabric (:attr:`JobNeed.one_fabric`), as the subject of a refusal."""
    if need.kind == "training":
        return f"{need.nodes}-node training job"
    return (f"{need.nodes}-node service whose one copy of the model spans {need.copy_nodes} machines "
            f"({crossing(need.tp_nodes)})")


def crossing(tp_nodes: int | None) -> str:
    """What crosses between the machines one copy of a served model spans, in words: the one wording of the check's
    refusal and the scheduler export's comment. Megatron-LM's layout, which vLLM and SGLang follow, puts the
    tensor-parallel ranks of a stage next to each other, so a copy of TP t x PP p on machines of n devices keeps each
    TP group in one machine when its ``tp_nodes`` (:attr:`JobNeed.tp_nodes`) is 1: then only the pipeline stages'
    activations cross, point-to-point, once per stage boundary; where a TP group itself spans machines, its
    all-reduces cross every layer. None: not known (a booking records only the machines a copy spans)."""
    if tp_nodes is None:
        return ("model parallel across machines: pipeline sends, or tensor-parallel all-reduces where a tensor-"
                "parallel group itself spans machines")
    if tp_nodes <= 1:
        return ("pipeline stages across machines: point-to-point sends between them; each tensor-parallel group "
                "stays inside one machine")
    return (f"tensor parallel across machines: each tensor-parallel group spans {tp_nodes} machines, all-reduces "
            "between them every layer")


def _few(ids: Sequence[str], shown: int = 4) -> str:
    """``ids`` joined, the first ``shown`` of them and how many more."""
    more = f" and {len(ids) - shown} more" if len(ids) > shown else ""
    return ", ".join(ids[:shown]) + more


def _maintenance_ok(need: JobNeed, inv: Inventory, nodes: list[Node], start: _dt.datetime,
                    end: _dt.datetime) -> list[Node]:
    """``nodes`` without those whose maintenance in [start, end) the job does not accept; NoFit when none is left."""
    agreed = need.agreement
    if agreed.accepts and not agreed.windows:
        return nodes
    hit = [m for m in inv.maintenance if m.start < end and m.end > start and not agreed.covers(m.start, m.end)]
    if not hit:
        return nodes
    down = {nid for m in hit for nid in m.nodes}
    ok = [n for n in nodes if n.id not in down]
    if not ok:
        m = next(m for m in hit if set(m.nodes) & {n.id for n in nodes})
        outside = f" outside the job's agreed maintenance windows ({'; '.join(agreed.windows)})" \
            if agreed.accepts else ""
        raise NoFit("maintenance", f"every suitable node has a maintenance window in the run "
                    f"({m.start:%Y-%m-%d %H:%M}-{m.end:%Y-%m-%d %H:%M}{' ' + m.note if m.note else ''}){outside}")
    return ok


def _node_busy_until(need: JobNeed, n: Node, held: Held, cap: dict[str, float], start: _dt.datetime,
                     end: _dt.datetime) -> _dt.datetime | None:
    """None when node ``n`` can take its share of ``need`` over [start, end); else a moment before which it
    cannot (for any later start t' below it the window still contains a moment that is over capacity, or a hold
    of the other kind: such a hold started before ``end`` <= t' + duration and ends after t')."""
    until: _dt.datetime | None = None
    other = [i.end for i, kind in held.overlapping(f"node:{n.id}", start, end) if kind != need.kind]
    if other:
        until = max(other)  # separation: no training and serving on one node at once
    for i in _node_items(need, n, start, end):
        near = [e[0] for e in held.overlapping(i.resource, start, end)]
        if not near:
            continue
        room = cap.get(i.resource, 0.0) - i.amount + 1e-9
        for p in {start} | {h.start for h in near if h.start > start}:
            active = [h for h in near if h.start <= p < h.end]
            if sum(h.amount for h in active) > room:
                # every hold active at p is still active at any start t' in (p, min end): still over capacity
                bound = min(h.end for h in active)
                until = bound if until is None else max(until, bound)
    return until


def fabric_timed(need: JobNeed) -> bool:
    """Whether ``need`` is timed on the fabric it is placed on (:func:`on_fabric`): a job over several machines
    whose plan states no network between them (``need.network`` None: the request gives no ``resources.network``
    and its device no instance network), which can be planned again (``replan``): a training run, whose plan times
    its data-parallel traffic over one machine's link, a lower bound (plan/training.py); a service whose one copy
    spans machines (``copy_nodes`` > 1), whose plan times the tensor-parallel all-reduces or pipeline sends that
    cross them over that link (estimate/fit.py ``node_network``: none known)."""
    spans = need.kind == "training" or need.copy_nodes > 1
    return spans and need.nodes > 1 and need.network is None and need.replan is not None


def on_fabric(need: JobNeed, inv: Inventory, site_id: str, fabric_id: str | None) -> JobNeed:
    """``need`` on the fabric ``fabric_id`` of site ``site_id`` where :func:`fabric_timed`: the job planned again
    with the fabric's bandwidth per node as its network between machines (``need.replan``: the need the request
    gets with that ``resources.network``, as ``fit --network`` reads it; a run's duration from the one rule,
    estimate/duration.py, and the checkpoints and cost that follow from it; a service's speed from fit's, its
    crossing traffic over that network: estimate/fit.py ``node_network``). ``need`` itself otherwise, or where the
    fabric states no bandwidth or the plan cannot time the job there (the check then notes that the window, or the
    service's speed, is the plan's bound)."""
    if not fabric_timed(need) or fabric_id is None or need.replan is None:
        return need
    bw = next((f.bandwidth for f in inv.site(site_id).fabrics if f.id == fabric_id), None)
    if not bw:
        return need
    timed = need.replan(need.device, need.devices, need.nodes, bw)
    if need.kind != "training":
        if timed.tokens_per_second_per_user is None:
            return need
        # a service is held for the request's own time, whatever its speed (its start, end and layout kept)
        return replace(timed, start=need.start, seconds=need.seconds, deadline=need.deadline, ongoing=need.ongoing,
                       hardware_named=need.hardware_named, nodes_named=need.nodes_named, timed_on_fabric=fabric_id)
    if not timed.seconds or timed.duration_verdict or timed.duration_basis:
        return need
    return replace(timed, start=need.start, deadline=need.deadline, hardware_named=need.hardware_named,
                   timed_on_fabric=fabric_id)


def placed_need(need: JobNeed, inv: Inventory, p: Placement | None) -> JobNeed:
    """``need`` as placement ``p`` holds it: timed on the fabric of its nodes (:func:`on_fabric`, the time
    try_window placed it for); ``need`` itself when there is no placement or its nodes state no fabric."""
    if p is None or not p.nodes or not fabric_timed(need):
        return need
    return on_fabric(need, inv, p.site, inv.node(p.nodes[0]).fabric)


def timing_note(need: JobNeed, placed: JobNeed, inv: Inventory, p: Placement | None) -> str:
    """What the check says of a run timed on its fabric (:func:`fabric_timed`): the fabric's bandwidth and the
    time there, against the plan's lower bound; where the fabric states no bandwidth, that the window is that lower
    bound and how to give one. '' for any other job."""
    if p is None:
        return ""
    if not fabric_timed(need) or need.kind != "training":
        if placed.timed_on_fabric:
            return serving_timed_note(need, placed)
        return serving_fabric_note(need, inv, p)
    if placed.timed_on_fabric:
        there, plan = format_seconds(placed.seconds), format_seconds(need.seconds)
        versus = (f"the same as the plan's {plan}, which times its data-parallel traffic over one machine's link: "
                  "the fabric does not lengthen the run" if there == plan else
                  f"not the plan's {plan}, which times its data-parallel traffic over one machine's link")
        return (f"the request states no network between machines (resources.network), so the run is timed on fabric "
                f"{placed.timed_on_fabric}'s {format_bits(placed.network or 0, 'Gb/s')} per node, where it is placed: "
                f"{there} (estimate/duration.py), {versus}")
    fabric = inv.node(p.nodes[0]).fabric if p.nodes else None
    return (f"the request states no network between machines (resources.network) and fabric {fabric} states no "
            f"bandwidth: the window is the plan's {format_seconds(need.seconds)}, a lower bound of the run's time "
            f"(data-parallel traffic timed over one machine's link); give the fabric's bandwidth: in the inventory, "
            f"or resources.network in the request")


def _service_speed(n: JobNeed) -> str:
    """A service's speed at its peak load as its need carries it: tokens/s per user, the time between two of a
    user's tokens (the decode step as each user sees it) and the time to first token."""
    tps, ttft = n.tokens_per_second_per_user, n.ttft
    said = (f"{tps:.3g} tokens/s per user (a token every {format_seconds(1.0 / tps)})" if tps else
            "no tokens/s known")
    return said + (f", first token in {format_seconds(ttft)}" if ttft is not None else "")


def serving_timed_note(need: JobNeed, placed: JobNeed) -> str:
    """What the check says of a service whose one copy spans machines, timed on the fabric it is placed on
    (:func:`on_fabric`): the fabric's bandwidth and the service's speed at peak load there (fit's, its crossing
    traffic over that network: estimate/fit.py ``node_network``; formulas/network.py eqs. 11 and 13' for a
    tensor-parallel all-reduce, 8 and 14 for a pipeline send), against the plan's, which timed that traffic over the
    link inside a machine."""
    what = crossing(placed.tp_nodes if placed.tp_nodes is not None else need.tp_nodes)
    return (f"the request states no network between machines (resources.network) and one copy of the model spans "
            f"{placed.copy_nodes} machines ({what}), so the service is timed on fabric {placed.timed_on_fabric}'s "
            f"{format_bits(placed.network or 0, 'Gb/s')} per node, where it is placed (estimate/fit.py; "
            f"formulas/network.py eqs. 11, 13' for all-reduces, 8, 14 for sends): at peak load "
            f"{_service_speed(placed)}; the plan, which times that traffic over the link inside a machine: "
            f"{_service_speed(need)}")


def serving_fabric_note(need: JobNeed, inv: Inventory, p: Placement) -> str:
    """What the check says of a service whose one copy spans machines (``copy_nodes`` > 1) placed on a fabric while
    its plan knows no network between machines (``need.network`` None: no resources.network, no instance network):
    the plan timed the traffic that crosses (:func:`crossing`) over the link inside a machine, and the estimate times
    serving across machines only over an instance's catalog network, so the service is not re-timed on the fabric.
    The note gives what that traffic gets there by the core's own rules: a tensor-parallel all-reduce the ring's bus
    bandwidth, the slower of the link and the machine's network (formulas/network.py eq. 11, as the estimate times
    it over an instance's network); a pipeline send one device's share of the machine's network (eq. 8, as
    estimate/fit.py ``pipeline_hop_bandwidth``). '' for any other job, or where the fabric is not slower than the
    link."""
    from ..formulas.network import device_share_of_node_bandwidth, ring_bus_bandwidth
    if need.kind == "training" or need.copy_nodes <= 1 or need.network is not None or not p.nodes:
        return ""
    fid = inv.node(p.nodes[0]).fabric
    bw = next((f.bandwidth for f in inv.site(p.site).fabrics if f.id == fid), None)
    link = need.link_bandwidth
    what = crossing(need.tp_nodes)
    if not bw:
        return (f"one copy of the model spans {need.copy_nodes} machines ({what}), placed on fabric {fid}, which "
                "states no bandwidth: the plan timed that traffic over the link inside a machine, so its speed is "
                "an upper bound; give the fabric's bandwidth: in the inventory")
    tp_spans = need.tp_nodes is None or need.tp_nodes > 1
    if tp_spans:
        got = ring_bus_bandwidth(link or bw, need.copy_nodes, bw)
        rule = "a ring all-reduce's bus bandwidth, the slower of the link and the machine's network, eq. 11"
    else:
        got = device_share_of_node_bandwidth(bw, need.per_node)
        rule = f"a pipeline send's, one device's share of the machine's network over {need.per_node}, eq. 8"
    if link and got >= link:
        return ""
    plan_link = f"the link inside a machine ({format_bits(link)})" if link else "the link inside a machine"
    return (f"one copy of the model spans {need.copy_nodes} machines ({what}), placed on fabric {fid}'s "
            f"{format_bits(bw, 'Gb/s')} per node: that traffic gets {format_bits(got)} there ({rule}, "
            f"formulas/network.py), while the plan timed it over {plan_link}; the service could not be timed again "
            "on the fabric (its plan cannot be asked again there), so its tokens/s and time to first token are "
            "those of a faster network: give resources.network in the request, or a layout whose copies each fit "
            "one machine")


def try_window(need: JobNeed, inv: Inventory, bookings: Sequence[Booking] | Held, start: _dt.datetime, *,
               nodes: list[Node] | None = None, exact: bool = True,
               busy_until: dict[str, _dt.datetime] | None = None) -> Placement:
    """Place ``need`` starting at ``start`` or raise :class:`NoFit` with the binding constraint. ``nodes``: the
    result of :func:`suitable` when the caller has it; ``exact=False`` (a search over many start times) stops
    looking at a fabric as soon as it cannot hold the job, and then gives a shorter reason; ``busy_until`` (node id
    -> a moment before which the node cannot take the job, kept across the tries of one search) skips nodes known
    to be busy. A job timed on its fabric (:func:`fabric_timed`) is tried on each fabric in turn, the one a run
    ends soonest on (a service: the one it serves each user fastest on) first, a fabric stating no bandwidth last,
    held there for its time on that fabric (:func:`on_fabric`)."""
    big = nodes if nodes is not None else suitable(need, inv)
    if not fabric_timed(need):
        return _try_window(need, inv, bookings, start, big, exact, busy_until)
    groups: dict[tuple[str, str], list[Node]] = {}
    for n in big:
        if n.fabric is not None:
            groups.setdefault((n.site, n.fabric), []).append(n)
    timed = [(on_fabric(need, inv, *key), key, group) for key, group in groups.items() if len(group) >= need.nodes]
    first: NoFit | None = None
    # the fabric the run ends soonest on first; one stating no bandwidth (the plan's lower bound) last
    for on, _key, group in sorted(timed, key=lambda t: (not t[0].timed_on_fabric, t[0].seconds,
                                                         -(t[0].tokens_per_second_per_user or 0.0), t[1])):
        try:
            return _try_window(on, inv, bookings, start, group, exact, busy_until)
        except NoFit as e:
            first = e if first is None or (first.binding == "busy" and e.binding != "busy") else first
    if first is not None:
        raise first
    return _try_window(need, inv, bookings, start, big, exact, busy_until)  # no fabric holds it: the plain answer


def _try_window(need: JobNeed, inv: Inventory, bookings: Sequence[Booking] | Held, start: _dt.datetime,
                nodes: list[Node], exact: bool, busy_until: dict[str, _dt.datetime] | None) -> Placement:
    """:func:`try_window` on the suitable ``nodes``, ``need`` held for its own seconds."""
    end = window_end(need, start)
    cap = _capacities(inv)
    held = as_held(bookings)
    per_node = need.per_node
    big = _maintenance_ok(need, inv, nodes, start, end)
    quota = check_quota(need.team, need.device, need.per_node * need.nodes, start, end, inv.quotas,
                        lambda res, lo, hi: [e[0] for e in held.overlapping(res, lo, hi)]) if inv.quotas else None
    if quota is not None and not quota.fits:
        raise NoFit("quota", quota.text)

    def free(n: Node) -> bool:
        if busy_until is None:
            return _node_busy_until(need, n, held, cap, start, end) is None
        if busy_until.get(n.id, start) > start:
            return False  # known busy at every start before that moment
        until = _node_busy_until(need, n, held, cap, start, end)
        if until is not None:
            busy_until[n.id] = until
        return until is None

    # a job with collectives between its nodes (JobNeed.one_fabric: a training run, a service whose one copy spans
    # machines): one fabric. A service whose copies each fit one machine has none between them: any nodes of the site
    fabric = need.one_fabric
    groups: dict[tuple[str, str], list[Node]] = {}
    for n in big:
        if fabric and n.fabric is None:
            continue
        groups.setdefault((n.site, n.fabric or "" if fabric else ""), []).append(n)
    last: NoFit | None = None
    for (site_id, _fabric), group in sorted(groups.items(), key=lambda kv: kv[0]):
        if len(group) < need.nodes:
            continue
        chosen: list[Node] = []
        busy = 0
        for n in sorted(group, key=lambda n: (n.devices, n.id)):
            if len(group) - busy < need.nodes:
                break  # this fabric cannot hold the job any more
            if free(n):
                chosen.append(n)
                if len(chosen) == need.nodes:
                    break
            else:
                busy += 1
        if len(chosen) < need.nodes:
            continue
        try:
            return replace(_place(need, inv, held, cap, site_id, chosen, start, end),
                           quota=quota.text if quota is not None else "")
        except NoFit as e:
            last = e
    if last is not None:
        raise last
    if not exact:
        raise NoFit("busy", f"no {need.nodes} {need.device} node(s) with {per_node} device(s) free from "
                    f"{start:%Y-%m-%d %H:%M}")
    frees = [n for n in big if free(n)]
    if len(frees) < need.nodes:
        raise NoFit("busy", f"{len(frees)} of {len(big)} suitable {need.device} node(s) have {per_node} device(s) "
                    f"free for the whole window; {need.nodes} needed")
    best: dict[tuple[str, str | None], int] = {}
    for n in frees:
        if not fabric or n.fabric is not None:
            best[(n.site, n.fabric if fabric else None)] = best.get((n.site, n.fabric if fabric else None), 0) + 1
    if not fabric:
        raise NoFit("busy", f"{len(frees)} free {need.device} nodes, but at most {max(best.values(), default=0)} at "
                    f"one site; a {need.nodes}-node service is placed at one site")
    raise NoFit("fabric", f"{len(frees)} free {need.device} nodes, but at most {max(best.values(), default=0)} on "
                f"one fabric; a {_why_fabric(need)} must stay inside one fabric")


def _place(need: JobNeed, inv: Inventory, held: Held, cap: dict[str, float], site_id: str, chosen: list[Node],
           start: _dt.datetime, end: _dt.datetime) -> Placement:
    """The placement on ``chosen`` nodes at ``site_id``: addresses, isolation and storage added, or NoFit."""
    items = [i for n in chosen for i in _node_items(need, n, start, end)]
    if need.team:  # who holds it: the usage the team's quota counts (not a capacity)
        items.append(Item(usage_resource(need.team, need.device), need.per_node * len(chosen), start, end))
    site = inv.site(site_id)
    if need.fixed_address:
        if site.public_addresses < 1:
            raise NoFit("addresses", f"site {site_id} has no public/fixed addresses", waits=False)
        items.append(Item(f"addr:{site_id}", 1, start, end))
    if need.isolation and need.isolation != "none":
        if site.isolated_segments < 1:
            raise NoFit("isolation", f"site {site_id} has no isolated network segment ({need.isolation} requested)",
                        waits=False)
        items.append(Item(f"seg:{site_id}", 1, start, end))
    bad = held.overflow(items, cap)
    if bad:
        res = bad[0][0]
        what = "addresses" if res.startswith("addr:") else "isolation" if res.startswith("seg:") else "busy"
        raise NoFit(what, f"{res} is fully booked in the window ({bad[0][1]:g} of {bad[0][2]:g})")
    pool_id = None
    if need.storage_peak:
        pools = [s for s in inv.storage if s.site == site_id]
        if not pools:
            raise NoFit("storage", f"site {site_id} has no shared storage pool: the inventory lists none there (add "
                        f"storage: [{{id: ..., site: {site_id}, capacity: ...}}]; `capacity import` writes none)",
                        waits=False)
        worst = None
        for p in sorted(pools, key=lambda s: -s.capacity):
            st = storage_items(need, p.id, start, end)
            sbad = held.overflow(st, cap)
            if not sbad:
                pool_id = p.id
                items += st
                break
            worst = worst or sbad[0]
        if pool_id is None:
            assert worst is not None
            raise NoFit("storage", f"storage at site {site_id} would reach {format_bytes(worst[1], binary=False)} of "
                        f"{format_bytes(worst[2], binary=False)} during the run (this job: "
                        f"{format_bytes(need.storage_peak, binary=False)} "
                        f"at its peak, checkpoints accumulating)")
    return Placement(need.name, need.kind, start, end, site_id, tuple(n.id for n in chosen), need.per_node,
                     need.device, pool_id, tuple(items), figures=Figures.of(need), agreement=need.agreement,
                     copy_nodes=need.copy_nodes)


def _node_items(need: JobNeed, n: Node, start: _dt.datetime, end: _dt.datetime) -> list[Item]:
    items = [Item(f"node:{n.id}", need.per_node, start, end)]
    if n.ram:
        ram = need.memory_per_device * need.per_node if need.device_kind == "cpu" else n.ram * need.per_node / n.devices
        items.append(Item(f"ram:{n.id}", ram, start, end))
    return items


# ------------------------------------------------------------------------------------------ search

def earliest(need: JobNeed, inv: Inventory, bookings: Sequence[Booking] | Held,
             horizon: float = EARLIEST_HORIZON) -> tuple[Placement | None, NoFit | None]:
    """The earliest placement from ``need.start`` on: tries the requested start, then every moment within
    ``horizon`` seconds when a hold on a resource the job could use, or a maintenance window, ends (a start can
    become possible only when something ends), at most ``MAX_TRIES`` of them."""
    held = as_held(bookings)
    t0 = need.start
    try:
        nodes = suitable(need, inv)
    except NoFit as e:
        return None, e  # waiting does not help
    try:
        return try_window(need, inv, held, t0, nodes=nodes), None
    except NoFit as e:
        first = e
    limit = moment_after(t0, horizon)
    sites = {n.site for n in nodes}
    resources = [f"{kind}:{n.id}" for n in nodes for kind in ("node", "ram")]
    resources += [f"storage:{s.id}" for s in inv.storage if s.site in sites]
    resources += [f"{kind}:{s}" for s in sites for kind in ("addr", "seg")]
    resources += [usage_resource(q.team, q.device) for q in inv.quotas if q.device == need.device]  # quota frees up
    times = held.ends(resources, t0, limit)
    times.update(m.end for m in inv.maintenance if t0 < m.end < limit)
    busy: dict[str, _dt.datetime] = {}
    for t in sorted(times)[:MAX_TRIES]:
        if busy and sum(1 for n in nodes if busy.get(n.id, t) <= t) < need.nodes:
            continue  # too few nodes could be free from t: nothing to try
        try:
            return try_window(need, inv, held, t, nodes=nodes, exact=False, busy_until=busy), first
        except NoFit:
            continue
    return None, first


def check_job(need: JobNeed, inv: Inventory, bookings: Sequence[Booking] | Held,
              not_before: _dt.datetime | None = None) -> JobCheck:
    """Does ``need`` fit in its requested window (from its start, ending by its deadline)? If not: the binding
    constraint, the earliest window, and alternatives that fit. The earliest window starts at ``not_before`` at the
    earliest (the command's now: a window that has passed is no window to wait for; `capacity book --earliest`
    searches from now too). A job whose request names no hardware is first sized on the inventory's own device
    types (:func:`on_inventory`), and the answer states that assumption."""
    bookings = as_held(bookings)
    assumed = ""
    if not need.hardware_named:
        need, assumed = on_inventory(need, inv, bookings)
        if not assumed.startswith("assumed"):  # no device type of the inventory holds the job
            return JobCheck(need, False, None, "memory", assumed, waits=False)
    try:
        p = try_window(need, inv, bookings, need.start)
        if need.deadline is None or p.end <= need.deadline:
            placed = placed_need(need, inv, p)
            note = timing_note(need, placed, inv, p)
            return JobCheck(placed, True, p, assumption=assumed, notes=(note,) if note else ())
        reason = NoFit("deadline", f"the run ends {p.end:%Y-%m-%d %H:%M}, after the deadline {need.deadline:%Y-%m-%d %H:%M}")
    except NoFit as e:
        reason = e
        if e.binding == "node-size" and need.kind != "training":
            split = _replicas_per_node(need, inv, bookings)
            if split is not None:
                return split
            reason = NoFit(e.binding, e.reason + _node_split_refusal(need, inv, bookings), waits=e.waits)
    later, _ = earliest(replace(need, start=not_before) if not_before is not None and not_before > need.start
                        else need, inv, bookings)
    alts: list[str] = []
    if later is not None and later.start > need.start:
        late = need.deadline is not None and later.end > need.deadline
        alts.append(f"start later: from {later.start:%Y-%m-%d %H:%M} on {len(later.nodes)} node(s) at "
                    f"{later.site} (ends {later.end:%Y-%m-%d %H:%M}{', after the deadline' if late else ''})")
    alts += alternatives(need, inv, bookings)
    placed = placed_need(need, inv, later)  # the run as the window found holds it (timed on its fabric)
    note = timing_note(need, placed, inv, later)
    return JobCheck(placed, False, later, reason.binding, reason.reason, tuple(alts), assumed, waits=reason.waits,
                    notes=(note,) if note else ())


def _fits_by_deadline(need: JobNeed, inv: Inventory, bookings: Sequence[Booking] | Held) -> Placement | None:
    try:
        p = try_window(need, inv, bookings, need.start)
    except NoFit:
        return None
    return p if need.deadline is None or p.end <= need.deadline else None


def alternatives(need: JobNeed, inv: Inventory, bookings: Sequence[Booking] | Held) -> list[str]:
    """Concrete alternatives that fit in the requested window. Another device type is sized by ``fit``
    (``_other_devices``); a training alternative is timed on its own device and count by the one duration rule
    (``need.run_seconds``: estimate/duration.py eq. (3)), and placed for that time; a service's quantized
    alternative is the estimate's at that format (``_quantized``)."""
    out = _other_devices(need, inv, bookings)
    if need.kind == "training" and need.run_seconds is not None:
        # more devices for a shorter run (eq. (3) scales linearly with devices: an upper bound on the gain)
        for factor in (2, 4):
            per = need.per_node * factor
            fits_node = any(n.devices >= per and n.device == need.device for n in inv.nodes)
            nodes = need.nodes if fits_node else need.nodes * factor
            secs = need.run_seconds(need.device, need.devices * factor, nodes)
            if not secs:
                break
            alt = replace(need, devices=need.devices * factor, seconds=float(secs), nodes=nodes)
            p = _fits_by_deadline(alt, inv, bookings)
            if p is not None:
                out.append(f"more devices for a shorter run: {alt.devices} x {need.device} on {alt.nodes} node(s), "
                           f"about {format_seconds(alt.seconds)} (linear scaling assumed)")
                break
    elif need.kind != "training":
        out = _replicas_over_nodes(need, inv, bookings) + out + _quantized(need, inv, bookings)
    return out


def _replicas_over_nodes(need: JobNeed, inv: Inventory, bookings: Sequence[Booking] | Held) -> list[str]:
    """A service whose devices per node no serving node of its device type holds (a tensor-parallel group wider
    than the nodes: [node-size]): the same devices over k nodes, fewest first (``need.replan``: the plan the request
    gets naming those nodes, whose devices `fit` lays out on machines of devices / k, its ``gpus_per_node``,
    plan/inference.py: the estimate's layout choice, not the provider's; a copy that then spans machines needs their
    fabric). The first split whose plan holds the job and is free in the requested window, one line naming its
    nodes; nothing when none does or the job cannot be planned again."""
    for k, alt in _node_splits(need, inv):
        p = _fits_by_deadline(alt, inv, bookings)
        if p is not None:
            per = need.devices // k
            return [f"over {k} nodes of {per} device{'s' if per > 1 else ''} (resources.nodes: {k}; laid out as "
                    f"`llmsizer fit --device {need.device} --count {need.devices} --gpus-per-node {per}` chooses): "
                    f"fits on {', '.join(p.nodes)} at {p.site}"]
    return []


def _replicas_per_node(need: JobNeed, inv: Inventory, bookings: Sequence[Booking] | Held) -> JobCheck | None:
    """A service whose request names no node count (``need.nodes_named`` False: the plan laid its devices on machines
    of fit's size, an assumption) and whose devices per node no serving node holds: placed on the fewest nodes of
    the inventory's size whose plan (``need.replan`` naming them, :func:`_node_splits`) keeps each copy of the model
    inside one node (``copy_nodes`` 1: its replicas one or more per node, no collective between nodes), when that
    is free in the requested window; the answer says so. None otherwise (the node-size refusal stands, with its
    alternatives)."""
    if need.nodes_named:
        return None
    for k, alt in _node_splits(need, inv):
        if alt.copy_nodes > 1:
            continue
        p = _fits_by_deadline(alt, inv, bookings)
        if p is None:
            continue
        per = need.devices // k
        said = (f"resources.nodes not given: the plan's {need.nodes} machine(s) of {need.per_node} are larger than "
                f"any {need.device} serving node, so the {need.devices} devices are placed as {k} nodes of {per}, "
                f"each copy of the model inside one node (as `llmsizer fit --device {need.device} --count "
                f"{need.devices} --gpus-per-node {per}` lays them out)")
        return JobCheck(replace(alt, nodes_named=False), True, p, assumption=said)
    return None


def _node_splits(need: JobNeed, inv: Inventory) -> Iterator[tuple[int, JobNeed]]:
    """The splits :func:`_replicas_over_nodes` tries: k nodes of devices / k each (fewest first, past the need's own
    nodes and at most the largest serving node of its device type each), with the plan the request gets naming them
    (``need.replan``) where that plan holds the job's memory. None where the need's nodes fit some node or the job
    cannot be planned again."""
    if need.replan is None:
        return
    largest = max((n.devices for n in inv.nodes if n.device == need.device and need.label in n.pools), default=0)
    if not 0 < largest < need.per_node:
        return
    for k in range(max(need.nodes + 1, math.ceil(need.devices / largest)), need.devices + 1):
        if need.devices % k:  # equal machines: each the same share
            continue
        alt = need.replan(need.device, need.devices, k)
        if not alt.memory_verdict:
            yield k, alt


def _node_split_refusal(need: JobNeed, inv: Inventory, bookings: Sequence[Booking] | Held) -> str:
    """Why the fewest nodes the node-size refusal's devices could be split over (:func:`_node_splits`) do not take
    the job either, in the check's words ('; ...'): a service named as one machine wider than the nodes, whose
    split would span machines with no fabric between them (probe16 D-E), hears that, not node size alone. '' where
    no split holds it, or the first split places (its alternative then says so)."""
    for k, alt in _node_splits(need, inv):
        try:
            try_window(alt, inv, bookings, alt.start)
        except NoFit as e:
            per = need.devices // k
            return (f"; over {k} nodes of {per} (resources.nodes: {k}, laid out as `llmsizer fit --device "
                    f"{need.device} --count {need.devices} --gpus-per-node {per}` lays them out) it does not place "
                    f"either: [{e.binding}] {e.reason}")
        return ""
    return ""


def _counts(most: int) -> list[int]:
    """1, 2, 4, ... up to ``most``, and ``most`` itself: the device counts an alternative tries, fewest first."""
    return sorted({2 ** k for k in range(most.bit_length())} | ({most} if most > 0 else set()))


def _on_type(need: JobNeed, inv: Inventory, bookings: Sequence[Booking] | Held, dev: str, *, in_window: bool = True
             ) -> tuple[JobNeed, Placement | None, DeviceFit] | None:
    """``need`` moved to the inventory's device type ``dev``: the fewest devices of it in the job's pool that hold
    the job as ``fit`` sizes it (``need.fit_on``: a service, ``fit MODEL --device D --count N`` at the plan's engine,
    weights, peak load and headroom on one node of that type, 1, 2, 4, ... devices up to its largest; a training
    run, ``fit --train`` over as few nodes as the count needs, up to every device of that type in the pool), timed
    there (a training run by ``need.run_seconds``, the one duration rule) and, with ``in_window``, free in the
    requested window and ending by its deadline. The moved need takes fit's memory per device and the device's kind;
    with it, the placement (None when not ``in_window``) and fit's answer. None when no count qualifies or the
    need cannot be sized (``need.fit_on`` None, or a training run with no ``run_seconds``): no guessed memory or
    time."""
    if need.fit_on is None or (need.kind == "training" and need.run_seconds is None):
        return None
    nodes = [n for n in inv.nodes if n.device == dev and need.label in n.pools]
    if not nodes:
        return None
    largest = max(nodes, key=lambda n: (n.devices, n.ram))
    if largest.devices < 1:
        return None
    most = sum(n.devices for n in nodes) if need.kind == "training" else largest.devices
    tried: set[int] = set()
    for want in _counts(most):
        n_nodes = math.ceil(want / largest.devices)
        count = math.ceil(want / n_nodes) * n_nodes  # whole nodes of equal share
        if count in tried:
            continue
        tried.add(count)
        f = need.fit_on(dev, count, n_nodes, largest.ram_per_device)
        if f is None:
            continue
        seconds: float | None = need.seconds
        if need.kind == "training":
            seconds = need.run_seconds(dev, count, n_nodes) if need.run_seconds is not None else None
            if not seconds:
                return None  # cannot time the run on this device: no claim
        alt = replace(need, device=dev, devices=count, nodes=n_nodes, seconds=float(seconds or need.seconds),
                      device_kind=f.device_kind, memory_per_device=f.memory_per_device,
                      verdict_need_per_device=f.verdict_need_per_device, memory_verdict="",
                      duration_basis="", duration_verdict="")  # sized and timed there
        if not in_window:
            return alt, None, f
        p = _fits_by_deadline(alt, inv, bookings)
        if p is not None:
            return alt, p, f
    return None


def _layout(words: str) -> str:
    """An alternative's tensor-parallel layout after its memory line ('; TP 8, ...'), none where the request pins no
    degree."""
    return f"; {words}" if words else ""


def _fit_cli(need: JobNeed) -> str:
    return "`llmsizer fit --train`" if need.kind == "training" else "`llmsizer fit` at the plan's peak load"


def _other_devices(need: JobNeed, inv: Inventory, bookings: Sequence[Booking] | Held) -> list[str]:
    """Each other device type of the job's pool, sized and placed by :func:`_on_type`: one line per device type
    naming the count, the device and fit's memory line (and a training run's time there)."""
    out: list[str] = []
    for dev in inv.device_types:
        if dev == need.device:
            continue
        r = _on_type(need, inv, bookings, dev)
        if r is None:
            continue
        alt, p, f = r
        assert p is not None
        out.append(f"other device type: {alt.devices} x {dev} on {alt.nodes} node(s) at {p.site} ({_fit_cli(need)}: "
                   f"{f.memory}{_layout(f.layout)})"
                   + (f", about {format_seconds(alt.seconds)} on {dev} (estimate/duration.py), ends "
                      f"{p.end:%Y-%m-%d %H:%M}" if need.kind == "training" else ""))
    return out


def on_inventory(need: JobNeed, inv: Inventory, bookings: Sequence[Booking] | Held) -> tuple[JobNeed, str]:
    """A job whose request names no hardware (``need.hardware_named`` False: the plan's device is the cheapest the
    whole catalog offers, plan/training.py and plan/inference.py "no resources named"), sized on this inventory's
    own device types instead. The rule: the inventory's device types in the order it lists them (it states no
    prices to rank them by, which is the plan's rule), each sized by :func:`_on_type` (the fewest devices that
    hold the job as ``fit`` sizes it); the first that is free in the requested window, else the first that holds
    the job at all (the check then finds its earliest window). The moved need is the job planned again naming that
    device and count (``need.replan``: the answer the request gets when it names them), else fit's sizing as it is.
    Returns the moved need and the assumption, which starts 'assumed'; when no device type holds the job, the need
    unchanged and why not (one line)."""
    chosen = None
    for in_window in (True, False):
        for dev in inv.device_types:
            r = _on_type(need, inv, bookings, dev, in_window=in_window)
            if r is not None:
                chosen = r
                break
        if chosen is not None:
            break
    if chosen is None:
        sized = need.fit_on is not None and (need.kind != "training" or need.run_seconds is not None)
        return need, (f"the request names no hardware, and no device type of this inventory "
                      f"({', '.join(inv.device_types) or 'none'}) in its {need.label} pool "
                      + ("holds the job as `llmsizer fit` sizes it" if sized else "could be sized for the job")
                      + (f" (the plan's own suggestion, {need.devices} x {need.device}, is not in the inventory)"
                         if need.device and need.device not in inv.device_types else ""))
    alt, placed, f = chosen
    if need.replan is not None:
        alt = need.replan(alt.device, alt.devices, alt.nodes)
    return alt, (f"assumed: the request names no hardware, so the job is sized on this inventory's device types "
                 f"(the first listed that holds it{' and is free in the window' if placed is not None else ''}): "
                 f"{alt.devices} x {alt.device} on {alt.nodes} node(s) ({_fit_cli(need)}: {f.memory}"
                 f"{_layout(f.layout)})"
                 + (f", not the plan's catalog suggestion {need.devices} x {need.device}" if need.device else ""))


def _quantized(need: JobNeed, inv: Inventory, bookings: Sequence[Booking] | Held) -> list[str]:
    """The service at a smaller weight format, as the estimate sizes it (``need.quantized``: plan/inference.py
    ``quantized_fit``, the format recommend's chooser picks on those devices, None where the plan's own format
    fits them): on its own device type with at most as many devices, and on each other serving device type; per
    device type the fewest devices (1, 2, 4, ... up to its largest serving node) that hold it and are free in
    the requested window, one line each naming the format, the engine and fit's memory per device. Nothing when the
    need cannot be re-estimated (``need.quantized`` None): no guessed memory."""
    if need.quantized is None:
        return []
    out: list[str] = []
    for dev in (need.device, *(d for d in inv.device_types if d != need.device)):
        nodes = [n for n in inv.nodes if n.device == dev and need.label in n.pools]
        if not nodes:
            continue
        largest = max(nodes, key=lambda n: (n.devices, n.ram))
        most = min(largest.devices, need.devices) if dev == need.device else largest.devices
        for count in _counts(most):
            q = need.quantized(dev, count, largest.ram_per_device)
            if q is None:
                continue
            alt = replace(need, device=dev, devices=count, nodes=1, device_kind=q.device_kind,
                          memory_per_device=q.memory_per_device,
                          verdict_need_per_device=q.verdict_need_per_device, memory_verdict="")
            p = _fits_by_deadline(alt, inv, bookings)
            if p is not None:
                out.append(f"serve a quantized model: {q.weights_format} on {q.engine}, {count} x {dev} at {p.site} "
                           f"(`llmsizer fit --weights {q.weights_format}` at the plan's peak load: {q.memory}"
                           f"{_layout(q.layout)}" + (f"; chosen because {q.passed_over}" if q.passed_over else "") + ")")
                break
    return out


def check_needs(needs: Sequence[JobNeed], inv: Inventory, bookings: Sequence[Booking] | Held,
                not_before: _dt.datetime | None = None) -> list[JobCheck]:
    """Check the jobs of one request in order; each placement found is held while checking the next ones, so two
    jobs of the same request do not count on the same devices. ``not_before``: check_job's."""
    held = Held(bookings.bookings if isinstance(bookings, Held) else bookings)
    out = []
    for need in needs:
        c = check_job(need, inv, held, not_before)
        out.append(c)
        if c.placement is not None:
            held.add(Booking(f"pending:{need.name}", need.name, need.kind, c.placement.items, "tentative"))
    return out
