"""TrainingWorkload: a training or fine-tuning run, validated up front (closed sets listed in errors).

Everything that changes the memory of a step is a field here; model-dependent checks (TP dividing the
heads, QLoRA needing quantizable linears, EP dividing the experts) happen in ``training.compose`` where the
model is known. Names follow ``docs/nomenclature.md`` and ``docs/training.md``.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass, field
from operator import attrgetter, contains
from typing import Any

from ..errors import DeviceCannotRunError, FieldError, InputError
from ..frozen import fast_init
from ..inputs import not_true_or_false
from ..numbers import COUNT, DEVICE_MEMORY, HEADROOM, LORA_ALPHA, LORA_RANK, MACHINE_GPUS, TOKENS, ZERO_STAGE
from ..suggest import unknown_choice
from .given import tracks_given
from .workload import DEVICES, GPU_RUNTIMES, check_memory_target, check_numbers, read_number

METHODS = ("full", "lora", "dora", "qlora")
OPTIMIZERS = ("adamw", "adam", "adamw-8bit", "paged-adamw", "paged-adamw-8bit", "sgd", "sgd-momentum",
              "adafactor", "lion", "lion-8bit", "paged-lion", "paged-lion-8bit")
PRECISIONS = ("fp32", "bf16-mixed", "fp16-mixed", "fsdp-bf16-mixed", "bf16", "fp16", "deepspeed-bf16", "deepspeed-fp16",
              "megatron-bf16", "megatron-fp16")
STATE_DTYPES = ("fp32", "bf16", "fp16")
OPTIMIZER_IMPLS = ("fused", "foreach", "for-loop")
GRAD_CHECKPOINTING = ("none", "full", "selective", "selective-op")
MEGATRON_PRECISIONS = ("megatron-bf16", "megatron-fp16")
# Megatron-Core's selective recompute by module (``--recompute-granularity selective --recompute-modules ...``,
# NVIDIA/Megatron-LM @d98e8a64 megatron/core/transformer/transformer_config.py ``recompute_modules``, default
# ['core_attn']): the modules whose saved tensors grad_checkpointing 'selective' drops, each by the rule of
# formulas/training_activations.py ``layer_saved_terms`` (eq. R1-R6). 'shared_experts' and 'mhc' are Megatron's
# too, not modelled (refused by name).
RECOMPUTE_MODULES = ("core_attn", "mla_up_proj", "moe_act", "layernorm", "mlp", "moe")
DEFAULT_RECOMPUTE_MODULES = ("core_attn",)
# The checkpointing a workload that states none gets: QLoRA's recipe turns it on. peft's
# ``prepare_model_for_kbit_training(model, use_gradient_checkpointing=True, ...)`` (peft 0.21.2 and huggingface/peft
# src/peft/utils/other.py lines 158-159 @5d602fdb, its default True) calls ``model.gradient_checkpointing_enable``
# on a k-bit model (lines 228, 258): every decoder layer recomputed ('full'). Every other method: none.
QLORA_GRAD_CHECKPOINTING_WHY = "default for qlora: peft prepare_model_for_kbit_training(use_gradient_checkpointing=True)"


class MethodDefault(str):
    """A ``grad_checkpointing`` the workload took from its method (:func:`default_grad_checkpointing`), not one the
    caller stated: equal to the plain string everywhere it is read. ``dataclasses.replace`` copies it as this type,
    so a copy with another ``method`` resolves it again from that method (TrainingWorkload.__post_init__) instead of
    keeping the old method's default labelled "(default)"."""

    __slots__ = ()


class PrecisionDefault(str):
    """A ``loss`` the workload took from its precision (:func:`default_loss`), not one the caller stated: a copy
    with another ``precision`` resolves it again (TrainingWorkload.__post_init__), as :class:`MethodDefault`."""

    __slots__ = ()


def default_loss(precision: str) -> str:
    """The ``loss`` of a workload that states none: Megatron's own vocabulary-parallel cross-entropy ('megatron-ce')
    under the megatron precisions, transformers' 'ce' otherwise. The one rule."""
    return PrecisionDefault("megatron-ce" if precision in MEGATRON_PRECISIONS else "ce")


def normalize_recompute_modules(names: str | tuple[str, ...] | list[str]) -> tuple[str, ...]:
    """Megatron's recompute module names from 'mla_up_proj,mlp' / ['moe_act'], in RECOMPUTE_MODULES order, each
    once. Unknown (or one of Megatron's not modelled here) -> FieldError naming it."""
    items = [t.strip().lower() for t in (names.split(",") if isinstance(names, str) else names) if t.strip()]
    for t in items:
        if t not in RECOMPUTE_MODULES:
            raise FieldError("recompute_modules", f"recompute module {t!r} is not modelled; choose from: "
                             + ", ".join(RECOMPUTE_MODULES))
    return tuple(m for m in RECOMPUTE_MODULES if m in items)


def default_grad_checkpointing(method: str) -> str:
    """The ``grad_checkpointing`` of a workload that states none: 'full' for QLoRA (peft's k-bit preparation, above),
    'none' otherwise. The one rule (TrainingWorkload, the CLI, request files, ``measure train`` and the web
    calculator all reach it)."""
    return MethodDefault("full" if method == "qlora" else "none")
# torch.utils.checkpoint's implementations (use_reentrant=False | True; formulas/training_activations.py
# reentrant_recompute_bytes), and use_reentrant=False as torch 1.13 ran it: its saved-tensor unpack hook re-ran the
# whole checkpointed function (torch v1.13.1 torch/utils/checkpoint.py ``_checkpoint_without_reentrant``: ``_unused =
# function(*args, **kwargs)``), where later releases stop the recomputation once the backward's tensors are rebuilt
# (``early_stop``, default True: torch 2.13.0 torch/utils/checkpoint.py lines 773-804, raised at lines 1128-1131)
CHECKPOINT_IMPLS = ("non-reentrant", "reentrant", "non-reentrant-no-early-stop")


def recomputes_whole_layer(checkpoint_impl: str) -> bool:
    """Whether a full recomputation under ``checkpoint_impl`` re-runs each layer's last matmul too
    (formulas/selective_checkpointing.py ``full_recompute_flops`` early_stop False): the reentrant
    ``CheckpointFunction`` and the non-reentrant checkpoint without early stop do; the early-stopping one does not."""
    return checkpoint_impl in ("reentrant", "non-reentrant-no-early-stop")
TRAIN_ATTENTION = ("sdpa", "flash", "eager", "flex")
# the kernel that runs a training step's attention (estimate/efficiency.py attention_kernel_share: its speed): the
# attention API the model calls (``attention``) decides which kernels it can be. sdpa: torch's
# F.scaled_dot_product_attention, whose dispatcher picks a backend per GPU, dtype and mask (formulas/sdpa_dispatch.py sdpa_backend), or
# one backend forced (flash-attn-2: its flash backend, FlashAttention-2 vendored; cudnn; mem-efficient: xformers'
# cutlass kernel); flash: the flash-attn package (flash-attn-2: flash_attn_func, HF attn_implementation
# "flash_attention_2"; flash-attn-3: its hopper/ build) or a Triton FlashAttention (triton-flash: llm-foundry's
# attn_impl 'triton', flash_attn_triton.py on triton_pre_mlir); eager: the unfused matmul-softmax-matmul; flex: torch's
# FlexAttention (torch.nn.attention.flex_attention, compiled to a Triton kernel over a BlockMask: torchtune's path for
# packed documents, modules/attention_utils.py @bd2a0fc ``_sdpa_or_flex_attention``, lines 185-252)
TRAIN_ATTENTION_KERNELS = ("sdpa", "flash-attn-2", "flash-attn-3", "triton-flash", "cudnn", "mem-efficient", "eager",
                           "flex-attention")
KERNELS_OF_ATTENTION = {"sdpa": ("sdpa", "flash-attn-2", "cudnn", "mem-efficient"),
                        "flash": ("flash-attn-2", "flash-attn-3", "triton-flash"), "eager": ("eager",),
                        "flex": ("flex-attention",)}
# the kernel each attention API runs when none is named (one home: the estimate's assumption, the duration's speed)
DEFAULT_ATTENTION_KERNEL = {"sdpa": "sdpa", "flash": "flash-attn-2", "eager": "eager", "flex": "flex-attention"}
DEFAULT_ATTENTION_KERNEL_WHY = {
    "sdpa": "torch SDPA's dispatch (torchtitan, torchtune and transformers' default attn_implementation 'sdpa'): "
            "the first of its flash backend (FlashAttention-2), mem-efficient and math that takes the GPU, dtype, "
            "mask and head counts (formulas/sdpa_dispatch.py, from sdp_utils.cpp; attention_kernel_timed names it)",
    "flash": "the flash-attn package's FlashAttention-2 CUDA kernels (flash_attn_func; transformers "
             "attn_implementation 'flash_attention_2')",
    "eager": "the unfused matmul, softmax, matmul (formulas/eager_attention_traffic.py)",
    "flex": "torch FlexAttention's compiled Triton kernel over a BlockMask of 128 x 128 tiles (torchtune's packed "
            "path, modules/attention_utils.py; formulas/attention_mask.py eq. (M5))",
}


def check_kernels(w: TrainingWorkload) -> None:
    """Refuse (one line) a named ``attention_kernel`` that the workload's ``attention`` API does not run
    (KERNELS_OF_ATTENTION), and an attention, loss or layer kernel the workload's device cannot run
    (:func:`attention_off_gpu`, :func:`gpu_kernels_off_gpu`). Checked on construction without a framework profile; with one, after the profile has
    filled the unstated attention (estimate/framework.py ``with_framework``): llm-foundry's 'triton-flash' named
    alone runs under the profile's attention 'flash', not under llmsizer's default 'sdpa'."""
    kernel, attention = w.attention_kernel, w.attention
    if kernel is not None and kernel not in KERNELS_OF_ATTENTION[attention]:
        # the attention the profile set, not the caller: say so (the caller named only the kernel)
        by_profile = w.framework != "none" and w.given is not None and "attention" not in w.given
        raise FieldError("attention_kernel", also=("attention",), message=(
            f"attention_kernel {kernel!r} does not run attention {attention!r}"
            + (f" (framework {w.framework} sets attention {attention!r})" if by_profile else "")
            + f"; with attention {attention!r} choose from: {', '.join(KERNELS_OF_ATTENTION[attention])}"
            + (", or give attention" if by_profile else "")))
    # a profile's kernel is not named; during construction (``given`` not yet recorded, no profile applied) a kernel
    # is the caller's
    named = kernel is not None and (w.given is None or "attention_kernel" in w.given)
    where = "cpu" if w.device == "cpu" else _OFF_CUDA_RUNTIMES.get(w.gpu_runtime)
    off = attention_off_gpu(attention, attention_kernel_of(attention, kernel), named, where)
    field = "attention_kernel" if named else "attention"
    if off is None and where is not None:
        field, off = next(gpu_kernels_off_gpu(w.loss, w.kernels, where), (field, None))
    if off is not None:  # a setting the device cannot run: exit 2 where it is named, a rejected option in a search
        if w.framework != "none" and w.given is not None and field not in w.given and \
                not (field == "attention_kernel" and "attention" in w.given):  # the profile's value: name the profile
            raise DeviceCannotRunError("framework", f"framework {w.framework} sets {off}")
        raise DeviceCannotRunError(field, off)


def gpu_kernels_off_gpu(loss: str, kernels: str, where: str) -> Iterator[tuple[str, str]]:
    """The loss and layer kernels that are Triton GPU kernels, as (field, why) for each one refused off a CUDA or
    ROCm GPU (``where``, as :func:`attention_off_gpu`): flash-attn's fused cross-entropy
    (flash_attn/ops/triton/cross_entropy.py, a Triton kernel; llm-foundry's default loss_fn) and Unsloth's fused
    kernels (Triton). Triton's wheel builds two backends, NVIDIA and AMD (triton-lang/triton setup.py @ 002e309c,
    3.9.0 dev: ``BackendInstaller.copy(["nvidia", "amd"])``; any other is an out-of-tree plugin named by
    TRITON_PLUGIN_DIRS), so neither runs on a CPU, an Apple GPU, a TPU or a Gaudi."""
    on = _ON[where]
    if loss == "fused-xentropy":
        yield "loss", (f"loss fused-xentropy: flash-attn's Triton cross-entropy kernel runs on CUDA and ROCm GPUs "
                       f"only, not on {on}; use ce")
    if kernels == "unsloth":
        yield "kernels", f"kernels unsloth: Unsloth's Triton code runs on CUDA and ROCm GPUs only, not on {on}; use pytorch"
    if kernels == "liger":
        yield "kernels", f"kernels liger: Liger-Kernel's Triton code runs on CUDA and ROCm GPUs only, not on {on}; use pytorch"
    if loss == "liger-flce":
        yield "loss", (f"loss liger-flce: Liger-Kernel's Triton code runs on CUDA and ROCm GPUs only, not on {on}; "
                       "use linear-ce")


# accelerators whose torch backend is neither CUDA nor ROCm (specs/workload.py GPU_RUNTIMES): where attention_off_gpu
# looks; a CUDA or ROCm GPU's own floors are efficiency.py's attention_kernel_refusal
_OFF_CUDA_RUNTIMES = {"metal": "mps", "xla": "xla", "hpu": "hpu"}
_ON = {"cpu": "a CPU", "mps": "MPS (Apple)", "xla": "a TPU (XLA)", "hpu": "an Intel Gaudi (HPU)"}


