#!/usr/bin/env python3
"""The identical-output matrix: a fixed grid of inference and training estimates through the public API, written
as JSON lines (one per estimate: its inputs, every item's bytes and range, the totals), so a refactor can prove it
changed no number, or list exactly which ones it changed.

    PYTHONPATH=src python bench/identical_output.py > after.jsonl
    (in a checkout of the old commit) PYTHONPATH=src python bench/identical_output.py > before.jsonl
    python bench/identical_output.py --compare before.jsonl after.jsonl

Only the top-level API (``llmsizer.estimate_inference``, ``llmsizer.estimate_training``, ``llmsizer.fit_training``
with ``tokens``: the training duration, every field of its ``timing``) is used, so the script runs unchanged on
commits whose internal layout differs. ``--only duration`` writes the duration rows alone (a quicker check of a
change to estimate/duration.py). ``--full`` also writes each estimate's and fit's whole ``to_dict()`` (every item's
formula and source, the assumptions with their reasons, the warnings, the details): the words too, not only the
numbers.
"""

from __future__ import annotations

import argparse
import itertools
import json
import sys
from typing import Any

MODELS = ["llama-3.1-8b", "qwen2.5-7b", "qwen3-30b-a3b", "mixtral-8x7b-v0.1", "gemma-2-9b-it", "deepseek-v2-lite",
          "phi-3-mini-4k-instruct", "gpt-oss-20b"]
INFERENCE: list[dict[str, Any]] = [
    dict(engine=e, weights=w, context=c, concurrency=n)
    for e, w in (("transformers", None), ("transformers", "nf4"), ("vllm", None), ("vllm", "awq-int4"),
                 ("llamacpp", "q4_k_m"), ("llamacpp", "q8_0"))
    for c, n in ((2048, 1), (8192, 8), (32768, 4))
]
PARALLEL: tuple[dict[str, Any], ...] = ({}, {"gpus": 8, "zero": 3}, {"gpus": 8, "fsdp": "full"},
                                       {"gpus": 8, "tp": 2, "pp": 2})
TRAINING: list[dict[str, Any]] = [
    dict(method=m, grad_checkpointing=g, micro_batch=b, seq_len=s, **par)
    for m, g, (b, s), par in itertools.product(
        ("full", "lora", "qlora"), ("none", "full"), ((1, 2048), (4, 4096)), PARALLEL)
    if not (m == "qlora" and par)
]

# fit_training(model, hardware, count, tokens=1e9, **fields): the duration (step time, elementwise traffic, float8,
# kernel counts, collectives, optimizer step, dequantization, launch overhead) on GPUs, a CPU and an instance
DURATION_MODELS = ["llama-3.1-8b", "qwen3-30b-a3b", "gemma-2-9b-it", "deepseek-v2-lite", "gpt-oss-20b",
                   "nvidia-nemotron-3-nano-30b-a3b-bf16", "qwen2.5-0.5b"]
DURATION: list[dict[str, Any]] = [
    *(dict(hardware=h, method=m, grad_checkpointing=g, micro_batch=b, seq_len=s)
      for h in ("h100-sxm", "rtx-4090") for m in ("full", "lora", "qlora")
      for g in ("none", "full", "selective-op") for b, s in ((1, 2048), (4, 4096))),
    *(dict(hardware="h100-sxm", count=8, method=m, **par)
      for m in ("full", "lora")
      for par in ({"zero": 1}, {"zero": 2, "grad_accumulation": 4}, {"zero": 3}, {"fsdp": "full"},
                  {"fsdp": "hybrid", "gpus_per_node": 4, "network": "400 Gb/s"}, {"tp": 2, "pp": 2},
                  {"grad_accumulation": 8, "grad_sync": "micro-step"})),
    *(dict(hardware="h100-sxm", count=n, method="full", seq_len=4096, float8=True, compile=c, fsdp=f,
           grad_checkpointing=g, checkpoint_every=k)
      for n, f in ((1, None), (8, "full")) for c in (False, True) for g, k in (("none", 1), ("full", 2))),
    dict(hardware="h100-sxm", method="full", float8=True, float8_recipe="transformer-engine", compile=True),
    dict(hardware="rtx-4090", method="qlora", kernels="unsloth", grad_checkpointing="full"),
    dict(hardware="rtx-4090", method="lora", compile=True, loss="linear-ce"),
    dict(hardware="a100-sxm-80gb", count=4, method="full", precision="fp32"),
    dict(hardware="rtx-4090", count=2, method="full", zero=2),
    dict(hardware="p5.48xlarge", count=8, method="full", fsdp="full"),
    dict(hardware="aws-m7i.4xlarge", method="lora"),
    dict(hardware="intel-xeon-spr-8ch", memory=256 * 2**30, method="full", precision="bf16-mixed"),
    dict(hardware="amd-epyc-7763", memory=256 * 2**30, method="lora", precision="fp32"),
    dict(hardware="h100-sxm", count=16, method="full", zero=3, network="ib-ndr"),
]


