"""An inventory from what a scheduler reports: ``scontrol show node`` (the multi-line form or ``--oneliner``: the same
``Key=Value`` fields, one node per record starting at ``NodeName=``) and a Kubernetes node list (``kubectl get nodes
-o json``, or one node: ``kubectl get node NAME -o json``).

Read per node (Slurm's scontrol(1) NODE fields): ``NodeName``, ``Gres`` (``gpu:<type>:<count>(S:...)``: the GPU type
and count, every ``gpu`` entry of the list read, :func:`_node_gpus`: a node with two GPU types is refused in one
line; a node without a ``gpu`` GRES is skipped and counted; an untyped ``gpu:<count>`` is mapped by
``--device-map '?=DEVICE'``, :data:`UNTYPED`), ``CPUEfctv`` (the CPUs jobs may use: ``CPUTot``
less the cores ``CoreSpecCount``/``CPUSpecList`` reserve for the system, scontrol(1) "CPUEfctv"; ``CPUTot`` when an
older Slurm does not print it), ``RealMemory`` (MiB), ``Partitions``, ``State``, ``AvailableFeatures``. A node whose
``State`` says it takes no new work (:data:`UNAVAILABLE`) is not bookable: it is written with ``out_of_service:``
(the state and the reason: a drained node is not a removed one, so the bookings it holds stay booked, with a
warning) and named on stderr. The GPU type is a Slurm name (``a40``, ``a100``), not a catalog id: the operator maps
each to a catalog device (``--device-map a100=a100-sxm-80gb``; a type that is already a catalog id needs none), since
Slurm does not say which variant (memory, SXM or PCIe) a node has.

Read per Kubernetes node: ``metadata.name``; the GPU count from ``status.allocatable`` (the healthy devices the
device plugin offers; ``status.capacity`` when absent) of the extended resource ``nvidia.com/gpu`` or
``amd.com/gpu``; the product from the GPU feature discovery label ``nvidia.com/gpu.product`` (NVIDIA
k8s-device-plugin ``internal/lm/resource.go`` ``getProductName``/``sanitise``: the NVML device name with characters
other than ``[A-Za-z0-9-_. ]`` dropped and spaces written ``-``, ``-SHARED`` appended when time-sliced replicas are
advertised, ``-MIG-<profile>`` for a MIG resource; shared GPUs advertise replicas, so the count is divided by
``nvidia.com/gpu.replicas``) or the AMD labeller's ``amd.com/gpu.product-name``; the memory
per GPU from ``nvidia.com/gpu.memory`` (NVML total memory in MiB, same file: ``GetTotalMemoryMB``); CPUs and RAM
from ``status.capacity`` (Kubernetes quantities); the node pool from the managed-Kubernetes pool labels
(``POOL_LABELS``). A node that takes no new pods (:data:`K8S_UNAVAILABLE`: its Ready condition False or Unknown,
cordoned, or a node-state taint with effect NoSchedule or NoExecute) is not bookable: written with
``out_of_service:`` and named on stderr, as a Slurm node that takes no new jobs. A product is matched to a catalog device the way
``hardware detect`` matches a driver name (:func:`..catalog.detect.catalog_gpu`), or mapped by the operator
(``--device-map PRODUCT=DEVICE``). Pure: text in, records and YAML text out.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import InputError
from ..inputs import TOO_DEEP, short
from .inventory import Inventory, InventoryError, parse_inventory

if TYPE_CHECKING:
    from ..catalog.hardware import HardwareCatalog

#: Slurm node states (base state or ``+FLAG``, as scontrol prints ``State=DOWN+DRAIN``; sinfo's long names too)
#: under which the node takes no new jobs -> why. Slurm docs, sinfo(1) "NODE STATE CODES" and scontrol(1) "State":
#: DOWN unavailable for use; DRAIN/DRAINED/DRAINING not allocated new work per administrator request; FAIL/FAILING
#: expected to fail, unavailable per administrator request; MAINT in a maintenance reservation; NOT_RESPONDING not
#: allocated new work; FUTURE not yet configured for use; INVAL did not register correctly with the controller.
UNAVAILABLE = {
    "DOWN": "down", "DRAIN": "drained by the administrator", "DRAINED": "drained by the administrator",
    "DRAINING": "draining (no new jobs)", "FAIL": "failed", "FAILING": "failing", "MAINT": "in maintenance",
    "NOT_RESPONDING": "not responding", "NO_RESPOND": "not responding", "FUTURE": "not yet in service",
    "INVAL": "invalid registration"}

_KEY = re.compile(r"(?:^|\s)([A-Za-z][A-Za-z_/]*)=")
_GPU = re.compile(r"(?:^|,)gpu:(?:([A-Za-z0-9_.\-]+):)?(\d+)")
MAX_IMPORTED_NODES = 100_000  # the most nodes one scheduler listing may hold (a bound on input read)


@dataclass(frozen=True)
class SlurmNode:
    name: str
    gpu_type: str | None
    gpus: int
    cpus: int  # schedulable: CPUEfctv, else CPUTot
    memory_mib: int
    partitions: tuple[str, ...]
    state: str
    features: tuple[str, ...]
    cpus_total: int = 0  # CPUTot
    line: int = 0  # the line of the input where its record starts (0: not known)

    @property
    def unavailable(self) -> str:
        """Why the node takes no new jobs (its State's flags in :data:`UNAVAILABLE`), or ''."""
        flags = re.split(r"[+]", self.state.upper().rstrip("*~#%$@^-!"))
        why = [UNAVAILABLE[f] for f in flags if f in UNAVAILABLE]
        if self.state.endswith("*"):  # sinfo's suffix: not responding
            why.append(UNAVAILABLE["NOT_RESPONDING"])
        return ", ".join(dict.fromkeys(why))


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
        first = text.lstrip().split("\n", 1)[0]
        if re.match(r"^(PARTITION|NODELIST|HOSTNAMES|NODES?)\s", first) or re.match(r"^\S+\s+\S*gpu:\S+", first):
            raise InputError(f"{source}: this looks like `sinfo` output, which has no memory or CPU count per node: "
                             f"save `scontrol show node` (or `scontrol show node --oneliner`) and import that")
        raise InputError(f"{source}: no 'NodeName=' record: not `scontrol show node` output")
    if len(starts) > MAX_IMPORTED_NODES:
        raise InputError(f"{source}: {len(starts):,} nodes; at most {MAX_IMPORTED_NODES:,}")
    out = []
    for k, s in enumerate(starts):
        f = _fields(text[s:starts[k + 1] if k + 1 < len(starts) else len(text)])
        line = text.count("\n", 0, text.index("NodeName=", s)) + 1
        name = _slurm_name(f.get("NodeName", ""), "node name", f"{source}:{line}")
        for p in (x for x in f.get("Partitions", "").split(",") if x):
            _slurm_name(p, f"node {name!r}: partition", f"{source}:{line}")
        gpu_type, gpus = _node_gpus(f.get("Gres", ""), name, f"{source}:{line}")
        total = _num(f, "CPUTot", name, source)
        cpus = _num(f, "CPUEfctv", name, source) if "CPUEfctv" in f else total
        out.append(SlurmNode(name, gpu_type, gpus,
                             cpus, _num(f, "RealMemory", name, source),
                             tuple(p for p in f.get("Partitions", "").split(",") if p),
                             f.get("State", ""), tuple(x for x in f.get("AvailableFeatures", "").split(",")
                                                       if x and x != "(null)"), total, line))
    return out


def _node_gpus(gres: str, name: str, where: str) -> tuple[str | None, int]:
    """(GPU type, count) of a node's ``Gres`` field. Slurm writes it as a comma-delimited list of GRES
    specifications, each ``<name>[:<type>]:<count>`` (slurm.conf(5) "Gres", e.g. ``Gres=gpu:tesla:1,gpu:kepler:1``:
    one node with two GPU types; gres.conf(5) "Type"); scontrol show node prints the list with each entry's sockets,
    ``gpu:a100:2(S:0-1),gpu:h100:2(S:2-3)``. Every ``gpu`` entry is read: entries of one type are added up; a node
    with two GPU types is refused in one line, since an inventory node holds one device type (inventory.Node.device)
    and keeping only one type would drop the other's devices without a word."""
    by_type: dict[str | None, int] = {}
    for m in _GPU.finditer(gres):
        by_type[m.group(1)] = by_type.get(m.group(1), 0) + int(m.group(2))
    if len(by_type) > 1:
        kinds = ", ".join(f"{gpu_type_key(t)} x{n}" for t, n in by_type.items())
        raise InputError(f"{where}: node {name!r} has {len(by_type)} GPU types ({kinds}, Gres={short(gres)}); an "
                         "inventory node holds one device type: write this node by hand as one row per type, each "
                         "with its own id (and its share of cpus and ram), and take its record out of the input to import the rest")
    return next(iter(by_type.items()), (None, 0))


def _slurm_name(value: str, what: str, where: str) -> str:
    """A node or partition name as Slurm sites write them (letters, digits, '.', '_', '-': the Kubernetes import's
    rule, :func:`_name`), so that it is written into the inventory, and from there into a scheduler command
    (scheduler_export.py), unquoted and unchanged; anything else is refused in one line naming the input's line."""
    if not _NAME.match(value):
        raise InputError(f"{where}: {what} {short(value)} is not a Slurm name llmsizer writes (letters, digits, "
                         "'.', '_', '-')")
    return value


def read_back(text: str, nodes: Sequence[SlurmNode | K8sNode], *, given: str, site: str,
              hardware_files: Sequence[str | Path] = ()) -> Inventory:
    """The generated inventory ``text`` read by the inventory reader (it must read back); its errors cite the
    *input* (``given``): a node's error the line of that node's record where known (``scontrol``), else the file
    alone; never a line of the inventory, which is not written when it does not read back."""
    if not _NAME.match(site):
        raise InputError(f"--site: {short(site)} is not a site id llmsizer writes (letters, digits, '.', '_', '-')")
    try:
        return parse_inventory(text, source=_GENERATED, hardware_files=hardware_files)
    except InventoryError as e:
        lines = {n.name: getattr(n, "line", 0) for n in nodes}
        out = []
        for msg in e.errors:
            rest = re.sub(rf"^{re.escape(_GENERATED)}(:\d+)?: ", "", msg)
            m = re.match(r"nodes\[\d+\] '([^']*)'", rest)
            line = lines.get(m.group(1), 0) if m else 0
            out.append(f"{given}:{line}: {rest}" if line else f"{given}: {rest}")
        raise InventoryError(out) from None


_GENERATED = "<imported inventory>"


#: what an import cannot know and the check needs: said in the file and on stderr
STORAGE_NOTE = ("no shared storage was imported (the scheduler does not report it): add a `storage:` list, "
                "e.g. storage: [{id: fs, site: SITE, capacity: 100 TB}], or every check answers "
                "'site SITE has no shared storage pool'")


def storage_note(site: str) -> str:
    return STORAGE_NOTE.replace("SITE", site)


#: the other thing an import cannot know: which nodes share a network. A multi-node training job is placed on nodes
#: of one fabric only (placement.suitable), so without one every such check answers [fabric] naming the nodes
FABRIC_NOTE = ("no fabrics were imported (the scheduler does not report which nodes share a network): a multi-node "
               "training job runs only on nodes of one fabric, so name it under the site (fabrics: [{id: ib0, "
               "bandwidth: 200 Gb/s}]) and give each node fabric: ib0, or every multi-node training check answers "
               "'[fabric] ... these nodes state no fabric:'")


def _header(source: str, command: str, site: str) -> list[str]:
    """The first lines of an imported inventory: where it came from, what it lacks (storage, fabrics), the version, its one
    site, ``nodes:``."""
    return [f"# imported from {source} ({command}) by llmsizer capacity import",
            f"# {storage_note(site)}", f"# {FABRIC_NOTE}", "version: 1", f"sites:\n  - id: {site}", "nodes:"]


#: the --device-map key of an untyped GPU GRES (``Gres=gpu:1``: gres.conf gave the GPUs no ``Type``), which names
#: no GPU: ``--device-map '?=a40'`` says which device such nodes have (one device for all untyped nodes of a file)
UNTYPED = "?"


def gpu_type_key(gpu_type: str | None) -> str:
    """The ``--device-map`` key of a node's Slurm GPU type: the type, or :data:`UNTYPED` for an untyped GRES (or a
    map key written empty, ``=a40``, read the same). The one rule of the map's keys, the CLI's and the nodes'."""
    return gpu_type or UNTYPED


def inventory_yaml(nodes: list[SlurmNode], *, site: str, device_map: dict[str, str], pools: tuple[str, ...],
                   known: set[str], source: str = "<scontrol>") -> tuple[str, list[str]]:
    """An inventory (YAML text) with one site and a node per GPU node; and notes (nodes skipped and why).
    ``known``: the catalog's device ids; an unmapped GPU type that is not one of them is an error naming it."""
    notes = []
    lines = _header(source, "scontrol show node", site)
    untyped = [n.name for n in nodes if n.gpus and n.gpu_type is None and device_map.get(UNTYPED) not in known]
    if untyped:  # Gres=gpu:N: Slurm was given no Type (gres.conf), so no name says which GPU the node has
        raise InputError(f"{source}: node(s) {', '.join(untyped[:5])}{' ...' if len(untyped) > 5 else ''} have an "
                         f"untyped GPU GRES (Gres=gpu:N, no Type in gres.conf), so Slurm does not say which GPU: "
                         f"map it with --device-map '{UNTYPED}=DEVICE' (e.g. '{UNTYPED}=a40'; see "
                         f"`llmsizer hardware list`)")
    missing = sorted({n.gpu_type for n in nodes if n.gpus and n.gpu_type is not None
                      and device_map.get(n.gpu_type, n.gpu_type) not in known})
    if missing:
        raise InputError(f"{source}: GPU type(s) {', '.join(missing)} are not catalog devices: map each with "
                         f"--device-map TYPE=DEVICE (see `llmsizer hardware list`)")
    kept = down = 0
    for n in nodes:
        if not n.gpus:
            notes.append(f"{n.name}: no gpu GRES, skipped")
            continue
        device = device_map.get(gpu_type_key(n.gpu_type), n.gpu_type)
        node_pools = ", ".join(dict.fromkeys((*pools, *n.partitions)))
        cpus = f" of CPUTot={n.cpus_total}" if n.cpus_total and n.cpus_total != n.cpus else ""
        row = (f"- {{id: {n.name}, site: {site}, device: {device}, devices: {n.gpus}, cpus: {n.cpus}, "
               f"ram: {n.memory_mib} MiB, pools: [{node_pools}]}}  # State={n.state}"
               + (f"; cpus: CPUEfctv (schedulable){cpus}" if cpus else ""))
        if _write_node(lines, notes, n.name, row, f"State={n.state}", n.unavailable):
            kept += 1
        else:
            down += 1
    if not kept and not down:
        raise InputError(f"{source}: no node with a gpu GRES")
    return _nodes_list(lines, kept), notes


def _nodes_list(lines: list[str], kept: int) -> str:
    """The inventory's text (``kept``: its bookable nodes, for the callers' counts). Every GPU node is a row, those out
    of service marked so (:func:`_write_node`), so the file reads back even when none is bookable: the one rule of
    both imports."""
    return "\n".join(lines) + "\n"


def _write_node(lines: list[str], notes: list[str], name: str, row: str, state: str, why: str) -> bool:
    """Write one imported node's ``row`` (a YAML flow-mapping list item, then its ``  # comment``): bookable as it
    is, or, when ``why`` says it takes no new work, with ``out_of_service:`` giving the state and the reason
    (inventory.Node.out_of_service: still the provider's machine, so the bookings it holds stay booked, shown with a
    warning; no new job is placed on it) and named in ``notes`` (stderr). The one rule of both imports; True when
    written bookable."""
    if why:
        at = row.index("}  # ")
        row = f"{row[:at]}, out_of_service: {json.dumps(f'{state} ({why})')}{row[at:]}"
        lines.append(f"  {row}")
        notes.append(f"{name}: {state} ({why}), written out_of_service (not bookable; its bookings are kept)")
        return False
    lines.append(f"  {row}")
    return True


# ----------------------------------------------------------------------------------------------- Kubernetes

#: extended resources a GPU device plugin advertises -> the label holding the product name
GPU_RESOURCES = {"nvidia.com/gpu": "nvidia.com/gpu.product", "amd.com/gpu": "amd.com/gpu.product-name"}
#: per-GPU memory label (MiB) of NVIDIA GPU feature discovery
GPU_MEMORY_LABEL = "nvidia.com/gpu.memory"
#: replicas per physical GPU when the device plugin shares GPUs (time-slicing or MPS): nvidia.com/gpu then counts
#: replicas, not GPUs (k8s-device-plugin internal/lm/resource.go baseLabeler: "replicas", "-SHARED" product suffix)
GPU_REPLICAS_LABEL = "nvidia.com/gpu.replicas"
#: what keeps a Kubernetes node from taking new pods -> why. The Ready condition (Kubernetes docs, "Node Status",
#: Conditions: True healthy and ready to accept pods; False not healthy and not accepting pods; Unknown the node
#: controller has not heard from it within node-monitor-grace-period; a node that never posted a status has it
#: Unknown), spec.unschedulable (`kubectl cordon`: "Mark node as unschedulable"), and the node-state taints the
#: control plane sets (Kubernetes docs, "Taints and Tolerations", Taint based Evictions; k8s.io/api core/v1
#: well_known_taints.go; "Non-graceful node shutdown" for out-of-service), each only with an effect in
#: ``BLOCKING_EFFECTS``. Any other taint (a GPU pool's own, e.g. nvidia.com/gpu=present:NoSchedule) reserves the node
#: for the pods that tolerate it: the node stays bookable, the taint kept in its comment.
K8S_UNAVAILABLE = {
    "Ready=False": "not ready", "Ready=Unknown": "not reporting to the control plane",
    "spec.unschedulable": "cordoned",
    "node.kubernetes.io/not-ready": "not ready", "node.kubernetes.io/unreachable": "unreachable",
    "node.kubernetes.io/unschedulable": "cordoned", "node.kubernetes.io/network-unavailable": "network unavailable",
    "node.kubernetes.io/out-of-service": "out of service",
    "node.cloudprovider.kubernetes.io/uninitialized": "not yet initialized by its cloud provider"}
#: taint effects under which the scheduler places no new pod (NoSchedule) or evicts them (NoExecute); PreferNoSchedule
#: only steers (Kubernetes docs, "Taints and Tolerations")
BLOCKING_EFFECTS = ("NoSchedule", "NoExecute")
#: labels naming a node's pool in managed Kubernetes (AKS, GKE, EKS, Karpenter): the node joins that pool too
POOL_LABELS = ("agentpool", "cloud.google.com/gke-nodepool", "eks.amazonaws.com/nodegroup", "karpenter.sh/nodepool")
#: a label's GPU memory may sit this far below the catalog device's before the mapping is refused (driver-reported
#: totals of one model differ by a few MiB between drivers; a vGPU or MIG slice is a large fraction less)
MEMORY_SLACK = 0.02

# Kubernetes quantity (k8s.io/apimachinery pkg/api/resource/quantity.go, the serialized form): a decimal number,
# then an optional binary (Ki..Ei), decimal (k..E, m for milli) or exponent suffix
_QTY = re.compile(r"^([+-]?(?:\d+(?:\.\d*)?|\.\d+))(Ki|Mi|Gi|Ti|Pi|Ei|m|k|M|G|T|P|E|[eE][+-]?\d+)?$")
_QTY_FACTOR: dict[str | None, Decimal | int] = {None: 1, "m": Decimal("0.001"), "k": 10**3, "M": 10**6, "G": 10**9, "T": 10**12, "P": 10**15,
               "E": 10**18, "Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}


@dataclass(frozen=True)
class K8sNode:
    name: str
    resource: str | None  # nvidia.com/gpu | amd.com/gpu | None (no GPU)
    gpus: int
    product: str | None
    gpu_memory_mib: int | None  # per GPU, from GPU_MEMORY_LABEL
    cpus: int
    ram_mib: int
    pools: tuple[str, ...]
    state: str  # Ready=True, ",cordoned" when spec.unschedulable, ",taint KEY:EFFECT" for each taint
    unavailable: str = ""  # why it takes no new pods (K8S_UNAVAILABLE), or ''


def quantity(text: Any, where: str) -> Decimal:
    """A Kubernetes quantity ('1900m', '16367668Ki', '8', '129e6') as a number, or a one-line InputError."""
    m = _QTY.match(str(text).strip())
    if m is None:
        raise InputError(f"{where}: {short(text)} is not a Kubernetes quantity (e.g. 8, 1900m, 16367668Ki)")
    try:
        value = Decimal(m.group(1))
    except InvalidOperation:  # pragma: no cover - the pattern admits only decimals
        raise InputError(f"{where}: {short(text)} is not a number") from None
    suffix = m.group(2)
    if suffix and suffix[0] in "eE":
        exp = int(suffix[1:])
        if abs(exp) > 30:
            raise InputError(f"{where}: {short(text)}: exponent out of range")
        return value.scaleb(exp)
    return value * _QTY_FACTOR[suffix]


def _obj(v: Any, where: str) -> dict[str, Any]:
    if v is None:
        return {}
    if not isinstance(v, dict):
        raise InputError(f"{where}: expected a mapping, got {short(v)}")
    return v


def parse_kubectl_nodes(text: str, source: str = "<kubectl>") -> list[K8sNode]:
    """The nodes of ``kubectl get nodes -o json`` (a List/NodeList) or ``kubectl get node NAME -o json`` (a Node)."""
    try:
        doc = json.loads(text)
    except RecursionError:
        raise InputError(f"{source}: {TOO_DEEP}") from None
    except ValueError as e:
        raise InputError(f"{source}: not JSON ({e}): save `kubectl get nodes -o json`") from None
    if not isinstance(doc, dict) or doc.get("kind") not in ("List", "NodeList", "Node"):
        raise InputError(f"{source}: not `kubectl get nodes -o json` output (no \"kind\": \"List\", \"NodeList\" "
                         f"or \"Node\" at the top)")
    items = [doc] if doc["kind"] == "Node" else doc.get("items")
    if not isinstance(items, list):
        raise InputError(f"{source}: \"items\" is not a list")
    if len(items) > MAX_IMPORTED_NODES:
        raise InputError(f"{source}: {len(items):,} nodes; at most {MAX_IMPORTED_NODES:,}")
    out = []
    for k, item in enumerate(items):
        where = f"{source}: items[{k}]"
        item = _obj(item, where)
        if item.get("kind", "Node") != "Node":
            raise InputError(f"{where}: kind {short(item.get('kind'))}, not Node")
        meta, status, spec = (_obj(item.get(x), f"{where}.{x}") for x in ("metadata", "status", "spec"))
        name = meta.get("name")
        if not isinstance(name, str) or not name:
            raise InputError(f"{where}: metadata.name missing")
        where = f"{source}: node {_name(name, 'name', where)!r}"
        labels = {str(a): str(b) for a, b in _obj(meta.get("labels"), f"{where}: metadata.labels").items()}
        cap = _obj(status.get("capacity"), f"{where}: status.capacity")
        alloc = _obj(status.get("allocatable"), f"{where}: status.allocatable")
        resource, gpus = None, 0
        for res in GPU_RESOURCES:
            raw = alloc.get(res, cap.get(res))
            if raw is not None:
                n = quantity(raw, f"{where}: {res}")
                if n != int(n) or n < 0:
                    raise InputError(f"{where}: {res}={short(raw)} is not a whole number of devices")
                if n:
                    resource, gpus = res, int(n)
                    break
        shared = ""
        replicas = labels.get(GPU_REPLICAS_LABEL, "1") if resource == "nvidia.com/gpu" else "1"
        if not replicas.isdigit() or int(replicas) < 1:
            raise InputError(f"{where}: {GPU_REPLICAS_LABEL}={short(replicas)} is not a whole number of replicas")
        if int(replicas) > 1 and gpus:
            # shared GPUs: the advertised count is replicas x GPUs; the inventory holds whole GPUs
            shared = f",time-sliced x{replicas} ({gpus} replicas)"
            gpus //= int(replicas)
        mem = labels.get(GPU_MEMORY_LABEL) if resource == "nvidia.com/gpu" else None
        if mem is not None and not mem.isdigit():
            raise InputError(f"{where}: {GPU_MEMORY_LABEL}={short(mem)} is not a whole number of MiB")
        ready = next((c.get("status") for c in status.get("conditions") or [] if isinstance(c, dict)
                      and c.get("type") == "Ready"), "Unknown")
        if ready not in ("True", "False", "Unknown"):  # core/v1 ConditionStatus
            raise InputError(f"{where}: Ready condition status {short(ready)} is not True, False or Unknown")
        taints = [_taint(t, where) for t in spec.get("taints") or []]
        why = [f"{K8S_UNAVAILABLE[f]} ({f})" for f in (f"Ready={ready}",) if f in K8S_UNAVAILABLE]
        if spec.get("unschedulable"):
            why.append(f"{K8S_UNAVAILABLE['spec.unschedulable']} (spec.unschedulable)")
        why += [f"{K8S_UNAVAILABLE[k]} (taint {k}:{e})" for k, e in taints
                if k in K8S_UNAVAILABLE and e in BLOCKING_EFFECTS]
        product = labels.get(GPU_RESOURCES[resource]) if resource else None
        out.append(K8sNode(
            name, resource, gpus, _name(product, "product", where) if product else None,
            int(mem) if mem is not None else None,
            int(quantity(cap.get("cpu", 0), f"{where}: cpu")),
            int(quantity(cap.get("memory", 0), f"{where}: memory") / 2**20),
            tuple(dict.fromkeys(_name(labels[x], x, where) for x in POOL_LABELS if labels.get(x))),
            f"Ready={ready}" + (",cordoned" if spec.get("unschedulable") else "") + shared
            + "".join(f",taint {k}:{e}" for k, e in taints), ", ".join(why)))
    if not out:
        raise InputError(f"{source}: the node list is empty")
    return out


_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,252}$")
_TAINT_KEY = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._/-]{0,315}$")  # [DNS-subdomain prefix/]name
_TAINT_EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")  # core/v1 TaintEffect


