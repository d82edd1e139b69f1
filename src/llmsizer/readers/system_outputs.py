"""Read what system commands print about the machine: one small pure function per output (text in, typed record
out), no I/O. ``catalog/detect.py`` runs the commands (or reads saved outputs) and maps the records to catalog
devices.

Outputs read (tests: real recorded outputs in ``tests/fixtures/real_outputs/``):

- ``nvidia-smi --query-gpu=index,name,memory.total,driver_version,pci.bus_id --format=csv``: one row per GPU;
  columns are found by header name, so any field list holding ``name`` and ``memory.total`` is read;
- ``nvidia-smi -q``: ``Product Name``, ``FB Memory Usage / Total`` and ``Reserved`` (what the driver keeps for
  itself: CUDA's total is Total less it) per GPU, its ``MIG Mode / Current`` and, in MIG mode, each ``MIG Device``
  (its index, GPU instance, multiprocessor count and ``Shared FB Memory Usage / Total``, ``Reserved``); the CSV query's
  ``memory.reserved`` and ``mig.mode.current`` columns where the field list holds them;
- ``rocm-smi --showproductname --showmeminfo vram --json``: ``Card Series`` (else ``Device Name``) and
  ``VRAM Total Memory (B)`` per card;
- ``lscpu`` (English labels, ``LC_ALL=C``): model name, sockets, cores per socket, threads per core, CPUs;
- ``/proc/meminfo``: ``MemTotal`` (its ``kB`` is KiB, proc(5)); ``MemAvailable`` and the reserved huge pages
  (``HugePages_Total`` x ``Hugepagesize``) where printed, for the warning that MemTotal is not what a process gets;
- ``sysctl machdep.cpu.brand_string hw.memsize`` (``key: value`` lines, as ``sysctl -a`` prints them);
- ``system_profiler SPHardwareDataType``: ``Chip`` and ``Memory`` (``16 GB``; read as GiB, MEMORY_CONVENTION).
- ``system_profiler SPDisplaysDataType``: the Apple GPU's ``Chipset Model`` and, in its block, ``Total Number of
  Cores`` (the GPU cores, which tell the GPU-core bins of one chip apart: an M1 with 7 or 8).

A damaged output raises ``InputError`` naming the output and what is missing, in one line.
"""

from __future__ import annotations

import csv
import io
import json
import re
from dataclasses import dataclass

from ..errors import InputError

MIB = 2**20
KIB = 2**10
GIB = 2**30


@dataclass(frozen=True)
class Gpu:
    """One GPU as its driver reports it."""

    name: str
    memory_bytes: int
    memory_text: str  # the driver's own words, e.g. '81559 MiB'
    index: int
    driver: str = ""
    bus_id: str = ""
    # what the driver reserves for itself (nvidia-smi 'FB Memory Usage / Reserved', --query-gpu memory.reserved);
    # None: not printed. CUDA's total (cudaMemGetInfo) is memory_bytes less it
    reserved_bytes: int | None = None
    reserved_text: str = ""
    # MIG mode as printed ('Enabled', 'Disabled'; '' not printed, '[N/A]' on a GPU without MIG) and, enabled, the MIG
    # devices -q lists (none: the output does not list them, the CSV query never does)
    mig_mode: str = ""
    mig: tuple[MigDevice, ...] = ()

    @property
    def mig_enabled(self) -> bool:
        return self.mig_mode == "Enabled"


@dataclass(frozen=True)
class MigDevice:
    """One MIG device of a GPU in MIG mode (``nvidia-smi -q`` 'MIG Device'): a GPU instance's compute instance, which
    a CUDA process sees as one device of its own memory."""

    index: int
    gpu_instance: int | None
    sm_count: int | None  # 'Multiprocessor count'
    memory_bytes: int  # 'Shared FB Memory Usage / Total' (the GPU instance's memory, shared by its compute instances)
    memory_text: str
    reserved_bytes: int | None = None
    reserved_text: str = ""


@dataclass(frozen=True)
class Cpu:
    """The host CPU as ``lscpu`` reports it."""

    model: str
    sockets: int
    cores_per_socket: int
    threads_per_core: int
    cpus: int

    @property
    def cores(self) -> int:
        return self.sockets * self.cores_per_socket


