"""Describe the machine llmsizer runs on as a user hardware file (issue #16, ``llmsizer hardware detect``).

Each output is read by a pure parser in ``readers/system_outputs.py``; this module gathers the outputs (runs the
fixed, read-only commands below when they exist, or reads them from a folder with ``from_dir``) and maps the records
to catalog devices with the catalog's own ``find`` (ids, names, aliases):

- a GPU whose driver name is a catalog name or alias ('NVIDIA H100 80GB HBM3' -> h100-sxm) takes the catalog's
  bandwidth, FLOP/s and TDP (with their catalog sources) and the driver-reported memory (``memory_usable``: the
  catalog's own convention, MEMORY_CONVENTION), with CUDA's total (``memory_cuda``, DETECTED_CUDA_RULE): memory.total
  less the driver's Reserved where the output prints it, else the matched card's;
- a GPU in MIG mode is each MIG device ``nvidia-smi -q`` lists, a device of its own memory and count 1 (MIG_RULE);
  one whose MIG devices are not listed (the CSV query) is refused in one line;
- a CPU (``lscpu`` model name, cleaned of (R), CPU, @ GHz) found in the catalog takes its bandwidth and FLOP/s, per
  socket in the catalog; its FLOP/s and TDP times lscpu's Socket(s): the machine is one device, as its cores
  (Socket(s) x Core(s) per socket) and its memory, ``/proc/meminfo`` MemTotal, are. Its memory bandwidth is the
  one a single llama.cpp process reads its weights at (``NUMA_MODES``, ``numa_bandwidth_note``): one socket's
  unless ``numa`` is 'distribute', with a warning on a machine of several sockets. Under ``numa`` 'isolate' every
  llama.cpp thread runs on one node, so the cores, FLOP/s and TDP are one socket's too (``sockets_used``);
- an Apple chip and memory size (``system_profiler``/``sysctl``) map to the catalog configuration ('Apple M1' +
  16 GiB -> apple-m1-16gb); the GPU-core count ``system_profiler SPDisplaysDataType`` prints picks the GPU-core bin
  when the catalog lists one by that count ('Apple M1' + 8 GiB + 7 GPU cores -> apple-m1-7c-8gb);
- anything not in the catalog becomes a device of its kind with the detected memory; bandwidth and FLOP/s are
  null with a note (never guessed).

Every detected value's source is a ``detected:<output>`` entry of the file's ``sources`` table: the command, where
its output came from and the date. Detected devices are ``owned: true`` and their ids start with ``detected-``.
"""

from __future__ import annotations

import dataclasses
import datetime as _dt
import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import InputError
from ..readers import system_outputs as so
from ..result import json_data
from ..units import format_bytes
from .hardware import DETECTED, Device, HardwareCatalog, HardwareText, Instance, Value, builtin_catalog, names_detected

# output name (the file name under --from DIR) -> the fixed, read-only command that prints it
COMMANDS: dict[str, tuple[str, ...]] = {
    "nvidia-smi-query-gpu": ("nvidia-smi", "--query-gpu=index,name,memory.total,driver_version,pci.bus_id",
                             "--format=csv"),
    "nvidia-smi-q": ("nvidia-smi", "-q"),
    "rocm-smi-json": ("rocm-smi", "--showproductname", "--showmeminfo", "vram", "--json"),
    "lscpu": ("lscpu",),
    "proc-meminfo": ("/proc/meminfo",),  # a file: read, never run
    "sysctl-macos": ("sysctl", "machdep.cpu.brand_string", "hw.memsize"),
    "system_profiler-SPHardwareDataType": ("system_profiler", "SPHardwareDataType"),
    "system_profiler-SPDisplaysDataType": ("system_profiler", "SPDisplaysDataType"),
}
# live, both nvidia-smi outputs are read: the CSV query gives each GPU's name and memory (the short field list every
# driver knows), -q the driver's reserve and MIG mode with its MIG devices (``_with_q``), which the short query lacks
_LIVE = ("nvidia-smi-query-gpu", "nvidia-smi-q", "rocm-smi-json", "lscpu", "proc-meminfo", "sysctl-macos",
         "system_profiler-SPHardwareDataType", "system_profiler-SPDisplaysDataType")
_MACOS = ("sysctl-macos", "system_profiler-SPHardwareDataType", "system_profiler-SPDisplaysDataType")
TIMEOUT_S = 10.0
MEMINFO = Path("/proc/meminfo")


@dataclass(frozen=True)
class Output:
    """One command's output and where it came from."""

    name: str
    text: str
    command: str
    origin: str  # 'this machine' or the file it was read from
    date: str

    @property
    def source_key(self) -> str:
        return f"detected:{self.name}"

    @property
    def what(self) -> str:
        return f"{self.command} output ({self.origin})"


@dataclass(frozen=True)
class DetectedDevice:
    id: str
    name: str
    kind: str
    count: int
    memory_bytes: int
    memory_from: str
    catalog_id: str | None
    note: str = ""
    # where the chip (and GPU bin) is in the catalog but the memory size was not read: its configurations, one per
    # memory size (apple_candidates); the memory alone decides which
    candidates: tuple[str, ...] = ()


@dataclass
class Detection:
    """A machine as ``hardware detect`` reads it (``detect_hardware``): ``document`` the hardware file (devices with
    their sources), ``devices`` one line each (id, kind, count, memory, catalog match), ``target`` the device a
    question about the machine is answered for, ``outputs`` the command outputs read, ``skipped`` what was not read
    and why, ``warnings`` what the file's values assume (one socket's bandwidth on a machine of several)."""

    document: dict[str, Any]  # the hardware file
    devices: list[DetectedDevice] = field(default_factory=list)
    outputs: list[Output] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)  # what was not read, and why
    warnings: list[str] = field(default_factory=list)  # what the file's values assume (several sockets)

    @property
    def target(self) -> DetectedDevice:
        """The device a question about "this machine" is answered for: the first detected (its GPUs, else its CPU
        or Apple chip: ``detect`` lists GPUs first), the one ``hardware detect -o`` suggests to ``fit``."""
        return self.devices[0]

    def to_dict(self, written: str | None = None) -> dict[str, Any]:
        """What ``hardware detect --json`` prints (``written``: the file ``-o`` wrote, None: none), in the shape every
        ``--json`` has (``result.json_data``, its one home): the hardware file, the outputs read, what was skipped
        and the warnings, so ``detect_hardware(...).to_dict() == json.loads(cli --json)`` (probe24 D6)."""
        return json_data({"written": written, "hardware_file": self.document,
                          "read": [{"output": o.name, "command": o.command, "from": o.origin, "date": o.date}
                                   for o in self.outputs],
                          "skipped": self.skipped, "warnings": self.warnings})

    def hardware_text(self) -> HardwareText:
        """The hardware file (``document``) as the text of a hardware file named ``detected.json`` dated today:
        what ``hardware detect -o FILE`` writes, given to ``load_catalog`` without a file."""
        return HardwareText(DETECTED_FILE, json.dumps(self.document, indent=2) + "\n",
                            _dt.datetime.now(_dt.timezone.utc).date().isoformat())


