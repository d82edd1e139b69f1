"""Kernels an eager transformers inference step launches, from the model's structure (formulas/launch_overhead.py
eq. K4), the layer-kind split the training kernel counts share (``moe_kinds``), and the MoE block a training
framework runs (``moe_implementation``, ``moe_block_kernels``: eq. K9)."""

from __future__ import annotations

import dataclasses
from functools import lru_cache

from ..errors import InputError
from ..formulas.elementwise_traffic import LayerWidths, model_layer_widths
from ..formulas.launch_overhead import (
    BNB_SERVING_RELEASE,
    FUSED_GATE_UP,
    FUSED_QKV,
    GENERATE_STEP_KERNELS,
    LayerCode,
    Linear,
    forward_head_kernels,
    inference_step_kernels,
    mlp_activation_kernels,
    moe_layer_kernels,
    nf4_fused_max_rows,
    nf4_linear_kernels,
)
from ..formulas.megatron_layer_kernels import megatron_hook_adds, megatron_layer_kernels, megatron_recompute_kernels
from ..formulas.moe_router import unfused_routing_extra
from ..formulas.selective_checkpointing import layer_matmul_shapes
from ..formulas.training_activations import ActivationSetup
from ..specs import ModelSpec, TrainingWorkload
from ..specs.training import MEGATRON_PRECISIONS


def moe_kinds(spec: ModelSpec) -> list[bool]:
    """Per decoder layer, whether it runs routed experts (an MoE layer of an MoE model): the one layer-kind split of
    the duration's float8 linears and kernel counts, and of the inference kernel count."""
    layers = spec.moe_layers[:spec.num_layers]
    return list(map(bool, layers)) if spec.moe is not None else [False] * len(layers)


def layer_code(spec: ModelSpec) -> LayerCode:
    """The model's eager layer code where its kernels depart from transformers' Llama layer (formulas/
    launch_overhead.py LayerCode), from its flags. A partial rotary (``spec.rotary_dim`` short of the head)
    concatenates its pass-through channels back to q and k (formulas/elementwise_traffic.py eq. E1r), as Phi-3's
    rotary does at any factor (``spec.rotary_pass_cat``)."""
    partial = spec.mla is None and 0 < spec.rotary_dim < spec.head_dim
    return LayerCode(qkv_split=spec.qkv_split, rotary_pass_cat=spec.rotary_pass_cat or partial,
                     output_copy=spec.attention_output_copy, rotary_fused=spec.rotary_kernel == "flash-attn",
                     norm_fused=spec.norm_kernel == "flash-attn")


# the parts of each fused linear (ModelSpec.fused_qkv / fused_gate_up) in layer_matmul_shapes names
_FUSED = ((FUSED_QKV, ("q", "k", "v"), "fused_qkv"), (FUSED_GATE_UP, ("gate", "up"), "fused_gate_up"))


def _fuse(spec: ModelSpec, rows: list[tuple[str, int, int, bool]]) -> list[tuple[str, int, int, bool]]:
    """``layer_matmul_shapes`` rows with each fused linear's parts as the one nn.Linear the model runs (name
    FUSED_QKV / FUSED_GATE_UP, output widths summed, a bias if its parts have one) and one LoRA adapter on it when
    any part is adapted (PEFT wraps the whole linear: formulas/lora.py), at the first part's place."""
    for fused, parts, flag in _FUSED:
        if not getattr(spec, flag) or not all(any(r[0] == p for r in rows) for p in parts):
            continue
        base = [r for r in rows if r[0] in parts]
        adapted = [r for r in rows if r[0].split(" ")[0] in parts and "lora_" in r[0]]
        rank = next((r[2] for r in adapted if r[0].endswith("lora_A")), 0)
        n_in, n_out = base[0][1], sum(r[2] for r in base)
        merged = [(fused, n_in, n_out, all(r[3] for r in base))]
        if adapted:
            merged += [(f"{fused} lora_A", n_in, rank, True), (f"{fused} lora_B", rank, n_out, True)]
        at = rows.index(base[0])
        rest = [r for r in rows if r[0].split(" ")[0] not in parts]
        rows = rest[:at] + merged + rest[at:]
    return rows


def moe_implementation(precision: str, framework: str) -> str:
    """The MoE block a training run's framework executes (formulas/launch_overhead.py eq. K9,
    ``MOE_IMPLEMENTATIONS``): Megatron-Core's TEGroupedMLP for Megatron's own mixed precision (precision
    'megatron-bf16' / 'megatron-fp16': the one marker of a Megatron run, as formulas/tensor_parallel.py
    ``training_tp_framework`` reads it), torchtitan's GroupedExperts under that profile, else transformers' default
    ``experts_implementation`` (5.x: 'grouped_mm', modeling_utils.py L1893-1915 @5.24.0)."""
    if precision.startswith("megatron-"):
        return "megatron-te"
    return "torchtitan" if framework == "torchtitan" else "transformers-grouped-mm"


