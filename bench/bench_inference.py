"""Speed benchmark for the issue targets: one inference estimate in-process (<= 1 ms median), the CLI's cold
start for `llmsizer infer ... --json` (<= 300 ms), one training estimate in-process (when ``llmsizer.estimate.training``
exists) and `recommend` over the whole hardware catalog (<= 200 ms, when ``llmsizer.recommend`` exists).
Not a timed test: run it and read the numbers; ``--markdown bench/RESULTS.md`` writes them with the machine.

    .venv/bin/python bench/bench_inference.py [--repeat 200] [--cli-repeat 15] [--markdown bench/RESULTS.md]
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from llmsizer import estimate_inference  # noqa: E402
from llmsizer.catalog.models import find  # noqa: E402
from llmsizer.estimate.caches import clear_caches  # noqa: E402

CASES = [
    ("llama-3.1-8b", dict(context=8192, concurrency=4)),
    ("qwen3-30b-a3b", dict(context=32768, concurrency=8, engine="vllm", memory=80 * 2**30)),
    ("deepseek-v3", dict(context=8192, weights="q4_k_m", engine="llamacpp")),
]


def in_process(repeat: int, cold: bool = True) -> dict[str, float]:
    """Median ms per estimate. cold: every memo of the core is cleared before each one (estimate.caches: a model
    seen for the first time); warm: only the finished estimates are (the same model asked again with other
    settings: its tensor inventory and weight bytes are kept)."""
    out = {}
    for name, kw in CASES:
        spec = find(name).spec()
        estimate_inference(spec, **kw)
        times = []
        for _ in range(repeat):
            clear_caches(estimates_only=not cold)  # cold: every memo; warm: the model's inventory kept
            t = time.perf_counter()
            estimate_inference(spec, **kw)
            times.append(time.perf_counter() - t)
        out[name] = statistics.median(times) * 1e3
    return out


def training_in_process(repeat: int) -> dict[str, float]:
    """Median ms of one training estimate, cold (every memo cleared) and warm (finished estimates cleared)."""
    from llmsizer.estimate.training import estimate_training

    out = {}
    for name, kw in (("llama-3.1-8b", dict(method="qlora", micro_batch=2, seq_len=2048)),
                     ("qwen2.5-7b", dict(method="full", micro_batch=1, seq_len=4096, grad_checkpointing="full"))):
        spec = find(name).spec()
        for cold in (True, False):
            estimate_training(spec, **kw)
            times = []
            for _ in range(repeat):
                clear_caches(estimates_only=not cold)
                t = time.perf_counter()
                estimate_training(spec, **kw)
                times.append(time.perf_counter() - t)
            out[f"{name} {kw['method']}, {'cold' if cold else 'warm'}"] = statistics.median(times) * 1e3
    return out


def recommend_whole_catalog(repeat: int) -> dict[str, float]:
    """Median ms of `recommend` over every device and instance of the catalog, cold caches (the catalog itself is
    loaded once per process, as the CLI does); only when llmsizer.recommend exists."""
    if importlib.util.find_spec("llmsizer.recommend") is None:
        return {}
    from llmsizer.catalog.hardware import builtin_catalog
    from llmsizer.recommend import recommend_inference

    builtin_catalog()
    out = {}
    for name, kw in (("llama-3.1-8b, 8k x 8", dict(context=8192, concurrency=8)),
                     ("qwen3-30b-a3b, 4k x 4", dict(context=4096, concurrency=4))):
        spec = find(name.split(",")[0]).spec()
        times = []
        for _ in range(repeat):
            clear_caches()
            t = time.perf_counter()
            recommend_inference(spec, **kw)
            times.append(time.perf_counter() - t)
        out[name] = statistics.median(times) * 1e3
    return out


def cli_cold_start(repeat: int) -> float:
    exe = ROOT / ".venv" / "bin" / "llmsizer"
    cmd = [str(exe)] if exe.exists() else [sys.executable, "-m", "llmsizer.cli.main"]
    env = dict(os.environ, PYTHONPATH=str(ROOT / "src"))
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        subprocess.run(cmd + ["infer", "llama-3.1-8b", "--context", "8192", "--json"], check=True,
                       capture_output=True, env=env)
        times.append(time.perf_counter() - t)
    return statistics.median(times) * 1e3


def machine() -> str:
    from llmsizer.measure.probe import cpu_name

    load = ""
    if hasattr(os, "getloadavg"):
        load = f", load average {os.getloadavg()[0]:.2f} when measured (other work on the machine adds noise)"
    return (f"{cpu_name()}, {os.cpu_count()} logical CPUs, {platform.machine()}, {platform.system()}, "
            f"Python {platform.python_version()}{load}")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=200)
    ap.add_argument("--cli-repeat", type=int, default=15)
    ap.add_argument("--recommend-repeat", type=int, default=10)
    ap.add_argument("--markdown", help="write the results as Markdown (bench/RESULTS.md)")
    a = ap.parse_args()
    lines = [f"machine: {machine()}"]
    est = in_process(a.repeat)
    warm = in_process(a.repeat, cold=False)
    for name, ms in est.items():
        lines.append(f"in-process inference estimate, cold caches, {name:15s}: {ms:.3f} ms median (target <= 1 ms)")
    for name, ms in warm.items():
        lines.append(f"in-process inference estimate, warm caches, {name:15s}: {ms:.3f} ms median (target <= 1 ms)")
    for name, ms in training_in_process(max(a.repeat // 4, 10)).items():
        lines.append(f"in-process training estimate, {name:26s}: {ms:.3f} ms median (target <= "
                     f"{'2' if 'cold' in name else '1'} ms)")
    cli = cli_cold_start(a.cli_repeat)
    lines.append(f"CLI cold start `llmsizer infer llama-3.1-8b --json`: {cli:.0f} ms median (target <= 300 ms)")
    rec = recommend_whole_catalog(a.recommend_repeat)
    for name, ms in rec.items():
        lines.append(f"recommend over the whole catalog, cold caches, {name}: {ms:.1f} ms median (target <= 200 ms)")
    print("\n".join(lines))
    if a.markdown:
        ok = (max(est.values()) <= 1.0, cli <= 300, (max(rec.values()) <= 200) if rec else None,
              max(warm.values()) <= 1.0)
        verdict = {True: "met", False: "NOT met", None: "not measured (no recommend module)"}
        md = ["# Speed results", "",
              "Generated by `.venv/bin/python bench/bench_inference.py --markdown bench/RESULTS.md` (medians; "
              "cold caches = the tensor inventory and weight-byte caches cleared before each estimate).", "",
              f"Machine: {machine()}.", "",
              "| target | measured | status |", "|---|---|---|",
              f"| in-process estimate <= 1 ms median, cold caches (a model seen the first time) | "
              f"{', '.join(f'{k} {v:.3f} ms' for k, v in est.items())} | {verdict[ok[0]]} |",
              f"| in-process estimate <= 1 ms median, warm caches (the same model, other settings) | "
              f"{', '.join(f'{k} {v:.3f} ms' for k, v in warm.items())} | {verdict[ok[3]]} |",
              f"| CLI cold start <= 300 ms | `llmsizer infer llama-3.1-8b --json`: {cli:.0f} ms | {verdict[ok[1]]} |",
              f"| `recommend` over the whole catalog <= 200 ms | "
              f"{', '.join(f'{k}: {v:.1f} ms' for k, v in rec.items()) or '-'} | {verdict[ok[2]]} |", "",
              "All lines:", "", "```", *lines, "```", "",
              "The side-by-side comparison with accelerate, hf-mem and llm-analysis (answers, errors, time per "
              "answer, cold starts) is in `bench/compare_tools.md`.", ""]
        Path(a.markdown).write_text("\n".join(md), encoding="utf-8")


if __name__ == "__main__":
    main()
