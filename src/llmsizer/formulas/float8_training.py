"""Float8 training with torchao (``convert_to_float8_training``; torchtitan ``--model.converters float8``).

torchao 0.18.0 ``torchao/float8/float8_linear.py`` replaces each ``nn.Linear`` by ``Float8Linear``, whose matmul is
``matmul_with_hp_or_float8_args`` (lines 28-205), with dynamic tensorwise scaling by default:

- what is saved for the backward: ``ctx.save_for_backward(input_hp, weight_hp_t)`` (line 45): the input in
  its *high* precision (bf16) and the weight, exactly as a bf16 linear saves them. Float8 does not shrink the
  saved activations in eager mode (under torch.compile the partitioner may save the float8 cast instead);
- forward casts (lines 50-91): the input and the weight are cast to float8 (1 byte per element, e4m3) for
  ``torch._scaled_mm``; both casts are freed when the matmul returns;
- backward casts (lines 94-204): grad_output to float8 twice (e5m2: row-major for grad_input, column-major for
  grad_weight), the weight again (for grad_input) and the saved input again (for grad_weight), each kept in a local
  until the backward returns (:func:`float8_backward_bytes` follows them step by step);
- with FSDP2 and ``enable_fsdp_float8_all_gather=True`` (torchtitan's default for float8 with FSDP) each weight is
  a ``WeightWithDynamicFloat8CastTensor`` whose ``fsdp_pre_all_gather`` casts the local shard to float8 and
  all-gathers the 1-byte data (``torchao/float8/fsdp_utils.py`` lines 228-251): the unsharded weights of a unit
  take 1 byte per element instead of 2, and the forward's weight cast is already done.

How a cast runs decides its temporaries. Eagerly, ``hp_tensor_and_scale_to_float8`` computes
``tensor.to(torch.float32) * scale`` (``float8_training_tensor.py`` line 153) and ``to_fp8_saturated`` clamps that
fp32 tensor before the cast (``float8_utils.py`` lines 134-137): the scaled fp32 copy and its clamped fp32 copy
(8 bytes per element) exist together while the 1-byte result is written. Under ``torch.compile`` (torchtitan
compiles float8 runs; the comment at line 150 describes the compiled upcast) the cast is one fused kernel that
writes only the float8 result.

Where the casts sit in a layer's backward: a Float8Linear's backward runs after the elementwise backward that made
its grad_output (the SwiGLU product and SiLU backward for the gate projection), whose gradients are freed by then, so
the layer's transient is the larger of the bf16 layer transient and :func:`float8_layer_backward_peak`, not their
sum (checked on whole Llama models run under FakeTensorMode with torchao's real modules:
tests/training/test_activation_offload_float8.py; the sum was +10.9% at 8192 tokens, the larger of the two -5.2% to
+3.2% over five cases).

The output layer stays in bf16 (torchtitan's float8 converter filters ``output``; ``Float8LinearConfig`` needs
dimensions divisible by 16), so the lm_head is not converted.

**No autocast weight copy** (:func:`float8_autocast_copied`). Under bf16-mixed (fp32 parameters, torch.autocast) a
plain ``nn.Linear`` calls ``F.linear(input, weight)``, and autocast's cast cache keeps the bf16 copy of the fp32 leaf
weight until the forward leaves autocast (formulas/training_states.py ``autocast_cache_holds``). ``Float8Linear
.forward`` (float8_linear.py lines 255-273) never hands the parameter to an autocast op: it casts the input to the
autocast dtype itself (line 262) and passes ``self.weight.t()`` -- a view, which the cache never takes
(autocast_mode.cpp ``cached_cast``: leaf, requires grad, not a view) -- to ``matmul_with_hp_or_float8_args``, whose
forward runs without grad and casts it to float8 (lines 68-83); the ``mm`` of the two ``Float8TrainingTensor`` s then
passes autocast's lower-precision list only as a dtype relabel (``float8_ops.py`` ``autocast_to_copy``: same float8
data). What each converted linear holds from its forward to its backward is therefore only what it saves (line 45):
its bf16 input (as a bf16 linear saves it) and the fp32 weight's transposed view (the parameter's own storage, 0 extra
bytes); the float8 copies of input and weight are freed when the forward's ``mm`` returns, and the backward casts
the weight again (line 131). No bf16 and no float8 copy of the weight is kept per step (torchao 0.18.0 has no
per-step float8 weight cache; ``precompute_float8_dynamic_scale_for_fsdp`` keeps one fp32 scale per weight, with the
FSDP float8 all-gather only). Measured on torchao's real ``convert_to_float8_training`` under CPU autocast, plain and
FSDP2 with the float8 all-gather, checkpointed or not: the only bf16 weight copy alive at forward end is lm_head's,
and no float8 weight copy (tests/training/test_autocast_cache.py).

**Time** (training speed). Each Float8Linear's three GEMMs (forward, grad_input, grad_weight) run as
``torch._scaled_mm`` on the float8 tensor cores, at the device's dense FP8 peak instead of its BF16 one; attention,
the lm_head and every other op keep their rate. Around them the casts are memory-bound kernels (eq. F1-F3), per
linear of in -> out features over t tokens, c bytes per compute element, counted per cast of a tensor of n elements:

- torchao, eager: ``tensor_to_amax`` runs ``torch.max(torch.abs(x))`` (float8_utils.py line 65: abs reads c and
  writes c, max reads c), ``hp_tensor_and_scale_to_float8`` ``tensor.to(torch.float32) * scale`` (float8_training_
  tensor.py line 153: c + 4, then 4 + 4) and ``to_fp8_saturated`` clamps and casts (float8_utils.py lines 135-136:
  4 + 4, then 4 + 1): (4c + 25) n per cast. ``matmul_with_hp_or_float8_args`` casts six tensors per step (the input
  and the weight in forward, lines 53-81; grad_output twice, the weight and the input again in backward, lines
  106-189): 2 t i + 2 t o + 2 i o elements. ``preprocess_addmm`` (float8_ops.py lines 342-345) then copies the
  operands ``torch._scaled_mm`` wants in the other layout (the backward's transposed grad_output and input, and the
  weight for grad_input: 2 bytes per float8 element each)::

      B_eager = (4c + 25) (2 t i + 2 t o + 2 i o) + 2 (t o + t i + i o)                          (F1)

- torchao under ``torch.compile`` (torchtitan/float8.py @9dec370 line 14: "Float8 experimental is intended to be
  ran under torch.compile for competitive performance"): inductor fuses each cast into one read pass for the amax
  and one pass that reads the tensor and writes its float8 bytes directly in the layout the GEMM wants (the layout
  copies of F1 fuse into it); the two casts of grad_output share the amax and the read (c for the amax, c read and
  one byte per layout written); linears that read the same input (q, k, v; gate, up) share one fused amax pass
  over it (a = 0 for all but the first of them, else 1)::

      B_compiled = (c + 1) 2 t i + a c 2 t i + (2c + 1) 2 i o + (2c + 2) t o                      (F2)

  (inductor's own byte count of a compiled transformers Llama layer with torchao's Float8Linears, on CPU, is
  within 5 % of F2 plus the bf16 layer's E4/E5: tests/formulas/test_float8_time.py)

- TransformerEngine (``te.Linear`` under ``fp8_autocast``, delayed scaling: llm-foundry ``fc_type: te``):
  ``_Linear.forward`` casts the input and the weight with ``fp8_cast_transpose_fused`` (transformer_engine/pytorch/
  module/linear.py @0004dbd), one kernel that reads the tensor once and writes the float8 copy and its transpose
  (the amax comes from the history, updated inside the kernel); the backward's ``grad_output_preprocess`` does the
  same for grad_output, and the saved float8 input transpose and weight transpose serve the backward GEMMs::

      B_te = (c + 2) (t i + t o + i o)                                                            (F3)

- TransformerEngine under ``Float8CurrentScaling`` (recipe 'transformer-engine-current': Megatron-Bridge's
  ``fp8_cs``, ``bf16_with_fp8_current_scaling_mixed`` sets ``fp8_recipe = "tensorwise"``, NVIDIA-NeMo/Megatron-Bridge
  src/megatron/bridge/training/mixed_precision.py @f9b6319e lines 277-295): the same casts and the same cast-transpose
  kernel, but no amax history: ``Float8CurrentScalingQuantizer::quantize_impl`` (TransformerEngine @d0067d0d
  transformer_engine/pytorch/csrc/quantizer.cpp lines 980-1033) first runs ``nvte_compute_amax_with_config`` over the
  whole input (line 1011: one more read of the tensor, c bytes per element, writing one fp32), then
  ``nvte_compute_scale_from_amax`` (line 1024, one scalar) and only then the cast (``nvte_quantize_v2``, line 1028).
  The amax is fused into the kernel that makes the tensor where TE makes it: Megatron-Core's TE layers fuse the
  pre-attention and pre-MLP norms into the q/k/v and gate/up linears (``TELayerNormColumnParallelLinear``:
  NVIDIA/Megatron-LM @d98e8a64 megatron/core/models/gpt/gpt_layer_specs.py lines 324 and 543,
  extensions/transformer_engine_spec_provider.py lines 55-57), whose norm under current scaling writes its bf16
  output and its amax in one kernel (csrc/extensions/normalization.cpp ``FUSED_NORM_AMAX_FP8``: LayerNorm lines
  114-118, RMSNorm lines 351-355), then ``quantize_with_amax`` casts without the amax pass (lines 203 and 438).
  Every other cast pays the pass: the input of o and down (Megatron's attention output and its own SwiGLU make them),
  each weight (cast from the parameter) and each grad_output (``grad_output_preprocess`` quantizes it)::

      B_te_cs = F3 + c (t i [input not norm-fed] + i o + t o)                                    (F3c)

- TransformerEngine under ``MXFP8BlockScaling`` (recipe 'transformer-engine-mxfp8': Megatron-Bridge's
  ``bf16_with_mxfp8_mixed``, ``fp8_recipe = "mxfp8"``, NVIDIA-NeMo/Megatron-Bridge src/megatron/bridge/training/
  mixed_precision.py @067f987d lines 255-266; what TE's ``get_default_fp8_recipe`` picks on a GPU that supports it,
  TransformerEngine @d0067d0d pytorch/quantization.py lines 242-254): one E8M0 scale per block of
  ``MXFP8_BLOCK`` = 32 consecutive elements (common/recipe/__init__.py lines 337-350; pytorch/constants.py line 175),
  computed inside the cast kernel from the block's own amax (no history, no separate amax pass). Because a block's
  scale runs along one direction, a tensor needed by both a row-major and a column-major GEMM operand (the input:
  fprop and wgrad; the weight: fprop and dgrad; grad_output: dgrad and wgrad) is quantized twice from the 16-bit
  source, in one kernel that reads it once and writes both copies and both scale arrays
  (``quantize_mxfp8_kernel``, common/cast/mxfp8/quantize_mxfp8.cuh lines 46-49, ``ROWWISE_SCALING`` and
  ``COLWISE_SCALING``; ``MXFP8Quantizer::quantize`` -> ``nvte_quantize_v2``, pytorch/csrc/quantizer.cpp lines
  1835-1851)::

      B_te_mx = (c + 2 + 2/32) (t i + t o + i o)                                                  (F3m)

  The GEMMs run as block-scaled FP8 (Blackwell's tcgen05 MMA with E8M0 scales), timed at the catalog's dense FP8
  peak (an assumption the duration names: the catalog keeps one FP8 figure, and NVIDIA's Blackwell datasheets give
  FP8 and MXFP8 one rate). Only compute capability 10.x and 11.x run it (``_compute_mxfp8_support``,
  quantization.py lines 162-168: 12.0+ "not supported ... yet", below 10.0 "compute capability 10.0 or higher
  required"): :func:`mxfp8_supported`.

  The scale's fp32 scalars (8 B per cast, quantizer.cpp line 1038) and, for a sequence-parallel column-parallel input,
  the one-float amax all-reduce over the tensor-parallel group (line 1020; module/linear.py lines 351-354) are left
  out of the byte counts. Memory is the delayed recipe's: ``Float8CurrentScalingQuantizer::create_tensor`` allocates
  the rowwise data and the transpose by the same rule (quantizer.cpp lines 670-700, eq. T1), and the delayed recipe's
  amax-history buffers, which current scaling drops, are not counted for delayed scaling either (fp32 scalars per
  cast: kilobytes per layer).

With FSDP's float8 all-gather the weight casts run on each device's shard before the all-gather (fsdp_utils.py lines
228-251), a 1/n share of the i o terms. A checkpointed layer runs its forward casts again in the recompute.

**Rowwise recipes** (``Float8LinearConfig.from_recipe_name``, pytorch/ao @36027d82 torchao/float8/config.py lines
141-176 and 334-381; torchtitan ``--float8.recipe_name rowwise | rowwise_with_gw_hp``): the same ``Float8Linear`` and
``matmul_with_hp_or_float8_args``, so the same saved tensors (float8_linear.py line 45: the bf16 input and the
weight's view) and no autocast copy; what changes (recipe 'torchao-rowwise' / 'torchao-rowwise-gw-hp' here):

- scales: every cast is ``ScalingGranularity.AXISWISE`` (one fp32 scale per row along the GEMM's reduction dim,
  ``round_scales_to_power_of_2=True``), e4m3 for all three tensors, the GEMMs ``torch._scaled_mm`` with per-row
  scales (the CUTLASS rowwise kernel on Hopper, config.py line 149). A scale tensor holds 4 B per row of a t x i
  tensor, 4/i of its float8 bytes (0.1 % at i = 4096): left out of the byte counts below;
- float8 all-gather: ``__post_init__`` asserts ``enable_fsdp_float8_all_gather`` only with tensorwise weight scaling
  (config.py lines 270-274), so FSDP2 all-gathers these weights in param_dtype (bf16) and every device casts the
  whole gathered weight (no 1/n share); torchtitan's float8 tensor-parallel styles are tensorwise-only too (its
  parallelize_llama ``enable_float8_tensorwise_tp``), so the TP collectives stay bf16;
- 'torchao-rowwise' (ROWWISE, config.py lines 334-351): all three GEMMs in float8; the two casts of grad_output
  scale along different axes (axiswise_dim -1 for grad_input, 0 for grad_weight: float8_linear.py lines 119-121 and 173-175) and so
  cannot share one amax pass; compiled::

      B_rowwise = (c + 1) 2 t i + a c 2 t i + (2c + 1) 2 i o + (2c + 1) 2 t o                    (F4)

- 'torchao-rowwise-gw-hp' (ROWWISE_WITH_GW_HP, lines 353-381): ``cast_config_input_for_grad_weight`` and
  ``cast_config_grad_output_for_grad_weight`` are ``ScalingType.DISABLED``: the grad_weight GEMM runs in bf16 on the
  saved input and the bf16 grad_output (float8_linear.py lines 161-164 and 182-183 skip the casts); grad_input
  casts the weight tensorwise (``cast_config_weight_for_grad_input``). Two of the three GEMMs in float8; compiled::

      B_gw_hp = (c + 1 + a c) t i + (2c + 1) 2 i o + (2c + 1) t o                                  (F5)

  and the backward holds no step-4/5 casts (:func:`float8_backward_bytes` with ``grad_weight_fp8`` False).

Eagerly the rowwise casts follow F1's per-cast kernels over the same tensors as F4/F5 (the power-of-2 rounding adds
no pass of its own over the tensor).
"""

