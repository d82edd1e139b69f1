"""The hardware catalog: accelerators, Apple silicon, CPUs, cloud instances and interconnects, each value with
its source and date, looked up by id, name or alias.

Data files live in ``catalog/data/hardware/*.json``. Every number is stored as the source writes it (value +
unit, e.g. ``{"value": 80, "unit": "GB"}``) and converted here, once, to base units: bytes, bytes/s, FLOP/s, W,
USD/h. ``GB`` is 10^9 bytes and ``GiB`` 2^30 (``units.py``); ``Gb/s`` is bits -- except for memory *capacity*
(device memory, unified memory, host RAM), where one convention holds (``MEMORY_CONVENTION`` below): the
driver-reported capacity where a sourced report exists, else the vendor's figure read with JEDEC's binary meaning
(``24 GB`` GDDR = 24 GiB). Dense peak FLOP/s are in ``flops``, 2:4-sparse figures only in ``flops_sparse``. A
``null`` value means no source was found; it is never guessed.

Users add or override entries with their own file (JSON; YAML too when PyYAML is importable)::

    {"devices": [{"id": "my-laptop", "name": "My laptop", "kind": "cpu", "form_factor": "laptop",
                  "memory": "32GiB", "memory_bandwidth": "68 GB/s", "owned": true}],
     "instances": [{"id": "aws-p5.48xlarge", "price": 40.0}]}

An entry whose id exists replaces the fields it gives. Plain numbers and strings ("24GiB", "1008 GB/s",
"82 TFLOP/s") are accepted; their source is the file and their date its modification date. Errors name the file
and the field in one line.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Any

from ..errors import InputError, ModelFileError, UnknownNameError
from ..formulas.cpu_peak import cpu_peak_flops, fma_width, matrix_tile_width
from ..frozen import fast_init
from ..inputs import not_true_or_false, short
from ..numbers import BANDWIDTH, BYTES, CLOCK, DEVICE_MEMORY, MONEY, POSITIVE, SIZE, NumberError, Range, check_number
from ..suggest import close_matches, matches_name, unknown_choice
from ..units import GiB

KINDS = ("gpu", "tpu", "accelerator", "apple", "cpu")
# 'unknown': a hardware file's device that names none (every built-in row names its own); the default-engine rule
# (estimate/device.py engine_rule) then chooses by what is known and says the form factor was not given
FORM_FACTORS = ("datacenter", "desktop", "laptop", "server", "unknown")

# unit -> factor to the base unit of its quantity
_MEMORY = {"B": 1.0, "KB": 1e3, "MB": 1e6, "GB": 1e9, "TB": 1e12, "KiB": 2.0**10, "MiB": 2.0**20, "GiB": 2.0**30,
           "TiB": 2.0**40}
_BANDWIDTH = {"B/s": 1.0, "MB/s": 1e6, "GB/s": 1e9, "TB/s": 1e12, "MiB/s": 2.0**20, "GiB/s": 2.0**30,
              "Mb/s": 1e6 / 8, "Gb/s": 1e9 / 8, "Tb/s": 1e12 / 8}
_FLOPS = {"FLOP/s": 1.0, "GFLOP/s": 1e9, "TFLOP/s": 1e12, "PFLOP/s": 1e15, "TOP/s": 1e12, "POP/s": 1e15}
_POWER = {"W": 1.0, "kW": 1e3}
_FREQUENCY = {"Hz": 1.0, "MHz": 1e6, "GHz": 1e9}
# Memory capacity: JEDEC's binary prefixes. Decimal-looking units (KB, MB, GB, TB) written for a memory capacity
# mean 2^10, 2^20, 2^30, 2^40 bytes (see MEMORY_CONVENTION); disks and bandwidths stay decimal (_MEMORY, _BANDWIDTH).
_JEDEC_BINARY = {"KB": 10, "MB": 20, "GB": 30, "TB": 40}
_CAPACITY = {"B": 1.0, **{u: 2.0**e for u, e in _JEDEC_BINARY.items()}, "KiB": 2.0**10, "MiB": 2.0**20,
             "GiB": 2.0**30, "TiB": 2.0**40}
_PRICE = {"USD/h": 1.0, "USD": 1.0}
_COUNT = {"vCPU": 1.0, "channels": 1.0, "cores": 1.0, "flag": 1.0, "threads/core": 1.0, "SMs": 1.0, "GPUs": 1.0}
# an NVIDIA compute capability as NVIDIA writes it, major.minor (12.0); Device.capability reads it as major x 10 + minor
_CAPABILITY = {"major.minor": 1.0}
UNIT_TABLES: dict[str, dict[str, float]] = {
    "memory": _MEMORY, "capacity": _CAPACITY, "bandwidth": _BANDWIDTH, "flops": _FLOPS, "power": _POWER,
    "price": _PRICE, "count": _COUNT, "capability": _CAPABILITY, "frequency": _FREQUENCY,
}
# what a value may be once in its base unit (numbers.py, the one number check): finite, and within the documented
# maxima; a device's memory capacity at least one byte (it is the budget every fit divides). Byte counts need not be
# whole here ('79.65 GiB' is a published figure), so the byte ranges are taken as real-valued.
QUANTITY_RANGES: dict[str, Range] = {
    "memory": replace(SIZE, integral=False), "capacity": replace(BYTES, integral=False), "bandwidth": BANDWIDTH,
    "flops": POSITIVE, "power": POSITIVE, "price": MONEY, "count": POSITIVE, "capability": POSITIVE,
    "frequency": CLOCK,
}
_FIELD_QUANTITY = {
    "memory": "capacity", "memory_usable": "capacity", "memory_cuda": "capacity", "memory_options": "capacity",
    "memory_bandwidth": "bandwidth",
    "interconnect_bandwidth": "bandwidth", "tdp": "power", "launch_price": "price", "memory_channels": "count",
    "cores": "count", "price": "price", "vcpus": "count", "local_disk": "memory", "network": "bandwidth",
    "bandwidth": "bandwidth", "threads_per_core": "count", "sm_count": "count", "fp32_cores": "count",
    "compute_capability": "capability", "clock": "frequency", "nvlink_domain": "count",
}

# Compute capability (major x 10 + minor) of the first GPUs of each NVIDIA architecture (Device.architecture), for a
# device that gives its architecture but not its compute_capability (a hardware file's entry): NVIDIA's "CUDA GPU
# Compute Capability" table (developer.nvidia.com/cuda-gpus; V100 on its legacy page). One architecture name spans
# several capabilities: "blackwell" is 10.0 (B200, GB200), 10.3 (B300, GB300), 12.0 (RTX PRO 6000 Blackwell, GeForce
# RTX 50) and 12.1 (GB10), so every catalog NVIDIA row states its own ``compute_capability`` and this table is only
# the fallback (tests/hardware/test_compute_capability.py).
ARCHITECTURE_CAPABILITY = {"pascal": 60, "volta": 70, "turing": 75, "ampere": 80, "ada": 89, "hopper": 90,
                           "blackwell": 100}

# ------------------------------------------------------------------------------ memory capacity convention
MEMORY_CONVENTION = (
    "device memory = the capacity the driver reports (nvidia-smi memory.total, rocm-smi 'VRAM Total Memory (B)', "
    "a cloud API's GpuInfo MemoryInfo.SizeInMiB) where a sourced report exists; otherwise the vendor's figure read "
    "with JEDEC's binary meaning for semiconductor memory (JEDEC JESD100B.01 and JESD21-C: kilo/mega/giga applied "
    "to memory capacity = 2^10/2^20/2^30; DRAM and HBM come in binary sizes), so '24 GB' = 24 GiB")
"""The one rule for memory capacity (issue #11 item 5), applied by the loader below to every device (GPU, TPU,
accelerator, Apple unified memory, CPU) and to instance host RAM:

1. ``memory_usable`` holds the capacity a driver reports, with its source (a real ``nvidia-smi`` / ``rocm-smi``
   output or a cloud API's GpuInfo SizeInMiB). It is preferred where sourced: drivers report *less* than the
   binary figure on many parts (nvidia-smi: H100 81559 MiB of 80 GiB, RTX 4090 24564 MiB of 24 GiB, L4 23034 MiB).
   Where a cloud API's figure and nvidia-smi differ, the catalog row keeps nvidia-smi and notes the other.
2. Without one, ``memory`` is the vendor's figure; its ``GB`` is read as GiB (JEDEC JESD100B.01 / JESD21-C define
   the prefix giga, applied to semiconductor memory capacity, as 2^30; memory chips come in binary sizes), and the
   reading is recorded in the value's ``derived`` field. Apple's "36GB" unified memory is 36 GiB (a Mac mini M1 whose
   system_profiler says "Memory: 16 GB" reports ``sysctl hw.memsize: 17179869184`` = 16 GiB, in a log pasted in a
   public GitHub file, repository not recorded); host RAM "1900 GB" is 1900 GiB.

Disks (``local_disk``) and all bandwidths stay decimal. ``Device.memory_basis`` says which case a device is in."""


def _jedec_reading(v: Any, unit: str) -> str:
    """The ``derived`` text of a decimal-looking capacity read as binary ('' for other units)."""
    exp = _JEDEC_BINARY.get(unit)
    if exp is None:
        return ""
    shown = "/".join(f"{x:g}" for x in v) if isinstance(v, list) else f"{v:g}"
    return (f"{shown} {unit} read as {shown} x 2^{exp} B ({unit[0]}iB): JEDEC binary prefix for memory capacity "
            "(JESD100B.01, JESD21-C)")


@fast_init
@dataclass(frozen=True)
class Value:
    """One sourced number. ``base`` is in base units (bytes, bytes/s, FLOP/s, W, USD/h); ``raw``/``unit`` are as
    the source writes them."""

    raw: Any
    unit: str
    base: Any
    source: str
    date: str
    date_kind: str = "retrieved"
    derived: str = ""
    note: str = ""
    confidence: str = ""
    extra: tuple[tuple[str, Any], ...] = ()

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {"value": self.raw, "unit": self.unit, "base": self.base, "source": self.source,
                             "date": self.date, "date_kind": self.date_kind}
        for k in ("derived", "note", "confidence"):
            if getattr(self, k):
                d[k] = getattr(self, k)
        d.update(dict(self.extra))
        return d

    def describe(self) -> str:
        return f"{self.raw} {self.unit}"


# fp16_acc16: FP16 tensor math with FP16 accumulation (cuBLAS CUBLAS_COMPUTE_16F), 2x the FP32-accumulate rate on
# GeForce cards, equal to it on data-centre parts (where only 'fp16' is listed)
_PEAK_ORDER = {"bf16": ("bf16", "fp16"), "fp16": ("fp16", "bf16"), "fp16_acc16": ("fp16_acc16", "fp16", "bf16"), "fp8": ("fp8",), "fp32": ("fp32",),
               "int8": ("int8",), "fp4": ("fp4",)}


@fast_init
@dataclass(frozen=True)
class Device:
    """An accelerator, an Apple chip configuration or a CPU."""

    id: str
    name: str
    kind: str
    vendor: str = ""
    form_factor: str = "unknown"  # FORM_FACTORS
    aliases: tuple[str, ...] = ()
    memory: Value | None = None
    memory_usable: Value | None = None
    # the total CUDA reports for the device (cudaMemGetInfo's total: torch.cuda.mem_get_info()[1], which vLLM's
    # MemorySnapshot.total_memory and SGLang's free-memory reading are of), below nvidia-smi's memory.total by the
    # memory the driver reserves for itself (nvidia-smi -q 'FB Memory Usage / Reserved'); None: not sourced
    # (estimate/device.py cuda_memory, the one reader)
    memory_cuda: Value | None = None
    memory_bandwidth: Value | None = None
    flops: dict[str, Value] = field(default_factory=dict)
    flops_sparse: dict[str, Value] = field(default_factory=dict)
    tdp: Value | None = None
    interconnect: str | None = None
    interconnect_bandwidth: Value | None = None
    launch_price: Value | None = None
    price: Value | None = None  # hourly price of an owned or rented single device (user files)
    memory_channels: Value | None = None
    cores: Value | None = None
    isa: dict[str, Value] = field(default_factory=dict)
    missing: dict[str, str] = field(default_factory=dict)  # field -> why it is null
    owned: bool = False
    origin: str = "catalog"
    chip: str = ""  # Apple chip a memory configuration belongs to
    architecture: str = ""  # GPU architecture (NVIDIA: volta, turing, ampere, ada, hopper, blackwell)
    sm_count: Value | None = None  # streaming multiprocessors (NVIDIA GPUs)
    fp32_cores: Value | None = None  # FP32 lanes ("CUDA cores") of the whole GPU
    compute_capability: Value | None = None  # NVIDIA compute capability, major.minor as NVIDIA writes it (12.0)
    # GPUs that share one NVLink (NVSwitch) domain as the vendor builds the system: an HGX / DGX board's 8, a GB200 /
    # GB300 NVL72 rack's 72 (estimate/fit.py default_machine_size, the one reader); None: not stated
    nvlink_domain: Value | None = None
    # whether GPUs of this device map each other's memory (NCCL's P2P transport, vLLM's / SGLang's _can_p2p): a
    # sourced flag (unit 'flag', raw True/False); None: not stated (estimate/device.py peer_to_peer, the one reader)
    peer_to_peer: Value | None = None
    # whether the device is a MIG device (a GPU instance's compute instance of a GPU in MIG mode, `hardware detect`
    # writes it from nvidia-smi -q): a sourced flag (unit 'flag', raw True); None: not stated, a whole GPU
    # (estimate/device.py mig_device, the one reader)
    mig: Value | None = None
    # the PCIe generation of the device's own host link, as the catalog writes it ("gen4"); None: not stated
    # (estimate/device.py host_link, the one reader)
    pcie: str | None = None
    # the id of the interconnects.json link between the device and its host's memory where that is no PCIe slot
    # (a Grace superchip's NVLink-C2C: "nvlink-c2c"; a GB200 GPU's share of it: "nvlink-c2c-gb200-gpu"); None: the
    # host link is the `pcie` generation's x16 slot (estimate/device.py host_link, the one reader)
    host_interconnect: str | None = None
    # a CPU's micro-architecture (a key of cpu_microarchitectures.json: "zen4", "golden-cove-server") and the clock
    # its cores sustain under load (the sourced all-core figure, else the base clock, named in the value): with
    # ``cores`` they give its FP32 peak and, with a matrix unit, its BF16 one (formulas/cpu_peak.py eqs. CP1, CP2, _cpu_peaks)
    microarchitecture: str = ""
    clock: Value | None = None

    @property
    def capability(self) -> int | None:
        """The NVIDIA compute capability as major x 10 + minor (12.0 -> 120): the row's sourced
        ``compute_capability``, else the first capability of its ``architecture`` (ARCHITECTURE_CAPABILITY, for a
        hardware file that names only the architecture); None when neither is known (AMD, CPUs, Apple)."""
        if self.compute_capability is not None and self.compute_capability.base is not None:
            return round(float(self.compute_capability.base) * 10)
        return ARCHITECTURE_CAPABILITY.get(self.architecture)

    @property
    def sm_cycles_per_second(self) -> float | None:
        """SM count x the clock at which the FP32 peak is stated, f = R_fp32 / (2 x FP32 cores) (one FMA = 2 FLOP
        per lane per cycle); None unless the SM count, the FP32 lanes and the FP32 peak are all sourced."""
        fp32 = self.flops.get("fp32")
        if self.sm_count is None or self.fp32_cores is None or fp32 is None or not fp32.base:
            return None
        return float(self.sm_count.base) * float(fp32.base) / (2.0 * float(self.fp32_cores.base))

    @property
    def memory_bytes(self) -> int | None:
        """Memory the device offers (``MEMORY_CONVENTION``): the driver-reported capacity when sourced, else the
        vendor's figure read as binary (80 GB = 80 GiB)."""
        v = self.memory_usable or self.memory
        return int(v.base) if v is not None and v.base is not None else None

    @property
    def memory_basis(self) -> str:
        """Which case of ``MEMORY_CONVENTION`` gives ``memory_bytes``: ``driver`` (a sourced driver report),
        ``vendor-binary`` (the vendor's GB read as GiB), ``stated`` (given in binary units or bytes, e.g. a user
        file's "32GiB"), or '' when unknown."""
        if self.memory_usable is not None:
            return "driver"
        if self.memory is None:
            return ""
        return "vendor-binary" if self.memory.unit in _JEDEC_BINARY else "stated"

    def memory_basis_text(self) -> str:
        """One line saying where ``memory_bytes`` comes from, for people (made once per device: it reads only the
        frozen fields; a catalog search asks it for every fit)."""
        text: str | None = self.__dict__.get("_basis_text_memo")
        if text is None:
            text = self.__dict__["_basis_text_memo"] = self._memory_basis_text()
        return text

    def _memory_basis_text(self) -> str:
        basis = self.memory_basis
        if basis == "driver" and self.memory_usable is not None:
            where = dict(self.memory_usable.extra).get("where", "")
            return (f"driver-reported {self.memory_usable.describe()} [{self.memory_usable.source}]"
                    + (f" ({where})" if where else ""))
        if basis == "vendor-binary" and self.memory is not None:
            return (f"vendor figure {self.memory.describe()} read as {self.memory.raw:g} {self.memory.unit[0]}iB "
                    f"(JEDEC binary prefix); no driver report sourced [{self.memory.source}]")
        if basis == "stated" and self.memory is not None:
            return f"as stated: {self.memory.describe()} [{self.memory.source}]"
        return "unknown"

    @property
    def bandwidth(self) -> float | None:
        """Peak memory bandwidth [bytes/s] or None when unsourced."""
        return float(self.memory_bandwidth.base) if self.memory_bandwidth is not None else None

    def peak_flops(self, dtype: str) -> tuple[float | None, str]:
        """Dense peak FLOP/s for ``dtype`` and the key used. bf16 and fp16 stand in for each other (equal tensor
        rates on Ampere and later, NVIDIA Ampere whitepaper); the substitution is named in the key."""
        for k in _PEAK_ORDER.get(dtype, (dtype,)):
            v = self.flops.get(k)
            if v is not None and v.base:
                return float(v.base), k
        return None, dtype

    @property
    def unified_memory(self) -> bool:
        return self.kind == "apple" or self.id == "dgx-spark"

    def values(self) -> dict[str, Value]:
        """Every sourced value of the entry, by dotted field name."""
        out: dict[str, Value] = {}
        for name in ("memory", "memory_usable", "memory_cuda", "memory_bandwidth", "tdp", "interconnect_bandwidth",
                     "launch_price", "price", "memory_channels", "cores", "sm_count", "fp32_cores", "compute_capability",
                     "peer_to_peer", "clock", "nvlink_domain", "mig"):
            v = getattr(self, name)
            if v is not None:
                out[name] = v
        for group in ("flops", "flops_sparse", "isa"):
            for k, v in getattr(self, group).items():
                out[f"{group}.{k}"] = v
        return out

    def to_dict(self) -> dict[str, Any]:
        # ``device_kind``: gpu, cpu, ... (``kind`` is every JSON answer's type, result.envelope); ``kind`` here
        # is its deprecated alias, kept one release in ``hardware list`` (docs/hardware.md)
        return {"id": self.id, "name": self.name, "device_kind": self.kind, "kind": self.kind, "vendor": self.vendor,
                "form_factor": self.form_factor, "aliases": list(self.aliases), "owned": self.owned,
                "origin": self.origin, "interconnect": self.interconnect, "memory_bytes": self.memory_bytes,
                "memory_basis": self.memory_basis,
                "values": {k: v.to_dict() for k, v in self.values().items()}, "missing": dict(self.missing)}