def attention_off_gpu(attention: str, kernel: str, named: bool, where: str | None) -> str | None:
    """Why the attention API ``attention`` running ``kernel`` has no training step on a CPU (``where`` 'cpu'), an
    Apple GPU ('mps'), a TPU ('xla') or a Gaudi ('hpu'), or None (also for a CUDA or ROCm GPU, whose own floors are
    efficiency.py's ``attention_kernel_refusal``). FlexAttention is refused on a CPU, MPS and a TPU (the torch
    check below); a Gaudi (HPU) passes it. Checked with the kernel check above, so after a framework profile has set the
    attention (llm-foundry's 'flash' on a CPU is refused as a stated one is).
    - flex: torch 2.13.0 torch/nn/attention/flex_attention.py lines 2075-2088 (``_validate_device``) raises
      NotImplementedError for a backward on a CPU or MPS tensor, and lines 2091-2096 ValueError for a device type
      outside {cuda, cpu, xpu, hpu, mps}: a TPU's tensors are 'xla'.
    - flash (the flash-attn package, FA2/FA3; llm-foundry's Triton kernel): CUDA/ROCm extensions and Triton GPU
      kernels; transformers 5.24 utils/import_utils.py line 1332 (``is_flash_attn_2_available``) offers
      flash_attention_2 only where ``torch.cuda`` (CUDA or ROCm), MLU or MUSA is available.
    - sdpa forced to mem-efficient or cuDNN: CUDA backends (aten/src/ATen/native/transformers/cuda/sdp_utils.cpp);
      torch's CPU dispatch knows flash and math only (sdp_utils_cpp.cpp ``priority_order_cpp``), and forcing either
      there raises "No viable backend for scaled_dot_product_attention" (measured on torch 2.13.0+cpu:
      tests/training/test_attention_off_gpu.py)."""
    if where is None:
        return None
    on = _ON[where]
    if attention == "flex" and where in ("cpu", "mps"):
        return (f"attention flex: torch's FlexAttention has no backward on {on} (flex_attention _validate_device "
                "raises NotImplementedError); use sdpa")
    if attention == "flex" and where == "xla":
        return (f"attention flex: torch's FlexAttention runs on CUDA, CPU, XPU, HPU and MPS devices only, not on {on} "
                "(flex_attention _validate_device raises ValueError); use sdpa")
    if attention == "flash":
        what = "llm-foundry's Triton kernel" if kernel == "triton-flash" else "the flash-attn package"
        head = f"attention_kernel {kernel}" if named else f"attention flash (its kernel {kernel})"
        return f"{head}: {what} runs on CUDA and ROCm GPUs only, not on {on}; use sdpa"
    if kernel in ("mem-efficient", "cudnn"):
        there = ("on a CPU SDPA has only its flash and math backends, and forcing it raises 'No viable backend for "
                 "scaled_dot_product_attention'" if where == "cpu" else f"{on} has no such backend")
        return f"attention_kernel {kernel}: a CUDA backend of torch's SDPA; {there}; use sdpa's own dispatch"
    return None


def attention_kernel_of(attention: str, kernel: str | None) -> str:
    """The kernel a step with attention API ``attention`` runs: ``kernel`` when named, else the API's default."""
    return kernel if kernel is not None else DEFAULT_ATTENTION_KERNEL[attention]
FSDP_MODES = ("full", "grad_op", "hybrid")
OFFLOAD = ("none", "optimizer", "params")
FSDP_VERSIONS = (1, 2)
# ce: logits from the model, then cross-entropy (transformers ForCausalLMLoss; with loss_chunks > 1 torchtune
# CEWithChunkedOutputLoss); linear-ce: the lm_head applied inside the loss, chunk by chunk (torchtune
# LinearCrossEntropyLoss), so the whole logits tensor never exists
# cut-ce: Apple's Cut Cross-Entropy (Wijmans et al. 2024, arXiv 2411.09009; Unsloth's fused_linear_cross_entropy):
# the logits are computed block by block on chip and never written to memory, forward or backward
# ce-kept-logits: ce whose training loop keeps its shifted fp32 logits referenced through the backward and into the
# next step's forward (torchtune recipes of 2024-05, recipes/lora_finetune_single_device.py @ 0217d44c2 lines
# 460-469: ``logits = logits[..., :-1, :].contiguous()``, no ``del`` before ``loss.backward()``)
# ce-loss-parallel: ce under PyTorch's ``loss_parallel()`` (torch.distributed.tensor.parallel.loss): the lm_head's
# logits stay sharded on the vocabulary over the tp ranks (a DTensor) and torch's own distributed log-softmax and
# NLL backward run on each shard; torchtitan whenever tp > 1 (parallel_dims.py @ 9dec370 lines 119-120)
# fused-xentropy: flash-attn's CrossEntropyLoss (llm-foundry's default loss_fn 'fused_crossentropy'): one kernel
# reads the half-precision logits and saves them with the fp32 log-sum-exp per token; its backward writes the
# logits' gradient into a fresh tensor of their dtype (inplace_backward False, as llm-foundry builds it): no fp32
# [t, V] tensor at all (formulas/training_activations.py eq. X1)
# megatron-ce: Megatron-Core's vocab_parallel_cross_entropy on the tp vocabulary shards (the default under the
# megatron precisions, ``default_loss``): one fp32 copy of the logits, turned into the softmax in place and kept
# (formulas/training_activations.py eq. MC1)
# liger-flce: Liger-Kernel's LigerFusedLinearCrossEntropyFunction (apply_liger_kernel_to_*'s default loss): the
# lm_head inside the loss over row chunks of its own size rule, the gradients computed in the forward and kept
# (formulas/liger_kernels.py eqs. LG3, LG4)
LOSSES = ("ce", "linear-ce", "cut-ce", "ce-kept-logits", "ce-loss-parallel", "fused-xentropy", "megatron-ce",
          "liger-flce")
# the LayerNorm's precision under torch.autocast: torch (nn.LayerNorm: layer_norm is on autocast's fp32 list, so it
# keeps its fp32 input) or low-precision (llm-foundry's LPLayerNorm, its default norm_type
# 'low_precision_layernorm': input, weight and bias cast to the autocast dtype and the norm run with autocast off,
# so it keeps the half-precision copy; formulas/training_activations.py eq. N4)
LAYERNORMS = ("torch", "low-precision")
# the code that quantizes a QLoRA base to NF4 on the device and runs its matmuls (formulas/nf4_quantization.py):
# bitsandbytes (>= 0.43.2: PEFT, transformers), bitsandbytes-0.42 (before 0.43.2: MatMul4Bit keeps each input),
# lightning-bnb-0.42 (Lightning Fabric's BitsandbytesPrecision over bitsandbytes 0.42.0, litgpt's pin: every
# nn.Linear, lm_head too, quantized from fp16), torchao (torchtune's to_nf4, chunked since torchao 0.2), torchao-0.1
# (unchunked, torchtune 2024-05)
NF4_QUANTIZERS = ("bitsandbytes", "bitsandbytes-0.42", "lightning-bnb-0.42", "torchao", "torchao-0.1")
# LoRA dropout on the adapters' inputs (formulas/training_activations.py eq. D1): none (PEFT's and torchtune's
# default lora_dropout 0), per-module (each adapted linear drops out its own copy: PEFT lora_dropout > 0),
# fused-qkv (per module, but q/k/v are one fused linear with one adapter: litgpt's LoRAQKVLinear)
LORA_DROPOUTS = ("none", "per-module", "fused-qkv")
# the QLoRA base's bitsandbytes 4-bit format: NF4 with double quantization of the block scales (the QLoRA paper's
# recipe, section 3) or without (transformers' bnb_4bit_use_double_quant default False; litgpt's bnb.nf4)
NF4_FORMATS = ("nf4-dq", "nf4")
# DeepSpeed ZeRO-3 parameter gather: today's, or before v0.9.0, when a single rank gathered too (formulas/deepspeed_zero.py)
DEEPSPEED_GATHERS = ("current", "pre-0.9")
# what the loop's optimizer.zero_grad does with the gradients: frees them (set_to_none=True: torch >= 2.0's default,
# HF Trainer, accelerate >= 0.28) or fills them with zeros, so they stay allocated into the next step's forward
# (set_to_none=False: accelerate <= 0.27's AcceleratedOptimizer.zero_grad default, optimizer.py @ v0.15.0 lines
# 119-121, @ v0.27.0 lines 116-118; torch < 2.0's Optimizer.zero_grad default)
ZERO_GRADS = ("set-to-none", "zeros")
# the layer implementation: PyTorch modules (transformers / PEFT / torchtune), Unsloth's fused LoRA kernels, or
# transformers' modules with Liger-Kernel's RMSNorm, SwiGLU/GeGLU and RoPE swapped in (formulas/liger_kernels.py)
KERNELS = ("pytorch", "unsloth", "liger")
# how context parallelism runs the attention (formulas/context_parallel.py): 'ring' (K/V passed round the ranks:
# torchtitan's torch ring attention, Megatron-Core's TransformerEngine P2P ring, by the precision) or 'ulysses'
# (DeepSpeed-Ulysses, Jacobs et al. 2023 arXiv 2309.14509: all-to-alls that shard the heads inside attention; ALST's
# UlyssesSPAttentionHF, DeepSpeed deepspeed/runtime/sequence_parallel/ulysses_sp.py)
CP_KINDS = ("ring", "ulysses")
# what runs a Mamba layer: mamba_ssm + causal-conv1d's kernels (a CUDA GPU with both installed) or transformers'
# torch reference functions (formulas/mamba_activations.py)
MAMBA_PATHS = ("cuda-kernels", "torch")


def default_mamba_path(device: str, gpu_runtime: str) -> str:
    """What runs a recurrent mixer by default (``MAMBA_PATHS``): 'cuda-kernels' (mamba_ssm / causal-conv1d, fla) on a
    CUDA GPU, where they install; 'torch' (transformers' reference functions) elsewhere, ROCm included (a source
    build there). The one default training's ``mamba_path`` and inference's recurrent scan read (review24 D2)."""
    return "cuda-kernels" if device != "cpu" and gpu_runtime == "cuda" else "torch"
FLOAT8_TE_RECIPES = ("transformer-engine", "transformer-engine-current", "transformer-engine-mxfp8")  # formulas/float8_training.py TE_RECIPES
FLOAT8_RECIPES = ("torchao", "torchao-rowwise", "torchao-rowwise-gw-hp") + FLOAT8_TE_RECIPES  # ... RECIPES
# Megatron's fp8_param_gather under MXFP8 is another mechanism than eq. T3's, not modelled: Megatron-Bridge's
# bf16_with_mxfp8_mixed sets reuse_grad_buf_for_mxfp8_param_ag (training/mixed_precision.py @067f987d lines 255-266),
# where the parameters are all-gathered in bf16 into the gradient buffer and cast to MXFP8 on the copy into param.data
# (Megatron-LM core/distributed/param_and_grad_buffer.py, the reuse_grad_buf_for_mxfp8_param_ag branch)
MXFP8_PARAM_GATHER_REFUSAL = ("fp8_param_gather with float8_recipe 'transformer-engine-mxfp8' is not modelled (Megatron "
                              "gathers MXFP8 parameters in bf16 through the gradient buffer, "
                              "reuse_grad_buf_for_mxfp8_param_ag); give it without fp8_param_gather")
# what torch.compile covers: the decoder layers and the loss (torchtune compile_model + compile_loss) or the decoder
# layers alone, the loss eager (torchtitan @ 9dec370 apply_compile; its train.py lines 137-138 leave loss_fn eager)
COMPILE_SCOPES = ("layers+loss", "layers", "layers+loss+upcast")
# whether every step has the same tensor shapes (estimate/allocator.py: what the caching allocator keeps reserved)
BATCH_SHAPES = ("variable", "fixed")
# the memory metrics that read the caching allocator's reserve (estimate/allocator.py), so batch_shapes
POOL_METRICS = ("reserved", "nvidia-smi")
# how FSDP2 units are laid out and resharded (formulas/fsdp2_units.py FSDP2_UNITS)
FSDP2_UNITS = ("largest-two", "torchtitan", "torchtitan-resharded", "torchtune")
# how the decoder layers are split over pipeline stages (formulas/parallelism.py pipeline_stage_layers takes one)
PIPELINE_SPLITS = ("even", "torchtitan-9dec370", "torchtitan")
# the MoE token dispatchers timed (formulas/expert_parallel_time.py DISPATCHERS imports this one: Megatron-Core
# moe_token_dispatcher_type)
MOE_DISPATCHERS = ("alltoall", "allgather", "flex")
# how FSDP1 wraps a LoRA model (formulas/fsdp_flat_param.py): every adapter matrix its own unit (torchtune's
# lora_fsdp_wrap_policy, PEFT's fsdp_auto_wrap_policy) or the adapters in their decoder layer's unit (use_orig_params)
FSDP1_LORA_WRAPS = ("adapters-apart", "with-layers")
def uneven_machines(count: int, *, nodes: int | None = None, per_node: int | None = None) -> str | None:
    """Whether ``count`` devices fail to fill whole machines: stated as ``nodes`` machines (a request's
    ``resources.nodes``: count % nodes) or as machines of ``per_node`` devices (``fit --gpus-per-node``: count %
    per_node, where count is more than one machine). The one rule and its words, so the plan's reader and fit's
    machine size (estimate/fit.py ``serving_machine_size``) refuse the same shape alike; None where they divide.
    A count within one machine (2 GPUs of a machine of 8) is whole. ``nodes`` machines of more devices each than one
    machine holds (numbers.py ``MACHINE_GPUS``, the bound ``--gpus-per-node`` takes) are refused too."""
    if nodes is not None and count % nodes:
        return f"{count} devices do not split evenly over {nodes} nodes"
    if nodes is not None and count // nodes > MACHINE_GPUS.high:
        return (f"{count} devices over {nodes} node{'s' if nodes > 1 else ''} are {count // nodes} per machine, past "
                f"{MACHINE_GPUS.high:g} ({MACHINE_GPUS.why}); give more nodes")
    if per_node is not None and count > per_node and count % per_node:
        return (f"{count} devices do not split evenly over machines of {per_node} devices ({count / per_node:.3g} "
                "machines)")
    return None


def check_whole_machines(count: int, per_node: int, count_field: str = "count", default: int | None = None) -> None:
    """Refuse ``count`` devices that do not fill whole machines of ``per_node`` (``uneven_machines``): one line naming
    the field the caller gave the devices in (``count_field``: fit's ``count``, a training workload's ``gpus``,
    written as the flag on the command line, errors.FieldError ``renamed``). The one check of fit's machine size
    (estimate/fit.py ``serving_machine_size``), of ``train``'s stated machine size (cli/train_cmd.py
    ``train_answer``, the web's too) and of hybrid sharding (``TrainingWorkload``: the default machine of 8 too),
    so ``train --gpus 8 --gpus-per-node 3`` is refused with or without a device, as ``fit --train`` refuses it. A
    plan's bare devices are sized as fit sizes them (12 GPUs: machines of 8 + 4, not refused). ``default``: the
    machine size a caller takes when none is given, said as such where ``per_node`` is it (the user may have given
    no --gpus-per-node: review22 D8)."""
    uneven = uneven_machines(count, per_node=per_node)
    if uneven:
        size = f"gpus_per_node {per_node}" + (" (the machine size, by default)" if per_node == default else "")
        raise FieldError("gpus_per_node", f"{size}: {uneven}; make {count_field} a multiple of "
                         f"{per_node}, or at most {per_node}", also=(count_field,))


