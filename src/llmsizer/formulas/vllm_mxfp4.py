"""vLLM's resident bytes of MXFP4 MoE experts, beyond the checkpoint's, on the backend the GPU selects.

vLLM picks one MXFP4 MoE backend per GPU (vllm 0.19.1 model_executor/layers/fused_moe/oracle/mxfp4.py
``select_mxfp4_moe_backend`` :197-373, default path with no backend env variable and no LoRA: the first backend of
``_get_priority_backends`` :169-184 whose experts class supports the device), :func:`vllm_mxfp4_backend`:

  flashinfer_trtllm  CUDA compute capability 10.x (the SM100 family: B200, B300, GB200), FlashInfer installed (a
                     vLLM 0.19.1 requirement: flashinfer-python==0.6.6): experts/trtllm_mxfp4_moe.py:79-81;
  triton             9.0 <= capability < 11.0 otherwise, i.e. Hopper: gpt_oss_triton_kernels_moe.py:555-565
                     (OAITritonExperts) and :887-897 (the monolithic class);
  marlin             every other CUDA GPU of capability >= 7.5 (Ampere and Ada 8.x, Thor 11.0, consumer Blackwell
                     12.x): fused_marlin_moe.py:565-567. FlashInfer's CUTLASS MXFP4 x BF16 experts, which come before
                     Marlin, take MXFP4 weights with BF16 activations on 9.0 only (flashinfer_cutlass_moe.py:143-178:
                     ``(kMxfp4Static, None)`` needs ``is_device_capability(90)``), so never reach a 12.x GPU by default.
                     (The MXFP8-activation variants, CUTLASS on Hopper, are env-only: VLLM_USE_FLASHINFER_MOE_*.)

Each backend pads the sizes the expert parameters are created at (FusedMoE passes the rounded sizes to
``create_weights``: fused_moe/layer.py:536-565; ``mxfp4_round_up_hidden_size_and_intermediate_size``,
oracle/mxfp4.py:376-400), for H the hidden size and I the intermediate size per tensor-parallel rank:

           marlin: H_p = round_up(H, 256), I_p = round_up(I, 128)     trtllm: H_p = round_up(H, 256), I_p = round_up(I, 256)
           triton: H_p = H,                I_p = round_up(I, 64)

and creates per expert (quantization/mxfp4.py:157-229): w13 [2 I_p, H_p / 2] and w2 [H_p, I_p / 2] uint8 values,
their E8M0 scales [2 I_p, H_p / 32] and [H_p, I_p / 32] (1 B each), bf16 biases [2 I_p] and [H_p] (gpt-oss). After
loading (``process_weights_after_loading`` -> ``convert_to_mxfp4_moe_kernel_format``):

  (X1, triton, oracle/mxfp4.py:721-756) the biases become float32; the values are swizzled into new tensors of the
       same size (the Hopper value layout's 16-row / 32-byte tile divides gpt-oss's matrices, triton_kernels
       hopper_value.py) and the loaded ``w13_weight`` / ``w2_weight`` deleted; the swizzled scales are new tensors
       (utils/mxfp4_utils.py ``_swizzle_mxfp4``, HopperMXScaleLayout, num_warps 8) held in a PrecisionConfig while the
       loaded ``w13_weight_scale`` / ``w2_weight_scale`` stay registered (quantization/mxfp4.py:304-308 replaces no
       parameter for Triton): both are resident. The Hopper scale layout pads the output dimension to
       2 x num_warps x 2 x 8 rows and the scale groups to 2 (triton-lang/triton python/triton_kernels/
       triton_kernels/tensor_details/layout_details/hopper_scale.py @14dd7a19, SWIZZLE_ALIGN_M, SWIZZLE_ALIGN_K):

           S = round_up(2 I_p, 32 w) x round_up(H / 32, 2) + round_up(H, 32 w) x round_up(I_p / 32, 2)

  (X2, marlin, oracle/mxfp4.py:430-442 -> quantization/utils/marlin_utils_fp4.py:520-631) the values are repacked
       (``gptq_marlin_repack``: [K / 16, N x 16 / 8] int32, the same K x N / 2 bytes; _custom_ops.py:1179-1193), the
       scales permuted and kept E8M0 (1 B: marlin_utils_fp4.py:115-129), the biases permuted in the model dtype
       (bf16), and each replaces its parameter (quantization/mxfp4.py:299-312, model_executor/utils.py:47-77: the
       loaded tensor is freed): resident = the padded shapes at the checkpoint's dtypes;
  (X3, flashinfer_trtllm, oracle/mxfp4.py:444-581) the values and scales are shuffled into same-size tensors (the
       stacked scales are reshaped to [E, 2 I_p, H_p / 32] and [E, H_p, I_p / 32], so the interleave adds nothing at
       the 256-aligned sizes: :561-570), the biases become float32 (:457-458), each replaces its parameter; the
       experts object holds three float32 [E] tensors per layer (gemm1_alpha, gemm1_beta, gemm1_clamp_limit:
       experts/trtllm_mxfp4_moe.py:51-68).

Per expert, with R(H_p, I_p, b) = 3 H_p I_p / 2 + 3 H_p I_p / 32 + b (2 I_p + H_p) the values, scales and biases of
b bytes, and the checkpoint's C = R(H, I, 2) (2 if the experts carry biases, else 0):

    extra = L x E x (R(H, I_p, 4) + S - C)                        triton                               (X1)
    extra = L x E x (R(H_p, I_p, 2) - C)                          marlin                               (X2)
    extra = L x E x (R(H_p, I_p, 4) - C) + L x 3 x 4 E            flashinfer_trtllm                    (X3)

for L MoE layers of E experts.

A decode or prefill step reads each routed expert at the sizes its kernel runs (:func:`vllm_mxfp4_expert_bytes` with
``read``; the speed model's expert bytes, estimate/speed.py): Marlin and TRT-LLM run at the padded sizes, so they
read R(H_p, I_p, b) per expert. The routed input is padded to H_p before the experts (fused_moe/runner/
default_moe_runner.py:447-467 ``F.pad`` to ``moe_config.hidden_dim``, the rounded size: layer.py:536-547; skipped only
for the env-chosen TRT-LLM MXFP8 backend: quantization/mxfp4.py:115-118); Marlin takes K = the padded input's width
and N = I_p from the packed w2 (fused_marlin_moe.py:89-90, gemm sizes :147-148 and :199-200; marlin_utils.py:248-254),
TRT-LLM ``intermediate_size`` = the rounded I_p (experts/trtllm_mxfp4_moe.py:44-47, passed at :214). Triton reads
its swizzled scales in place of the loaded copy and the fp32 biases: R(H, I_p, 4), the swizzle's alignment rows not
counted (whether its tiles load them was not checked; gpt-oss's 2880 fills its 64-aligned I at TP 1):

    read = R(H_p, I_p, b) per routed expert (triton: H_p = H)                                       (X4)

Under tensor parallelism every rank creates its experts at its own padded sizes: FusedMoE divides I first
(``intermediate_size_per_partition = intermediate_size // tp_size``, fused_moe/layer.py:425-426) and the backend
rounds that per-rank size (layer.py:536-547; the checkpoint loader hands a rank ceil(I / 32 / TP) scale groups,
models/gpt_oss.py:366-375, which fit inside it), so X1-X4 take I / TP for I, per rank: gpt-oss's 2880 gives
(H_p, I_p) per rank of Marlin (3072, 2944 / 1536 / 768 / 384) at TP 1 / 2 / 4 / 8, Triton (2880, 2880 / 1472 / 768 /
384), TRT-LLM (3072, 3072 / 1536 / 768 / 512): not 1 / TP of the single GPU's padding (the speed model's rank
reads, estimate/speed_layout.py ``mxfp4_rank_read``). The Triton values' Hopper swizzle is taken as padding nothing
(16-row x 32-byte tiles divide every per-rank matrix above); a later triton_kernels rounds the packed value matrix
up to 64 x 256 B (triton-lang/triton hopper_value.py ``_padded_shape`` @000df03e), which read so would add ~0.53 GiB
to gpt-oss-20b at TP 1, absent from the logged load X1 is checked against: not modelled (which triton_kernels a
vLLM 0.19.1 install runs is not pinned by its wheel).

Checked: X1 against vLLM's "Model loading took" (torch's allocated bytes after the
load, vllm/platforms/cuda.py get_current_memory_usage): gpt-oss-20b 13.47 GiB on one H100 (llm-d
empirical-vllm-memory-results.md, validation/vllm_startup_logs.csv VL02), gpt-oss-120b 64.38 GiB
(vllm-project/vllm#33155, vLLM 0.14.1). X2 and X3 are worked from the code alone (no published load log of
vLLM >= 0.10.1 on an Ampere / Ada or B200 GPU was found). Not modelled (sized as X1): ROCm (CK, or Triton with both
sizes rounded to 256 and CDNA scale layouts), XPU, LoRA (Triton unfused or Marlin), an env-chosen backend."""

