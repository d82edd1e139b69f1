"""The result objects every estimate returns: a breakdown, the assumptions applied, and warnings.

Renderers (CLI table, JSON, reports) only read these objects. ``Estimate.to_dict()`` is the stable
JSON structure (``schema_version`` bumps on incompatible changes).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from .frozen import fast_init

Location = Literal["device", "host"]

SCHEMA_VERSION = 1  # the one version of every --json answer and web API answer (``envelope``)


def envelope(kind: str, body: dict[str, Any]) -> dict[str, Any]:
    """A JSON answer as every command writes it: ``{"schema_version", "kind", ...body}``, ``kind`` the answer's
    type (``inference``, ``fit-inference``, ``plan``, ``hardware``, ``inspect``...). The one home of
    the envelope: a body's own ``kind`` key would be overwritten, so none carries one."""
    if "kind" in body or "schema_version" in body:
        raise ValueError(f"a {kind} answer's body names its own kind / schema_version")
    return {"schema_version": SCHEMA_VERSION, "kind": kind, **body}

# details key: how many devices the "device" items are summed over (a llama.cpp split over N GPUs); absent: the
# device items are one device's (one device, or each of N identical tensor/pipeline/data-parallel shards)
DEVICES_SUMMED = "devices_summed"


def json_data(data: Any) -> Any:
    """``data`` as JSON holds it: what ``json.loads(json.dumps(data, default=str))`` returns (the text every
    ``--json`` and the web API print, ``cli/common.py`` ``json_text``), built without the text. Tuples become lists;
    a key that is not a string becomes the name ``json.dumps`` writes for it (``0`` -> ``"0"``, ``True`` ->
    ``"true"``, ``None`` -> ``"null"``); a str/int/float subclass its plain value; any other value ``str(value)``
    (``default=str``). Every public result's ``to_dict()`` returns it (the one home of that shape), so
    ``obj.to_dict() == json.loads(cli --json output)`` without a round trip (tests/api/test_to_dict_json_shape.py)."""
    t = type(data)
    if t is str or t is int or t is float or t is bool or data is None:
        return data
    if isinstance(data, dict):
        return {k if type(k) is str else _json_key(k): json_data(v) for k, v in data.items()}
    if isinstance(data, (list, tuple)):
        return [json_data(v) for v in data]
    if isinstance(data, str):  # a subclass (KindedWarning, a str Enum): its text, as json writes it
        return str.__str__(data)
    if isinstance(data, int):  # a subclass (IntEnum): json writes int.__repr__
        return int(data)
    if isinstance(data, float):
        return float(data)
    return str(data)


def _json_key(key: Any) -> str:
    """The object key ``json.dumps`` writes for ``key`` (str, int, float, bool, None; it refuses other keys, which
    are shown as ``str(key)`` here)."""
    if isinstance(key, str):
        return str.__str__(key)
    if key is None or isinstance(key, (int, float)):
        return json.dumps(key)
    return str(key)


class KindedWarning(str):
    """A warning text with a kind: a plan decides from ``kind`` (never from the words) which warnings its own
    figures already state. It is the text everywhere else (JSON, equality, printing)."""

    __slots__ = ("kind",)
    kind: str

    def __new__(cls, text: str, kind: str) -> KindedWarning:
        self = super().__new__(cls, text)
        self.kind = kind
        return self

    def __reduce__(self) -> tuple[Any, ...]:
        return (KindedWarning, (str(self), self.kind))


@fast_init
@dataclass(frozen=True)
class Item:
    """One memory component: expected bytes, a low/high range, where it lives, and why."""

    name: str
    bytes: int
    location: Location = "device"
    low: int | None = None
    high: int | None = None
    formula: str = ""
    source: str = ""

    @property
    def range(self) -> tuple[int, int, int]:
        lo = self.bytes if self.low is None else self.low
        hi = self.bytes if self.high is None else self.high
        return lo, self.bytes, hi

    def to_dict(self) -> dict[str, Any]:
        lo, mid, hi = self.range
        return {"name": self.name, "location": self.location, "bytes": mid, "low": lo, "high": hi,
                "formula": self.formula, "source": self.source}


