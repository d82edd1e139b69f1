"""The workload flags, one group per kind of workload, shared by ``infer``, ``train``, ``fit`` and ``recommend``.

One name per concept and one set of defaults: every flag defaults to None and the workload dataclass
(``specs.InferenceWorkload``, ``specs.TrainingWorkload``) applies its own default, which the estimate records as
an assumption. The help texts quote those defaults from the dataclasses, so they cannot drift.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from ..catalog.frameworks import framework_profiles
from ..errors import InputError
from ..estimate.engines import (
    CURRENT_VERSION,
    LLAMACPP_N_UBATCH,
    SGLANG_MAMBA_FULL_MEMORY_RATIO,
    VLLM,
    VLLM_GPU_MEMORY_UTILIZATION,
)
from ..estimate.verdict import DEFAULT_HEADROOM, LLAMACPP_FIT_TARGET
from ..formulas.kv_cache import kv_dtype_name
from ..formulas.weight_formats import normalize_format
from ..numbers import (
    CONCURRENCY,
    COUNT,
    CPU_MOE_LAYERS,
    FSDP_VERSION,
    GPU_LAYERS,
    GROUP_SIZE,
    HEADROOM,
    IMAGE_TOKENS,
    IMAGES,
    LLAMACPP_GPUS,
    LORA_ALPHA,
    LORA_RANK,
    MACHINE_GPUS,
    MAX_GPUS,
    MEMORY_RATIO,
    PASSES,
    SIZE,
    SPLIT_SHARE,
    TOKENS,
    TRAIN_TOKENS,
    UTILIZATION,
    VIDEO_FRAMES,
    ZERO_STAGE,
)
from ..request.quantities import parse_network
from ..specs import DTYPES, ENGINES, MAMBA_RADIX_CACHE_STRATEGIES, SPLIT_MODES, InferenceWorkload, TrainingWorkload
from ..specs.training import (
    BATCH_SHAPES,
    CHECKPOINT_IMPLS,
    COMPILE_SCOPES,
    CP_KINDS,
    DEEPSPEED_GATHERS,
    FLOAT8_RECIPES,
    FSDP1_LORA_WRAPS,
    FSDP2_UNITS,
    FSDP_MODES,
    GRAD_CHECKPOINTING,
    GRAD_SYNC,
    KERNELS,
    LAYERNORMS,
    LORA_DROPOUTS,
    LOSSES,
    MAMBA_PATHS,
    METHODS,
    MOE_DISPATCHERS,
    NF4_FORMATS,
    NF4_QUANTIZERS,
    OFFLOAD,
    OPTIMIZER_IMPLS,
    OPTIMIZERS,
    PIPELINE_SPLITS,
    PRECISIONS,
    STATE_DTYPES,
    TRAIN_ATTENTION,
    TRAIN_ATTENTION_KERNELS,
    ZERO_GRADS,
)
from ..specs.workload import ATTENTION_IMPLS, DEFAULT_ATTENTION, ENGINE_RULE_TEXT, MEMORY_METRICS, OUTPUT_TOKENS
from ..units import MiB, parse_image_size
from .common import argtype, bytes_in, count_in, float_arg, int_arg, list_of, share_in, tokens_arg, tokens_in

IW, TW = InferenceWorkload, TrainingWorkload


def _known(check: Callable[[str], object], what: str) -> Callable[[str], str]:
    """argparse type: the text as written once ``check`` (the formula's own name check, with its did-you-mean)
    accepts it, so an unknown name is refused naming the flag ("argument --weights: unknown weight format ...")."""
    def known(text: str) -> str:
        if len(text) > 200:  # no name is 200 characters long; keep a 1 MB value out of the message
            raise argparse.ArgumentTypeError(f"a {what} of {len(text):,} characters is not one")
        try:
            check(text)
        except InputError as e:
            raise argparse.ArgumentTypeError(str(e)) from None
        return text
    known.__name__ = what  # argparse names the type in some of its messages
    return known


weights_arg = _known(normalize_format, "weight format")  # formulas/weight_formats.py
kv_dtype_arg = _known(kv_dtype_name, "KV cache dtype")  # formulas/kv_cache.py
headroom_arg = share_in(HEADROOM)
share_arg = share_in(UTILIZATION)  # --gpu-memory-utilization, --mem-fraction-static, --utilization


# (llama.cpp's flag named without its dashes: a help names only its own command's flags)
_LLAMACPP_MARGIN = (f"; llama.cpp on a GPU: {LLAMACPP_FIT_TARGET // MiB} MiB per GPU instead, llama.cpp's own "
                    "fit-target default (estimate/verdict.py margin_rule)")
_HEADROOM_ENGINES = {
    "flags": f"{_LLAMACPP_MARGIN}; vLLM: 1 - --gpu-memory-utilization; SGLang keeps none: use --mem-fraction-static",
    "defaults": f"{_LLAMACPP_MARGIN}; vLLM: gpu_memory_utilization = 1 - headroom; SGLang keeps none: its default "
                "mem_fraction_static",
    "none": "",
}


def add_headroom_arg(p: argparse.ArgumentParser | Any, *, engines: str = "flags") -> None:
    """--headroom; its help names only this command's flags. ``engines``: what it says of the pool engines, 'flags'
    (the command has --gpu-memory-utilization and --mem-fraction-static), 'defaults' (it serves on them with their
    defaults: `models --fits-on`) or 'none' (training)."""
    p.add_argument("--headroom", type=headroom_arg,
                   help=f"share of device memory kept free, 0.1 or 10%% (default per engine: {DEFAULT_HEADROOM}"
                        f"{_HEADROOM_ENGINES[engines]})" if engines != "none" else
                   f"share of device memory kept free, 0.1 or 10%% (default {DEFAULT_HEADROOM})")


def add_fit_target_arg(p: argparse.ArgumentParser | Any) -> None:
    """--fit-target (InferenceWorkload.fit_target): llama.cpp's margin in bytes, instead of a --headroom share."""
    p.add_argument("--fit-target", type=bytes_in(SIZE), help="llama.cpp: memory kept free on each GPU instead of a "
                   "--headroom share, e.g. 512MiB, as llama.cpp --fit-target (default: llama.cpp's own, "
                   f"{LLAMACPP_FIT_TARGET // MiB} MiB per GPU, when no --headroom is given)")


def add_metric_arg(p: argparse.ArgumentParser | Any) -> None:
    p.add_argument("--metric", choices=MEMORY_METRICS,
                   help="what you will compare the memory with: allocated (torch.cuda.max_memory_allocated), "
                        "reserved (max_memory_reserved: + the caching allocator's reserve, a calibrated range) or "
                        "nvidia-smi (reserved + CUDA context); default: live tensors + CUDA context, no reserve")


class _ServingAttention(tuple):  # type: ignore[type-arg]
    """Serving's attention kernels as --help, the OpenAPI enum and 'invalid choice' list them; training's flex also
    passes the parser, so the serving workload refuses it with its own line (a training choice), as fit does."""

    def __contains__(self, value: object) -> bool:
        return value in TRAIN_ATTENTION


def add_attention_arg(p: argparse.ArgumentParser | Any, *, serving_only: bool = False) -> None:
    """--attention: serving's choices (specs/workload.py ATTENTION_IMPLS) shown on a command that only serves
    (``infer``), training's (specs/training.py TRAIN_ATTENTION, which adds flex) where the flag serves both modes.
    Both parse training's list (``_ServingAttention``), so flex on ``infer`` gets the serving workload's own refusal
    (a training choice), the line ``fit`` gives, not argparse's 'invalid choice'."""
    if serving_only:
        p.add_argument("--attention", choices=_ServingAttention(ATTENTION_IMPLS),
                       help=f"attention kernel (default {DEFAULT_ATTENTION}; engine transformers only: no engine given, "
                            "it implies transformers); flex is for training (llmsizer train)")
        return
    p.add_argument("--attention", choices=TRAIN_ATTENTION,
                   help=f"attention kernel (default {DEFAULT_ATTENTION}; serving: engine transformers only); flex (torch FlexAttention on a BlockMask, "
                        "torchtune's packed path) for training only, on a GPU")


image_size_arg = argtype(lambda t: parse_image_size(t, what=""), "WxH")


def add_media_args(g: argparse.ArgumentParser | Any) -> None:
    """Images and video in each prompt (multimodal models): their tokens add to --context."""
    g.add_argument("--images", type=int_arg(IMAGES),
                   help=f"images in each sequence's prompt; their tokens add to --context (default {IW.images})")
    g.add_argument("--image-size", type=image_size_arg, metavar="WxH",
                   help="width x height of each image in pixels, e.g. 1024x768 (default: the vision encoder's input "
                        "size; required for dynamic-resolution models)")
    g.add_argument("--video-frames", type=int_arg(VIDEO_FRAMES),
                   help=f"sampled frames of one video in each prompt (default {IW.video_frames}: no video)")
    g.add_argument("--video-size", type=image_size_arg, metavar="WxH", help="width x height of each video frame")
    g.add_argument("--pan-and-scan", action="store_true", default=None,
                   help="Gemma 3: the processor also crops wide/tall images, each crop more tokens (default off; "
                        "llama.cpp has no pan-and-scan: refused there)")


MEDIA_FIELDS = ("images", "image_size", "video_frames", "video_size", "pan_and_scan")


def media_fields(args: argparse.Namespace) -> dict[str, Any]:
    """The image/video fields of InferenceWorkload the user gave."""
    return {k: getattr(args, k) for k in MEDIA_FIELDS if getattr(args, k, None) is not None}


def add_inference_args(p: argparse.ArgumentParser, *, engine: bool = True, tensor_parallel: bool = True,
                       attention: bool = True, engine_default: str = f"default: {ENGINE_RULE_TEXT}",
                       speed: bool = False,
                       weights_default: str = "the checkpoint's stored format; GGUF for llama.cpp") -> None:
    """Serving workload flags (``fit``/``recommend`` choose the engine and the tensor parallelism themselves
    unless ``engine`` is kept); ``speed``: the commands that answer a speed also take the flags only speed reads."""
    g = p.add_argument_group("inference workload")
    g.add_argument("--weights", type=weights_arg,
                   help=f"weight format (default: {weights_default}); see `llmsizer formats`")
    g.add_argument("--context", type=tokens_arg,
                   help=f"tokens per sequence, prompt + output; 8k = 8192 (default {IW.context})")
    g.add_argument("--concurrency", type=count_in(CONCURRENCY), help=f"sequences at once (default {IW.concurrency})")
    g.add_argument("--output-tokens", type=tokens_in(OUTPUT_TOKENS),
                   help="tokens generated per sequence (part of --context); 0: prefill only (embeddings, scoring)")
    g.add_argument("--kv-dtype", type=kv_dtype_arg, help="KV cache dtype: bf16, fp16, fp8_e4m3 (vLLM, SGLang, transformers), "
                   "fp8 (vLLM, transformers), int8 (transformers), int8_per_token_head, fp8_per_token_head (vLLM), q8_0, q4_0, ... "
                   "(llama.cpp), auto (the model's dtype; SGLang's own fp8_e4m3 for a DSA model on compute capability >= 10 or a "
                   "checkpoint whose quant config says an FP8 KV cache; llama.cpp, which has none: its f16) (default: the engine's)")
    if engine:
        g.add_argument("--engine", choices=ENGINES, help=f"serving engine ({engine_default})")
    add_engine_version_arg(g)
    if attention:  # fit and recommend add training's, whose --attention serves both modes
        add_attention_arg(g, serving_only=True)
    g.add_argument("--dtype", choices=DTYPES, help="compute dtype for activations and unquantized tensors")
    g.add_argument("--group-size", type=int_arg(GROUP_SIZE), help=f"GPTQ/AWQ group size (default {IW.group_size})")
    g.add_argument("--block-size", type=int_arg(COUNT), dest="paged_block_size", help=f"paged KV block (vLLM default {VLLM.block_size})")
    g.add_argument("--gpu-memory-utilization", type=share_arg,
                   help=f"vLLM, 0.9 or 90%% (default {VLLM_GPU_MEMORY_UTILIZATION:g}, or 1 - --headroom)")
    g.add_argument("--max-num-seqs", "--max-running-requests", type=int_arg(CONCURRENCY), dest="max_num_seqs",
                   help="vLLM max_num_seqs / SGLang max_running_requests (default: the engine's; see the assumptions)")
    g.add_argument("--max-num-batched-tokens", "--chunked-prefill-size", type=tokens_in(TOKENS),
                   dest="max_num_batched_tokens",
                   help="vLLM max_num_batched_tokens / SGLang chunked_prefill_size (default: the engine's, by GPU "
                        "memory; see the assumptions)")
    g.add_argument("--mem-fraction-static", type=share_arg,
                   help="SGLang: share of the memory free before loading for weights + token pool, 0.85 or 85%% (default: "
                        "SGLang's, by GPU memory and TP)")
    g.add_argument("--max-mamba-cache-size", type=int_arg(COUNT),
                   help="SGLang, hybrid (Mamba / linear-attention) models: request slots of the recurrent-state pool, "
                        "instead of --mamba-full-memory-ratio's split (default: SGLang's split)")
    g.add_argument("--mamba-full-memory-ratio", type=float_arg(MEMORY_RATIO),
                   help="SGLang, hybrid models: the recurrent-state pool gets r / (1 + r) of the memory after the "
                        f"weights (default: SGLang's {SGLANG_MAMBA_FULL_MEMORY_RATIO:g})")
    g.add_argument("--mamba-radix-cache-strategy", choices=MAMBA_RADIX_CACHE_STRATEGIES,
                   help="SGLang, hybrid models: recurrent-state slots each running request holds: no_buffer 3 "
                        "(with --disable-overlap-schedule), extra_buffer 5, extra_buffer_lazy 4 (default: "
                        "SGLang's auto: extra_buffer for Qwen3-Next, Nemotron-H, Falcon-H1, Granite-4.0-H, else "
                        "no_buffer)")
    g.add_argument("--disable-overlap-schedule", action="store_true", default=None,
                   help="SGLang: its overlap scheduler off, as SGLang's flag of this name: the default strategy "
                        "(auto) then gives Qwen3-Next, Nemotron-H, Falcon-H1 and Granite-4.0-H no_buffer (3 "
                        "recurrent-state slots per running request), extra_buffer 4; the speed is not changed (see "
                        "the assumptions) (default: on)")
    g.add_argument("--async-scheduling", action="store_true", default=None,
                   help="vLLM: schedule the next decode step while the device runs this one, as vLLM's flag of "
                        "this name: the engine's host time per step overlaps the device step (a step takes the "
                        "longer of the two); an opt-in on vLLM 0.10-0.13 (--engine-version), the default from 0.14 "
                        "(default: the release's own)")
    g.add_argument("--disable-radix-cache", action="store_true", default=None,
                   help="SGLang: no prefix (radix) cache, as SGLang's flag of this name: each running request of a "
                        "hybrid model holds 1 recurrent-state slot, and with --max-running-requests the state pool "
                        "is that many slots (default: on)")
    if tensor_parallel:
        g.add_argument("--tp", "--tensor-parallel", type=int_arg(COUNT), dest="tensor_parallel",
                       help=f"tensor-parallel devices per replica; memory is per device (default {IW.tensor_parallel})")
        g.add_argument("--pp", "--pipeline-parallel", type=int_arg(COUNT), dest="pipeline_parallel",
                       help="vLLM, SGLang: pipeline-parallel stages per replica (vLLM --pipeline-parallel-size, SGLang "
                            "--pp-size), each of --tp devices, the decoder layers split over them; memory is the "
                            f"worst stage's, per device (default {IW.pipeline_parallel}; fit without --tp or --pp: "
                            "its choice, stages only where tensor parallelism alone does not fit within a machine and "
                            "a staged layout does, as recommend and models --fits-on take; --pp 1: tensor parallelism "
                            "only)")
    g.add_argument("--dp", "--data-parallel", type=int_arg(COUNT), dest="data_parallel",
                   help="vLLM, SGLang: data-parallel engine ranks per replica (vLLM --data-parallel-size, SGLang "
                        "--attn-dp-size), each of --tp devices running its own share of the sequences; an MoE's "
                         "routed experts are split over all of them, and on SGLang the dense MLPs, shared experts "
                         "and lm_head too (default 1)")
    # --expert-parallel: the name a request file and every answer give it (``expert_parallel``), so the web takes
    # that field too, as it takes ``dp`` / ``data_parallel`` (one alias table: the option strings, web/bridge.py)
    g.add_argument("--enable-expert-parallel", "--expert-parallel", action="store_true", default=None,
                   dest="expert_parallel",
                   help="vLLM --enable-expert-parallel (SGLang --ep-size dp x tp): an MoE's routed experts whole "
                        "on each device, split over --dp x --tp devices, instead of each expert tensor-parallel "
                        "(default: off)")
    g.add_argument("--n-gpu-layers", "-ngl", type=int_arg(GPU_LAYERS),
                   help="llama.cpp layers offloaded, the output layer counting as the last (default: all)")
    g.add_argument("--ubatch", type=tokens_in(TOKENS), dest="n_ubatch", help=f"llama.cpp n_ubatch (default {LLAMACPP_N_UBATCH})")
    add_kv_unified_arg(g)
    add_allow_long_context_arg(g)
    if speed:
        g.add_argument("--identical-sequences", action="store_true", default=None,
                       help="every sequence carries the same tokens, as benchmarks such as llama-batched-bench feed "
                            "them: MoE decode reads the experts of fewer routings (default: distinct prompts)")
    if tensor_parallel:
        g.add_argument("--gpus", type=int_arg(LLAMACPP_GPUS),
                       help=f"llama.cpp: GPUs one model is split over; memory is per GPU (default {IW.gpus})")
    g.add_argument("--split-mode", "-sm", choices=SPLIT_MODES,
                   help="llama.cpp: split whole layers (layer, the default) or each matrix by rows (row) over the GPUs")
    g.add_argument("--tensor-split", "-ts", type=list_of(float_arg(SPLIT_SHARE), "proportions", MAX_GPUS),
                   help="llama.cpp: share of the model per GPU of one machine, e.g. 3,1 (one copy; the machines "
                        "are replicas) (default: by free memory, equal for identical GPUs)")
    g.add_argument("--n-cpu-moe", "-ncmoe", type=int_arg(CPU_MOE_LAYERS),
                   help="llama.cpp: keep the MoE expert tensors of the first N layers in host memory")
    for bound, default in (("min", 8), ("max", 4096)):
        g.add_argument(f"--image-{bound}-tokens", type=int_arg(IMAGE_TOKENS), metavar="N",
                       help=f"llama.cpp: {bound}imum tokens per image (and video frame) of a dynamic-resolution "
                            f"model (Qwen2/2.5/3-VL), as llama-server's flag (default: the model's, {default}; "
                            "refused for a fixed-size or tiled model, which llama.cpp does not read it for)")
    add_media_args(g)


def add_engine_version_arg(g: Any) -> None:
    """``--engine-version`` (InferenceWorkload.engine_version): infer, fit, recommend, models --fits-on."""
    g.add_argument("--engine-version", help="vllm/sglang release, e.g. 0.10.1: picks the engine's host work per decode "
                   "step, which the speed follows (estimate/engines.py step_host; default: the newest release with data, "
                   + ", ".join(f"{e} {v}" for e, v in CURRENT_VERSION.items()) + "; a newer one gets its rule and a "
                   "warning)")


def add_allow_long_context_arg(g: Any) -> None:
    """The pool engines' override of the model's window (InferenceWorkload.allow_long_context): infer, fit,
    recommend, models --fits-on."""
    g.add_argument("--allow-long-context", action="store_true", default=None,
                   help="assume vLLM / SGLang are started with their override of the model's window "
                        "(VLLM_ALLOW_LONG_MAX_MODEL_LEN=1, SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN=1): a --context "
                        "past the model's max_position_embeddings (as the engine derives it) is sized with a warning "
                        "instead of refused (default: refused, as the engines do)")


def add_kv_unified_arg(g: Any) -> None:
    """llama.cpp's KV layout for several sequences (InferenceWorkload.kv_unified): infer, fit and recommend."""
    g.add_argument("--kv-unified", action=argparse.BooleanOptionalAction, default=None,
                   help="llama.cpp -kvu: one KV buffer shared by all sequences; --no-kv-unified: one stream per "
                        "sequence (default: llama-server's with -np N, one stream per sequence)")


INFERENCE_FIELDS = ("weights", "context", "concurrency", "output_tokens", "kv_dtype", "engine", "engine_version",
                    "attention", "dtype",
                    "group_size", "paged_block_size", "gpu_memory_utilization", "mem_fraction_static",
                    "max_mamba_cache_size", "mamba_full_memory_ratio", "mamba_radix_cache_strategy",
                    "disable_overlap_schedule", "disable_radix_cache", "async_scheduling",
                    "max_num_seqs",
                    "max_num_batched_tokens", "tensor_parallel", "pipeline_parallel", "data_parallel", "expert_parallel",
                    "n_gpu_layers", "n_ubatch", "kv_unified",
                    "identical_sequences", "allow_long_context", "gpus",
                    "split_mode",
                    "tensor_split", "n_cpu_moe", "image_min_tokens", "image_max_tokens", "metric") + MEDIA_FIELDS


def inference_fields(args: argparse.Namespace) -> dict[str, Any]:
    """InferenceWorkload keyword fields the user gave (the dataclass supplies the rest)."""
    return {k: getattr(args, k) for k in INFERENCE_FIELDS if getattr(args, k, None) is not None}


def add_training_args(p: argparse.ArgumentParser, *, attention: bool = True,
                      budget: str = "--memory or --device") -> None:
    """Training workload flags; ``budget``: what gives this command's memory budget, in its own flags (train, fit:
    --memory or --device; recommend: each option's device), which --zero's help names."""
    g = p.add_argument_group("training workload")
    g.add_argument("--method", choices=METHODS, help=f"full fine-tuning or adapters (default {TW.method})")
    g.add_argument("--rank", type=int_arg(LORA_RANK), help=f"LoRA rank r (default {TW.rank})")
    g.add_argument("--alpha", type=float_arg(LORA_ALPHA), help="LoRA alpha (recorded; no memory effect)")
    g.add_argument("--targets", help="LoRA target modules: q,k,v,o,gate,up,down,in_proj,embed,lm_head,linear (every "
                   "other nn.Linear) or all-linear (PEFT's: every nn.Linear but the output head); default q,k,v,o,gate,up,down. "
                   "On a fused linear (Phi-3 qkv_proj/gate_up_proj, GPT-BigCode c_attn) a part names the whole "
                   "module, adapted once, as PEFT does")
    g.add_argument("--modules-to-save", help="whole modules trained beside LoRA: embed,lm_head (PEFT "
                   "modules_to_save)")
    g.add_argument("--adapter-dtype", choices=STATE_DTYPES, help="LoRA weight dtype (default fp32 under mixed "
                   "precision)")
    g.add_argument("--base-dtype", choices=STATE_DTYPES, help="frozen base dtype (default bf16 for lora/dora; for "
                   "qlora's unquantized tensors fp32, as PEFT's prepare_model_for_kbit_training casts them, bf16 "
                   "under a framework profile or --kernels unsloth)")
    g.add_argument("--optimizer", choices=OPTIMIZERS, help="default adamw (qlora: paged-adamw)")
    g.add_argument("--optimizer-state-dtype", choices=STATE_DTYPES, help="dtype of the optimizer's states (default: "
                   "the dtype of the parameters it updates, fp32 master weights included, as torch optimizers keep "
                   "them; fp32 for bitsandbytes' optimizers)")
    g.add_argument("--optimizer-impl", choices=OPTIMIZER_IMPLS, help="torch optimizer kernel (default fused)")
    g.add_argument("--precision", choices=PRECISIONS,
                   help=f"precision recipe (default {TW.precision}: PyTorch AMP / HF Trainer --bf16)")
    g.add_argument("--tf32", action="store_true", default=None,
                   help="fp32 matmuls on the TF32 tensor cores (torch.backends.cuda.matmul.allow_tf32 = True, "
                        "HF Trainer --tf32): --precision fp32's GEMMs and SDPA's math kernel timed at the device's "
                        "TF32 peak (default: off, PyTorch's default since 1.12: the FP32 peak)")
    g.add_argument("--batch", "--micro-batch", type=count_in(COUNT), dest="micro_batch",
                   help=f"sequences per device per forward (default {TW.micro_batch})")
    g.add_argument("--seq", "--seq-len", type=tokens_arg, dest="seq_len",
                   help=f"tokens per training sequence; 4k = 4096 (default {TW.seq_len})")
    g.add_argument("--target-len", type=tokens_arg, dest="target_len",
                   help="an encoder-decoder's (T5, mT5) target tokens per sequence, the decoder's length; --seq is "
                        "then the source (encoder) length (default: --seq)")
    g.add_argument("--grad-accumulation", type=int_arg(COUNT), help=f"micro-batches per optimizer step (default "
                   f"{TW.grad_accumulation})")
    g.add_argument("--grad-checkpointing", choices=GRAD_CHECKPOINTING,
                   help="activation checkpointing; selective-op: torchtitan's op-level policy (default none; "
                   "full for --method qlora, as peft's prepare_model_for_kbit_training)")
    g.add_argument("--checkpoint-every", type=int_arg(COUNT), help="checkpoint only every N-th layer (full or "
                   f"selective-op; torchtitan selective_ac_option N; default {TW.checkpoint_every})")
    g.add_argument("--recompute-modules", dest="recompute_modules",
                   help="with --grad-checkpointing selective and --precision megatron-*: Megatron-Core's "
                   "--recompute-modules, comma-separated: core_attn, mla_up_proj, moe_act, layernorm, mlp, moe (mlp: dense "
                   "layers' MLP only; moe: an MoE layer's whole forward) (default core_attn)")
    if attention:
        add_attention_arg(g)
    g.add_argument("--attention-kernel", choices=TRAIN_ATTENTION_KERNELS,
                   help="the kernel that runs the attention, for the duration: with --attention sdpa: sdpa (torch's "
                        "dispatch by GPU, dtype, mask and head counts: FlashAttention-2 on sm80+ in fp16/bf16, else "
                        "mem-efficient or math), flash-attn-2, cudnn or "
                        "mem-efficient; with flash: flash-attn-2, flash-attn-3 (sm80+; timed as FlashAttention-2 below Hopper) or triton-flash "
                        "(llm-foundry attn_impl triton); with eager: eager; with flex: flex-attention (default: sdpa for sdpa, flash-attn-2 for "
                        "flash); one the GPU cannot run is refused")
    g.add_argument("--packing", action="store_true", default=None,
                   help="several documents per row (block-diagonal mask)")
    g.add_argument("--doc-len", type=tokens_arg, dest="doc_len",
                   help="with --packing, tokens per packed document: attention masked per document (flash-attn "
                        "varlen, torchtune's FlexAttention) is timed over documents of this length (default: one "
                        "document fills the row)")
    g.add_argument("--loss-chunks", type=int_arg(COUNT), help=f"cross-entropy chunks (torchtune: 8; default {TW.loss_chunks})")
    g.add_argument("--loss", choices=LOSSES, help="ce: the model returns the logits (transformers; torchtune "
                   "CEWithChunkedOutputLoss with --loss-chunks 8); linear-ce: lm_head inside the loss per chunk "
                   "(torchtune LinearCrossEntropyLoss, with --loss-chunks 8); cut-ce: no logits tensor at all (Cut "
                   "Cross-Entropy, Unsloth's fused loss); ce-kept-logits: ce whose loop keeps the shifted fp32 logits through the "
                   "backward (torchtune's recipes of 2024-05); ce-loss-parallel: ce under torch's loss_parallel over the --tp "
                   "vocabulary shards (torchtitan with --tp > 1); fused-xentropy: flash-attn's fused cross-entropy "
                   "kernel, the half-precision logits kept, no fp32 copy (llm-foundry's default loss_fn); "
                   "megatron-ce: Megatron-Core's vocab-parallel cross-entropy, one fp32 copy made the softmax in place, "
                   "the default under --precision megatron-*; liger-flce: Liger-Kernel's fused linear cross-entropy, "
                   "the lm_head inside the loss over row chunks of its own size, its gradients computed in the forward "
                   "(default ce)")
    g.add_argument("--layernorm", choices=LAYERNORMS, help="a LayerNorm model's norms under autocast: torch "
                   "(nn.LayerNorm runs in fp32 and keeps its fp32 input) or low-precision (llm-foundry's LPLayerNorm, "
                   f"its default norm_type: cast to the autocast dtype first) (default {TW.layernorm})")
    g.add_argument("--train-metric-passes", type=int_arg(PASSES), dest="train_metric_passes",
                   help="eager cross-entropy passes the loop runs over each micro-batch's logits after its backward, "
                        "for its training metrics (Composer: 2 for llm-foundry's MPT; eq. E12, the duration) "
                        f"(default {TW.train_metric_passes}, or the --framework profile's)")
    g.add_argument("--framework", choices=tuple(framework_profiles()),
                   help="a training framework's defaults (catalog/data/frameworks.json, each with its source file "
                        "and line): llm-foundry (fused cross-entropy, low-precision LayerNorm, 2 metric passes, "
                        "Triton FlashAttention), torchtune and torchtitan (SDPA, K/V copied to every query head "
                        "before it); applied only to the settings not given, each named in the assumptions; "
                        "read at: " + ", ".join(p.label for p in framework_profiles().values() if p.pinned)
                        + f" (default {TW.framework})")
    g.add_argument("--kernels", choices=KERNELS, help="layer implementation: pytorch (transformers/PEFT/torchtune "
                   "modules), unsloth (Unsloth's fused LoRA kernels; Unsloth's recipe: --kernels unsloth --loss cut-ce "
                   "--grad-checkpointing full --checkpoint-offload) or liger (Liger-Kernel's RMSNorm, SwiGLU/GeGLU and "
                   "RoPE on the model types apply_liger_kernel_to_* patches; its default recipe adds --loss liger-flce; "
                   f"the step is timed as pytorch's) (default {TW.kernels})")
    g.add_argument("--mamba-path", choices=MAMBA_PATHS, help="what runs the Mamba layers: cuda-kernels (mamba_ssm + "
                   "causal-conv1d installed on a CUDA GPU, or built from source on ROCm) or torch (transformers' reference "
                   "functions, which keep several times more for the backward) (default: cuda-kernels on a CUDA GPU, "
                   "torch elsewhere, ROCm included)")
    g.add_argument("--checkpoint-impl", choices=CHECKPOINT_IMPLS, help="with --grad-checkpointing full: torch.utils."
                   "checkpoint use_reentrant=False (non-reentrant: transformers >= 5, torchtune) or True (reentrant: "
                   "transformers 4.35-4.x; recomputes each layer's output too), or use_reentrant=False on torch 1.13 "
                   "(non-reentrant-no-early-stop: its recomputation re-runs each layer's last matmul too) "
                   f"(default {TW.checkpoint_impl})")
    g.add_argument("--nf4-quantizer", choices=NF4_QUANTIZERS, help="with --method qlora: what quantizes the base on "
                   "the device and runs its matmuls: bitsandbytes (>= 0.43.2: PEFT/transformers), bitsandbytes-0.42 "
                   "(before 0.43.2: each 4-bit matmul keeps its input for the backward), lightning-bnb-0.42 (litgpt: "
                   "Lightning Fabric over bitsandbytes 0.42.0, lm_head quantized too), torchao (torchtune to_nf4) or "
                   "torchao-0.1 (unchunked, torchtune 2024-05); its transient is the 'model init' phase (default "
                   f"{TW.nf4_quantizer})")
    g.add_argument("--lora-dropout", choices=LORA_DROPOUTS, help="LoRA dropout on the adapters' inputs: none (PEFT/"
                   "torchtune default 0), per-module (each adapted linear keeps a dropped-out copy and its mask: PEFT "
                   f"lora_dropout > 0) or fused-qkv (litgpt: one adapter on the fused q/k/v) (default {TW.lora_dropout})")
    g.add_argument("--nf4-format", choices=NF4_FORMATS, help="with --method qlora: the base's 4-bit format: nf4-dq "
                   "(double-quantized block scales, the QLoRA paper's recipe) or nf4 (fp32 block scales: transformers' "
                   f"bnb_4bit_use_double_quant default, litgpt --quantize bnb.nf4) (default {TW.nf4_format})")
    g.add_argument("--loop-keeps-graph", action="store_true", default=None, help="with --method qlora: the training loop "
                   "keeps the step's loss and logits referenced into the next step's forward (litgpt), so what the autograd graph holds "
                   "outside its saved tensors (bitsandbytes 0.42's kept matmul inputs) lives on")
    g.add_argument("--deepspeed-gather", choices=DEEPSPEED_GATHERS, help="with --zero 3: DeepSpeed's parameter "
                   "gather: current (>= 0.9: one rank uses its partition in place) or pre-0.9 (one rank gathers too: "
                   f"a buffer beside the partition's device copy) (default {TW.deepspeed_gather})")
    g.add_argument("--zero-grad", choices=ZERO_GRADS, help="what the loop's optimizer.zero_grad does between steps: "
                   "set-to-none (frees the gradients) or zeros (set_to_none=False: they stay allocated into the next "
                   f"forward; accelerate <= 0.27, torch < 2.0) (default {TW.zero_grad})")
    g.add_argument("--checkpoint-offload", action="store_true", default=None,
                   help="with --grad-checkpointing full: the kept layer inputs wait in host RAM (Unsloth "
                        "use_gradient_checkpointing='unsloth')")
    g.add_argument("--optimizer-in-backward", action="store_true", default=None,
                   help="update each parameter during backward")
    g.add_argument("--gpus", type=int_arg(COUNT), help=f"devices in total (default {TW.gpus}; fit/recommend: the devices they "
                   "place)")
    g.add_argument("--zero", type=int_arg(ZERO_STAGE), help=f"DeepSpeed ZeRO stage 0-3 (default {TW.zero}; with a memory "
                   f"budget, {budget}, on several devices, or on one under --offload optimizer: the least-sharded "
                   "stage that fits, from ZeRO-1 under that offload; none on an Apple GPU)")
    g.add_argument("--fsdp", choices=FSDP_MODES, help="PyTorch FSDP sharding strategy")
    g.add_argument("--tp", "--tensor-parallel", type=int_arg(COUNT), dest="tp",
                   help=f"tensor-parallel degree (default {TW.tp}; fit sizing serving: the degree of each replica, default "
                        "fit's choice)")
    g.add_argument("--pp", type=int_arg(COUNT), help=f"pipeline-parallel stages (default {TW.pp}; fit sizing serving: "
                   "vLLM / SGLang stages of each replica, a replica tp x pp devices; without --tp, fit's choice of tp)")
    g.add_argument("--virtual-stages", type=int_arg(COUNT), help="with --pp: model chunks per device of Megatron's "
                   f"interleaved schedule, for the duration's pipeline bubble (default {TW.virtual_stages}: plain 1F1B)")
    g.add_argument("--pipeline-split", choices=PIPELINE_SPLITS, help="with --pp: how the layers are split over the "
                   "stages: even (Megatron, DeepSpeed uniform: the remainder on the first stages), torchtitan-9dec370 "
                   "or torchtitan (its generated split points) (default even)")
    g.add_argument("--tp-comm-overlap", action="store_true", default=None,
                   help="with --tp: tensor-parallel collectives overlap the GEMMs (Megatron --tp-comm-overlap, "
                        "torchtitan async TP), for the duration (default: not overlapped)")
    g.add_argument("--tp-backward-overlap", action="store_true", default=None,
                   help="with --tp: Megatron-LM's backward overlap of each column-parallel linear's input-gradient "
                        "all-reduce (reduce-scatter and input re-gather under --sequence-parallel) with its GEMMs, on "
                        "in Megatron since 2021-09, for the duration (default: off, PyTorch tensor parallelism)")
    g.add_argument("--ep", type=int_arg(COUNT), help=f"expert-parallel degree, MoE (default {TW.ep})")
    g.add_argument("--etp", type=int_arg(COUNT),
                   help="with a Megatron precision, MoE: the experts' tensor-parallel size, Megatron "
                        "expert_tensor_parallel_size (Megatron-Bridge MoE recipes: 1); --etp x --ep x --pp must "
                        "divide --gpus (default: --tp, Megatron-Core's rule)")
    g.add_argument("--moe-dispatcher", choices=MOE_DISPATCHERS,
                   help="with --ep: the MoE token dispatcher, Megatron-Core --moe-token-dispatcher-type: alltoall (a "
                        "copy per chosen expert), allgather (all tokens of the EP x ETP group; Megatron-Core's own "
                        "default) or flex (DeepEP / HybridEP: once per destination rank and machine) (default "
                        "alltoall, the MoE recipes' and torchtitan's)")
    g.add_argument("--ep-comm-overlap", action="store_true", default=None,
                   help="with --ep: Megatron-Core --overlap-moe-expert-parallel-comm, the expert-parallel exchange "
                        "overlaps another micro-batch's compute (combined 1F1B) (default: not overlapped)")
    g.add_argument("--overlap-grad-reduce", action="store_true", default=None,
                   help="with a Megatron precision: Megatron --overlap-grad-reduce, the grad buffer reduced bucket by "
                        "bucket while the last micro-batch's backward runs (default: off, Megatron-LM's default; "
                        "Megatron-Bridge's recipes turn it on)")
    g.add_argument("--overlap-param-gather", action="store_true", default=None,
                   help="with --overlap-grad-reduce and --zero >= 1 (the distributed optimizer): Megatron "
                        "--overlap-param-gather, the updated parameters all-gathered bucket by bucket during the next "
                        "step's first forward (default: off, Megatron-LM's default)")
    g.add_argument("--gradient-accumulation-fusion", action=argparse.BooleanOptionalAction, default=None,
                   help="Megatron gradient_accumulation_fusion: TE's wgrad GEMMs accumulate into the fp32 main_grad, "
                        "no separate accumulation pass; --no-gradient-accumulation-fusion: Megatron's DDP hook adds "
                        "each micro-batch's gradient (default: on under the megatron precisions, Megatron-LM's and "
                        "Megatron-Bridge's default)")
    g.add_argument("--moe-router-fusion", action=argparse.BooleanOptionalAction, default=None,
                   help="Megatron-Core moe_router_fusion: the MoE router's top-k and score function in TE's fused "
                        "kernels; --no-moe-router-fusion: its unfused torch ops, more launches and traffic (default: "
                        "off, Megatron-Core's TransformerConfig default and Megatron-Bridge's recipes'; Megatron-"
                        "Bridge's performance configs of GPT-OSS, Qwen3, DeepSeek, Kimi and Qwen-VL turn it on: give "
                        "it for their runs; needs an MoE model and a megatron precision)")
    g.add_argument("--sequence-parallel", action=argparse.BooleanOptionalAction, default=None,
                   help="Megatron sequence parallelism (needs --tp; default off; recommend's training scale-out "
                        "search chooses it under a megatron precision when neither is given, "
                        "--no-sequence-parallel keeps it off there)")
    g.add_argument("--offload", choices=OFFLOAD, help="CPU offload, ZeRO-Offload / -Infinity (default none): "
                   "optimizer needs ZeRO 1-3 or --fsdp, params ZeRO 3 or --fsdp full/hybrid")
    g.add_argument("--gpus-per-node", type=int_arg(MACHINE_GPUS), help="devices per machine: --fsdp hybrid, and where the "
                   "data-parallel collectives leave the machine; serving (fit, and its llama.cpp auto-fit): the "
                   "machine the tensor-parallel degrees are chosen within, and the GPUs one llama.cpp copy is split "
                   "over (the machines replicas); recommend: the machines your own (bare) devices are, their cards "
                   "searched up to one of them (an instance is its own machine); at most "
                   f"{MACHINE_GPUS.high:g}, a GB200/GB300 NVL72 rack (default: the instance's count, "
                   f"else {TW.gpus_per_node})")
    g.add_argument("--network", help="network between machines when --gpus exceeds --gpus-per-node, for the duration; "
                   "serving (fit): when a copy's tensor-parallel group or pipeline stages span machines of "
                   "--gpus-per-node, for its speed: "
                   "a catalog interconnect (ib-ndr: one 400 Gb/s port per device; efa-p5: per machine) or a bandwidth "
                   "per machine ('1600 Gb/s', '8x400Gb/s') (default: the instance's network, else none: a warning)")
    g.add_argument("--grad-sync", choices=GRAD_SYNC, help="DDP with --grad-accumulation, for the duration: all-reduce "
                   "the gradients once per optimizer-step (no_sync: HF accelerate / Trainer; the default) or every "
                   "micro-step (a loop without no_sync)")
    add_framework_args(g)
    g.add_argument("--tokens", type=count_in(TRAIN_TOKENS), help="tokens to train on, for the duration (e.g. 10B)")
    g.add_argument("--utilization", type=share_arg, help="utilisation of the executed FLOPs for the duration, 0.4 "
                   "or 40%% (default: calibrated per GPU architecture on published runs, estimate/efficiency.py)")


def add_framework_args(g: argparse._ArgumentGroup) -> None:
    """Framework settings that change a step's memory (formulas/activation_offload.py, context_parallel.py,
    float8_training.py, compiled_activations.py, fsdp_flat_param.py)."""
    g.add_argument("--fsdp-version", type=int_arg(FSDP_VERSION),
                   help=f"FSDP implementation: 2 fully_shard, 1 FullyShardedDataParallel flat parameters (default "
                        f"{TW.fsdp_version})")
    g.add_argument("--fsdp2-units", choices=FSDP2_UNITS,
                   help="with FSDP2: which units are unsharded when: largest-two (the two largest units, wrapping "
                        "not traced), torchtitan (root unit = embedding + norm + output kept unsharded from forward "
                        "to backward, as torch < 2.8 keeps the root; last block kept after the forward; the "
                        "all-gather copy-in stream's pool), torchtitan-resharded (the root resharded after the "
                        "forward: torch >= 2.8) or torchtune (shard_model: the root kept, every block resharded "
                        f"after its forward, the last too) (default {TW.fsdp2_units})")
    g.add_argument("--fsdp1-lora-wrap", choices=FSDP1_LORA_WRAPS,
                   help="with FSDP1 and LoRA: adapters-apart (every LoRA matrix its own unit: torchtune "
                        "lora_fsdp_wrap_policy, PEFT fsdp_auto_wrap_policy; gradients of the adapters only, the root "
                        "kept unsharded, one block at a time) or with-layers (the adapters in their decoder layer's "
                        "unit, use_orig_params: that unit's whole flat gradient) "
                        f"(default {TW.fsdp1_lora_wrap})")
    g.add_argument("--context-parallel", "--cp", type=int_arg(COUNT), dest="context_parallel",
                   help="context-parallel degree: each sequence split over N devices, ring attention: torchtitan's "
                        f"(needs --fsdp) or, under a megatron precision, Megatron-Core's (default {TW.context_parallel})")
    g.add_argument("--cp-kind", choices=CP_KINDS, dest="cp_kind",
                   help="how --context-parallel runs the attention: ring (K/V passed round the ranks, as above) or "
                        "ulysses (DeepSpeed-Ulysses under ZeRO, as Arctic Long Sequence Training: four all-to-alls a "
                        "layer shard the heads inside the attention; heads divisible by N) "
                        f"(default {TW.cp_kind})")
    g.add_argument("--activation-offload", action="store_true", default=None,
                   help="saved activations offloaded to host memory (torchtune enable_activation_offloading)")
    g.add_argument("--tiled-mlp", action="store_true", default=None,
                   help="each dense gated MLP run over ceil(seq / hidden) sequence shards, keeping only its input "
                        "(Arctic Long Sequence Training: DeepSpeed TiledMLP, ArcticTraining tiled_mlp_compute); "
                        "full fine-tuning, no --tp")
    g.add_argument("--float8", action="store_true", default=None,
                   help="torchao float8 linears; with --fsdp (FSDP2) the linears' weights are all-gathered in float8")
    g.add_argument("--float8-recipe", choices=FLOAT8_RECIPES,
                   help="with --float8: torchao (Float8Linear, tensorwise), torchao-rowwise / torchao-rowwise-gw-hp "
                        "(torchao's ROWWISE / ROWWISE_WITH_GW_HP recipes: per-row scales, bf16 all-gather; the latter's "
                        "grad_weight GEMM in bf16), transformer-engine (te.Linear, "
                        f"fused cast-transpose; its float8 weight copies saved per layer, or cached under "
                        "gradient accumulation; delayed scaling) or transformer-engine-current (the same under "
                        "current scaling, Megatron-Bridge fp8_cs: an amax pass before each cast) or "
                        "transformer-engine-mxfp8 (MXFP8BlockScaling, Megatron-Bridge mxfp8: an E8M0 scale per 32 "
                        "elements, rowwise and columnwise copies; Blackwell B200/GB200/B300 only) "
                        f"(default {TW.float8_recipe})")
    g.add_argument("--fp8-param-gather", action=argparse.BooleanOptionalAction, default=None,
                   help="with a megatron precision, --float8, a transformer-engine recipe and --zero 1: Megatron's "
                        "--fp8-param-gather, the te linears' weights kept as float8 parameters (1 B, + the transpose "
                        "on Hopper; no bf16 weight, no float8 copy), the optimizer's shard cast once per step, the "
                        "all-gather at 1 B; --no-fp8-param-gather: bf16 weights and TE's float8 copies (default: off, "
                        "Megatron-LM's own flag default; Megatron-Bridge's float8 recipes turn it on)")
    g.add_argument("--compile", action="store_true", default=None,
                   help="torch.compile: the partitioner's saved activations (fused RMSNorm, SwiGLU) and, "
                        "for the duration, inductor's fused memory-bound kernels")
    g.add_argument("--compile-scope", choices=COMPILE_SCOPES,
                   help="with --compile: layers+loss (torchtune compiles each layer and the cross-entropy, which then "
                        "keeps its input logits, not the fp32 log-softmax), layers (torchtitan 9dec370: the loss "
                        "eager) or layers+loss+upcast (torchtitan e7c0cae: the compiled loss upcasts the model's half "
                        "logits and keeps them) "
                        f"(default {TW.compile_scope})")
    g.add_argument("--batch-shapes", choices=BATCH_SHAPES,
                   help="with --metric reserved or nvidia-smi: variable (batches padded to their longest sample: a "
                        "calibrated fragmentation reserve) or fixed (the same shapes every step, e.g. torchtitan's "
                        "packed fixed-length sequences: reserve = blocks cached on the other CUDA streams, FSDP2's "
                        f"reduce-scatter outputs) (default {TW.batch_shapes})")


TRAINING_FIELDS = ("method", "rank", "alpha", "targets", "modules_to_save", "adapter_dtype", "base_dtype", "optimizer",
                   "optimizer_state_dtype", "optimizer_impl", "precision", "tf32", "micro_batch", "seq_len",
                   "target_len", "grad_accumulation", "grad_checkpointing", "checkpoint_every", "recompute_modules", "attention", "attention_kernel", "packing", "doc_len", "loss_chunks", "loss", "layernorm", "train_metric_passes", "framework", "checkpoint_offload", "checkpoint_impl", "kernels", "mamba_path", "nf4_quantizer", "lora_dropout", "nf4_format", "loop_keeps_graph", "deepspeed_gather", "zero_grad",
                   "optimizer_in_backward", "gpus", "zero", "fsdp", "tp", "pp", "virtual_stages", "pipeline_split", "tp_comm_overlap", "tp_backward_overlap", "ep", "etp", "moe_dispatcher", "ep_comm_overlap", "overlap_grad_reduce", "overlap_param_gather", "gradient_accumulation_fusion", "moe_router_fusion", "sequence_parallel",
                   "offload", "gpus_per_node", "network", "grad_sync", "metric", "fsdp_version", "fsdp2_units",
                   "fsdp1_lora_wrap", "context_parallel", "cp_kind",
                   "activation_offload", "tiled_mlp", "float8", "float8_recipe", "fp8_param_gather", "compile", "compile_scope",
                   "batch_shapes")


TRAINING_FLAG = {"micro_batch": "--batch", "seq_len": "--seq"}  # the fields whose flag is not --field-name


def refuse_training_flags(args: argparse.Namespace) -> None:
    """``fit``/``recommend`` without --train answer a serving question: a training flag given there would be ignored
    (e.g. ``--method lora --tokens 1B`` answered for serving, exit 0), so it is refused, naming the flags."""
    given = [k for k in TRAINING_FIELDS if k not in ("attention", "metric")
             and getattr(args, k, None) not in (None, False)]
    given += [k for k in ("tokens", "utilization") if getattr(args, k, None) is not None]
    if given:
        flags = ", ".join(TRAINING_FLAG.get(k, "--" + k.replace("_", "-")) for k in given)
        raise InputError(f"{flags} appl{'ies' if len(given) == 1 else 'y'} to --train (add --train, or drop "
                         f"{'it' if len(given) == 1 else 'them'} to size serving"
                         + ("; serving on N devices: --count N" if "gpus" in given and "count" in vars(args)
                            else "")
                         + ("; sequences served at once: --concurrency" if "micro_batch" in given else "") + ")")


# flags of serving that are not InferenceWorkload fields: fit's llama.cpp auto-fit and host CPU
SERVING_ONLY = ("auto", "free", "fit_target", "host_memory", "host_device", "request_rate")
SERVING_FLAG = {"paged_block_size": "--block-size", "n_ubatch": "--ubatch", "tensor_parallel": "--tp",
                "pipeline_parallel": "--pp", "data_parallel": "--dp", "expert_parallel": "--enable-expert-parallel"}


def refuse_hardware_file_alone(args: argparse.Namespace) -> None:
    """``infer``/``train`` read ``--hardware-file`` for ``--device`` only: without a device the file would be ignored
    unread (a missing file or a folder answered, exit 0), so it is refused, as ``--tokens`` without a device is."""
    if args.hardware_file and not args.device:
        raise InputError("--hardware-file needs --device (the file adds devices and instances for --device to name)")


def refuse_untimed_utilization(args: argparse.Namespace) -> None:
    """``--utilization`` is the duration's share of the peak FLOP/s (estimate/duration.py): without ``--tokens`` (and
    the ``--device`` the duration needs) nothing is timed and it would be ignored, so it is refused."""
    if args.utilization is not None and not args.tokens:
        needs = "--tokens" if getattr(args, "device", None) else "--device and --tokens"
        raise InputError(f"--utilization needs {needs} (it is the share of the device's peak FLOP/s the training "
                         "duration uses)")


def flag_of(field: str, parser: argparse.ArgumentParser) -> str | None:
    """The option of ``parser`` that sets workload field ``field`` (TRAINING_FLAG / SERVING_FLAG, else --field-name),
    or None where the command has none: what a FieldError names on the CLI, and whose web key names it there."""
    flag = TRAINING_FLAG.get(field) or SERVING_FLAG.get(field) or "--" + field.replace("_", "-")
    return flag if any(flag in a.option_strings for a in parser._actions) else None


# a field a command also sets from another of its flags: the training run's device count from --count (train, fit
# --train: "devices (default: the instance's count, else --gpus, else 1)")
SET_ALSO_BY = {"gpus": "--count"}


def typed_flag(field: str, parser: argparse.ArgumentParser, gave: Callable[[str], bool] | None = None) -> str | None:
    """:func:`flag_of`, except where the user set ``field`` through the other flag that sets it (``SET_ALSO_BY``)
    and not through its own: that flag, so an error names what was typed (``--count`` in ``fit --train --count 8
    --tp 3``, not ``--gpus``). ``gave(dest)``: whether the user gave the option of that dest."""
    flag = flag_of(field, parser)
    other = SET_ALSO_BY.get(field)
    if (gave is None or other is None or not any(other in a.option_strings for a in parser._actions)
            or not gave(other[2:].replace("-", "_")) or (flag is not None and gave(flag[2:].replace("-", "_")))):
        return flag
    return other


SHARED = ("attention", "gpus", "metric")  # --attention and --metric serve both modes; fit's and recommend's --gpus is
# the training flag


def refuse_serving_flags(args: argparse.Namespace) -> None:
    """``fit``/``recommend`` with --train answer a training question: a serving flag given there would be ignored
    (``fit --train --context 64k --engine sglang``, ``recommend --train --images 2`` answered for the training run,
    exit 0), so it is refused, naming the flags -- the mirror of ``refuse_training_flags``."""
    given = [k for k in (*INFERENCE_FIELDS, *SERVING_ONLY)
             if k not in SHARED and getattr(args, k, None) not in (None, False)]
    if given:
        flags = ", ".join(SERVING_FLAG.get(k, "--" + k.replace("_", "-")) for k in given)
        raise InputError(f"{flags} appl{'ies' if len(given) == 1 else 'y'} to serving, not to --train (drop "
                         f"{'it' if len(given) == 1 else 'them'}, or drop --train to size serving)")


def training_fields(args: argparse.Namespace) -> dict[str, Any]:
    """TrainingWorkload keyword fields the user gave (the dataclass supplies the rest), each read now: a value that
    is parsed only where it is used (``--network``, read by the duration alone) is read here too, by its one reader,
    so a bad one is refused (one line, exit 2; the web's 400) whether or not the answer uses it (probe31: ``train
    --gpus 16 --network garbage`` answered, exit 0, without ``--tokens``)."""
    fields = {k: getattr(args, k) for k in TRAINING_FIELDS if getattr(args, k, None) is not None}
    check_unread_values(fields, getattr(args, "hardware_file", None) or ())
    return fields


def check_unread_values(fields: dict[str, Any], hardware_files: Sequence[str | Path] = ()) -> None:
    """The one check of the training values whose type the parser cannot give (their reader needs the catalog and
    ``--hardware-file``): ``network`` through request/quantities.py ``parse_network``, the reader the duration, a
    request's ``resources.network`` and the web use (the machine size only scales the answer, so 1 here)."""
    if fields.get("network") is not None:
        parse_network(fields["network"], 1, hardware_files)