from __future__ import annotations

from functools import lru_cache

from ..errors import InputError
from ..specs import ModelSpec
from ..suggest import unknown_choice
from .training_activations import _head_dims

FLOAT8_BYTES = 1
SOURCE = ("torchao 0.18.0 float8/float8_linear.py (matmul_with_hp_or_float8_args, lines 28-204); "
          "float8/fsdp_utils.py WeightWithDynamicFloat8CastTensor.fsdp_pre_all_gather (lines 228-251)")


def float8_forward_bytes(tokens: int, in_features: int, out_features: int, compiled: bool = True,
                         weight_gathered_fp8: bool = False) -> int:
    """Float8 copies alive during one Float8Linear forward [bytes], at the larger of its two casts (lines 56-82):
    the input cast (t i bytes), then the weight cast (i o bytes) beside it unless the weight arrived in float8 from
    the FSDP all-gather; run eagerly (``compiled`` False) each cast also holds its two fp32 temporaries (8 bytes per
    element of the tensor being cast)."""
    t, i, o = tokens, in_features, out_features
    e = 0 if compiled else 8
    inp = (FLOAT8_BYTES + e) * t * i
    weight = 0 if weight_gathered_fp8 else FLOAT8_BYTES * t * i + (FLOAT8_BYTES + e) * i * o
    return max(inp, weight)


