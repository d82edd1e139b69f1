"""Which kernel runs a training step's attention: torch SDPA's dispatch, and whether a named kernel can run at all.

One home for the rule (issue #12, "one answer"): the duration times the kernel :func:`sdpa_backend` picks
(estimate/duration.py, estimate/efficiency.py attention_kernel_share) and the memory counts the math kernel's saved
tensors exactly where it picks 'math' (formulas/training_activations.py).

torch's dispatcher (aten/src/ATen/native/transformers/cuda/sdp_utils.cpp @001f694a, ``select_sdp_backend``) runs the
first backend of its priority order flash, mem-efficient, math (cuDNN last unless ``check_prefer_cudnn_attention``)
whose checks pass; the checks that depend on a training step's shape::

    flash (can_use_flash_attention):  check_for_attn_mask (no explicit mask), check_flash_attention_hardware_support
        (check_sm_version<sm80, sm121>), check_dtypes_flash_attention -> check_dtypes_low_precision (fp16/bf16 on
        sm80+), check_batch_size_and_num_heads_dense (as many K/V heads as query heads unless enable_gqa)
    mem-efficient (can_use_mem_efficient_attention):  check_mem_efficient_hardware_support (sm50-sm121), dtypes
        fp16/fp32/bf16 on sm80+ (greater_than_or_equal_sm80_mem_efficient_dtypes), fp16/fp32 below
        (less_than_sm80_mem_efficient_dtypes), check_batch_size_and_num_heads_dense as flash; takes a mask
    cuDNN (can_use_cudnn_attention, only when named):  check_cudnn_hardware_support (sm80-sm121),
        check_dtypes_low_precision; takes a mask and unequal head counts (supports_gqa / supports_mqa)
    math:  always (``_scaled_dot_product_attention_math``)

The flash-attn package (attention 'flash'), Dao-AILab/flash-attention @0251105a (2026-08-15):
csrc/flash_attn/flash_api.cpp ``mha_fwd`` lines 392-393 ``bool is_sm8x_min = cc_major >= 8; TORCH_CHECK(is_sm8x_min,
"FlashAttention only supports Ampere GPUs or newer.")`` and lines 396-397 ``q_dtype == torch::kFloat16 || q_dtype ==
torch::kBFloat16`` ("FlashAttention only support fp16 and bf16 data type"; the same two checks in ``mha_varlen_fwd``
lines 571-576 and ``mha_bwd`` lines 835-843); its README: "FlashAttention-2 with CUDA currently supports: Ampere, Ada,
or Hopper GPUs". FlashAttention-3: hopper/flash_api.cpp ``mha_fwd`` lines 711-712 (``dprops->major >= 8``, the same
message) and 715-719 (fp16/bf16, fp8_e4m3 on sm90+ only). (The older pin 765fbd9 checked ``is_sm90 || is_sm8x``; from
0251105a any capability 8.0 or newer passes, as :func:`flash_attn_refusal` reads it.) llm-foundry's Triton kernel
(attention 'flash', kernel 'triton-flash') has no capability check, but two asserts in
mosaicml/llm-foundry @b2a43a147 llmfoundry/models/layers/flash_attn_triton.py ``_flash_attn_forward``: line 593
``assert d <= 128, 'FlashAttention only support head dimensions up to 128'`` and line 595 ``assert q.dtype in
[torch.float16, torch.bfloat16], 'Only support fp16 and bf16'`` (:func:`triton_flash_refusal`).

Capabilities are NVIDIA's major x 10 + minor (catalog Device.capability); None: a GPU without one (AMD, Apple, a
hardware file's entry without an NVIDIA architecture), for which no check here applies.
"""

from __future__ import annotations

SDPA_SOURCE = "torch sdp_utils.cpp @001f694a select_sdp_backend"
FLASH_ATTN_SOURCE = {"flash-attn-2": "flash-attn csrc/flash_attn/flash_api.cpp @0251105a mha_fwd lines 392-397",
                     "flash-attn-3": "flash-attn hopper/flash_api.cpp @0251105a mha_fwd lines 711-719"}