@dataclass(frozen=True)
class AppleMachine:
    """An Apple silicon Mac: chip and unified memory, from ``system_profiler`` and/or ``sysctl``."""

    chip: str  # 'Apple M2 Pro'; '' when the output does not name it
    memory_bytes: int | None
    memory_text: str  # as printed: '16 GB' or 'hw.memsize: 17179869184'
    model: str = ""
    # CPU cores from SPHardwareDataType's 'Total Number of Cores: 12 (8 performance and 4 efficiency)'; None: not
    # printed. A chip's CPU bin can decide its GPU bin (catalog/detect.py ``cpu_decides_bin``)
    cpu_cores: int | None = None
    cpu_cores_text: str = ""


@dataclass(frozen=True)
class AppleGpu:
    """The GPU of an Apple silicon Mac, from ``system_profiler SPDisplaysDataType``."""

    chipset: str  # 'Apple M1'; '' when no Apple silicon GPU is listed (an Intel Mac's cards)
    cores: int | None  # GPU cores; None when the block prints no 'Total Number of Cores'
    cores_text: str  # as printed: 'Total Number of Cores: 7'
    # the other GPUs the output lists (an Intel Mac's cards), each as printed with its VRAM line where it has one:
    # 'Radeon Pro Vega 64 (VRAM (Total): 16 GB)'
    others: tuple[str, ...] = ()


def _fail(what: str, msg: str) -> InputError:
    return InputError(f"{what}: {msg}")


def _whole(text: str) -> bool:
    """A whole number as the tools print it: ASCII digits, at most 18 of them. str.isdigit() also takes '²' and
    '٧' (int() fails on the first) and int() refuses more than 4300 digits: either was a traceback, not a line."""
    return re.fullmatch(r"[0-9]{1,18}", text) is not None


def _mib(text: str, what: str) -> int:
    m = re.fullmatch(r"\s*([0-9]{1,18})\s*MiB\s*", text)
    if not m:
        raise _fail(what, f"memory {text.strip()!r} is not 'N MiB'")
    return int(m.group(1)) * MIB


def parse_nvidia_smi_csv(text: str, what: str = "nvidia-smi --query-gpu output") -> list[Gpu]:
    """GPUs from ``nvidia-smi --query-gpu=...,name,...,memory.total,... --format=csv`` (header line + one row per
    GPU). The header names its columns (``memory.total [MiB]``), so the field order does not matter."""
    rows = [r for r in csv.reader(io.StringIO(text.strip())) if r]
    if not rows:
        raise _fail(what, "empty")
    header = [h.strip().split(" [")[0] for h in rows[0]]
    for need in ("name", "memory.total"):
        if need not in header:
            raise _fail(what, f"no {need!r} column in the header (run it with --query-gpu=name,memory.total "
                              "--format=csv)")
    col = {h: i for i, h in enumerate(header)}
    out = []
    for n, row in enumerate(rows[1:], start=2):
        if len(row) != len(header):
            raise _fail(what, f"line {n} has {len(row)} fields, the header {len(header)}")
        cell = {h: row[i].strip() for h, i in col.items()}
        idx = cell.get("index", "")
        reserved = cell.get("memory.reserved", "")
        reserved_ok = re.fullmatch(r"[0-9]{1,18}\s*MiB", reserved) is not None  # '[N/A]' on a driver without it
        out.append(Gpu(name=cell["name"], memory_bytes=_mib(cell["memory.total"], f"{what} line {n}"),
                       memory_text=cell["memory.total"], index=int(idx) if _whole(idx) else n - 2,
                       driver=cell.get("driver_version", ""), bus_id=cell.get("pci.bus_id", ""),
                       reserved_bytes=_mib(reserved, f"{what} line {n}") if reserved_ok else None,
                       reserved_text=reserved if reserved_ok else "", mig_mode=cell.get("mig.mode.current", "")))
    if not out:
        raise _fail(what, "a header but no GPU rows")
    return out


_SMI_Q_GPU = re.compile(r"^GPU (\S+)\s*$", re.M)


