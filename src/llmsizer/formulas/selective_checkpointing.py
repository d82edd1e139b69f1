"""Op-level selective activation checkpointing (torchtitan ``SelectiveAC``): what one decoder layer keeps.

torchtitan wraps every transformer block in ``checkpoint_wrapper`` with a
``create_selective_checkpoint_contexts`` policy (torchtitan ``torchtitan/distributed/activation_checkpoint.py``
at commit b5bcd76, ``SelectiveAC._wrap_block``, lines 214-287; the policy API is
``torch.utils.checkpoint.create_selective_checkpoint_contexts``). For every ATen op run inside the block the
policy answers MUST_SAVE or PREFER_RECOMPUTE:

- the save set (``_get_default_save_ops``, lines 31-94) is the partitioner's compute-intensive ops
  (``torch._functorch.partitioners.get_default_op_list``: mm, addmm, bmm, the SDPA flash/efficient kernels,
  _scaled_mm, convolution) plus aten.linear, aten.max, aten.topk, the other SDPA variants and
  reduce-scatter / all-to-all outputs;
- mm/linear calls are counted from 1 within each checkpointed call, and every *second* one is recomputed
  (lines 257-273: ``if func in mm_ops and meta[mm_count_key] % 2 == 0: return PREFER_RECOMPUTE``), so in a
  Llama block (q, k, v, o, gate, up, down: 7 bias-free linears, each an aten.mm) the outputs of q, v, gate and
  down are saved and k, o, up recomputed. A linear with a bias runs as aten.addmm on a contiguous 3-D input
  (ATen ``linear``: ``_flatten_nd_linear``), which is in the save set but not counted: always saved;
- everything else (norms, rotary, activation, residual adds, casts) is recomputed in the backward.

The MoE router linear is force-recomputed by default (``force_recompute_mm_shapes_by_fqns = ["moe.router.gate"]``,
lines 196-198) and does not advance the count; routed experts run as ``_grouped_mm``, outside the save set, so
only the router's top-k (values and int64 indices) is kept. Before the refactor of 2026-06 (commit c5d93d1) the
save list was ``_save_list`` (mm, the two CUDA SDPA kernels, reduce-scatter, max, flex attention: file at
25413d2, lines 21-32; addmm and bmm recomputed); the every-second-mm rule is the same in both.

A layer under this policy keeps, per device (t = b s tokens, c = compute element size, r = residual element
size, widths after tensor parallelism):

    checkpoint input  r t h   +   sum of saved matmul outputs  c t w_k   +   SDPA output c t q_w + fp32 lse 4 b a s

with LoRA adapters in PEFT/torchtune order (base matmul, lora_A (width r), lora_B (the base output width)):
they are matmuls too and shift the count. The backward of a layer rebuilds the rest of the layer's
activations (:func:`op_sac_reused_bytes` names what the recompute can take from the saved outputs).

**Under torch.compile** (torchtitan ``apply_compile`` compiles each checkpoint-wrapped block,
``torch.compile(transformer_block, fullgraph=True)``: torchtitan/parallelisms/parallelize_llama.py at 9dec370,
lines 70-71 and 297-303, "turn on per-TransformerBlock compile after AC wrapping") the policy does not keep
anything itself: dynamo traces it into the joint graph as a tag per node, and inductor's min-cut partitioner
(formulas/compiled_activations.py) honours the tags - MUST_SAVE only bans recomputing the node
(torch/_functorch/partitioners.py in torch 2.13, ``should_ban_recomputation`` lines 2200-2207), PREFER_RECOMPUTE
forces its recomputation (``must_recompute``, lines 166-170, the infinite edge to the sink at line 2362). The
saved set is still a cut between the forward and what the backward needs, so a MUST_SAVE output that no
backward op reads is not saved at all: the layer's last matmul (the MLP down projection; with LoRA on it, its
lora_B too) feeds only the residual add into the layer output, whose backward reads no input. Everything else
the eager policy keeps is read by the backward (q and v by the rotary / SDPA recompute, the gate by SiLU's
backward, the SDPA output and lse by its backward, the layer input by the recompute). Measured on the real
partitioner: tests/formulas/test_op_sac_compiled.py.
"""

from __future__ import annotations

from collections.abc import Callable

from ..specs import ModelSpec
from .tensors import RECURRENT_LINEARS, recurrent_linears
from .training_activations import ActivationSetup, Term, _div, _head_dims, checkpoint_input_bytes, needs_mask


