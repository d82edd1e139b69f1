#!/usr/bin/env python3
"""Deterministic work counts for the speed goals (a shared, loaded machine makes CPU times swing by +-40%):
Python bytecodes executed (``sys.settrace`` opcode events) and Python function calls, for

- ``fit``: one warm ``fit_training(..., tokens=1e9)`` per case of ``bench_inference.DURATION_CASES`` (the finished
  estimates and settings-keyed memos cleared, as that bench's warm figure does);
- ``serve``: one warm serving ``fit`` (memory verdict, tensor-parallel choice and speed) per case of
  ``SERVING_CASES`` (the same clearing: fit's speed memo too);
- ``recommend``: ``recommend_inference`` llama-3.1-8b 8k x 8 over the 5,000-entry hardware file of
  ``bench_recommend_large.py`` (cold caches, the file read included);
- ``plan``: ``make_plan`` of the 100-job request of ``bench_plan.py`` (cold caches).

    PYTHONPATH=src python bench/count_ops.py [fit] [serve] [recommend] [plan] [--wall N]

``--wall N`` also prints the minimum of N wall-clock (``time.perf_counter``) runs of each, untraced. The counts
differ between runs only through hash seeds (set PYTHONHASHSEED=0 for exact repeats). Not a timed test.

Bytecodes are not time: a bytecode can cost a few or thousands of CPU instructions (perf6 removed 5-7% of
``fit_training``'s bytecodes for ~2% of its instructions, and two changes that removed bytecodes added
instructions). ``count_instructions.py`` counts the CPU instructions of the same warm estimates (callgrind).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.append(str(ROOT / "src"))  # after PYTHONPATH: another checkout can be counted with this script
sys.path.insert(0, str(ROOT / "bench"))


# serving fits: (label, model, target, count, concurrency): one device, and 8-GPU machines at low and high load
SERVING_CASES = [
    ("llama-3.1-8b, 1 x h100, c 1", "llama-3.1-8b", "h100", 1, 1),
    ("llama-3.1-8b, 8 x h100, c 1", "llama-3.1-8b", "h100", 8, 1),
    ("qwen2.5-7b, p5.48xlarge, c 64", "qwen2.5-7b", "p5.48xlarge", None, 64),
    ("llama-3.1-70b, 8 x h100, c 256", "llama-3.1-70b", "h100", 8, 256),
    ("qwen3-30b-a3b, p5.48xlarge, c 16", "qwen3-30b-a3b", "p5.48xlarge", None, 16),
]


def count(fn: Callable[[], Any]) -> tuple[int, int]:
    """(bytecodes, Python calls) that ``fn()`` executes."""
    ops = calls = 0

    def local(frame: Any, event: str, arg: Any) -> Any:
        nonlocal ops
        if event == "opcode":
            ops += 1
        return local

    def tracer(frame: Any, event: str, arg: Any) -> Any:
        nonlocal calls
        calls += 1
        frame.f_trace_opcodes = True
        frame.f_trace_lines = False
        return local

    sys.settrace(tracer)
    try:
        fn()
    finally:
        sys.settrace(None)
    return ops, calls


def wall(fn: Callable[[], Any], setup: Callable[[], Any], n: int) -> float:
    best = float("inf")
    for _ in range(n):
        setup()
        t = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t)
    return best


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("what", nargs="*", default=["fit", "serve", "recommend", "plan"])
    ap.add_argument("--wall", type=int, default=0, help="also the minimum of N untraced wall-clock runs")
    args = ap.parse_args()

    from llmsizer.catalog.models import find
    from llmsizer.estimate.caches import clear_caches

    if "fit" in args.what:
        from bench_inference import DURATION_CASES

        from llmsizer.estimate.fit import fit_training

        for label, name, hw, n, kw in DURATION_CASES:
            spec = find(name).spec()

            def one(spec: Any = spec, hw: str = hw, n: int | None = n, kw: dict[str, Any] = kw) -> Any:
                return fit_training(spec, hw, n, tokens=1e9, **kw)

            def warm() -> None:
                clear_caches(estimates_only=True)

            one()
            warm()
            ops, calls = count(one)
            line = f"fit_training warm, {label:42s}: {ops:>10,} bytecodes {calls:>8,} calls"
            if args.wall:
                for _ in range(20):
                    warm()
                    one()
                line += f"  wall min of {args.wall * 20}: {wall(one, warm, args.wall * 20) * 1e3:.3f} ms"
            print(line, flush=True)

    if "serve" in args.what:
        from llmsizer.estimate import fit as fit_module

        for label, name, hw, n, conc in SERVING_CASES:
            spec = find(name).spec()

            def serve(spec: Any = spec, hw: str = hw, n: int | None = n, conc: int = conc) -> Any:
                return fit_module.fit(spec, hw, n, concurrency=conc)

            def warm_serve() -> None:
                clear_caches(estimates_only=True)  # fit's speed memo too

            serve()
            warm_serve()
            ops, calls = count(serve)
            line = f"fit serving warm, {label:34s}: {ops:>10,} bytecodes {calls:>8,} calls"
            if args.wall:
                for _ in range(20):
                    warm_serve()
                    serve()
                line += f"  wall min of {args.wall * 20}: {wall(serve, warm_serve, args.wall * 20) * 1e3:.3f} ms"
            print(line, flush=True)

    if "recommend" in args.what:
        import json

        from bench_recommend_large import CONCURRENCY, CONTEXT, MODEL, hardware_file

        from llmsizer.catalog.hardware import load_catalog
        from llmsizer.recommend import recommend_inference

        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / "hardware.json"
            path.write_text(json.dumps(hardware_file(5000)))
            spec = find(MODEL).spec()

            def rec() -> Any:
                load_catalog([path])
                return recommend_inference(spec, context=CONTEXT, concurrency=CONCURRENCY, hardware_files=[path])

            clear_caches()
            rec()
            clear_caches()
            ops, calls = count(rec)
            line = f"recommend {MODEL} {CONTEXT} x {CONCURRENCY}, 5,000 entries, cold: {ops:>12,} bytecodes {calls:>10,} calls"
            if args.wall:
                line += f"  wall min of {args.wall}: {wall(rec, clear_caches, args.wall):.3f} s"
            print(line, flush=True)

    if "plan" in args.what:
        from bench_plan import TODAY, write_request

        from llmsizer.plan import make_plan
        from llmsizer.request.reader import load_request

        with tempfile.TemporaryDirectory() as tmp:
            path = write_request(100, Path(tmp))
            req = load_request(path)

            def plan() -> Any:
                return make_plan(req, today=TODAY)

            clear_caches()
            plan()
            clear_caches()
            ops, calls = count(plan)
            line = f"plan 100 jobs, cold: {ops:>12,} bytecodes {calls:>10,} calls"
            if args.wall:
                line += f"  wall min of {args.wall}: {wall(plan, clear_caches, args.wall):.3f} s"
            print(line, flush=True)


if __name__ == "__main__":
    main()
