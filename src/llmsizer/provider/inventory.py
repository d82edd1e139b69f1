"""Read a provider's inventory file (YAML) into an :class:`Inventory`: sites, nodes, shared storage, fabrics,
addresses, isolated segments and maintenance windows.

Like the request reader, the file is *composed* into PyYAML's node tree so every problem is one line naming the
file, the line and the field::

    inventory.yaml:14: nodes[2] 'gpu-07': device: unknown hardware 'h100-sx'; closest: h100-sxm, ...
    inventory.yaml:21: nodes[3] 'gpu-08': site: 'fra2' is not a site of this inventory (sites: fra1)

All problems are collected before raising :class:`InventoryError` (``errors`` holds the lines).

Layout (see ``examples/provider/inventory.yaml``)::

    sites:    [{id, operator, jurisdiction, max_sensitivity, public_addresses, isolated_segments,
                fabrics: [{id, bandwidth}]}]
    nodes:    [{id, site, device, devices, cpus, ram, disk, fabric, pools: [training|serving|...], count}]
    storage:  [{id, site, capacity}]
    maintenance: [{start, end, nodes: [...] | site: ...}]

A site's policy attributes (checked against each job's data, see :mod:`.placement`): ``operator`` is
``provider`` (the provider's own data centre, the default) or ``partner`` (a partner's or colocation data centre:
"off-site" for data with ``offsite_allowed: false``); ``jurisdiction`` is free text naming the legal
jurisdiction/region (e.g. ``DE``, ``EU``), shown with every placement; ``max_sensitivity`` is the most sensitive data
class the site is cleared for (public < internal < confidential < restricted; default restricted: no limit).

``count: N`` on a node expands it into N identical nodes ``<id>-01`` .. ``<id>-N``.

``out_of_service: WHY`` marks a node that takes no new work (drained, down, in repair: ``capacity import`` writes the
scheduler's state there). It is still the provider's machine: the bookings it holds stay booked and are named with a
warning (re-place or release them), and no new job is placed on it. A node deleted from the file is removed: its live
bookings are orphans (:func:`.store.orphaned`), which block the checks that could take the same machine again.
Times are UTC, written ``2025-10-01`` or ``2025-10-01 06:00``.
"""

from __future__ import annotations

import datetime as _dt
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import InputError, LlmsizerError
from ..inputs import foreign_tag, read_small_text, short, yaml_problem
from ..numbers import Range, check_number
from ..request import quantities as Q
from ..request.fields import SENSITIVITY  # the request's dataset.sensitivity, one home
from ..suggest import did_you_mean
from ..units import format_bytes

TRAINING = "training"
SERVING = "serving"


class InventoryError(InputError):
    """An inventory file is invalid. ``errors`` holds one line per problem (file:line: where: field: message)."""

    def __init__(self, errors: Sequence[str]) -> None:
        self.errors = list(errors)
        super().__init__("\n".join(self.errors))


@dataclass(frozen=True)
class Fabric:
    id: str
    site: str
    bandwidth: float | None = None  # bytes/s per node


OPERATORS = ("provider", "partner")


@dataclass(frozen=True)
class Site:
    id: str
    public_addresses: int = 0
    isolated_segments: int = 0
    fabrics: tuple[Fabric, ...] = ()
    operator: str = "provider"  # provider | partner
    jurisdiction: str = ""
    max_sensitivity: str = "restricted"
    regions: tuple[str, ...] = ()  # larger areas the site belongs to (EU, EEA), matched by resources.jurisdiction

    @property
    def label(self) -> str:
        """``partner, DE``: how the site is shown next to a placement."""
        return ", ".join(x for x in (self.operator, self.jurisdiction) if x)


@dataclass(frozen=True)
class Node:
    id: str
    site: str
    device: str  # catalog device id
    devices: int
    cpus: int = 0
    ram: int = 0  # bytes
    disk: int = 0  # bytes
    fabric: str | None = None
    pools: tuple[str, ...] = ()
    line: int = 0
    # why the node takes no new work ('' : in service): a drained or down node (capacity import writes the
    # scheduler's state here). It keeps its bookings, shown with a warning; no new job is placed on it
    out_of_service: str = ""

    @property
    def ram_per_device(self) -> int:
        """The node's RAM shared evenly by its devices [bytes]: what a CPU device's job may hold (a CPU runs the model
        in host RAM), the memory the provider's alternatives size a CPU device with."""
        return self.ram // max(1, self.devices)


