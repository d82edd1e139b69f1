"""Speed benchmark for issue targets: one inference estimate in-process (<= 1 ms median) and the CLI's
cold start for `llmsizer infer ... --json` (<= 300 ms). Not a timed test: run it and read the numbers.

    .venv/bin/python bench/bench_inference.py [--repeat 200] [--cli-repeat 15]
"""

from __future__ import annotations

import argparse
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
from llmsizer.formulas import tensors, weight_formats  # noqa: E402

CASES = [
    ("llama-3.1-8b", dict(context=8192, concurrency=4)),
    ("qwen3-30b-a3b", dict(context=32768, concurrency=8, engine="vllm", memory=80 * 2**30)),
    ("deepseek-v3", dict(context=8192, weights="q4_k_m", engine="llamacpp")),
]


def in_process(repeat: int) -> dict[str, float]:
    out = {}
    for name, kw in CASES:
        spec = find(name).spec()
        times = []
        for _ in range(repeat):
            # cold caches: every estimate rebuilds the tensor inventory and weight bytes
            tensors.model_tensors.cache_clear()
            weight_formats.weight_bytes.cache_clear()
            t = time.perf_counter()
            estimate_inference(spec, **kw)
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


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=200)
    ap.add_argument("--cli-repeat", type=int, default=15)
    a = ap.parse_args()
    print(f"machine: {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}")
    for name, ms in in_process(a.repeat).items():
        print(f"in-process estimate, cold caches, {name:15s}: {ms:.3f} ms median")
    print(f"CLI cold start `llmsizer infer llama-3.1-8b --json`: {cli_cold_start(a.cli_repeat):.0f} ms median")


if __name__ == "__main__":
    main()