def duration_rows(full: bool = False) -> list[dict[str, Any]]:
    import llmsizer

    out: list[dict[str, Any]] = []
    for model in DURATION_MODELS:
        for kw in DURATION:
            kw = dict(kw)
            row: dict[str, Any] = {"model": model, "kind": "duration", **kw}
            hw, count = kw.pop("hardware"), kw.pop("count", None)
            try:
                fr = llmsizer.fit_training(model, hw, count, tokens=1e9, **kw)
            except Exception as e:  # noqa: BLE001 - the error text is part of the output to compare
                row["error"] = str(e)
            else:
                row["total_device"] = [fr.memory_per_device, fr.memory_high_per_device, fr.fits]
                row["items"] = fr.training_time
                if full:
                    row["full"] = fr.to_dict()
            out.append(row)
    return out


def rows(full: bool = False) -> list[dict[str, Any]]:
    import llmsizer

    out: list[dict[str, Any]] = []
    for model in MODELS:
        for kind, grid, fn in (("inference", INFERENCE, llmsizer.estimate_inference),
                               ("training", TRAINING, llmsizer.estimate_training)):
            for kw in grid:
                row: dict[str, Any] = {"model": model, "kind": kind, **{k: v for k, v in kw.items() if v is not None}}
                try:
                    est = fn(model, **{k: v for k, v in kw.items() if v is not None})  # type: ignore[operator]
                except Exception as e:  # noqa: BLE001 - the error text is part of the output to compare
                    row["error"] = str(e)
                else:
                    row["items"] = {i.name: list(i.range) for i in est.items}
                    row["total_device"] = list(est.total("device"))
                    if full:
                        row["full"] = est.to_dict()
                out.append(row)
    return out


OUTPUTS = ("items", "total_device", "error", "full")


def _key(r: dict[str, Any]) -> str:
    return json.dumps({k: v for k, v in r.items() if k not in OUTPUTS}, sort_keys=True)


def compare(before: str, after: str) -> int:
    def load(p: str) -> dict[str, dict[str, Any]]:
        with open(p, encoding="utf-8") as f:
            return {_key(r): r for r in map(json.loads, f)}
    a, b = load(before), load(after)
    changed = [k for k in a if k in b and a[k] != b[k]]
    for k in changed:
        print(f"CHANGED {k}\n  before {json.dumps({x: a[k].get(x) for x in ('total_device', 'error')})}\n"
              f"  after  {json.dumps({x: b[k].get(x) for x in ('total_device', 'error')})}")
    missing = set(a) ^ set(b)
    print(f"{len(a)} estimates before, {len(b)} after; {len(changed)} changed; {len(missing)} only on one side")
    return 1 if changed or missing else 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--compare", nargs=2, metavar=("BEFORE", "AFTER"))
    ap.add_argument("--only", choices=("memory", "duration"), help="write only these rows")
    ap.add_argument("--full", action="store_true", help="also write each result's whole to_dict() (words too)")
    args = ap.parse_args()
    if args.compare:
        return compare(*args.compare)
    for r in [*(rows(args.full) if args.only != "duration" else []),
              *(duration_rows(args.full) if args.only != "memory" else [])]:
        sys.stdout.write(json.dumps(r, sort_keys=True) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