@dataclass(frozen=True)
class StoragePool:
    id: str
    site: str
    capacity: int  # bytes


@dataclass(frozen=True)
class Maintenance:
    start: _dt.datetime
    end: _dt.datetime
    nodes: tuple[str, ...] = ()  # node ids affected (a site's window lists all its nodes)
    note: str = ""


@dataclass(frozen=True)
class Quota:
    """A team's quota for one device type (a Kueue ClusterQueue's flavor: nominalQuota, borrowingLimit, cohort).
    ``devices``: nominal devices held at once; ``device_hours``: nominal device-hours booked in [start, end);
    ``borrowing_limit`` / ``borrowing_limit_hours``: how much above nominal it may borrow from the unused nominal
    quota of its cohort (None: up to what the cohort has unused; 0: no borrowing)."""

    team: str
    device: str
    devices: int | None = None
    device_hours: float | None = None
    cohort: str | None = None
    borrowing_limit: int | None = None
    borrowing_limit_hours: float | None = None
    start: _dt.datetime | None = None
    end: _dt.datetime | None = None


@dataclass(frozen=True)
class Inventory:
    sites: tuple[Site, ...]
    nodes: tuple[Node, ...]
    storage: tuple[StoragePool, ...] = ()
    maintenance: tuple[Maintenance, ...] = ()
    source: str = "<inventory>"
    provider: str = ""
    quotas: tuple[Quota, ...] = ()
    #: values that are odd but possible (file:line: where: field: why), said by every command that reads it
    warnings: tuple[str, ...] = ()

    def site(self, ident: str) -> Site:
        return next(s for s in self.sites if s.id == ident)

    def node(self, ident: str) -> Node:
        return next(n for n in self.nodes if n.id == ident)

    @property
    def device_types(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(n.device for n in self.nodes))


# ------------------------------------------------------------------------------------------ reading

def _closest(word: str, options: Sequence[str]) -> str:
    """The one closest name, as every "did you mean" words it (suggest.py)."""
    return did_you_mean(word, options, n=1)


SITE_KEYS = ("id", "name", "operator", "jurisdiction", "regions", "max_sensitivity", "public_addresses",
             "isolated_segments", "fabrics")
FABRIC_KEYS = ("id", "bandwidth")
NODE_KEYS = ("id", "site", "device", "devices", "cpus", "ram", "disk", "fabric", "pools", "count", "out_of_service")
# keys a node does not take, and where what they would say is stated instead
NOT_INVENTORY_KEYS = {
    "memory": "a node's device memory is its device's entry: the hardware catalog's, or a --hardware-file entry "
              "that overrides it (the plan, fit and the placement read that one figure)",
}
NOT_INVENTORY_KEYS["device_memory"] = NOT_INVENTORY_KEYS["memory"]
STORAGE_KEYS = ("id", "site", "capacity")
MAINT_KEYS = ("start", "end", "nodes", "site", "note")
# A 10,000-node inventory is about 1 MB of YAML; past 8 MiB the file is a mistake (reading it would take seconds).
MAX_INVENTORY_BYTES = 8 * 2**20
# devices per node, node counts (each expanded into nodes), CPUs, addresses: the largest clusters hold ~100,000
# GPUs in ~12,500 nodes, so 2^16 per entry is past any real one and bounds what a `count:` expands into
INVENTORY_COUNT = Range(0, 2**16, True, "a count per inventory entry; the largest clusters have ~12,500 nodes")

TOP_KEYS = ("version", "provider", "sites", "nodes", "storage", "maintenance", "quotas")
QUOTA_KEYS = ("team", "device", "devices", "device_hours", "cohort", "borrowing_limit", "borrowing_limit_hours",
              "start", "end")