def moe_block_kernels(spec: ModelSpec, implementation: str, tokens: float, ep: int = 1,
                      half: bool = True) -> tuple[float, float]:
    """(forward, backward) kernels an MoE layer of ``spec`` adds to its attention and norms per micro-step on one
    device: the block of eq. K9 (``moe_layer_kernels``) less the MLP activation K2/K3 count it already has
    (``mlp_activation_kernels``, which the block contains). ``tokens``: the tokens the layer sees on the device."""
    if spec.moe is None:
        raise InputError("moe_block_kernels needs an MoE model")
    m = spec.moe
    f, b = moe_layer_kernels(implementation, m.num_experts, m.experts_per_token, tokens, ep, half)
    af, ab = mlp_activation_kernels(m.expert_gated)
    return f - af, b - ab


# The router logits' element size under the megatron precisions: Megatron-Core's default moe_router_dtype None keeps
# them in the layer input's dtype (bf16 / fp16: 2 B; formulas/expert_parallel_time.py, moe_utils.py line 936)
MEGATRON_ROUTER_LOGIT_BYTES = 2.0


def megatron_router_unfused(spec: ModelSpec, w: TrainingWorkload) -> bool:
    """Whether ``w``'s MoE router is charged as Megatron-Core's unfused router (formulas/moe_router.py eq. E19
    over eq. K9's fused one): a Megatron TE run (:func:`megatron_te_layers`) of an MoE model with
    ``moe_router_fusion`` not on (None: off, Megatron-Core's TransformerConfig default) whose router is eq. E19's
    softmax top-k (``MoESpec.router_score`` 'softmax'); a sigmoid router (DeepSeek-V3, GLM-4.5 with an expert bias;
    Llama 4's top-1 with none) is not modelled by eq. E19 and keeps eq. K9's count. Keyed on the score function, not
    on the bias: Llama 4's bias-free sigmoid router was charged eq. E19's softmax kernels (review35 N2)."""
    return (spec.moe is not None and not w.moe_router_fusion and megatron_te_layers(spec, w)
            and spec.moe.router_score == "softmax")


def megatron_te_layers(spec: ModelSpec, w: TrainingWorkload) -> bool:
    """Whether ``w``'s decoder layers are counted as a Megatron-Core TE layer launches them (formulas/
    megatron_layer_kernels.py eqs. K11/K12) rather than as transformers' eager layer (eqs. K2/K3): a Megatron run
    (a megatron precision, Megatron-Core's TE spec), eager, a full fine-tune or pre-training, of a model whose every
    layer is self-attention with an MLP or MoE block (gpt_layer_specs.py's layer; not hybrid Mamba / linear-attention
    stacks, MLA or layers without a feed-forward block, whose Megatron layers are not inventoried: eqs. K2/K3)."""
    return (w.precision in MEGATRON_PRECISIONS and not w.compile and w.method == "full" and spec.recurrent is None
            and spec.mla is None and "none" not in spec.layer_types and all(spec.ffn_layers))


