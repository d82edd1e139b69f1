"""Per-device model states: weights, adapters, master copy, gradients, optimizer states, autocast copies.

Routes the workload's layout (TP, PP stage, EP, ZeRO/FSDP shards, offload) onto the formulas of
``formulas/training_states.py``, ``formulas/parallelism.py`` and ``formulas/weight_formats.py``.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from itertools import repeat
from operator import add, mul
from typing import Any

from ...formulas.dtypes import DTYPE_BYTES
from ...formulas.float8_training import float8_autocast_copied, float8_weight_elements, fp8_param_bytes
from ...formulas.fsdp_flat_param import flat_grad_elements, no_sync_grad_bytes
from ...formulas.lora import AdaptedModule, LoraParams, adapted_layout
from ...formulas.nf4_quantization import quantizes_lm_head
from ...formulas.parallelism import pipeline_stage_layers, shard
from ...formulas.tensor_parallel import expert_tp_ways, replicated_matrix, shard_weights, training_tp_framework
from ...formulas.tensors import RECURRENT_LINEARS, Tensor, at_layer, expand, layer_groups, layer_keys, model_tensors
from ...formulas.training_states import optimizer_state_bytes, optimizer_state_bytes_counted, paged_state_bytes_counted
from ...formulas.weight_formats import GROUP_SIZE_DEFAULT, bnb4_matrix_bytes, weight_bytes
from ...specs import ModelSpec
from ...specs.training import MODULES_TO_SAVE
from .setup import TrainingContext, expert_group, expert_tp, model_state_ways

AUTOCAST_COMPONENTS = {"attention", "mlp", "router", "shared_experts", "lm_head"}  # F.linear under autocast


def recurrent_copied(role: str, ndim: int, torch_conv: bool) -> bool:
    """Whether autocast keeps a 16-bit copy of the recurrent mixer's (Mamba-1/-2, Gated DeltaNet) weight ``role`` of
    ``ndim`` dimensions; ``torch_conv``: the causal conv runs as torch's ``nn.Conv1d`` (Mamba's torch path, Gated
    DeltaNet's torch fallback), not causal-conv1d's ``CausalConv1dFn``.

    Every linear's weight (formulas/tensors.py ``RECURRENT_LINEARS``, 2-D): it runs under autocast (``nn.Linear``),
    or, on the kernel path, the Function casts it itself and saves that copy (mamba_ssm 2.3.2.post1
    ops/triton/ssd_combined.py lines 876-879 and 883: MambaSplitConv1dScanCombinedFn's out_proj weight under
    ``torch.is_autocast_enabled()``). The conv weight [c, 1, k] only where ``F.conv1d`` casts it; causal-conv1d takes
    it as it is. Not Mamba-1's A_log [d, n] (``-exp(A_log.float())``: no cast). Measured per layer on the torch path
    (tests/training/test_mamba_saved_tensors.py) and on the kernels' stand-ins
    (tests/training/test_mamba_kernel_saved_tensors.py)."""
    return (role in RECURRENT_LINEARS and ndim == 2) or (role == "ssm_conv1d" and torch_conv)


def torch_param_shapes(spec: ModelSpec, tensors: list[Tensor] | None = None) -> list[tuple[int, ...]]:
    """Parameter tensors as transformers 5 defines them: routed experts are fused 3-D parameters
    (``gate_up_proj`` [E, 2I, H] and ``down_proj`` [E, H, I], plus their biases), everything else one tensor each.
    Used for per-tensor optimizer state (Adam's ``step``, bitsandbytes' 8-bit threshold)."""
    out: list[tuple[int, ...]] = []
    fused: dict[tuple[int, str], list[Tensor]] = {}
    for t in (tensors if tensors is not None else list(model_tensors(spec))):
        if t.component == "experts":
            kind = "down" if "down" in t.role else "gate_up"
            kind += ".bias" if t.role.endswith(".bias") else ""
            fused.setdefault((t.layer, kind), []).append(t)
        else:
            out.append(t.shape)
    for group in fused.values():
        e = group[0].count
        rows = sum(t.shape[0] for t in group)
        out.append((e, rows, *group[0].shape[1:]))
    return out


@dataclass
class StageStates:
    """Model states of one device (one pipeline stage) [bytes], and the per-layer parts the timeline needs."""

    stage: int
    layers: Sequence[int]  # ascending: a range, or a tuple under several stages a rank (interleaved)
    weights: int = 0
    adapter_weights: int = 0
    master: int = 0
    grads: int = 0
    main_grads: int = 0
    no_sync_grads: int = 0  # FSDP1 under no_sync: the unsharded flat gradients accumulated (eq. N1), else 0
    optimizer: int = 0
    paged_optimizer: int = 0
    trained_elements: int = 0  # on this device, before ZeRO sharding
    save_elements: int = 0  # of them, PEFT modules_to_save copies (weights, grads and states in save_bytes)
    save_bytes: int = 0
    # the routed experts' share of trained_elements under EP (0 without): sharded over the expert data-parallel
    # ranks (formulas/parallelism.py expert_shard_group), the rest over the dense ones
    expert_elements: int = 0
    fp8_param_elements: int = 0  # te linear weight elements held as float8 parameters (fp8_param_gather, eq. T3)
    # gradient elements the data-parallel reduction takes, unsharded: the trained ones; FSDP1 with the adapters in
    # their layer's unit, every element of a unit with a trained one (frozen included; formulas/fsdp_flat_param.py)
    reduced_elements: int = 0
    largest_trained: int = 0
    layer_grads: dict[int, int] = field(default_factory=dict)  # unsharded gradient bytes per layer
    head_grads: int = 0  # lm_head, final norm (and a tied embedding): produced first in the backward
    layer_weights: dict[int, int] = field(default_factory=dict)  # bytes per gather unit (layers; -1 embedding,
    # -2 lm_head + final norm) for ZeRO-3 gathers
    # unsharded adapter parameters (LoRA A/B, DoRA magnitudes; PEFT modules_to_save copies) per gather unit, keyed as
    # ``layer_weights`` (decoder layers; -1 the embedding's, -2 the lm_head's and other non-layer modules'), in their
    # own dtypes [bytes] and [elements]: members of their module's FSDP2 unit (fully_shard of layers.i takes every
    # parameter under it, torchtune _distributed.py @30b8519 lines 618-623; estimate/training/gather_units.py)
    layer_adapters: dict[int, int] = field(default_factory=dict)
    layer_adapter_elements: dict[int, int] = field(default_factory=dict)
    layer_copy_elements: dict[int, int] = field(default_factory=dict)  # autocast-copied weight elements
    lm_head_copy_elements: int = 0
    has_embedding: bool = False
    has_head: bool = False
    host: dict[str, int] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)


def stage_states(ctx: TrainingContext, stage: int) -> StageStates:
    """Model states on a device of pipeline stage ``stage`` (see module docstring)."""
    spec, w, rec = ctx.spec, ctx.w, ctx.recipe
    stages = pipeline_stage_layers(spec.num_layers, w.pp, w.pipeline_split, w.virtual_stages)
    last = len(stages) - 1

    st = StageStates(stage=stage, layers=stages[stage], has_embedding=stage == 0, has_head=stage == last)
    tp, ep = w.tp, w.ep
    tied_copy = spec.tie_word_embeddings and w.pp > 1 and stage == last
    # the framework's TP plan: the matrices it keeps whole on every TP rank (formulas/tensor_parallel.py
    # REPLICATED_MATRICES: Megatron-Core's and torchtitan's MLA down-projections and router)
    plan = training_tp_framework(w.precision, w.framework) if tp > 1 else None

    # ---- base weights (format-aware, TP-sharded by weight_formats/tensor_parallel) ----
    wb = weight_bytes(spec, ctx.base_format, GROUP_SIZE_DEFAULT, ctx.base_bytes, ctx.fused_experts)
    wb = shard_weights(spec, wb, tp, ctx.base_bytes, engine=plan, fused_experts=ctx.fused_experts) if tp > 1 else wb
    expert_elems = _expert_elements(spec)
    total_expert = sum(expert_elems.values())
    expert_bytes = wb.by_component.get("experts", 0)
    layer_total = expert_weights = 0  # expert_weights: this stage's routed-expert bytes (after EP), EP > 1 only
    # the experts' extra TP ways a gather unit does not have: torchtitan keeps each expert whole on every TP rank
    # under EP (formulas/tensor_parallel.py expert_tp_ways), so its FSDP unit gathers experts / ep, not / (tp x ep);
    # the resident share is the same (E / (tp x ep) over dp x cp / ep = E / ep over efsdp = dp x cp x tp / ep)
    unit_tp = tp // expert_tp_ways(plan, tp, ep) if plan else 1
    # Megatron-Core's stated expert TP (etp): each expert split e_tp ways, not tp (formulas/tensor_parallel.py
    # resident_expert_tp); the experts then shard apart from the dense tensors even without EP
    e_tp = expert_tp(w)
    apart = ep > 1 or e_tp != tp
    if apart and total_expert or not wb.layer_bytes:
        for i in stages[stage]:
            b = wb.layer_bytes[i] if wb.layer_bytes else 0
            if apart and total_expert:
                mine_tp = expert_bytes * expert_elems.get(i, 0) / total_expert  # split tp ways by shard_weights
                mine_e = mine_tp * tp / e_tp
                b += int(mine_e - mine_tp) - int(mine_e * (1 - 1 / ep))
                expert_weights += int(mine_e / ep)
                st.layer_weights[i] = b + int(mine_e / ep) * (unit_tp - 1)
            else:
                st.layer_weights[i] = b
            layer_total += b
    else:  # each layer's bytes as the weight table has them
        r = stages[stage]
        mine = wb.layer_bytes[r.start:r.stop] if isinstance(r, range) else [wb.layer_bytes[i] for i in r]
        st.layer_weights.update(zip(r, mine, strict=True))
        layer_total = sum(mine)
    non_layer = wb.total - sum(wb.layer_bytes)
    emb = wb.by_component.get("embedding", 0) + wb.by_component.get("vision", 0) \
        + wb.by_component.get("per_layer_embedding", 0)
    head_part = non_layer - emb
    if (w.method == "qlora" and ctx.base_format != "gptq-int4" and quantizes_lm_head(w.nf4_quantizer)
            and not spec.tie_word_embeddings and wb.by_component.get("lm_head")):
        # Lightning Fabric quantizes the lm_head too (formulas/nf4_quantization.py): its bf16 bytes become 4-bit
        vh = math.ceil(spec.vocab_size * spec.hidden_size / tp)
        head_part += bnb4_matrix_bytes(vh, ctx.base_format) - vh * ctx.base_bytes
    weights = layer_total + (emb if stage == 0 else 0) + (head_part if stage == last else 0)
    if tied_copy:
        weights += wb.by_component.get("embedding", 0)
        st.notes.append("tied embeddings: the last pipeline stage holds a copy of the embedding for lm_head")

    # ---- trained tensors ----
    base = _trained_base(spec, w.pp, stage, tp, ep, w.method == "full", w.pipeline_split, w.virtual_stages, plan,
                         e_tp)
    per_layer_elems: dict[int, int] = dict(base.per_layer_elems)
    head_elems, embed_elems = base.head_elems, base.embed_elems
    st.largest_trained = max(st.largest_trained, base.largest)
    adapter_expert_elems = 0  # this rank's routed-expert adapter elements under EP (in per_layer_elems too)
    adapter_expert_counts: Counter[tuple[int, ...]] = Counter()
    if ctx.lora is not None:
        # the adapters of this stage, modules alike counted once (_stage_adapters); integer sums: exact
        alike = _stage_adapters(spec, w.targets, w.pp, stage, w.pipeline_split, w.virtual_stages)
        n_alike: list[int] = []  # elements of one module of each kind
        adapter_counts: Counter[tuple[int, ...]] = Counter()
        for m, k in alike.modules:
            m_shapes = _rank_adapter_shapes(ctx.lora, m, ep)  # the same tensors for each of the m.count copies
            sizes = [math.prod(shp) for shp in m_shapes]
            n_alike.append(sum(sizes) * m.count)
            for shp in m_shapes:
                adapter_counts[shp] += m.count * k
            if ep > 1 and m.experts > 1:  # routed experts' adapters: with their experts (_rank_adapter_shapes)
                adapter_expert_elems += sum(sizes) * m.count * k
                for shp in m_shapes:
                    adapter_expert_counts[shp] += m.count * k
            if max(sizes) > st.largest_trained:
                st.largest_trained = max(sizes)
        for layers, parts in alike.layers:  # (the groups partition the layers: each layer once, in order, in C)
            n_layer = sum(n_alike[g] * k for g, k in parts)
            for d, add_n in ((per_layer_elems, n_layer), (st.layer_adapters, n_layer * ctx.adapter_bytes),
                             (st.layer_adapter_elements, n_layer)):
                d.update(zip(layers, map(add, map(d.get, layers, repeat(0)), repeat(add_n)), strict=True))
        for key, mods in ((-1, alike.embedding), (-2, alike.head)):
            n_outside = sum(n_alike[g] * k for g, k in mods)
            if n_outside:
                st.layer_adapters[key] = n_outside * ctx.adapter_bytes
                st.layer_adapter_elements[key] = n_outside
        embed_elems += st.layer_adapter_elements.get(-1, 0)
        head_elems += st.layer_adapter_elements.get(-2, 0)
    # PEFT modules_to_save: a trainable deep copy of each module in the base dtype beside the frozen original
    # (peft/utils/other.py ModulesToSaveWrapper); its gradients and optimizer states take that dtype too
    save_shapes: list[tuple[int, ...]] = []
    save_elems = save_head = 0
    by_role = _embedding_and_head(spec)
    for name in w.modules_to_save:
        role = MODULES_TO_SAVE[name]
        t_save = by_role.get(role) or by_role["token_embd"]  # tied: lm_head is the embedding matrix
        if (0 if role == "token_embd" else last) != stage:
            continue
        n = math.ceil(t_save.numel / tp)
        save_shapes.append(t_save.shape if tp == 1 else (n,))
        save_elems += n
        if role == "token_embd":
            embed_elems += n
        else:
            head_elems += n
            save_head += n
        if w.adapters:  # the copy is a parameter of the embedding's (-1) or lm_head's (-2) unit, in the base dtype
            key = -1 if role == "token_embd" else -2
            st.layer_adapters[key] = st.layer_adapters.get(key, 0) + n * _save_bytes(ctx)
            st.layer_adapter_elements[key] = st.layer_adapter_elements.get(key, 0) + n
        st.largest_trained = max(st.largest_trained, n)
    save_b = _save_bytes(ctx)
    trained_elems = sum(per_layer_elems.values()) + head_elems + embed_elems
    st.trained_elements = trained_elems
    st.save_elements, st.save_bytes = save_elems, save_b
    grad_b = ctx.adapter_bytes if w.adapters else rec.grad_bytes

    # ---- ZeRO / FSDP shards ----
    w_shard, g_shard, o_shard = model_state_ways(w, w.shard_group)
    # the routed experts' weights, gradients and states: over the expert data-parallel ranks only (shard_group / ep,
    # formulas/parallelism.py expert_shard_group: Megatron's expert distributed optimizer, torchtitan's efsdp mesh,
    # DeepSpeed-MoE's expert data-parallel group); the same ways as the dense ones without EP
    we_shard, ge_shard, oe_shard = model_state_ways(w, expert_group(w))
    # (without EP or a stated etp every tensor shards one way: kept as one sum; expert adapters are apart under EP)
    n_exp = base.expert_elems + adapter_expert_elems if apart else 0
    n_dense = trained_elems - n_exp
    st.expert_elements = n_exp

    def split(dense_b: int, expert_b: int, ways: int, e_ways: int) -> int:
        return shard(dense_b, ways) + shard(expert_b, e_ways) if expert_b else shard(dense_b, ways)

    if w.adapters:
        st.adapter_weights = split((trained_elems - save_elems - adapter_expert_elems) * ctx.adapter_bytes
                                   + save_elems * save_b, adapter_expert_elems * ctx.adapter_bytes, w_shard, we_shard)
    st.weights = split(weights - expert_weights, expert_weights, w_shard, we_shard)
    if w.fp8_params:  # the te linears' weights are float8 parameters (formulas/float8_training.py eq. T3): each
        # element fp8_param_bytes in place of the base_bytes weight (the distributed optimizer never shards them:
        # w_shard 1); the routed experts stay counted in the base dtype, as the casts' time counts them
        for i in stages[stage]:
            n_f8 = float8_weight_elements(spec, tp, spec.moe is not None and bool(spec.moe_layers[i]))
            cut = n_f8 * ctx.base_bytes - fp8_param_bytes(n_f8, w.gpu_capability)
            st.layer_weights[i] -= cut
            st.weights -= cut
            st.fp8_param_elements += n_f8
    st.master = split(n_dense * 4, n_exp * 4, o_shard, oe_shard) if rec.master_bytes else 0
    st.grads = split((n_dense - save_elems) * grad_b + save_elems * save_b, n_exp * grad_b, g_shard, ge_shard)
    st.main_grads = split(n_dense * 4, n_exp * 4, o_shard, oe_shard) if rec.main_grad_bytes else 0
    counts = Counter(dict(base.shape_counts))
    if ctx.lora is not None:
        counts.update(adapter_counts)
    e_counts = Counter(dict(base.expert_shape_counts) if apart else {})
    e_counts.update(adapter_expert_counts)
    counts.subtract(e_counts)  # the dense tensors' shapes (a shape shared with an expert tensor keeps its others)
    counts = +counts
    states = optimizer_state_bytes_counted(counts, ctx.optimizer.name, ctx.state_bytes)
    if save_shapes:  # torch optimizers keep states in the dtype of the parameter (torch/optim/adamw.py zeros_like)
        states += optimizer_state_bytes(save_shapes, ctx.optimizer.name, save_b)
    e_states = optimizer_state_bytes_counted(e_counts, ctx.optimizer.name, ctx.state_bytes) if e_counts else 0
    states = split(states, e_states, o_shard, oe_shard)
    if ctx.optimizer.paged:  # the large tensors' moments in unified memory; absmax, maps, small tensors' on device
        paged = paged_state_bytes_counted(counts, ctx.optimizer.name)
        if save_shapes:
            paged += paged_state_bytes_counted(Counter(tuple(sp) for sp in save_shapes), ctx.optimizer.name)
        e_paged = paged_state_bytes_counted(e_counts, ctx.optimizer.name) if e_counts else 0
        st.paged_optimizer = min(states, split(paged, e_paged, o_shard, oe_shard))
        st.optimizer = states - st.paged_optimizer
    else:
        st.optimizer = states
    st.layer_grads = dict(zip(per_layer_elems, map(mul, per_layer_elems.values(), repeat(grad_b)), strict=True))
    st.head_grads = (head_elems - save_head) * grad_b + save_head * save_b
    if w.fsdp is not None and w.fsdp_version == 1 and w.adapters and w.fsdp1_lora_wrap == "with-layers":
        # FSDP1, adapters in their layer's unit: a unit's flat parameter requires grad if any of its parameters does,
        # and its gradient spans every element, frozen base included (formulas/fsdp_flat_param.py; torch
        # _flat_param.py lines 804-836). Wrapped apart (eq. W1), the frozen units get none: the adapters' only
        elt = max(1, ctx.base_bytes)
        # (a unit with no trained parameter gets none: its flat parameter does not require grad)
        units = {i: st.layer_weights[i] // elt + per_layer_elems[i] for i in stages[stage] if per_layer_elems.get(i)}
        st.layer_grads = {i: n * grad_b for i, n in units.items()}
        st.grads = sum(flat_grad_elements(n, g_shard) for n in units.values()) * grad_b
        unit_elems = list(units.values())
        if head_elems + embed_elems:  # the root unit: embedding, final norm, lm_head
            rest = (weights - layer_total) // elt + head_elems + embed_elems
            st.grads += flat_grad_elements(rest, g_shard) * grad_b
            unit_elems.append(rest)
    else:
        unit_elems = [trained_elems]  # every trained element's gradient, unsharded
    st.reduced_elements = sum(unit_elems)
    if w.fsdp is not None and w.fsdp_version == 1 and w.grad_sync == "optimizer-step" and w.grad_accumulation > 1:
        # FSDP1 no_sync: each unit's whole flat gradient accumulates unsharded until the sync micro-batch (eq. N1)
        # in the unsharded flat parameter's dtype: param_dtype under MixedPrecision (no cast before the hook returns)
        st.no_sync_grads = no_sync_grad_bytes(unit_elems, rec.compute_bytes if w.precision == "fsdp-bf16-mixed"
                                              else grad_b)

    # ---- autocast half copies of fp32 linear weights ----
    if ctx.weight_copy_bytes:
        torch_conv = ctx.act.mamba_path == "torch" if spec.recurrent is not None and spec.recurrent.kind != \
            "gated_deltanet" else ctx.act.recurrent_kernel == "torch"
        head_copy, layer_copy = _autocast_copies(spec, w.pp, stage, tp, w.pipeline_split, w.virtual_stages,
                                                 torch_conv, w.float8, plan)
        st.lm_head_copy_elements += head_copy
        if w.method != "qlora":  # bitsandbytes' 4-bit linears dequantize their own weight: autocast copies none
            st.layer_copy_elements.update(layer_copy)  # (the fp32 LoRA adapters' copies, rank-sized: not counted)
        if spec.tie_word_embeddings and stage == last:
            st.lm_head_copy_elements += math.ceil(spec.vocab_size * spec.hidden_size / tp)

    # ---- offload ----
    if w.offload in ("optimizer", "params"):
        st.host["optimizer_states"] = st.optimizer + st.paged_optimizer
        st.host["master_weights"] = st.master
        st.host["gradients"] = st.grads + st.main_grads
        if w.zero:  # DeepSpeed: the optimizer steps on an fp32 gradient of its fp32 partition, on the host
            st.host["gradients"] = (st.grads if w.zero == 3 else 0) + split(n_dense * 4, n_exp * 4, o_shard, oe_shard)
        # the gradient shards live on the host too. DeepSpeed 0.19.8 (PyPI sdist): ZeRO-3 keeps two host buffers,
        # grad_partitions_flat_buffer in the gradient-accumulation dtype (the model dtype unless grad_accum_dtype
        # says fp32; deepspeed/runtime/zero/stage3.py lines 791-795, device = cpu with offload_optimizer, line 333)
        # and each subgroup's fp32 gradient, ``torch.zeros(num_elements, dtype=gradient_dtype)`` with gradient_dtype
        # the fp32 partition's (lines 1305, 1337-1342); ZeRO-1/2 only the fp32 one (stage_1_and_2.py lines 937-941,
        # ``single_grad_partition`` in the fp32 partition's dtype). Its own estimator counts 4 B of the 18 B/param
        # (stage3.py estimate_zero3_model_states_mem_needs line 4034). FSDP CPUOffload(offload_params=True)
        # "offloads gradients to CPU as well" (torch.distributed.fsdp CPUOffload docs; FSDP2 CPUOffloadPolicy, which
        # torchtune's fsdp_cpu_offload uses: recipes/full_finetune_distributed.py @ bd2a0fc lines 145, 689 ->
        # torchtune/training/_distributed.py line 681 "offload parameters, gradients, and optimizer states to CPU").
        # Only the unsharded gradients of the unit being reduced pass the device.
        st.optimizer = st.paged_optimizer = st.master = st.main_grads = st.grads = 0
    if w.offload == "params":
        st.host["weights"] = st.weights + st.adapter_weights
        st.weights = st.adapter_weights = 0
    # units a ZeRO-3/FSDP rank gathers whole besides the layers: the embedding (first stage) and lm_head (last)
    if stage == 0 and emb:
        st.layer_weights[-1] = emb
    if stage == last and head_part:
        st.layer_weights[-2] = head_part + (wb.by_component.get("embedding", 0) if tied_copy else 0)
    return st


def _rank_adapter_shapes(lora: LoraParams, m: AdaptedModule, ep: int) -> list[tuple[int, ...]]:
    """The adapter tensors one rank holds for module ``m`` under expert parallelism ``ep``: a routed-expert
    adapter (``m.experts`` > 1, formulas/lora.py eq. 2) lives with its experts, so a rank holding E / ep of them holds
    their adapters only: PEFT's ``lora.ParamWrapper`` sizes lora_A [r' E, in] / lora_B [out, r' E] by the expert
    dimension of the parameter it wraps, which EP shards (transformers' grouped-experts EP plan splits dim 0), and
    Megatron-Bridge adds an expert linear's adapter on the rank holding it, marked ``is_expert`` so its gradients
    reduce over the expert data-parallel group (NVIDIA-NeMo/Megatron-Bridge @2afd2d34
    src/megatron/bridge/peft/lora.py ``LoRA.transform``: ``is_expert_linear`` -> ``ParallelLinearAdapter(is_expert=
    ...)``). Every other module's adapter as ``LoraParams.module_shapes``."""
    if ep <= 1 or m.experts <= 1:
        return lora.module_shapes(m)
    r = lora.rank * m.rank_mult * (m.experts // ep)  # (setup refuses an ep that does not divide the experts)
    return [(r, m.in_features), (m.out_features, r)]


def _save_bytes(ctx: TrainingContext) -> int:
    """Bytes per element of a PEFT modules_to_save copy: the base dtype's (bf16 under a 4-bit base)."""
    return ctx.base_bytes if ctx.base_format not in ("nf4", "nf4-dq") else DTYPE_BYTES["bf16"]


def _fused_order(tensors: list[Tensor]) -> list[Tensor]:
    """The tensor behind each entry of :func:`torch_param_shapes` (same order), for layer/component lookups."""
    out: list[Tensor] = []
    fused: dict[tuple[int, str], Tensor] = {}
    for t in tensors:
        if t.component == "experts":
            kind = ("down" if "down" in t.role else "gate_up") + (".bias" if t.role.endswith(".bias") else "")
            fused.setdefault((t.layer, kind), t)
        else:
            out.append(t)
    out.extend(fused.values())
    return out


# Per model and layout (tensor / pipeline / expert parallel degrees), the parts of a stage's states that depend on
# nothing else: computed once per (spec, layout) and reused by every estimate with other settings (micro-batch,
# sequence, optimizer, sharding, recipe). ModelSpec is identity-hashed and frozen; the memos are bounded and
# cleared with the others (estimate/caches.py).


@lru_cache(maxsize=64)
def _layer_stages(num_layers: int, pp: int, split: str = "even", virtual: int = 1) -> dict[int, int]:
    """The pipeline rank of every decoder layer (read only: shared by the callers)."""
    return {i: k for k, r in enumerate(pipeline_stage_layers(num_layers, pp, split, virtual)) for i in r}


def _in_stage(t: Tensor, stage: int, last: int, layer_stage: dict[int, int]) -> bool:
    """Whether tensor ``t`` lives on pipeline stage ``stage``: its layer's stage; embeddings on the first stage,
    the final norm and lm_head on the last."""
    if t.layer >= 0 and t.component != "vision":
        return layer_stage.get(t.layer) == stage
    return stage == (last if t.role in ("output", "output_norm") or t.role.startswith("output_norm") else 0)


def _layers_alike(spec: ModelSpec) -> tuple[tuple[Tensor, ...], tuple[Tensor, ...], dict[Any, list[int]]]:
    """(the tensors before the decoder layers and after them, the decoder layers by kind: ModelSpec.layer_key ->
    their indexes in order): a layer's tensors depend on it only through its kind and its index
    (formulas/tensors.py layer_groups), so a sum over layers alike is one layer's times their number."""
    head, groups, tail = layer_groups(spec)
    return head, tuple(expand(tail)), {kind: list(layers) for kind, _, layers in groups}


def _layer_tensors(spec: ModelSpec, layer: int) -> tuple[Tensor, ...]:
    """The tensors of decoder layer ``layer`` (its kind's, re-stamped: formulas/tensors.py at_layer)."""
    kind = layer_keys(spec)[layer]
    return at_layer(next(g for g in layer_groups(spec)[1] if g[0] == kind), layer)


@lru_cache(maxsize=256)
def _expert_elements(spec: ModelSpec) -> dict[int, int]:
    """Routed-expert elements per decoder layer (read only)."""
    out: dict[int, int] = {}
    for layers in _layers_alike(spec)[2].values():
        n = sum(t.numel for t in _layer_tensors(spec, layers[0]) if t.component == "experts")
        if n:
            out.update(dict.fromkeys(layers, n))
    return dict(sorted(out.items()))


@lru_cache(maxsize=256)
def _embedding_and_head(spec: ModelSpec) -> dict[str, Tensor]:
    """The token embedding and lm_head tensors by role (read only; neither is a decoder layer's)."""
    before, after, _ = _layers_alike(spec)
    return {t.role: t for t in (*before, *after) if t.role in ("token_embd", "output")}


@dataclass(frozen=True)
class StageAdapters:
    """The adapted modules (formulas/lora.py ``adapted_modules``) on one pipeline stage, modules alike (features,
    count, experts, rank multiple: their tensors have the same shapes at any rank) listed once: ``modules`` holds one
    of each kind and how many of that kind the stage has; ``layers`` groups the decoder layers that hold the same
    modules ((module kind, how many in each such layer), ...); ``embedding`` and ``head`` the token embedding's and
    the lm_head's (or other non-layer modules')."""

    modules: tuple[tuple[AdaptedModule, int], ...]
    layers: tuple[tuple[tuple[int, ...], tuple[tuple[int, int], ...]], ...]
    embedding: tuple[tuple[int, int], ...]
    head: tuple[tuple[int, int], ...]


@lru_cache(maxsize=256, typed=True)
def _stage_adapters(spec: ModelSpec, targets: tuple[str, ...] | str, pp: int, stage: int, split: str = "even",
                    virtual: int = 1) -> StageAdapters:
    """:class:`StageAdapters` of pipeline stage ``stage`` of ``pp`` for LoRA on ``targets`` (independent of the
    rank: per model and layout). The modules are taken in :func:`~llmsizer.formulas.lora.adapted_modules` order
    from its grouped form (``adapted_layout``): a tuple of modules the layers alike share is sorted into kinds once."""
    last = len(pipeline_stage_layers(spec.num_layers, pp, split, virtual)) - 1
    layer_stage = _layer_stages(spec.num_layers, pp, split, virtual)
    lay = adapted_layout(spec, targets)
    kinds: dict[tuple[int, int, int, int, int], int] = {}  # signature -> index into ``modules``
    modules: list[list[Any]] = []
    per_layer: dict[int, list[int]] = {}  # the module kinds of each decoder layer, in order
    embedding: list[int] = []
    head: list[int] = []
    kinds_of: dict[int, list[int]] = {}  # id of a shared tuple of modules -> the kind of each (count >= 1) module
    again: Counter[int] = Counter()  # id of a shared tuple -> the layers holding it after the first

    def kind(m: AdaptedModule, layer: int) -> int:
        sig = (m.in_features, m.out_features, m.experts, m.rank_mult, m.count)
        g = kinds.get(sig)
        if g is None:
            g = kinds[sig] = len(modules)
            modules.append([m if m.layer == layer else m.at(layer), 0])
        modules[g][1] += 1
        return g

    def outside(mods: tuple[AdaptedModule, ...]) -> None:  # the modules before / after the decoder layers
        for m in mods:
            if m.count < 1:
                continue
            # a vision tower's module (all-linear) carries its block's index, not a decoder layer's: it is held
            # beside the head, on the first stage, which the tower feeds
            tower = m.role.startswith("v_")
            if pp > 1:
                m_stage = 0 if (m.layer < 0 or tower) and m.role != "output" else (
                    last if m.layer < 0 else layer_stage[m.layer])
                if m_stage != stage:
                    continue
            elif stage != 0:
                continue
            g = kind(m, m.layer)
            if m.layer >= 0 and not tower:
                per_layer.setdefault(m.layer, []).append(g)
            elif m.role == "token_embd":
                embedding.append(g)
            else:
                head.append(g)

    def in_layers(part: tuple[tuple[AdaptedModule, ...], ...]) -> None:  # each decoder layer's, layer by layer
        for i, mods in enumerate(part):
            if not mods or (layer_stage[i] != stage if pp > 1 else stage != 0):
                continue
            gs = kinds_of.get(id(mods))
            if gs is None:
                gs = kinds_of[id(mods)] = [kind(m, i) for m in mods if m.count >= 1]
            else:
                again[id(mods)] += 1
            if gs:
                per_layer.setdefault(i, []).extend(gs)

    in_layers(lay.experts)
    outside(lay.head)
    in_layers(lay.layers)
    outside(lay.tail)
    for key, n in again.items():  # each module kind of a shared tuple once per layer holding it (integers)
        for g in kinds_of[key]:
            modules[g][1] += n
    layers: dict[tuple[int, ...], list[int]] = {}
    for i, gs in per_layer.items():
        layers.setdefault(tuple(gs), []).append(i)
    return StageAdapters(tuple((m, k) for m, k in modules),
                         tuple((tuple(v), tuple(Counter(k).items())) for k, v in layers.items()),
                         tuple(Counter(embedding).items()), tuple(Counter(head).items()))


@dataclass(frozen=True)
class TrainedBase:
    """The base-model tensors a device of one pipeline stage trains in full fine-tuning (none otherwise): their
    parameter shapes as the optimizer sees them (after TP / EP splitting), elements per decoder layer, in the head
    (lm_head, final norm) and in the embeddings, and the largest tensor."""

    shape_counts: tuple[tuple[tuple[int, ...], int], ...]  # (shape, tensors of that shape), first-seen order
    per_layer_elems: tuple[tuple[int, int], ...]
    head_elems: int
    embed_elems: int
    largest: int
    # the routed experts' share of shape_counts and of the elements (each split over tp x ep): sharded over the
    # expert data-parallel ranks (formulas/parallelism.py expert_shard_group), not the dense ones
    expert_shape_counts: tuple[tuple[tuple[int, ...], int], ...] = ()
    expert_elems: int = 0


@lru_cache(maxsize=256)
def _trained_base(spec: ModelSpec, pp: int, stage: int, tp: int, ep: int, full: bool, split: str = "even",
                  virtual: int = 1, plan: str | None = None, etp: int = 0) -> TrainedBase:
    """:class:`TrainedBase` of pipeline stage ``stage`` of ``pp``: each kind of decoder layer's tensors counted once
    (``_layers_alike``; integer sums and a max, so the same in any grouping), the tensors outside the layers one by
    one. ``plan``: the training framework whose TP plan keeps some matrices whole on every rank
    (formulas/tensor_parallel.py ``replicated_matrix``). ``etp``: the ways each routed expert is split (0: tp)."""
    if not full:
        return TrainedBase((), (), 0, 0, 0)
    stages = pipeline_stage_layers(spec.num_layers, pp, split, virtual)
    last = len(stages) - 1
    layer_stage = _layer_stages(spec.num_layers, pp, split, virtual)
    tied_copy = spec.tie_word_embeddings and pp > 1 and stage == last
    before, after, kinds = _layers_alike(spec)
    shapes: Counter[tuple[int, ...]] = Counter()
    expert_shapes: Counter[tuple[int, ...]] = Counter()
    per_layer_elems: dict[int, int] = {}
    head_elems = embed_elems = largest = expert_elems = 0

    def counted(trained: list[Tensor]) -> list[tuple[tuple[int, ...], int, Tensor]]:
        """(the shape the optimizer sees after TP / EP splitting, its elements, the tensor) of each parameter."""
        out = []
        for shp, t in zip(torch_param_shapes(spec, trained), _fused_order(trained), strict=False):
            n = math.prod(shp)
            if t[1] == "experts":  # Tensor is a tuple: [1] is its component
                n = math.ceil(n if len(shp) == 1 else math.ceil(n / (etp or tp)) / ep)
                out.append((shp if ((etp or tp) == 1 and ep == 1) else (n,), n, t))
                continue
            n = n if len(shp) == 1 or replicated_matrix(plan, t, spec.model_type) else math.ceil(n / tp)
            out.append((shp if (tp == 1 and ep == 1) else (n,), n, t))
        return out

    for layers in kinds.values():
        mine = [i for i in layers if layer_stage.get(i) == stage] if pp > 1 else layers
        if not mine:
            continue
        params = counted(list(_layer_tensors(spec, mine[0])))
        for shp, n, t in params:
            shapes[shp] += len(mine)
            if t[1] == "experts":
                expert_shapes[shp] += len(mine)
                expert_elems += n * len(mine)
        n_layer = sum(n for _, n, _ in params)
        per_layer_elems.update(dict.fromkeys(mine, n_layer))
        largest = max(largest, *(n for _, n, _ in params)) if params else largest
    outside = [t for t in (*before, *after) if pp == 1 or _in_stage(t, stage, last, layer_stage)
               or (tied_copy and t.role == "token_embd")]
    for shp, n, t in counted(outside):
        role, comp, _, _, layer, _ = t  # Tensor is a tuple: unpacking is the fast path
        shapes[shp] += 1
        if comp == "experts":
            expert_shapes[shp] += 1
            expert_elems += n
        if layer >= 0 and comp != "vision":
            per_layer_elems[layer] = per_layer_elems.get(layer, 0) + n
        elif comp in ("embedding", "vision", "per_layer_embedding") and not (role == "token_embd" and spec.tie_word_embeddings
                                                              and stage == last):
            embed_elems += n  # its gradient appears only when the backward reaches the input
        else:
            head_elems += n
        largest = max(largest, n)
    return TrainedBase(tuple(shapes.items()), tuple(sorted(per_layer_elems.items())), head_elems, embed_elems,
                       largest, tuple(expert_shapes.items()), expert_elems)


@lru_cache(maxsize=256)
def _autocast_copies(spec: ModelSpec, pp: int, stage: int, tp: int, split: str = "even",
                     virtual: int = 1, torch_conv: bool = False, float8: bool = False,
                     plan: str | None = None) -> tuple[int, tuple[tuple[int, int], ...]]:
    """(lm_head elements, elements per decoder layer) of the linear weights autocast copies to half precision on
    pipeline stage ``stage`` of ``pp`` (a tied lm_head is added by the caller); each kind of decoder layer once.
    A recurrent mixer's weights as :func:`recurrent_copied` says (``torch_conv``: its conv runs as ``nn.Conv1d``).
    ``float8``: float8 training converted the layers' linears, whose weights autocast never copies: torchao's
    Float8Linear (formulas/float8_training.py :func:`float8_autocast_copied`) and TransformerEngine's te.Linear,
    which quantizes from the parameter itself (its float8 copy is the timeline's ``fp8_weight_copies``). ``plan``:
    as :func:`_trained_base`'s."""
    stages = pipeline_stage_layers(spec.num_layers, pp, split, virtual)
    last = len(stages) - 1
    layer_stage = _layer_stages(spec.num_layers, pp, split, virtual)
    before, after, kinds = _layers_alike(spec)
    head = 0
    layers: dict[int, int] = {}

    def copied(t: Tensor) -> int:
        role, comp, shape, _, _, numel = t  # Tensor is a tuple: unpacking is the fast path
        kept = (recurrent_copied(role, len(shape), torch_conv) if comp == "recurrent"
                else len(shape) == 2 and comp in AUTOCAST_COMPONENTS
                and (not float8 or float8_autocast_copied(role, comp)))
        if not kept:
            return 0
        return numel if replicated_matrix(plan, t, spec.model_type) else math.ceil(numel / tp)

    for alike in kinds.values():
        mine = [i for i in alike if layer_stage.get(i) == stage] if pp > 1 else alike
        n = sum(copied(t) for t in _layer_tensors(spec, mine[0])) if mine else 0
        if n:
            layers.update(dict.fromkeys(mine, n))
    for t in (*before, *after):
        n = copied(t)
        if n and (pp == 1 or _in_stage(t, stage, last, layer_stage)):
            if t.component == "lm_head":
                head += n
            else:
                layers[t.layer] = layers.get(t.layer, 0) + n
    return head, tuple(sorted(layers.items()))
