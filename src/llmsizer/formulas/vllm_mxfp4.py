"""vLLM's resident bytes of MXFP4 MoE experts on its Triton backend (matmul_ogs), beyond the checkpoint's.

vLLM serves MXFP4 experts (gpt-oss) on Hopper (SM90) with the Triton matmul_ogs kernels (vllm 0.14.1
model_executor/layers/quantization/mxfp4.py:746-785; vllm 0.19.1 model_executor/layers/fused_moe/oracle/mxfp4.py:
721-746 with quantization/mxfp4.py:283-308). After loading, per MoE layer of E experts, hidden size H and
intermediate size I per tensor-parallel rank (I_p = round_up(I, 64): the parameters are created at I_p,
quantization/mxfp4.py:317-327 @0.14.1, fused_moe/oracle/mxfp4.py:398-399 @0.19.1):

  (T1) the swizzled scales are a new tensor (utils/mxfp4_utils.py ``_swizzle_mxfp4``: convert_layout to
       HopperMXScaleLayout, num_warps 8 without a batched all-to-all), handed to the kernel in a PrecisionConfig,
       while the loaded ``w13_weight_scale`` / ``w2_weight_scale`` parameters stay registered (only ``w13_weight``
       and ``w2_weight`` are deleted): both are resident. The Hopper scale layout pads the output dimension to
       2 x num_warps x 2 x 8 rows and the scale groups to 2 (triton-lang/triton python/triton_kernels/
       triton_kernels/tensor_details/layout_details/hopper_scale.py @14dd7a19, swizzle_data SWIZZLE_ALIGN_M,
       SWIZZLE_ALIGN_K). Per expert, 1 B per E8M0 scale:

           S = round_up(2 I_p, 32 w) x round_up(H / 32, 2) + round_up(H, 32 w) x round_up(I_p / 32, 2)

  (T2) the biases become float32 parameters (``w13_bias.to(torch.float32)``), 2 B per element more than the
       bf16 checkpoint's: 2 x (2 I_p + H) per expert;
  (T3) the padding of I to I_p in values (1/2 B per element), scales (1/32 B) and the bf16 w13 bias (2 B):
       2 (I_p - I) x (H/2 + H/32 + 2) + H x (I_p - I) x (1/2 + 1/32) per expert (0 for gpt-oss at TP 1: I = 2880).

    extra = moe_layers x E x (S + 2 (2 I_p + H) + pad)                                                    (X1)

The swizzled values themselves replace the loaded ones (same size: the Hopper value layout's 16-row / 32-byte tile
divides gpt-oss's 2880-wide matrices, hopper_value.py). Checked against vLLM's "Model loading took" (torch's
allocated bytes after the load, vllm/platforms/cuda.py get_current_memory_usage): gpt-oss-20b 13.47 GiB on one
H100 (llm-d empirical-vllm-memory-results.md, validation/vllm_startup_logs.csv VL02), gpt-oss-120b 64.38 GiB
(vllm-project/vllm#33155, vLLM 0.14.1)."""

from __future__ import annotations

from ..specs import ModelSpec
from .alignment import round_up

# num_warps of _swizzle_mxfp4 without a batched MoE all-to-all (pplx / DeepEP low-latency): vllm 0.14.1
# quantization/mxfp4.py:760-764 ("num_warps = 8"; 4 or 8 by VLLM_MOE_DP_CHUNK_SIZE only with a batched format)
TRITON_SWIZZLE_NUM_WARPS = 8
# the intermediate size per partition after vLLM's padding for the Triton backend (round_up(I, 64))
TRITON_INTERMEDIATE_ALIGN = 64


def vllm_triton_mxfp4_extra_bytes(moe_layers: int, experts: int, hidden: int, intermediate: int, bias: bool = True,
                                  num_warps: int = TRITON_SWIZZLE_NUM_WARPS) -> int:
    """Eq. (X1): bytes vLLM's Triton MXFP4 MoE holds per device beyond the checkpoint's experts, for ``moe_layers``
    layers of ``experts`` experts (on this device), ``hidden`` H and ``intermediate`` I per tensor-parallel rank;
    ``bias``: the experts carry biases (gpt-oss; without, T2 and T3's bias term are 0)."""
    ip = round_up(intermediate, TRITON_INTERMEDIATE_ALIGN)
    rows = 32 * num_warps  # 2 x num_warps x 2 x 8
    swizzled = (round_up(2 * ip, rows) * round_up(hidden // 32, 2)
                + round_up(hidden, rows) * round_up(ip // 32, 2))
    b = 2 if bias else 0
    pad = ip - intermediate
    padding = 2 * pad * (hidden // 2 + hidden // 32 + b) + hidden * (pad // 2 + pad // 32)
    bias_bytes = b * (2 * ip + hidden)
    return moe_layers * experts * (swizzled + bias_bytes + padding)


def vllm_mxfp4_resident_extra(spec: ModelSpec, fmt: str, tensor_parallel: int = 1) -> int:
    """Eq. (X1) for a model: the bytes vLLM's Triton MXFP4 MoE holds per device beyond the checkpoint's experts, at
    ``tensor_parallel`` (each rank's intermediate size I / TP); 0 unless the format is MXFP4 and the model has routed
    experts. The one rule estimate/inference/vllm.py adds to the weights it keeps resident and estimate/formats.py
    ``rung_bytes`` ranks a vLLM rung by (whole model: TP 1)."""
    moe = spec.moe
    if fmt != "mxfp4" or moe is None or not moe.num_experts:
        return 0
    layers = sum(1 for m in spec.moe_layers if m)
    return vllm_triton_mxfp4_extra_bytes(layers, moe.num_experts, spec.hidden_size,
                                         moe.expert_intermediate_size // tensor_parallel, moe.expert_bias)