@fast_init
@dataclass(frozen=True)
class Assumption:
    """A value the estimate used. ``default`` is True when the user did not give it."""

    name: str
    value: Any
    default: bool
    why: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "value": json_data(self.value), "default": self.default, "why": self.why}

    @property
    def mark(self) -> str:
        """How a rendered line marks it after ``name=value``: '' when given, ' (default)', or, for a default chosen
        for the device (its ``why`` begins 'default for'), that reason: ' (default for rtx-4090: llama.cpp ...)'; a
        given ``auto`` or alias resolved to ``value`` (its ``why`` begins 'auto -> ' or 'alias '), that: ' (auto ->
        fp16: the model's ...)', ' (alias 'int4' -> gptq-int4: ...)'; a given value the engine takes as ``value``
        (its ``why`` begins 'given as '), that without its source: ' (given as 100; the model has 48 layers)'; a
        given value that overrides the device's (its ``why`` begins 'given; overrides '): ' (overrides h100-sxm's own
        79.65 GiB)'; a
        framework profile's default (its ``why`` begins 'from framework profile NAME (source...)'), the profile
        without its source: ' (from framework profile torchtune)'; a value computed from the others rather than
        given or defaulted (its ``why`` begins 'derived: '): ' (derived)'."""
        if not self.default:
            if self.why.startswith("given as "):
                return f" ({self.why.split(' (', 1)[0]})"
            if self.why.startswith("given; overrides "):  # a memory given beside a device (device.memory_given_source)
                return f" ({self.why.removeprefix('given; ').split(' (', 1)[0]})"
            return f" ({self.why})" if self.why.startswith(("auto -> ", "alias ")) else ""
        if self.why.startswith("derived: "):
            return " (derived)"
        if self.why.startswith("from framework profile "):
            return f" ({self.why.split(' (', 1)[0]})"
        return f" ({self.why})" if self.why.startswith(("default for ", "implied by ")) else " (default)"


def merged_assumptions(*groups: Sequence[Assumption]) -> tuple[Assumption, ...]:
    """Every assumption of ``groups`` (an answer's own first, then its estimates'), each name once: a name an
    earlier group names is left out of the later ones; a name one group repeats (the images and the video of one
    prompt, two ``media`` lines) keeps every entry of that group. The one rule of an answer's assumptions line
    (``FitResult.all_assumptions``, ``LlamaCppFit.all_assumptions``)."""
    seen: set[str] = set()
    out: list[Assumption] = []
    for group in groups:
        new = [a for a in group if a.name not in seen]
        seen.update(a.name for a in new)
        out.extend(new)
    return tuple(out)


class Notes:
    """The one accumulator of assumptions (each default named) and warnings while a result is composed; the
    estimators' ``Acc`` adds the breakdown items, the planners' ``JobNotes`` the advice and facts of a job."""

    given_why = "given"

    def __init__(self) -> None:
        self.assumptions: list[Assumption] = []
        self.warnings: list[str] = []

    def assume(self, name: str, value: Any, given: Any, why: str) -> Any:
        """Use ``given`` when the user supplied it, else ``value``; record which."""
        if given is not None:
            self.assumptions.append(Assumption(name, given, False, self.given_why))
            return given
        self.assumptions.append(Assumption(name, value, True, why))
        return value