from __future__ import annotations

from typing import Literal

from ..specs import ModelSpec
from .alignment import round_up
from .weight_formats import ggml_types

Mxfp4Backend = Literal["triton", "marlin", "flashinfer_trtllm"]

# num_warps of _swizzle_mxfp4 (vllm 0.19.1 model_executor/layers/quantization/utils/mxfp4_utils.py:22 default 8;
# vllm 0.14.1 quantization/mxfp4.py:760-764: 4 or 8 by VLLM_MOE_DP_CHUNK_SIZE only with a batched format)
TRITON_SWIZZLE_NUM_WARPS = 8
# the intermediate size per partition after vLLM's padding for the Triton backend (round_up(I, 64))
TRITON_INTERMEDIATE_ALIGN = 64
# (hidden, intermediate) alignment of each backend's parameters (oracle/mxfp4.py:376-400; 1: not padded)
PAD_ALIGN: dict[str, tuple[int, int]] = {
    "triton": (1, TRITON_INTERMEDIATE_ALIGN),
    "marlin": (256, 128),
    "flashinfer_trtllm": (256, 256),
}
# bytes per element of the expert biases the backend keeps (float32: oracle/mxfp4.py:457-458, :725-726; Marlin:
# the model dtype, bf16 for gpt-oss: marlin_utils_fp4.py:622)
BIAS_BYTES: dict[str, int] = {"triton": 4, "marlin": 2, "flashinfer_trtllm": 4}
# float32 [E] tensors TrtLlmMxfp4ExpertsBase holds per layer: gemm1_alpha, gemm1_beta, gemm1_clamp_limit
TRTLLM_PER_EXPERT_SCALARS = 3
CHECKPOINT_BIAS_BYTES = 2  # bf16 biases in the checkpoint and as created (quantization/mxfp4.py:208-229)