def float8_backward_bytes(tokens: int, in_features: int, out_features: int, compute_bytes: int,
                          compiled: bool = True, weight_gathered_fp8: bool = False, grad_weight_fp8: bool = True) -> int:
    """Peak bytes one Float8Linear backward adds to its incoming grad_output [bytes].

    ``matmul_with_hp_or_float8_args.backward`` (torchao 0.18.0 float8_linear.py lines 94-204) keeps every cast in a
    local until it returns, so each step adds to the ones before it:

    1. grad_output to float8, row-major (line 113): t o;
    2. the saved bf16 weight to float8 (line 131): + i o; skipped when the weight was all-gathered in float8
       (``tensor_already_casted_to_fp8``, line 128);
    3. grad_input = mm (line 143): + c t i (compute dtype);
    4. grad_output to float8 again, column-major (line 167): + t o;
    5. the saved input to float8 (line 185): + t i.

    Run eagerly (``compiled`` False) the step's own cast also holds two fp32 temporaries, 8 bytes per element of the
    tensor being cast (module docstring). The weight gradient made at line 197 is the parameter's gradient, counted
    with the gradients, not here. ``grad_weight_fp8`` False (ROWWISE_WITH_GW_HP, module docstring): steps 4 and 5
    cast nothing (the grad_weight GEMM reads the bf16 tensors). Returns the largest step.
    """
    t, i, o, c = tokens, in_features, out_features, compute_bytes
    e = 0 if compiled else 8
    f = FLOAT8_BYTES
    w = 0 if weight_gathered_fp8 else f * i * o
    w_tmp = 0 if weight_gathered_fp8 else e * i * o
    steps = (
        f * t * o + e * t * o,
        f * t * o + w + w_tmp,
        f * t * o + w + c * t * i,
        2 * f * t * o + w + c * t * i + e * t * o,
        2 * f * t * o + w + c * t * i + f * t * i + e * t * i,
    )
    return max(steps if grad_weight_fp8 else steps[:3])


