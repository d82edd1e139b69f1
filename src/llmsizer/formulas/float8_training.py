"""Float8 training with torchao (``convert_to_float8_training``; torchtitan ``--model.converters float8``).

torchao 0.18.0 ``torchao/float8/float8_linear.py`` replaces each ``nn.Linear`` by ``Float8Linear``, whose matmul is
``matmul_with_hp_or_float8_args`` (lines 28-205), with dynamic tensorwise scaling by default:

- what is saved for the backward: ``ctx.save_for_backward(input_hp, weight_hp_t)`` (line 45): the input in
  its *high* precision (bf16) and the weight, exactly as a bf16 linear saves them. Float8 does not shrink the
  saved activations in eager mode (under torch.compile the partitioner may save the float8 cast instead);
- forward casts (lines 50-91): the input and the weight are cast to float8 (1 byte per element, e4m3) for
  ``torch._scaled_mm``; both casts are freed when the matmul returns;
- backward casts (lines 94-205): grad_output to float8 twice (e5m2: row-major for grad_input, column-major for
  grad_weight), the weight again (for grad_input) and the saved input again (for grad_weight);
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

The output layer stays in bf16 (torchtitan's float8 converter filters ``output``; ``Float8LinearConfig`` needs
dimensions divisible by 16), so the lm_head is not converted.
"""

from __future__ import annotations

from ..specs import ModelSpec
from .training_activations import _head_dims

FLOAT8_BYTES = 1
SOURCE = ("torchao 0.18.0 float8/float8_linear.py (matmul_with_hp_or_float8_args, lines 28-205); "
          "float8/fsdp_utils.py WeightWithDynamicFloat8CastTensor.fsdp_pre_all_gather (lines 228-251)")


def float8_forward_cast_bytes(tokens: int, in_features: int, out_features: int, weight_gathered_fp8: bool) -> int:
    """Float8 copies alive during one Float8Linear forward [bytes]: the input cast, and the weight cast unless the
    weight arrived in float8 from the FSDP all-gather."""
    weight = 0 if weight_gathered_fp8 else in_features * out_features
    return FLOAT8_BYTES * (tokens * in_features + weight)


def float8_backward_cast_bytes(tokens: int, in_features: int, out_features: int, compiled: bool = True) -> int:
    """Float8 copies alive during one Float8Linear backward [bytes]: grad_output twice (two layouts), the weight
    and the saved input, each 1 byte per element; run eagerly (``compiled`` False), plus the two fp32
    temporaries (8 bytes per element) of the largest of those casts."""
    casts = 2 * tokens * out_features + in_features * out_features + tokens * in_features
    eager = 0 if compiled else 8 * max(tokens * out_features, in_features * out_features, tokens * in_features)
    return FLOAT8_BYTES * casts + eager


def float8_gathered_bytes(gathered_bytes: int, param_bytes: int) -> int:
    """Unsharded weights of FSDP units all-gathered in float8 instead of ``param_bytes`` per element [bytes]."""
    return gathered_bytes * FLOAT8_BYTES // max(1, param_bytes)


def layer_linears(spec: ModelSpec, tp: int = 1) -> list[tuple[int, int]]:
    """(in_features, out_features) on one device of each linear in a dense decoder layer that Float8Linear
    replaces: q, k, v, o and the MLP (gate, up, down; MoE layers: the shared expert and the router stay out of
    this list, the routed experts are grouped GEMMs that convert_to_float8_training does not touch)."""
    q_w, k_w, v_w, o_w = (-(-x // tp) for x in _head_dims(spec))
    h, i_w = spec.hidden_size, -(-spec.intermediate_size // tp)
    out = [(h, q_w), (h, k_w), (h, v_w), (o_w, h)]
    if spec.mlp_gated:
        out += [(h, i_w), (h, i_w), (i_w, h)]
    else:
        out += [(h, i_w), (i_w, h)]
    return out


def largest_float8_backward(spec: ModelSpec, tokens: int, tp: int = 1, compiled: bool = True) -> int:
    """The largest :func:`float8_backward_cast_bytes` over a layer's Float8Linears [bytes]."""
    return max(float8_backward_cast_bytes(tokens, i, o, compiled) for i, o in layer_linears(spec, tp))
