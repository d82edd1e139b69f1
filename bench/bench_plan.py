"""Benchmark for issue 11: `plan` of a request with 100 jobs <= 2 s and with 500 jobs <= 8 s (CPU time on the
project's 2-core machine).

The requests are generated from the jobs of ``examples/*.yaml``: each example job is repeated with a numbered
name and varied settings (concurrency, context, LoRA rank, dataset tokens, device count), a service trained in the
request points at its own copy of the training job, every fourth service names no resources (so the plan asks
`recommend` for them) and a few jobs share one pool (the shared-resources check). Training and inference jobs are
mixed in the examples' proportions. Not a timed test: run it and read the numbers.

The plan is made in-process (``make_plan`` on the parsed request, as ``llmsizer plan`` does after reading the
file) and the time is CPU time (``time.process_time``), median of ``--repeat`` runs; each run starts from a cold
process-wide state (the estimate caches cleared; the hardware catalog is loaded once per process, as the CLI does).

    .venv/bin/python bench/bench_plan.py [--jobs 100 500] [--repeat 3] [--write-dir DIR] [--profile N]
"""

from __future__ import annotations

import argparse
import copy
import datetime as _dt
import os
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from llmsizer.plan import make_plan  # noqa: E402
from llmsizer.request.reader import load_request  # noqa: E402

TARGETS = {100: 2.0, 500: 8.0}  # seconds of CPU time
TODAY = _dt.date(2025, 8, 1)


def example_jobs() -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Every job of examples/*.yaml (as plain data) and the top-level fields of the LoRA example."""
    jobs: list[dict[str, Any]] = []
    top: dict[str, Any] = {}
    for path in sorted((ROOT / "examples").glob("*.yaml")):
        data = yaml.safe_load(path.read_text("utf-8"))
        jobs.extend(data["jobs"])
        if path.name == "lora-finetune-and-chat.yaml":
            top = {k: v for k, v in data.items() if k != "jobs"}
    return jobs, top


def _vary(job: dict[str, Any], i: int, names: dict[str, str]) -> dict[str, Any]:
    j = copy.deepcopy(job)
    j["name"] = f"{job['name']}-{i}"
    if j["kind"] == "inference":
        t = j["traffic"]
        t["concurrency"] = {"typical": t["concurrency"]["typical"] + i % 3,
                            "peak": t["concurrency"]["peak"] * (1 + i % 4)}
        t["context"] = {"typical": t["context"]["typical"], "peak": ["4k", "8k", "16k"][i % 3]}
        src = j["model"].get("from_job")
        if src is not None:
            j["model"]["from_job"] = names[src]
        if i % 4 == 3:  # no resources named: the plan recommends hardware for it
            keep = {k: v for k, v in j["resources"].items() if k in ("storage", "pool")}
            j["resources"] = keep
    else:
        if "peft" in j:
            j["peft"]["rank"] = [8, 16, 32, 64][i % 4]
        if j["model"]["name"] == "llama-3.1-8b" and j.get("method") == "full":
            j["resources"]["nodes"] = [4, 8, 16][i % 3]
        else:
            j["dataset"]["tokens"] = f"{120 + 40 * (i % 5)}M tokens"
    if i % 10 == 0:
        j["resources"]["pool"] = "shared-pool"
    return j


def make_request(n_jobs: int) -> dict[str, Any]:
    """A request of ``n_jobs`` jobs built from the example jobs (training jobs first in each round, so a service
    always follows the training job it serves)."""
    base, top = example_jobs()
    jobs: list[dict[str, Any]] = []
    i = 0
    while len(jobs) < n_jobs:
        names: dict[str, str] = {}
        for job in base:
            if len(jobs) == n_jobs:
                break
            j = _vary(job, i, names)
            if j["kind"] == "training":
                names[job["name"]] = j["name"]
            elif j["model"].get("from_job") is not None and j["model"]["from_job"] not in names.values():
                continue  # its training job did not fit in the request
            jobs.append(j)
        i += 1
    req = dict(top)
    req["title"] = f"Generated request, {n_jobs} jobs"
    req["jobs"] = jobs
    return req


def write_request(n_jobs: int, folder: Path) -> Path:
    path = folder / f"request-{n_jobs}-jobs.yaml"
    path.write_text(yaml.safe_dump(make_request(n_jobs), sort_keys=False, width=1000), "utf-8")
    return path


def clear_caches() -> None:
    """Forget what earlier runs computed (every memo of the core, estimate/caches.py); keep the loaded catalogs."""
    from llmsizer.estimate.caches import clear_caches as clear

    clear()


def plan_once(path: Path) -> tuple[float, float, Any]:
    """(CPU seconds to read, CPU seconds to read + plan, the plan)."""
    clear_caches()
    t0 = time.process_time()
    req = load_request(path)
    t1 = time.process_time()
    plan = make_plan(req, today=TODAY)
    t2 = time.process_time()
    return t1 - t0, t2 - t0, plan


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--jobs", type=int, nargs="+", default=[100, 500])
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--write-dir", help="keep the generated requests in this folder")
    ap.add_argument("--profile", type=int, metavar="N", help="profile one plan of N jobs (cProfile, top 30)")
    a = ap.parse_args()
    folder = Path(a.write_dir) if a.write_dir else Path(tempfile.mkdtemp(prefix="llmsizer-bench-plan-"))
    folder.mkdir(parents=True, exist_ok=True)
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(f"machine: {platform.machine()}, {os.cpu_count()} logical CPUs, Python {platform.python_version()}, "
          f"load average {load:.2f}")
    plan_once(write_request(4, folder))  # import everything and load the catalogs once, as a warm process would
    if a.profile:
        import cProfile
        import pstats
        path = write_request(a.profile, folder)
        clear_caches()
        prof = cProfile.Profile()
        prof.enable()
        make_plan(load_request(path), today=TODAY)
        prof.disable()
        pstats.Stats(prof).sort_stats("cumulative").print_stats(40)
        pstats.Stats(prof).sort_stats("tottime").print_stats(25)
        return
    for n in a.jobs:
        path = write_request(n, folder)
        runs = [plan_once(path) for _ in range(a.repeat)]
        plan = runs[-1][2]
        kinds = [j.kind for j in plan.jobs]
        read = statistics.median(r[0] for r in runs)
        total = statistics.median(r[1] for r in runs)
        fastest = min(r[1] for r in runs)
        target = TARGETS.get(n)
        verdict = "" if target is None else f" (target <= {target:g} s): {'OK' if total <= target else 'OVER'}"
        print(f"plan of {n} jobs ({kinds.count('training')} training, {kinds.count('inference')} inference, "
              f"{len(plan.checks)} checks): {total:.2f} s CPU median of {a.repeat}, fastest {fastest:.2f} s "
              f"(read {read:.2f} s), "
              f"{total / n * 1e3:.1f} ms per job{verdict}")


if __name__ == "__main__":
    main()