SM80, SM121, SM50 = 80, 121, 50
# torch 2.13.0's FlexAttention on CUDA is compiled by inductor into Triton kernels; inductor refuses a GPU below
# capability 7.0 (torch/_dynamo/device_interface.py lines 275-285 CudaInterface.is_triton_capable: major >= 7, raising
# GPUTooOldForTriton, torch/_inductor/exc.py lines 151-152: 'Triton only supports devices of CUDA Capability >= 7.0').
# torchtune's sm75 guard (validation_cases.TORCHTUNE_PACKED_ATTENTION) is its own choice to fall back to SDPA, not torch's
# floor: torch runs flex on an sm70 V100.
FLEX_TRITON_SOURCE = "torch 2.13.0 _dynamo/device_interface.py lines 275-285, _inductor/exc.py lines 151-152"
SM70 = 70
TRITON_FLASH_SOURCE = "mosaicml/llm-foundry @b2a43a147 llmfoundry/models/layers/flash_attn_triton.py _flash_attn_forward"
TRITON_FLASH_MAX_HEAD_DIM = 128  # ibid. line 593


# TransformerEngine's DotProductAttention, Megatron-Core's core attention under its TE layer spec
# (NVIDIA/Megatron-LM @d98e8a64 megatron/core/extensions/transformer_engine_spec_provider.py lines 71-73
# ``core_attention`` -> ``TEDotProductAttention``; transformer_config.py line 151 ``attention_backend`` default
# ``AttnBackend.auto``, which sets no NVTE_* variable: models/common/language_module/language_module.py lines 126-139
# set them for flash / fused / unfused only), picks its backend itself (NVIDIA/TransformerEngine @d0067d0d
# transformer_engine/pytorch/attention/dot_product_attention/utils.py ``get_attention_backend``: lines 538-543 every
# backend on unless NVTE_FLASH_ATTN / NVTE_FUSED_ATTN say otherwise; lines 1647-1653 "Disabling FlashAttention to
# give FusedAttention preference on Hopper+ for performance reasons" when both run and the compute capability is
# (9, 0) or more). FusedAttention's F16_arbitrary_seqlen sub-backend is cuDNN's fused flash attention, the kernel
# TRAIN_ATTENTION_KERNELS calls 'cudnn'. Below sm90 TE runs FlashAttention (the flash-attn package's FlashAttention-2
# where installed), which torch SDPA's flash backend times the same.
TE_ATTENTION_SOURCE = ("TransformerEngine @d0067d0d attention/dot_product_attention/utils.py get_attention_backend "
                       "lines 1647-1653: FusedAttention (cuDNN) preferred over FlashAttention on sm90+; "
                       "Megatron-Core TEDotProductAttention, attention_backend auto (Megatron-LM @d98e8a64 "
                       "transformer_engine_spec_provider.py lines 71-73, transformer_config.py line 151)")
SM90 = 90


def te_attention_backend(capability: int | None) -> str | None:
    """The kernel TransformerEngine's DotProductAttention runs for a training step on an NVIDIA GPU of
    ``capability`` when no NVTE_* variable forces one (see TE_ATTENTION_SOURCE): 'cudnn' (FusedAttention, cuDNN's
    F16_arbitrary_seqlen) from sm90; None below sm90 or without a capability (FlashAttention-2, what torch SDPA's
    dispatch already times there).

    >>> te_attention_backend(90), te_attention_backend(100), te_attention_backend(80), te_attention_backend(None)
    ('cudnn', 'cudnn', None, None)
    """
    return "cudnn" if capability is not None and capability >= SM90 else None


def attention_dtype(precision: str, compute_bytes: int) -> str:
    """The dtype the attention's q/k/v arrive in under a training ``precision`` recipe whose activations take
    ``compute_bytes`` per element: 'fp32', 'fp16' (an fp16 recipe) or 'bf16'."""
    if compute_bytes >= 4:
        return "fp32"
    return "fp16" if "fp16" in precision else "bf16"


def sdpa_refusal(backend: str, capability: int | None, dtype: str, heads_unmatched: bool, mask: bool) -> str | None:
    """Why torch SDPA's ``backend`` ('flash-attn-2': its flash backend, 'mem-efficient', 'cudnn') does not run this
    attention (the first failing check of sdp_utils.cpp, module docstring), or None when it does. ``heads_unmatched``:
    fewer K/V heads than query heads handed over without enable_gqa; ``mask``: an explicit attn_mask."""
    if capability is None:
        return None
    if backend == "flash-attn-2":
        if mask:
            return "its flash backend takes no explicit mask (check_for_attn_mask)"
        if not SM80 <= capability <= SM121:
            return f"its flash backend needs sm80-sm121 (check_flash_attention_hardware_support), this GPU is sm{capability}"
        if dtype not in ("fp16", "bf16"):
            return f"its flash backend takes fp16/bf16 only (check_dtypes_low_precision), not {dtype}"
        if heads_unmatched:
            return "its flash backend needs as many K/V heads as query heads without enable_gqa " \
                   "(check_batch_size_and_num_heads_dense)"
        return None
    if backend == "mem-efficient":
        if not SM50 <= capability <= SM121:
            return f"mem-efficient needs sm50-sm121 (check_mem_efficient_hardware_support), this GPU is sm{capability}"
        if dtype == "bf16" and capability < SM80:
            return "mem-efficient takes fp16/fp32 below sm80 (less_than_sm80_mem_efficient_dtypes), not bf16"
        if heads_unmatched:
            return "mem-efficient needs as many K/V heads as query heads without enable_gqa " \
                   "(check_batch_size_and_num_heads_dense)"
        return None
    if backend == "cudnn":
        if not SM80 <= capability <= SM121:
            return f"cuDNN attention needs sm80-sm121 (check_cudnn_hardware_support), this GPU is sm{capability}"
        if dtype not in ("fp16", "bf16"):
            return f"cuDNN attention takes fp16/bf16 only (check_dtypes_low_precision), not {dtype}"
        return None
    raise ValueError(f"not an SDPA backend: {backend!r}")