# torchao's Float8Linear recipes (Float8LinearRecipeName TENSORWISE, ROWWISE, ROWWISE_WITH_GW_HP: module docstring)
TORCHAO_RECIPES = ("torchao", "torchao-rowwise", "torchao-rowwise-gw-hp")
# TransformerEngine's recipes: the per-tensor DelayedScaling ('transformer-engine', llm-foundry's) and
# Float8CurrentScaling ('transformer-engine-current', Megatron-Bridge's fp8_cs; eq. F3c), and the block-scaled
# MXFP8BlockScaling ('transformer-engine-mxfp8', Megatron-Bridge's mxfp8, Blackwell only; eq. F3m)
TE_RECIPES = ("transformer-engine", "transformer-engine-current", "transformer-engine-mxfp8")
TE_MXFP8 = "transformer-engine-mxfp8"
# MXFP8: elements per E8M0 scale (TransformerEngine @d0067d0d pytorch/constants.py line 175 MXFP8_BLOCK_SCALING_SIZE,
# pytorch/csrc/quantizer.cpp line 198 MXFP8_BLOCK_SIZE) and the bytes of one scale (E8M0: 8 exponent bits, a uint8
# tensor, quantizer.cpp lines 1521-1534)
MXFP8_BLOCK = 32
MXFP8_SCALE_BYTES = 1
# the compute capabilities (major x 10 + minor) whose TransformerEngine runs MXFP8: [100, 120) (quantization.py
# @d0067d0d lines 162-168 _compute_mxfp8_support: >= 12.0 refused "for all gemm layouts ... yet", < 10.0 refused)
TE_MXFP8_CAPABILITIES = (100, 120)
MXFP8_SOURCE = ("TransformerEngine @d0067d0d pytorch/quantization.py lines 162-168 (_compute_mxfp8_support), "
                "242-254 (get_default_fp8_recipe); common/recipe/__init__.py lines 337-350 (MXFP8BlockScaling); "
                "pytorch/csrc/quantizer.cpp lines 198, 1502-1545 (MXFP8Quantizer::create_tensor: rowwise and "
                "columnwise uint8 data and scale_inv), 1852-1879 (get_scale_shape), 1835-1851 (quantize); "
                "common/cast/mxfp8/quantize_mxfp8.cuh lines 46-49; pytorch/module/linear.py lines 461-490")


def mxfp8_supported(capability: int | None) -> bool:
    """Whether TransformerEngine runs MXFP8 on a CUDA GPU of compute ``capability`` (major x 10 + minor):
    datacenter Blackwell, 10.x and 11.x (``_compute_mxfp8_support``, quantization.py lines 162-168); not Hopper
    (9.0), Ada (8.9) or 12.x (GeForce / RTX PRO Blackwell), nor an unknown capability (None).

    >>> mxfp8_supported(100), mxfp8_supported(103), mxfp8_supported(90), mxfp8_supported(120)
    (True, True, False, False)
    """
    lo, hi = TE_MXFP8_CAPABILITIES
    return capability is not None and lo <= capability < hi