def parse_nvidia_smi_q(text: str, what: str = "nvidia-smi -q output") -> list[Gpu]:
    """GPUs from ``nvidia-smi -q``: each ``GPU <bus id>`` block's ``Product Name`` and the ``Total`` under
    ``FB Memory Usage`` (the framebuffer memory nvidia-smi --query-gpu calls memory.total)."""
    driver = ""
    m = re.search(r"^Driver Version\s*:\s*(\S+)", text, re.M)
    if m:
        driver = m.group(1)
    starts = list(_SMI_Q_GPU.finditer(text))
    if not starts:
        raise _fail(what, "no 'GPU <bus id>' section")
    out = []
    for i, s in enumerate(starts):
        block = text[s.end(): starts[i + 1].start() if i + 1 < len(starts) else len(text)]
        name = re.search(r"^(\s+)Product Name\s*:\s*(.+?)\s*$", block, re.M)
        # the GPU's own fields sit at Product Name's indentation; a MIG device's memory block is deeper
        ind = name.group(1).strip("\n") if name else r"\s+"
        fb = re.search(rf"^{ind}FB Memory Usage\s*\n\s+Total\s*:\s*(.+?)\s*$(?:\n\s+Reserved\s*:\s*(.+?)\s*$)?",
                       block, re.M)
        if not name or not fb:
            raise _fail(what, f"GPU {s.group(1)}: no {'Product Name' if not name else 'FB Memory Usage / Total'}")
        where = f"{what} GPU {s.group(1)}"
        mode = re.search(rf"^{ind}MIG Mode\s*\n\s+Current\s*:\s*(.+?)\s*$", block, re.M)
        reserved = fb.group(2) or ""
        out.append(Gpu(name=name.group(2), memory_bytes=_mib(fb.group(1), where),
                       memory_text=fb.group(1), index=i, driver=driver, bus_id=s.group(1),
                       reserved_bytes=_mib(reserved, where) if reserved else None, reserved_text=reserved,
                       mig_mode=mode.group(1) if mode else "", mig=_mig_devices(block, ind, where)))
    return out


def _mig_devices(block: str, ind: str, what: str) -> tuple[MigDevice, ...]:
    """The ``MIG Device`` sections of one GPU's ``nvidia-smi -q`` block (``ind``: the GPU's field indentation), each
    to the next GPU-level line: its Index, GPU Instance ID, Multiprocessor count and (Shared) FB Memory Usage."""
    heads = list(re.finditer(rf"^{ind}MIG Device\s*$", block, re.M))
    out: list[MigDevice] = []
    for h in heads:
        end = re.compile(rf"^{ind}\S", re.M).search(block, h.end())
        sec = block[h.end(): end.start() if end else len(block)]
        idx = re.search(r"^\s+Index\s*:\s*([0-9]{1,9})\s*$", sec, re.M)
        gi = re.search(r"^\s+GPU Instance ID\s*:\s*([0-9]{1,9})\s*$", sec, re.M)
        sms = re.search(r"^\s+Multiprocessor count\s*:\s*([0-9]{1,9})\s*$", sec, re.M)
        fb = re.search(r"^\s+(?:Shared )?FB Memory Usage\s*\n\s+Total\s*:\s*(.+?)\s*$"
                       r"(?:\n\s+Reserved\s*:\s*(.+?)\s*$)?", sec, re.M)
        if not idx or not fb:
            raise _fail(what, f"MIG Device {len(out)}: no {'Index' if not idx else 'FB Memory Usage / Total'}")
        mig_what = f"{what} MIG device {idx.group(1)}"
        reserved = fb.group(2) or ""
        out.append(MigDevice(index=int(idx.group(1)), gpu_instance=int(gi.group(1)) if gi else None,
                             sm_count=int(sms.group(1)) if sms else None, memory_bytes=_mib(fb.group(1), mig_what),
                             memory_text=fb.group(1), reserved_bytes=_mib(reserved, mig_what) if reserved else None,
                             reserved_text=reserved))
    return tuple(out)


