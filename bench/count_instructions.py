#!/usr/bin/env python3
"""CPU instructions of one warm estimate, counted by valgrind's callgrind over the timed region only: the
deterministic measure of a speed change on a shared machine. Python bytecodes (``count_ops.py``) are not: a change
that removes bytecodes can add instructions (a 61-field ``__init__`` as one dict display: 26.5k -> 46.8k
instructions per call while its bytecodes fell by three quarters; a hash picked by ``operator.attrgetter``: 13.2k ->
22.1k).

The estimate runs inside ``functools.reduce`` and callgrind collects only there (``--toggle-collect``); the memo
clearing before each run (``clear_caches(estimates_only=True)``, the warm bench's) runs inside a nested ``reduce``,
which toggles collection off again. Cases: ``fit0``-``fit4`` (``bench_inference.DURATION_CASES``: warm
``fit_training(..., tokens=1e9)``; ``fit3``/``fit4``: ``PIPELINE_CASES``, Llama 3.1 405B FSDP + TP 8 + PP 8, 1F1B and
interleaved; ``fit5``: ``SEARCH_CASES``, a full fine-tune on 8 x H100 whose ZeRO stage is chosen), ``train0``/``train1``
(``bench_inference.training_in_process``'s estimates), ``infer`` (llama-3.1-8b 8k x 4), ``fit`` (llama-3.1-8b on h100-sxm, 8k x 8),
``rate`` (``recommend`` of llama-3.1-8b on vLLM over the catalog at 20 requests/s, 4k context, 512 out: the copies
search, bench_recommend.py's rate case; about 5 minutes a run under valgrind, so ``--runs 1``).

    PYTHONPATH=src python bench/count_instructions.py [CASE ...] [--runs 20]

Needs valgrind; a run takes about a minute per case (the interpreter's start-up runs under valgrind too). Not a
timed test.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Callable
from functools import reduce
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
CASES = ("fit0", "fit1", "fit2", "fit3", "fit4", "fit5", "train0", "train1", "infer", "fit", "rate")


def estimate(case: str) -> Callable[[], Any]:
    sys.path.insert(0, str(ROOT / "bench"))
    from bench_inference import DURATION_CASES, PIPELINE_CASES, SEARCH_CASES

    from llmsizer import estimate_inference
    from llmsizer.catalog.models import find
    from llmsizer.estimate.fit import fit, fit_training
    from llmsizer.estimate.training import estimate_training

    if case.startswith("fit") and case != "fit":
        _, name, hw, n, kw = (DURATION_CASES + PIPELINE_CASES + SEARCH_CASES)[int(case[3:])]
        spec = find(name).spec()
        return lambda: fit_training(spec, hw, n, tokens=1e9, **kw)
    if case.startswith("train"):
        runs: tuple[tuple[str, dict[str, Any]], ...] = (
            ("llama-3.1-8b", dict(method="qlora", micro_batch=2, seq_len=2048)),
            ("qwen2.5-7b", dict(method="full", micro_batch=1, seq_len=4096, grad_checkpointing="full")))
        name, kw = runs[int(case[5:])]
        spec = find(name).spec()
        return lambda: estimate_training(spec, **kw)
    spec = find("llama-3.1-8b").spec()
    if case == "rate":
        from llmsizer.recommend import recommend_inference
        return lambda: recommend_inference(spec, engine="vllm", context=4096, output_tokens=512, request_rate=20)
    if case == "infer":
        return lambda: estimate_inference(spec, context=8192, concurrency=4)
    return lambda: fit(spec, "h100-sxm", None, context=8192, concurrency=8)


def inner(case: str, runs: int) -> None:
    """The process callgrind watches: warm up, then ``runs`` estimates inside reduce, each after the warm clearing."""
    from llmsizer.estimate.caches import clear_caches

    fn = estimate(case)
    for _ in range(3):
        clear_caches(estimates_only=True)
        fn()

    def clear(_a: object, _b: object) -> None:
        clear_caches(estimates_only=True)

    reduce(lambda _acc, _i: (reduce(clear, [0, 1], None), fn()), range(runs), None)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("cases", nargs="*", default=list(CASES), help=f"some of {', '.join(CASES)} (default: all)")
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--inner", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.inner:
        inner(a.inner, a.runs)
        return
    unknown = sorted(set(a.cases) - set(CASES))
    if unknown:
        sys.exit(f"unknown case {', '.join(unknown)}; choose from {', '.join(CASES)}")
    if shutil.which("valgrind") is None:
        sys.exit("valgrind is not installed")
    env = dict(os.environ, PYTHONHASHSEED="0")
    for case in a.cases:
        out = subprocess.run(["valgrind", "--tool=callgrind", "--collect-atstart=no",
                              "--toggle-collect=functools_reduce", "--callgrind-out-file=/dev/null", sys.executable,
                              __file__, "--inner", case, "--runs", str(a.runs)],
                             env=env, capture_output=True, text=True, check=True)
        m = re.search(r"Collected : (\d+)", out.stderr)
        if m is None:
            sys.exit(f"no count from callgrind:\n{out.stderr[-2000:]}")
        print(f"{case:7s}: {int(m.group(1)) // a.runs:>12,} instructions per warm estimate", flush=True)


if __name__ == "__main__":
    main()