def llamacpp_split_gpus(count: int, per_node: int) -> int:
    """The GPUs one llama.cpp process splits a model over, of ``count`` GPUs on machines of ``per_node``: one
    machine's (``min(count, per_node)``), the other machines replicas of it. llama.cpp splits a model over the devices
    of its own process (``-sm layer|row``, ``--tensor-split``): llama_prepare_model_devices lists the local ggml
    backend devices (``ggml_backend_dev_count`` / ``ggml_backend_dev_get``, ggml-org/llama.cpp@01649e61c782
    src/llama.cpp:217-263) and the model's layers go to ``model->devices`` (@0c1e57098 src/llama-model.cpp:1557-1600).
    Another machine's GPUs join that list only as devices of the RPC backend's registry ("RPC", src/llama.cpp:227-228,
    put first at 266-267: ``--rpc``, a proof of concept, tools/rpc/README.md @339453e), whose transfers are not timed
    here: so no split spans machines, and ``count`` past one machine must fill whole machines (``uneven_machines``),
    the default machine of 8 (``TrainingWorkload.gpus_per_node``) as a given one: 12 bare GPUs are machines of 8 + 4
    (estimate/fit.py ``worst_copy_machines``), which hold no equal copies, so they are refused with one line asking
    for the machine size. The one rule fit's layout (estimate/fit.py ``serving_layout``), its auto-fit and a
    request's ``engine_settings.tensor_split`` read."""
    uneven = uneven_machines(count, per_node=per_node)
    if uneven:
        raise FieldError("count", f"llama.cpp holds one copy of the model within one machine, and {uneven}: give "
                         f"a count that is a multiple of {per_node}, or at most {per_node}, or the machine size "
                         "(--gpus-per-node; a request's resources.nodes)", also=("gpus_per_node",))
    return max(1, min(count, per_node))