def mxfp8_tensor_bytes(rows: int, cols: int, rowwise: bool = True, columnwise: bool = True) -> int:
    """Bytes TransformerEngine allocates for an MXFP8 tensor of ``rows`` x ``cols`` (the last dimension ``cols``;
    leading dimensions flattened into ``rows``), as ``MXFP8Quantizer::create_tensor`` and ``get_scale_shape`` build
    it (quantizer.cpp lines 1502-1545, 1852-1879): per usage, 1 B of e4m3 data per element plus a uint8 E8M0 scale
    array, padded to TE's scale alignment::

        rowwise:    rows cols + roundup(rows, 128) roundup(cols / 32, 4)
        columnwise: rows cols + roundup(rows / 32, 4) roundup(cols, 128)                           (T1m)

    Both dimensions must be multiples of 32 (quantizer.cpp lines 1513-1515). Where rows and cols are multiples of
    128 (every projection of the models llmsizer sizes) the padding is nil: (1 + 1/32) B per element per usage.

    >>> mxfp8_tensor_bytes(4096, 4096), mxfp8_tensor_bytes(32, 32, columnwise=False)
    (34603008, 1536)
    """
    if rows % MXFP8_BLOCK or cols % MXFP8_BLOCK or rows <= 0 or cols <= 0:
        raise InputError(f"MXFP8 needs both dimensions to be positive multiples of {MXFP8_BLOCK}, got {rows} x {cols}")

    def up(x: int, m: int) -> int:
        return -(-x // m) * m

    n = rows * cols
    row = n + up(rows, 128) * up(cols // MXFP8_BLOCK, 4) * MXFP8_SCALE_BYTES
    col = n + up(rows // MXFP8_BLOCK, 4) * up(cols, 128) * MXFP8_SCALE_BYTES
    return (row if rowwise else 0) + (col if columnwise else 0)
RECIPES = TORCHAO_RECIPES + TE_RECIPES


def float8_gathers_in_float8(recipe: str) -> bool:
    """Whether ``recipe``'s collectives carry float8 (FSDP2's weight all-gather, tensor parallelism's
    sequence-parallel all-gathers): not with torchao's rowwise recipes (config.py lines 270-274:
    ``enable_fsdp_float8_all_gather`` asserts tensorwise weight scaling); TransformerEngine's do
    (pytorch/tensor/float8_tensor.py @d0067d0 lines 938-990: ``Float8Tensor.fsdp_pre_all_gather`` sends the float8
    shard ``self._data``; module/linear.py lines 378-411: the sequence-parallel input is quantized, then gathered).
    Whether a workload's weights are gathered in float8: estimate/training/gather_units.py ``float8_all_gather``."""
    return recipe not in ("torchao-rowwise", "torchao-rowwise-gw-hp")


def float8_gathered_element_bytes(recipe: str) -> float:
    """Bytes per element of a sequence-parallel all-gather in float8 under ``recipe``
    (:func:`float8_gathers_in_float8`): 1 B (the e4m3/e5m2 data; the per-tensor scale is one fp32), under MXFP8
    1 + 1/32 B (the rowwise data and its E8M0 scales: TE sets the gather's quantizer to rowwise only, module/linear.py
    @d0067d0d lines 402-405, and ``_all_gather_mxfp8`` gathers data and scale-inverses, pytorch/distributed.py lines
    1527-1640).

    >>> float8_gathered_element_bytes("transformer-engine"), float8_gathered_element_bytes("transformer-engine-mxfp8")
    (1.0, 1.03125)
    """
    return FLOAT8_BYTES + (MXFP8_SCALE_BYTES / MXFP8_BLOCK if recipe == TE_MXFP8 else 0.0)


def float8_gemms(recipe: str) -> int:
    """How many of a float8 linear's three GEMMs (output, grad_input, grad_weight) run in float8 under ``recipe``:
    2 for ROWWISE_WITH_GW_HP (grad_weight in bf16, module docstring), else 3."""
    return 2 if recipe == "torchao-rowwise-gw-hp" else 3
SOURCE_TIME = ("torchao 0.18.0 float8/float8_linear.py lines 28-204, float8_utils.py lines 57-137, "
               "float8_training_tensor.py line 153, float8_ops.py lines 342-345; TransformerEngine "
               "pytorch/module/linear.py @0004dbd _Linear (fp8_cast_transpose_fused); current scaling: "
               "TransformerEngine @d0067d0d pytorch/csrc/quantizer.cpp lines 980-1033 (amax pass, then the cast), "
               "csrc/extensions/normalization.cpp lines 114-118, 351-355 (the norm's fused amax)")


# the weights convert_to_float8_training makes Float8Linear weights, as :func:`layer_linears` lists them (formulas/
# tensors.py roles): q, k, v, o and a dense MLP's gate, up, down
FLOAT8_LINEAR_ROLES = frozenset({"attn_q", "attn_k", "attn_v", "attn_output", "ffn_gate", "ffn_up", "ffn_down"})


def float8_autocast_copied(role: str, component: str) -> bool:
    """Whether torch.autocast still keeps a 16-bit copy of the linear weight ``role`` of ``component`` (formulas/
    tensors.py names) once torchao's float8 training has converted the model: False for a Float8Linear's weight (a
    decoder layer's attention projections and dense MLP, :data:`FLOAT8_LINEAR_ROLES`; module docstring "No autocast
    weight copy": autocast_mode.cpp cached_cast never sees the parameter), True for the linears left as
    ``nn.Linear`` (the lm_head, an MoE layer's router and shared expert).

    >>> float8_autocast_copied("ffn_down", "mlp"), float8_autocast_copied("output", "lm_head")
    (False, True)
    """
    return not (role in FLOAT8_LINEAR_ROLES and component in ("attention", "mlp"))


def float8_cast_bytes(tokens: float, in_features: int, out_features: int, compute_bytes: float, recipe: str = "torchao",
                      compiled: bool = True, weight_share: float = 1.0,
                      shared_input: bool = False, norm_fed: bool = False) -> tuple[float, float]:
    """(forward, backward) bytes one float8 linear's casts move over ``tokens`` tokens: eqs. (F1) eager torchao,
    (F2) compiled torchao, (F3) TransformerEngine delayed scaling, (F3c) its current scaling, (F3m) its MXFP8, (F4)/(F5) compiled
    torchao rowwise / rowwise with bf16 grad_weight (eager: F1's per-cast bytes over the tensors they cast).
    ``weight_share``: the part of the weight this device casts (1/n when FSDP all-gathers the weights in float8, each
    device casting its shard). ``shared_input``: a sibling linear reads the same input and its fused amax pass is
    counted there (compiled torchao only, F2's a = 0). ``norm_fed``: the input is the layer's norm output, whose amax
    TransformerEngine's fused norm computes (current scaling only, F3c's first term 0).

    >>> float8_cast_bytes(10, 4, 8, 2, "transformer-engine")
    (288.0, 320.0)
    >>> float8_cast_bytes(10, 4, 8, 2, "transformer-engine-current"), float8_cast_bytes(
    ...     10, 4, 8, 2, "transformer-engine-current", norm_fed=True)
    ((432.0, 480.0), (352.0, 480.0))
    >>> float8_cast_bytes(10, 4, 8, 2, "transformer-engine-mxfp8")
    (292.5, 325.0)
    """
    t, i, o, c = float(tokens), float(in_features), float(out_features), float(compute_bytes)
    if t < 0 or i < 0 or o < 0 or c <= 0 or not 0 <= weight_share <= 1:
        raise InputError("float8 cast sizes must not be negative, the element size positive, the share in [0, 1]")
    w = i * o
    if recipe in TE_RECIPES:
        # eq. F3m: MXFP8 writes two 1-byte copies and their E8M0 scales, one per 32 elements each
        per = c + 2 + (2.0 * MXFP8_SCALE_BYTES / MXFP8_BLOCK if recipe == TE_MXFP8 else 0.0)
        fwd, bwd = per * (t * i + w * weight_share), per * t * o
        if recipe == "transformer-engine-current":  # eq. F3c: the amax pass before each cast not fused upstream
            fwd += c * ((0.0 if norm_fed else t * i) + w * weight_share)
            bwd += c * t * o
        return fwd, bwd
    if recipe not in TORCHAO_RECIPES:
        raise InputError(unknown_choice("float8 recipe", recipe, RECIPES))
    if recipe != "torchao":  # rowwise: no float8 all-gather, each cast with its own amax pass
        gw = recipe == "torchao-rowwise"  # the grad_weight GEMM's two casts (input, grad_output along dim 1)
        if compiled:
            x = (c + 1 + (0.0 if shared_input else c)) * t * i
            wc = (2 * c + 1) * w
            return x + wc, (x if gw else 0.0) + wc + (2 * c + 1) * t * o * (2 if gw else 1)
        cast = 4 * c + 25
        return cast * (t * i + w), cast * (t * o * (2 if gw else 1) + (t * i if gw else 0.0) + w) + 2 * (
            (t * o + t * i if gw else 0.0) + w)
    if compiled:
        x = (c + 1 + (0.0 if shared_input else c)) * t * i
        wc = (2 * c + 1) * w * weight_share
        return x + wc, x + wc + (2 * c + 2) * t * o
    cast = 4 * c + 25
    return cast * (t * i + w * weight_share), cast * (2 * t * o + t * i + w * weight_share) + 2 * (t * o + t * i + w)


def shared_inputs(spec: ModelSpec) -> list[bool]:
    """Per entry of :func:`layer_linears`: True when an earlier linear of the layer reads the same input (k and v
    after q; up after gate)."""
    return [False, True, True, False] + ([False, True, False] if spec.mlp_gated else [False, False])


def norm_fed_inputs(spec: ModelSpec) -> list[bool]:
    """Per entry of :func:`layer_linears`: True when the linear reads the layer's norm output (q, k, v; gate and
    up), which Megatron-Core's TE layers fuse with the norm (``TELayerNormColumnParallelLinear``), so current scaling's
    amax comes from the norm kernel (eq. F3c); False for o and down."""
    return [True, True, True, False] + ([True, True, False] if spec.mlp_gated else [True, False])


def float8_layer_flops(spec: ModelSpec, tp: int = 1) -> float:
    """Forward FLOPs per token of one dense decoder layer's float8 linears: 2 x their weights (the backward's
    grad_input and grad_weight GEMMs take 2x that again)."""
    return 2.0 * sum(i * o for i, o in layer_linears(spec, tp))


def float8_gathered_bytes(elements: int, float8_elements: int, param_bytes: int) -> int:
    """An FSDP unit of ``elements`` parameters all-gathered under torchao's float8 all-gather: its Float8Linear
    weights (``float8_elements``, :func:`float8_weight_elements`) 1 B each (``fsdp_pre_all_gather`` hands FSDP2 the
    float8 data), the rest (norms, biases, modules left plain) ``param_bytes`` each [bytes].

    >>> float8_gathered_bytes(1000, 900, 2)
    1100
    """
    return (elements - float8_elements) * param_bytes + float8_elements * FLOAT8_BYTES


@lru_cache(maxsize=256)
def float8_weight_elements(spec: ModelSpec, tp: int = 1, moe: bool = False) -> int:
    """Weight elements on one device of a decoder layer's Float8Linears (:func:`layer_linears`; an MoE layer's
    attention projections only: its routed experts are grouped GEMMs that ``convert_to_float8_training`` does not
    touch, as estimate/duration.py counts them)."""
    linears = layer_linears(spec, tp)
    return sum(i * o for i, o in (linears[:4] if moe else linears))


@lru_cache(maxsize=256)
def layer_linears(spec: ModelSpec, tp: int = 1) -> tuple[tuple[int, int], ...]:
    """(in_features, out_features) on one device of each linear in a dense decoder layer that Float8Linear
    replaces: q, k, v, o and the MLP (gate, up, down; MoE layers: the shared expert and the router stay out of
    this list, the routed experts are grouped GEMMs that convert_to_float8_training does not touch); memoized on its
    immutable arguments (a tuple: read-only)."""
    q_w, k_w, v_w, o_w = (-(-x // tp) for x in _head_dims(spec))
    h, i_w = spec.hidden_size, -(-spec.intermediate_size // tp)
    out = [(h, q_w), (h, k_w), (h, v_w), (o_w, h)]
    if spec.mlp_gated:
        out += [(h, i_w), (h, i_w), (i_w, h)]
    else:
        out += [(h, i_w), (i_w, h)]
    return tuple(out)


@lru_cache(maxsize=256)
def float8_layer_backward_peak(spec: ModelSpec, tokens: int, compute_bytes: int, residual_bytes: int,
                               tp: int = 1, compiled: bool = True, weight_gathered_fp8: bool = False,
                               grad_weight_fp8: bool = True) -> int:
    """Peak bytes of a dense decoder layer's backward inside its Float8Linears [bytes]: the incoming and outgoing
    residual gradients (2 t h r; ``layer_backward_transient``'s MLP moment, before any [t, h] gradient is made, holds
    one), the linear's bf16 grad_output (c t o) and
    :func:`float8_backward_bytes`, for the linear where that is largest.

    A Float8Linear's backward runs after the elementwise backward that made its grad_output has freed its own
    gradients (measured: in the gate projection's backward of a Llama MLP only its [t, I] grad_output is alive), so
    the caller takes the larger of this and the bf16 layer transient, not their sum. The forward casts
    (:func:`float8_forward_bytes`) are smaller than the backward's and occur while fewer activations are alive.
    """
    c, r = compute_bytes, residual_bytes
    return 2 * tokens * spec.hidden_size * r + max(
        c * tokens * o + float8_backward_bytes(tokens, i, o, c, compiled, weight_gathered_fp8, grad_weight_fp8)
        for i, o in layer_linears(spec, tp))


# ---- TransformerEngine's float8 weight copies (te.Linear under fp8_autocast) ----
# Read in NVIDIA/TransformerEngine @d0067d0d:
# - pytorch/module/linear.py ``_Linear.forward`` lines 461-490: the weight is quantized straight from the parameter
#   (``quantize_weight``, module/base.py line 792) with rowwise usage always and columnwise usage when the input needs
#   a gradient and the run is not FSDP2 (line 467), or when TE's fp8 activation recompute is on (lines 470-474);
#   no bf16 copy is made beside it (``cast_if_needed`` only runs without fp8, line 493).
# - lines 641-648: that quantized weight is what the forward saves for the backward (``wt_save``), except under
#   FSDP2 (``is_fsdp2 and weightmat is not weight``: the backward re-quantizes from the all-gathered weight) or a
#   distributed weight.
# - lines 1958-1960 and 2068-2071: with ``is_first_microbatch`` given (not FSDP2) the quantized weight is kept in the
#   module's ``_fp8_workspaces`` and refreshed in place at the first micro-batch (``update_ws``, line 479): it lives
#   across micro-batches and steps.
# - checkpointing: TE's own ``checkpoint`` (pytorch/distributed.py, use_reentrant True by default, line 694) runs the
#   layer's first forward under ``torch.no_grad()`` (line 375: ``_Linear.forward`` without a ctx, nothing saved) and
#   the recompute under ``enable_grad`` (line 441), which saves that layer's copy until its backward; torch's
#   non-reentrant checkpoint drops what the first forward saves. Either way one layer's copy, the recomputed one.
# - pytorch/csrc/quantizer.cpp ``Float8Quantizer::create_tensor`` lines 355-384 (tensor scaling, delayed; current
#   scaling's ``Float8CurrentScalingQuantizer`` has the same rule, lines 679 and 689): the rowwise data (1 B per
#   element) is allocated when rowwise usage is set or the GPU runs non-TN FP8 GEMMs (``with_data``, line 363), the
#   transpose (1 B per element) only when columnwise usage is set and it does not (``with_transpose``, line 375): on
#   a GPU with non-TN FP8 GEMMs the one rowwise buffer serves both layouts;
#   common/transformer_engine.cpp ``nvte_is_non_tn_fp8_gemm_supported`` lines 1191-1203: compute capability 10.x,
#   11.x or >= 13.0 (datacenter Blackwell) runs non-TN FP8 GEMMs; Hopper (9.0), Ada (8.9) and 12.x do not.
# - MXFP8 (Blackwell's block scaling, ``MXFP8Quantizer::create_tensor`` quantizer.cpp lines 1502-1545) keeps a
#   rowwise and a columnwise copy on every architecture (1 B each) plus one E8M0 scale per 32 elements of each:
#   not a recipe llmsizer sizes (its float8 'transformer-engine' recipe is llm-foundry's delayed scaling). MXFP8 is
#   what TE picks when ``fp8_autocast`` gets no recipe on a GPU that supports it (pytorch/quantization.py
#   ``get_default_fp8_recipe`` lines 242-254), but llm-foundry's ``precision: amp_fp8`` runs Composer's
#   ``get_precision_context``, which always builds and passes ``DelayedScaling(**precision_config)``
#   (mosaicml/composer composer/core/precision.py @02c872e4, the AMP_FP8 branch): tensor scaling on Blackwell too,
#   so a B200 holds 1 B per element (rowwise data only), not MXFP8's 2 B + scales.
# - the recipe llmsizer sizes is llm-foundry's (``fc_type: te``): its blocks call the te modules as plain modules,
#   ``self.down_proj(self.act(self.up_proj(x)))`` (mosaicml/llm-foundry llmfoundry/models/layers/ffn.py
#   @63d37d79 ``MPTMLP.forward`` / ``MPTGLU.forward``), so ``is_first_microbatch`` stays None and no workspace cache is
#   kept (Megatron-core passes it: a loop that does keeps every layer's copy, lifetime 'workspace').
# - Megatron-Core (NVIDIA/Megatron-LM @d98e8a64) passes it: every TE linear it builds (TELinear, TELayerNormColumnParallel-
#   Linear, TEGroupedLinear: megatron/core/extensions/transformer_engine.py lines 1160, 1435, 2419) starts with
#   ``self.is_first_microbatch = True``, hands it to TE's forward and sets it False after (lines 1337-1345, 1586-1602,
#   2721-2728; None only under ``disable_parameter_transpose_cache``, default False: transformer_config.py line 1175);
#   the schedules set it True again (``MegatronModule.set_is_first_microbatch``, transformer/module.py lines 114-132,
#   whenever config.fp8 is set) for a model chunk's first micro-batch of the step only (pipeline_parallel/
#   schedules.py ``forward_step`` lines 496-497; no pipelining: ``i == 0``, lines 826 and 851; 1F1B: lines 2358 and
#   2401; interleaved: ``is_first_microbatch_for_model_chunk``, lines 1271-1275 and 1405-1408; training runs have
#   forward_only False, so ``check_first_val_step`` returns the condition, lines 671-676). A recomputed forward comes
#   after the flag went False: it reads the workspace too. In TE ``update_ws = is_first_microbatch is None or
#   is_first_microbatch`` (module/linear.py line 479) and ``quantize_weight`` (module/base.py lines 861-872) rewrites a
#   cached workspace only when it is set: one weight cast per layer per optimizer step (eq. T2).
# - Megatron-Bridge's fp8_cs and delayed recipes also set ``fp8_param_gather`` (NVIDIA-NeMo/Megatron-Bridge
#   src/megatron/bridge/training/mixed_precision.py @f9b6319e lines 223 and 294), which Megatron turns into
#   ``config.fp8_param`` (Megatron-LM @d98e8a64 megatron/training/argument_utils.py line 312; the flag: arguments.py
#   line 2016, "keep the compute param in fp8 ... and perform the param all-gather in fp8"; it needs the distributed
#   optimizer, lines 1095-1097). Eq. T3 below and ``FP8_PARAM_SOURCE``: the te layers are built under
#   ``fp8_model_init`` (fp8_utils.py ``get_fp8_context(is_init=True)`` lines 865-881), so TE quantizes each weight
#   into a Float8Tensor parameter at init (TE @d0067d0d module/base.py lines 1838-1865, ``set_usage(rowwise=True,
#   columnwise=torch.is_grad_enabled())``); ``quantize_weight`` hands such a parameter to the GEMM as it is (base.py
#   lines 835-845: no forward cast, no ``_fp8_workspaces``); the DDP buffer stores it as uint8 (distributed/
#   param_and_grad_buffer.py lines 920-923: 1 B an element, the all-gather of that buffer 1 B an element) and, after
#   the all-gather, ``post_all_gather_processing`` makes the transpose on GPUs without non-TN FP8 GEMMs (param_and_
#   grad_buffer.py line 343 -> fp8_utils.py lines 687-704 -> TE tensor/utils.py lines 1404-1426 ``_create_transpose``:
#   the T1 rule). The distributed optimizer keeps its fp32 main shard (optimizer/distrib_optimizer.py lines 428-445,
#   from the high-precision init value) and the fp32 gradient buffer as with bf16 parameters, and casts its own
#   1/(dp x cp) shard of the main params into the float8 parameters once per step (distrib_optimizer.py lines
#   2824-2853, ``quantize_param_shard``, fp8_utils.py line 672).
FP8_PARAM_SOURCE = ("NVIDIA/Megatron-LM @d98e8a64 training/arguments.py lines 1095-1097, 2016; training/argument_utils.py "
                    "line 312; core/fp8_utils.py lines 672, 687-704, 865-881; core/distributed/param_and_grad_buffer.py "
                    "lines 343, 920-923; core/optimizer/distrib_optimizer.py lines 428-445, 2824-2853; "
                    "TransformerEngine @d0067d0d pytorch/module/base.py lines 835-845, 1838-1865, "
                    "pytorch/tensor/utils.py lines 1404-1426; NVIDIA-NeMo/Megatron-Bridge @f9b6319e "
                    "src/megatron/bridge/training/mixed_precision.py lines 223, 294")
LLM_FOUNDRY_TE_CALL = ("mosaicml/llm-foundry llmfoundry/models/layers/ffn.py @63d37d79 MPTMLP.forward "
                       "(no is_first_microbatch)")
MEGATRON_TE_CALL = ("NVIDIA/Megatron-LM @d98e8a64 megatron/core/extensions/transformer_engine.py lines 1337-1345 "
                    "(TELinear passes is_first_microbatch), pipeline_parallel/schedules.py lines 496-497, 826, 1405-1408 "
                    "(True at a chunk's first micro-batch of the step): one weight cast per step, eq. T2")
TE_NON_TN_CAPABILITIES = ((100, 120), (130, 10_000))
TE_SOURCE = ("TransformerEngine @d0067d0d pytorch/module/linear.py lines 461-490 (quantize_weight from the parameter), "
             "641-648 (saved for backward, not under FSDP2), 1958-1960 + 2068-2071 (_fp8_workspaces); "
             "pytorch/csrc/quantizer.cpp lines 355-384 (Float8Quantizer::create_tensor: with_data line 363, "
             "with_transpose line 375); common/transformer_engine.cpp lines 1191-1203 (non-TN FP8 GEMMs: 10.x, 11.x, "
             ">= 13.0); mosaicml/composer composer/core/precision.py @02c872e4 (amp_fp8: DelayedScaling always); "
             + LLM_FOUNDRY_TE_CALL + "; " + MEGATRON_TE_CALL)


def te_weight_copy_bytes(elements: int, capability: int | None = 90, columnwise: bool = True,
                         recipe: str = "transformer-engine") -> int:
    """Bytes of the float8 copy TransformerEngine makes of ``elements`` weight elements under tensor scaling
    (delayed or current), on a GPU of compute ``capability`` (major x 10 + minor; None: Hopper's 90)::

        B = n (rowwise data)  + n (its transpose, when the backward needs it and the GPU runs TN-only FP8 GEMMs)  (T1)

    Under MXFP8 (``recipe`` 'transformer-engine-mxfp8') the rowwise and the columnwise copies are separate
    quantizations on every GPU (module docstring, eq. F3m), each with one E8M0 byte per 32 elements (eq. T1m,
    :func:`mxfp8_tensor_bytes`, without its scale padding, nil where the dimensions are multiples of 128)::

        B_mx = ceil(n (1 + 1/32)) (rowwise)  + ceil(n (1 + 1/32)) (columnwise, when the backward needs it)

    (quantizer.cpp lines 355-384; the per-tensor fp32 scale_inv, 4 B, is left out): 2 B per element on Ada (8.9),
    Hopper (9.0) and GeForce / RTX PRO Blackwell (12.x), 1 B on datacenter Blackwell (B200, GB200: 10.0; B300,
    GB300: 10.3), where the rowwise buffer serves the backward's layouts too (transformer_engine.cpp lines
    1191-1203).

    >>> te_weight_copy_bytes(1000), te_weight_copy_bytes(1000, 100), te_weight_copy_bytes(1000, 90, False)
    (2000, 1000, 1000)
    >>> te_weight_copy_bytes(1024, 100, recipe="transformer-engine-mxfp8")
    2112
    """
    if recipe == TE_MXFP8:
        one = elements * FLOAT8_BYTES + -(-elements * MXFP8_SCALE_BYTES // MXFP8_BLOCK)
        return one * (2 if columnwise else 1)
    cc = 90 if capability is None else capability
    non_tn = any(lo <= cc < hi for lo, hi in TE_NON_TN_CAPABILITIES)
    return elements * FLOAT8_BYTES * (2 if columnwise and not non_tn else 1)


def te_weight_copy_lifetime(fsdp2: bool, first_microbatch_cache: bool) -> str:
    """How long TransformerEngine keeps a te.Linear's float8 weight: 'none' under FSDP2 (not saved, not cached: the
    forward's rowwise cast and the backward's re-quantization each live only for their GEMM), 'workspace' when the
    training loop passes ``is_first_microbatch`` (the module's ``_fp8_workspaces``: every layer's copy, all the
    time), else 'saved' (from the layer's forward to its backward, like a saved activation: a checkpointed layer's
    forward keeps none, its recompute makes it again for its own backward).

    >>> te_weight_copy_lifetime(True, True), te_weight_copy_lifetime(False, True), te_weight_copy_lifetime(False, False)
    ('none', 'workspace', 'saved')
    """
    if fsdp2:
        return "none"
    return "workspace" if first_microbatch_cache else "saved"


def te_weight_casts_per_step(micro_batches: int, first_microbatch_cache: bool) -> int:
    """How many times TransformerEngine quantizes one te layer's weight in an optimizer step of ``micro_batches``
    forward passes (per layer and linear; a recomputed forward adds its own only without the cache)::

        n_cast = 1        when the loop passes is_first_microbatch (Megatron-Core: the first micro-batch refreshes
                          _fp8_workspaces, the others read it)                                             (T2)
        n_cast = k        else (is_first_microbatch None: update_ws is True at every forward, llm-foundry)

    (module/linear.py line 479 ``update_ws``, module/base.py lines 861-872; the comment block above). The weight
    terms of eqs. F3/F3c are paid n_cast / k times per micro-batch.

    >>> te_weight_casts_per_step(8, True), te_weight_casts_per_step(8, False)
    (1, 8)
    """
    if micro_batches < 1:
        raise InputError(f"micro-batches per step must be at least 1, got {micro_batches}")
    return 1 if first_microbatch_cache else micro_batches


def fp8_param_bytes(elements: int, capability: int | None = 90) -> int:
    """Bytes per device of ``elements`` te linear weight elements kept as TransformerEngine float8 parameters
    (Megatron ``fp8_param_gather``, the comment block above)::

        B = n (the Float8Tensor's data, the DDP buffer's uint8)
            + n (its transpose, made after each all-gather on TN-only GPUs: eq. T1's rule)             (T3)

    in place of the n x param_bytes high-precision parameter and of eq. T1's copy (no ``_fp8_workspaces``). The
    fp32 main parameter and gradient the distributed optimizer keeps are unchanged; its per-step cast covers its
    own 1/(dp x cp) shard, and the parameters' all-gather moves 1 B per element (``FP8_PARAM_SOURCE``).

    >>> fp8_param_bytes(1000), fp8_param_bytes(1000, 100)
    (2000, 1000)
    """
    return te_weight_copy_bytes(elements, capability)