# How llama.cpp places a CPU process on a machine of several sockets (NUMA nodes), as its --numa option names it
# (common/arg.cpp "--numa TYPE": distribute | isolate | numactl), and the memory bandwidth its decode reads weights
# at. llama.cpp's default is no NUMA strategy (common/common.h, common_params: numa = GGML_NUMA_STRATEGY_DISABLED):
# ggml/src/ggml-cpu/ggml-cpu.c set_numa_thread_affinity returns without pinning a thread unless the strategy is
# DISTRIBUTE (thread n on node n % nodes), ISOLATE (every thread on the starting node) or NUMACTL (numactl's cpuset)
# (read at ggml-org/llama.cpp 005913fd). Unpinned, the weights' pages sit on the node that first touched them (Linux
# first-touch placement of the mmap'd file), so the decode streams them from one socket's memory, the other socket's
# threads over the inter-socket link: one socket's bandwidth. 'distribute' spreads the threads, and with them the
# pages they first touch (llama.cpp's help: drop the page cache before the first such run), over every node: all the
# sockets' bandwidth. 'isolate' keeps one node: one socket's bandwidth, and its compute too: every thread's affinity
# is the CPUs of the node the process started on (set_numa_thread_affinity, case GGML_NUMA_STRATEGY_ISOLATE:
# node_num = g_state.numa.current_node, then pthread_setaffinity_np to that node's CPUs; ggml-org/ggml d99724f2
# src/ggml-cpu/ggml-cpu.c:2148-2185, the file llama.cpp vendors as ggml/src/ggml-cpu/ggml-cpu.c), so the machine it
# runs on is one socket: its cores, FLOP/s and TDP (``ISOLATED_SOCKETS``). The memory stays the machine's (the
# affinity pins threads, not allocations).
NUMA_MODES = ("off", "distribute", "isolate")
NUMA_SOURCE = ("llama.cpp common/common.h (numa = GGML_NUMA_STRATEGY_DISABLED), common/arg.cpp (--numa), "
               "ggml/src/ggml-cpu/ggml-cpu.c set_numa_thread_affinity")
ISOLATE_SOURCE = ("llama.cpp --numa isolate: every thread on the node the process started on (ggml/src/ggml-cpu/"
                  "ggml-cpu.c set_numa_thread_affinity, GGML_NUMA_STRATEGY_ISOLATE: node_num = current_node; "
                  "ggml-org/ggml d99724f2 src/ggml-cpu/ggml-cpu.c:2162-2185)")


def sockets_used(sockets: int, numa: str) -> int:
    """The sockets whose cores, FLOP/s and TDP a llama.cpp process under ``numa`` computes with on a machine of
    ``sockets``: one under 'isolate' (``ISOLATE_SOURCE``), else every socket (its threads are spread, or unpinned)."""
    return 1 if numa == "isolate" else sockets


def numa_bandwidth_note(sockets: int, per_socket: float, unit: str, numa: str) -> str:
    """What a detected machine of ``sockets`` sockets states about its memory bandwidth under llama.cpp's ``numa``
    mode (``NUMA_MODES``): which bandwidth its CPU decode is sized with, and how to get the other."""
    if numa == "distribute":
        return (f"{sockets} sockets x {per_socket:g} {unit}: llama.cpp run with --numa distribute spreads its threads "
                f"and the pages they first touch over every socket; without it one process reads its weights from one "
                f"socket's memory ({per_socket:g} {unit}) ({NUMA_SOURCE})")
    return (f"one socket's {per_socket:g} {unit} of {sockets} sockets: llama.cpp's default (no --numa, or --numa "
            f"{numa if numa != 'off' else 'isolate'}) does not place the weights on every socket, so one process reads "
            f"them from one socket's memory; with llama.cpp --numa distribute (page cache dropped first) all "
            f"{sockets} sockets' {sockets * per_socket:g} {unit}: `hardware detect --numa distribute` writes that "
            f"({NUMA_SOURCE})")


# --------------------------------------------------------------------------------------------- gathering

def read_outputs(folder: str | Path) -> list[Output]:
    """Saved outputs of one machine from ``folder``: a file named as the output (``lscpu``) or with one extension
    (``lscpu.txt``, ``nvidia-smi-query-gpu.csv``), or a subfolder named as the output holding that one file
    (``lscpu/node7.txt``; a ``NAME.cmd.txt`` beside it holds the command that printed it). Their date is the file's
    modification date; the command is the one the file holds (``_saved_command``)."""
    d = Path(folder).expanduser()
    if not d.is_dir():
        raise InputError(f"--from {folder}: not a folder")
    out = []
    for name, argv in COMMANDS.items():
        hits = sorted(p for p in d.iterdir() if p.is_file() and (p.name == name or p.stem == name))
        sub = d / name
        if sub.is_dir():
            hits += sorted(p for p in sub.iterdir() if p.is_file() and not p.name.endswith(CMD_SUFFIX))
        if len(hits) > 1:
            raise InputError(f"--from {folder}: {len(hits)} files for {name} ({', '.join(p.name for p in hits)}); "
                             "--from reads one machine: keep one file per output, DIR/NAME(.ext) or DIR/NAME/FILE")
        if hits:
            p = hits[0]
            try:
                text = p.read_text("utf-8")
            except (OSError, UnicodeDecodeError) as e:
                raise InputError(f"--from {folder}: cannot read {p.name} ({e})") from None
            date = _dt.datetime.fromtimestamp(p.stat().st_mtime, _dt.timezone.utc).date().isoformat()
            out.append(Output(name, text, _saved_command(name, argv, text, p), str(p), date))
    if not out:
        raise InputError(f"--from {folder}: no saved output found; name the files {', '.join(COMMANDS)} (a file "
                         "DIR/NAME or DIR/NAME.ext, or one file in a folder DIR/NAME/)")
    return out


CMD_SUFFIX = ".cmd.txt"  # beside a saved output: the command line that printed it
_SHOWN_FIELDS = 8  # a --query-gpu longer than this is shown as its first fields and its count


def _saved_command(name: str, argv: tuple[str, ...], text: str, path: Path) -> str:
    """The command a saved output was printed by: the ``.cmd.txt`` beside it, else, for an nvidia-smi --query-gpu
    CSV, the fields its header names (the query may hold any fields, e.g. all 212), else the output's command."""
    cmd_file = path.with_name(path.name.removesuffix(path.suffix) + CMD_SUFFIX)
    command = " ".join(argv)
    if cmd_file.is_file():
        try:
            command = cmd_file.read_text("utf-8").strip().splitlines()[0]
        except (OSError, UnicodeDecodeError, IndexError):
            pass
    elif name == "nvidia-smi-query-gpu" and text.strip():
        header = [re.sub(r"\s*\[[^]]*\]$", "", f.strip()) for f in text.strip().splitlines()[0].split(",")]
        command = f"nvidia-smi --query-gpu={','.join(header)} --format=csv"
    elif name == "sysctl-macos":
        # the keys the saved output holds of those read (a `sysctl -a machdep.cpu` capture has no hw.memsize): the
        # text names what was read, not a command that was not run (probe23 C2)
        keys = [k for k in argv[1:] if re.search(rf"^{re.escape(k)}\s*[:=]", text, re.M)]
        command = " ".join((argv[0], *keys)) if keys else command
    m = re.search(r"--query-gpu=(\S+)", command)
    if m and m.group(1).count(",") >= _SHOWN_FIELDS:
        fields = m.group(1).split(",")
        command = command.replace(m.group(1), ",".join(fields[:3]) + f",... ({len(fields)} fields)")
    return command


Runner = Callable[[tuple[str, ...]], "subprocess.CompletedProcess[str]"]


def _run(argv: tuple[str, ...]) -> subprocess.CompletedProcess[str]:
    # argv[0] is the absolute path shutil.which found; no shell; English labels for lscpu
    return subprocess.run(list(argv), capture_output=True, text=True, timeout=TIMEOUT_S, check=False,
                          env={**os.environ, "LC_ALL": "C"})


