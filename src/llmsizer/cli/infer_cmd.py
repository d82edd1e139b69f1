"""`llmsizer infer`: inference memory for a model and workload, and the reverse questions."""

from __future__ import annotations

import argparse
from typing import Any

from ..inference import estimate_inference
from ..render.text import render_estimate
from ..reverse import max_concurrency, max_context
from ..specs import ATTENTION_IMPLS, DEVICES, DTYPES, ENGINES, InferenceWorkload
from ..units import format_count
from .common import add_model_args, bytes_arg, count_arg, emit_json, resolve_model, tokens_arg

EPILOG = """examples:
  llmsizer infer llama-3.1-8b --context 8192 --concurrency 4
  llmsizer infer qwen3-30b-a3b --weights q4_k_m --engine llamacpp --memory 24GiB
  llmsizer infer qwen2.5-7b --engine vllm --memory 80GiB --context 32k --json
  llmsizer infer llama-3.1-8b --memory 24GiB --max-context
  llmsizer infer mistral-7b-v0.1 --device cpu --weights q4_0 --engine llamacpp
  llmsizer infer --params 7B --layers 32 --hidden 4096 --heads 32 --kv-heads 8 --context 16k
"""


def register(sub: Any) -> None:
    p = sub.add_parser("infer", help="memory to serve a model (GPU or CPU), per engine",
                       description="Memory needed to serve MODEL: weights + KV cache + activations + runtime "
                                   "overhead, each with its formula, source and range.",
                       epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_model_args(p)
    p.add_argument("--weights", help="weight format (default: the checkpoint's stored format); see `llmsizer formats`")
    p.add_argument("--context", type=tokens_arg, default=4096,
                   help="tokens per sequence, prompt + output; 8k = 8192 (default 4096)")
    p.add_argument("--concurrency", type=count_arg, default=1, help="sequences at once (default 1)")
    p.add_argument("--output-tokens", type=tokens_arg, help="tokens generated per sequence (part of --context)")
    p.add_argument("--kv-dtype", help="KV cache dtype: bf16, fp16, fp8, int8, q8_0, q4_0 (default: engine's)")
    p.add_argument("--device", choices=DEVICES, default="gpu")
    p.add_argument("--engine", choices=ENGINES, default="transformers")
    p.add_argument("--memory", type=bytes_arg, help="device memory (or RAM for --device cpu), e.g. 24GiB, 80GB")
    p.add_argument("--attention", choices=ATTENTION_IMPLS, default="sdpa")
    p.add_argument("--dtype", choices=DTYPES, help="compute dtype for activations and unquantized tensors")
    p.add_argument("--group-size", type=int, default=128, help="GPTQ/AWQ group size (default 128)")
    p.add_argument("--block-size", type=int, dest="paged_block_size", help="paged KV block (vLLM: 16)")
    p.add_argument("--gpu-memory-utilization", type=float, help="vLLM (default 0.9)")
    p.add_argument("--max-num-seqs", type=int, help="vLLM (default 256)")
    p.add_argument("--max-num-batched-tokens", type=int, help="vLLM (default 8192)")
    p.add_argument("--tp", "--tensor-parallel", type=int, default=1, dest="tensor_parallel",
                   help="tensor-parallel devices per replica; memory is reported per device (default 1)")
    p.add_argument("--n-gpu-layers", type=int, help="llama.cpp layers offloaded (default: all)")
    p.add_argument("--ubatch", type=int, dest="n_ubatch", help="llama.cpp n_ubatch (default 512)")
    p.add_argument("--max-context", action="store_true", help="report the largest context that fits --memory")
    p.add_argument("--max-concurrency", action="store_true", help="report the largest concurrency that fits --memory")
    p.add_argument("--verbose", "-v", action="store_true", help="show full formulas")
    p.add_argument("--json", action="store_true", help="machine-readable output (same structure as Estimate.to_dict())")
    p.set_defaults(func=cmd_infer)


_FIELDS = ("weights", "context", "concurrency", "output_tokens", "kv_dtype", "device", "engine", "memory",
           "attention", "group_size", "paged_block_size", "gpu_memory_utilization", "max_num_seqs",
           "max_num_batched_tokens", "n_gpu_layers", "n_ubatch", "tensor_parallel", "dtype")


def cmd_infer(args: argparse.Namespace) -> int:
    spec = resolve_model(args)
    fields = {k: getattr(args, k) for k in _FIELDS}
    workload = InferenceWorkload(**fields)
    est = estimate_inference(spec, workload)
    data = est.to_dict()
    reverse: dict[str, int] = {}
    if args.max_context or args.max_concurrency:
        rest = {k: v for k, v in fields.items() if k != "memory"}
        if args.max_context:
            reverse["max_context"] = max_context(spec, args.memory, **{k: v for k, v in rest.items() if k != "context"})
        if args.max_concurrency:
            reverse["max_concurrency"] = max_concurrency(spec, args.memory,
                                                         **{k: v for k, v in rest.items() if k != "concurrency"})
        data["reverse"] = reverse
    if args.json:
        emit_json(data)
        return 0
    print(render_estimate(est, verbose=args.verbose))
    if "max_context" in reverse:
        print(f"largest context that fits: {format_count(reverse['max_context'])} tokens "
              f"({reverse['max_context']:,}) at concurrency {args.concurrency}")
    if "max_concurrency" in reverse:
        print(f"largest concurrency that fits: {reverse['max_concurrency']} sequences of {args.context:,} tokens")
    return 0