@fast_init
@dataclass(frozen=True)
class Instance:
    """A cloud instance type: ``device_count`` x ``device`` plus host resources and an hourly price."""

    id: str
    name: str
    provider: str
    device: Device
    device_count: int
    vcpus: Value | None = None
    memory: Value | None = None
    local_disk: Value | None = None
    network: Value | None = None
    price: Value | None = None
    interconnect: str | None = None
    missing: dict[str, str] = field(default_factory=dict)
    origin: str = "catalog"
    # hardware threads per physical core behind the vCPUs (2 with SMT / Hyper-Threading, 1 without); None = not given
    threads_per_core: Value | None = None

    @property
    def physical_cores(self) -> float | None:
        """vCPUs / threads_per_core; vCPUs alone when threads_per_core is not given; None without vCPUs."""
        if self.vcpus is None:
            return None
        tpc = float(self.threads_per_core.base) if self.threads_per_core is not None else 1.0
        return float(self.vcpus.base) / tpc

    @property
    def price_per_hour(self) -> float | None:
        return float(self.price.base) if self.price is not None else None

    @property
    def region(self) -> str:
        return str(dict(self.price.extra).get("region", "")) if self.price is not None else ""

    def values(self) -> dict[str, Value]:
        return {k: getattr(self, k) for k in ("vcpus", "threads_per_core", "memory", "local_disk", "network", "price")
                if getattr(self, k) is not None}

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.id, "name": self.name, "provider": self.provider, "device": self.device.id,
                "device_count": self.device_count, "interconnect": self.interconnect, "region": self.region,
                "price_per_hour": self.price_per_hour, "origin": self.origin,
                "values": {k: v.to_dict() for k, v in self.values().items()}, "missing": dict(self.missing)}


@dataclass(frozen=True)
class Interconnect:
    id: str
    name: str
    kind: str
    bandwidth: Value

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.id, "name": self.name, "kind": self.kind, "bandwidth": self.bandwidth.to_dict()}