def tensor_split_refusal(shares: int, count: int, per_node: int) -> str | None:
    """Why a llama.cpp ``tensor_split`` of ``shares`` does not fit ``count`` GPUs on machines of ``per_node``: it
    gives one share per GPU of one machine (``llamacpp_split_gpus``: the GPUs one copy is split over), the machines
    replicas; None where it does. The one rule and its words for fit (``--tensor-split``) and a request's
    ``engine_settings.tensor_split`` (request/reader.py)."""
    gpus = llamacpp_split_gpus(count, per_node)
    if shares == gpus:
        return None
    machines = max(1, count // gpus)
    return (f"has {shares} shares; give one share per GPU of one machine ({gpus} GPU{'s' if gpus > 1 else ''}; "
            + (f"the {machines} machines are replicas)" if machines > 1 else "one copy of the model)"))


def layout_devices(fields: dict[str, Any]) -> int:
    """The fewest devices the layout ``fields`` state runs on: tp x pp x context_parallel x ep (the checks of
    ``TrainingWorkload``: gpus a multiple of tp x pp x cp, ep dividing the data-parallel degree gpus / (tp x pp));
    with etp stated, pp x lcm(tp x cp, etp x ep) (gpus a multiple of etp x ep x pp, Megatron's expert grid).
    What a check with the devices not yet known takes (a request without resources, a search before its options)."""
    dense = int(fields.get("tp") or 1) * int(fields.get("context_parallel") or 1)
    ep, etp = int(fields.get("ep") or 1), fields.get("etp")
    return int(fields.get("pp") or 1) * (dense * ep if etp is None else math.lcm(dense, int(etp) * ep))


ADAPTER_DTYPES = ("fp32", "bf16", "fp16")
# when DDP all-reduces the gradients under gradient accumulation (formulas/training_time.py eq. (7d))
GRAD_SYNC = ("optimizer-step", "micro-step")

# LoRA target names -> tensor roles of ``formulas/tensors.py`` (HF/PEFT module names accepted as aliases).
LORA_TARGETS: dict[str, tuple[str, ...]] = {
    "q": ("attn_q",), "k": ("attn_k",), "v": ("attn_v",), "o": ("attn_output",),
    "gate": ("ffn_gate", "ffn_shexp_gate"), "up": ("ffn_up", "ffn_shexp_up"), "down": ("ffn_down", "ffn_shexp_down"),
    "embed": ("token_embd",), "lm_head": ("output",), "in_proj": ("ssm_in",),
    # every other nn.Linear PEFT's 'all-linear' adapts (peft/tuners/tuners_utils.py ``_maybe_include_all_linear_layers``,
    # PEFT 0.21.2 lines 2430-2489: each torch.nn.Linear / Conv1D but the output embeddings): MoE routers and the shared
    # expert's gate, MLA and DSA-indexer projections, the recurrent mixers' in/x/dt/out projections, the vision tower's
    "linear": ("ffn_gate_inp", "ffn_gate_inp_shexp", "attn_q_a", "attn_q_b", "attn_kv_a_mqa", "attn_kv_b",
               "indexer_q_b", "indexer_k", "indexer_proj", "ssm_x", "ssm_dt", "ssm_ba", "ssm_out",
               "v_attn_q", "v_attn_k", "v_attn_v", "v_attn_o", "v_attn_qkv", "v_ffn_gate", "v_ffn_up", "v_ffn_down",
               "v_projector"),
}
_TARGET_ALIASES: dict[str, tuple[str, ...]] = {
    "q_proj": ("q",), "k_proj": ("k",), "v_proj": ("v",), "o_proj": ("o",), "out_proj": ("o",),
    "output_proj": ("o",), "gate_proj": ("gate",), "up_proj": ("up",), "down_proj": ("down",),
    "embed_tokens": ("embed",), "embeddings": ("embed",), "output": ("lm_head",), "w1": ("gate",), "w3": ("up",),
    "w2": ("down",),
    # the fused linears' module names (formulas/lora.py, 'Fused linears'): Phi-3 qkv_proj / gate_up_proj, Falcon and
    # GPT-NeoX query_key_value, GPT-BigCode c_attn / c_fc / c_proj (attention output and MLP down share that name, and
    # PEFT's suffix match takes both), Granite-4.0-H's shared MLP input_linear / output_linear
    "qkv_proj": ("q", "k", "v"), "query_key_value": ("q", "k", "v"), "c_attn": ("q", "k", "v"),
    "gate_up_proj": ("gate", "up"), "input_linear": ("gate", "up"), "output_linear": ("down",), "c_fc": ("up",),
    "c_proj": ("o", "down"),
}
ALL_LINEAR = ("q", "k", "v", "o", "gate", "up", "down", "in_proj", "linear")  # PEFT's target_modules="all-linear"
# the decoder's attention and MLP projections (what all-linear meant before it followed PEFT): the default targets,
# which every decoder family takes (PEFT refuses all-linear on the Mamba model types, formulas/lora.py
# PEFT_MAMBA_REFUSED, and all-linear adapts routers and vision towers a recipe usually leaves frozen)
DECODER_LINEAR = ("q", "k", "v", "o", "gate", "up", "down")
_CANONICAL_TARGETS = frozenset(LORA_TARGETS)  # canonical names: none is an alias or needs strip/lower
# PEFT ``modules_to_save``: whole modules trained beside the adapters -> tensor role of ``formulas/tensors.py``
MODULES_TO_SAVE = {"embed": "token_embd", "lm_head": "output"}
_SAVE_ALIASES = {"embed_tokens": "embed", "embeddings": "embed", "wte": "embed", "tok_embeddings": "embed",
                 "output": "lm_head"}


def normalize_modules_to_save(names: str | tuple[str, ...] | list[str]) -> tuple[str, ...]:
    """Canonical names ('embed', 'lm_head') from 'embed_tokens,lm_head' / ['lm_head']. Unknown -> a FieldError naming
    the field (the web shows it at the form's --modules-to-save box)."""
    items = [t.strip().lower() for t in (names.split(",") if isinstance(names, str) else names) if t.strip()]
    out: list[str] = []
    for t in items:
        n = _SAVE_ALIASES.get(t, t)
        if n not in MODULES_TO_SAVE:
            raise FieldError("modules_to_save", f"unknown module to save {t!r}; choose from: embed (embed_tokens), lm_head")
        if n not in out:
            out.append(n)
    return tuple(out)


def normalize_targets(targets: str | tuple[str, ...] | list[str]) -> tuple[str, ...]:
    """Canonical LoRA target names from 'q,k,v' / ['q_proj', 'v_proj'] / 'all-linear'. Unknown -> a FieldError naming
    the field (the web shows it at the form's --targets box)."""
    if type(targets) is tuple and targets and _CANONICAL_TARGETS.issuperset(targets) and \
            len(set(targets)) == len(targets):
        return targets  # already canonical (a workload's own, or ALL_LINEAR): what the loop below returns for it
    items = [t.strip().lower() for t in (targets.split(",") if isinstance(targets, str) else targets) if t.strip()]
    out: list[str] = []
    for t in items:
        names = ALL_LINEAR if t in ("all-linear", "all_linear", "all") else _TARGET_ALIASES.get(t, (t,))
        for n in names:
            if n not in LORA_TARGETS:
                raise FieldError("targets", f"unknown LoRA target {t!r}; choose from: {', '.join(LORA_TARGETS)} "
                                 "(or their module names q_proj, gate_proj, qkv_proj, gate_up_proj, ...; 'all-linear')")
            if n not in out:
                out.append(n)
    if not out:
        raise FieldError("targets", "LoRA needs at least one target module (e.g. --targets q,v)")
    return tuple(out)


def off_unified_memory(w: TrainingWorkload) -> tuple[str, str] | None:
    """(field, why) for a setting that cannot run where the tensors share the host's memory: a CPU (``device`` 'cpu')
    or an Apple chip (``gpu_runtime`` 'metal': one unified memory for the CPU and the GPU); None otherwise. One rule
    for both:
    - ``offload`` / ``activation_offload`` move tensors out of a GPU's own memory into host RAM: on a CPU they are
      there already; on an Apple chip host RAM is the same memory, so nothing leaves the budget the verdict checks
      (the estimate would count the moved states as freed). DeepSpeed's offload also has no runtime there: its MPS
      accelerator (accelerator/mps_accelerator.py @0510cb40, ``get_op_builder``) answers NotImplementedBuilder for
      every op, CPUAdam included (offload_optimizer's optimizer), and line 22 names no communication backend.
    - ``float8``: torchao's Float8Linear calls torch._scaled_mm, whose GPU kernels run on FP8 tensor cores (CUDA 8.9+,
      ROCm CDNA3+: estimate/device.py ``float8_refusal``); a CPU has none, and an Apple GPU has no FP8 units: torch's
      MPS _scaled_mm (aten/src/ATen/native/mps/operations/ScaledMM.mm ``_scaled_mm_out_mps``) is a Metal shader that
      takes Float8_e4m3fn operands only, while torchao's tensorwise recipe ('torchao') casts gradients to float8_e5m2
      for the backward GEMMs; the rowwise recipes ('torchao-rowwise', 'torchao-rowwise-gw-hp') cast every operand to
      e4m3 (pytorch/ao @36027d82 torchao/float8/config.py lines 334-381), so there the refusal rests on the missing
      FP8 units alone: the shader has no FP8 tensor-core rate for a float8 speed-up to be timed at.
    - ``zero`` on an Apple chip: ZeRO is DeepSpeed's, and DeepSpeed's MPS accelerator (accelerator/mps_accelerator.py
      @edaa7221) sets ``_communication_backend_name = None`` (line 22), answers NotImplementedBuilder for every op
      (lines 242-245: FusedAdam, the default ZeRO optimizer, included), and has no bf16 or fp16 (lines 149-156:
      ``supported_dtypes`` is fp32 only). On a CPU, DeepSpeed's CPU accelerator runs ZeRO (its ccl/gloo backend):
      not refused here."""
    cpu = w.device == "cpu"
    apple = "on an Apple chip host RAM is the GPU's own memory (unified), so it frees none of it"
    if w.offload != "none":
        return "offload", (f"offload {w.offload} moves states from a GPU to host RAM; "
                           + ("on device cpu they are there already" if cpu else apple) + " (use offload none)")
    if w.activation_offload:
        return "activation_offload", ("activation_offload copies saved activations from a GPU to host memory; "
                                      + ("on device cpu it does not apply" if cpu else apple))
    if w.zero and not cpu:
        return "zero", (f"zero {w.zero} is DeepSpeed ZeRO, whose MPS accelerator names no communication backend, builds "
                        "no op and supports fp32 only (accelerator/mps_accelerator.py @edaa7221 lines 22, 149-156, "
                        "242-245): no ZeRO on an Apple GPU; use zero 0")
    if w.float8:
        why = ("torch's MPS _scaled_mm takes e4m3fn operands only; torchao's tensorwise recipe casts gradients to e5m2"
               if w.float8_recipe == "torchao" else
               f"{w.float8_recipe} casts every operand to e4m3, but torch's MPS _scaled_mm is a Metal shader with no "
               "FP8 tensor-core rate")
        return "float8", ("float8 training runs torch._scaled_mm on GPU tensor cores; on device cpu it does not apply"
                          if cpu else "float8 training runs torch._scaled_mm on FP8 tensor cores, which an Apple GPU "
                          f"lacks ({why}); train without float8")
    return None


def offload_without_zero(w: TrainingWorkload) -> FieldError | None:
    """The refusal of ``offload`` 'optimizer' without sharding (ZeRO stage 0, no FSDP), None otherwise. What llmsizer
    sizes as that offload (the optimizer states, master weights and gradients in host RAM: Ren et al. 2021,
    ZeRO-Offload section 4) is DeepSpeed's ``offload_optimizer``, "Valid with stage 1, 2, and 3"
    (deepspeed/runtime/zero/offload_config.py @edaa7221 line 56): at stage 0 no ZeRO optimizer moves the states, the
    engine still builds DeepSpeedCPUAdam (runtime/engine.py lines 2108-2110) and its step asserts every parameter is
    on the CPU (ops/adam/cpu_adam.py lines 232-234). torchao's CPUOffloadOptimizer runs unsharded, but keeps the
    gradients on the device (offload_gradients=False), not what this estimate moves. Checked on the workload an
    estimate sizes (estimate/training/setup.py ``resolve``), after a stage chosen by the memory (which starts at
    ZeRO-1 with this offload: estimate/training/compose.py ``sharded_workload``).

    ``offload`` 'params' likewise needs fully sharded parameters: DeepSpeed's ``offload_param`` is "Valid only with
    stage 3" (deepspeed/runtime/zero/offload_config.py, DeepSpeedZeroOffloadParamConfig), FSDP's CPUOffload moves
    the sharded parameters (fsdp 'full' / 'hybrid'). Checked here, on the stage sized, so a stage the memory chooses
    (ZeRO-3 only under this offload) is the one read, not the default stage 0 of the constructor."""
    if w.offload == "params" and w.shard_stage < 3:
        return FieldError("offload", also=("zero",), message=(
            "offload='params' needs fully sharded parameters (zero=3 or fsdp='full'/'hybrid'; DeepSpeed's "
            f"offload_param is valid with ZeRO stage 3 only): the stage sized is {w.shard_stage}; give zero 3"))
    if w.offload != "optimizer" or w.shard_stage:
        return None
    return FieldError("offload", also=("zero",), message=(
        "offload optimizer is DeepSpeed's ZeRO-Offload (offload_optimizer), valid with ZeRO stage 1, 2 or 3 only "
        "(at stage 0 its CPUAdam finds the parameters on the GPU and fails): give zero 1, 2 or 3"))


def paged_off_cuda(optimizer: str, cpu: bool, measure: bool = False) -> str:
    """The refusal of a bitsandbytes paged optimizer off CUDA, naming the unpaged optimizer that keeps the same
    states: bitsandbytes' own unpaged class (``adamw-8bit``, ``lion``, ``lion-8bit``); for ``paged-adamw`` there is
    no unpaged bitsandbytes record, and llmsizer's ``adamw`` is torch's, whose states follow the parameters' dtype
    unless ``optimizer_state_dtype`` says fp32 (bitsandbytes' 32-bit states are fp32 whatever the parameters).
    ``measure``: the refusal of ``llmsizer measure`` on a CPU, which has no ``optimizer_state_dtype`` (torch's AdamW
    keeps fp32 moments there under precision fp32, the CPU default)."""
    twin = optimizer[len("paged-"):]
    if measure:
        same = (f"{twin} with precision fp32 (torch's AdamW: the same two fp32 moments as bitsandbytes' AdamW, "
                "plus a 4 B step per tensor)" if twin == "adamw" else twin)
        return (f"optimizer {optimizer} pages CUDA unified memory, which device cpu lacks: bitsandbytes allocates "
                f"its states unpaged in RAM there (a warning), so measure optimizer {same}")
    same = (f"{twin} with optimizer_state_dtype fp32 (the same two fp32 moments as bitsandbytes' AdamW)"
            if twin == "adamw" else twin)
    if cpu:  # bitsandbytes 0.50.2 optim/optimizer.py get_state_buffer lines 374-382
        return (f"optimizer {optimizer} pages CUDA unified memory, which device cpu lacks: bitsandbytes allocates "
                f"its states unpaged in RAM there (a warning), so size the run as optimizer {same}")
    return f"optimizer {optimizer} pages CUDA unified memory, which an Apple chip (metal) lacks; use {same}"


@tracks_given
@fast_init
@dataclass(frozen=True)
class TrainingWorkload:
    """One training or fine-tuning run.

    method: 'full' (every parameter trained), 'lora' / 'dora' (frozen base + low-rank adapters; DoRA adds a
        magnitude vector per adapted module), 'qlora' (LoRA on a 4-bit NF4 double-quantized base).
    rank, alpha, targets, adapter_dtype: LoRA rank r, scaling alpha (no memory effect), adapted modules, dtype of
        the adapter weights (None: fp32 under mixed precision as PEFT casts them, else the precision's dtype).
    modules_to_save: whole modules trained beside the adapters ('embed', 'lm_head'; PEFT ``modules_to_save``):
        PEFT's ``ModulesToSaveWrapper`` keeps the frozen original and trains a deep copy in the base dtype
        (peft/utils/other.py), which gets gradients and optimizer states of its own.
    base_dtype: dtype of the frozen base weights for lora/dora (None: bf16, or fp32 for precision fp32); the
        non-quantized tensors (embeddings, norms, lm_head) for qlora (None: fp32 where PEFT's
        ``prepare_model_for_kbit_training`` casts them -- no framework profile, PyTorch kernels, a bitsandbytes base
        not sharded under FSDP / ZeRO-3 --, else bf16; estimate/training/setup.py ``qlora_unquantized_dtype``).
    optimizer / optimizer_state_dtype / optimizer_impl: see ``formulas/training_states.py``; None = defaults.
    precision: the recipe deciding the dtype of weights, master weights, gradients and activations.
    tf32: fp32 matmuls run on the TF32 tensor cores (``torch.backends.cuda.matmul.allow_tf32 = True``,
        ``torch.set_float32_matmul_precision("high")``, HF Trainer ``--tf32``); False: PyTorch's default since 1.12,
        IEEE fp32 matmuls. It times precision 'fp32' runs' GEMMs and SDPA's math kernel's fp32 score matmuls at the
        device's TF32 peak instead of its FP32 one (estimate/device.py ``fp32_matmul_peak``); the memory is the same.
    micro_batch [sequences per device per forward], seq_len [tokens per sequence], grad_accumulation [micro-
        batches per optimizer step; the pipeline's micro-batch count].
    grad_checkpointing: 'none' | 'full' (each decoder layer recomputed) | 'selective' (attention core only,
        Korthikanti et al. 2022 section 4.2) | 'selective-op' (torchtitan's op-level ``SelectiveAC``: matmul and
        attention outputs saved, every second matmul and all other ops recomputed;
        ``formulas/selective_checkpointing.py``).
    recompute_modules: with grad_checkpointing 'selective', Megatron-Core's ``--recompute-modules`` (RECOMPUTE_MODULES:
        core_attn, mla_up_proj, moe_act, layernorm, mlp, moe); each drops the tensors its module's recompute
        rebuilds (formulas/training_activations.py eqs. R1-R6). None: ['core_attn'], Megatron's default.
    checkpoint_every: with 'full' or 'selective-op', only every N-th decoder layer is checkpointed, the others
        keep all their activations (torchtitan ``selective_ac_option = "N"``; 1: every layer).
    attention: 'sdpa' | 'flash' | 'eager' | 'flex' (torch FlexAttention on a BlockMask: torchtune's packed path; a
        GPU only, torch runs no FlexAttention backward on a CPU).  attention_kernel: the kernel that runs it, one of KERNELS_OF_ATTENTION[
        attention] (None: DEFAULT_ATTENTION_KERNEL[attention]); it changes the duration only (estimate/efficiency.py
        attention_kernel_share).  packing: several documents per row (a block-diagonal mask for
        sdpa/eager; varlen kernels for flash; a BlockMask for flex).  doc_len: with packing, the tokens of each packed document
        [tokens] (None: one document fills the row); a kernel that masks per document times attention over
        documents of this length (formulas/attention_mask.py eq. (M4)).
    target_len: an encoder-decoder's (T5) target tokens per sequence, the decoder's length (``seq_len`` is then
        the source length, the encoder's); None: ``seq_len``. Decoder-only models refuse it.
    loss_chunks: the cross-entropy computed over this many chunks of the sequence (1: transformers
        ``ForCausalLMLoss``; torchtune ``CEWithChunkedOutputLoss`` uses 8), which bounds the fp32 upcast.
    loss: 'ce' (the model returns logits; the loss upcasts them) or 'linear-ce' (torchtune
        ``LinearCrossEntropyLoss``: the lm_head runs inside the loss per chunk of tokens, so only one chunk's
        logits exist at a time; the loss of 162 of torchtune's 197 configs at bd2a0fc, 8 chunks) or 'cut-ce'
        (Cut Cross-Entropy, Unsloth's fused loss: no [tokens, vocab] tensor at all) or 'ce-kept-logits' (ce whose
        training loop holds the shifted fp32 logits, one more fp32 [batch (seq - 1), vocab] tensor alive from the
        loss to the next step's forward: torchtune's recipes of 2024-05) or 'ce-loss-parallel' (ce under PyTorch's
        ``loss_parallel()`` with tp > 1, torchtitan's default: the vocabulary-sharded logits go through torch's
        distributed log-softmax and NLL backward, which hold one more fp32 [tokens, vocab / tp] tensor than
        ``F.cross_entropy`` in the forward and in the backward; ``formulas/training_activations.py`` eqs. LP1/LP2)
        or 'fused-xentropy' (flash-attn's fused cross-entropy kernel, llm-foundry's default ``loss_fn``: it keeps
        the half-precision logits and an fp32 log-sum-exp per token, and its backward makes one gradient of the
        logits' dtype: eq. X1) or 'liger-flce' (Liger-Kernel's fused linear cross-entropy, ``apply_liger_kernel_to_*``'s
        default loss: the lm_head inside the loss over row chunks of its own size, the gradients computed in the
        forward and kept; formulas/liger_kernels.py eqs. LG3, LG4).
    layernorm: what a LayerNorm model's norms run in under torch.autocast: 'torch' (``nn.LayerNorm``, on autocast's
        fp32 list: it keeps its fp32 input) or 'low-precision' (llm-foundry's ``LPLayerNorm``, its default
        ``norm_type``: the input, weight and bias cast to the autocast dtype first, so it keeps those copies;
        eq. N4). Without autocast, or on an RMSNorm model, it changes nothing.
    train_metric_passes: eager cross-entropy passes the training loop runs over each micro-batch's logits after its
        backward, under no_grad, for its training metrics (default 0: none). Composer (v0.16.4 trainer.py lines
        2472-2475, ``_eval_train_metrics`` lines 2166-2175) updates every train metric after each micro-batch's
        backward; llm-foundry's MPT registers LanguageCrossEntropy and LanguagePerplexity (modeling_mpt.py @
        b2a43a147 lines 698-700), each a ``torch.nn.CrossEntropyLoss`` over the whole logits (composer
        metrics/nlp.py @ v0.16.4 lines 100, 119-121, 188): 2. Their memory-bound traffic is
        formulas/elementwise_traffic.py eq. (E12); ``--train-metric-passes`` on the command line, and the
        llm-foundry framework profile's default (``framework``).
    framework: a training framework profile (catalog/data/frameworks.json: 'none', 'llm-foundry', 'torchtune',
        'torchtitan'): the framework's defaults (its loss, norm, attention kernel, metric passes, its own model
        code's K/V layout), each with its source file and line, applied by the composition core
        (estimate/framework.py) to the fields the caller did not give; a given field wins. Default 'none'.
    checkpoint_impl: with grad_checkpointing 'full', torch.utils.checkpoint's 'non-reentrant' (use_reentrant=False,
        transformers' default since 5.0, torchtune's) or 'reentrant' (use_reentrant=True: transformers 4.35-4.x's
        default): the reentrant backward recomputes the layer's output too (one hidden state per recompute);
        'non-reentrant-no-early-stop': use_reentrant=False on torch 1.13, whose recomputation re-runs the layer's
        last matmul too (timed as the reentrant one; its memory as the non-reentrant one: the recomputed output is
        dropped as soon as it is made).
    nf4_quantizer: with method 'qlora', the code that quantizes the base on the device when the model is built and
        runs its matmuls: 'bitsandbytes' (>= 0.43.2: PEFT / transformers), 'bitsandbytes-0.42' (before 0.43.2: each
        4-bit matmul keeps its input for the backward), 'lightning-bnb-0.42' (litgpt: Lightning Fabric's
        BitsandbytesPrecision over bitsandbytes 0.42.0; lm_head quantized too), 'torchao' (torchtune's ``to_nf4``)
        or 'torchao-0.1' (unchunked, torchtune's pin until 2024-05); its transient is the 'model init' phase
        (formulas/nf4_quantization.py).
    lora_dropout: with LoRA adapters, 'none' (the adapters read their input: PEFT's and torchtune's default
        lora_dropout 0), 'per-module' (each adapted linear keeps its dropped-out copy of the input and the mask:
        PEFT lora_dropout > 0) or 'fused-qkv' (the same, with q/k/v one fused linear and one adapter: litgpt).
    nf4_format: with method 'qlora', the base's 4-bit format: 'nf4-dq' (double quantization of the block scales:
        the QLoRA paper's recipe) or 'nf4' (fp32 block scales: transformers' ``bnb_4bit_use_double_quant`` default,
        litgpt's ``--quantize bnb.nf4``), formulas/weight_formats.py.
    loop_keeps_graph: the training loop keeps the step's loss and logits referenced until the next step's forward
        has returned (litgpt finetune/lora.py @ 00af8b0d lines 304-310), so the autograd graph lives on: what its
        nodes hold outside their saved tensors (bitsandbytes 0.42's ``ctx.tensors``, formulas/nf4_quantization.py
        eq. 4) is still alive during the next forward. HF Trainer and torchtune drop the graph with the step.
    deepspeed_gather: with zero 3, DeepSpeed's parameter gather: 'current' (since v0.9.0 a single rank uses its
        partition in place) or 'pre-0.9' (a single rank gathers too: a parameter buffer beside the partition's
        device copy, DeepSpeed v0.8.1 partition_parameters.py lines 839-856), formulas/deepspeed_zero.py.
    zero_grad: what the loop's ``optimizer.zero_grad`` does between steps: 'set-to-none' (the gradients are freed
        before the next forward) or 'zeros' (``set_to_none=False``: they stay allocated, zero-filled, through the next
        step's forward, as under gradient accumulation: accelerate <= 0.27, torch < 2.0). Modelled for a loop
        whose torch optimizer owns the gradients (no DeepSpeed ZeRO, no FSDP, not optimizer_in_backward).
    checkpoint_offload: the inputs that full checkpointing keeps go to host RAM, each brought back for its layer's
        recompute (Unsloth ``use_gradient_checkpointing="unsloth"``, axolotl ``gradient_checkpointing: offload``).
    kernels: 'pytorch' (the framework's modules) or 'unsloth' (Unsloth's fused LoRA kernels keep fewer tensors per
        layer, formulas/unsloth_kernels.py). Unsloth's recipe is kernels='unsloth', loss='cut-ce',
        grad_checkpointing='full' with checkpoint_offload. 'liger': transformers' modules with Liger-Kernel's
        RMSNorm, SwiGLU/GeGLU and RoPE swapped in (``apply_liger_kernel_to_*``, formulas/liger_kernels.py eqs. LG1,
        LG2); its default recipe adds loss='liger-flce'. The step's time counts its kernels' bytes
        (formulas/elementwise_traffic.py eqs. E20-E22, formulas/liger_kernels.py eq. LG5).
    mamba_path: what runs the Mamba layers of a Mamba / hybrid model: 'cuda-kernels' (mamba_ssm and causal-conv1d
        installed on a CUDA GPU, or built from source on ROCm) or 'torch' (transformers' reference functions: a
        CPU, Apple, or neither package installed), formulas/mamba_activations.py; None: cuda-kernels on a CUDA GPU,
        torch elsewhere (ROCm included: the packages are a source build there).
    optimizer_in_backward: each parameter is updated as soon as its gradient is ready and the gradient freed
        (torchtune ``optimizer_in_bwd``; PyTorch ``register_post_accumulate_grad_hook`` tutorial).
    gpus [devices], zero (DeepSpeed ZeRO stage 0-3) or fsdp ('full' | 'grad_op' | 'hybrid'), tp, pp, ep,
        etp (Megatron-Core's expert tensor-parallel size; None: the framework's rule, Megatron's tp, torchtitan's
        whole experts under EP: formulas/tensor_parallel.py ``expert_tp_ways``), sequence_parallel, offload ('none' | 'optimizer' | 'params'), gpus_per_node (devices per machine: hybrid
        sharding, and where the data-parallel collectives leave the machine).
    virtual_stages: with pp > 1, model chunks per device of Megatron's interleaved 1F1B schedule (v =
        layers per stage / ``--num-layers-per-virtual-pipeline-stage``): the bubble (p - 1)/(v m) of the duration
        (formulas/model_parallel_time.py eq. (P4)); 1: the plain 1F1B schedule. Under a torchtitan pipeline_split,
        the stages the layers are split over (pp x virtual_stages, each rank holding stages r, r + pp, ...), and
        with FSDP2 torch's ScheduleInterleaved1F1B order of forwards and backwards, each stage's unsharded
        gradients living from its first backward to its reduce-scatter after its last (formulas/parallelism.py
        ``interleaved_backward_states``), and each of the rank's stages keeping torch's pipeline-stage buffers of its
        own (eq. PP3, ``pipeline_rank_boundary_bytes``); under the even split the memory estimate leaves it out.
    pipeline_split: with pp > 1, how the decoder layers are split over the stages (formulas/parallelism.py
        ``pipeline_stage_layers``): 'even' (Megatron-LM, DeepSpeed uniform: the remainder on the first stages),
        'torchtitan-9dec370' (torchtitan's generated split points @ 9dec370: n // stages on the first stage, the
        remainder on the middle ones) or 'torchtitan' (its current rule: the embedding and the output weigh one
        layer each). A torchtitan split, or torch's FSDP across the stages, says the pipeline is torch's
        (torch.distributed.pipelining, whose stages keep eq. PP3's buffers: estimate/training/timeline.py
        ``torch_pipelining``); the even split without FSDP, Megatron-LM's or DeepSpeed's engine.
    tp_comm_overlap: with tp > 1, the tensor-parallel collectives overlap the GEMMs (Megatron-Core
        ``--tp-comm-overlap``, torchtitan's async TP ``enable_async_tensor_parallel``): the duration takes the larger
        of a micro-batch's compute and its tensor-parallel communication (formulas/model_parallel_time.py eq. (T3'));
        False: they add to it (both frameworks' default). It does not change memory.
    moe_dispatcher: with ep > 1, how the routed tokens reach their experts (formulas/expert_parallel_time.py):
        'alltoall' (one copy per chosen expert, eqs. (E1)-(E3)), 'allgather' (all tokens of the EP x ETP group, eq.
        (E6); Megatron-Core's own default) or 'flex' (DeepEP / HybridEP, once per destination rank and machine, eq.
        (E7)); None: alltoall, what Megatron-Bridge's and Megatron-LM's MoE recipes and torchtitan run.
    ep_comm_overlap: Megatron-Core ``--overlap-moe-expert-parallel-comm``: the EP exchange overlaps another
        micro-batch's compute (combined 1F1B, eq. (E8)); default off, as in Megatron.
    overlap_grad_reduce: under a megatron precision (Megatron-Core's DDP), Megatron's ``--overlap-grad-reduce``:
        the grad buffer is cut into buckets and each bucket's reduce-scatter (or all-reduce) starts once the last
        micro-batch's backward has produced its gradients, so only what the rest of that backward cannot hide is
        exposed (formulas/training_time.py eq. (7g)). Default off, Megatron-LM's default (a named assumption);
        Megatron-Bridge's recipes turn it on. It does not change memory.
    overlap_param_gather: with overlap_grad_reduce and the distributed optimizer (zero >= 1), Megatron's
        ``--overlap-param-gather``: the updated parameters' all-gather runs bucket by bucket while the next step's
        first forward runs (eq. (7g)), not after the optimizer step. Default off, Megatron-LM's default.
    gradient_accumulation_fusion: under Megatron precision, Megatron's ``gradient_accumulation_fusion``: TE's wgrad
        GEMMs accumulate into the fp32 ``main_grad`` (``fuse_wgrad_accumulation``), so no separate accumulation pass
        runs (formulas/optimizer_step.py eq. (O3) not timed); False: the DDP hook's ``main_grad.add_(grad)`` runs
        (eq. (O3)). None: on under Megatron precision (Megatron-LM's and Megatron-Bridge's default, a named
        assumption); True needs a Megatron precision.
    moe_router_fusion: under Megatron precision, Megatron-Core's ``moe_router_fusion``: the MoE router's top-k and
        score function in TransformerEngine's fused kernels (formulas/launch_overhead.py eq. K9's router); False: its
        unfused torch ops over the [T, E] logits (formulas/moe_router.py eq. E19: more launches and memory traffic).
        None: off, Megatron-Core's TransformerConfig default (NVIDIA/Megatron-LM @d7288711
        megatron/core/transformer/transformer_config.py line 792), a named assumption; Megatron-Bridge's recipes set
        it False, its performance configs of GPT-OSS, Qwen3, DeepSeek, Kimi and Qwen-VL True (@f9b6319e
        scripts/performance/configs/*: estimate/duration.py ``MOE_ROUTER_FUSION_WHY``). True needs a Megatron
        precision and an MoE model (estimate/training/compose.py refuses it on a dense one).
    tp_backward_overlap: with tp > 1, Megatron-LM's backward overlap of each column-parallel linear's
        input-gradient all-reduce (or, under sequence parallelism, the re-gather of its input and the reduce-scatter
        of its input gradient) with its own GEMMs (``LinearWithGradAccumulationAndAsyncCommunication``: on by default
        in Megatron-LM since 2021-09 and always in Megatron-Core; not in the SC21 code, nor in PyTorch DTensor
        tensor parallelism, torchtitan's): formulas/model_parallel_time.py eq. (T4). False: every backward collective
        adds to the compute. It does not change memory.
    network: the network between machines when gpus > gpus_per_node, for the duration: a catalog network
        interconnect (``ib-ndr``: one port per device, rail-optimised; ``efa-p5``: per machine) or a bandwidth per
        machine ('1600 Gb/s', '8x400Gb/s'); None: an instance's own network, else none (a warning). It does not
        change memory.
    grad_sync: with DDP (zero 0, no fsdp) and grad_accumulation > 1, when the gradients are all-reduced, for the
        duration: 'optimizer-step' (DDP ``no_sync`` on every micro-step but the last: HF accelerate's
        ``accumulate``, the HF Trainer) or 'micro-step' (a loop without ``no_sync``); None: 'optimizer-step'.
        ZeRO-1 and Megatron-Core's DDP (the megatron precisions) reduce at the optimizer step, ZeRO-2/3 and FSDP
        every micro-step (their frameworks' own rule),
        except FSDP1 (fsdp_version 1) given 'optimizer-step': its ``no_sync()`` (HF accelerate's ``accumulate``,
        Lightning Fabric's ``no_backward_sync``) keeps each unit's unsharded flat gradient until the sync
        micro-batch (memory: formulas/fsdp_flat_param.py eq. N1; the duration still times a reduce-scatter per
        micro-batch).
    fsdp_version: 2 (FSDP2 ``fully_shard``, per-parameter DTensor shards) or 1 (FSDP1 ``FullyShardedDataParallel``:
        one flat parameter per wrapped unit, whose gradient spans every element of the unit, frozen ones included;
        ``formulas/fsdp_flat_param.py``).
    fsdp1_lora_wrap: with FSDP1 and adapters, how the units are wrapped (formulas/fsdp_flat_param.py eq. W1):
        'adapters-apart' (every LoRA A and B matrix its own unit, each decoder layer a frozen unit, the root the
        rest: torchtune's lora_fsdp_wrap_policy, PEFT's fsdp_auto_wrap_policy; gradients of the adapters only, the
        root kept unsharded, one block at a time) or 'with-layers' (the adapters inside their decoder layer's unit,
        use_orig_params=True: that unit's flat gradient spans its frozen elements too).
    fsdp2_units: with FSDP2 (full sharding), which units hold their parameters unsharded at each moment
        (formulas/fsdp2_units.py): 'largest-two' (the two largest units gathered, less the rank's own shard: the
        wrapping not traced), 'torchtitan' (the root unit holds the embedding, final norm and output and stays
        unsharded from its forward to its backward, as every torch before 2.8 keeps the root; the blocks resharded
        after their forward but the last; the all-gather copy-in stream's pool counted under batch_shapes 'fixed')
        or 'torchtitan-resharded' (the same with the root resharded after its forward: torch >= 2.8 given
        fully_shard(model, reshard_after_forward=True)) or 'torchtune' (torchtune's shard_model: every block
        resharded after its forward, the last too, the root kept, holding what is not sharded on its own: the
        embedding, final norm and output of the LoRA recipes). Read under full sharding without pipeline parallelism
        (there every unit stays gathered, formulas/parallelism.py eq. PP1) or parameter offload.
    context_parallel: context parallelism degree: each sequence split over this many devices, ring attention over
        their K/V (``formulas/context_parallel.py``): torchtitan's (FSDP2 over dp x cp, torch's ring attention) or,
        under the Megatron precisions, Megatron-Core's (TransformerEngine's P2P ring, the DDP / distributed optimizer
        over dp x cp).
    cp_kind: how context parallelism runs the attention: 'ring' (above) or 'ulysses' (DeepSpeed-Ulysses, arXiv
        2309.14509, as Arctic Long Sequence Training's ``UlyssesSPAttentionHF`` runs it under DeepSpeed ZeRO: each
        rank keeps seq / cp tokens outside the attention; four all-to-alls per layer (q, k, v, output) hand each rank
        the whole sequence for heads / cp heads; ``formulas/context_parallel.py`` eqs. U1-U3).
    activation_offload: saved activations copied to pinned host memory in the forward and brought back in the
        backward (torchtune ``OffloadActivations``; ``formulas/activation_offload.py``).
    tiled_mlp: each dense gated (SwiGLU) MLP runs over ceil(seq / hidden) sequence shards and keeps only its input
        (Arctic Long Sequence Training: DeepSpeed ``TiledMLP``, ArcticTraining ``tiled_mlp_compute``;
        formulas/training_activations.py eqs. TM1, TM2). Full fine-tuning, no tensor parallelism, PyTorch kernels.
    float8: torchao float8 training (``convert_to_float8_training``, tensorwise scaling; with FSDP2 the linears'
        weights are all-gathered in float8; ``formulas/float8_training.py``).
    float8_recipe: with float8, whose float8 linears: 'torchao' (``Float8Linear``, dynamic tensorwise scaling),
        'torchao-rowwise' / 'torchao-rowwise-gw-hp' (torchao's ROWWISE / ROWWISE_WITH_GW_HP recipes: per-row scales,
        FSDP2 and TP gather in bf16, the latter's grad_weight GEMM in bf16: formulas/float8_training.py eqs. F4-F5) or
        'transformer-engine' (``te.Linear`` under ``fp8_autocast``, delayed scaling, fused cast-transpose kernels:
        llm-foundry ``fc_type: te``) or 'transformer-engine-current' (the same te layers under TransformerEngine's
        ``Float8CurrentScaling``, Megatron-Bridge's ``fp8_cs``: an amax pass over each tensor before its cast, except
        the norm-fed inputs whose amax the fused norm computes, eq. F3c; no amax history; the same weight copies)
        or 'transformer-engine-mxfp8' (the same te layers under ``MXFP8BlockScaling``, Megatron-Bridge's ``mxfp8``:
        one E8M0 scale per 32 elements, a rowwise and a columnwise copy of each quantized tensor, eqs. F3m and T1m;
        datacenter Blackwell only, compute capability 10.x / 11.x: estimate/device.py ``float8_refusal``);
        it changes the casts' memory-bound time (eqs. F1-F3c) and the weight copies:
        torchao keeps none, TransformerEngine keeps each te.Linear's float8 weight (rowwise + transposed on Hopper)
        from the layer's forward to its backward (llm-foundry's blocks pass no ``is_first_microbatch``: no
        ``_fp8_workspaces`` cache across micro-batches; under a megatron precision Megatron-Core passes it: every
        layer's copy kept the whole step, each weight cast once per step, eq. T2), none under FSDP2
        (``fp8_weight_copies``, eq. T1);
        the casts' transient buffers follow torchao's for both.
    fp8_param_gather: Megatron's ``--fp8-param-gather`` (Megatron-Bridge's ``fp8_param_gather``): the te linears'
        weights are TransformerEngine Float8Tensors (``fp8_model_init``), stored at 1 B (+ the transpose on
        TN-only GPUs, eq. T1) with no bf16 copy and no ``_fp8_workspaces``; the distributed optimizer casts its fp32
        shard to float8 after each step and the parameters are all-gathered at 1 B (formulas/float8_training.py
        eq. T3). Only with a megatron precision, float8 and a transformer-engine recipe; True needs the
        distributed optimizer (zero >= 1) and no FSDP (Megatron-LM arguments.py lines 1051-1056, 1095-1097).
        None: off, Megatron-LM's own flag default (Megatron-Bridge's float8 recipes set it: give True for
        their runs; a named assumption naming both).
    compile: the model runs under ``torch.compile`` (inductor): the min-cut partitioner decides what is saved
        for the backward (fused RMSNorm / SwiGLU; ``formulas/compiled_activations.py``), and the step's
        memory-bound kernels are inductor's fused ones (``formulas/elementwise_traffic.py`` eqs. E4-E6).
    compile_scope: with compile, what it covers: 'layers+loss' (torchtune: each decoder layer and the
        cross-entropy, whose compiled form keeps its input logits instead of the fp32 log-softmax,
        ``formulas/training_activations.py`` eqs. C1/C2), 'layers' (torchtitan @ 9dec370: the loss runs eagerly)
        or 'layers+loss+upcast' (torchtitan @ e7c0cae: the model returns half-precision logits and the compiled
        loss upcasts them inside, keeping its half-precision input, eq. C3).
    memory: device memory [bytes]; None: not checked. headroom: share of it kept free (estimate/verdict.py
        eq. 1); None: DEFAULT_HEADROOM.
    metric: what the device figure is compared with, 'allocated' | 'reserved' | 'nvidia-smi'
        (estimate/allocator.py); None: the device total as before the option (live tensors + CUDA context).
    batch_shapes: 'variable' (batches padded to their longest sample, so shapes change between steps: the
        allocator keeps a fragmentation reserve, calibrated) or 'fixed' (every step the same shapes, e.g.
        torchtitan's fixed-length packed sequences: each stream's cached blocks are reused exactly, and reserved -
        allocated is the blocks cached on the other streams, formulas/caching_allocator.py eq. R1). Only the
        reserved and nvidia-smi metrics read it.
    given: the names of the fields the caller passed (set by the constructor, specs/given.py).
    device: 'gpu' (a CUDA context and the caching allocator's reserve on the device) or 'cpu' (the step runs in
        host RAM: no CUDA context, and the process's own runtime counts against that same memory).
    bf16_tensor_cores: False on a GPU without BF16 tensor cores (NVIDIA below compute capability 8.0), set from the
        named device (estimate/device.py ``training_device_fields``): the default precision there is fp16-mixed and
        a bf16 precision given is warned about (estimate/device.py ``with_device_precision``).
    gpu_capability: the CUDA GPU's compute capability (major x 10 + minor: 90 on an H100, 100 on a B200), set from
        the named device (estimate/device.py ``training_device_fields``); None where not known or not a CUDA GPU.
        What reads it: TransformerEngine's float8 weight copy (formulas/float8_training.py eq. T1: no transposed copy
        on a GPU with non-TN FP8 GEMMs), sized as on Hopper when None.
    """

    # the command line's and the web API's spellings of fields named otherwise here (specs/given.py: a Python
    # caller who writes one is told the field's name; a class attribute, not a field: unannotated)
    OTHER_NAMES = {"tensor_parallel": "tp", "batch": "micro_batch", "seq": "seq_len", "pipeline_parallel": "pp",
                   "expert_parallel": "ep", "cp": "context_parallel"}
    method: str = "full"
    rank: int = 16
    alpha: float | None = None
    targets: tuple[str, ...] = DECODER_LINEAR
    adapter_dtype: str | None = None
    modules_to_save: tuple[str, ...] = ()
    # None: DEFAULT_RECOMPUTE_MODULES under grad_checkpointing 'selective' (``recomputed_modules``)
    recompute_modules: tuple[str, ...] | None = None
    base_dtype: str | None = None
    optimizer: str | None = None
    optimizer_state_dtype: str | None = None
    optimizer_impl: str | None = None
    precision: str = "bf16-mixed"
    tf32: bool = False
    micro_batch: int = 1
    seq_len: int = 2048
    target_len: int | None = None
    grad_accumulation: int = 1
    grad_checkpointing: str = None  # type: ignore[assignment]  # None: default_grad_checkpointing(method)
    checkpoint_every: int = 1
    attention: str = "sdpa"
    attention_kernel: str | None = None
    packing: bool = False
    doc_len: int | None = None
    loss_chunks: int = 1
    loss: str = None  # type: ignore[assignment]  # None: default_loss(precision)
    layernorm: str = "torch"
    train_metric_passes: int = 0
    framework: str = "none"
    checkpoint_offload: bool = False
    checkpoint_impl: str = "non-reentrant"
    kernels: str = "pytorch"
    mamba_path: str | None = None
    nf4_quantizer: str = "bitsandbytes"
    lora_dropout: str = "none"
    nf4_format: str = "nf4-dq"
    loop_keeps_graph: bool = False
    deepspeed_gather: str = "current"
    zero_grad: str = "set-to-none"
    optimizer_in_backward: bool = False
    gpus: int = 1
    zero: int = 0
    fsdp: str | None = None
    tp: int = 1
    pp: int = 1
    virtual_stages: int = 1
    pipeline_split: str = "even"
    tp_comm_overlap: bool = False
    tp_backward_overlap: bool = False
    ep: int = 1
    # the routed experts' own tensor-parallel size (Megatron-Core --expert-tensor-parallel-size); None: the
    # framework's rule (Megatron: tp; torchtitan: experts whole under EP) -- formulas/tensor_parallel.py expert_tp_ways
    etp: int | None = None
    # the MoE token dispatcher (Megatron-Core --moe-token-dispatcher-type; formulas/expert_parallel_time.py
    # DISPATCHERS); None: the framework's (alltoall, a named assumption)
    moe_dispatcher: str | None = None
    # Megatron-Core --overlap-moe-expert-parallel-comm: the EP exchange overlaps another micro-batch's compute
    ep_comm_overlap: bool = False
    # Megatron --overlap-grad-reduce / --overlap-param-gather (Megatron-Core's DDP, eq. (7g)); off: Megatron-LM's default
    overlap_grad_reduce: bool = False
    overlap_param_gather: bool = False
    # Megatron gradient_accumulation_fusion (wgrad GEMMs accumulate into main_grad); None: on under Megatron precision
    gradient_accumulation_fusion: bool | None = None
    # Megatron-Core moe_router_fusion (TE's fused top-k + score function); None: off, TransformerConfig's default
    moe_router_fusion: bool | None = None
    sequence_parallel: bool = False
    offload: str = "none"
    gpus_per_node: int = 8
    network: str | None = None
    grad_sync: str | None = None
    fsdp_version: int = 2
    fsdp2_units: str = "largest-two"
    fsdp1_lora_wrap: str = "adapters-apart"
    context_parallel: int = 1
    cp_kind: str = "ring"
    activation_offload: bool = False
    tiled_mlp: bool = False
    float8: bool = False
    float8_recipe: str = "torchao"
    # Megatron --fp8-param-gather (None: off, Megatron-LM's flag default; Bridge's fp8 recipes set it; ``fp8_params``)
    fp8_param_gather: bool | None = None
    compile: bool = False
    compile_scope: str = "layers+loss"
    memory: int | None = None
    headroom: float | None = None
    metric: str | None = None
    batch_shapes: str = "variable"
    # the fields the caller gave (specs/given.py): what the assumptions mark as given rather than "(default)"
    given: frozenset[str] | None = field(default=None, repr=False)
    device: str = "gpu"
    gpu_runtime: str = "cuda"  # GPU_RUNTIMES: 'metal' on an Apple chip (estimate/device.py device_fields)
    bf16_tensor_cores: bool = True  # estimate/device.py training_device_fields
    gpu_capability: int | None = None  # estimate/device.py training_device_fields

    def __post_init__(self) -> None:
        if self.grad_checkpointing is None or type(self.grad_checkpointing) is MethodDefault:
            # not stated (or a copy's method default, MethodDefault): this method's default (QLoRA: peft's k-bit
            # preparation), resolved here, the one place, whichever way the workload was built
            object.__setattr__(self, "grad_checkpointing", default_grad_checkpointing(self.method))
        if self.loss is None or type(self.loss) is PrecisionDefault:  # as grad_checkpointing, from the precision
            object.__setattr__(self, "loss", default_loss(self.precision))
        if self.recompute_modules is not None:
            object.__setattr__(self, "recompute_modules", normalize_recompute_modules(self.recompute_modules))
            if self.precision not in MEGATRON_PRECISIONS:
                raise FieldError("recompute_modules", "recompute_modules is Megatron-Core's selective recompute (its "
                                 "Transformer Engine layer spec); it needs precision megatron-bf16 or megatron-fp16, "
                                 f"not {self.precision!r}")
            if self.grad_checkpointing != "selective":
                raise FieldError("recompute_modules", "recompute_modules names what Megatron's selective recompute "
                                 "recomputes; it needs grad_checkpointing 'selective', not "
                                 f"{self.grad_checkpointing!r}")
        # memory="80GiB", rank=0, alpha="x": one line naming the field and its range (the CLI's and the request's)
        check_numbers(self, _NUMBERS)
        closed = _CLOSED_VALUES(self)
        if not all(map(contains, _CLOSED_ALLOWED, closed)):  # (the common case answered in C; the loop names the first)
            for (name, allowed), value in zip(_CLOSED, closed, strict=True):
                if value not in allowed:
                    raise InputError(unknown_choice(name, value, allowed))
        if self.device == "cpu" or self.gpu_runtime == "metal":
            off = off_unified_memory(self)
            if off is not None:
                raise DeviceCannotRunError(*off)
        if (self.device == "cpu" or self.gpu_runtime == "metal") and self.optimizer is not None \
                and self.optimizer.startswith("paged-"):  # bitsandbytes cget_managed_ptr: cudaMallocManaged
            raise InputError(paged_off_cuda(self.optimizer, self.device == "cpu"))
        optional = (("optimizer", self.optimizer, OPTIMIZERS),
                    ("optimizer_state_dtype", self.optimizer_state_dtype, STATE_DTYPES),
                    ("optimizer_impl", self.optimizer_impl, OPTIMIZER_IMPLS),
                    ("mamba_path", self.mamba_path, MAMBA_PATHS),
                    ("adapter_dtype", self.adapter_dtype, ADAPTER_DTYPES),
                    ("attention_kernel", self.attention_kernel, TRAIN_ATTENTION_KERNELS),
                    ("base_dtype", self.base_dtype, ADAPTER_DTYPES), ("fsdp", self.fsdp, FSDP_MODES))
        for opt_name, opt_value, opt_allowed in optional:
            if opt_value is not None and opt_value not in opt_allowed:
                raise InputError(unknown_choice(opt_name, opt_value, opt_allowed))
        if self.framework == "none":  # under a profile, once it has filled the attention the caller left unstated
            check_kernels(self)  # (estimate/framework.py with_framework)
        counts = _COUNT_VALUES(self)
        if not (set(map(type, counts)) == {int} and min(counts) >= 1 and max(counts) <= COUNT.high  # (in C)
                and self.gpus_per_node <= MACHINE_GPUS.high):
            # each through its flag's range (numbers.py: COUNT, seq_len TOKENS), so micro_batch=0 or 2e6 from Python
            # is the CLI's line, and text ('4k') is read as the CLI reads it (specs/workload.py read_number): one rule
            # for the command line, the request file and the Python API
            for name, v in zip(_COUNTS, counts, strict=True):  # a bool too: numbers.not_a_boolean's line
                self.__dict__[name] = int(read_number(v, name, _COUNT_RANGES.get(name, COUNT)))  # 2.0 -> 2
        if type(self.zero) is not int or not 0 <= self.zero <= 3:  # the CLI's --zero range and line (ZERO_STAGE);
            # a bool too: the one number check refuses it with the range (numbers.check_number)
            self.__dict__["zero"] = int(read_number(self.zero, "zero", ZERO_STAGE))  # '2' or 2.0 -> 2, as the CLI
        if isinstance(self.target_len, str):
            self.__dict__["target_len"] = int(read_number(self.target_len, "target_len", TOKENS))
        if self.target_len is not None and (not isinstance(self.target_len, int) or isinstance(self.target_len, bool)
                                            or self.target_len < 1):
            raise InputError(f"target_len must be a positive integer, got {self.target_len!r}")
        if self.etp is not None and (type(self.etp) is not int or not 1 <= self.etp <= COUNT.high):
            self.__dict__["etp"] = int(read_number(self.etp, "etp", COUNT))  # the CLI's --etp range and line
        if isinstance(self.doc_len, str):
            self.__dict__["doc_len"] = int(read_number(self.doc_len, "doc_len", TOKENS))
        if self.doc_len is not None:
            if not isinstance(self.doc_len, int) or isinstance(self.doc_len, bool) or self.doc_len < 1:
                raise InputError(f"doc_len must be a positive integer, got {self.doc_len!r}")
            if not self.packing:
                raise InputError("doc_len is the length of each packed document: it needs packing")
            if self.doc_len > self.seq_len:
                raise InputError(f"doc_len {self.doc_len} exceeds seq_len {self.seq_len}: a packed document "
                                 "fills at most one row")
        if self.method != "full":
            object.__setattr__(self, "targets", normalize_targets(self.targets))
        object.__setattr__(self, "modules_to_save", normalize_modules_to_save(self.modules_to_save))
        if self.modules_to_save and self.method == "full":
            raise InputError("modules_to_save applies to lora/dora/qlora (full training trains every module already)")
        if self.checkpoint_offload and self.grad_checkpointing != "full":
            raise InputError("checkpoint_offload moves the inputs that full checkpointing keeps to host RAM; it needs "
                             f"grad_checkpointing 'full', not {self.grad_checkpointing!r}")
        if self.checkpoint_every > 1 and self.grad_checkpointing not in ("full", "selective-op"):
            raise InputError("checkpoint_every applies to grad_checkpointing 'full' or 'selective-op' (every N-th "
                             f"layer checkpointed), not {self.grad_checkpointing!r}")
        if self.checkpoint_impl == "reentrant" and (self.grad_checkpointing != "full" or self.checkpoint_offload):
            raise InputError("checkpoint_impl 'reentrant' is torch's CheckpointFunction around whole layers: it needs "
                             "grad_checkpointing 'full' without checkpoint_offload (selective policies and Unsloth's "
                             "offload are non-reentrant)")
        if self.checkpoint_impl == "non-reentrant-no-early-stop" and (self.grad_checkpointing != "full"
                                                                      or self.checkpoint_offload):
            raise InputError("checkpoint_impl 'non-reentrant-no-early-stop' is torch 1.13's checkpoint around whole "
                             "layers: it needs grad_checkpointing 'full' without checkpoint_offload (selective "
                             "policies and Unsloth's offload are later code)")
        if self.compile_scope != "layers+loss" and not self.compile:
            raise InputError(f"compile_scope {self.compile_scope!r} says what torch.compile covers; give compile too")
        if self.float8_recipe != "torchao" and not self.float8:
            raise InputError(f"float8_recipe {self.float8_recipe!r} names whose float8 linears run; give float8 too")
        if self.deepspeed_gather != "current" and self.zero != 3:
            raise InputError(f"deepspeed_gather {self.deepspeed_gather!r} is DeepSpeed ZeRO-3's parameter gather; "
                             f"zero is {self.zero}")
        if self.zero_grad != "set-to-none" and (self.zero or self.fsdp is not None or self.optimizer_in_backward):
            raise InputError(f"zero_grad {self.zero_grad!r} keeps a torch optimizer's gradients between steps; "
                             + ("DeepSpeed's engine frees them (stage3.py param.grad = None; accelerate's "
                                "DeepSpeedOptimizerWrapper.zero_grad does nothing)" if self.zero and self.fsdp is None
                                else "FSDP is not modelled with kept gradients" if self.fsdp is not None
                                else "optimizer_in_backward frees each gradient at its update"))
        if self.nf4_quantizer != "bitsandbytes" and self.method != "qlora":
            raise InputError(f"nf4_quantizer {self.nf4_quantizer!r} quantizes a QLoRA base; method is {self.method!r}")
        if self.nf4_format != "nf4-dq" and self.method != "qlora":
            raise InputError(f"nf4_format {self.nf4_format!r} is a QLoRA base's format; method is {self.method!r}")
        if self.loop_keeps_graph is True and self.method != "qlora":  # its one modelled effect is eq. G1's
            raise InputError("loop_keeps_graph keeps bitsandbytes 0.42's 4-bit matmul inputs alive (a QLoRA base, "
                             f"formulas/training_activations.py eq. G1); method is {self.method!r}")
        if self.lora_dropout != "none" and self.method == "full":
            raise InputError(f"lora_dropout {self.lora_dropout!r} drops out LoRA adapters' inputs; method is 'full'")
        if self.loss == "ce-kept-logits" and self.loss_chunks > 1:
            raise InputError("loss 'ce-kept-logits' is the unchunked cross-entropy of torchtune's 2024-05 loop (the "
                             f"whole shifted logits kept); it does not take loss_chunks {self.loss_chunks}")
        if not isinstance(self.framework, str):
            raise InputError(f"framework must be a profile name (e.g. 'llm-foundry'), got {self.framework!r}")
        if type(self.train_metric_passes) is not int or self.train_metric_passes < 0:  # a bool, text, None: refused
            raise InputError("train_metric_passes must be a whole number >= 0 (eager cross-entropy passes over the "
                             f"logits), got {self.train_metric_passes!r}")
        if self.loss == "fused-xentropy" and (self.loss_chunks > 1 or self.compile):
            raise InputError("loss 'fused-xentropy' is flash-attn's one fused cross-entropy kernel over all the "
                             "logits (llm-foundry, eager): it does not take "
                             + (f"loss_chunks {self.loss_chunks}" if self.loss_chunks > 1 else "compile (a compiled "
                                "model around it is not modelled)"))
        liger = [x for x, on in (("kernels liger", self.kernels == "liger"), ("loss liger-flce",
                                                                               self.loss == "liger-flce")) if on]
        if liger:  # formulas/liger_kernels.py: transformers' modules patched by apply_liger_kernel_to_*
            why = ("compile (what inductor saves around Liger's autograd functions is not modelled)" if self.compile
                   else f"precision {self.precision} (Megatron-Core's layers, not transformers')"
                   if self.precision in MEGATRON_PRECISIONS else "")
            if self.loss == "liger-flce" and not why:
                liger = ["loss liger-flce"]
                why = (f"loss_chunks {self.loss_chunks} (it chunks by its own rule, eq. LG3)" if self.loss_chunks > 1
                       else f"tp {self.tp} (it needs the whole vocabulary on each device)" if self.tp > 1 else "")
            if why:
                raise InputError(f"{' and '.join(liger)} (Liger-Kernel) does not take {why}")
        if self.loss == "ce-loss-parallel":
            why = ("it needs tp > 1" if self.tp == 1 else
                   f"it does not take loss_chunks {self.loss_chunks}" if self.loss_chunks > 1 else
                   "with compile it needs compile_scope 'layers' (the loss eager, as torchtitan's; a compiled "
                   "loss_parallel is not modelled)" if self.compile and self.compile_scope != "layers" else "")
            if why:
                raise InputError("loss 'ce-loss-parallel' is the eager, unchunked cross-entropy over tensor "
                                 f"parallelism's vocabulary shards (torch loss_parallel, torchtitan): {why}")
        if self.fsdp is not None and self.zero:
            raise FieldError("zero", f"give zero ({self.zero}) or fsdp ({self.fsdp!r}), not both: ZeRO stages 1-3 and "
                             "FSDP each shard the model states their own way", also=("fsdp",))
        for flag in ("activation_offload", "float8", "compile", "loop_keeps_graph", "tf32", "ep_comm_overlap",
                     "overlap_grad_reduce", "overlap_param_gather"):
            if not isinstance(getattr(self, flag), bool):
                raise InputError(f"{flag}: {not_true_or_false(getattr(self, flag))}")
        if not isinstance(self.tiled_mlp, bool):
            raise InputError(f"tiled_mlp: {not_true_or_false(self.tiled_mlp)}")
        # kernels liger runs beside it: ArcticTraining turns Liger's SwiGLU off under tiled_mlp_compute and keeps
        # Liger's RMSNorm, RoPE and fused loss (snowflakedb/ArcticTraining @5885b9f8 model/liger_factory.py L41-50,
        # ``swiglu=False``), so the tiled MLP is PyTorch's (eqs. TM1/TM2 replace LG2/A3l, formulas/liger_kernels.py)
        if self.tiled_mlp and (self.method != "full" or self.tp > 1 or self.kernels == "unsloth"
                               or self.precision in MEGATRON_PRECISIONS):
            raise InputError("tiled_mlp (DeepSpeed TiledMLP, as ArcticTraining applies it) is modelled for full "
                             "fine-tuning with the PyTorch MLP (kernels pytorch or liger), no tensor parallelism and "
                             "no megatron precision")
        if self.activation_offload and self.checkpoint_offload:
            raise InputError("give activation_offload (torchtune: every saved activation to host memory) or "
                             "checkpoint_offload (Unsloth: the checkpointed layer inputs), not both")
        if self.grad_sync is not None:
            if self.grad_sync not in GRAD_SYNC:
                raise InputError(unknown_choice("grad_sync", self.grad_sync, GRAD_SYNC))
            fsdp1_no_sync = self.fsdp is not None and self.fsdp_version == 1 and self.grad_sync == "optimizer-step"
            if self.zero or (self.fsdp is not None and not fsdp1_no_sync):
                raise InputError("grad_sync applies to DDP (zero 0, no fsdp) and, as 'optimizer-step', to FSDP1 "
                                 "(fsdp_version 1: no_sync): DeepSpeed ZeRO-1 reduces at the optimizer step, "
                                 "ZeRO-2/3 and FSDP2 every micro-step")
            if self.megatron_grad_buffer and self.grad_sync == "micro-step":
                raise InputError(f"grad_sync micro-step with precision {self.precision}: Megatron-Core's schedules run "
                                 "every micro-batch but the last under its DDP's no_sync and reduce the grad buffer "
                                 "once per optimizer step (NVIDIA/Megatron-LM @d98e8a64 pipeline_parallel/"
                                 "schedules.py lines 814-830); give optimizer-step or leave it out")
        if self.fsdp_version not in FSDP_VERSIONS or isinstance(self.fsdp_version, bool):
            raise InputError(f"fsdp_version must be 1 (FullyShardedDataParallel) or 2 (fully_shard), got "
                             f"{self.fsdp_version!r}")
        if self.fsdp_version == 1 and self.fsdp is None:
            raise InputError("fsdp_version 1 applies to FSDP; give fsdp (full, grad_op or hybrid)")
        if self.fsdp2_units != "largest-two" and (self.fsdp is None or self.fsdp_version != 2):
            raise InputError(f"fsdp2_units {self.fsdp2_units!r} lays out FSDP2 units; give fsdp (full, grad_op or "
                             "hybrid) with fsdp_version 2")
        if self.fsdp1_lora_wrap != "adapters-apart" and (self.fsdp is None or self.fsdp_version != 1
                                                          or not self.adapters):
            raise InputError(f"fsdp1_lora_wrap {self.fsdp1_lora_wrap!r} wraps FSDP1 units of a LoRA model; give a "
                             "LoRA method with fsdp (full, grad_op or hybrid) and fsdp_version 1")
        model_parallel = self.tp * self.pp * self.context_parallel
        if self.gpus % model_parallel:
            raise FieldError("gpus", also=("tp", "pp", "context_parallel"), message=(
                f"gpus ({self.gpus}) must be a multiple of tp x pp x context_parallel ({self.tp} x {self.pp} x "
                f"{self.context_parallel})"))
        if self.cp_kind == "ulysses":
            # DeepSpeed's: beside ZeRO (ArcticTraining's recipes), not Megatron-Core's or FSDP; the heads' checks are
            # the model's (estimate/training/setup.py)
            why = ("context_parallel > 1" if self.context_parallel < 2 else
                   f"not precision {self.precision} (Megatron-Core's context parallelism is its ring)"
                   if self.precision in MEGATRON_PRECISIONS else
                   "ZeRO, not fsdp (DeepSpeed's UlyssesSPAttentionHF)" if self.fsdp is not None else
                   "no tp (ALST's Ulysses shards the heads over the cp ranks alone)" if self.tp > 1 else
                   "fused attention: ulysses_sp.py @edaa7221 lines 461-466 refuse attn_implementation 'eager'"
                   if self.attention == "eager" else
                   f"seq_len a multiple of context_parallel ({self.context_parallel}; ulysses_sp.py @edaa7221 line "
                   "698)" if self.seq_len % self.context_parallel else "")
            if why:
                raise InputError(f"cp_kind 'ulysses' (DeepSpeed-Ulysses) needs {why}")
        elif self.context_parallel > 1:
            if self.cp_ring == "te-p2p":
                # Megatron-Core's context parallelism beside its own DDP / distributed optimizer (the dp-cp group,
                # formulas/context_parallel.py); Megatron FSDP is not modelled
                if self.fsdp is not None:
                    raise InputError("context_parallel under a Megatron precision is Megatron-Core's, beside its DDP "
                                     "or distributed optimizer (the zero setting); fsdp does not apply")
            elif self.fsdp is None or self.fsdp_version != 2:
                raise InputError("context_parallel is torchtitan's (or, under precision megatron-bf16 / "
                                 "megatron-fp16, Megatron-Core's); torchtitan shards the parameters with FSDP2 over "
                                 "dp x cp: give fsdp (full, grad_op or hybrid) with fsdp_version 2")
            if self.attention == "eager":
                raise InputError("context_parallel runs ring attention over fused attention kernels (SDPA's flash, "
                                 "efficient, cuDNN; TransformerEngine's); attention 'eager' does not apply")
            if self.seq_len % (2 * self.context_parallel):
                raise InputError(f"seq_len ({self.seq_len}) must be a multiple of 2 x context_parallel "
                                 f"({2 * self.context_parallel}): the head-tail load balancer splits each sequence "
                                 "into 2 x cp chunks")
        if self.float8 and (self.method != "full" or self.precision in ("fp32", "fp16", "fp16-mixed",
                                                                        "deepspeed-fp16", "megatron-fp16")):
            raise InputError("float8 applies to full training with bf16 compute (torchao convert_to_float8_training "
                             "in torchtitan); use method full and a bf16 precision")
        if self.etp is not None:
            # Megatron-Core's expert grid, ETP x EP x expert-DP x PP over the same world (NVIDIA/Megatron-LM @d98e8a64
            # megatron/core/parallel_state.py:873-884: world_size divisible by ETP x EP x PP, else RuntimeError)
            if self.gpus % (self.etp * self.ep * self.pp):
                raise FieldError("etp", also=("ep", "pp", "gpus"), message=(
                    f"etp x ep x pp ({self.etp} x {self.ep} x {self.pp}) must divide gpus ({self.gpus}): Megatron's "
                    "expert grid, expert data-parallel = gpus / (etp x ep x pp)"))
        elif (self.gpus // (self.tp * self.pp)) % self.ep:
            raise FieldError("ep", also=("gpus", "tp", "pp"), message=(
                f"ep ({self.ep}) must divide the data-parallel degree, gpus / (tp x pp) = "
                f"{self.gpus // (self.tp * self.pp)} (or state etp: Megatron's expert grid takes gpus / (etp x pp))"))
        if self.moe_dispatcher is not None and self.moe_dispatcher not in MOE_DISPATCHERS:
            raise FieldError("moe_dispatcher", f"moe_dispatcher must be one of {', '.join(MOE_DISPATCHERS)}, got "
                             f"{self.moe_dispatcher!r}")
        # the settings of the expert-parallel exchange only: one rule where there is none (ep 1, and so any dense
        # model, whose ep > 1 estimate/training/setup.py refuses)
        for name, stated in (("moe_dispatcher", self.moe_dispatcher is not None),
                             ("ep_comm_overlap", self.ep_comm_overlap)):
            if stated and self.ep == 1:
                raise FieldError(name, f"{name} sets the expert-parallel token exchange; it needs an MoE model "
                                 "with expert parallelism (ep > 1)")
        if self.moe_dispatcher == "allgather" and self.precision not in MEGATRON_PRECISIONS:
            # Megatron-Core's moe_token_dispatcher_type 'allgather'; torchtitan's comm_backend is standard
            # (all-to-all), deepep, hybridep or minimal_async_ep (pytorch/torchtitan @b5bcd76
            # torchtitan/models/common/config_utils.py:388-424), DeepSpeed-MoE's an all-to-all (sharded_moe.py)
            raise FieldError("moe_dispatcher", "moe_dispatcher 'allgather' is Megatron-Core's allgather token "
                             "dispatcher; it needs precision megatron-bf16 or megatron-fp16 (torchtitan and "
                             f"DeepSpeed exchange with an all-to-all), not {self.precision!r}")
        if self.ep_comm_overlap:
            # Megatron-Core's overlap_moe_expert_parallel_comm (combined 1F1B); torchtitan, DeepSpeed and plain PyTorch
            # have none. Megatron asserts a bf16 or fp16 model (transformer_config.py:3034-3037 @d98e8a64), which both
            # MEGATRON_PRECISIONS are
            if self.precision not in MEGATRON_PRECISIONS:
                raise FieldError("ep_comm_overlap", "ep_comm_overlap is Megatron-Core's overlap_moe_expert_parallel_comm "
                                 "(combined 1F1B); it needs precision megatron-bf16 or megatron-fp16, not "
                                 f"{self.precision!r}")
            if self.moe_dispatcher == "allgather":
                raise FieldError("ep_comm_overlap", "Megatron overlaps the expert-parallel exchange with the alltoall "
                                 "or flex dispatcher only (transformer_config.py), not allgather")
            if self.grad_checkpointing == "full":
                raise FieldError("ep_comm_overlap", "Megatron refuses overlap_moe_expert_parallel_comm with full "
                                 "recomputation (transformer_config.py)")
            if self.pp > 1 and self.virtual_stages == 1:
                raise FieldError("ep_comm_overlap", "Megatron's EP overlap with pp > 1 needs the interleaved schedule "
                                 "(virtual_stages > 1, transformer_config.py)")
        if (self.overlap_grad_reduce or self.overlap_param_gather) and not self.megatron_grad_buffer:
            # Megatron-Core's DDP options (distributed_data_parallel_config.py:18-22 @d98e8a64); torch DDP overlaps
            # its own buckets (eq. (7d)), FSDP by phase (eq. (8')), DeepSpeed by overlap_comm
            name = "overlap_grad_reduce" if self.overlap_grad_reduce else "overlap_param_gather"
            raise FieldError(name, f"{name} is a Megatron-Core DDP option; it needs precision "
                             f"megatron-bf16 or megatron-fp16 without fsdp, not precision {self.precision!r}"
                             + (f" with fsdp {self.fsdp!r}" if self.fsdp is not None else ""))
        if self.overlap_param_gather and not (self.overlap_grad_reduce and self.zero >= 1):
            # Megatron-LM @d98e8a64 megatron/training/arguments.py:1024-1029 asserts both
            raise FieldError("overlap_param_gather", "Megatron's --overlap-param-gather needs the distributed "
                             "optimizer (zero >= 1) and --overlap-grad-reduce (arguments.py:1024-1029 @d98e8a64); got "
                             f"zero {self.zero}, overlap_grad_reduce {'on' if self.overlap_grad_reduce else 'off'}",
                             also=("zero", "overlap_grad_reduce"))
        if self.fp8_param_gather is not None:
            if not isinstance(self.fp8_param_gather, bool):
                raise InputError(f"fp8_param_gather: {not_true_or_false(self.fp8_param_gather)}")
            if self.fp8_param_gather and self.float8 and self.float8_recipe == "transformer-engine-mxfp8":
                raise FieldError("fp8_param_gather", MXFP8_PARAM_GATHER_REFUSAL)
            if self.fp8_param_gather and not self.fp8_params_possible:
                raise FieldError("fp8_param_gather", "fp8_param_gather is Megatron's (TransformerEngine float8 "
                                 "parameters): it needs precision megatron-bf16 or megatron-fp16, float8 with "
                                 "float8_recipe transformer-engine or transformer-engine-current, the distributed "
                                 "optimizer (zero >= 1, Megatron-LM @d98e8a64 arguments.py lines 1095-1097) and "
                                 "no fsdp (torch FSDP2 turns it off under TE >= 2.0, lines 1051-1056); got "
                                 f"precision {self.precision!r}, float8 {self.float8}, float8_recipe "
                                 f"{self.float8_recipe!r}, zero {self.zero}, fsdp {self.fsdp!r}")
        if self.gradient_accumulation_fusion is not None:
            if not isinstance(self.gradient_accumulation_fusion, bool):
                raise InputError(f"gradient_accumulation_fusion: {not_true_or_false(self.gradient_accumulation_fusion)}")
            if self.gradient_accumulation_fusion and self.precision not in MEGATRON_PRECISIONS:
                # Megatron's fusion of the gradient accumulation into TE's / APEX's wgrad GEMM; torch autograd, FSDP
                # and DeepSpeed accumulate into .grad with a separate add (eq. (O3))
                raise FieldError("gradient_accumulation_fusion", "gradient_accumulation_fusion is Megatron's (TE "
                                 "fuse_wgrad_accumulation into main_grad); it needs precision megatron-bf16 or "
                                 f"megatron-fp16, not {self.precision!r}")
        if self.moe_router_fusion is not None:
            if not isinstance(self.moe_router_fusion, bool):
                raise InputError(f"moe_router_fusion: {not_true_or_false(self.moe_router_fusion)}")
            if self.moe_router_fusion and self.precision not in MEGATRON_PRECISIONS:
                # Megatron-Core's router (moe/router.py): transformers' and torchtitan's routers are their own ops
                raise FieldError("moe_router_fusion", "moe_router_fusion is Megatron-Core's (TE's fused top-k and "
                                 "score function in its MoE router); it needs precision megatron-bf16 or "
                                 f"megatron-fp16, not {self.precision!r}")
        if self.virtual_stages > 1 and self.pp == 1:
            raise InputError("virtual_stages (interleaved pipeline schedule) needs pipeline parallelism (pp > 1)")
        if self.pipeline_split != "even" and self.pp == 1:
            raise InputError(f"pipeline_split {self.pipeline_split!r} splits layers over pipeline stages; give pp > 1")
        if self.tp_comm_overlap and self.tp == 1:
            raise InputError("tp_comm_overlap needs tensor parallelism (tp > 1)")
        if self.tp_backward_overlap and self.tp == 1:
            raise InputError("tp_backward_overlap needs tensor parallelism (tp > 1)")
        if self.sequence_parallel and self.tp == 1:
            raise InputError("sequence_parallel needs tensor parallelism (tp > 1)")
        if self.batch_shapes == "fixed" and self.metric not in POOL_METRICS:  # only the allocator's reserve reads it
            raise InputError("batch_shapes 'fixed' sets the caching allocator's reserve, which only metric 'reserved' "
                             "or 'nvidia-smi' reads; give metric reserved or nvidia-smi")
        if self.fsdp == "hybrid":  # its shard groups are machines, the default machine of 8 too: whole machines
            check_whole_machines(self.gpus, self.gpus_per_node, "gpus", default=TrainingWorkload.gpus_per_node)
        if self.ep > 1 and (self.shard_group * self.tp) % ((self.etp or self.tp) * self.ep):
            # (expert_shard_group's rule: shard_group x tp / (etp x ep) ranks; without a stated etp, shard_group / ep)
            # expert parallelism takes its ranks out of the shard group (formulas/parallelism.py expert_shard_group):
            # torchtitan's efsdp mesh is dp_shard x cp x tp / ep (torchtitan/distributed/parallel_dims.py:280-282),
            # which has no size when ep does not divide the ranks hybrid sharding shards over (one node's)
            raise FieldError("ep", also=("fsdp", "gpus_per_node", "tp", "pp"), message=(
                f"ep ({self.ep}) must divide the {self.shard_group} data-parallel ranks of one node (gpus_per_node / "
                "(tp x pp)) that fsdp 'hybrid' shards over: expert parallelism takes its ranks out of that shard "
                "group"))
        if self.precision == "fsdp-bf16-mixed" and self.fsdp is None:
            raise InputError("precision 'fsdp-bf16-mixed' is FSDP's MixedPrecisionPolicy; give fsdp (full, grad_op or "
                             "hybrid)")
        if self.offload == "optimizer" and self.fsdp is not None:
            # torch FSDP has no states-only offload: FSDP2's CPUOffloadPolicy "offloads parameters, gradients, and
            # optimizer states to CPU" (torch 2.13.0 distributed/fsdp/_fully_shard/_fsdp_api.py lines 183-189), FSDP1's
            # CPUOffload(offload_params=True) likewise; offload 'optimizer' is DeepSpeed's offload_optimizer
            raise FieldError("offload", also=("fsdp",), message=(
                "offload 'optimizer' is DeepSpeed ZeRO-Offload's (states only); torch FSDP offloads parameters, "
                "gradients and optimizer states together (FSDP2 CPUOffloadPolicy, FSDP1 CPUOffload): with fsdp give "
                "offload params"))
        if self.offload == "params" and 0 < self.shard_stage < 3:  # a stage named below 3; stage 0 may be the
            # default a memory budget replaces (estimate/training/compose.py ``sharded_workload``): checked on the
            # workload sized (``offload_without_zero``)
            raise InputError("offload='params' needs fully sharded parameters (zero=3 or fsdp='full'/'hybrid')")
        if self.method == "qlora" and self.precision in ("fp32", "fp16", "deepspeed-fp16", "megatron-fp16",
                                                          "megatron-bf16", "deepspeed-bf16"):
            raise InputError(f"qlora computes in bf16 on a 4-bit base; precision {self.precision!r} does not apply "
                             "(use bf16-mixed or bf16)")
        if self.optimizer_in_backward and (self.grad_accumulation > 1 or self.pp > 1):
            raise InputError("optimizer_in_backward updates each parameter during the backward, so it cannot "
                             "accumulate gradients (grad_accumulation and pp must be 1)")
        if self.base_dtype is not None and self.method == "full":
            raise InputError("base_dtype applies to lora/dora/qlora (a frozen base); full training stores weights as "
                             "the precision recipe says")
        check_memory_target(self.memory, self.headroom, self.metric)

    @property
    def dora(self) -> bool:
        return self.method == "dora"

    @property
    def adapters(self) -> bool:
        """True for the parameter-efficient methods (a frozen base plus trained adapters)."""
        return self.method != "full"

    @property
    def megatron_grad_buffer(self) -> bool:
        """Whether Megatron-Core's DDP holds the gradients: a megatron precision without FSDP. Its one contiguous
        grad buffer is allocated when the model is wrapped and kept whole on every rank, the distributed optimizer
        (zero 1 or 2) sharding only the main parameters and optimizer states (NVIDIA/Megatron-LM @d98e8a64
        megatron/core/distributed/param_and_grad_buffer.py:1190-1195, 708-733); under FSDP (torch FSDP2 in Megatron)
        the gradients are FSDP's, sharded (review23a D1: megatron-bf16 with fsdp full counted the whole fp32 buffer
        unsharded, 35.56 -> 65.47 GiB on Llama 3.1 8B x 8). The one predicate the states, timeline and texts read."""
        return self.precision in MEGATRON_PRECISIONS and self.fsdp is None

    @property
    def fp8_params_possible(self) -> bool:
        """Whether Megatron's fp8_param_gather can apply: a megatron precision, float8 with a TransformerEngine
        recipe, the distributed optimizer (zero >= 1; Megatron-LM @d98e8a64 arguments.py lines 1095-1097 assert it)
        and no FSDP (torch FSDP2 turns it off under TE 2.x, lines 1051-1056)."""
        return (self.precision in MEGATRON_PRECISIONS and self.float8 and self.float8_recipe in FLOAT8_TE_RECIPES
                and self.zero >= 1 and self.fsdp is None)

    @property
    def fp8_params(self) -> bool:
        """True when the te linears' weights are float8 parameters (``fp8_param_gather`` given and
        ``fp8_params_possible``; None: off, Megatron-LM's own default -- ``--fp8-param-gather`` is a store_true flag,
        Megatron-LM @d98e8a64 megatron/training/arguments.py line 2016 -- where Megatron-Bridge's float8 recipes turn it
        on, training/mixed_precision.py @f9b6319e lines 223 and 294: the megatron precisions stand for both launchers,
        and their other defaults are where the two agree (gradient_accumulation_fusion); here they do not, so the
        framework's own flag default holds, which does not understate the memory of a Megatron-LM run that did not
        pass it (review21 D4). A Bridge recipe's run gives fp8_param_gather True.)"""
        return bool(self.fp8_param_gather) and self.fp8_params_possible

    @property
    def accumulation_fused(self) -> bool:
        """True when the gradient accumulation runs inside the wgrad GEMMs (Megatron gradient_accumulation_fusion;
        None: on under Megatron precision, Megatron-LM's and Megatron-Bridge's default)."""
        if self.gradient_accumulation_fusion is None:
            return self.precision in MEGATRON_PRECISIONS
        return self.gradient_accumulation_fusion

    @property
    def dp(self) -> int:
        """Data-parallel degree (model replicas fed different batches): gpus / (tp x pp x cp)."""
        return self.gpus // (self.tp * self.pp * self.context_parallel)

    @property
    def cp_ring(self) -> str:
        """Whose context parallelism (formulas/context_parallel.py): 'te-p2p' (Megatron-Core, TransformerEngine's
        P2P ring, cp_comm_type 'p2p') under the Megatron precisions, else 'torch' (torchtitan's, torch's ring
        attention), or 'ulysses' where ``cp_kind`` says so (DeepSpeed-Ulysses' all-to-alls)."""
        if self.cp_kind == "ulysses":
            return "ulysses"
        return "te-p2p" if self.precision in MEGATRON_PRECISIONS else "torch"

    @property
    def shard_stage(self) -> int:
        """ZeRO stage equivalent: fsdp full/hybrid -> 3, grad_op -> 2 (PyTorch FSDP docs, ShardingStrategy)."""
        if self.fsdp is None:
            return self.zero
        return 2 if self.fsdp == "grad_op" else 3

    @property
    def recomputed_modules(self) -> frozenset[str]:
        """Megatron's modules a 'selective' checkpointing recomputes (``recompute_modules``, else Megatron's default
        ['core_attn']: the attention core, Korthikanti et al. 2022 section 4.2); none under any other."""
        if self.grad_checkpointing != "selective":
            return frozenset()
        return frozenset(self.recompute_modules or DEFAULT_RECOMPUTE_MODULES)

    @property
    def shard_group(self) -> int:
        """Devices one shard group spans: the data-parallel degree, or one node's GPUs for hybrid sharding."""
        # torchtitan shards parameters over dp_shard x cp (parallel_dims.py: fsdp = dp_shard * cp), Megatron-Core's
        # distributed optimizer over the dp-cp group (formulas/context_parallel.py)
        ways = self.dp * self.context_parallel
        if self.fsdp == "hybrid":
            return max(1, min(ways, self.gpus_per_node // (self.tp * self.pp) or 1))
        return ways


# the closed-set fields of TrainingWorkload (checked in this order) and the positive counts: read at once by
# ``__post_init__`` (operator.attrgetter), which names the first one out of its set
_CLOSED: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("method", METHODS), ("precision", PRECISIONS), ("grad_checkpointing", GRAD_CHECKPOINTING),
    ("attention", TRAIN_ATTENTION), ("offload", OFFLOAD), ("loss", LOSSES), ("layernorm", LAYERNORMS), ("kernels", KERNELS),
    ("nf4_quantizer", NF4_QUANTIZERS), ("lora_dropout", LORA_DROPOUTS), ("nf4_format", NF4_FORMATS),
    ("deepspeed_gather", DEEPSPEED_GATHERS), ("zero_grad", ZERO_GRADS), ("checkpoint_impl", CHECKPOINT_IMPLS), ("float8_recipe", FLOAT8_RECIPES),
    ("compile_scope", COMPILE_SCOPES), ("batch_shapes", BATCH_SHAPES), ("fsdp2_units", FSDP2_UNITS), ("pipeline_split", PIPELINE_SPLITS),
    ("fsdp1_lora_wrap", FSDP1_LORA_WRAPS), ("cp_kind", CP_KINDS), ("device", DEVICES),
    ("gpu_runtime", GPU_RUNTIMES))
_CLOSED_ALLOWED = tuple(allowed for _, allowed in _CLOSED)
_CLOSED_VALUES = attrgetter(*(name for name, _ in _CLOSED))
_COUNTS = ("micro_batch", "seq_len", "grad_accumulation", "gpus", "tp", "pp", "virtual_stages", "ep", "gpus_per_node",
           "loss_chunks", "checkpoint_every", "context_parallel")
_COUNT_VALUES = attrgetter(*_COUNTS)
# the counts whose flag's range is not COUNT (numbers.py): seq_len TOKENS, gpus_per_node one machine's devices
_COUNT_RANGES = {"seq_len": TOKENS, "gpus_per_node": MACHINE_GPUS}
# the ranged numbers (numbers.py), each the range its CLI flag and request field check
_NUMBERS = (("memory", DEVICE_MEMORY), ("headroom", HEADROOM), ("rank", LORA_RANK), ("alpha", LORA_ALPHA))
