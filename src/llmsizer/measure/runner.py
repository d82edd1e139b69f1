"""Run one measurement in a child process and turn what it reports into a record.

The record is the unit the results store and ``llmsizer validate`` work with: the full settings (defaults
filled in and listed), the model's config, the device, the versions, the date, the raw readings, and the
comparison with the estimate of the same settings made by this llmsizer (see :mod:`llmsizer.measure.compare`).
A run that does not fit, crashes or times out still becomes a record (``status`` oom / error / timeout), with
the estimate beside it: "OOM at step 1 (prefill) - estimate said 17.2 GiB".
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from typing import Any, TextIO

from ..units import format_bytes
from . import probe
from .build import ModelRef, resolve_model_ref
from .settings import MeasureSettings

RECORD_SCHEMA = 1
DEFAULT_TIMEOUT = 1800.0


class ProgressBar:
    """A one-line progress bar on a terminal (``[#####-----] 5/10 decode``); silent when not a TTY."""

    def __init__(self, stream: TextIO | None = None, width: int = 30) -> None:
        self.stream = stream if stream is not None else sys.stderr
        self.width = width
        self.active = False
        self.enabled = bool(getattr(self.stream, "isatty", lambda: False)())
        self.started = time.monotonic()

    def update(self, done: int, total: int, what: str) -> None:
        if not self.enabled or total <= 0:
            return
        filled = int(self.width * min(done, total) / total)
        secs = time.monotonic() - self.started
        self.stream.write(f"\r[{'#' * filled}{'-' * (self.width - filled)}] {done}/{total} {what[:24]:24s} {secs:5.0f}s")
        self.stream.flush()
        self.active = True

    def close(self) -> None:
        if self.active:
            self.stream.write("\n")
            self.stream.flush()
            self.active = False


def worker_env(rss_malloc: bool = True) -> dict[str, str]:
    """The worker's environment: offline Hub, this llmsizer on the path, and (for CPU runs) glibc settings that
    make RSS follow the live tensors (they slow small allocations, so CUDA runs go without)."""
    env = dict(os.environ)
    if rss_malloc:
        env.update(probe.MALLOC_ENV)
    src = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    env["PYTHONPATH"] = src + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    env.setdefault("TOKENIZERS_PARALLELISM", "false")
    env.setdefault("TRANSFORMERS_VERBOSITY", "error")
    env["HF_HUB_OFFLINE"] = "1"  # never download anything
    return env


def run_worker(job: dict[str, Any], *, timeout: float = DEFAULT_TIMEOUT, python: str | None = None,
               on_progress: Callable[[int, int, str], None] | None = None) -> dict[str, Any]:
    """Start the worker on ``job``; return its result dict (a failure of the process becomes one too)."""
    cmd = [python or sys.executable, "-m", "llmsizer.measure.worker"]
    rss_malloc = job["settings"].get("device") != "cuda"
    proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            env=worker_env(rss_malloc), text=True)
    err_tail: list[str] = []

    def read_stderr() -> None:
        assert proc.stderr is not None
        for line in proc.stderr:
            if line.startswith("@@progress "):
                parts = line.split(maxsplit=3)
                if on_progress and len(parts) >= 3:
                    on_progress(int(parts[1]), int(parts[2]), parts[3].strip() if len(parts) > 3 else "")
            else:
                err_tail.append(line)
                del err_tail[:-40]

    out_chunks: list[str] = []

    def read_stdout() -> None:
        assert proc.stdout is not None
        out_chunks.append(proc.stdout.read())

    readers = [threading.Thread(target=read_stderr, daemon=True), threading.Thread(target=read_stdout, daemon=True)]
    for r in readers:
        r.start()
    assert proc.stdin is not None
    try:
        proc.stdin.write(json.dumps(job))
        proc.stdin.close()
    except BrokenPipeError:
        pass
    try:
        proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
        for r in readers:
            r.join(5)
        return {"status": "timeout", "error": f"no result after {timeout:.0f} s; the worker was killed",
                "stderr_tail": "".join(err_tail)[-2000:]}
    for r in readers:
        r.join(10)
    stdout = "".join(out_chunks)
    for line in reversed(stdout.splitlines()):
        if line.startswith("@@result "):
            return dict(json.loads(line[len("@@result "):]))
    if proc.returncode is not None and proc.returncode < 0:
        sig = -proc.returncode
        capped = job.get("settings", {}).get("memory_cap") is not None
        # SIGKILL: the kernel's OOM killer. SIGABRT under a RLIMIT_DATA cap: native code whose allocation failed
        # aborts (an uncaught std::bad_alloc calls std::terminate; a thread pool that cannot map a stack aborts).
        # SIGSEGV under the cap: native code that uses a failed allocation's NULL (malloc's failure under
        # RLIMIT_DATA, setrlimit(2)) instead of checking it -- seen in this project's CI on the 40 MiB real-cap test
        oom = sig == 9 or (sig in (6, 11) and capped)
        status = "oom" if oom else "error"
        name = {6: "SIGABRT", 11: "SIGSEGV"}.get(sig, f"signal {sig}")
        why = (" (SIGKILL: most likely the kernel's out-of-memory killer)" if sig == 9 else
               f" ({name} under the memory cap: an allocation in native code failed)" if oom else "")
        return {"status": status, "oom_at": "unknown step" if oom else None,
                "error": f"the worker was killed by signal {sig}{why}", "stderr_tail": "".join(err_tail)[-2000:]}
    return {"status": "error", "error": f"the worker exited with code {proc.returncode} and no result",
            "stderr_tail": "".join(err_tail)[-2000:]}


def measure(settings: MeasureSettings, *, timeout: float = DEFAULT_TIMEOUT, progress: bool = True,
            python: str | None = None, ref: ModelRef | None = None) -> dict[str, Any]:
    """Measure ``settings`` in a child process; return the record (see module docstring)."""
    from .compare import compare_record

    if settings.device != "auto":
        settings.resolved(settings.device)  # refuse impossible combinations before starting a process
    ref = ref or resolve_model_ref(settings.model, random_weights=settings.random_weights)
    job = {"settings": settings.to_dict(),
           "model": {"name": ref.name, "source": ref.source, "config": ref.config, "checkpoint": ref.checkpoint}}
    bar = ProgressBar() if progress else None
    try:
        res = run_worker(job, timeout=timeout, python=python, on_progress=bar.update if bar else None)
    finally:
        if bar:
            bar.close()
    record: dict[str, Any] = {
        "schema": RECORD_SCHEMA, "date": probe.now_iso(), "kind": settings.kind,
        "status": res.get("status", "error"),
        "model": {"name": ref.name, "source": ref.source, "checkpoint": ref.checkpoint, "config": ref.config},
        "settings": res.get("settings") or settings.to_dict(),
        "defaults": res.get("defaults", []),
        "device": res.get("device", {}), "versions": res.get("versions") or probe.versions(()),
        "measured": res.get("measured", {}), "timing": res.get("timing", {}),
        "warnings": res.get("warnings", []),
    }
    for key in ("error", "oom_at", "traceback", "stderr_tail"):
        if res.get(key):
            record[key] = res[key]
    record.update(compare_record(record))
    return record


def oom_message(record: dict[str, Any]) -> str:
    """'OOM at step 1 (prefill) - estimate said 17.2 GiB (range ...)' for a record with status oom."""
    where = record.get("oom_at") or "an unknown step"
    est = record.get("estimate_total")
    said = (f"estimate said {format_bytes(est['bytes'])} (range {format_bytes(est['low'])}-"
            f"{format_bytes(est['high'])}, {est['location']})" if est else "no estimate available")
    cap = record.get("settings", {}).get("memory_cap")
    budget = f"; the cap was {format_bytes(cap)}" if cap else ""
    dev = record.get("device", {}).get("total_memory_bytes")
    if not cap and dev:
        budget = f"; the device has {format_bytes(dev)}"
    return f"OOM at {where} \u2014 {said}{budget}"