@dataclass(frozen=True)
class HardwareCatalog:
    devices: dict[str, Device]
    instances: dict[str, Instance]
    interconnects: dict[str, Interconnect]
    sources: dict[str, dict[str, Any]]

    def _index(self) -> dict[str, tuple[str, str]]:
        """Normalized id/name/alias -> (kind, id), built once per catalog (the catalog is never mutated after it
        is built: user files make a new one). Kept in the instance dict, outside the dataclass fields, so it does
        not take part in equality or repr."""
        idx: dict[str, tuple[str, str]] | None = self.__dict__.get("_name_index")
        if idx is None:
            idx = self._build_index()
            self.__dict__["_name_index"] = idx
        return idx

    def _build_index(self) -> dict[str, tuple[str, str]]:
        idx: dict[str, tuple[str, str]] = {}
        for d in self.devices.values():
            for key in (d.id, d.name, *d.aliases):
                idx.setdefault(_norm(key), ("device", d.id))
        for i in self.instances.values():
            for key in (i.id, i.name):
                idx.setdefault(_norm(key), ("instance", i.id))
        return idx

    def find(self, name: str) -> Device | Instance:
        """A device or instance by id, name or alias (case-insensitive); a miss names the closest entries. 'cpu'
        and 'gpu' (when no entry is named so) are GENERIC_CPU and GENERIC_GPU."""
        hit = self._index().get(_norm(name))
        if hit is None and _norm(name) in GENERIC_DEVICES:
            return GENERIC_DEVICES[_norm(name)]
        if hit is None:
            names = sorted({*self.devices, *self.instances})
            aliases = {a: d.id for d in self.devices.values() for a in (d.name, *d.aliases)}
            close = close_matches(_norm(name), names, n=5, cutoff=0.4, aliases=aliases)
            hint = f"; closest: {', '.join(close)}" if close else ""
            raise UnknownNameError(f"unknown hardware {name!r}{hint} (list them with `llmsizer hardware list`)")
        kind, key = hit
        return self.devices[key] if kind == "device" else self.instances[key]

    def device(self, name: str) -> Device:
        """A device by name; an instance name resolves to its device."""
        hw = self.find(name)
        return hw.device if isinstance(hw, Instance) else hw

    def interconnect(self, ident: str | None) -> Interconnect | None:
        return self.interconnects.get(ident) if ident else None


# `--device cpu` / `--device gpu` (infer, fit, train, the same in each): a device known only by its kind, its memory
# from `--memory` (RAM for the CPU host). A CPU device has no CUDA context (the workload's device 'cpu': every tensor
# in host memory); with no sourced bandwidth or peak, speed and duration say they are unknown instead of borrowing
# another device's figures. Name a catalog device for those.
GENERIC_CPU = Device("cpu", "a CPU host (its RAM from --memory; no bandwidth or peak known)", "cpu",
                     form_factor="server", origin="generic")
GENERIC_GPU = Device("gpu", "a GPU (its memory from --memory; no bandwidth or peak known)", "gpu", origin="generic")
GENERIC_DEVICES = {d.id: d for d in (GENERIC_CPU, GENERIC_GPU)}

DETECTED = "detected"  # the hardware name that means this machine (`models --fits-on detected`, `--device detected`)


def names_detected(hardware: object) -> bool:
    """Whether ``hardware`` is the name ``"detected"`` (any case, spaces around): this machine, detected in-process
    (catalog/detect.py ``detected_target``). The one test of the name: the core's (estimate/device.py
    ``detected_machine``: fit, fit_training, estimate_inference, estimate_training), the CLI's (cli/main.py
    ``detected_device``) and the web's refusal (web/bridge.py)."""
    return isinstance(hardware, str) and hardware.strip().lower() == DETECTED

_NORM_SEP = re.compile(r"[\s_]+")


def _norm(s: str) -> str:
    return _NORM_SEP.sub("-", s.strip().lower())


# ----------------------------------------------------------------------------------------------- parsing

class _Ctx:
    def __init__(self, fname: str, sources: dict[str, dict[str, Any]], default_source: str | None,
                 default_date: str | None) -> None:
        self.fname = fname
        self.sources = sources
        self.default_source = default_source
        self.default_date = default_date
        # a user file's shorthand values, by (text or number, its type, quantity): the same Value (frozen; a
        # 5,000-entry file repeats a few hundred memory sizes, bandwidths, FLOP/s and prices)
        self.shorthand: dict[tuple[Any, type, str], Value] = {}

    @property
    def origin(self) -> str:
        """'catalog' for the built-in data files (whichever file holds the row), else the user file's path."""
        return self.fname if self.default_source is not None else "catalog"

    def fail(self, where: str, msg: str) -> InputError:
        return InputError(f"hardware file {self.fname}: {where}: {msg}")


_SHORTHAND = re.compile(r"\s*([-+]?[0-9]*\.?[0-9]+(?:[eE][+-]?[0-9]+)?)\s*([A-Za-z/]+)?\s*")
_DEFAULT_UNIT = {"memory": "GiB", "capacity": "GiB", "bandwidth": "GB/s", "flops": "TFLOP/s", "power": "W",
                 "price": "USD/h", "count": "vCPU",
                 "capability": "major.minor", "frequency": "GHz"}


def _parse_value(raw: Any, quantity: str, where: str, ctx: _Ctx) -> tuple[Value | None, str]:
    """A Value, or (None, why) for an explicit null."""
    if isinstance(raw, dict):
        if "value" not in raw:
            raise ctx.fail(where, "a value object needs a 'value' key")
        v = raw["value"]
        if v is None:
            return None, str(raw.get("note", "no source"))
        unit = raw.get("unit")
        src = raw.get("source") or ctx.default_source
        if not src:
            raise ctx.fail(where, "every value needs a 'source'")
        date = raw.get("date")
        kind = "published" if date else ""
        if not date:
            s = ctx.sources.get(src)
            if s is None and ctx.default_date is None:
                raise ctx.fail(where, f"source {src!r} is not in the sources table and the value has no 'date'")
            date = s["date"] if s else ctx.default_date
            kind = s.get("date_kind", "retrieved") if s else "file"
        extra = tuple((k, raw[k]) for k in sorted(raw) if k not in
                      ("value", "unit", "source", "date", "derived", "note", "confidence"))
        return _convert(v, unit, quantity, where, ctx, str(src), str(date), kind, str(raw.get("derived", "")),
                        str(raw.get("note", "")), str(raw.get("confidence", "")), extra), ""
    if raw is None:
        return None, "no source"
    if ctx.default_source is None:
        raise ctx.fail(where, "catalog values must be value objects with a source")
    key = (raw, type(raw), quantity) if type(raw) in (str, int, float) else None
    if key is not None:
        hit = ctx.shorthand.get(key)
        if hit is not None:  # read before from the same text: the same Value (a bad one raised then)
            return hit, ""
    unit = None
    num: Any = raw
    if isinstance(raw, str):
        m = _SHORTHAND.fullmatch(raw)
        if not m:
            raise ctx.fail(where, f"cannot read {raw!r}; write a number with a unit, e.g. '24GiB', '1008 GB/s'")
        num, unit = float(m.group(1)), m.group(2)
    val = _convert(num, unit, quantity, where, ctx, ctx.default_source, str(ctx.default_date), "file", "", "", "",
                   ())
    if key is not None:
        ctx.shorthand[key] = val
    return val, ""


def _convert(v: Any, unit: str | None, quantity: str, where: str, ctx: _Ctx, src: str, date: str, kind: str,
             derived: str, note: str, confidence: str, extra: tuple[tuple[str, Any], ...]) -> Value:
    table = UNIT_TABLES[quantity]
    if quantity == "frequency" and (isinstance(v, (bool, list)) or not isinstance(v, (int, float, str))):
        raise ctx.fail(where, f"value {v!r}: a clock is one number with its unit, e.g. '3.7 GHz' ({', '.join(table)})")
    if quantity == "frequency" and not unit and isinstance(v, (int, float)):  # 5000 (lscpu's MHz) is no 5000 GHz
        raise ctx.fail(where, f"{v:g} has no unit: give one, e.g. '{v:g} MHz' or '3.7 GHz' ({', '.join(table)})")
    unit = unit or _DEFAULT_UNIT[quantity]
    if quantity == "count" and unit not in table:
        table = {unit: 1.0}
    if unit not in table:
        raise ctx.fail(where, f"unit {unit!r} is not a {quantity} unit; use one of: {', '.join(table)}")
    factor = table[unit]
    if isinstance(v, bool):
        base: Any = v
    elif isinstance(v, list):
        if not all(isinstance(x, (int, float)) and not isinstance(x, bool) and x > 0 for x in v):
            raise ctx.fail(where, "a list value must hold positive numbers")
        base = [_in_range(x * factor, quantity, where, ctx) for x in v]
    elif isinstance(v, (int, float)):
        if v < 0:
            raise ctx.fail(where, f"must not be negative, got {v}")
        base = _in_range(v * factor, quantity, where, ctx)
    else:
        raise ctx.fail(where, f"value {v!r} is not a number")
    if quantity == "capacity" and not isinstance(v, bool):
        reading = _jedec_reading(v, unit)
        if reading:
            derived = f"{reading}; {derived}" if derived else reading
    return Value(v, unit, base, src, date, kind, derived, note, confidence, extra)


