"""`llmsizer train`: per-device memory of a training or fine-tuning run, and the reverse questions."""

from __future__ import annotations

import argparse
from typing import Any

from ..render.text import render_estimate
from ..specs.training import (
    FSDP_MODES,
    GRAD_CHECKPOINTING,
    METHODS,
    OFFLOAD,
    OPTIMIZER_IMPLS,
    OPTIMIZERS,
    PRECISIONS,
    STATE_DTYPES,
    TRAIN_ATTENTION,
    TrainingWorkload,
)
from ..training import estimate_training, max_micro_batch, max_seq_len
from .common import add_model_args, bytes_arg, count_arg, emit_json, resolve_model, tokens_arg

EPILOG = """examples:
  llmsizer train llama-3.1-8b --method full --batch 4 --seq 4096 --grad-checkpointing full
  llmsizer train llama-3.1-8b --method lora --rank 16 --targets q,k,v,o,gate,up,down --seq 2048
  llmsizer train llama-3.1-8b --method qlora --rank 64 --batch 2 --seq 4096 --memory 24GiB
  llmsizer train qwen2.5-7b --gpus 8 --zero 3 --batch 2 --seq 8192 --grad-checkpointing full
  llmsizer train llama-3.1-70b-instruct --gpus 16 --tp 4 --pp 2 --precision megatron-bf16 --grad-accumulation 8
  llmsizer train qwen3-30b-a3b --gpus 8 --ep 8 --fsdp full --seq 4096
  llmsizer train llama-3.1-8b --zero 2 --gpus 4 --offload optimizer --json
  llmsizer train llama-3.1-8b --method lora --memory 24GiB --max-batch --seq 2048
  llmsizer train llama-3.1-8b --method lora --memory 80GiB --max-seq
"""


def register(sub: Any) -> None:
    p = sub.add_parser("train", help="memory to train or fine-tune a model (full, LoRA, QLoRA), per device",
                       description="Per-device peak memory of a training step: weights, master weights, gradients, "
                                   "optimizer states, saved activations and transient peaks, each with its formula, "
                                   "source and range; host RAM when offloading.",
                       epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_model_args(p)
    p.add_argument("--method", choices=METHODS, default="full", help="full fine-tuning or adapters (default full)")
    p.add_argument("--rank", type=int, default=16, help="LoRA rank r (default 16)")
    p.add_argument("--alpha", type=int, help="LoRA alpha (recorded; no memory effect)")
    p.add_argument("--targets", default="q,k,v,o,gate,up,down",
                   help="LoRA target modules: q,k,v,o,gate,up,down,embed,lm_head or all-linear")
    p.add_argument("--adapter-dtype", choices=STATE_DTYPES, help="LoRA weight dtype (default fp32 under mixed "
                   "precision)")
    p.add_argument("--base-dtype", choices=STATE_DTYPES, help="frozen base dtype for lora/dora (default bf16)")
    p.add_argument("--optimizer", choices=OPTIMIZERS, help="default adamw (qlora: paged-adamw)")
    p.add_argument("--optimizer-state-dtype", choices=STATE_DTYPES)
    p.add_argument("--optimizer-impl", choices=OPTIMIZER_IMPLS, help="torch optimizer kernel (default fused)")
    p.add_argument("--precision", choices=PRECISIONS, default="bf16-mixed",
                   help="precision recipe (default bf16-mixed: PyTorch AMP / HF Trainer --bf16)")
    p.add_argument("--batch", "--micro-batch", type=count_arg, default=1, dest="micro_batch",
                   help="sequences per device per forward (default 1)")
    p.add_argument("--seq", "--seq-len", type=tokens_arg, default=2048, dest="seq_len",
                   help="tokens per sequence; 4k = 4096 (default 2048)")
    p.add_argument("--grad-accumulation", type=int, default=1, help="micro-batches per optimizer step (default 1)")
    p.add_argument("--grad-checkpointing", choices=GRAD_CHECKPOINTING, default="none")
    p.add_argument("--attention", choices=TRAIN_ATTENTION, default="sdpa")
    p.add_argument("--packing", action="store_true", help="several documents per row (block-diagonal mask)")
    p.add_argument("--loss-chunks", type=int, default=1, help="cross-entropy chunks (torchtune: 8; default 1)")
    p.add_argument("--optimizer-in-backward", action="store_true", help="update each parameter during backward")
    p.add_argument("--gpus", type=int, default=1, help="devices in total (default 1)")
    p.add_argument("--zero", type=int, default=0, help="DeepSpeed ZeRO stage 0-3 (default 0)")
    p.add_argument("--fsdp", choices=FSDP_MODES, help="PyTorch FSDP sharding strategy")
    p.add_argument("--tp", type=int, default=1, help="tensor-parallel degree")
    p.add_argument("--pp", type=int, default=1, help="pipeline-parallel stages")
    p.add_argument("--ep", type=int, default=1, help="expert-parallel degree (MoE)")
    p.add_argument("--sequence-parallel", action="store_true", help="Megatron sequence parallelism (needs --tp)")
    p.add_argument("--offload", choices=OFFLOAD, default="none", help="CPU offload (ZeRO-Offload / -Infinity)")
    p.add_argument("--gpus-per-node", type=int, default=8, help="for --fsdp hybrid (default 8)")
    p.add_argument("--memory", type=bytes_arg, help="device memory, e.g. 24GiB, 80GB")
    p.add_argument("--max-batch", action="store_true", help="report the largest micro-batch that fits --memory")
    p.add_argument("--max-seq", action="store_true", help="report the longest sequence that fits --memory")
    p.add_argument("--verbose", "-v", action="store_true", help="show full formulas")
    p.add_argument("--json", action="store_true", help="machine-readable output (Estimate.to_dict())")
    p.set_defaults(func=cmd_train)


_FIELDS = ("method", "rank", "alpha", "targets", "adapter_dtype", "base_dtype", "optimizer", "optimizer_state_dtype",
           "optimizer_impl", "precision", "micro_batch", "seq_len", "grad_accumulation", "grad_checkpointing",
           "attention", "packing", "loss_chunks", "optimizer_in_backward", "gpus", "zero", "fsdp", "tp", "pp", "ep",
           "sequence_parallel", "offload", "gpus_per_node", "memory")


def cmd_train(args: argparse.Namespace) -> int:
    spec = resolve_model(args)
    fields = {k: getattr(args, k) for k in _FIELDS}
    if fields["method"] == "full":
        fields["targets"] = TrainingWorkload.targets  # LoRA targets do not apply
    workload = TrainingWorkload(**fields)
    est = estimate_training(spec, workload)
    data = est.to_dict()
    reverse: dict[str, int] = {}
    if args.max_batch or args.max_seq:
        rest = {k: v for k, v in fields.items() if k != "memory"}
        if args.max_batch:
            reverse["max_micro_batch"] = max_micro_batch(spec, args.memory,
                                                         **{k: v for k, v in rest.items() if k != "micro_batch"})
        if args.max_seq:
            reverse["max_seq_len"] = max_seq_len(spec, args.memory, **{k: v for k, v in rest.items() if k != "seq_len"})
        data["reverse"] = reverse
    if args.json:
        emit_json(data)
        return 0
    print(render_estimate(est, verbose=args.verbose))
    if "max_micro_batch" in reverse:
        print(f"largest micro-batch that fits: {reverse['max_micro_batch']} sequences of {args.seq_len:,} tokens")
    if "max_seq_len" in reverse:
        print(f"longest sequence that fits: {reverse['max_seq_len']:,} tokens at micro-batch {args.micro_batch}")
    return 0