def layer_matmul_shapes(spec: ModelSpec, layer: int, st: ActivationSetup) -> list[tuple[str, int, int, bool]]:
    """The matmuls of one decoder layer in forward order: (name, input width, output width per token on one
    device, counted).

    ``counted`` is True for a bias-free linear (aten.mm, which the every-second rule counts) and False for a
    linear with a bias (aten.addmm: always saved, not counted). LoRA adapters follow their base linear
    (lora_A: input width -> r, lora_B: r -> output width). Column-parallel outputs and row-parallel inputs are
    divided by the tensor-parallel degree. The routed experts of an MoE layer are not listed (``_grouped_mm``).
    """
    tp = st.tp
    h = spec.hidden_size
    out: list[tuple[str, int, int, bool]] = []

    def linear(name: str, role: str, width_in: int, width: int, bias: bool) -> None:
        out.append((name, width_in, width, not bias))
        if role in st.adapted and not st.full:
            out.append((f"{name} lora_A", width_in, st.rank, True))
            out.append((f"{name} lora_B", st.rank, width, True))

    def mlp(name: str, role: str, width: int) -> None:  # gate (a gated MLP only), up, down; column/row-parallel
        i_w = _div(width, tp)
        if spec.mlp_gated:
            linear(f"{name}gate", f"{role}gate", h, i_w, spec.mlp_bias)
        linear(f"{name}up", f"{role}up", h, i_w, spec.mlp_bias)
        linear(f"{name}down", f"{role}down", i_w, h, spec.mlp_bias)

    # the layer's own schedule (hybrid and state-space models: specs/model.py layer_types, recurrent_layers,
    # ffn_layers): a Mamba- or MoE-only Nemotron-H layer has no attention projections, an attention-only one no MLP
    if spec.layer_types[layer] != "none" or spec.cross_attention_layers[layer]:
        _attention_linears(spec, st, linear)
    for role, w_in, w_out, bias in recurrent_linears(spec, layer):  # parallel to attention in Falcon-H1
        split = RECURRENT_LINEARS[role]
        linear(role, role, _div(w_in, tp) if split == "in" else w_in, _div(w_out, tp) if split == "out" else w_out,
               bias)
    if spec.moe_layers[layer] and spec.moe is not None:
        latent = spec.moe.latent_size
        if latent:  # NemotronHMoE.forward: fc1_latent_proj before the routed experts, fc2_latent_proj after them,
            # then the shared experts (transformers modeling_nemotron_h.py lines 745-757); replicated, not TP-split
            linear("latent in", "ffn_latent_in", h, latent, spec.mlp_bias)
            linear("latent out", "ffn_latent_out", latent, h, spec.mlp_bias)
        if spec.moe.shared_intermediate_size:
            mlp("shared ", "ffn_shexp_", spec.moe.shared_intermediate_size)
        return out
    if spec.ffn_layers[layer]:
        mlp("", "ffn_", spec.intermediate_size)
    return out


def _attention_linears(spec: ModelSpec, st: ActivationSetup, linear: Callable[[str, str, int, int, bool], None]
                       ) -> None:
    """The attention projections of a layer in forward order (``layer_matmul_shapes``)."""
    tp, h = st.tp, spec.hidden_size
    q_w, k_w, v_w, o_w = (_div(x, tp) for x in _head_dims(spec))
    if spec.mla is not None:
        m = spec.mla
        if m.q_lora_rank:
            linear("q_a", "", h, m.q_lora_rank, False)
            linear("q_b", "attn_q", m.q_lora_rank, q_w, False)
        else:
            linear("q", "attn_q", h, q_w, False)
        linear("kv_a", "", h, m.kv_lora_rank + m.qk_rope_head_dim, False)
        linear("kv_b", "", m.kv_lora_rank, _div(spec.num_heads * (m.qk_nope_head_dim + m.v_head_dim), tp), False)
    else:
        qkv_bias = spec.attention_qkv_bias
        linear("q", "attn_q", h, q_w, qkv_bias)
        linear("k", "attn_k", h, k_w, qkv_bias)
        linear("v", "attn_v", h, v_w, qkv_bias)
    linear("o", "attn_output", o_w, h, spec.attention_out_bias)


def layer_matmuls(spec: ModelSpec, layer: int, st: ActivationSetup) -> list[tuple[str, int, bool]]:
    """The matmuls of one decoder layer in forward order: (name, output width per token on one device, counted)
    (:func:`layer_matmul_shapes` without the input width)."""
    return [(name, width, counted) for name, _, width, counted in layer_matmul_shapes(spec, layer, st)]


def moe_expert_flops(spec: ModelSpec, layer: int, st: ActivationSetup) -> int:
    """Forward FLOPs per token of an MoE layer's router (2 h E) and top-k routed experts (2 k x (3 or 2) x i_e),
    where x is the width the experts read and write: the hidden size h, or Nemotron-H's moe_latent_size
    (``NemotronHExperts`` weights [E, I, latent] / [E, latent, I], modeling_nemotron_h.py lines 668-674)."""
    if not (spec.moe_layers[layer] and spec.moe is not None):
        return 0
    m, h = spec.moe, spec.hidden_size
    x = m.latent_size or h
    mats = 3 if m.expert_gated else 2
    return 2 * h * m.num_experts + 2 * m.experts_per_token * mats * x * _div(m.expert_intermediate_size, st.tp)