def _in_range(base: float, quantity: str, where: str, ctx: _Ctx) -> float:
    """``base`` (a value in its quantity's base unit) when finite and within ``QUANTITY_RANGES``; else the one-line
    error naming the file and field (a NaN or 1e300 GiB memory used to stop `fit` with a traceback)."""
    try:
        check_number(base, "", QUANTITY_RANGES[quantity])
    except NumberError as e:
        raise ctx.fail(where, str(e)) from None
    return base


def _values_map(raw: Any, quantity: str, where: str, ctx: _Ctx, missing: dict[str, str]) -> dict[str, Value]:
    if raw is None:
        return {}
    if not isinstance(raw, dict):
        raise ctx.fail(where, "must be an object of dtype -> value")
    out: dict[str, Value] = {}
    for k, r in raw.items():
        q = quantity
        if quantity == "flops" and isinstance(r, dict) and r.get("unit") == "flag":
            q = "count"
        val, why = _parse_value(r, q, f"{where}.{k}", ctx)
        if val is None:
            missing[f"{where.split('.')[-1]}.{k}"] = why
        else:
            out[k] = val
    return out


def _flag(raw: Any, where: str, ctx: _Ctx, missing: dict[str, str]) -> Value | None:
    """A device's true/false field (``peer_to_peer``, ``mig``) as a Value of unit 'flag': a value object with its source (the
    catalog's), or a bare true/false in a hardware file (sourced to the file); null or absent: None (not stated)."""
    if raw is None:
        return None
    obj = raw if isinstance(raw, dict) else {"value": raw}
    if obj.get("value") is not None and not isinstance(obj.get("value"), bool):
        raise ctx.fail(where, not_true_or_false(obj.get('value')))
    if obj.get("unit", "flag") != "flag":
        raise ctx.fail(where, f"unit {obj.get('unit')!r} is not 'flag' (a true/false field)")
    val, why = _parse_value({**obj, "unit": "flag"}, "count", where, ctx)
    if val is None:
        missing[where.split(".")[-1]] = why
    return val


_DEVICE_FIELDS = {"id", "name", "aliases", "vendor", "kind", "form_factor", "memory", "memory_usable", "memory_cuda",
                  "memory_options", "memory_bandwidth", "flops", "flops_sparse", "tdp", "interconnect",
                  "interconnect_bandwidth", "launch_price", "price", "memory_channels", "cores", "isa", "owned", "pcie",
                  "host_interconnect", "note", "notes", "architecture", "sm_count", "fp32_cores", "compute_capability", "peer_to_peer",
                  "microarchitecture", "clock", "nvlink_domain", "mig"}


@lru_cache(maxsize=1)
def cpu_microarchitectures() -> dict[str, dict[str, Any]]:
    """The per-core FMA widths of cpu_microarchitectures.json, by micro-architecture key."""
    table: dict[str, dict[str, Any]] = _read_builtin("cpu_microarchitectures.json")["microarchitectures"]
    return table


def cpu_fp32_flop_per_cycle(uarch: str) -> float | None:
    """FP32 FLOP per cycle per core of a micro-architecture: FMA pipes x 32-bit lanes x 2 (formulas/cpu_peak.py
    ``fma_width``, eq. CP1); None for one the table does not hold."""
    row = cpu_microarchitectures().get(uarch)
    if row is None:
        return None
    fma = row["fp32_fma"]
    return fma_width(int(fma["pipes"]), int(fma["vector_bits"]), 32)


def cpu_amx_bf16_flop_per_cycle(uarch: str) -> float | None:
    """BF16 FLOP per cycle per core of a micro-architecture's matrix unit (Intel AMX: formulas/cpu_peak.py
    ``matrix_tile_width``, eq. CP2); None where the table gives it none."""
    amx = (cpu_microarchitectures().get(uarch) or {}).get("amx_bf16")
    if amx is None:
        return None
    return matrix_tile_width(int(amx["m"]), int(amx["k"]), int(amx["n"]), int(amx["cycles"]))


def _cpu_peaks(raw: dict[str, Any], uarch: str, cores: Value | None, clock: Value | None, where: str,
               ctx: _Ctx) -> dict[str, Value]:
    """A CPU's peaks from its mechanism, each cores x clock x a per-core width (formulas/cpu_peak.py eq. CP1), one
    clock for all: fp32 from the FMA pipes, bf16 from the matrix unit where the micro-architecture has one (AMX,
    eq. CP2; review21 D2: the 8488C's bf16 was written by hand as cores x clock x 1,024 and a changed clock moved
    fp32 alone). Each a derived Value naming its sources; none when one of the three is not given, and a dtype the
    row states in ``flops`` (a user file's figure over a catalog row) keeps its figure as written. No built-in row
    states both (tests/catalog/test_cpu_peak.py)."""
    if raw.get("kind") != "cpu":
        raise ctx.fail(f"{where}.microarchitecture", "microarchitecture and clock describe a CPU (kind 'cpu')")
    table = cpu_microarchitectures()
    if uarch and uarch not in table:
        raise ctx.fail(f"{where}.microarchitecture", unknown_choice("microarchitecture", uarch, sorted(table)))
    if not uarch or cores is None or clock is None:
        return {}
    stated = raw.get("flops") or {}
    out: dict[str, Value] = {}
    fp32 = _cpu_fp32_peak(uarch, cores, clock) if "fp32" not in stated else None
    if fp32 is not None:
        out["fp32"] = fp32
    amx = table[uarch].get("amx_bf16")
    width = cpu_amx_bf16_flop_per_cycle(uarch)
    flag = (raw.get("isa") or {}).get("amx") if isinstance(raw.get("isa"), dict) else None
    flag = flag.get("value") if isinstance(flag, dict) else flag
    # a row whose own ISA says no AMX (a VM whose hypervisor masks it: lscpu shows no amx flags) gets no AMX peak
    # from its micro-architecture (review22 D2: 8 x 3 GHz golden-cove-server with amx false was timed at 24.6 bf16)
    if amx is not None and width is not None and "bf16" not in stated and flag is not False:
        peak = cpu_peak_flops(float(cores.base), float(clock.base), width)
        derived = (f"AMX matrix peak, cores x clock x BF16 FLOP per cycle per core (formulas/cpu_peak.py eqs. CP1, "
                   f"CP2): {cores.raw:g} cores ({cores.source}) x {clock.raw:g} {clock.unit} ({clock.source}) x "
                   f"{width:g} ({uarch}: a {amx['m']}x{amx['k']} by {amx['k']}x{amx['n']} BF16 tile per "
                   f"{amx['cycles']} cycles, {amx['source']}, cpu_microarchitectures.json)")
        out["bf16"] = Value(round(peak / 1e12, 6), "TFLOP/s", peak, "derived", clock.date, clock.date_kind, derived,
                            f"the clock: {clock.note}" if clock.note else "", "")
    return out


