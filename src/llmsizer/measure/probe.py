"""Readings of the machine outside torch's allocator: process RSS, device memory via NVML, versions.

- RSS: ``VmRSS`` / ``VmHWM`` of ``/proc/self/status`` (Linux), else ``resource.getrusage().ru_maxrss``.
- Device memory: NVML through ``pynvml`` (package ``nvidia-ml-py``) when importable, else one
  ``nvidia-smi --query-gpu=memory.used`` call. The process's own figure (``nvmlDeviceGetComputeRunningProcesses``)
  is preferred; in a container whose PID namespace hides it, the device's used memory minus the reading taken
  before this process created its CUDA context is used instead (``method`` says which).
"""

from __future__ import annotations

import os
import platform
import resource
import shutil
import subprocess
import sys
from datetime import datetime, timezone
from typing import Any

MALLOC_ENV = {"MALLOC_MMAP_THRESHOLD_": "65536", "MALLOC_TRIM_THRESHOLD_": "0"}
"""glibc settings for CPU measurements: blocks above 64 KiB are mmap'd and returned on free, so RSS follows the
live tensors instead of keeping freed heap pages (glibc mallopt(3): M_MMAP_THRESHOLD, M_TRIM_THRESHOLD)."""


def _status_field(name: str) -> int | None:
    try:
        with open("/proc/self/status", encoding="ascii") as f:
            for line in f:
                if line.startswith(name + ":"):
                    return int(line.split()[1]) * 1024
    except OSError:
        return None
    return None


def rss_bytes() -> int | None:
    """Resident set size of this process now [bytes] (Linux only; None elsewhere)."""
    return _status_field("VmRSS")


def data_bytes() -> int | None:
    """Size of this process's data segment now [bytes] (``VmData``: what RLIMIT_DATA limits)."""
    return _status_field("VmData")


def peak_rss_bytes() -> int:
    """Peak resident set size of this process so far [bytes] (``VmHWM``; ru_maxrss where /proc is missing)."""
    hwm = _status_field("VmHWM")
    if hwm is not None:
        return hwm
    scale = 1 if sys.platform == "darwin" else 1024  # macOS reports bytes, Linux kibibytes
    return int(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss) * scale


def cpu_name() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def now_iso() -> str:
    return datetime.now(timezone.utc).replace(microsecond=0).isoformat().replace("+00:00", "Z")


# -- NVML -------------------------------------------------------------------------------------------------------

class DeviceMemory:
    """Used memory of one CUDA device through NVML (pynvml) or nvidia-smi; every method returns None when neither
    is available."""

    def __init__(self, index: int = 0) -> None:
        self.index = index
        self.backend = "none"
        self._handle: Any = None
        self._nvml: Any = None
        try:
            import pynvml  # type: ignore[import-not-found]

            pynvml.nvmlInit()
            self._handle = pynvml.nvmlDeviceGetHandleByIndex(index)
            self._nvml = pynvml
            self.backend = "nvml"
        except Exception:  # noqa: BLE001 - no NVML binding or no driver: try nvidia-smi
            if shutil.which("nvidia-smi"):
                self.backend = "nvidia-smi"

    def used(self) -> int | None:
        """Bytes in use on the whole device (all processes, CUDA contexts included)."""
        if self.backend == "nvml":
            return int(self._nvml.nvmlDeviceGetMemoryInfo(self._handle).used)
        if self.backend == "nvidia-smi":
            out = _smi(["--query-gpu=memory.used", "--format=csv,noheader,nounits", f"--id={self.index}"])
            return int(float(out.splitlines()[0])) * 2**20 if out else None
        return None

    def process_used(self, pid: int | None = None) -> int | None:
        """Bytes NVML attributes to ``pid`` (this process by default); None when the process is not visible."""
        pid = os.getpid() if pid is None else pid
        if self.backend == "nvml":
            try:
                procs = self._nvml.nvmlDeviceGetComputeRunningProcesses(self._handle)
            except Exception:  # noqa: BLE001
                return None
            for p in procs:
                if int(p.pid) == pid and p.usedGpuMemory is not None:
                    return int(p.usedGpuMemory)
            return None
        if self.backend == "nvidia-smi":
            out = _smi(["--query-compute-apps=pid,used_memory", "--format=csv,noheader,nounits"])
            for line in (out or "").splitlines():
                parts = [x.strip() for x in line.split(",")]
                if len(parts) == 2 and parts[0].isdigit() and int(parts[0]) == pid:
                    return int(float(parts[1])) * 2**20
        return None

    def info(self) -> dict[str, Any]:
        d: dict[str, Any] = {"memory_reading": self.backend}
        if self.backend == "nvml":
            try:
                d["driver"] = _text(self._nvml.nvmlSystemGetDriverVersion())
                d["nvml_total_bytes"] = int(self._nvml.nvmlDeviceGetMemoryInfo(self._handle).total)
            except Exception:  # noqa: BLE001
                pass
        elif self.backend == "nvidia-smi":
            out = _smi(["--query-gpu=driver_version", "--format=csv,noheader", f"--id={self.index}"])
            if out:
                d["driver"] = out.splitlines()[0].strip()
        return d


def _text(v: Any) -> str:
    return v.decode() if isinstance(v, bytes) else str(v)


def _smi(args: list[str]) -> str | None:
    try:
        r = subprocess.run(["nvidia-smi", *args], capture_output=True, text=True, timeout=20, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return r.stdout if r.returncode == 0 else None


# -- versions ---------------------------------------------------------------------------------------------------

def versions(modules: tuple[str, ...] = ("torch", "transformers", "peft", "bitsandbytes", "accelerate")) -> dict[str, Any]:
    """Versions of Python, llmsizer and the given modules *already imported* (nothing is imported here)."""
    from .._version import __version__

    out: dict[str, Any] = {"python": platform.python_version(), "llmsizer": __version__}
    for m in modules:
        mod = sys.modules.get(m)
        if mod is not None:
            out[m] = getattr(mod, "__version__", "?")
    torch = sys.modules.get("torch")
    if torch is not None:
        out["cuda"] = getattr(torch.version, "cuda", None)
    commit = _git_commit()
    if commit:
        out["llmsizer_commit"] = commit
    return out


def _git_commit() -> str | None:
    here = os.path.dirname(os.path.abspath(__file__))
    root = os.path.abspath(os.path.join(here, "..", "..", ".."))
    # a git worktree has a .git file (gitdir: ...), a clone a .git folder
    if not os.path.exists(os.path.join(root, ".git")) or not shutil.which("git"):
        return None
    try:
        r = subprocess.run(["git", "-C", root, "rev-parse", "--short=12", "HEAD"], capture_output=True, text=True,
                           timeout=5, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return r.stdout.strip() or None
