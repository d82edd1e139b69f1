"""Benchmark for issue 11: `recommend` with a 5,000-entry hardware file (``--hardware-file``) <= 1 s of CPU time
on the project's 2-core machine.

The file is generated from the built-in catalog, written as JSON to a temporary folder: 3,000 devices (each
catalog accelerator, CPU and Apple configuration repeated with scaled memory, bandwidth and peak FLOP/s, some
marked owned, some with an hourly price) and 2,000 cloud instances (the catalog instances repeated with other
prices and device counts). Every user device is a local candidate, so recommend evaluates all 5,000 entries.

Timed in-process, CPU time (``time.process_time``), median of ``--repeat`` runs, each from a cold state (the
catalog caches and the estimate caches cleared): reading + merging the file, then the search; ``--cli`` also
times the whole `llmsizer recommend ... --hardware-file` command in a subprocess (wall clock). Not a timed test.

    .venv/bin/python bench/bench_recommend_large.py [--entries 5000] [--repeat 3] [--unique-memory] [--cli] [--profile]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from llmsizer.catalog.hardware import Device, builtin_catalog, load_catalog  # noqa: E402
from llmsizer.catalog.models import find  # noqa: E402
from llmsizer.recommend import recommend_inference  # noqa: E402

TARGET_S = 1.0
MODEL, CONTEXT, CONCURRENCY = "llama-3.1-8b", 8192, 8
SCALES = (0.5, 0.75, 1.0, 1.25, 1.5, 2.0)


def _num(v: Any) -> float | None:
    return float(v.base) if v is not None and v.base is not None and not isinstance(v.base, (bool, list)) else None


def _device_entry(d: Device, k: int, unique: bool = False) -> dict[str, Any]:
    s = SCALES[k % len(SCALES)]
    e: dict[str, Any] = {"id": f"{d.id}-var{k}", "name": f"{d.name} variant {k}", "kind": d.kind,
                         "form_factor": d.form_factor if d.form_factor != "datacenter" else "server",
                         "vendor": d.vendor}
    mem = d.memory_bytes
    if mem is not None:
        e["memory"] = f"{mem * s / 2**30 + (k / 1024 if unique else 0):.6f}GiB"
    bw = d.bandwidth
    if bw is not None:
        e["memory_bandwidth"] = f"{bw * (0.8 + 0.1 * (k % 5)) / 1e9:.1f} GB/s"
    flops = {key: f"{n * s / 1e12:.3f} TFLOP/s" for key, v in d.flops.items()
             if (n := _num(v)) and v.unit != "flag"}
    if flops:
        e["flops"] = flops
    if d.tdp is not None and _num(d.tdp):
        e["tdp"] = f"{_num(d.tdp):g} W"
    if d.cores is not None and _num(d.cores):
        e["cores"] = int(_num(d.cores) or 1)
    if k % 3 == 0:
        e["owned"] = True
    if k % 2 == 0:
        e["price"] = round(0.1 + 0.37 * (k % 11), 2)
    return e


def hardware_file(entries: int, unique: bool = False) -> dict[str, Any]:
    """``entries`` hardware entries: 60% device variants, 40% instance variants of the built-in catalog.
    ``unique``: every device variant gets its own memory size (k MiB more), so no two share a memory estimate."""
    cat = builtin_catalog()
    devices = [d for d in cat.devices.values() if d.memory_bytes is not None]
    instances = list(cat.instances.values())
    n_dev = entries * 3 // 5
    out_dev = [_device_entry(devices[i % len(devices)], i, unique) for i in range(n_dev)]
    out_inst = []
    for i in range(entries - n_dev):
        inst = instances[i % len(instances)]
        e: dict[str, Any] = {"id": f"{inst.id}-var{i}", "name": f"{inst.name} variant {i}",
                             "provider": inst.provider, "device": inst.device.id,
                             "device_count": inst.device_count}
        if inst.price_per_hour is not None:
            e["price"] = round(inst.price_per_hour * (0.6 + 0.1 * (i % 9)), 4)
        if inst.vcpus is not None:
            e["vcpus"] = int(inst.vcpus.base)
        if inst.threads_per_core is not None:
            e["threads_per_core"] = int(inst.threads_per_core.base)
        if inst.memory is not None:
            e["memory"] = f"{float(inst.memory.base) / 2**30:.3f}GiB"
        if inst.interconnect:
            e["interconnect"] = inst.interconnect
        out_inst.append(e)
    return {"devices": out_dev, "instances": out_inst}


def clear_caches() -> None:
    """Forget what earlier runs computed (every memo of the core, estimate/caches.py); keep the loaded catalogs."""
    from llmsizer.estimate.caches import clear_caches as clear

    clear()


def run_once(path: Path) -> tuple[float, float, Any]:
    """(CPU seconds to read the file, CPU seconds read + recommend, the recommendation)."""
    clear_caches()
    spec = find(MODEL).spec()
    t0 = time.process_time()
    load_catalog([path])
    t1 = time.process_time()
    rec = recommend_inference(spec, context=CONTEXT, concurrency=CONCURRENCY, hardware_files=[path])
    t2 = time.process_time()
    return t1 - t0, t2 - t0, rec


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--entries", type=int, default=5000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--cli", action="store_true", help="also time the CLI command (subprocess, wall clock)")
    ap.add_argument("--profile", action="store_true", help="profile one run (cProfile, top 30)")
    ap.add_argument("--keep", help="write the hardware file here instead of a temporary folder")
    ap.add_argument("--unique-memory", action="store_true",
                    help="every device variant with its own memory size (the default file repeats 91 sizes)")
    a = ap.parse_args()
    path = Path(a.keep) if a.keep else Path(tempfile.mkdtemp(prefix="llmsizer-bench-hw-")) / "hardware.json"
    data = hardware_file(a.entries, a.unique_memory)
    path.write_text(json.dumps(data, indent=1), "utf-8")
    sizes = len({d.get("memory") for d in data["devices"]})
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(f"machine: {platform.machine()}, {os.cpu_count()} logical CPUs, Python {platform.python_version()}, "
          f"load average {load:.2f}")
    run_once(path)  # imports and the built-in catalog, once per process as the CLI does
    if a.profile:
        import cProfile
        import pstats
        clear_caches()
        spec = find(MODEL).spec()
        prof = cProfile.Profile()
        prof.enable()
        recommend_inference(spec, context=CONTEXT, concurrency=CONCURRENCY, hardware_files=[path])
        prof.disable()
        pstats.Stats(prof).sort_stats("cumulative").print_stats(35)
        pstats.Stats(prof).sort_stats("tottime").print_stats(20)
        return
    runs = [run_once(path) for _ in range(a.repeat)]
    rec = runs[-1][2]
    read = statistics.median(r[0] for r in runs)
    total = statistics.median(r[1] for r in runs)
    fastest = min(r[1] for r in runs)
    n = len(rec.options) + len(rec.rejected)
    print(f"recommend {MODEL}, {CONTEXT} x {CONCURRENCY}, {a.entries}-entry hardware file ({sizes} distinct "
          f"device memory sizes): {n} options evaluated, "
          f"{total:.2f} s CPU median of {a.repeat}, fastest {fastest:.2f} s (reading the file {read:.2f} s) "
          f"(target <= {TARGET_S:g} s): "
          f"{'OK' if total <= TARGET_S else 'OVER'}")
    if a.cli:
        walls = []
        for _ in range(a.repeat):
            t = time.perf_counter()
            subprocess.run([sys.executable, "-m", "llmsizer.cli.main", "recommend", MODEL, "--context", str(CONTEXT),
                            "--concurrency", str(CONCURRENCY), "--hardware-file", str(path), "--json"],
                           check=True, capture_output=True, env={**os.environ, "PYTHONPATH": str(ROOT / "src")})
            walls.append(time.perf_counter() - t)
        print(f"CLI `llmsizer recommend {MODEL} --hardware-file <{a.entries} entries> --json`: "
              f"{statistics.median(walls):.2f} s wall median of {a.repeat}")


if __name__ == "__main__":
    main()