def full_recompute_flops(spec: ModelSpec, layer: int, st: ActivationSetup, early_stop: bool = True) -> int:
    """Matmul FLOPs per token that the backward of a fully checkpointed layer runs again: every matmul of the layer
    but the last. PyTorch's non-reentrant checkpoint (torchtune's and torchtitan's ``checkpoint_wrapper``) stops the
    recomputation as soon as every tensor the backward needs has been rebuilt (torch/utils/checkpoint.py,
    ``set_checkpoint_early_stop``, default True); the layer's last matmul (the MLP down projection) feeds only the
    residual add, whose backward needs no input, so it does not run again. ``early_stop`` False: a reentrant
    checkpoint re-runs the whole function, the last matmul included (torch's ``CheckpointFunction.backward``
    ``outputs = ctx.run_function(*detached_inputs)``; Megatron-LM's own ``CheckpointFunction``, megatron/mpu/
    random.py @6985e58 line 310, @9aad920 line 360). Attention-core FLOPs: eq. (2') of formulas/training_time.py."""
    mm = layer_matmul_shapes(spec, layer, st)
    return 2 * sum(w_in * w_out for _, w_in, w_out, _ in (mm[:-1] if early_stop else mm)) \
        + moe_expert_flops(spec, layer, st)


def whole_layer_recompute_flops(spec: ModelSpec, layer: int, st: ActivationSetup) -> int:
    """:func:`full_recompute_flops` of a reentrant checkpoint: every matmul of the layer again."""
    return full_recompute_flops(spec, layer, st, early_stop=False)


def op_sac_recompute_flops(spec: ModelSpec, layer: int, st: ActivationSetup) -> int:
    """Forward FLOPs per token that the backward of a layer checkpointed with the op-level policy runs again
    (module docstring): 2 x input x output width of every mm the policy does not save (calls 2, 4, 6, ...) except
    the layer's last matmul (early stop, :func:`full_recompute_flops`); in an MoE layer also the force-recomputed
    router (2 h E) and the routed experts' ``_grouped_mm`` (outside the save set: 2 k x (3 or 2) h i_e). Norms,
    rotary, activations and adds are recomputed too but carry no matmul FLOPs; the saved SDPA output means the
    attention core is not run again."""
    flops = sum(2 * w_in * w_out for _, w_in, w_out in op_sac_recomputed_matmuls(spec, layer, st))
    return flops + moe_expert_flops(spec, layer, st)


# Megatron-Core's selective recompute modules whose recomputed forward runs matmuls (NVIDIA/Megatron-LM @d98e8a64):
# 'mlp' re-runs a dense layer's whole MLP (transformer_layer.py:537-539, :992-1010: ``tensor_parallel.checkpoint``,
# reentrant, so the last matmul too; not MoE layers), 'mla_up_proj' the MLA up projections
# (multi_latent_attention.py:855-875, :983-988: linear_q_up_proj or linear_q_proj, and linear_kv_up_proj, under
# CheckpointWithoutOutput), 'moe' an MoE layer's whole forward (moe/moe_layer.py:658-717: shared experts, router,
# latent projections and routed experts under a reentrant checkpoint; the routed experts and router are
# :func:`moe_expert_flops`). 'core_attn' is the attention core (counted with the attention term, formulas/
# training_time.py); 'layernorm' and 'moe_act' re-run element-wise kernels only (no matmul FLOPs).
MODULE_RECOMPUTE_MATMULS = {"mlp": ("gate", "up", "down"), "mla_up_proj": ("q_b", "kv_b"),
                            "moe": ("latent in", "latent out", "shared gate", "shared up", "shared down")}


def module_recompute_flops(spec: ModelSpec, layer: int, st: ActivationSetup, modules: frozenset[str]) -> int:
    """Forward FLOPs per token that Megatron's selective recompute of ``modules`` runs again in the backward of one
    layer (eq. M1)::

        F_rec = sum over the recomputed linears of 2 x input width x output width                             (M1)

    the linears of :data:`MODULE_RECOMPUTE_MATMULS` among the layer's matmuls (:func:`layer_matmul_shapes`: a dense
    layer's gate/up/down, MLA's q_b (q without a q LoRA rank) and kv_b; an MoE layer's shared expert is named
    'shared ...' and is not 'mlp'), and under 'moe' an MoE layer's router and routed experts
    (:func:`moe_expert_flops`)."""
    names = {n for m in modules for n in MODULE_RECOMPUTE_MATMULS.get(m, ())}
    if "mla_up_proj" in modules and spec.mla is not None and not spec.mla.q_lora_rank:
        names.add("q")  # linear_q_proj runs inside qkv_up_proj_and_rope_apply (line 869)
    experts = moe_expert_flops(spec, layer, st) if "moe" in modules else 0
    return experts + sum(2 * w_in * w_out for name, w_in, w_out, _ in layer_matmul_shapes(spec, layer, st)
                         if name in names)