def parse_rocm_smi_json(text: str, what: str = "rocm-smi --json output") -> list[Gpu]:
    """GPUs from ``rocm-smi --showproductname --showmeminfo vram --json``: one ``cardN`` object each, its name
    from ``Card Series`` (else ``Device Name``) and its memory from ``VRAM Total Memory (B)``."""
    try:
        data = json.loads(text)
    except json.JSONDecodeError as e:
        raise _fail(what, f"not valid JSON (line {e.lineno}: {e.msg})") from None
    if not isinstance(data, dict):
        raise _fail(what, "the top level is not an object of cards")
    out = []
    for key in sorted((k for k in data if re.fullmatch(r"card\d+", k)), key=lambda k: int(k[4:])):
        card = data[key]
        if not isinstance(card, dict):
            raise _fail(what, f"{key} is not an object")
        name = card.get("Card Series") or card.get("Device Name")
        vram = card.get("VRAM Total Memory (B)")
        if not name or vram is None:
            raise _fail(what, f"{key}: no {'Card Series / Device Name' if not name else 'VRAM Total Memory (B)'} "
                              "(run it with --showproductname --showmeminfo vram)")
        if not _whole(str(vram)):
            raise _fail(what, f"{key}: VRAM Total Memory (B) {vram!r} is not a byte count")
        out.append(Gpu(name=str(name), memory_bytes=int(vram), memory_text=f"{vram} B", index=int(key[4:])))
    if not out:
        raise _fail(what, "no cardN entry")
    return out