def run_commands(runner: Runner = _run, which: Callable[[str], str | None] = shutil.which,
                 meminfo: Path = MEMINFO) -> tuple[list[Output], list[str]]:
    """Run each fixed command that exists (no shell, ``TIMEOUT_S``), read ``/proc/meminfo``; skip what is absent
    or fails, saying why."""
    today = _dt.datetime.now(_dt.timezone.utc).date().isoformat()
    out: list[Output] = []
    skipped: list[str] = []
    for name in _LIVE:
        argv = COMMANDS[name]
        shown = " ".join(argv)
        if name == "proc-meminfo":
            if meminfo.is_file():
                out.append(Output(name, meminfo.read_text("utf-8", errors="replace"), shown, "this machine", today))
            else:
                skipped.append(f"{meminfo}: not present")
            continue
        if name in _MACOS and sys.platform != "darwin":
            if f"{argv[0]}: macOS only" not in skipped:  # system_profiler is run for two outputs
                skipped.append(f"{argv[0]}: macOS only")
            continue
        exe = which(argv[0])
        if exe is None:
            skipped.append(f"{argv[0]}: not installed")
            continue
        try:
            r = runner((exe, *argv[1:]))
        except (OSError, subprocess.TimeoutExpired) as e:
            skipped.append(f"{shown}: {type(e).__name__}")
            continue
        if r.returncode != 0:
            why = (r.stderr or r.stdout or "").strip().splitlines()
            skipped.append(f"{shown}: exit {r.returncode}" + (f" ({why[0][:120]})" if why else ""))
            continue
        out.append(Output(name, r.stdout, shown, "this machine", today))
    return out, skipped


# ----------------------------------------------------------------------------------------------- mapping

_SLUG = re.compile(r"[^a-z0-9]+")


def _slug(text: str) -> str:
    return _SLUG.sub("-", text.lower()).strip("-")


def _catalog_device(cat: HardwareCatalog, names: list[str], kind: str) -> Device | None:
    for n in names:
        if not n.strip():
            continue
        try:
            hw = cat.find(n)
        except KeyError:
            continue
        if isinstance(hw, Device) and hw.kind == kind:
            return hw
    return None


_BIN_CORES = re.compile(r"(\d+)-core GPU")
_PARENS = re.compile(r" \(.*\)")
_SIZE = re.compile(r" \d+(?:\.\d+)?\s?[GT]B$")


def _bin_cores(name: str) -> int | None:
    m = _BIN_CORES.search(name)
    return int(m.group(1)) if m else None


def apple_configuration(cat: HardwareCatalog, chip: str, memory_bytes: int, gpu_cores: int | None) -> Device | None:
    """The catalog configuration of the Apple chip ``chip`` ('Apple M1') with ``memory_bytes`` of unified memory:
    by name ('Apple M1 8GB', as before), and when the GPU-core count is known, the configuration of the same chip
    and memory whose name states that count ('Apple M1 (8-core CPU, 7-core GPU) 8GB'). A count no configuration
    states keeps the configuration whose name states none (the full bin, 'Apple M1 8GB'). None: not in the catalog."""
    base = _catalog_device(cat, [f"{chip} {memory_bytes // so.GIB}GB"], "apple")
    if base is None or gpu_cores is None:
        return base
    same = [d for d in cat.devices.values()
            if d.kind == "apple" and d.memory_bytes == memory_bytes and _SIZE.sub("", _PARENS.sub("", d.name)) == chip]
    stated = [d for d in same if _bin_cores(d.name) == gpu_cores]
    if len(stated) == 1:
        return stated[0]
    unstated = [d for d in same if _bin_cores(d.name) is None]
    if _bin_cores(base.name) not in (None, gpu_cores) and len(unstated) == 1:
        return unstated[0]
    return base


def apple_candidates(cat: HardwareCatalog, chip: str, gpu_cores: int | None) -> list[Device]:
    """The catalog configurations the Apple chip ``chip`` ('Apple M3') with ``gpu_cores`` GPU cores may be when its
    memory size is unknown: for each memory size the catalog lists for the chip, the configuration
    ``apple_configuration`` takes for that size and bin, smallest memory first; with no GPU-core count read (None),
    every configuration of the chip, each bin and size. Empty: the chip is not in the catalog."""
    chips = [d for d in cat.devices.values() if d.kind == "apple" and d.memory_bytes
             and _SIZE.sub("", _PARENS.sub("", d.name)) == chip]
    if gpu_cores is None:
        return sorted(chips, key=lambda d: (d.memory_bytes or 0, d.id))
    found = [apple_configuration(cat, chip, m, gpu_cores) for m in sorted({d.memory_bytes or 0 for d in chips})]
    return [d for d in found if d is not None]


def _fp16(d: Device) -> str:
    v = d.flops.get("fp16")
    return f", {v.raw:g} {v.unit} fp16" if v is not None else ""


_CPU_CORES = re.compile(r"(\d+)(?:- or (\d+))?-core CPU")


def _cpu_counts(name: str) -> set[int] | None:
    """The CPU-core counts a configuration's name states ('10-core CPU', '8- or 10-core CPU'); None: none stated."""
    m = _CPU_CORES.search(name)
    return {int(g) for g in m.groups() if g} if m else None


def cpu_decides_bin(cat: HardwareCatalog, chip: str, dev: Device, cpu_cores: int | None) -> bool:
    """Whether the CPU-core count settles ``dev`` (the full GPU bin ``apple_configuration`` took, its name stating
    no count) when no GPU-core count was printed: every other GPU bin of the same chip and memory states CPU counts
    in its name (Apple's configurations: 'Apple M2 Pro (10-core CPU, 16-core GPU)') and none of them is
    ``cpu_cores``, so only ``dev`` remains (the 12-core-CPU M2 Pro has the 19-core GPU; Apple's M2 Pro spec: 10-core
    CPU with 16-core GPU, 12-core CPU with 19-core GPU). Only an exclusion by stated counts: a name stating the
    count (or none) leaves the bin open."""
    if cpu_cores is None:
        return False
    same = [d for d in cat.devices.values() if d.kind == "apple" and d.memory_bytes == dev.memory_bytes
            and d.id != dev.id and _SIZE.sub("", _PARENS.sub("", d.name)) == chip and _bin_cores(d.name)]
    counts = [_cpu_counts(d.name) for d in same]
    return bool(same) and all(c is not None and cpu_cores not in c for c in counts)


def assumed_bin(cat: HardwareCatalog, chip: str, dev: Device) -> str | None:
    """What detection assumed of ``dev``'s GPU-core bin when no output gave the count (no SPDisplaysDataType
    'Total Number of Cores'): the catalog's rule (``apple_configuration``), the configuration whose name states no
    count (the full bin), with the other bins of the same chip and memory named; None when the catalog has one bin
    of that chip."""
    same = [d for d in cat.devices.values() if d.kind == "apple" and d.memory_bytes == dev.memory_bytes
            and d.id != dev.id and _SIZE.sub("", _PARENS.sub("", d.name)) == chip and _bin_cores(d.name)]
    if not same or _bin_cores(dev.name) is not None:
        return None
    others = ", ".join(f"the {_bin_cores(d.name)}-core bin {d.id}{_fp16(d)}" for d in same)
    return (f"GPU-core count not in the outputs read: the catalog's full GPU bin assumed ({dev.id}{_fp16(dev)}); "
            f"{others}; system_profiler SPDisplaysDataType's 'Total Number of Cores' decides it")


def _gpu_names(name: str) -> list[str]:
    return [name, re.sub(r"^(NVIDIA|AMD)[\s_-]+", "", name)]


