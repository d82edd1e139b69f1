"""Benchmark for issue 4: a full `recommend` over the whole hardware catalog (every cloud instance and local
device, every weight format it needs) must take <= 200 ms on the project's 2-core machine.

Cold = weight/tensor caches cleared before each run (the catalog itself is loaded once per process, as the CLI
does); warm = repeated runs. Not a timed test: run it and read the numbers.

    .venv/bin/python bench/bench_recommend.py [--repeat 10]
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from llmsizer.catalog.hardware import builtin_catalog  # noqa: E402
from llmsizer.catalog.models import find  # noqa: E402
from llmsizer.estimate.caches import clear_caches  # noqa: E402
from llmsizer.recommend import Constraints, recommend_inference, recommend_training  # noqa: E402

CASES = [
    ("llama-3.1-8b, 8k context, concurrency 8", "llama-3.1-8b",
     lambda spec: recommend_inference(spec, context=8192, concurrency=8)),
    ("llama-3.1-70b, concurrency 128, 3000 tok/s", "llama-3.1-70b-instruct",
     lambda spec: recommend_inference(spec, context=4096, concurrency=128,
                                      constraints=Constraints(tokens_per_second=3000))),
    ("qwen3-30b-a3b (MoE), TTFT <= 1 s", "qwen3-30b-a3b",
     lambda spec: recommend_inference(spec, context=4096, concurrency=4, constraints=Constraints(max_ttft=1.0))),
    # open arrivals: each candidate's copies searched, each copy's requests in flight derived (recommend.py
    # _rate_copies, estimate/serving_load.py rate_fixed_point): many fits per candidate
    ("llama-3.1-8b, vllm, 4k, 512 out, 20 requests/s", "llama-3.1-8b",
     lambda spec: recommend_inference(spec, engine="vllm", context=4096, output_tokens=512, request_rate=20)),
    # every engine (llama.cpp's CPU and Apple candidates refused even at MAX_REPLICAS copies: ratefast, probe33 D2)
    ("llama-3.1-8b, 4k, 256 out, 20 requests/s", "llama-3.1-8b",
     lambda spec: recommend_inference(spec, context=4096, output_tokens=256, request_rate=20)),
    ("qwen3-30b-a3b (MoE), 5 requests/s", "qwen3-30b-a3b",
     lambda spec: recommend_inference(spec, request_rate=5)),
    ("llama-3.1-8b training, 10B tokens, 3 days", "llama-3.1-8b",
     lambda spec: recommend_training(spec, tokens=1e10, constraints=Constraints(deadline=3 * 86400))),
]


def clear() -> None:
    clear_caches()  # every memo of the core (estimate/caches.py)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=10)
    ap.add_argument("--only", default="", help="run only the cases whose label contains this text")
    a = ap.parse_args()
    print(f"machine: {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}")
    t = time.perf_counter()
    cat = builtin_catalog()
    print(f"catalog load (once per process): {(time.perf_counter() - t) * 1e3:.1f} ms, {len(cat.devices)} devices, "
          f"{len(cat.instances)} instances")
    worst = 0.0
    for label, model, run in CASES:
        if a.only not in label:
            continue
        spec = find(model).spec()
        cold, warm = [], []
        for _ in range(a.repeat):
            clear()
            t = time.perf_counter()
            rec = run(spec)
            cold.append(time.perf_counter() - t)
            t = time.perf_counter()
            run(spec)
            warm.append(time.perf_counter() - t)
        n = len(rec.options) + len(rec.rejected)
        c, w = statistics.median(cold) * 1e3, statistics.median(warm) * 1e3
        worst = max(worst, c)
        print(f"{label:45s}: {n:3d} options evaluated, cold {c:6.1f} ms, warm {w:6.1f} ms (median of {a.repeat})")
    print(f"worst cold median: {worst:.1f} ms (target <= 200 ms): {'OK' if worst <= 200 else 'OVER'}")


if __name__ == "__main__":
    main()
