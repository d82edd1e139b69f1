"""`llmsizer measure infer|train`: run the workload for a few steps on this machine and compare with the estimate."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from ..numbers import CONCURRENCY, COUNT, LORA_RANK, SECONDS, SEED, WIDTH
from ..render.safe import say
from ..specs.training import METHODS, OPTIMIZER_IMPLS, OPTIMIZERS
from ..specs.workload import DTYPES, OUTPUT_TOKENS
from .commands import COMMAND_HELP
from .common import bytes_arg, count_in, emit_json, int_arg, needs_subcommand, seconds_arg, tokens_arg, tokens_in

EPILOG = """examples:
  llmsizer measure infer qwen2.5-0.5b --context 4096 --concurrency 4
  llmsizer measure infer ./my-model/config.json --device cpu --context 1024 --json
  llmsizer measure train qwen2.5-1.5b-instruct --method lora --seq-len 2048 --micro-batch 2 --grad-checkpointing full
  llmsizer measure train llama-3.1-8b --method qlora --seq-len 2048 --store results.sqlite
  llmsizer measure infer qwen2.5-7b --memory-cap 8GiB        # see the out-of-memory report

Weights are random, initialised from the model's config (nothing is downloaded); a model folder that holds
weight files is loaded instead unless --random-weights. Every run is appended to the results store
(default ~/.cache/llmsizer/results.sqlite) that `llmsizer validate` summarises.
"""


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument("model", help="catalog name or id, config.json, or model folder")
    p.add_argument("--device", choices=("auto", "cpu", "cuda"), default="auto",
                   help="where to run (default: CUDA when available, else CPU)")
    p.add_argument("--attention", choices=("sdpa", "eager", "flash"), default="sdpa")
    p.add_argument("--steps", type=int_arg(COUNT), help="timed repetitions after the tracked pass (inference 1, training 2)")
    p.add_argument("--seed", type=int_arg(SEED), default=0)
    p.add_argument("--threads", type=int_arg(COUNT), help="torch CPU threads (default: torch's)")
    p.add_argument("--memory-cap", type=bytes_arg, help="memory the run may use, e.g. 8GiB (CUDA: per-process "
                   "fraction; CPU: data-segment limit)")
    p.add_argument("--random-weights", action="store_true", help="random weights even for a folder with weights")
    p.add_argument("--timeout", type=seconds_arg(SECONDS), default=1800.0,
                   help="seconds before the run is killed, or a duration ('30 min', '2h') (default 1800)")
    p.add_argument("--store", help="results store (SQLite) to append to (default ~/.cache/llmsizer/results.sqlite)")
    p.add_argument("--no-store", action="store_true", help="do not append the result to the store")
    p.add_argument("--jsonl", help="also append the record to this JSON-lines file")
    p.add_argument("--quiet", "-q", action="store_true", help="no progress bar")
    p.add_argument("--json", action="store_true", help="print the whole record as JSON")


def register(sub: Any) -> None:
    p = sub.add_parser("measure", help=COMMAND_HELP["measure"],
                       description="Run inference or a training step for a few steps with random weights on the "
                                   "local device; print measured vs estimated memory per component and in total, "
                                   "and the speed.",
                       epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    msub = p.add_subparsers(dest="measure_kind", metavar="KIND", parser_class=type(p))
    pi = msub.add_parser("infer", help="prefill + decode at a context and concurrency",
                         epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    _common(pi)
    pi.add_argument("--context", type=tokens_arg, default=1024,
                    help="tokens per sequence at the end, prompt + output (default 1024)")
    pi.add_argument("--concurrency", type=count_in(CONCURRENCY), default=1, help="sequences at once (default 1)")
    pi.add_argument("--output-tokens", type=tokens_in(OUTPUT_TOKENS), default=16,
                    help="tokens decoded per sequence (default 16); 0: prefill only, as infer's (no decode timed)")
    pi.add_argument("--dtype", choices=DTYPES, help="default: bf16 on CUDA, fp32 on CPU")
    pi.add_argument("--weights", choices=("nf4", "nf4-dq"), help="bitsandbytes 4-bit weights (CUDA)")
    pi.set_defaults(func=cmd_measure, kind="inference")
    pt = msub.add_parser("train", help="optimizer steps: full, LoRA, DoRA or QLoRA",
                         epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    _common(pt)
    pt.add_argument("--method", choices=METHODS, default="full")
    pt.add_argument("--rank", type=int_arg(LORA_RANK), default=16, help="LoRA rank (default 16)")
    pt.add_argument("--alpha", type=int_arg(WIDTH), help="LoRA alpha (default 2 x rank)")
    pt.add_argument("--targets", default="all-linear",
                    help="LoRA targets: PEFT module names (q_proj,v_proj; qkv_proj,gate_up_proj on Phi-3) or "
                         "all-linear (default: PEFT's, every nn.Linear but the output head)")
    pt.add_argument("--optimizer", default="adamw",
                    choices=OPTIMIZERS)
    pt.add_argument("--precision", choices=("fp32", "bf16-mixed", "fp16-mixed", "bf16", "fp16"),
                    help="default: bf16-mixed on CUDA (bf16 for QLoRA), fp32 on CPU")
    pt.add_argument("--optimizer-impl", choices=OPTIMIZER_IMPLS,
                    help="torch optimizer implementation (default: torch's, foreach on CUDA)")
    pt.add_argument("--base-dtype", choices=DTYPES,
                    help="frozen base dtype for lora/dora/qlora (default bf16; fp32 with --precision fp32)")
    pt.add_argument("--micro-batch", type=int_arg(COUNT), default=1, help="sequences per step (default 1)")
    pt.add_argument("--seq-len", type=tokens_arg, default=512, help="tokens per sequence (default 512)")
    pt.add_argument("--grad-checkpointing", choices=("none", "full"),
                    help="activation checkpointing (default: the method's, as `train` takes it: full for qlora, "
                         "peft's k-bit preparation; none otherwise)")
    pt.set_defaults(func=cmd_measure, kind="training")
    p.set_defaults(func=needs_subcommand(p))


def _settings(args: argparse.Namespace) -> Any:
    from ..measure.settings import MeasureSettings, normalize_targets

    common = dict(kind=args.kind, model=args.model, device=args.device, attention=args.attention, steps=args.steps,
                  seed=args.seed, threads=args.threads, memory_cap=args.memory_cap, random_weights=args.random_weights)
    if args.kind == "inference":
        return MeasureSettings(**common, context=args.context, concurrency=args.concurrency,
                               output_tokens=args.output_tokens, dtype=args.dtype, weights=args.weights)
    return MeasureSettings(**common, method=args.method, rank=args.rank, alpha=args.alpha,
                           targets=normalize_targets(args.targets), optimizer=args.optimizer, precision=args.precision,
                           optimizer_impl=args.optimizer_impl, base_dtype=args.base_dtype,
                           micro_batch=args.micro_batch, seq_len=args.seq_len,
                           grad_checkpointing=args.grad_checkpointing)


def check_dependencies(settings: Any) -> None:
    """A clean error when the 'measure' extra is missing (the worker would only fail on import)."""
    import importlib.util

    from ..measure import MeasureUnavailableError

    need = ["torch", "transformers"]
    if settings.kind == "training" and settings.method != "full":
        need.append("peft")
    missing = [m for m in need if importlib.util.find_spec(m) is None]
    if missing:
        raise MeasureUnavailableError(f"measure needs {', '.join(missing)}: pip install 'llmsizer[measure]'")


def cmd_measure(args: argparse.Namespace) -> int:
    from ..measure import ResultStore, append_jsonl, measure, oom_message
    from ..measure.render import render_record

    settings = _settings(args)
    check_dependencies(settings)
    record = measure(settings, timeout=args.timeout, progress=not args.quiet and not args.json)
    if not args.no_store:
        store = ResultStore(args.store)
        record["store_id"] = store.append(record)
        record["store_path"] = str(store.path)
    if args.jsonl:
        append_jsonl(args.jsonl, {k: v for k, v in record.items() if k not in ("store_id", "store_path")})
    if args.json:
        emit_json(record)
    else:
        say(render_record(record))
        if record.get("store_path"):
            say(f"stored as #{record['store_id']} in {record['store_path']}")
    if record["status"] == "oom":
        say(f"llmsizer: {oom_message(record)}", file=sys.stderr)
        return 3
    if record["status"] != "ok":
        say(f"llmsizer: measurement {record['status']}: {record.get('error', '')}", file=sys.stderr)
        return 1
    return 0