def _colon_fields(text: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for line in text.splitlines():
        k, sep, v = line.partition(":")
        if sep:
            out.setdefault(k.strip(), v.strip())
    return out


def parse_lscpu(text: str, what: str = "lscpu output") -> Cpu:
    """The CPU from ``lscpu`` (flat or sectioned layout; English labels)."""
    f = _colon_fields(text)

    def num(key: str) -> int:
        v = f.get(key)
        if v is None:
            raise _fail(what, f"no '{key}:' line")
        if not _whole(v) or int(v) < 1:
            raise _fail(what, f"'{key}: {v}' is not a positive whole number")
        return int(v)

    model = f.get("Model name")
    if not model:
        raise _fail(what, "no 'Model name:' line")
    return Cpu(model=model, sockets=num("Socket(s)"), cores_per_socket=num("Core(s) per socket"),
               threads_per_core=num("Thread(s) per core"), cpus=num("CPU(s)"))


def parse_meminfo(text: str, what: str = "/proc/meminfo") -> int:
    """``MemTotal`` in bytes (``/proc/meminfo`` writes kB meaning KiB, proc(5))."""
    m = re.search(r"^MemTotal:\s*([0-9]{1,18})\s*kB\s*$", text, re.M)
    if not m:
        raise _fail(what, "no 'MemTotal: N kB' line")
    return int(m.group(1)) * KIB


def meminfo_field(text: str, key: str) -> int | None:
    """One ``/proc/meminfo`` figure in bytes (``kB`` lines: KiB, proc(5)), or a bare count (``HugePages_Total``);
    None where the line is absent (an older kernel, a truncated copy)."""
    m = re.search(rf"^{re.escape(key)}:\s*([0-9]{{1,18}})(\s*kB)?\s*$", text, re.M)
    if not m:
        return None
    return int(m.group(1)) * (KIB if m.group(2) else 1)


def meminfo_huge_pages(text: str) -> int | None:
    """Bytes reserved as huge pages (``HugePages_Total`` x ``Hugepagesize``, proc(5)): memory an ordinary allocation
    cannot take; None where either line is absent."""
    count, size = meminfo_field(text, "HugePages_Total"), meminfo_field(text, "Hugepagesize")
    return None if count is None or size is None else count * size


def parse_sysctl(text: str, what: str = "sysctl output") -> AppleMachine:
    """Chip and memory from ``sysctl machdep.cpu.brand_string hw.memsize`` (``key: value`` lines). A brand that
    is not ``Apple ...`` (Intel Macs) or the early-Big-Sur ``Apple processor`` gives no chip."""
    f = _colon_fields(text)
    brand = f.get("machdep.cpu.brand_string")
    if brand is None:
        raise _fail(what, "no 'machdep.cpu.brand_string:' line")
    mem = f.get("hw.memsize")
    if mem is not None and not _whole(mem):
        raise _fail(what, f"'hw.memsize: {mem}' is not a byte count")
    chip = brand if re.fullmatch(r"Apple M\d+(?: (?:Pro|Max|Ultra))?", brand) else ""
    return AppleMachine(chip=chip, memory_bytes=int(mem) if mem else None,
                        memory_text=f"hw.memsize: {mem}" if mem else "", model=brand)


def parse_system_profiler_hardware(text: str, what: str = "system_profiler SPHardwareDataType output") -> AppleMachine:
    """Chip and memory from ``system_profiler SPHardwareDataType`` (``Chip: Apple M1``, ``Memory: 16 GB``; the GB
    of a memory capacity is read as GiB, MEMORY_CONVENTION: a 16 GB M1 reports hw.memsize 17179869184)."""
    f = _colon_fields(text)
    mem = f.get("Memory")
    if mem is None:
        raise _fail(what, "no 'Memory:' line")
    m = re.fullmatch(r"([0-9]{1,18})\s*(GB|TB)", mem)
    if not m:
        raise _fail(what, f"'Memory: {mem}' is not 'N GB'")
    size = int(m.group(1)) * (GIB if m.group(2) == "GB" else 2**40)
    cores = re.match(r"(\d{1,4})\b", f.get("Total Number of Cores", ""))
    return AppleMachine(chip=f.get("Chip", ""), memory_bytes=size, memory_text=f"Memory: {mem}",
                        model=f.get("Model Name", ""), cpu_cores=int(cores.group(1)) if cores else None,
                        cpu_cores_text=f"Total Number of Cores: {f['Total Number of Cores']}" if cores else "")


def parse_system_profiler_displays(text: str, what: str = "system_profiler SPDisplaysDataType output") -> AppleGpu:
    """The Apple GPU in ``system_profiler SPDisplaysDataType``: ``Chipset Model: Apple M1`` and the ``Total Number
    of Cores: 7`` line of the same block (same indentation, before the block ends). An output listing only other
    GPUs (Intel Macs) gives no chipset; one with no ``Chipset Model`` line at all is damaged."""
    lines = text.splitlines()
    seen = False
    others: list[str] = []
    for i, line in enumerate(lines):
        key, sep, val = line.partition(":")
        if not sep or key.strip() != "Chipset Model":
            continue
        seen = True
        if not re.fullmatch(r"Apple M\d+(?: (?:Pro|Max|Ultra))?", val.strip()):
            vram = next((n.strip() for n in _block(lines, i) if n.strip().startswith("VRAM")), "")
            others.append(val.strip() + (f" ({vram})" if vram else ""))
            continue
        indent = len(line) - len(line.lstrip())
        for nxt in lines[i + 1:]:
            depth = len(nxt) - len(nxt.lstrip())
            if nxt.strip() and depth < indent:
                break
            k, s2, v = nxt.partition(":")
            if s2 and depth == indent and k.strip() == "Total Number of Cores":
                if not _whole(v.strip()):
                    raise _fail(what, f"'Total Number of Cores: {v.strip()}' is not a count")
                return AppleGpu(chipset=val.strip(), cores=int(v.strip()), cores_text=nxt.strip())
        return AppleGpu(chipset=val.strip(), cores=None, cores_text="")
    if not seen:
        raise _fail(what, "no 'Chipset Model:' line")
    return AppleGpu(chipset="", cores=None, cores_text="", others=tuple(others))


def _block(lines: list[str], i: int) -> list[str]:
    """The lines of the block ``lines[i]`` opens: those after it at its indentation or deeper, to the first less
    indented one."""
    indent = len(lines[i]) - len(lines[i].lstrip())
    out = []
    for nxt in lines[i + 1:]:
        if nxt.strip() and len(nxt) - len(nxt.lstrip()) < indent:
            break
        out.append(nxt)
    return out


__all__ = ["AppleGpu", "AppleMachine", "Cpu", "Gpu", "MigDevice", "meminfo_field", "meminfo_huge_pages", "parse_lscpu",
           "parse_meminfo", "parse_nvidia_smi_csv", "parse_nvidia_smi_q", "parse_rocm_smi_json", "parse_sysctl", "parse_system_profiler_displays",
           "parse_system_profiler_hardware"]