def _cpu_fp32_peak(uarch: str, cores: Value, clock: Value) -> Value | None:
    """A CPU's FP32 peak from its mechanism, cores x clock x the micro-architecture's FP32 FLOP per cycle per core
    (formulas/cpu_peak.py eq. CP1), as a derived Value naming its three sources."""
    table = cpu_microarchitectures()
    width = cpu_fp32_flop_per_cycle(uarch)
    assert width is not None
    fma = table[uarch]["fp32_fma"]
    peak = cpu_peak_flops(float(cores.base), float(clock.base), width)
    derived = (f"cores x clock x FP32 FLOP per cycle per core (formulas/cpu_peak.py eq. CP1): {cores.raw:g} cores "
               f"({cores.source}) x {clock.raw:g} {clock.unit} ({clock.source}) x {width:g} ({uarch}: "
               f"{fma['pipes']} FMA pipes x {fma['vector_bits']}-bit / 32-bit lanes x 2 FLOP, {fma['source']}"
               + (f", {fma['width_source']}" if fma.get("width_source") not in (None, fma["source"]) else "")
               + ", cpu_microarchitectures.json)")
    return Value(round(peak / 1e12, 6), "TFLOP/s", peak, "derived", clock.date, clock.date_kind, derived,
                 f"the clock: {clock.note}" if clock.note else "", "")


def _device(raw: dict[str, Any], where: str, ctx: _Ctx) -> list[Device]:
    unknown = set(raw) - _DEVICE_FIELDS
    if unknown:
        raise ctx.fail(where, f"unknown field(s) {', '.join(sorted(unknown))}; known: {', '.join(sorted(_DEVICE_FIELDS))}")
    for k in ("id", "name", "kind"):
        if not raw.get(k):
            raise ctx.fail(f"{where}.{k}", "is required")
    if raw["kind"] not in KINDS:
        raise ctx.fail(f"{where}.kind", unknown_choice("kind", raw['kind'], KINDS))
    ff = raw.get("form_factor", "unknown")  # not guessed: memory or vendor do not tell a data-centre card
    if ff not in FORM_FACTORS:
        raise ctx.fail(f"{where}.form_factor", unknown_choice("form_factor", ff, FORM_FACTORS))
    missing: dict[str, str] = {}
    vals: dict[str, Any] = {}
    for name in ("memory", "memory_usable", "memory_cuda", "memory_bandwidth", "tdp", "interconnect_bandwidth",
                 "launch_price", "price", "memory_channels", "cores", "memory_options", "sm_count", "fp32_cores",
                 "compute_capability", "clock", "nvlink_domain"):
        if name in raw:
            v, why = _parse_value(raw[name], _FIELD_QUANTITY[name], f"{where}.{name}", ctx)
            if v is None:
                missing[name] = why
            vals[name] = v
    for name in ("memory", "memory_usable", "memory_cuda"):  # a device's memory in the range every estimate reads it in
        v = vals.get(name)  # (estimate/device.py usable_memory): '1KiB' refused here, naming the file and field,
        if v is not None and isinstance(v.base, (int, float)) and not isinstance(v.base, bool):  # not later as a
            try:  # bare "memory: 1024 is out of range" (probe13 D8)
                check_number(round(v.base), "", DEVICE_MEMORY)
            except NumberError as e:
                raise ctx.fail(f"{where}.{name}", str(e)) from None
    flops = _values_map(raw.get("flops"), "flops", f"{where}.flops", ctx, missing)
    sparse = _values_map(raw.get("flops_sparse"), "flops", f"{where}.flops_sparse", ctx, missing)
    uarch = str(raw.get("microarchitecture", "")).lower()
    if uarch or "clock" in raw:
        peaks = _cpu_peaks(raw, uarch, vals.get("cores"), vals.get("clock"), f"{where}", ctx)
        flops = {**flops, **peaks}
        for dtype in peaks:
            missing.pop(f"flops.{dtype}", None)
    isa = _values_map(raw.get("isa"), "count", f"{where}.isa", ctx, missing)
    for k in list(isa):  # ISA flags are booleans with unit 'flag'
        if not isinstance(isa[k].raw, bool):
            raise ctx.fail(f"{where}.isa.{k}", "must be true or false")
    p2p = _flag(raw.get("peer_to_peer"), f"{where}.peer_to_peer", ctx, missing)
    mig = _flag(raw.get("mig"), f"{where}.mig", ctx, missing)
    pcie = raw.get("pcie")
    if pcie is not None and not (isinstance(pcie, str) and re.fullmatch(r"gen[1-9]", pcie)):
        raise ctx.fail(f"{where}.pcie", f"{pcie!r} is not a PCIe generation (gen3, gen4, gen5, ...)")
    host_ic = raw.get("host_interconnect")
    if host_ic is not None and host_ic not in _interconnect_ids():
        raise ctx.fail(f"{where}.host_interconnect",
                       unknown_choice("host_interconnect", host_ic, sorted(_interconnect_ids())))
    base = Device(id=str(raw["id"]).lower(), name=str(raw["name"]), kind=raw["kind"], vendor=str(raw.get("vendor", "")),
                  form_factor=ff, aliases=tuple(str(a) for a in raw.get("aliases", ())),
                  memory=vals.get("memory"), memory_usable=vals.get("memory_usable"),
                  memory_cuda=vals.get("memory_cuda"), memory_bandwidth=vals.get("memory_bandwidth"), flops=flops,
                  flops_sparse=sparse, tdp=vals.get("tdp"),
                  interconnect=raw.get("interconnect"), interconnect_bandwidth=vals.get("interconnect_bandwidth"),
                  launch_price=vals.get("launch_price"), price=vals.get("price"),
                  memory_channels=vals.get("memory_channels"), cores=vals.get("cores"), isa=isa, missing=missing,
                  owned=bool(raw.get("owned", False)), origin=ctx.origin,
                  architecture=str(raw.get("architecture", "")).lower(), sm_count=vals.get("sm_count"),
                  fp32_cores=vals.get("fp32_cores"), compute_capability=vals.get("compute_capability"),
                  peer_to_peer=p2p, pcie=pcie, host_interconnect=host_ic, microarchitecture=uarch,
                  clock=vals.get("clock"), nvlink_domain=vals.get("nvlink_domain"), mig=mig)
    opts = vals.get("memory_options")
    if opts is None:
        return [base]
    out = []
    for gb_raw, b in zip(opts.raw, opts.base, strict=True):
        mem = Value(gb_raw, opts.unit, b, opts.source, opts.date, opts.date_kind,
                    derived=_jedec_reading(gb_raw, opts.unit), note="one configurable option", extra=opts.extra)
        suffix = f"{gb_raw:g}{opts.unit.lower()}"
        out.append(replace(base, id=f"{base.id}-{suffix}", name=f"{base.name} {gb_raw:g}{opts.unit}",
                           aliases=tuple(f"{a}-{suffix}" for a in base.aliases), memory=mem, chip=base.id))
    return out


_INSTANCE_FIELDS = {"id", "name", "provider", "device", "device_count", "vcpus", "memory", "local_disk", "network",
                    "price", "interconnect", "note", "threads_per_core"}


