"""An inventory from what a scheduler reports: ``scontrol show node`` (the multi-line form or ``--oneline``: the same
``Key=Value`` fields, one node per record starting at ``NodeName=``).

Read per node (Slurm's scontrol(1) NODE fields): ``NodeName``, ``Gres`` (``gpu:<type>:<count>(S:...)``: the GPU type
and count; a node without a ``gpu`` GRES is skipped and counted), ``CPUTot``, ``RealMemory`` (MiB), ``Partitions``,
``State``, ``AvailableFeatures``. The GPU type is a Slurm name (``a40``, ``a100``), not a catalog id: the operator maps
each to a catalog device (``--device-map a100=a100-sxm-80gb``; a type that is already a catalog id needs none), since
Slurm does not say which variant (memory, SXM or PCIe) a node has. Pure: text in, records and YAML text out.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ..errors import InputError

_KEY = re.compile(r"(?:^|\s)([A-Za-z][A-Za-z_/]*)=")
_GPU = re.compile(r"(?:^|,)gpu:(?:([A-Za-z0-9_.\-]+):)?(\d+)")
MAX_NODES = 100_000


@dataclass(frozen=True)
class SlurmNode:
    name: str
    gpu_type: str | None
    gpus: int
    cpus: int
    memory_mib: int
    partitions: tuple[str, ...]
    state: str
    features: tuple[str, ...]


def _fields(record: str) -> dict[str, str]:
    """``Key=Value`` pairs of one node record; a value runs to the next `` Key=`` (values may hold spaces: OS=...)."""
    marks = list(_KEY.finditer(record))
    out = {}
    for k, m in enumerate(marks):
        end = marks[k + 1].start() if k + 1 < len(marks) else len(record)
        out[m.group(1)] = record[m.end():end].strip()
    return out


def _num(f: dict[str, str], key: str, name: str, source: str) -> int:
    v = f.get(key, "0")
    if not v.isdigit():
        raise InputError(f"{source}: node {name!r}: {key}={v!r} is not a whole number")
    return int(v)


def parse_scontrol_nodes(text: str, source: str = "<scontrol>") -> list[SlurmNode]:
    """The nodes of ``scontrol show node`` output (either form)."""
    starts = [m.start() for m in re.finditer(r"(?:^|\s)NodeName=", text)]
    if not starts:
        raise InputError(f"{source}: no 'NodeName=' record: not `scontrol show node` output")
    if len(starts) > MAX_NODES:
        raise InputError(f"{source}: {len(starts):,} nodes; at most {MAX_NODES:,}")
    out = []
    for k, s in enumerate(starts):
        f = _fields(text[s:starts[k + 1] if k + 1 < len(starts) else len(text)])
        name = f.get("NodeName", "")
        gpu = _GPU.search(f.get("Gres", ""))
        out.append(SlurmNode(name, gpu.group(1) if gpu else None, int(gpu.group(2)) if gpu else 0,
                             _num(f, "CPUTot", name, source), _num(f, "RealMemory", name, source), tuple(p for p in f.get("Partitions", "").split(",") if p),
                             f.get("State", ""), tuple(x for x in f.get("AvailableFeatures", "").split(",")
                                                       if x and x != "(null)")))
    return out


def inventory_yaml(nodes: list[SlurmNode], *, site: str, device_map: dict[str, str], pools: tuple[str, ...],
                   known: set[str], source: str = "<scontrol>") -> tuple[str, list[str]]:
    """An inventory (YAML text) with one site and a node per GPU node; and notes (nodes skipped and why).
    ``known``: the catalog's device ids; an unmapped GPU type that is not one of them is an error naming it."""
    notes = []
    lines = [f"# imported from {source} (scontrol show node) by llmsizer capacity import", "version: 1",
             f"sites:\n  - id: {site}", "nodes:"]
    missing = sorted({n.gpu_type or "?" for n in nodes if n.gpus and device_map.get(n.gpu_type or "", n.gpu_type)
                      not in known})
    if missing:
        raise InputError(f"{source}: GPU type(s) {', '.join(missing)} are not catalog devices: map each with "
                         f"--device-map TYPE=DEVICE (see `llmsizer hardware list`)")
    kept = 0
    for n in nodes:
        if not n.gpus:
            notes.append(f"{n.name}: no gpu GRES, skipped")
            continue
        device = device_map.get(n.gpu_type or "", n.gpu_type)
        node_pools = ", ".join(dict.fromkeys((*pools, *n.partitions)))
        lines.append(f"  - {{id: {n.name}, site: {site}, device: {device}, devices: {n.gpus}, cpus: {n.cpus}, "
                     f"ram: {n.memory_mib} MiB, pools: [{node_pools}]}}  # State={n.state}")
        kept += 1
    if not kept:
        raise InputError(f"{source}: no node with a gpu GRES")
    return "\n".join(lines) + "\n", notes
