"""Unsloth's fused LoRA kernels: what a Llama-family decoder layer keeps for its backward [bytes].

Read from unslothai/unsloth @ e3162dc5bf88bf4c2b598c74cbcaba0706c4067b (2025-01-14, the release of the README's
context-length table, validation/unsloth_max_context.csv):

- ``Fast_RMS_Layernorm`` (unsloth/kernels/rms_layernorm.py lines 152-169): saves its input X (residual dtype),
  the weight and ``r`` = 1/rms in fp32, one per token; no fp32 copy of X.
- ``LoRA_QKV`` (unsloth/kernels/fast_lora.py lines 233-249): saves X (the norm output) and the adapters; Q, K, V
  themselves are not kept by it.
- attention: RoPE'd q, k and v, the output and the fp32 log-sum-exp, kept by the flash-attention kernel.
- ``LoRA_W`` for o_proj (fast_lora.py lines 366-371): saves X, the attention output (a view of the kept output).
- ``LoRA_MLP`` (fast_lora.py lines 67-89): saves X, e = gate(X), g = up(X); SwiGLU h and the down projection's
  output are recomputed or not kept. Its backward (lines 95-150) writes h, df, de into the e and g buffers and dX
  into X (``inplace=True``): one new [t, I] tensor, DW = dY down^T.

Per layer and token t, widths h (hidden), I (intermediate), q/k/v/o; c the compute dtype, r the residual dtype:

    saved     = 2 (t h r + 4 t)          the two norms' inputs and 1/rms                                (1)
              + 2 t h c                  LoRA_QKV's and LoRA_MLP's X
              + t (q + k + v + o) c + 4 t heads   attention tensors and log-sum-exp
              + 2 t I c                  e and g
    transient = max(t I c, t (q + k + v + o) c) + 2 t h r    the MLP's DW, or dq/dk/dv/dout; the residual grads (2)

Applies to LoRA / QLoRA with adapters on all seven projections of a dense, gated-MLP, RMSNorm model without MLA
(the layers Unsloth's fast paths patch); ``check`` refuses the rest.
"""

from __future__ import annotations

from ..errors import InputError
from ..specs import ModelSpec
from .training_activations import ActivationSetup, Term, _div, _head_dims

SOURCE = "unslothai/unsloth @ e3162dc unsloth/kernels/fast_lora.py, rms_layernorm.py (formulas/unsloth_kernels.py)"
ALL_LINEAR = frozenset({"attn_q", "attn_k", "attn_v", "attn_output", "ffn_gate", "ffn_up", "ffn_down"})


def check(spec: ModelSpec, st: ActivationSetup) -> None:
    """InputError unless Unsloth's fused LoRA kernels cover every layer of ``spec`` under ``st``."""
    why = []
    if st.full or st.dora:
        why.append("LoRA/QLoRA adapters (not full training or DoRA)")
    if not ALL_LINEAR <= st.adapted:
        why.append("adapters on all of q,k,v,o,gate,up,down")
    if spec.is_moe or spec.mla is not None or not spec.mlp_gated or spec.norm_kind == "layernorm":
        why.append("a dense gated-MLP RMSNorm model without MLA")
    if why:
        raise InputError("kernels 'unsloth' (Unsloth's fused LoRA kernels) need " + "; ".join(why))


def saved_terms(spec: ModelSpec, st: ActivationSetup) -> tuple[Term, ...]:
    """Eq. (1): the tensors one layer keeps for its backward."""
    t, c, r, h = st.tokens, st.compute, st.residual, spec.hidden_size
    q, k, v, o = (_div(x, st.tp) for x in _head_dims(spec))
    heads = _div(spec.num_heads, st.tp)
    inter = _div(spec.intermediate_size, st.tp)
    return (
        Term("norm inputs + 1/rms (Fast_RMS_Layernorm)", 2 * (t * h * r + 4 * t), f"2 x ({t} x {h} x {r} B + 4 B)"),
        Term("LoRA_QKV and LoRA_MLP inputs", 2 * t * h * c, f"2 x {t} x {h} x {c} B"),
        Term("attention q, k, v, output", t * (q + k + v + o) * c, f"{t} x ({q} + {k} + {v} + {o}) x {c} B"),
        Term("attention log-sum-exp", 4 * t * heads, f"{t} x {heads} x 4 B"),
        Term("LoRA_MLP e, g", 2 * t * inter * c, f"2 x {t} x {inter} x {c} B (SwiGLU h recomputed)"),
    )


def backward_transient(spec: ModelSpec, st: ActivationSetup) -> int:
    """Eq. (2): gradients alive inside one layer's backward."""
    t, c, r = st.tokens, st.compute, st.residual
    q, k, v, o = (_div(x, st.tp) for x in _head_dims(spec))
    return max(t * _div(spec.intermediate_size, st.tp) * c, t * (q + k + v + o) * c) + 2 * t * spec.hidden_size * r