def megatron_step_layer_kernels(spec: ModelSpec, w: TrainingWorkload
                                ) -> tuple[dict[tuple[bool, bool], tuple[int, int, int, int]], tuple[float, float]]:
    """Eqs. K11/K12 for ``w``'s layers (:func:`megatron_te_layers`): per (MoE layer, rotary) kind its (forward
    GEMMs, forward others, backward GEMMs, backward others) without the MoE block, the backward with eq. K12h's
    gradient-accumulation adds (norm weights, biases, router, sinks; a local expert's biases each), and the MoE block's (forward,
    backward) of eq. K9 whole (with eq. E19's unfused routing in place of its fused top-k where
    :func:`megatron_router_unfused`) ('megatron-te', the tokens one device's layer sees per micro-step; (0, 0) for a dense
    model)."""
    float8 = w.float8 and w.float8_recipe == "transformer-engine-current"
    qk = spec.qk_norm != "none"
    fused = w.gradient_accumulation_fusion is not False  # None: on under a megatron precision (TrainingWorkload)
    m = spec.moe
    n_local = m.num_experts // max(1, w.ep) if m is not None else 0
    attn_bias = int(spec.attention_qkv_bias) + int(spec.attention_out_bias)

    def hook(moe: bool) -> int:  # eq. K12h: the layer's parameters the DDP hook adds into main_grad
        if moe and m is not None:
            return megatron_hook_adds(2 + (2 if qk else 0), attn_bias + (2 * n_local if m.expert_bias else 0),
                                      1 + int(m.router_bias) + int(spec.attention_sinks), 2 + 2 * n_local, fused)
        return megatron_hook_adds(2 + (2 if qk else 0), attn_bias + (2 if spec.mlp_bias else 0),
                                  int(spec.attention_sinks), 4, fused)

    # eq. K11c's layout: the query groups on one tensor-parallel rank (one where the groups are fewer than the
    # ranks: attention.py's num_query_groups < world_size path) and the query heads per group
    groups = max(1, spec.num_kv_heads // max(1, w.tp))
    per_group = spec.num_heads // max(1, spec.num_kv_heads)
    kinds = {}
    for key in dict.fromkeys(zip(moe_kinds(spec), spec.rotary_layers, strict=True)):
        fg, fo, bg, bo = megatron_layer_kernels(key[0], qk, key[1], float8, groups, per_group)
        kinds[key] = (fg, fo, bg, bo + hook(key[0]))
    if m is None:
        return kinds, (0.0, 0.0)
    tokens = w.micro_batch * w.seq_len / max(1, w.context_parallel)
    mf, mb = moe_layer_kernels("megatron-te", m.num_experts, m.experts_per_token, tokens, max(1, w.ep))
    if megatron_router_unfused(spec, w):  # eq. E19's routing ops in place of eq. K9's fused top-k, each way
        rf, rb, _, _ = unfused_routing_extra(m.num_experts, m.experts_per_token, MEGATRON_ROUTER_LOGIT_BYTES)
        mf, mb = mf + rf, mb + rb
    return kinds, (mf, mb)


def megatron_step_kernels(spec: ModelSpec, w: TrainingWorkload, head: int) -> int:
    """Kernels of one micro-step of a Megatron TE run on one device, whole model (eqs. K11/K12 per layer, eq. K9 per
    MoE block, ``head`` outside the layers, with eq. K12h's adds of the parameters outside them): each layer's forward and backward, the forward again where it is
    recomputed (full recomputation: the whole layer; selective: ``megatron_recompute_kernels``, and 'moe' the MoE
    block)."""
    kinds, (mf, mb) = megatron_step_layer_kernels(spec, w)
    modules = tuple(w.recompute_modules or ()) if w.grad_checkpointing == "selective" else ()
    full = w.grad_checkpointing == "full"
    # eq. K12h outside the layers: the word embedding (a VocabParallelEmbedding, no wgrad GEMM to fuse), a learned
    # position table and the final norm always add into main_grad; the untied output layer's weight only without the
    # fusion (Megatron-LM @d7288711 gpt_model.py lines 244-260: a ColumnParallelLinear whose fused wgrad accumulates
    # into main_grad and sets grad_added_to_main_grad, tensor_parallel/layers.py lines 553-600); a tied one is the
    # embedding's parameter, added once
    fused = w.gradient_accumulation_fusion is not False
    total = float(head + megatron_hook_adds(norms=1, biases=0, others=1 + int(spec.position_embeddings > 0),
                                            weights=0 if spec.tie_word_embeddings else 1, accumulation_fusion=fused))
    for key in zip(moe_kinds(spec), spec.rotary_layers, strict=True):
        fg, fo, bg, bo = kinds[key]
        f = fg + fo + (mf if key[0] else 0.0)
        total += f + bg + bo + (mb if key[0] else 0.0)
        if full:
            total += f
        else:
            total += megatron_recompute_kernels(modules, key[0]) + (mf if key[0] and "moe" in modules else 0.0)
    return round(total)


def kernel_linears(spec: ModelSpec, st: ActivationSetup,
                   routed: bool = True) -> tuple[list[LayerWidths], list[list[Linear]]]:
    """Per decoder layer, its widths (``model_layer_widths``) and the linears the eager kernel counts take (name,
    trained, has bias): the projections and adapters of ``layer_matmul_shapes`` (trained: a full fine-tune's, or an
    adapter's; a fused q/k/v or gate/up linear as one, :func:`_fuse`) and, in an MoE layer, its top-k routed experts' linears (``experts_per_token`` x 3 gated | 2; trained
    in a full fine-tune). The one rule of the training count (estimate/duration.py kernels_per_micro_step) and the
    inference count (:func:`inference_kernels`); layers of one kind (``moe_kinds``) share their objects, which
    formulas/launch_overhead.py counts once. ``routed`` False: an MoE layer's routed experts left out, for a count that
    takes them from its implementation (:func:`moe_block_kernels`, eq. K9). The widths follow each layer's rotary
    (ModelSpec.rotary_layers: a layer without rotary positions launches no rotary kernels), the linears its MoE
    kind's first layer."""
    by_kind: dict[bool, list[Linear]] = {}
    by_width: dict[tuple[bool, bool], LayerWidths] = {}
    kinds = moe_kinds(spec)
    for moe in dict.fromkeys(kinds):
        i = kinds.index(moe)  # the first layer of this kind
        lin = [(name, st.full or "lora_" in name, not counted)
               for name, _, _, counted in _fuse(spec, layer_matmul_shapes(spec, i, st))]
        if moe and spec.moe is not None and routed:
            m = spec.moe
            lin += [("expert", st.full, False)] * (m.experts_per_token * (3 if m.expert_gated else 2))
        by_kind[moe] = lin
    keys = list(zip(kinds, spec.rotary_layers, strict=True))
    for key in dict.fromkeys(keys):
        by_width[key] = model_layer_widths(spec, keys.index(key), st.tp)
    return list(map(by_width.__getitem__, keys)), list(map(by_kind.__getitem__, kinds))


def nf4_weight_shapes(spec: ModelSpec, i: int, st: ActivationSetup, moe: bool) -> list[tuple[int, int]]:
    """(N, K) on this device of each frozen linear of decoder layer ``i`` that a bitsandbytes NF4 base quantizes:
    its projections (``layer_matmul_shapes``, not the LoRA adapters) and, in an MoE layer (``moe``), its top-k
    routed experts' (up/gate: intermediate x hidden; down: hidden x intermediate). The shapes the NF4 kernel rule
    (formulas/launch_overhead.py eq. K5, ``nf4_fused_max_rows``) reads, for the training and the inference count."""
    shapes = [(n_out, n_in) for name, n_in, n_out, _ in _fuse(spec, layer_matmul_shapes(spec, i, st))
              if "lora_" not in name]
    if moe and spec.moe is not None:
        m = spec.moe
        up = [(m.expert_intermediate_size, spec.hidden_size)] * (2 if m.expert_gated else 1)
        shapes += (up + [(spec.hidden_size, m.expert_intermediate_size)]) * m.experts_per_token
    return shapes


@lru_cache(maxsize=256)
def inference_kernels(spec: ModelSpec, tp: int = 1, half: bool = True, per_step: int = GENERATE_STEP_KERNELS,
                      weights_format: str = "", capability: int | None = None, rows: int = 1) -> int:
    """Eq. (K4): kernels one eager inference step of ``spec`` launches on one device of ``tp``: every decoder
    layer's frozen forward (its linears from ``layer_matmul_shapes``, an MoE layer's top-k routed experts as linears:
    :func:`kernel_linears`) and cache update, the embedding, positions, rotary tables, final norm and head, and the
    decoding loop's own ops, ``per_step``: ``generate()``'s GENERATE_STEP_KERNELS (a decode step), the measure
    worker's WORKER_STEP_KERNELS (its forward + argmax loop), 0 (a bare forward, as a prefill forward without the
    loop's ops). The count is the same on each of ``tp`` devices (the widths shrink, not the ops); the collectives
    of a tensor-parallel forward are not in it. A bitsandbytes NF4 model (``weights_format`` 'nf4' | 'nf4-dq')
    adds each frozen linear's forward dequantization kernels (eq. K5, ``nf4_linear_kernels``) at ``rows`` tokens a
    forward (a decode step: its sequences; a prefill: its prompt tokens), for the serving release
    BNB_SERVING_RELEASE on a GPU of ``capability`` (``nf4_fused_max_rows``: the fused kernel, 0 extra, up to its
    rows). Memoized (a spec is immutable)."""
    st = ActivationSetup(batch=1, seq=1, full=False, tp=tp)
    widths, linears = kernel_linears(spec, st)
    # a decode step's attention output of one token per sequence is already token-major: no copy (Phi-3's
    # generate() step traced without it); a prefill's would copy, one kernel per layer not counted here
    code = dataclasses.replace(layer_code(spec), output_copy=False)
    head = forward_head_kernels(spec.norm_kind == "layernorm" or code.norm_fused, spec.rotary, half)
    total = inference_step_kernels(widths, linears, head, per_step=per_step, half=half, code=code)
    if weights_format in ("nf4", "nf4-dq"):
        kinds = moe_kinds(spec)
        per_kind = {moe: sum(nf4_linear_kernels(weights_format == "nf4-dq", rows,
                                                nf4_fused_max_rows(BNB_SERVING_RELEASE, capability, n, k))[0]
                             for n, k in nf4_weight_shapes(spec, kinds.index(moe), st, moe))
                    for moe in dict.fromkeys(kinds)}
        total += sum(map(per_kind.__getitem__, kinds))
    return total