def flash_attn_refusal(kernel: str, capability: int | None, dtype: str) -> str | None:
    """Why the flash-attn package's ``kernel`` ('flash-attn-2', 'flash-attn-3') does not run on a GPU of
    ``capability`` with q/k/v in ``dtype`` (module docstring), or None when it does."""
    if capability is None:
        return None
    if capability < SM80:
        return (f"{kernel} needs an Ampere GPU or newer, sm80+ ({FLASH_ATTN_SOURCE[kernel]}: 'FlashAttention only supports "
                f"Ampere GPUs or newer.'), this GPU is sm{capability}")
    if dtype not in ("fp16", "bf16"):
        return f"{kernel} takes fp16/bf16 only ({FLASH_ATTN_SOURCE[kernel]}), not {dtype}"
    return None


def triton_flash_refusal(dtype: str, head_dim: int) -> str | None:
    """Why llm-foundry's Triton FlashAttention ('triton-flash') does not run q/k/v in ``dtype`` with heads of
    ``head_dim`` channels (its two asserts, module docstring), or None when it does. Any GPU: no capability check."""
    if dtype not in ("fp16", "bf16"):
        return f"triton-flash takes fp16/bf16 only ({TRITON_FLASH_SOURCE} line 595: 'Only support fp16 and bf16'), not {dtype}"
    if head_dim > TRITON_FLASH_MAX_HEAD_DIM:
        return (f"triton-flash takes heads of at most {TRITON_FLASH_MAX_HEAD_DIM} channels ({TRITON_FLASH_SOURCE} line 593: "
                f"'FlashAttention only support head dimensions up to 128'), this model's are {head_dim}")
    return None


def flex_refusal(capability: int | None) -> str | None:
    """Why torch's FlexAttention (inductor's Triton kernels) does not run on a GPU of ``capability``, or None."""
    if capability is None or capability >= SM70:
        return None
    return (f"flex-attention is compiled to Triton kernels, which need CUDA capability 7.0 or newer, sm70+ "
            f"({FLEX_TRITON_SOURCE}: GPUTooOldForTriton), this GPU is sm{capability}")


def sdpa_backend(capability: int | None, dtype: str, heads_unmatched: bool, mask: bool) -> tuple[str, str]:
    """The backend torch SDPA's dispatcher runs ('flash-attn-2', 'mem-efficient' or 'math'), and why: the first of
    flash, mem-efficient, math whose checks pass (:func:`sdpa_refusal`). ``capability`` None (no NVIDIA capability):
    'math' only where no fused kernel takes the call (unequal heads without enable_gqa), else 'flash-attn-2'."""
    if capability is None:
        if heads_unmatched:
            return "math", (f"{SDPA_SOURCE}: fewer K/V heads than query heads without enable_gqa: no fused backend "
                            "takes the call (check_batch_size_and_num_heads_dense), the math kernel runs")
        return "flash-attn-2", f"{SDPA_SOURCE}: no NVIDIA compute capability, taken as its flash backend"
    why: list[str] = []
    for backend in ("flash-attn-2", "mem-efficient"):
        refused = sdpa_refusal(backend, capability, dtype, heads_unmatched, mask)
        if refused is None:
            lead = f"{SDPA_SOURCE} on sm{capability}, {dtype}"
            return backend, lead + (f": {'; '.join(why)}" if why else ": its flash backend, FlashAttention-2")
        why.append(refused)
    return "math", f"{SDPA_SOURCE} on sm{capability}, {dtype}: {'; '.join(why)}: the math kernel runs"