class _Reader:
    def __init__(self, source: str, hardware_files: Sequence[str | Path]) -> None:
        import yaml

        self.yaml = yaml
        self.source = source
        self.hardware_files = tuple(hardware_files)
        self.errors: list[tuple[int, str]] = []
        self.warnings: list[str] = []

    def err(self, node: Any, where: str, msg: str) -> None:
        line = node.start_mark.line + 1 if hasattr(node, "start_mark") else int(node or 0)
        self.errors.append((line, f"{self.source}:{line}: {where}: {msg}" if where else f"{self.source}:{line}: {msg}"))

    def mapping(self, node: Any, where: str, allowed: Sequence[str]) -> dict[str, tuple[Any, Any]]:
        if not isinstance(node, self.yaml.MappingNode):
            self.err(node, where, f"must be a mapping of keys ({', '.join(allowed)})")
            return {}
        out: dict[str, tuple[Any, Any]] = {}
        for k, v in node.value:
            key = str(k.value) if isinstance(k, self.yaml.ScalarNode) else "?"
            if key not in allowed and allowed is NODE_KEYS and key in NOT_INVENTORY_KEYS:
                self.err(k, where, f"unknown key {short(key)}: {NOT_INVENTORY_KEYS[key]}")
            elif key not in allowed:
                self.err(k, where, f"unknown key {short(key)}{_closest(key, allowed)} (allowed: {', '.join(allowed)})")
            elif key in out:
                self.err(k, where, f"{key}: given twice (first on line {out[key][0].start_mark.line + 1})")
            else:
                out[key] = (k, v)
        return out

    def seq(self, node: Any, where: str) -> list[Any]:
        if not isinstance(node, self.yaml.SequenceNode):
            self.err(node, where, "must be a list")
            return []
        return list(node.value)

    def scalar(self, m: dict[str, tuple[Any, Any]], key: str, where: str, kind: str, required: bool = False,
               parent: Any = None, default: Any = None) -> Any:
        if key not in m:
            if required:
                self.err(parent, where, f"{key}: is required")
            return default
        vnode = m[key][1]
        if not isinstance(vnode, self.yaml.ScalarNode):
            self.err(vnode, where, f"{key}: must be a single value")
            return default
        text = str(vnode.value).strip()
        try:
            if kind == "str":
                if not text:
                    raise InputError("must not be empty")
                return text
            if kind == "int":
                digits = text.replace("_", "")
                try:
                    n = int(digits) if len(digits) <= 30 else float(digits)
                except ValueError:
                    raise InputError(f"must be a whole number, got {short(text)}") from None
                return check_number(n, "", INVENTORY_COUNT)
            if kind == "size":
                if text.startswith("-"):
                    raise InputError(f"must not be negative, got {text!r}")
                return Q.parse_size(text)
            if kind == "bandwidth":
                return Q.parse_bandwidth(text)
            if kind == "time":
                return parse_time(text)
        except InputError as e:
            self.err(vnode, where, f"{key}: {e}")
            return default
        raise AssertionError(kind)  # pragma: no cover

    def strs(self, m: dict[str, tuple[Any, Any]], key: str, where: str) -> tuple[str, ...]:
        if key not in m:
            return ()
        vnode = m[key][1]
        if isinstance(vnode, self.yaml.ScalarNode):
            return tuple(s.strip() for s in str(vnode.value).split(",") if s.strip())
        out = []
        for item in self.seq(vnode, f"{where}: {key}"):
            if not isinstance(item, self.yaml.ScalarNode) or not str(item.value).strip():
                self.err(item, where, f"{key}: list items must be non-empty text")
            else:
                out.append(str(item.value).strip())
        return tuple(out)

    def read(self, text: str) -> Inventory | None:
        yaml = self.yaml
        if len(text) > MAX_INVENTORY_BYTES:
            self.errors.append((0, f"{self.source}: {len(text):,} characters is too large for an inventory "
                                   f"(at most {MAX_INVENTORY_BYTES:,})"))
            return None
        try:
            root = yaml.compose(text, Loader=yaml.SafeLoader)
        except (yaml.YAMLError, RecursionError) as e:
            self.errors.append(yaml_problem(self.source, e, "an inventory is a few levels deep"))
            return None
        if root is None:
            self.errors.append((1, f"{self.source}:1: the file is empty; start from examples/provider/inventory.yaml"))
            return None
        bad_tag = foreign_tag(yaml, root)
        if bad_tag is not None:
            self.err(bad_tag[0], "", f"YAML tag {bad_tag[1]} is not allowed in an inventory; write plain values "
                     "(no '!' tags)")
            return None
        top = self.mapping(root, "", TOP_KEYS)
        if not top:
            return None
        provider = self.scalar(top, "provider", "", "str", default="") or ""
        sites = self.sites(top)
        site_ids = [s.id for s in sites]
        fabrics = {f.id: f for s in sites for f in s.fabrics}
        nodes = self.nodes(top, root, site_ids, fabrics)
        storage = self.storage(top, site_ids)
        maint = self.maintenance(top, site_ids, nodes)
        quotas = self.quotas(top)
        if self.errors:
            return None
        return Inventory(tuple(sites), tuple(nodes), tuple(storage), tuple(maint), self.source, provider,
                         tuple(quotas), tuple(self.warnings))

    def quotas(self, top: dict[str, tuple[Any, Any]]) -> list[Quota]:
        from ..catalog.hardware import load_catalog
        out: list[Quota] = []
        seen: dict[str, int] = {}
        for i, qn in enumerate(self.seq(top["quotas"][1], "quotas") if "quotas" in top else []):
            where = f"quotas[{i}]"
            m = self.mapping(qn, where, QUOTA_KEYS)
            team = self.scalar(m, "team", where, "str", True, qn)
            device = self.scalar(m, "device", where, "str", True, qn)
            if device is not None:
                try:
                    device = load_catalog(self.hardware_files).device(device).id
                except LlmsizerError as e:
                    self.err(m["device"][1], where, f"device: {e}")
            self.ids(seen, f"{team}/{device}" if team and device else None, qn, where, "quota of this team and "
                     "device")
            devices = self.scalar(m, "devices", where, "int")
            hours = self.scalar(m, "device_hours", where, "int")
            if devices is None and hours is None and "devices" not in m and "device_hours" not in m:
                self.err(qn, where, "give devices (nominal devices at once) or device_hours (nominal device-hours)")
            start, end = self.scalar(m, "start", where, "time"), self.scalar(m, "end", where, "time")
            if start is not None and end is not None and end <= start:
                self.err(m["end"][1], where, f"end: {end} is not after the start {start}")
            if team and device:
                out.append(Quota(team, device, devices, float(hours) if hours is not None else None,
                                 self.scalar(m, "cohort", where, "str"), self.scalar(m, "borrowing_limit", where, "int"),
                                 self.scalar(m, "borrowing_limit_hours", where, "int"), start, end))
        return out

    def ids(self, seen: dict[str, int], ident: str | None, node: Any, where: str, what: str) -> None:
        if ident is None:
            return
        if ident in seen:
            self.err(node, where, f"id {ident!r} is used twice (first {what} on line {seen[ident]})")
        else:
            seen[ident] = node.start_mark.line + 1

    def sites(self, top: dict[str, tuple[Any, Any]]) -> list[Site]:
        if "sites" not in top:
            self.errors.append((1, f"{self.source}:1: sites: is required: a list of sites ({', '.join(SITE_KEYS)})"))
            return []
        out: list[Site] = []
        seen: dict[str, int] = {}
        fseen: dict[str, int] = {}
        for i, sn in enumerate(self.seq(top["sites"][1], "sites")):
            m = self.mapping(sn, f"sites[{i}]", SITE_KEYS)
            sid = self.scalar(m, "id", f"sites[{i}]", "str", True, sn)
            where = f"site {sid!r}" if sid else f"sites[{i}]"
            self.ids(seen, sid, sn, where, "site")
            fabrics = []
            if "fabrics" in m:
                for k, fn in enumerate(self.seq(m["fabrics"][1], f"{where}: fabrics")):
                    fm = self.mapping(fn, f"{where}: fabrics[{k}]", FABRIC_KEYS)
                    fid = self.scalar(fm, "id", f"{where}: fabrics[{k}]", "str", True, fn)
                    self.ids(fseen, fid, fn, f"{where}: fabric {fid!r}", "fabric")
                    bw = self.scalar(fm, "bandwidth", f"{where}: fabric {fid!r}", "bandwidth")
                    if fid:
                        fabrics.append(Fabric(fid, sid or "", bw))
            operator = self.scalar(m, "operator", where, "str", default="provider")
            if operator not in OPERATORS:
                self.err(m["operator"][1], where, f"operator: must be provider (the provider's own data centre) or "
                         f"partner (a partner's data centre), not {operator!r}")
                operator = "provider"
            clearance = self.scalar(m, "max_sensitivity", where, "str", default="restricted")
            if clearance not in SENSITIVITY:
                self.err(m["max_sensitivity"][1], where, f"max_sensitivity: must be one of {', '.join(SENSITIVITY)}"
                         f"{_closest(str(clearance), SENSITIVITY)}, not {clearance!r}")
                clearance = "restricted"
            if sid:
                out.append(Site(sid, self.scalar(m, "public_addresses", where, "int", default=0),
                                self.scalar(m, "isolated_segments", where, "int", default=0), tuple(fabrics),
                                operator, self.scalar(m, "jurisdiction", where, "str", default="") or "",
                                clearance, self.strs(m, "regions", where)))
        return out

    def nodes(self, top: dict[str, tuple[Any, Any]], root: Any, site_ids: list[str],
              fabrics: dict[str, Fabric]) -> list[Node]:
        from ..catalog.hardware import load_catalog
        if "nodes" not in top:
            self.err(root, "", "nodes: is required: a list of machines")
            return []
        try:
            cat = load_catalog(self.hardware_files)
        except LlmsizerError as e:
            self.err(root, "", str(e))
            return []
        out: list[Node] = []
        seen: dict[str, int] = {}
        for i, nn in enumerate(self.seq(top["nodes"][1], "nodes")):
            m = self.mapping(nn, f"nodes[{i}]", NODE_KEYS)
            nid = self.scalar(m, "id", f"nodes[{i}]", "str", True, nn)
            where = f"nodes[{i}] {nid!r}" if nid else f"nodes[{i}]"
            site = self.scalar(m, "site", where, "str")
            if site is None and "site" not in m:
                self.err(nn, where, f"site: the node is in no site; give site: one of {', '.join(site_ids) or '-'}")
            elif site is not None and site not in site_ids:
                self.err(m["site"][1], where, f"site: {site!r} is not a site of this inventory"
                         f"{_closest(site, site_ids)} (sites: {', '.join(site_ids) or 'none'})")
            device = self.scalar(m, "device", where, "str", True, nn)
            dev_id = None
            dev_memory = 0.0
            if device is not None:
                try:
                    spec = cat.device(device)
                    dev_id = spec.id
                    # the memory fit, the plan and the placement budget with (Device.memory_bytes: the driver's
                    # figure where sourced, 44.99 GiB for an L40S, not the vendor's 48 GB)
                    dev_memory = float(spec.memory_bytes or 0) if spec.kind == "gpu" else 0.0
                except LlmsizerError as e:
                    self.err(m["device"][1], where, f"device: {e}")
            devices = self.scalar(m, "devices", where, "int", True, nn)
            if devices == 0:
                self.err(m["devices"][1], where, "devices: must be at least 1")
            fabric = self.scalar(m, "fabric", where, "str")
            if fabric is not None:
                fab = fabrics.get(fabric)
                if fab is None:
                    self.err(m["fabric"][1], where, f"fabric: {fabric!r} is not declared under any site's fabrics"
                             f"{_closest(fabric, list(fabrics))}")
                elif site is not None and fab.site != site:
                    self.err(m["fabric"][1], where, f"fabric: {fabric!r} belongs to site {fab.site!r}, not {site!r}")
            pools = self.strs(m, "pools", where)
            count = self.scalar(m, "count", where, "int", default=1)
            if count == 0:
                self.err(m["count"][1], where, "count: must be at least 1")
            cpus = self.scalar(m, "cpus", where, "int")  # None: not given, or already refused
            if cpus == 0:
                self.err(m["cpus"][1], where, "cpus: must be at least 1 (a node runs its jobs on CPUs too; leave "
                         "cpus out when unknown)")
            ram = self.scalar(m, "ram", where, "size")
            if ram == 0:
                self.err(m["ram"][1], where, "ram: must be more than 0 (leave ram out when unknown)")
            elif ram and devices and dev_memory and ram < devices * dev_memory:
                self.warnings.append(
                    f"{self.source}:{m['ram'][1].start_mark.line + 1}: {where}: ram: {format_bytes(ram)} is less "
                    f"than the {devices} x {dev_id}'s {format_bytes(int(devices * dev_memory))} of device memory: odd "
                    "for a GPU server (weights are read through host memory to be loaded); check the value")
            kw = dict(site=site or "", device=dev_id or "", devices=devices or 0, cpus=cpus or 0, ram=ram or 0,
                      disk=self.scalar(m, "disk", where, "size", default=0),
                      fabric=fabric, pools=pools, line=nn.start_mark.line + 1,
                      out_of_service=self.scalar(m, "out_of_service", where, "str", default="") or "")
            names = [nid] if (count or 1) == 1 else [f"{nid}-{k:02d}" for k in range(1, (count or 1) + 1)]
            for name in names:
                if nid is None:
                    continue
                self.ids(seen, name, nn, where, "node")
                out.append(Node(name, **kw))  # type: ignore[arg-type]
        return out

    def storage(self, top: dict[str, tuple[Any, Any]], site_ids: list[str]) -> list[StoragePool]:
        out: list[StoragePool] = []
        seen: dict[str, int] = {}
        for i, sn in enumerate(self.seq(top["storage"][1], "storage") if "storage" in top else []):
            m = self.mapping(sn, f"storage[{i}]", STORAGE_KEYS)
            sid = self.scalar(m, "id", f"storage[{i}]", "str", True, sn)
            where = f"storage {sid!r}" if sid else f"storage[{i}]"
            self.ids(seen, sid, sn, where, "storage pool")
            site = self.scalar(m, "site", where, "str", True, sn)
            if site is not None and site not in site_ids:
                self.err(m["site"][1], where, f"site: {site!r} is not a site of this inventory"
                         f"{_closest(site, site_ids)}")
            cap = self.scalar(m, "capacity", where, "size", True, sn)
            if sid and site and cap is not None:
                out.append(StoragePool(sid, site, cap))
        return out

    def maintenance(self, top: dict[str, tuple[Any, Any]], site_ids: list[str], nodes: list[Node]) -> list[Maintenance]:
        out: list[Maintenance] = []
        node_ids = [n.id for n in nodes]
        for i, mn in enumerate(self.seq(top["maintenance"][1], "maintenance") if "maintenance" in top else []):
            where = f"maintenance[{i}]"
            m = self.mapping(mn, where, MAINT_KEYS)
            start = self.scalar(m, "start", where, "time", True, mn)
            end = self.scalar(m, "end", where, "time", True, mn)
            if start is not None and end is not None and end <= start:
                self.err(m["end"][1], where, f"end: {end} is not after the start {start}")
            affected = list(self.strs(m, "nodes", where))
            for n in affected:
                if n not in node_ids:
                    self.err(m["nodes"][1], where, f"nodes: {n!r} is not a node of this inventory"
                             f"{_closest(n, node_ids)}")
            site = self.scalar(m, "site", where, "str")
            if site is not None:
                if site not in site_ids:
                    self.err(m["site"][1], where, f"site: {site!r} is not a site of this inventory")
                affected += [n.id for n in nodes if n.site == site]
            if not affected and "nodes" not in m and "site" not in m:
                self.err(mn, where, "give the nodes or the site the window applies to")
            if start is not None and end is not None:
                out.append(Maintenance(start, end, tuple(dict.fromkeys(affected)),
                                       self.scalar(m, "note", where, "str", default="") or ""))
        return out