# rocm-smi names a die with the cards it ships in: 'Navi 32 [Radeon RX 7700 XT / 7800 XT]' (the PCI ID database's
# name, the card series); the reported memory tells which card it is
_DIE_CARDS = re.compile(r"\[(?P<family>.*?)(?P<first>[^\s/\]]+(?: XT| XTX| GRE)?)\s*/\s*(?P<rest>[^\]]+)\]")


def catalog_gpu(cat: HardwareCatalog, name: str, memory_bytes: int | None = None) -> Device | None:
    """The catalog GPU a driver-reported name stands for ('NVIDIA H100 80GB HBM3' -> h100-sxm), by the catalog's
    ids, names and aliases, with or without the vendor word; None when there is none. The same match serves a
    Kubernetes product label, which is that driver name with spaces written '-' (GPU feature discovery:
    'NVIDIA-H100-80GB-HBM3'; the catalog's name index already treats '-', '_' and spaces alike). A name listing
    several cards of one die ('Navi 32 [Radeon RX 7700 XT / 7800 XT]') is the one catalog card among them whose
    memory the driver reported (within 2 %: a driver reports slightly less than the capacity); none when the memory
    is not given or no single card matches it."""
    dev = _catalog_device(cat, _gpu_names(name), "gpu")
    m = _DIE_CARDS.search(name)
    if dev is not None or m is None or memory_bytes is None:
        return dev
    family = m.group("family")  # 'Radeon RX '
    cards = [m.group("first"), *(c.strip() for c in m.group("rest").split("/"))]
    found = [d for c in cards for d in [_catalog_device(cat, [f"{family}{c}", f"AMD {family}{c}"], "gpu")]
             if d is not None and d.memory_bytes and abs(d.memory_bytes - memory_bytes) <= 0.02 * d.memory_bytes]
    return found[0] if len(found) == 1 else None


def _cpu_names(model: str) -> list[str]:
    clean = re.sub(r"\((R|TM|tm|r)\)", "", model)
    clean = re.sub(r"@.*$", "", clean)
    clean = re.sub(r"\b(CPU|Processor|\d+-Core)\b", "", clean)
    clean = " ".join(clean.split())
    return [model, clean, re.sub(r"^(Intel|AMD)\s+", "", clean)]


def _catalog_value(v: Value, cat: HardwareCatalog) -> dict[str, Any]:
    """A catalog value as a hardware-file value object that keeps its catalog source."""
    d: dict[str, Any] = {"value": v.raw, "unit": v.unit, "source": v.source}
    if cat.sources.get(v.source, {}).get("date") != v.date:
        d["date"] = v.date
    for k in ("derived", "note", "confidence"):
        if getattr(v, k):
            d[k] = getattr(v, k)
    d.update(dict(v.extra))
    return d


def _all_sockets(entry: dict[str, Any], sockets: int, catalog_id: str, numa: str = "off") -> str | None:
    """A detected CPU machine of ``sockets`` sockets as one device: the catalog's per-socket TDP and FLOP/s (a catalog
    CPU is one socket; ``--count N`` is N of them, each a replica: estimate/device.py) times the sockets lscpu
    reports, as its cores (Socket(s) x Core(s) per socket) and MemTotal already cover the whole machine; under
    llama.cpp's ``numa`` 'isolate' one socket's (``sockets_used``: its threads run on one node), as its cores are.
    Its memory bandwidth: times the sockets only with 'distribute', else one socket's (``numa_bandwidth_note``), the
    value marked with ``sockets`` and ``numa`` (estimate/device.py ``numa_assumption`` names it, with the sockets
    that compute, in every speed and training-duration estimate). Returns the note (None: no bandwidth)."""
    bw = entry.get("memory_bandwidth")
    note = None
    if bw is not None and isinstance(bw.get("value"), (int, float)) and not isinstance(bw["value"], bool):
        per = bw["value"]
        note = numa_bandwidth_note(sockets, per, bw.get("unit", ""), numa)
        if numa == "distribute":
            bw["value"] = per * sockets
        bw["derived"] = note + (f"; per socket: {bw['derived']}" if bw.get("derived") else "")
        bw["sockets"], bw["numa"] = sockets, numa
    values = [entry[k] for k in ("tdp",) if k in entry] + list(entry.get("flops", {}).values())
    used = sockets_used(sockets, numa)
    for v in values:
        if isinstance(v.get("value"), (int, float)) and not isinstance(v["value"], bool):
            per = v["value"]
            v["value"] = per * used
            how = (f"one socket of {sockets} (lscpu Socket(s)): {ISOLATE_SOURCE}" if used == 1 else
                   f"{sockets} sockets (lscpu Socket(s))")
            v["derived"] = (f"{how} x {per:g} {v.get('unit', '')} per socket (catalog {catalog_id})"
                            + (f"; per socket: {v['derived']}" if v.get("derived") else ""))
    return note


# The Device fields `hardware detect` does not take from the catalog card it matched: who the entry is (its own id and
# name), what the machine's outputs measure (memory; a CPU's cores, from lscpu) or the user owns (prices), and the
# parser's bookkeeping. memory_cuda is decided with the memory (detected_cuda_memory: the driver's Reserved, else the
# card's figure when the card's memory.total is the one detected). Every other field is copied, so the detected copy times exactly as the card (probe18 D1b: a
# detected H100 that lost sm_count skipped llama.cpp's SM stream cap and decoded 34 % faster than the catalog H100;
# tests/catalog/test_detect_timing.py compares fit on both ids for every engine).
NOT_FROM_CATALOG = frozenset({"id", "name", "kind", "aliases", "memory", "memory_usable", "memory_cuda", "launch_price",
                              "price", "missing", "owned", "origin", "chip"})
_STRING_FIELDS = frozenset({"vendor", "form_factor", "architecture", "interconnect", "pcie", "host_interconnect",
                            "microarchitecture"})


def _from_catalog(entry: dict[str, Any], dev: Device, cat: HardwareCatalog, cpu: bool = False) -> None:
    """Copy every field of catalog card ``dev`` that a rule reads (all but NOT_FROM_CATALOG) into the detected
    ``entry``, each value keeping its catalog source; a field the entry already holds from the machine's own
    outputs (a CPU's lscpu cores) stays. ``cpu``: the entry is a CPU (its ISA flags are copied too; lscpu's cores
    win)."""
    for f in dataclasses.fields(Device):
        name = f.name
        if name in NOT_FROM_CATALOG or name in entry:
            continue
        v = getattr(dev, name)
        if name in _STRING_FIELDS:
            if v:
                entry[name] = v
        elif name in ("flops", "flops_sparse", "isa"):
            # a CPU's peaks derived from cores x clock (catalog/hardware.py _cpu_peaks) are left for the loader to
            # derive again from the entry's own cores (lscpu's: an 8-core VM of a 48-core part is not the part;
            # review22 D5: it got the whole socket's 157 TFLOP/s bf16), with the clock and micro-architecture copied
            kept = {k: x for k, x in v.items() if not (cpu and name == "flops" and x.source == "derived")}
            if kept and (name != "isa" or cpu):
                entry[name] = {k: _catalog_value(x, cat) for k, x in kept.items()}
        elif v is not None:
            entry[name] = _catalog_value(v, cat)
    entry["vendor"], entry["form_factor"] = dev.vendor, dev.form_factor  # the catalog's, over any default
    for name, why in dev.missing.items():
        if name in ("memory_bandwidth",) and name not in entry:
            entry[name] = {"value": None, "note": f"catalog {dev.id}: {why}"}