def _taint(t: Any, where: str) -> tuple[str, str]:
    """(key, effect) of one of a node's ``spec.taints``, as Kubernetes writes them (so that it is written into the
    node's comment unchanged); anything else is refused."""
    t = _obj(t, f"{where}: spec.taints")
    key, effect = t.get("key"), t.get("effect")
    if not isinstance(key, str) or not _TAINT_KEY.match(key):
        raise InputError(f"{where}: taint key {short(key)} is not a Kubernetes taint key")
    if effect not in _TAINT_EFFECTS:
        raise InputError(f"{where}: taint {key} effect {short(effect)} is not one of {', '.join(_TAINT_EFFECTS)}")
    return key, str(effect)


def _name(value: str, what: str, where: str) -> str:
    """A node, pool or product name as Kubernetes writes them (DNS-1123 and label-value characters), so that it is
    written into the YAML unquoted and unchanged; anything else is refused."""
    if not _NAME.match(value):
        raise InputError(f"{where}: {what} {short(value)} is not a Kubernetes name (letters, digits, '.', '_', '-')")
    return value


def _product_names(product: str) -> list[str]:
    """The names a product label may stand for: as written, and without GPU feature discovery's ``-SHARED``."""
    return list(dict.fromkeys([product, re.sub(r"-SHARED$", "", product)]))


