"""What a decoder layer saves for its backward under ``torch.compile`` (inductor): the min-cut partitioner's set.

``torch.compile`` with the inductor backend traces forward and backward into one joint graph (AOTAutograd) and
splits it with ``min_cut_rematerialization_partition`` (torch/_inductor/compile_fx.py: the training path passes
``partition_fn=min_cut_rematerialization_partition``; torch/_functorch/partitioners.py). The partitioner picks the
cheapest set of tensors to save such that the backward can rebuild the rest:

- compute-intensive ops (``get_default_op_list().compute_intensive_ops``: mm, addmm, bmm, the SDPA kernels) are
  never recomputed (``should_ban_recomputation``: ``is_compute_intensive``), so their inputs or outputs that the
  backward needs are saved;
- pointwise ops and reductions are recomputable (``ops_to_recompute``) and are fused into their consumers, so
  their outputs are not saved when a smaller cut exists: an RMSNorm's fp32 upcast and its ``x * rsqrt`` product
  are rebuilt from the norm input (in the model's dtype) and the saved fp32 ``rsqrt`` (one value per token); the
  normalised tensor a trained norm weight needs is rebuilt the same way; SwiGLU's ``silu(gate)`` is rebuilt from
  the saved gate output.

Measured on the real partitioner (tests/formulas/test_compiled_activations.py: a transformers Llama / Qwen2
decoder layer compiled on the CPU with ``aot_autograd(partition_fn=min_cut_rematerialization_partition)``,
the saved tensors read from the backward graph's inputs), a dense layer keeps, per device (t tokens, c compute
and r residual element sizes, widths after tensor parallelism):

    layer input r t h + 2 x 1/rms 4 t          (the two norms' inputs: the first is the layer input; the
    + o_proj output c t h                        second, x + attention, is rebuilt from it and o_proj's output)
    + q/k/v input c t h + attention q, k, v, output, lse (as eager)
    + o_proj input c t o_w                      (the contiguous [t, heads x head_dim] copy of the SDPA output)
    + mlp input c t h + gate, up, product 3 c t I   (SwiGLU; GeLU: the act input only)

against eager transformers' fp32 norm inputs, normalised tensors and ``silu`` output. What is not a dense RMSNorm
/ SwiGLU / GeLU layer (MoE experts, MLA latents, eager attention) keeps its eager terms.
"""

from __future__ import annotations

from ..specs import ModelSpec
from .training_activations import ActivationSetup, Term, _div, _head_dims

SOURCE = ("torch/_functorch/partitioners.py min_cut_rematerialization_partition (compute-intensive ops never "
          "recomputed, pointwise ops and reductions recomputed); torch/_inductor/compile_fx.py partition_fn")


def compiled_layer_terms(spec: ModelSpec, layer: int, st: ActivationSetup,
                         eager: tuple[Term, ...]) -> tuple[Term, ...]:
    """The saved terms of decoder layer ``layer`` under torch.compile, from its eager terms ``eager``
    (``training_activations.layer_saved_terms``); see the module docstring for the rule."""
    t, c, r, h = st.tokens, st.compute, st.residual, spec.hidden_size
    ts = _div(t, st.tp) if st.sp else t
    q_w, k_w, _, o_w = (_div(x, st.tp) for x in _head_dims(spec))
    out: list[Term] = []
    for term in eager:
        n = term.name
        if n.endswith(" normalised"):
            continue  # x * rsqrt rebuilt from the saved input and 1/rms
        if n == "attention norm fp32 input + 1/rms":
            out.append(Term("layer input + attention norm 1/rms", ts * h * r + ts * 4,
                            f"{ts} x {h} x {r} B (the norm input in the model dtype) + 4 B per token (fp32 rsqrt)"))
        elif n == "mlp norm fp32 input + 1/rms":
            out.append(Term("o_proj output + mlp norm 1/rms", ts * h * c + ts * 4,
                            f"{ts} x {h} x {c} B (x + attention rebuilt from it) + 4 B per token"))
        elif n.startswith("extra norm") and n.endswith("fp32 input + 1/rms"):
            out.append(Term(n.replace("fp32 input", "input"), ts * h * c + ts * 4,
                            f"{ts} x {h} x {c} B + 4 B per token"))
        elif n == "q/k norms fp32 inputs":
            heads = _div(spec.num_heads, st.tp) + max(1, spec.num_kv_heads // st.tp)
            out.append(Term("q/k norms inputs + 1/rms", t * (q_w + k_w) * c + t * heads * 4,
                            f"{t} x ({q_w} + {k_w}) x {c} B + 1/rms per head"))
        elif n.endswith("act input, act output, up output, product"):
            out.append(Term(n.replace("act input, act output, up output, product", "gate, up, product"),
                            term.bytes * 3 // 4, term.formula.replace("4 x", "3 x") + ", silu rebuilt"))
        elif n.endswith("act input, act output, up output"):
            out.append(Term(n.replace("act input, act output, up output", "gate, up"),
                            term.bytes * 2 // 3, term.formula.replace("3 x", "2 x") + ", silu rebuilt"))
        elif n.endswith("act input, act output"):
            out.append(Term(n.replace("act input, act output", "act input"), term.bytes // 2,
                            term.formula.replace("2 x", "1 x") + ", GeLU rebuilt"))
        else:
            out.append(term)
        if n.startswith("attention q, k, v, output") and (st.full or "attn_output" in st.adapted):
            out.append(Term("o_proj input (contiguous attention output)", t * o_w * c, f"{t} x {o_w} x {c} B"))
    return tuple(out)