@fast_init
@dataclass(frozen=True)
class Estimate:
    """A memory estimate: the components (``items``), the values it assumed, and warnings.

    ``total(location)`` sums the items at ``"device"`` (GPU memory) or ``"host"`` (RAM) as (low, expected, high)
    bytes; ``item(name)`` finds one component; ``details`` holds the figures a renderer may show (parameter counts,
    vLLM admission, the memory budget and whether it fits). ``str(est)`` is the table ``llmsizer infer`` prints,
    a Jupyter notebook shows it as an HTML table, and ``to_dict()`` is the JSON structure ``--json`` writes.
    """

    kind: str
    model: str
    items: tuple[Item, ...]
    assumptions: tuple[Assumption, ...]
    warnings: tuple[str, ...] = ()
    details: dict[str, Any] = field(default_factory=dict)

    def total(self, location: Location = "device") -> tuple[int, int, int]:
        """(low, expected, high) bytes summed over the items at ``location`` (summed once per location: the
        items are a tuple of frozen items; the sums live in the instance dict, outside the dataclass fields)."""
        cache: dict[str, tuple[int, int, int]] | None = self.__dict__.get("_totals")
        if cache is None:
            cache = {}
            self.__dict__["_totals"] = cache
        hit = cache.get(location)
        if hit is None:
            lo = mid = hi = 0
            for it in self.items:
                if it.location == location:  # Item.range, read in place
                    b = it.bytes
                    lo, mid, hi = lo + (b if it.low is None else it.low), mid + b, hi + (b if it.high is None else it.high)
            hit = cache[location] = (lo, mid, hi)
        return hit

    def but(self, assumptions: tuple[Assumption, ...] | None = None, warnings: tuple[str, ...] | None = None,
            details: dict[str, Any] | None = None) -> Estimate:
        """This estimate with other assumptions, warnings or details (None: these): the same items, so the same
        sums (``total``'s, shared with the new estimate rather than added up again)."""
        out = Estimate(self.kind, self.model, self.items, self.assumptions if assumptions is None else assumptions,
                       self.warnings if warnings is None else warnings, self.details if details is None else details)
        out.__dict__["_totals"] = self.__dict__.setdefault("_totals", {})
        return out

    @property
    def primary_location(self) -> Location:
        """'device' when anything sits in device memory, else 'host' (CPU-only estimates)."""
        return "device" if any(it.location == "device" for it in self.items) else "host"

    @property
    def total_bytes(self) -> int:
        """Expected bytes at the primary location (GPU memory, or RAM for a CPU-only estimate)."""
        return self.total(self.primary_location)[1]

    def total_label(self, location: Location) -> str:
        """What a total at ``location`` covers, the one label the table, notebook, ``--json`` (``totals.*.scope``)
        and the web page print: "per device", "all N devices" (a llama.cpp split: the sum over its GPUs), "host",
        "host per process" (training on several devices: one training process per device, each with its own host
        part; a machine holds one per device it has, estimate/fit.py ``training_host``)."""
        if location == "host":
            gpus = next((a.value for a in self.assumptions if a.name == "gpus"), 1) if self.kind == "training" else 1
            return "host per process" if isinstance(gpus, int) and gpus > 1 else "host"
        n = int(self.details.get(DEVICES_SUMMED, 1))
        return "per device" if n <= 1 else f"all {n} devices"

    def headline(self) -> tuple[Location, str, tuple[int, int, int]]:
        """The one total a surface shows first: (location, its ``total_label``, its (low, expected, high) bytes) at
        the ``primary_location`` (the device total; on a CPU, where nothing sits on a device, the host total). It is
        the first TOTAL row ``render_estimate`` prints (device before host) and ``--json``'s ``headline``, which the
        web calculator's big number renders (review36 N2: the page picked it itself)."""
        loc = self.primary_location
        return loc, self.total_label(loc), self.total(loc)

    def item(self, name: str) -> Item:
        for it in self.items:
            if it.name == name:
                return it
        raise KeyError(name)

    def to_dict(self) -> dict[str, Any]:
        totals = {}
        for loc in ("device", "host"):
            lo, mid, hi = self.total(loc)  # type: ignore[arg-type]
            if any(it.location == loc for it in self.items):
                totals[loc] = {"low": lo, "bytes": mid, "high": hi, "scope": self.total_label(loc)}  # type: ignore[arg-type]
        hloc, hscope, (hlo, hmid, hhi) = self.headline()
        return json_data({
            "schema_version": SCHEMA_VERSION, "kind": self.kind, "model": self.model,
            "totals": totals,
            "headline": {"location": hloc, "scope": hscope, "low": hlo, "bytes": hmid, "high": hhi},
            "items": [i.to_dict() for i in self.items],
            "assumptions": [a.to_dict() for a in self.assumptions],
            "warnings": list(self.warnings), "details": self.details,
        })

    def __str__(self) -> str:
        """The table ``llmsizer infer`` (or ``train``) prints for this estimate."""
        from .render.text import render_estimate
        return render_estimate(self)

    def _repr_html_(self) -> str:
        """Jupyter's rendering: the breakdown with totals, assumptions and warnings as escaped, script-free HTML."""
        from .render.notebook import estimate_html
        return estimate_html(self)