def _instance(raw: dict[str, Any], where: str, ctx: _Ctx, devices: dict[str, Device]) -> Instance:
    unknown = set(raw) - _INSTANCE_FIELDS
    if unknown:
        raise ctx.fail(where, f"unknown field(s) {', '.join(sorted(unknown))}; known: {', '.join(sorted(_INSTANCE_FIELDS))}")
    for k in ("id", "name", "provider", "device", "device_count"):
        if raw.get(k) in (None, ""):
            raise ctx.fail(f"{where}.{k}", "is required")
    dev = devices.get(str(raw["device"]).lower())
    if dev is None:
        import difflib  # a miss only

        close = difflib.get_close_matches(str(raw["device"]).lower(), list(devices), n=3, cutoff=0.4)
        raise ctx.fail(f"{where}.device", f"unknown device {raw['device']!r}" + (f"; closest: {', '.join(close)}" if close else ""))
    count = raw["device_count"]
    if not isinstance(count, int) or count < 1:
        raise ctx.fail(f"{where}.device_count", f"must be a positive integer, got {count!r}")
    missing: dict[str, str] = {}
    vals: dict[str, Value | None] = {}
    for name in ("vcpus", "threads_per_core", "memory", "local_disk", "network", "price"):
        if name in raw:
            v, why = _parse_value(raw[name], _FIELD_QUANTITY[name], f"{where}.{name}", ctx)
            if v is None:
                missing[name] = why
            vals[name] = v
    tpc = vals.get("threads_per_core")
    if tpc is not None and (isinstance(tpc.base, (bool, list)) or tpc.base not in (1, 2, 4, 8)):
        raise ctx.fail(f"{where}.threads_per_core", f"must be 1, 2, 4 or 8 hardware threads per core, got {tpc.raw!r}")
    if dev.kind == "cpu" and ctx.default_source is None and "threads_per_core" not in raw:
        # the built-in catalog: a CPU-only instance's share of the socket depends on it (efficiency.vm_bandwidth_share)
        raise ctx.fail(f"{where}.threads_per_core", "a CPU-only catalog instance needs a sourced threads_per_core "
                       "(1 = one vCPU per physical core, 2 = SMT); write {'value': null, 'note': ...} if unknown")
    return Instance(id=str(raw["id"]).lower(), name=str(raw["name"]), provider=str(raw["provider"]).lower(),
                    device=dev, device_count=count, vcpus=vals.get("vcpus"), memory=vals.get("memory"),
                    local_disk=vals.get("local_disk"), network=vals.get("network"), price=vals.get("price"),
                    interconnect=raw.get("interconnect"), missing=missing, origin=ctx.origin, threads_per_core=tpc)


def _read_builtin(name: str) -> dict[str, Any]:
    text = resources.files("llmsizer.catalog.data").joinpath("hardware").joinpath(name).read_text("utf-8")
    data: dict[str, Any] = json.loads(text)
    return data


@lru_cache(maxsize=1)
def _interconnect_ids() -> frozenset[str]:
    """The ids of the bundled interconnects.json (a device's ``host_interconnect`` names one of them)."""
    return frozenset(str(r["id"]) for r in _read_builtin("interconnects.json")["interconnects"])


_SOURCE_FILES = ("sources.json", "sources_cloud.json")
_DEVICE_FILES = ("accelerators.json", "apple.json", "cpus.json")
_INSTANCE_FILES = ("instances_aws.json", "instances_gcp.json", "instances_azure.json")


@lru_cache(maxsize=1)
def builtin_catalog() -> HardwareCatalog:
    """The catalog shipped with llmsizer (cached)."""
    sources: dict[str, dict[str, Any]] = {}
    for fname in _SOURCE_FILES:
        for key, src in _read_builtin(fname)["sources"].items():
            if key in sources:
                raise ModelFileError(f"hardware catalog {fname}: source {key!r} is also defined in another sources file")
            sources[key] = src
    devices: dict[str, Device] = {}
    for fname in _DEVICE_FILES:
        ctx = _Ctx(fname, sources, None, None)
        for i, raw in enumerate(_read_builtin(fname)["devices"]):
            for d in _device(raw, f"devices[{i}]", ctx):
                devices[d.id] = d
    instances: dict[str, Instance] = {}
    for fname in _INSTANCE_FILES:
        ctx = _Ctx(fname, sources, None, None)
        for i, raw in enumerate(_read_builtin(fname)["instances"]):
            inst = _instance(raw, f"instances[{i}]", ctx, devices)
            instances[inst.id] = inst
    ics: dict[str, Interconnect] = {}
    ctx = _Ctx("interconnects.json", sources, None, None)
    for i, raw in enumerate(_read_builtin("interconnects.json")["interconnects"]):
        bw, why = _parse_value(raw.get("bandwidth"), "bandwidth", f"interconnects[{i}].bandwidth", ctx)
        if bw is None:
            raise ctx.fail(f"interconnects[{i}].bandwidth", why)
        ics[raw["id"]] = Interconnect(raw["id"], raw["name"], raw["kind"], bw)
    return HardwareCatalog(devices, instances, ics, sources)


# The bundled catalog (every device and instance llmsizer knows) is ~200 KB; a user's file is smaller still.
MAX_HARDWARE_FILE_BYTES = 8 * 2**20


@dataclass(frozen=True)
class HardwareText:
    """A hardware file's content given as text instead of a path (the web's "what fits my machine" page takes a
    pasted entry; the server reads no path from a request). ``name`` stands for the file in messages and in the
    source of its entries, as a file of that name would; YAML when it ends in .yaml/.yml, else JSON. ``date``: the
    day it was given (ISO), the source date of its entries (a file's is its modification day)."""

    name: str
    text: str
    date: str


def _load_user_file(path: Path) -> dict[str, Any]:
    from ..inputs import read_small_text
    text = read_small_text(path, "hardware file", MAX_HARDWARE_FILE_BYTES)  # a pipe or device is refused up front
    return _parse_user_text(text, str(path), path.suffix.lower() in (".yaml", ".yml"))


def _unique_pairs(pairs: list[tuple[str, Any]], path: str, line: int | None = None) -> dict[str, Any]:
    """An object of a hardware file, refusing a key given twice as request files (request/reader.py ``pairs``) and
    web bodies (web/bridge.py ``unique_pairs``) refuse it: before, the last one was taken silently (probe13 D9)."""
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            at = f" (line {line})" if line else ""
            raise InputError(f"hardware file {path}: key {short(key, 60)} given twice in one object{at}; give it once")
        out[key] = value
    return out


def _unique_keys_loader(yaml: Any, path: str) -> Any:
    """PyYAML's SafeLoader refusing a key given twice in one mapping (``_unique_pairs``)."""
    class Loader(yaml.SafeLoader):  # type: ignore[misc,name-defined]
        def construct_mapping(self, node: Any, deep: bool = False) -> dict[Any, Any]:
            self.flatten_mapping(node)
            seen: set[Any] = set()
            for knode, _ in node.value:
                key = self.construct_object(knode, deep=deep)
                try:
                    dup = key in seen
                except TypeError:  # an unhashable key: SafeLoader's own error below
                    break
                if dup:
                    _unique_pairs([(key, None), (key, None)], path, knode.start_mark.line + 1)
                seen.add(key)
            return dict(super().construct_mapping(node, deep=deep))
    return Loader


def _parse_user_text(text: str, path: str, is_yaml: bool) -> dict[str, Any]:
    """A user hardware file's object from its text; ``path`` names it in the one-line messages."""
    if len(text.encode()) > MAX_HARDWARE_FILE_BYTES:
        raise InputError(f"hardware file {path}: too large (at most {MAX_HARDWARE_FILE_BYTES:,} bytes)")
    if is_yaml:
        try:
            import yaml  # type: ignore[import-untyped]
        except ImportError:
            raise InputError(f"hardware file {path}: YAML needs PyYAML (pip install pyyaml); or write JSON") from None
        try:
            data = yaml.load(text, Loader=_unique_keys_loader(yaml, path))  # noqa: S506 - a SafeLoader subclass
        except InputError:  # a key given twice (_unique_pairs): its own line
            raise
        except yaml.YAMLError as e:
            raise InputError(f"hardware file {path}: not valid YAML ({str(e).splitlines()[0]})") from None
        except RecursionError:
            raise InputError(f"hardware file {path}: nested too deeply") from None
        except (ValueError, TypeError, IndexError, OverflowError) as e:  # '!!int abc' and the like
            raise InputError(f"hardware file {path}: not valid YAML ({type(e).__name__}: a tagged value "
                             "cannot be read)") from None
    else:
        try:
            data = json.loads(text, object_pairs_hook=lambda pairs: _unique_pairs(pairs, path))
        except json.JSONDecodeError as e:
            raise InputError(f"hardware file {path}: not valid JSON (line {e.lineno}: {e.msg})") from None
        except RecursionError:
            raise InputError(f"hardware file {path}: nested too deeply") from None
    if not isinstance(data, dict):
        raise InputError(f"hardware file {path}: the top level must be an object with devices/instances")
    unknown = set(data) - {"devices", "instances", "sources", "schema", "note"}
    if unknown:
        raise InputError(f"hardware file {path}: unknown top-level key(s) {', '.join(sorted(unknown))}; "
                         "use devices, instances, sources")
    return data