# A GPU in MIG mode is several devices: each MIG device (a GPU instance's compute instance) has its own memory and SMs,
# and a CUDA process enumerates one of them, whatever the number of MIG devices created or made visible (NVIDIA MIG
# User Guide, "MIG Device Names / Device Enumeration", docs.nvidia.com/datacenter/tesla/mig-user-guide/
# mig-device-names.html; CUPTI "Special Configurations / Multi-Instance GPU": every compute instance acts as a CUDA
# device). So `hardware detect` writes each MIG device nvidia-smi -q lists as a device of count 1 (no tensor parallel
# across them), its memory the MIG device's 'Shared FB Memory Usage / Total', its SMs 'Multiprocessor count'; the
# card's architecture and capability are copied, its whole-GPU figures (MIG_WHOLE_GPU) are not: nor the card's NVLink
# domain or peer-to-peer flag, since MIG devices have no GPU-to-GPU P2P, PCIe or NVLink (same guide, "Deployment
# Considerations / Application Considerations"). Each entry states `mig: true` (the line of nvidia-smi -q that lists
# it), which estimate/device.py MIG_PARALLEL_RULE reads: several serve as replicas, no tensor or pipeline parallelism.
MIG_RULE = ("a CUDA process enumerates one MIG device (NVIDIA MIG User Guide, Device Enumeration): each is a device "
            "of its own memory, count 1")
MIG_WHOLE_GPU = ("memory_bandwidth", "flops", "flops_sparse", "tdp", "sm_count", "fp32_cores", "interconnect",
                 "interconnect_bandwidth", "peer_to_peer", "nvlink_domain")

# CUDA's total for a detected GPU (what vLLM's and SGLang's pools are sized from, estimate/device.py cuda_memory):
# the driver's own figure where its output prints it, memory.total less 'FB Memory Usage / Reserved' (nvidia-smi -q;
# --query-gpu memory.reserved), the rule the catalog's memory_cuda rows follow; else, for a card matched to a catalog
# row whose driver total (memory_usable) is the one detected, that row's memory_cuda (the same card as the catalog
# sizes it: probe30 D1); else none, and an engine takes memory.total as CUDA's total (common.py cuda_total says so).
DETECTED_CUDA_RULE = ("CUDA's total = memory.total less the driver's 'Reserved' where the output prints it, else the "
                      "matched catalog card's memory_cuda when its memory.total is the one detected")


def detected_cuda_memory(g: so.Gpu, o: Output, dev: Device | None, cat: HardwareCatalog, which: str
                         ) -> tuple[dict[str, Any] | None, str]:
    """The ``memory_cuda`` value of detected GPU ``g`` (DETECTED_CUDA_RULE) and the note saying where it came from;
    (None, note) when neither the driver's reserve nor a matching catalog figure is known."""
    if g.reserved_bytes is not None:
        cuda = g.memory_bytes - g.reserved_bytes
        return ({"value": cuda // so.MIB, "unit": "MiB", "source": o.source_key,
                 "where": f"{g.name}: Total {g.memory_text}, Reserved {g.reserved_text} ({which})",
                 "derived": f"{g.memory_text} - {g.reserved_text} reserved by the driver: CUDA's total"},
                f"CUDA's total {format_bytes(cuda)}: memory.total less the driver's Reserved {g.reserved_text} "
                f"({o.name})")
    usable = dev.memory_usable if dev is not None else None
    if dev is not None and dev.memory_cuda is not None and usable is not None and int(usable.base) == g.memory_bytes:
        return (_catalog_value(dev.memory_cuda, cat),
                f"CUDA's total {format_bytes(int(dev.memory_cuda.base))} from catalog {dev.id} (its memory.total "
                f"{g.memory_text} is the one detected; {o.name} prints no Reserved)")
    return None, (f"CUDA's total not known ({o.name} prints no Reserved"
                  + (f", and catalog {dev.id} has none for {g.memory_text}" if dev is not None else "")
                  + "): an engine takes memory.total as it")


# Consumer GPU brands, read from the driver-reported name (nvidia-smi's name, rocm-smi's "Card Series"): NVIDIA's
# GeForce line and AMD's Radeon RX line are its makers' consumer cards (nvidia.com/en-us/geforce, amd.com/en/products/
# graphics/desktops/radeon.html); "Laptop GPU" is how NVIDIA's driver names a GeForce mobile part. Only the form
# factor comes from the name (it chooses the default serving engine, estimate/device.py _device_engine_rule);
# bandwidth and FLOP/s stay unknown.
CONSUMER_GPU_BRANDS = ("GeForce", "Radeon RX")


def gpu_form_factor_from_name(name: str) -> str | None:
    """'laptop' or 'desktop' for a GPU whose driver name carries a consumer brand (CONSUMER_GPU_BRANDS), else None
    (not guessed: a data-centre or workstation name does not tell the form factor the catalog means)."""
    if not any(brand in name for brand in CONSUMER_GPU_BRANDS):
        return None
    return "laptop" if "Laptop" in name else "desktop"


def _unknown(entry: dict[str, Any], what: str, flops_key: str) -> None:
    why = f"{what} is not in the catalog: no source for its {{}}; not guessed (add it to this file)"
    entry["memory_bandwidth"] = {"value": None, "note": why.format("memory bandwidth")}
    entry["flops"] = {flops_key: {"value": None, "note": why.format("peak FLOP/s")}}


def _unique(ident: str, used: set[str]) -> str:
    out, n = ident, 2
    while out in used:
        out, n = f"{ident}-{n}", n + 1
    used.add(out)
    return out