def parse_time(value: object) -> _dt.datetime:
    """A UTC time: ``2025-10-01``, ``2025-10-01 06:00`` or ``2025-10-01T06:00``; returns a naive UTC datetime."""
    if isinstance(value, _dt.datetime):
        return value.replace(tzinfo=None) if value.tzinfo is None else \
            value.astimezone(_dt.timezone.utc).replace(tzinfo=None)
    if isinstance(value, _dt.date):
        return _dt.datetime(value.year, value.month, value.day)
    text = str(value).strip().replace("Z", "+00:00")
    try:
        t = _dt.datetime.fromisoformat(text)
    except ValueError:
        raise InputError(f"cannot read {text!r} as a time; write 2025-10-01 or 2025-10-01 06:00 (UTC)") from None
    return parse_time(t)


def parse_inventory(text: str, *, source: str = "<inventory>", hardware_files: Sequence[str | Path] = ()) -> Inventory:
    """Validate inventory ``text``; raise :class:`InventoryError` listing every problem (file:line: where: field)."""
    r = _Reader(source, hardware_files)
    inv = r.read(text)
    if r.errors or inv is None:
        raise InventoryError([m for _, m in sorted(r.errors, key=lambda e: e[0])] or [f"{source}: invalid inventory"])
    return inv


def load_inventory(path: str | Path, *, hardware_files: Sequence[str | Path] = ()) -> Inventory:
    p = Path(path)
    text = read_small_text(p, "inventory file", MAX_INVENTORY_BYTES)
    return parse_inventory(text, source=str(p), hardware_files=hardware_files)