def op_sac_recomputed_matmuls(spec: ModelSpec, layer: int, st: ActivationSetup) -> list[tuple[str, int, int]]:
    """(name, input width, output width) of the matmuls the backward of an op-checkpointed layer runs again, in
    forward order: the mm calls the policy does not save (2, 4, 6, ...: in a Llama block k, o and up) but the
    layer's last matmul (early stop, :func:`full_recompute_flops`)."""
    out: list[tuple[str, int, int]] = []
    count = 0
    mm = layer_matmul_shapes(spec, layer, st)
    for j, (name, w_in, w_out, counted) in enumerate(mm):
        if counted:
            count += 1
            if count % 2 == 0 and j < len(mm) - 1:
                out.append((name, w_in, w_out))
    return out


def saved_matmuls(spec: ModelSpec, layer: int, st: ActivationSetup,
                  compiled: bool = False) -> list[tuple[str, int]]:
    """(name, width) of the matmul outputs the policy saves: every addmm, and the odd-numbered mm calls; with
    ``compiled``, less the layer's last matmul and its lora_B, which no backward op reads (module docstring)."""
    mm = layer_matmuls(spec, layer, st)
    last = mm[-1][0].removesuffix(" lora_B") if mm else ""
    saved: list[tuple[str, int]] = []
    count = 0
    for name, width, counted in mm:
        if counted:
            count += 1
            if count % 2 == 0:
                continue
        if compiled and name in (last, f"{last} lora_B"):
            continue
        saved.append((name, width))
    return saved


def _attention_saved(spec: ModelSpec, layer: int, st: ActivationSetup) -> Term:
    t, c = st.tokens, st.compute
    q_w, _, _, o_w = (_div(x, st.tp) for x in _head_dims(spec))
    heads = _div(spec.num_heads, st.tp)
    if st.attention == "eager":  # q @ k^T and probs @ v are aten.bmm (always saved)
        scores = st.batch * heads * st.seq * st.seq * c
        return Term("attention bmm outputs (scores, probs @ v)", scores + t * o_w * c,
                    f"{st.batch} x {heads} x {st.seq}^2 x {c} B + {t} x {o_w} x {c} B")
    kernel = "efficient (masked)" if needs_mask(spec, layer, st) else "flash"
    return Term("SDPA output + log-sum-exp", t * o_w * c + st.batch * heads * st.seq * 4,
                f"{t} x {o_w} x {c} B + {st.batch} x {heads} x {st.seq} x 4 B (_scaled_dot_product_{kernel}_attention"
                " outputs)")


def op_sac_saved_terms(spec: ModelSpec, layer: int, st: ActivationSetup,
                       compiled: bool = False) -> tuple[Term, ...]:
    """Bytes decoder layer ``layer`` keeps under op-level selective checkpointing, eager or (``compiled``) under
    torch.compile's partitioner (module docstring)."""
    t, c = st.tokens, st.compute
    out = [Term("checkpointed layer input", checkpoint_input_bytes(spec, st),
                f"{t} x {spec.hidden_size} x {st.residual} B")]
    saved = saved_matmuls(spec, layer, st, compiled)
    widths = sum(w for _, w in saved)
    if saved:
        out.append(Term("saved matmul outputs", t * widths * c,
                        f"{t} x ({' + '.join(f'{n} {w}' for n, w in saved)}) x {c} B "
                        "(every addmm; mm calls 1, 3, 5, ...; the others recomputed"
                        + ("; compiled: the last matmul's output, read by no backward op, not saved)" if compiled
                           else ")")))
    out.append(_attention_saved(spec, layer, st))
    if spec.moe_layers[layer] and spec.moe is not None:
        k = spec.moe.experts_per_token
        out.append(Term("router top-k (values + indices)", t * k * (4 + 8),
                        f"{t} x top-{k} x (4 B fp32 score + 8 B int64 index); router and grouped_mm experts "
                        "recomputed"))
    return tuple(out)


def op_sac_reused_bytes(spec: ModelSpec, layer: int, st: ActivationSetup) -> int:
    """Bytes of the layer's ordinary saved tensors that the recompute takes from the policy's saved outputs
    instead of rebuilding them: the SDPA output and log-sum-exp, and the layer input (which the first norm
    saves itself when the residual stream is fp32)."""
    shared_input = checkpoint_input_bytes(spec, st) if st.residual == 4 else 0
    return _attention_saved(spec, layer, st).bytes + shared_input