class _Builder:
    """Hardware-file device entries and their summaries, with unique ids."""

    def __init__(self, cat: HardwareCatalog, det: Detection, numa: str = "off") -> None:
        self.cat = cat
        self.det = det
        self.numa = numa
        self.entries: list[dict[str, Any]] = []
        self.used: set[str] = set()

    def add(self, entry: dict[str, Any], name: str, count: int, memory: int | None, memory_from: str,
            dev: Device | None, candidates: tuple[str, ...] = ()) -> None:
        entry["id"] = _unique(entry["id"], self.used)
        self.entries.append(entry)
        self.det.devices.append(DetectedDevice(entry["id"], name, entry["kind"], count, memory or 0, memory_from,
                                               dev.id if dev else None, str(entry.get("note", "")), candidates))

    def gpus(self, o: Output, gpus: list[so.Gpu], vendor: str) -> None:
        whole = [g for g in gpus if not g.mig_enabled]  # whole GPUs first (the target), then MIG devices
        groups: dict[tuple[str, int, int | None], list[so.Gpu]] = {}
        for g in whole:
            groups.setdefault((g.name, g.memory_bytes, g.reserved_bytes), []).append(g)
        for (name, mem, _), same in groups.items():
            g = same[0]
            dev = catalog_gpu(self.cat, name, mem)
            mem_val: dict[str, Any] = ({"value": mem // so.MIB, "unit": "MiB"} if g.memory_text.endswith("MiB")
                                       else {"value": mem, "unit": "B"})
            idx = ", ".join(str(x.index) for x in same)
            mem_val.update(source=o.source_key, where=f"{name}: {g.memory_text} (GPU {idx})")
            entry: dict[str, Any] = {"id": f"detected-{dev.id if dev else _slug(name)}", "name": f"{name} (detected)",
                                     "kind": "gpu", "vendor": vendor, "memory_usable": mem_val, "owned": True}
            cuda, cuda_note = detected_cuda_memory(g, o, dev, self.cat, f"GPU {idx}")
            if cuda is not None:
                entry["memory_cuda"] = cuda
            note = f"{len(same)} on this machine (GPU {idx})" + (f", driver {g.driver}" if g.driver else "")
            if dev is not None:
                _from_catalog(entry, dev, self.cat)
                note += f"; bandwidth, FLOP/s and TDP from catalog {dev.id}"
            else:
                _unknown(entry, f"GPU {name!r}", "bf16")
                form = gpu_form_factor_from_name(name)
                if form is not None:  # the default engine reads it (llama.cpp on one consumer card)
                    entry["form_factor"] = form
                    note += f"; form factor {form} from the consumer brand in its name (detect.CONSUMER_GPU_BRANDS)"
            entry["note"] = note + f"; {cuda_note}"
            self.add(entry, name, len(same), mem, o.source_key, dev)
        for g in gpus:
            if g.mig_enabled:
                self.mig(o, g, vendor)

    def mig(self, o: Output, g: so.Gpu, vendor: str) -> None:
        """A GPU in MIG mode: each MIG device it lists is a device of its own (``MIG_RULE``), count 1, largest
        first; none listed (the CSV query never lists them): refused in one line, so no answer sizes the whole GPU."""
        dev = catalog_gpu(self.cat, g.name, g.memory_bytes)
        if not g.mig:
            raise InputError(
                f"hardware detect: GPU {g.index} ({g.name}) is in MIG mode (MIG mode current: Enabled, in "
                f"{o.origin}): a "
                "process gets one MIG device, not the whole GPU, and this output does not list them; add the output "
                "of `nvidia-smi -q` (its MIG Device sections), or size one MIG device with --device gpu --memory "
                "(its memory, `nvidia-smi -L` names it: 3g.40gb)")
        base = dev.id if dev else _slug(g.name)
        listed = sorted(g.mig, key=lambda m: (-m.memory_bytes, m.index))
        for m in listed:
            entry: dict[str, Any] = {
                "id": f"detected-{base}-mig{m.index}", "name": f"{g.name} MIG device {m.index} (detected)",
                "kind": "gpu", "vendor": vendor, "owned": True,
                "mig": {"value": True, "unit": "flag", "source": o.source_key,
                        "where": f"GPU {g.index} MIG Device {m.index} (GPU instance {m.gpu_instance}), MIG Mode "
                                 "Current: Enabled"},
                "memory_usable": {"value": m.memory_bytes // so.MIB, "unit": "MiB", "source": o.source_key,
                                  "where": f"GPU {g.index} MIG Device {m.index} (GPU instance {m.gpu_instance}): "
                                           f"Shared FB Memory Usage Total {m.memory_text}"}}
            cuda = m.memory_bytes - (m.reserved_bytes or 0)
            if m.reserved_bytes is not None:
                entry["memory_cuda"] = {"value": cuda // so.MIB, "unit": "MiB", "source": o.source_key,
                                        "where": f"GPU {g.index} MIG Device {m.index}: Shared FB Memory Usage Total "
                                                 f"{m.memory_text}, Reserved {m.reserved_text}",
                                        "derived": "Total less Reserved: CUDA's total (DETECTED_CUDA_RULE)"}
            if dev is not None:  # the card's architecture and capability (engine rules read them), not its size
                _from_catalog(entry, dev, self.cat)
                for k in MIG_WHOLE_GPU:
                    entry.pop(k, None)
            why = (f"a MIG device of {dev.id if dev else g.name!r} ({MIG_RULE}): its share of the GPU's {{}} is not "
                   "in the catalog; not guessed (add it to this file)")
            entry["memory_bandwidth"] = {"value": None, "note": why.format("memory bandwidth")}
            entry["flops"] = {"bf16": {"value": None, "note": why.format("peak FLOP/s")}}
            if m.sm_count is not None:
                entry["sm_count"] = {"value": m.sm_count, "unit": "SMs", "source": o.source_key,
                                     "where": f"GPU {g.index} MIG Device {m.index}: Multiprocessor count {m.sm_count}"}
            entry["note"] = (f"MIG device {m.index} of GPU {g.index} (GPU instance {m.gpu_instance}"
                             + (f", {m.sm_count} SMs" if m.sm_count is not None else "") + f"), {m.memory_text}"
                             + (f", driver {g.driver}" if g.driver else "")
                             + "; a process gets one MIG device (see the warning)")
            self.add(entry, entry["name"].removesuffix(" (detected)"), 1, m.memory_bytes, o.source_key, dev)
        sizes = ", ".join(f"{m.index}: {format_bytes(m.memory_bytes)}" for m in listed)
        self.det.warnings.append(
            f"GPU {g.index} ({g.name}) is in MIG mode: described as its {len(listed)} MIG device(s) ({sizes}), not as "
            f"the whole {format_bytes(g.memory_bytes)} GPU; {MIG_RULE}; their bandwidth and FLOP/s are not in the "
            "catalog (no speed)")

    def cpu(self, lscpu: Output | None, meminfo: Output | None) -> None:
        cpu = so.parse_lscpu(lscpu.text, lscpu.what) if lscpu else None
        ram = so.parse_meminfo(meminfo.text, meminfo.what) if meminfo else None
        dev = _catalog_device(self.cat, _cpu_names(cpu.model), "cpu") if cpu else None
        model = cpu.model if cpu else "CPU"
        entry: dict[str, Any] = {"id": f"detected-{dev.id}" if dev else "detected-cpu", "name": f"{model} (detected)",
                                 "kind": "cpu", "owned": True}
        parts = []
        if cpu is not None and lscpu is not None:
            one = sockets_used(cpu.sockets, self.numa) == 1 and cpu.sockets > 1  # --numa isolate: one node's
            entry["cores"] = {"value": cpu.cores_per_socket if one else cpu.cores, "unit": "cores",
                              "source": lscpu.source_key,
                              "where": f"Core(s) per socket: {cpu.cores_per_socket}, one of Socket(s): {cpu.sockets}"
                              if one else f"Socket(s): {cpu.sockets} x Core(s) per socket: {cpu.cores_per_socket}"}
            if one:
                entry["cores"]["note"] = ISOLATE_SOURCE
            parts.append(f"{cpu.sockets} socket(s) x {cpu.cores_per_socket} cores x {cpu.threads_per_core} "
                         f"threads/core = {cpu.cpus} CPUs")
        if ram is not None and meminfo is not None:
            entry["memory"] = {"value": ram // so.KIB, "unit": "KiB", "source": meminfo.source_key,
                               "where": f"MemTotal: {ram // so.KIB} kB"}
            short = memavailable_short(meminfo.text, ram)
            if short is not None:
                self.det.warnings.append(f"{entry['id']}: {short}")
        else:
            entry["memory"] = {"value": None, "note": "/proc/meminfo not read"}
        if dev is not None:
            _from_catalog(entry, dev, self.cat, cpu=True)
            sockets = cpu.sockets if cpu is not None else 1
            note = _all_sockets(entry, sockets, dev.id, self.numa) if sockets > 1 else None
            isolated = sockets_used(sockets, self.numa) == 1
            parts.append(f"bandwidth and FLOP/s from catalog {dev.id}"
                         + ("" if sockets < 2 else
                            f", cores, FLOP/s and TDP of one socket of {sockets} and memory bandwidth of one socket "
                            "(llama.cpp --numa isolate runs every thread on the node it started on); MemTotal the "
                            "machine's" if isolated else
                            f", FLOP/s per socket x {sockets} sockets: the machine is one device, as its cores and "
                            "MemTotal are (--count would make each socket a replica with all of the RAM); memory "
                            f"bandwidth {'of every socket' if self.numa == 'distribute' else 'of one socket'} "
                            f"(llama.cpp --numa {self.numa})"))
            if note is not None:
                self.det.warnings.append(f"{entry['id']}: memory bandwidth is {note}")
        else:
            _unknown(entry, f"CPU {model!r}", "fp32")
        entry["note"] = "; ".join(parts)
        self.add(entry, model, 1, ram, meminfo.source_key if meminfo and ram else "", dev)

    def apple(self, profiler: Output | None, sysctl: Output | None, displays: Output | None = None) -> None:
        sp = so.parse_system_profiler_hardware(profiler.text, profiler.what) if profiler else None
        sc = so.parse_sysctl(sysctl.text, sysctl.what) if sysctl else None
        gpu = so.parse_system_profiler_displays(displays.text, displays.what) if displays else None
        chip = (sp.chip if sp else "") or (sc.chip if sc else "") or (gpu.chipset if gpu else "")
        cores = gpu.cores if gpu is not None and gpu.chipset == chip else None
        # memory: sysctl hw.memsize (bytes) when printed, else system_profiler's 'Memory: 16 GB'
        mem_o, m = ((sysctl, sc) if sc is not None and sc.memory_bytes is not None else (profiler, sp))
        mem = m.memory_bytes if m is not None else None
        if not chip and mem is None:
            if gpu is not None and gpu.others and displays is not None:  # an Intel Mac's discrete card(s)
                self.det.skipped.append(f"{displays.what}: discrete GPU {', '.join(gpu.others)} in an Intel Mac: "
                                        "not modelled (llmsizer sizes Apple-silicon Macs, and AMD GPUs through "
                                        "rocm-smi on Linux)")
            else:
                self.det.skipped.append("Apple: neither the chip nor the memory size is in the outputs read")
            return
        dev = apple_configuration(self.cat, chip, mem, cores) if chip and mem and mem % so.GIB == 0 else None
        name = chip or (sc.model if sc else "") or "Apple"
        entry: dict[str, Any] = {"id": f"detected-{dev.id if dev else _slug(chip or 'apple')}",
                                 "name": f"{name} (detected)", "kind": "apple", "vendor": "Apple", "owned": True}
        if mem is not None and mem_o is not None and m is not None:
            entry["memory"] = {"value": mem, "unit": "B"} if m is sc else {"value": mem // so.GIB, "unit": "GB"}
            entry["memory"].update(source=mem_o.source_key, where=m.memory_text)
        else:
            entry["memory"] = {"value": None, "note": "no memory size in the outputs read"}
        gpu_note = (f"; {cores} GPU cores ('{gpu.cores_text}', {displays.source_key})"
                    if cores is not None and gpu is not None and displays is not None else "")
        cpu = sp.cpu_cores if sp is not None and sp.chip == chip else None
        if cores is None and dev is not None and cpu_decides_bin(self.cat, chip, dev, cpu):
            assert sp is not None and profiler is not None
            gpu_note += (f"; its GPU bin follows from {cpu} CPU cores ('{sp.cpu_cores_text}', {profiler.source_key}): "
                         "no other bin of the chip has that many")
        elif cores is None and dev is not None:  # the catalog's bin rule: the full bin, named with the others
            assumed = assumed_bin(self.cat, chip, dev)
            if assumed is not None:
                gpu_note += f"; {assumed}"
                self.det.warnings.append(f"detected-{dev.id}: {assumed}")
        if dev is not None:
            _from_catalog(entry, dev, self.cat)
            entry["note"] = f"bandwidth and FLOP/s from catalog {dev.id}" + gpu_note
        else:
            _unknown(entry, f"Apple chip {name!r}" + (f" with {mem // so.GIB} GiB" if mem else ""), "fp16")
            entry["form_factor"] = "laptop" if sp is not None and "Book" in sp.model else "desktop"
            entry["note"] = ("chip not named in the outputs" if not chip
                             else "" if mem else "memory size not in the outputs")
        # a known chip (and bin) whose memory size alone was not read: its catalog configurations, and what gives it
        known = apple_candidates(self.cat, chip, cores) if chip and mem is None else []
        if known:
            what = f"{chip}" + (f" with {cores} GPU cores" if cores is not None else "")
            decides = ("the memory alone decides: add the output of `sysctl hw.memsize` or `system_profiler "
                       "SPHardwareDataType`" if cores is not None else "its memory and GPU-core count decide: add "
                       "the outputs of `sysctl hw.memsize` and `system_profiler SPDisplaysDataType`")
            ask = (f"memory size not in the outputs: the {what} is in the catalog as "
                   + ", ".join(f"{d.id} ({format_bytes(d.memory_bytes or 0)})" for d in known)
                   + f"; {decides}, or name the configuration (e.g. --device {known[0].id})")
            entry["note"] = f"memory size not in the outputs; in the catalog as one of {len(known)} (see the warning)"
            self.det.warnings.append(f"{entry['id']}: {ask}")
        self.add(entry, name, 1, mem, mem_o.source_key if mem_o and mem else "", dev,
                 tuple(d.id for d in known))


# `hardware detect` writes MemTotal as the CPU's memory; a machine whose MemAvailable is far below it (huge pages
# reserved, other tenants, a page cache that will not drop) gives a process much less. Below this share of MemTotal
# the detection warns, naming both figures: a policy threshold, not a measurement (an idle server reads 0.9 and more).
MEMAVAILABLE_SHORT_SHARE = 0.5


def memavailable_short(meminfo: str, total: int) -> str | None:
    """The warning for a ``/proc/meminfo`` whose MemAvailable is under MEMAVAILABLE_SHORT_SHARE of MemTotal
    (``total``, bytes), naming both and the reserved huge pages where printed; None otherwise or without the line."""
    available = so.meminfo_field(meminfo, "MemAvailable")
    if available is None or total <= 0 or available >= MEMAVAILABLE_SHORT_SHARE * total:
        return None
    huge = so.meminfo_huge_pages(meminfo)
    if huge:
        why = f"{format_bytes(huge)} reserved as huge pages, HugePages_Total x Hugepagesize"
    elif huge == 0:
        why = "no huge pages reserved: other processes or tenants hold it"
    else:
        why = "huge pages, other processes or tenants; this copy has no HugePages_Total line"
    return (f"MemAvailable {format_bytes(available)} is {available / total:.0%} of MemTotal {format_bytes(total)}: "
            f"the memory written is MemTotal, but a process gets about MemAvailable ({why}); give --memory "
            "with what the workload may use")


def detect(outputs: list[Output], skipped: list[str] | None = None,
           catalog: HardwareCatalog | None = None, numa: str = "off") -> Detection:
    """The hardware file describing the machine whose ``outputs`` these are. ``numa``: how llama.cpp runs on a
    machine of several sockets (``NUMA_MODES``), which decides the CPU's memory bandwidth (``_all_sockets``)."""
    if numa not in NUMA_MODES:
        raise InputError(f"numa: {numa!r} is not one of {', '.join(NUMA_MODES)} (llama.cpp's --numa)")
    by = {o.name: o for o in outputs}
    one_machine(by)
    det = Detection(document={}, outputs=list(outputs), skipped=list(skipped or []))
    b = _Builder(catalog or builtin_catalog(), det, numa)
    if "nvidia-smi-query-gpu" in by:  # the CSV query is preferred over -q, which adds what the CSV lacks
        o = by["nvidia-smi-query-gpu"]
        gpus = so.parse_nvidia_smi_csv(o.text, o.what)
        if "nvidia-smi-q" in by:
            q = by["nvidia-smi-q"]
            gpus = _with_q(gpus, so.parse_nvidia_smi_q(q.text, q.what))
        b.gpus(o, gpus, "NVIDIA")
    elif "nvidia-smi-q" in by:
        o = by["nvidia-smi-q"]
        b.gpus(o, so.parse_nvidia_smi_q(o.text, o.what), "NVIDIA")
    if "rocm-smi-json" in by:
        o = by["rocm-smi-json"]
        b.gpus(o, so.parse_rocm_smi_json(o.text, o.what), "AMD")
    if "lscpu" in by or "proc-meminfo" in by:
        b.cpu(by.get("lscpu"), by.get("proc-meminfo"))
    if any(k in by for k in _MACOS):
        b.apple(by.get("system_profiler-SPHardwareDataType"), by.get("sysctl-macos"),
                by.get("system_profiler-SPDisplaysDataType"))
    devices = b.entries
    if not devices:
        raise InputError("hardware detect: nothing detected (no GPU, CPU or Apple output was read"
                         + (f"; skipped: {'; '.join(det.skipped)}" if det.skipped else "") + ")")
    sources = {o.source_key: {"title": f"`{o.command}` on the detected machine"
                              + ("" if o.origin == "this machine" else f", output read from {o.origin}"),
                              "command": o.command, "url": "",
                              "date": o.date, "date_kind": "detected"} for o in outputs}
    # every output read is a source (one_machine and the builders read each: a note may cite one no field does,
    # e.g. SPDisplaysDataType's GPU-core count; probe23 C2)
    det.document = {"note": "written by `llmsizer hardware detect`: the devices of one machine; detected values "
                            "cite the command they came from, catalog values keep their catalog source",
                    "sources": sources, "devices": devices}
    return det


def _with_q(csv_gpus: list[so.Gpu], q_gpus: list[so.Gpu]) -> list[so.Gpu]:
    """The CSV query's GPUs with what ``nvidia-smi -q`` prints of the same GPU (same bus id, else same index) and the
    CSV's field list left out: the driver's reserve, the MIG mode and the MIG devices."""
    out = []
    for g in csv_gpus:
        q = next((x for x in q_gpus if g.bus_id and x.bus_id == g.bus_id), None)
        if q is None and not g.bus_id:
            q = next((x for x in q_gpus if x.index == g.index), None)
        if q is None:
            out.append(g)
            continue
        out.append(dataclasses.replace(
            g, reserved_bytes=g.reserved_bytes if g.reserved_bytes is not None else q.reserved_bytes,
            reserved_text=g.reserved_text or q.reserved_text, mig_mode=g.mig_mode or q.mig_mode,
            mig=g.mig or q.mig))
    return out


def one_machine(by: dict[str, Output]) -> None:
    """Refuse outputs that describe different machines (saved files of two machines in one --from folder): two
    outputs naming different GPUs (nvidia-smi --query-gpu and -q), different Apple chips (sysctl's brand string,
    SPHardwareDataType's Chip, SPDisplaysDataType's Chipset Model) or different unified memory sizes. One line
    naming both files and what each says."""
    said: list[tuple[Output, str]] = []
    for name, parse in (("nvidia-smi-query-gpu", so.parse_nvidia_smi_csv), ("nvidia-smi-q", so.parse_nvidia_smi_q)):
        if name in by:
            said.append((by[name], ", ".join(sorted(g.name for g in parse(by[name].text, by[name].what)))))
    _same("GPUs", said)
    chips: list[tuple[Output, str]] = []
    memory: list[tuple[Output, str, int]] = []
    if "sysctl-macos" in by:
        sc = so.parse_sysctl(by["sysctl-macos"].text, by["sysctl-macos"].what)
        chips += [(by["sysctl-macos"], sc.chip)] if sc.chip else []
        memory += [(by["sysctl-macos"], sc.memory_text, sc.memory_bytes)] if sc.memory_bytes is not None else []
    if "system_profiler-SPHardwareDataType" in by:
        o = by["system_profiler-SPHardwareDataType"]
        sp = so.parse_system_profiler_hardware(o.text, o.what)
        chips += [(o, sp.chip)] if sp.chip else []
        memory += [(o, sp.memory_text, sp.memory_bytes)] if sp.memory_bytes is not None else []
    if "system_profiler-SPDisplaysDataType" in by:
        o = by["system_profiler-SPDisplaysDataType"]
        gpu = so.parse_system_profiler_displays(o.text, o.what)
        chips += [(o, gpu.chipset)] if gpu.chipset else []
    _same("Apple chips", chips)
    if len({m for _, _, m in memory}) > 1:
        _same("memory sizes", [(o, text) for o, text, _ in memory])


def _same(what: str, said: list[tuple[Output, str]]) -> None:
    """One line when two outputs say different things of one machine (``one_machine``)."""
    for (a, x), (b, y) in zip(said, said[1:], strict=False):
        if x != y:
            raise InputError(f"hardware detect: the outputs name different {what}: {a.origin} says {x!r}, "
                             f"{b.origin} says {y!r}; they are of different machines (--from reads one machine's "
                             "outputs: keep the files of one)")


def detect_machine(from_dir: str | Path | None = None, numa: str = "off") -> Detection:
    """Detect this machine (running the commands that exist) or the one whose outputs are saved in ``from_dir``;
    ``numa``: llama.cpp's NUMA mode there (``NUMA_MODES``)."""
    if from_dir is not None:
        return detect(read_outputs(from_dir), numa=numa)
    outputs, skipped = run_commands()
    return detect(outputs, skipped, numa=numa)


def detect_hardware(from_dir: str | Path | None = None, numa: str = "off") -> Detection:
    """This machine as a hardware file, read as ``llmsizer hardware detect`` reads it: the fixed commands that exist
    here (nvidia-smi, rocm-smi, lscpu, /proc/meminfo, sysctl and system_profiler on macOS; no shell, each with a
    timeout), or the outputs saved in ``from_dir`` (``hardware detect --from``). ``numa``: how llama.cpp runs on a
    machine of several sockets (off, distribute, isolate), which decides its CPU's memory bandwidth.

    Returns a ``Detection``: ``document`` the hardware-file entry (``{"devices": [...], "sources": {...}}``, what
    ``hardware detect -o FILE`` writes), ``devices`` what was found (id, kind, count, memory, catalog match),
    ``target`` the device questions about this machine are answered for, ``outputs`` / ``skipped`` what was read and
    what was not, ``warnings``; ``hardware_text()`` hands the entry to ``hardware_files=`` without writing a file.
    Nothing detected: InputError."""
    return detect_machine(from_dir, numa)


DETECTED_FILE = "detected.json"  # the name the detected hardware file goes by in messages and sources


def detected_target(hardware: str | Device | Instance | Detection, count: int | None,
                    hardware_files: Sequence[str | Path | HardwareText] = (),
                    ) -> tuple[str | Device | Instance, int | None, list[str | Path | HardwareText]]:
    """(hardware, count, hardware files) for a question about a machine: ``"detected"`` (any case) is this machine,
    detected now (``detect_hardware``), and a ``Detection`` the machine it describes: its ``target`` device's id,
    that device's count when ``count`` is None (more than one), and its hardware file appended as text (no file
    written). Anything else is returned as given."""
    if names_detected(hardware):
        hardware = detect_hardware()
    if isinstance(hardware, Detection):
        dev = hardware.target
        if count is None and dev.count > 1:
            count = dev.count
        return dev.id, count, [*hardware_files, hardware.hardware_text()]
    return hardware, count, list(hardware_files)


__all__ = ["COMMANDS", "NUMA_MODES", "DETECTED", "DetectedDevice", "Detection", "Output", "apple_configuration", "detect",
           "detect_hardware", "detect_machine", "detected_target", "numa_bandwidth_note", "read_outputs", "run_commands"]