def _merge_raw(old: dict[str, Any], new: dict[str, Any]) -> dict[str, Any]:
    """A user entry's fields over the catalog's. A new ``memory`` without a ``memory_usable`` of its own drops the
    inherited driver-reported capacity: that report measured the old memory size, and the device-memory rule
    (``Device.capacity``: the driver's report first) would otherwise keep answering with it."""
    merged = dict(old)
    merged.update(new)
    if "memory" in new and "memory_usable" not in new:
        merged.pop("memory_usable", None)
    if ("memory" in new or "memory_usable" in new) and "memory_cuda" not in new:  # CUDA's total of the old size
        merged.pop("memory_cuda", None)
    return merged


def load_catalog(hardware_files: Sequence[str | Path | HardwareText] = ()) -> HardwareCatalog:
    """The built-in catalog with user files (paths, or ``HardwareText``) applied in order (additions and
    field-wise overrides)."""
    base = builtin_catalog()
    if not hardware_files:
        return base
    return _load_with_files(catalog_key(hardware_files))


def catalog_key(hardware_files: Sequence[str | Path | HardwareText]) -> tuple[tuple[str, float] | tuple[str, str, str], ...]:
    """What ``load_catalog``'s answer depends on: each file's path and modification time (a text: its name, text and
    date); the key of every memo whose answer reads the loaded catalog (an edited file is read again)."""
    return tuple((p.name, p.text, p.date) if isinstance(p, HardwareText) else
                 (str(Path(p)), Path(p).stat().st_mtime if Path(p).exists() else 0.0) for p in hardware_files)


@lru_cache(maxsize=16)
def _load_with_files(key: tuple[tuple[str, float] | tuple[str, str, str], ...]) -> HardwareCatalog:
    cat = builtin_catalog()
    sources = dict(cat.sources)
    raw_devices = {}
    for fname in _DEVICE_FILES:
        for raw in _read_builtin(fname)["devices"]:
            raw_devices[str(raw["id"]).lower()] = ("builtin", raw)
    raw_instances = {}
    for fname in _INSTANCE_FILES:
        for raw in _read_builtin(fname)["instances"]:
            raw_instances[str(raw["id"]).lower()] = ("builtin", raw)
    user_ctx: dict[str, _Ctx] = {}
    for entry in key:
        pstr = entry[0]
        if len(entry) == 3:  # HardwareText: (name, text, date)
            data = _parse_user_text(str(entry[1]), pstr, pstr.lower().endswith((".yaml", ".yml")))
            path, mtime, title, kind = Path(pstr), str(entry[2]), f"user hardware entry {pstr} (given as text)", "given"
        else:
            path = Path(pstr)
            data = _load_user_file(path)
            import datetime as _dt  # a hardware file only

            mtime = _dt.date.fromtimestamp(path.stat().st_mtime).isoformat()
            title, kind = f"user hardware file {path}", "file"
        srcs = data.get("sources") or {}
        if not isinstance(srcs, dict):
            raise InputError(f"hardware file {path}: sources must be an object of key -> {{title, url, date}}")
        for k, s in srcs.items():
            if not isinstance(s, dict) or not s.get("date"):
                raise InputError(f"hardware file {path}: sources.{k}: needs a 'date'")
        sources.update(srcs)
        sources[f"user:{path.name}"] = {"title": title, "url": pstr, "date": mtime, "date_kind": kind}
        user_ctx[pstr] = _Ctx(str(path), sources, f"user:{path.name}", mtime)
        for group, store in (("devices", raw_devices), ("instances", raw_instances)):
            items = data.get(group) or []
            if not isinstance(items, list):
                raise InputError(f"hardware file {path}: {group} must be a list")
            for i, raw in enumerate(items):
                if not isinstance(raw, dict) or not raw.get("id"):
                    raise InputError(f"hardware file {path}: {group}[{i}].id: is required")
                if isinstance(raw["id"], str) and not raw["id"].isprintable():  # a NUL, newline or bidi control
                    # printed an id across two lines of a message (probe13 D8)
                    raise InputError(f"hardware file {path}: {group}[{i}].id: {short(raw['id'], 60)} holds a "
                                     "control character; ids are printable text")
                ident = str(raw["id"]).lower()
                if ident in store:
                    _, old = store[ident]
                    store[ident] = (pstr, _merge_raw(old, raw))
                else:
                    store[ident] = (pstr, raw)
    builtin = _Ctx("catalog", sources, None, None)
    devices: dict[str, Device] = {}
    for i, (origin, raw) in enumerate(raw_devices.values()):
        ctx = user_ctx.get(origin, builtin)
        for d in _device(raw, f"devices[{raw.get('id')}]" if origin != "builtin" else f"devices[{i}]", ctx):
            devices[d.id] = d
    instances: dict[str, Instance] = {}
    for i, (origin, raw) in enumerate(raw_instances.values()):
        ctx = user_ctx.get(origin, builtin)
        inst = _instance(raw, f"instances[{raw.get('id')}]" if origin != "builtin" else f"instances[{i}]", ctx, devices)
        instances[inst.id] = inst
    return HardwareCatalog(devices, instances, dict(cat.interconnects), sources)


def find_hardware(name: str, hardware_files: Sequence[str | Path] = ()) -> Device | Instance:
    """Look up a device or instance by id, name or alias (case-insensitive; closest names on a miss)."""
    return load_catalog(hardware_files).find(name)


def search(text: str = "", kinds: Iterable[str] = (), hardware_files: Sequence[str | Path] = ()) -> list[Device | Instance]:
    """Devices and instances whose id, name or an alias ``text`` matches by words (``suggest.matches_name``: ``'m3'`` finds
    the Apple M3 chips, not a name holding 'HBM3'; all when empty); ``kinds`` filters (gpu, apple, cpu, instance...)."""
    cat = load_catalog(hardware_files)
    ks = set(kinds)
    out: list[Device | Instance] = []
    for d in cat.devices.values():
        if (not ks or d.kind in ks) and matches_name(text, (d.id, d.name, *d.aliases)):
            out.append(d)
    for i in cat.instances.values():
        if (not ks or "instance" in ks or i.provider in ks) and matches_name(text, (i.id, i.name)):
            out.append(i)
    return out


def apple_gpu_memory(device: Device, fraction: float) -> int | None:
    """Unified memory the Apple GPU may use: total x ``fraction`` (Metal recommendedMaxWorkingSetSize)."""
    mem = device.memory_bytes
    return int(mem * fraction) if mem is not None else None


__all__ = ["DETECTED", "MEMORY_CONVENTION", "Device", "GiB", "HardwareCatalog", "Instance", "Interconnect", "Value",
           "apple_gpu_memory", "builtin_catalog", "find_hardware", "load_catalog", "names_detected", "search"]