def kubectl_inventory_yaml(nodes: list[K8sNode], *, site: str, device_map: dict[str, str], pools: tuple[str, ...],
                           catalog: HardwareCatalog, source: str = "<kubectl>") -> tuple[str, list[str]]:
    """An inventory (YAML text) with one site and a node per GPU node; and notes (nodes skipped and why).
    ``device_map``: product label -> catalog device id (already resolved by the caller); a product neither mapped
    nor matched in the catalog, or whose label memory is below the device's, is an error naming it."""
    from ..catalog.detect import catalog_gpu
    notes: list[str] = []
    rows: list[tuple[K8sNode, str]] = []
    missing: dict[str, str] = {}
    for n in nodes:
        if not n.gpus:
            notes.append(f"{n.name}: no nvidia.com/gpu or amd.com/gpu, skipped")
            continue
        if not n.product:
            raise InputError(f"{source}: node {n.name!r}: {n.gpus} {n.resource} but no {GPU_RESOURCES[str(n.resource)]}"
                             f" label (install GPU feature discovery, or label the node)")
        device = next((device_map[p] for p in _product_names(n.product) if p in device_map), None)
        if device is None:
            dev = next((d for p in _product_names(n.product) if (d := catalog_gpu(catalog, p)) is not None), None)
            if dev is None:
                mem = f" ({n.gpu_memory_mib} MiB each)" if n.gpu_memory_mib else ""
                missing.setdefault(n.product, mem)
                continue
            device = dev.id
        have = catalog.devices[device].memory_bytes
        if n.gpu_memory_mib is not None and have and n.gpu_memory_mib * 2**20 < have * (1 - MEMORY_SLACK):
            raise InputError(f"{source}: node {n.name!r}: {GPU_MEMORY_LABEL}={n.gpu_memory_mib} MiB is less than "
                             f"{device}'s {have / 2**20:.0f} MiB (a vGPU or MIG slice?): map {n.product} to a device "
                             f"with that memory (a --hardware-file entry)")
        rows.append((n, device))
    if missing:
        raise InputError(f"{source}: GPU product(s) {', '.join(p + m for p, m in sorted(missing.items()))} are not "
                         f"catalog devices: map each with --device-map PRODUCT=DEVICE (see `llmsizer hardware list`; "
                         f"a device the catalog lacks goes in a --hardware-file)")
    if not rows:
        raise InputError(f"{source}: no node with nvidia.com/gpu or amd.com/gpu")
    lines = _header(source, "kubectl get nodes -o json", site)
    down: list[str] = []
    for n, device in rows:
        node_pools = ", ".join(dict.fromkeys((*pools, *n.pools)))
        mem = f", {GPU_MEMORY_LABEL}={n.gpu_memory_mib}" if n.gpu_memory_mib is not None else ""
        row = (f"- {{id: {n.name}, site: {site}, device: {device}, devices: {n.gpus}, cpus: {n.cpus}, "
               f"ram: {n.ram_mib} MiB, pools: [{node_pools}]}}  # {n.product}{mem}, {n.state}")
        if not _write_node(lines, notes, n.name, row, n.state, n.unavailable):
            down.append(notes[-1])
    return _nodes_list(lines, len(rows) - len(down)), notes