def mxfp4_block() -> int:
    """Elements per MXFP4 scale block (32: OCP MX v1.0), from its one home, the GGML type table
    (catalog/data/ggml_types.json ``MXFP4``: 32 elements in 17 B)."""
    return int(ggml_types()["MXFP4"]["block"])


def vllm_mxfp4_backend(capability: int | None) -> Mxfp4Backend:
    """The MXFP4 MoE backend vLLM 0.19.1 selects on a GPU of CUDA compute capability ``capability`` (major x 10 +
    minor; the module docstring's table): 'flashinfer_trtllm' on 10.x, 'triton' on 9.x, 'marlin' below 9.0 and on
    11.0 and above; None (not known) or 0 (no CUDA: not modelled): 'triton', sized as on Hopper."""
    if capability is None or capability == 0 or 90 <= capability < 100:
        return "triton"
    if 100 <= capability < 110:
        return "flashinfer_trtllm"
    return "marlin"


def vllm_mxfp4_padded_sizes(backend: str, hidden: int, intermediate: int) -> tuple[int, int]:
    """(H_p, I_p): the hidden and per-rank intermediate sizes ``backend`` creates the experts at (oracle/mxfp4.py
    ``mxfp4_round_up_hidden_size_and_intermediate_size``)."""
    h_align, i_align = PAD_ALIGN[backend]
    return round_up(hidden, h_align), round_up(intermediate, i_align)


def _expert_bytes(hidden: int, intermediate: int, bias_bytes: int) -> int:
    """R(H, I, b): one expert's MXFP4 values (1/2 B), E8M0 scales (1 B per 32) and biases (b B) of w13 [2I, H] and
    w2 [H, I]."""
    elements = 3 * hidden * intermediate
    return elements // 2 + elements // mxfp4_block() + bias_bytes * (2 * intermediate + hidden)


