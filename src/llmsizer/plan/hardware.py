"""The hardware a job is planned on: resolve the request's resources against the hardware catalog, or turn a
recommendation into the same shape. Routing only: prices, memories and bandwidths are the catalog's values."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from ..catalog.hardware import Device, HardwareCatalog, Instance, load_catalog
from ..estimate.device import target_memory, usable_memory
from ..estimate.fit import SERVING_GPUS_PER_NODE, link_bandwidth_for
from ..recommend import Option
from ..request.quantities import parse_network
from ..request.spec import Resources
from ..result import Assumption
from .result import Hardware


@dataclass
class PlanContext:
    """What every job's plan shares: the hardware catalog, user hardware files, today's date."""

    hardware_files: tuple[str | Path, ...] = ()
    today: Any = None
    catalog: HardwareCatalog | None = None
    alternatives: bool = True  # search the catalog for alternatives (cost per option) even when resources are named
    notes: list[Assumption] = field(default_factory=list)
    # catalog searches already made for this plan (search()): key -> ((spec, kwargs), answer)
    searches: dict[tuple[Any, ...], tuple[tuple[Any, dict[str, Any]], Any]] = field(default_factory=dict, repr=False)

    def cat(self) -> HardwareCatalog:
        if self.catalog is None:
            self.catalog = load_catalog(self.hardware_files)
        return self.catalog

    def search(self, fn: Callable[..., T], spec: Any, **kwargs: Any) -> T:
        """``fn(spec, **kwargs)`` (a catalog search: recommend_inference / recommend_training), once per plan
        for each distinct question: memoized on ``fn``, the spec object and every keyword value with its type
        (dicts by their sorted items; the catalog and other unhashable objects by identity). Jobs with the same
        model and traffic shape share one search; the answer is the same object, which is frozen. An error is
        not memoized."""
        key = (fn, id(spec), tuple((k, _key(v)) for k, v in sorted(kwargs.items())))
        hit = self.searches.get(key)
        if hit is not None and hit[0][0] is spec:
            return hit[1]  # type: ignore[no-any-return]
        out = fn(spec, **kwargs)
        self.searches[key] = ((spec, kwargs), out)  # kept alive: no object whose id is in a key is reused
        return out


T = TypeVar("T")


def _key(v: Any) -> Any:
    """A hashable stand-in for a keyword value that equals another's exactly when the values would give the same
    search (type included: 1 and 1.0 are different keys)."""
    if isinstance(v, (HardwareCatalog, Device, Instance)):
        return ("id", id(v))  # large, and the same object for the whole plan
    if dataclasses.is_dataclass(v) and not isinstance(v, type):  # e.g. Constraints: field by field, types kept
        return (type(v).__name__, tuple((f.name, _key(getattr(v, f.name))) for f in dataclasses.fields(v)))
    if isinstance(v, dict):
        return ("dict", tuple((k, _key(x)) for k, x in sorted(v.items(), key=lambda kv: str(kv[0]))))
    if isinstance(v, (list, tuple)):
        return (type(v).__name__, tuple(_key(x) for x in v))
    try:
        hash(v)
    except TypeError:
        return ("id", id(v))
    return (type(v).__name__, v)


def _price(res: Resources, device: Device, instance: Instance | None, count: int, nodes: int) -> tuple[float | None, str]:
    if res.price_per_hour is not None:
        return res.price_per_hour, "given in the request"
    if instance is not None and instance.price_per_hour is not None:
        p = instance.price
        src = f"{p.source}, {p.date}" if p is not None else ""
        return instance.price_per_hour * nodes, f"on-demand {instance.id} x {nodes} in {instance.region} ({src})"
    if device.price is not None:
        return float(device.price.base) * count, f"{device.id} hourly price x {count} (hardware file)"
    return None, "unknown: no catalog price; give resources.price_per_hour"


def machines_of(count: int, per_node: int = SERVING_GPUS_PER_NODE) -> int:
    """The machines ``count`` devices named bare (no instance, no ``resources.nodes``) are: machines of
    ``per_node`` devices, ceil(count / min(count, per_node)), the rule ``fit`` lays them out by (estimate/fit.py
    ``SERVING_GPUS_PER_NODE``, TrainingWorkload.gpus_per_node = 8, an HGX/DGX board; estimate/duration.py times
    a run's data-parallel traffic over these machines). 16 bare H100s are 2 machines of 8, as `fit --count 16`."""
    return -(-count // machine_size(count, per_node))


def machine_size(count: int, per_node: int = SERVING_GPUS_PER_NODE) -> int:
    """The devices of one machine ``count`` devices named bare are laid out on: ``per_node`` (fit's
    ``SERVING_GPUS_PER_NODE``), or all of them when fewer. fit fills machines in order, so 12 bare H100s are 8 + 4
    (estimate/fit.py, ``per_node`` for a device name), not 6 + 6."""
    return max(1, min(count, per_node))


def owned_hardware(hw: Hardware, res: Resources) -> bool:
    """Owned hardware: a bare device (no cloud instance) priced at the request's own hourly figure
    (``resources.price_per_hour``), the team's cost of hardware it runs itself. The one rule behind "owned hardware
    gets no provider advice" (docs/plans.md): neither the job's hourly-or-reserved note nor the plan's check."""
    return hw.instance is None and res.price_per_hour is not None


MEMORY_ONLY_DEVICE = "gpu"  # resources.memory alone: a GPU known only by its kind (catalog GENERIC_DEVICES)


def requested(res: Resources, ctx: PlanContext) -> tuple[Hardware | None, Device | None, Instance | None]:
    """The Hardware a request names (None when it names none). A memory budget alone (``resources.memory`` with no
    device or instance) is a GPU known only by its kind with that memory, as ``infer --memory`` / ``fit --device gpu
    --memory`` answer it (``catalog/hardware.py`` ``GENERIC_DEVICES``): no catalog search, no price."""
    if not res.given and res.memory is None:
        return None, None, None
    cat = ctx.cat()
    instance: Instance | None = None
    if res.instance is not None:
        hw = cat.find(res.instance)
        instance = hw if isinstance(hw, Instance) else None
    device = instance.device if instance is not None else cat.device(str(res.device or MEMORY_ONLY_DEVICE))
    nodes = res.nodes or 1
    machine = 0  # the count's equal share per machine (Hardware.per_node) unless fit's machine size is taken below
    if instance is not None:
        if res.nodes is None and res.count:  # a whole multiple of the instance (the request reader checks it)
            nodes = max(1, res.count // instance.device_count)
        count = instance.device_count * nodes
    else:
        count = res.count or nodes
        if res.nodes is None:  # bare devices: the machines fit takes them for (machines_of, gpus_per_node)
            nodes = machines_of(count)
            machine = machine_size(count)
    usable, _ = target_memory(device, instance, res.memory)  # a CPU VM: its RAM, as fit
    price, basis = _price(res, device, instance, count, nodes)
    link = None
    if res.interconnect is not None and cat.interconnect(res.interconnect) is not None:
        ic = cat.interconnect(res.interconnect)
        link = float(ic.bandwidth.base) if ic is not None else None
    elif count // nodes > 1:
        link = link_bandwidth_for(device, instance, ctx.hardware_files)
    node_bw = None
    if res.network is not None:  # fit --network's reader, per port times the devices of one machine
        node_bw = parse_network(res.network, machine or max(1, count // nodes), ctx.hardware_files)[0]
    elif instance is not None and instance.network is not None:
        node_bw = float(instance.network.base)
    return Hardware("requested", device.id, device.name, device.kind, count, nodes, instance.id if instance else None,
                    usable, price, basis, res.pool, link, node_bw, machine_devices=machine), device, instance


def from_option(o: Option, res: Resources, ctx: PlanContext) -> tuple[Hardware, Device, Instance | None]:
    """The Hardware of a recommended option: its count (every device) and its instances (the machines they are,
    ``recommend.Option``'s convention, fit's) become count and nodes; its replicas are fit's, the model copies over
    all its devices."""
    cat = ctx.cat()
    hw = cat.find(o.target)
    instance = hw if isinstance(hw, Instance) else None
    device = instance.device if instance is not None else cat.device(o.device)
    nodes, count = max(1, o.instances), o.count
    usable, _ = usable_memory(device, res.memory)
    link = link_bandwidth_for(device, instance, ctx.hardware_files) if count // nodes > 1 else None
    node_bw = float(instance.network.base) if instance is not None and instance.network is not None else None
    price = o.price_per_hour
    basis = ("on-demand, from `llmsizer recommend`" if price is not None else "unknown: no catalog price")
    return Hardware("suggested", device.id, device.name, device.kind, count, nodes, instance.id if instance else None,
                    usable, price, basis, res.pool, link, node_bw, o.engine or None, o.tensor_parallel,
                    replicas=o.replicas), device, instance


def none_hardware(res: Resources) -> Hardware:
    return Hardware("none", pool=res.pool)


def option_dict(o: Option, basis: str) -> dict[str, Any]:
    """A compact record of one alternative (for the cost-per-option chart and tables)."""
    return {"target": o.target, "name": o.name, "hardware": o.devices_text, "status": o.status, "price_per_hour": o.price_per_hour,
        "run_cost": o.run_cost, "training_seconds": o.training_seconds, "weights_format": o.weights_format,
        "tokens_per_second": o.tokens_per_second, "layout": o.layout, "basis": basis, "reasons": list(o.reasons)}