def triton_swizzled_scale_bytes(hidden: int, intermediate: int, num_warps: int = TRITON_SWIZZLE_NUM_WARPS) -> int:
    """S: one expert's Hopper-swizzled scales of w13 [2 I, H / 32] and w2 [H, I / 32] (rows to 32 num_warps, groups
    to 2)."""
    rows = 32 * num_warps  # 2 x num_warps x 2 x 8
    return (round_up(2 * intermediate, rows) * round_up(hidden // mxfp4_block(), 2)
            + round_up(hidden, rows) * round_up(intermediate // mxfp4_block(), 2))


def vllm_mxfp4_expert_bytes(backend: str, hidden: int, intermediate: int, bias: bool = True, read: bool = False,
                            num_warps: int = TRITON_SWIZZLE_NUM_WARPS) -> int:
    """One expert's bytes on ``backend`` at ``hidden`` H and ``intermediate`` I per tensor-parallel rank: resident
    (``read`` False: R(H_p, I_p, b), + Triton's swizzled scales S beside its loaded ones, eqs. X1-X3) or read by a
    step that routes to it (``read`` True: R(H_p, I_p, b), eq. X4); ``bias``: the experts carry biases."""
    hp, ip = vllm_mxfp4_padded_sizes(backend, hidden, intermediate)
    out = _expert_bytes(hp, ip, BIAS_BYTES[backend] if bias else 0)
    if backend == "triton" and not read:
        out += triton_swizzled_scale_bytes(hidden, ip, num_warps)
    return out


def vllm_mxfp4_extra_bytes(backend: str, moe_layers: int, experts: int, hidden: int, intermediate: int,
                           bias: bool = True, num_warps: int = TRITON_SWIZZLE_NUM_WARPS, read: bool = False) -> int:
    """Eq. (X1) / (X2) / (X3) for ``backend``: bytes vLLM's MXFP4 MoE holds per device beyond the checkpoint's
    experts, for ``moe_layers`` layers of ``experts`` experts (on this device), ``hidden`` H and ``intermediate`` I
    per tensor-parallel rank; ``bias``: the experts carry biases (gpt-oss; without, no bias bytes). ``read``: eq.
    (X4)'s bytes a pass over every expert reads beyond the checkpoint's instead (TRT-LLM's per-layer scalars left
    out)."""
    checkpoint = _expert_bytes(hidden, intermediate, CHECKPOINT_BIAS_BYTES if bias else 0)
    per_expert = vllm_mxfp4_expert_bytes(backend, hidden, intermediate, bias, read, num_warps) - checkpoint
    per_layer = 4 * TRTLLM_PER_EXPERT_SCALARS * experts if backend == "flashinfer_trtllm" and not read else 0
    return moe_layers * (experts * per_expert + per_layer)


def vllm_triton_mxfp4_extra_bytes(moe_layers: int, experts: int, hidden: int, intermediate: int, bias: bool = True,
                                  num_warps: int = TRITON_SWIZZLE_NUM_WARPS) -> int:
    """Eq. (X1): :func:`vllm_mxfp4_extra_bytes` on the Triton backend (Hopper)."""
    return vllm_mxfp4_extra_bytes("triton", moe_layers, experts, hidden, intermediate, bias, num_warps)


def vllm_mxfp4_resident_extra(spec: ModelSpec, fmt: str, tensor_parallel: int = 1,
                              capability: int | None = None, read: bool = False) -> int:
    """Eq. (X1-X3) for a model: the bytes vLLM's MXFP4 MoE holds per device beyond the checkpoint's experts on the
    backend a GPU of CUDA compute capability ``capability`` selects (:func:`vllm_mxfp4_backend`; estimate/device.py
    ``weights_capability``, the one rule of the capability; None: not known, sized as on Hopper), at
    ``tensor_parallel`` (each rank's intermediate size I / TP); 0 unless the format is MXFP4 and the model has routed
    experts. The one rule estimate/inference/vllm.py adds to the weights it keeps resident and estimate/formats.py
    ``rung_bytes`` ranks a vLLM rung by (whole model: TP 1). ``read``: eq. (X4)'s extra bytes a step reads over
    all experts instead, the one rule estimate/speed.py adds to the routed experts' bytes a step reads."""
    moe = spec.moe
    if fmt != "mxfp4" or moe is None or not moe.num_experts:
        return 0
    layers = sum(1 for m in spec.moe_layers if m)
    return vllm_mxfp4_extra_bytes(vllm_mxfp4_backend(capability), layers, moe.num_experts, spec.hidden_size,
                                  moe.expert_intermediate_size // tensor_parallel, moe.expert_bias, read=read)
