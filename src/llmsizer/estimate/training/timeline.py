"""The moments of a training step at which device memory can peak, each a sum of named components.

A step runs forward (activations accumulate), the loss, backward (activations are freed layer by layer while
gradients appear) and the optimizer step. With ``zero_grad(set_to_none=True)`` (the PyTorch >= 2.0 default and
what HF Trainer does) gradients do not exist during the forward of a step's first micro-batch; with gradient
accumulation or pipeline micro-batches they persist. The peak is the largest of:

- ``forward, last layer attention`` (context parallelism only): the layers below saved, the last layer's saves
  before its attention and q, k, v, and ring attention's forward buffers (formulas/context_parallel.py
  ``ring_attention_forward_bytes``; live one layer at a time and not bounded by the backward's ring buffers: for
  grouped K/V the whole-q merge outgrows them);
- ``forward end``: every layer's saved activations, the logits and their fp32 upcast, all autocast weight
  copies (they stay in the autocast cache until the forward leaves the autocast context, even with
  checkpointing, except where the cache does not take them: frozen weights and FSDP1's views);
- ``loss backward``: saved activations + the two fp32 [t, V] loss gradients (12 B per logit with the saved
  log-softmax);
- ``backward at layer j``: layers <= j still saved (or their checkpoint inputs plus layer j recomputed),
  gradients of the layers above, and the layer's backward transient;
- ``optimizer step``: all gradients + states + the step's temporaries.

Each component is computed by a formula module; this module only adds them up per moment.
"""

from __future__ import annotations

from bisect import bisect_right
from dataclasses import dataclass, field, replace
from functools import cached_property
from itertools import accumulate, repeat
from operator import add, attrgetter, ge, mul, sub

from ...formulas import liger_kernels, unsloth_kernels
from ...formulas.activation_offload import offload_host_bytes, offload_stash_bytes, repeated_saves
from ...formulas.compiled_activations import compiled_layer_terms
from ...formulas.context_parallel import (
    p2p_ring_backward_bytes,
    p2p_ring_forward_bytes,
    ring_attention_backward_bytes,
    ring_attention_forward_bytes,
    ulysses_backward_bytes,
    ulysses_forward_bytes,
    ulysses_kv_width,
)
from ...formulas.deepspeed_zero import (
    gather_copy_bytes,
    held_after_forward,
    ipg_bucket_bytes,
    live_window_elements,
    prefetch_bytes,
    step_grad_copy_bytes,
)
from ...formulas.float8_training import (
    TE_RECIPES,
    float8_gemms,
    float8_layer_backward_peak,
    float8_weight_elements,
    te_weight_copy_bytes,
    te_weight_copy_lifetime,
)
from ...formulas.fsdp2_units import copy_in_events, unsharded_bytes
from ...formulas.fsdp_flat_param import backward_prefetch_unsharded_bytes, mp_shard_bytes, root_grad_assembly_bytes
from ...formulas.gemm_shapes import tally
from ...formulas.loss_allocations import eager_loss_events
from ...formulas.nf4_quantization import dequant_bytes, quantize_transient_bytes, quantizes_lm_head
from ...formulas.parallelism import (
    ddp_bucket_bytes,
    gathered_layer_bytes,
    inflight_microbatches,
    interleaved_backward_states,
    interleaved_forward_accumulating,
    interleaved_peak_inflight,
    pipeline_fsdp2_accumulated_grad_bytes,
    pipeline_fsdp2_gathered_bytes,
    pipeline_rank_boundary_bytes,
    pipeline_rank_chunks,
    reduce_bucket_bytes,
    shard,
    shard_each,
    zero_shards,
)
from ...formulas.selective_checkpointing import op_sac_reused_bytes, op_sac_saved_terms
from ...formulas.tensors import layer_kind_firsts
from ...formulas.training_activations import (
    Term,
    _div,
    _head_dims,
    accumulate_grad_transient_bytes,
    checkpoint_input_bytes,
    head_activations,
    kept_lm_head_input_bytes,
    kept_matmul_input_bytes,
    layer_backward_transient,
    layer_fresh_gradient_bytes,
    layer_saved_terms,
    lm_head_backward_bytes,
    moe_recompute_bytes,
    reentrant_recompute_bytes,
    shared_activations,
    tied_embedding_backward_end_bytes,
)
from ...formulas.training_states import autocast_cache_holds, step_temporary_bytes
from ...formulas.weight_formats import largest_quantized_layer, largest_quantized_matrix
from ...specs.training import TrainingWorkload
from .gather_units import deepspeed_zero3_persistent, float8_all_gather, fsdp_gather_units
from .setup import (
    TrainingContext,
    compile_partitions_layers,
    compiled_loss,
    expert_group,
    layer_inputs_need_grad,
    model_state_ways,
    te_first_microbatch_cache,
)
from .states import StageStates


@dataclass
class Phase:
    name: str
    parts: dict[str, int] = field(default_factory=dict)
    # of parts["gradients"], the lm_head's own backward's weight gradient (eq. H1, with its fp32 cast under mixed
    # precision) on top of the trained parameters' kept .grads, so that the gradients row can say so
    head_weight_grad: int = 0

    @property
    def total(self) -> int:
        return sum(self.parts.values())


@dataclass
class StageTimeline:
    stage: int
    phases: list[Phase]
    layer_terms: dict[int, tuple[Term, ...]]
    head_terms: tuple[Term, ...]
    shared_terms: tuple[Term, ...]
    inflight: int
    step_temporaries: int
    step_temporaries_foreach: int
    offloaded_activations: int = 0  # pinned host bytes of activation offloading (formulas/activation_offload.py)
    # Interleaved1F1B: the micro-batches each local stage holds at the rank's fullest point (formulas/parallelism.py
    # interleaved_peak_inflight), () otherwise
    inflight_by_stage: tuple[int, ...] = ()

    def terms_alike(self) -> list[tuple[tuple[Term, ...], int]]:
        """The distinct per-layer term tuples of ``layer_terms`` (layers alike share one), each with how many layers
        hold it, in layer order of first appearance (computed once: the items and the activations formula both read
        it; the timeline is complete when built)."""
        return self._alike

    @cached_property
    def _alike(self) -> list[tuple[tuple[Term, ...], int]]:
        counts = tally(map(id, self.layer_terms.values()))
        last_first = tuple(reversed(self.layer_terms.values()))
        first = dict(zip(map(id, last_first), last_first, strict=True))  # each id's first tuple (in C)
        return [(first[k], n) for k, n in counts.items()]

    @cached_property
    def peak(self) -> Phase:
        """The phase with the most bytes (computed once: the timeline is complete when built)."""
        return max(self.phases, key=lambda p: p.total)


_BYTES = attrgetter("bytes")


def _sum(terms: tuple[Term, ...], skip: str = "") -> int:
    if not skip:  # the same additions in the same order, picked in C
        return sum(map(_BYTES, terms))
    return sum(t.bytes for t in terms if not t.name.startswith(skip))


def _exact_ints(xs: list[int]) -> bool:
    """Whether every one of ``xs`` is an int a float holds exactly (|x| <= 2**53): then ``shard(x, 1)``
    (``ceil(x / 1)``) and ``int(x * 1.0)`` are ``x`` again."""
    return not xs or (set(map(type, xs)) == {int} and -(2**53) <= min(xs) and max(xs) <= 2**53)


def traced_units_layout(w: TrainingWorkload) -> str | None:
    """The traced unit layout (formulas/fsdp2_units.py) a run's units follow, under full sharding without pipeline
    parallelism or parameter offload: FSDP2's ``fsdp2_units`` (None for 'largest-two'); FSDP1 with LoRA adapters
    wrapped apart: 'torchtune' (formulas/fsdp_flat_param.py eq. W2: the root kept unsharded, every block resharded
    after its forward, one block unsharded at a time); FSDP1 full fine-tuning (each decoder layer a unit, the root
    the rest): 'torchtune' too, its backward gathering the block ahead as well (``fsdp1_backward_prefetch``, eq.
    W3). None otherwise."""
    if w.fsdp is None or w.shard_stage < 3 or w.pp > 1 or w.offload != "none":
        return None
    if w.fsdp_version == 2:
        return None if w.fsdp2_units == "largest-two" else w.fsdp2_units
    return "torchtune" if not w.adapters or w.fsdp1_lora_wrap == "adapters-apart" else None


def fsdp1_backward_prefetch(w: TrainingWorkload) -> bool:
    """FSDP1 full fine-tuning under a traced layout: each block's pre-backward hook also gathers the block before
    it (``BackwardPrefetch.BACKWARD_PRE``, formulas/fsdp_flat_param.py eq. W3). LoRA wrapped adapters apart
    prefetches an adapter unit instead (eq. W2: not counted)."""
    return w.fsdp_version == 1 and not w.adapters and traced_units_layout(w) is not None


def torch_pipelining(w: TrainingWorkload) -> bool:
    """This run's pipeline parallelism is torch's (torch.distributed.pipelining: torchtitan's PP, with FSDP, DDP or
    no data parallelism, with or without offload), whose every stage keeps eq. PP3's receive buffers and in-flight
    outputs (formulas/parallelism.py). The workload says so by splitting the layers torchtitan's way (a torchtitan
    ``pipeline_split``) or by sharding with torch's FSDP across pipeline stages (no other pipeline engine runs
    torch's FSDP); the even split without FSDP is Megatron-LM's or DeepSpeed's pipeline engine (the
    ``pipeline_split`` field's 'even'), whose buffers are not torch's."""
    return w.pp > 1 and (w.fsdp is not None or w.pipeline_split != "even")


def pipeline_fsdp2(w: TrainingWorkload) -> bool:
    """FSDP2 fully sharded inside torch's pipeline stages (formulas/parallelism.py eqs. PP1, PP2)."""
    return w.pp > 1 and w.fsdp is not None and w.fsdp_version == 2 and w.shard_stage >= 3 and w.offload == "none"


def fsdp_traced_units(ctx: TrainingContext, st: StageStates) -> tuple[int, list[int]] | None:
    """A run under a traced unit layout (``traced_units_layout``): (the root unit's unsharded bytes: embedding,
    final norm and output; each block's, in forward order), in the all-gather dtypes, adapters with their unit
    (gather_units.py ``fsdp_gather_units``). None otherwise."""
    if traced_units_layout(ctx.w) is None:
        return None
    units = fsdp_gather_units(ctx, st)
    return units.root, list(units.blocks)


def fsdp2_copy_in_events(ctx: TrainingContext, st: StageStates) -> list[tuple[str, int]]:
    """The all-gather copy-in stream's allocations and frees of a step (formulas/fsdp2_units.py), for a traced
    ``fsdp2_units`` layout or a pipeline stage (the forward's gathers only); none otherwise (FSDP1 all-gathers into
    the unsharded flat parameter itself)."""
    shards = zero_shards(ctx.w.shard_stage, ctx.w.shard_group)[0]
    if pipeline_fsdp2(ctx.w):  # each unit gathered once, in the first micro-batch's forward, and kept (eq. PP1)
        units = fsdp_gather_units(ctx, st)
        return copy_in_events("torchtitan", units.root, list(units.blocks), shards, backward_gathers=False)
    traced = fsdp_traced_units(ctx, st)
    if traced is None or ctx.w.fsdp_version != 2:
        return []
    return copy_in_events(ctx.w.fsdp2_units, *traced, shards)


def eager_loss_events_of(ctx: TrainingContext, st: StageStates) -> list[tuple[str, int]]:
    """The eager cross-entropy's [t, V] allocations and frees (formulas/loss_allocations.py eq. L1) of a stage that
    computes the loss with ``F.cross_entropy`` on the whole logits (loss 'ce', one chunk, not compiled, no tensor
    parallelism, a decoder-only model, PyTorch's kernels), or under torch's ``loss_parallel`` on the rank's
    vocabulary shard (loss 'ce-loss-parallel', eq. L1p: [t, V / tp], the shard of head_activations); none
    otherwise."""
    w = ctx.w
    parallel = w.loss == "ce-loss-parallel"
    if (not st.has_head or w.loss_chunks > 1 or compiled_loss(w) or w.kernels == "unsloth"
            or ctx.spec.encoder_decoder is not None or not (parallel or (w.loss == "ce" and w.tp == 1))):
        return []
    vocab = -(-ctx.spec.vocab_size // w.tp) if parallel else ctx.spec.vocab_size
    return eager_loss_events(ctx.act.tokens, vocab, ctx.act.compute, loss_parallel=parallel)


def stage_timeline(ctx: TrainingContext, st: StageStates) -> StageTimeline:
    spec, w, act = ctx.spec, ctx.w, ctx.act
    mode = w.grad_checkpointing
    m = inflight_microbatches(st.stage, w.pp, w.grad_accumulation) if w.pp > 1 else 1
    copy_b = ctx.weight_copy_bytes
    # per kind of layer (below): (saved terms, their total, bytes selective recompute drops, backward transient,
    #            bytes a checkpointed layer keeps, bytes its backward rebuilds)
    by_kind: dict[int, tuple[tuple[Term, ...], int, int, int, int, int]] = {}
    none = replace(act, checkpointing="none") if mode == "selective" else None
    # the recomputed layer's first norm keeps the checkpointed input itself when the residual is fp32
    shared_input = checkpoint_input_bytes(spec, act) if act.residual == 4 else 0
    # buffers a layer's backward adds on top of its gradients: ring attention's (context parallelism,
    # formulas/context_parallel.py)
    # ... and those a layer's attention forward holds while it runs (the "forward, last layer attention" moment)
    extra_transient = ring_forward = ring_inputs = 0
    ulysses_kv: Term | None = None  # eq. U0's replicated K/V excess, a saved term of each attention layer
    if w.cp_ring == "ulysses":  # DeepSpeed-Ulysses: all-to-alls, no ring (eqs. U0-U2)
        q_w, k_w, v_w, o_w = _head_dims(spec)
        k_r, v_r = (ulysses_kv_width(x, spec.num_kv_heads, w.context_parallel) for x in (k_w, v_w))
        extra_transient += ulysses_backward_bytes(act.tokens, q_w, k_r, v_r, k_w, v_w, act.compute)
        ring_forward = ulysses_forward_bytes(act.tokens, q_w, k_r, v_r, act.compute)
        ring_inputs = act.tokens * (q_w + k_w + v_w) * act.compute
        if k_r > k_w:
            ulysses_kv = Term("attention K/V replicated for Ulysses (eq. U0)", act.tokens * (k_r - k_w + v_r - v_w)
                              * act.compute, f"{act.tokens} x ({k_r} - {k_w} + {v_r} - {v_w}) x {act.compute} B: "
                              f"{spec.num_kv_heads} K/V heads < cp {w.context_parallel}")
    elif w.context_parallel > 1:
        q_w, k_w, v_w, o_w = (_div(x, w.tp) for x in _head_dims(spec))
        if spec.kv_expanded_in_attention:  # the ring runs on the K/V the module expanded to every query head
            k_w = v_w = q_w
        if w.cp_ring == "te-p2p":  # Megatron-Core: TransformerEngine's P2P ring (eqs. CP4-CP5)
            extra_transient += p2p_ring_backward_bytes(act.tokens, q_w, k_w, v_w, w.context_parallel, act.compute)
            ring_forward = p2p_ring_forward_bytes(act.tokens, k_w, v_w, w.context_parallel, act.compute)
        else:
            extra_transient += ring_attention_backward_bytes(act.tokens, q_w, k_w, v_w, w.context_parallel,
                                                             act.compute)
            ring_forward = ring_attention_forward_bytes(act.tokens, k_w, v_w, o_w, w.context_parallel, act.compute)
        ring_inputs = act.tokens * (q_w + k_w + v_w) * act.compute  # the op's q, k, v (the formula counts beyond)
    # a Float8Linear's backward peak (its float8 casts, formulas/float8_training.py) comes after the elementwise
    # backward that made its grad_output: the layer's transient is the larger of the two, not their sum
    float8_peak = 0
    if w.float8:
        fp8_weights = float8_all_gather(w)
        float8_peak = float8_layer_backward_peak(spec, act.tokens, act.compute, act.residual, w.tp,
                                                 compiled=w.compile, weight_gathered_fp8=fp8_weights,
                                                 grad_weight_fp8=float8_gemms(w.float8_recipe) == 3)
    layers = list(st.layers)  # ascending; the lists below are by position in it
    # Megatron-Core's DDP (the megatron precisions; NVIDIA/Megatron-LM @d98e8a64): one contiguous grad buffer per
    # (param dtype, grad dtype) allocated when the model is wrapped, ``grad_data = torch.zeros(numel, grad_dtype)``
    # (megatron/core/distributed/param_and_grad_buffer.py:1190-1195), every ``param.main_grad`` a view into it
    # (:1367-1369), zeroed in place at each step's start (``reset``, :1617-1621; training/training.py:3041): every
    # trained parameter's main grad exists in every phase, whatever the accumulation. Its hook adds the fresh
    # ``param.grad`` (the parameter's dtype) into it and drops it (distributed/distributed_data_parallel.py:575-579),
    # skipped for the wgrad-fused TE linears (``grad_added_to_main_grad``). The reduction runs in place on the
    # buffer's bucket views (all_reduce, or reduce_scatter into the rank's own shard of the bucket under the
    # distributed optimizer: param_and_grad_buffer.py:708-733): no DDP bucket copy, no reduce buffer.
    megatron = w.megatron_grad_buffer  # (not under FSDP: its gradients are FSDP's)
    # gradients kept across micro-batches: accumulated, kept by zero_grad(set_to_none=False), or Megatron's buffer
    persist = w.grad_accumulation > 1 or w.pp > 1 or w.zero_grad == "zeros" or megatron
    # the dtype of a fresh gradient added into a kept one: the kept .grad's, or under Megatron the parameter's
    fresh_b = ctx.recipe.model_bytes if megatron else ctx.recipe.grad_bytes
    # unsharded full training whose .grads persist across micro-batches: each new gradient is added to its kept one
    # (under Megatron at any distributed-optimizer stage, unless the wgrad GEMMs accumulate into main_grad themselves)
    fresh_grads = (w.method == "full" and (w.shard_stage == 0 or megatron) and w.fsdp is None and w.tp == 1
                   and w.offload == "none" and not w.optimizer_in_backward and persist
                   and not (megatron and w.accumulation_fused))
    n_layers = len(layers)
    lce = st.layer_copy_elements
    # a layer's terms depend on it only through what decides its tensors (its kind, ModelSpec.layer_keys: attention,
    # recurrent mixer, feed-forward, MoE, cross-attention, K/V sharing, feed-forward width, head size; named by the
    # kind's first layer, formulas/tensors.py layer_kind_firsts, the rule eqs. (T4)/(T5') of model_parallel.py read),
    # its attention type (a sliding layer's mask: training_activations.needs_mask), its MoE flag, its autocast weight
    # copies, whether its input needs a gradient (eq. F1: the first decoder layers' input, the embedding's output,
    # may need none until one holds an adapter) and, in an encoder-decoder, its stack and whether it is a stack's
    # first block (eqs. E4, E6 of formulas/encoder_decoder_activations.py): each distinct kind evaluated once
    input_grad = layer_inputs_need_grad(w, ctx.lora, layers, st.has_embedding)
    kind_firsts = layer_kind_firsts(spec)
    alike = [False] * n_layers
    enc = spec.encoder_decoder is not None
    n_enc = spec.encoder_decoder.encoder_layers if spec.encoder_decoder is not None else 0
    kinds = list(zip(map(kind_firsts.__getitem__, layers), map(spec.layer_types.__getitem__, layers),
                     map(spec.moe_layers.__getitem__, layers), map(lce.get, layers, repeat(0)), input_grad,
                     map(n_enc.__le__, layers) if enc else alike,
                     [i in (0, n_enc) for i in layers] if enc else alike, strict=True))
    # each layer's kind as the position of the first layer of that kind (ints: the loops below hash no tuples)
    kind_at: dict[tuple[object, ...], int] = {}
    kid = list(map(kind_at.setdefault, kinds, range(n_layers)))
    for p in kind_at.values():
        k, i = kinds[p], layers[p]  # the first layer of this kind
        g_i = bool(k[4])
        t_i = (unsloth_kernels.saved_terms(spec, act) if w.kernels == "unsloth"
               else layer_saved_terms(spec, i, act, k[3], input_grad=g_i))  # type: ignore[arg-type]
        if w.kernels == "liger":  # Liger's RMSNorm and SwiGLU/GeGLU keep less (formulas/liger_kernels.py)
            t_i = liger_kernels.layer_terms(spec, act, t_i)
        if ulysses_kv is not None and any(x.name.startswith("attention q, k, v") for x in t_i):
            t_i = (*t_i, ulysses_kv)
        if compile_partitions_layers(w):  # the min-cut partitioner's set (formulas/compiled_activations.py)
            t_i = compiled_layer_terms(spec, i, act, t_i)
        full_i = _sum(t_i)
        drop_i = (_sum(layer_saved_terms(spec, i, none, k[3], input_grad=g_i))  # type: ignore[arg-type]
                  - full_i if none is not None else 0)
        if none is not None:  # Megatron's 'moe' module: the MoE layer's re-run forward (training_activations eq. R6)
            drop_i += moe_recompute_bytes(spec, i, act)
        copies_i = int(k[3]) * copy_b  # type: ignore[call-overload]
        if mode == "selective-op":
            keep_i = _sum(op_sac_saved_terms(spec, i, act, compiled=compile_partitions_layers(w)))
            rebuild_i = max(0, full_i - copies_i - op_sac_reused_bytes(spec, i, act))
        elif w.checkpoint_offload:  # the input waits in host RAM and comes back for the recompute
            keep_i = 0
            rebuild_i = full_i - copies_i - shared_input + checkpoint_input_bytes(spec, act)
        else:
            keep_i = checkpoint_input_bytes(spec, act)
            rebuild_i = full_i - copies_i - shared_input
            if w.checkpoint_impl == "reentrant":  # the recompute rebuilds the layer's output too
                rebuild_i += reentrant_recompute_bytes(spec, act)
        plain_i = (unsloth_kernels.backward_transient(spec, act) if w.kernels == "unsloth"
                   else layer_backward_transient(spec, i, act, in_place_glu=w.kernels == "liger"
                                                                 and liger_kernels.swiglu_applies(spec)))
        if fresh_grads and not (spec.moe_layers[i] and spec.moe is not None) and not lce.get(i, 0):
            # kept .grads: the down projection's new weight gradient beside its own (eq. A2; no autocast copies)
            plain_i = max(plain_i, layer_fresh_gradient_bytes(spec, act, fresh_b))
        by_kind[p] = (t_i, full_i, drop_i, max(plain_i, float8_peak) + extra_transient, keep_i, rebuild_i)
    # checkpointed layers: every layer under 'full'/'selective-op', or every N-th (torchtitan's count from 1)
    ckpt_all = mode in ("full", "selective-op")
    every = w.checkpoint_every
    ckpt = ([(i + 1) % every == 0 for i in layers] if ckpt_all and every > 1
            else [ckpt_all] * n_layers)
    # per (kind, checkpointed): (saved terms, activations (autocast copies apart) a layer keeps between its forward
    # and its backward, bytes its backward rebuilds (the checkpointed layer's recompute, or what selective drops),
    # backward transient, its autocast copies, the copies autograd keeps saved): layers alike share one entry
    per: dict[tuple[int, bool], tuple[tuple[Term, ...], int, int, int, int, int]] = {}
    for p, c in dict.fromkeys(zip(kid, ckpt, strict=True)):
        t_i, full_i, drop_i, tr_i, keep_i, rebuild_i = by_kind[p]
        copies_i = kinds[p][3] * copy_b  # type: ignore[operator]
        per[p, c] = (t_i, keep_i if c else full_i - copies_i, rebuild_i if c else drop_i, tr_i, copies_i,
                     0 if c else copies_i)
    rows = list(map(per.__getitem__, zip(kid, ckpt, strict=True)))
    terms_at, act_kept, recompute, transient, copies, copies_kept = (list(col) for col in zip(*rows, strict=True))
    terms = dict(zip(layers, terms_at, strict=True))
    head = head_activations(spec, act, lm_head_trained=w.method == "full" or "output" in act.adapted
                            or "lm_head" in w.modules_to_save,
                            lm_head_weight_copy=st.lm_head_copy_elements * copy_b,
                            loss_chunks=w.loss_chunks, linear_loss=w.loss == "linear-ce",
                            cut_loss=w.loss == "cut-ce", kept_logits=w.loss == "ce-kept-logits",
                            compiled_loss=compiled_loss(w), upcast_in_loss=w.compile_scope == "layers+loss+upcast",
                            loss_parallel=w.loss == "ce-loss-parallel",
                            fused_xentropy=w.loss == "fused-xentropy",
                            megatron_ce=w.loss == "megatron-ce",
                            fused_linear=liger_kernels.flce_terms(
                                act.head_tokens, spec.hidden_size, spec.vocab_size, act.compute,
                                ctx.recipe.forward_weight_bytes(ctx.base_bytes),
                                w.method == "full" or "lm_head" in w.modules_to_save) if w.loss == "liger-flce" else None
                            ) if st.has_head else None
    if head is not None and w.kernels == "liger":  # the final norm is a LigerRMSNorm too (eq. LG1)
        head = replace(head, saved=liger_kernels.layer_terms(spec, act, head.saved))
    shared_saved = sum(t.bytes for t in head.shared if not t.forward_only) if head else 0
    shared_fwd = sum(t.bytes for t in head.shared) if head else 0
    if not head:  # rotary tables exist on every stage
        shared_terms = shared_activations(spec, act)
        shared_saved = sum(t.bytes for t in shared_terms if not t.forward_only)
        shared_fwd = sum(t.bytes for t in shared_terms)
    else:
        shared_terms = head.shared

    base: dict[str, int] = {"weights": st.weights}
    if st.adapter_weights:
        base["adapter_weights"] = st.adapter_weights
    if st.master:
        base["master_weights"] = st.master
    if st.optimizer:
        base["optimizer_states"] = st.optimizer
    # the gradients live through the forward when they persist (above)
    w_shard, g_shard, _ = model_state_ways(w, w.shard_group)
    # Megatron fp16's fp32 main grads (a shard under the distributed optimizer) are ``main_grad.float()`` copies the
    # optimizer step makes (optimizer/optimizer.py:1092-1097, optimizer/distrib_optimizer.py:2756-2792) and
    # ``optimizer.zero_grad()`` frees at the next step's start (training/training.py:3044): the step's alone
    step_main = st.main_grads if megatron else 0
    grads_all = st.grads + st.main_grads - step_main
    if w.shard_stage == 0 and w.dp > 1 and st.trained_elements and not megatron:
        base["gradient_buckets"] = ddp_bucket_bytes(st.grads)
    # the units a rank gathers: FSDP's in their all-gather dtypes, adapters with their unit (gather_units.py);
    # DeepSpeed ZeRO-3's the stored weights per module (its windows: formulas/deepspeed_zero.py, below)
    unit_bytes = (fsdp_gather_units(ctx, st).units if w.fsdp is not None and w.shard_stage >= 3
                  else list(st.layer_weights.values()))
    gather = gathered_layer_bytes(unit_bytes, w_shard) if w.shard_stage >= 3 else 0
    traced = fsdp_traced_units(ctx, st)
    layout = traced_units_layout(w)
    # FSDP2 under pipeline parallelism (formulas/parallelism.py eqs. PP1, PP2): the whole stage stays gathered and
    # its unsharded gradients accumulate over the micro-batches until the step's one reduce-scatter
    pp_fsdp2 = pipeline_fsdp2(w)
    boundary = boundary_idle = 0
    # FSDP2 in a pipeline stage whose every micro-batch is forwarded before its first backward (m <= in flight: stage
    # 0 of 1F1B when micro-batches = pp): eq. PP2's fp32 accumulators do not exist yet at the forwards (zero_grad at
    # the step's start) and appear unit by unit in the first backward (FSDP2 ``to_accumulated_grad_if_needed``)
    # torch's ScheduleInterleaved1F1B (several stages a rank, their layers as torchtitan splits them): each local
    # stage holds its own in-flight micro-batches' activations at each backward, and under FSDP2 its accumulators
    # live from its first backward to its REDUCE_GRAD right after its last (formulas/parallelism.py
    # interleaved_backward_states)
    inter = (interleaved_backward_states(st.stage, w.pp, w.virtual_stages, w.grad_accumulation)
             if torch_pipelining(w) and w.virtual_stages > 1 and w.pipeline_split != "even"
             and not w.activation_offload else None)
    inter_grads = inter is not None and pp_fsdp2
    first_backward_grows = pp_fsdp2 and w.grad_accumulation <= m and inter is None
    if pp_fsdp2:
        gather = pipeline_fsdp2_gathered_bytes(unit_bytes, w_shard)
        grads_all = pipeline_fsdp2_accumulated_grad_bytes(st.trained_elements, ctx.recipe.grad_bytes)
    if torch_pipelining(w):
        # torch's pipeline stages (each local stage of an interleaved schedule one of its own): their receive buffers
        # and in-flight outputs (eq. PP3); nothing is in flight at the optimizer step. The interleaved schedule is
        # read where the layers follow it (a torchtitan split: pipeline_stage_layers leaves it out of the even split)
        residual = checkpoint_input_bytes(spec, act)
        v = w.virtual_stages if w.pipeline_split != "even" else 1
        boundary = pipeline_rank_boundary_bytes(st.stage, w.pp, v, w.grad_accumulation, residual)
        boundary_idle = pipeline_rank_boundary_bytes(st.stage, w.pp, v, w.grad_accumulation, residual, idle=True)
    fwd_grads = 0 if first_backward_grows else grads_all  # the accumulators a forward sees (with persist)
    head_grads_bwd = fwd_grads  # ... and the loss backward
    chunks: tuple[range, ...] = ()
    g_chunk: list[int] = []
    if inter is not None:
        chunks = pipeline_rank_chunks(spec.num_layers, w.pp, w.pipeline_split, w.virtual_stages, st.stage)
    if inter is not None and inter_grads:
        g_chunk = [sum(st.layer_grads.get(i, 0) for i in r) for r in chunks]
        g_chunk[-1] += st.head_grads  # the head is on the last stage, this rank's last local stage
        # the rest (the embedding's) with the first stage, rank 0's first local stage
        g_chunk[0 if st.has_embedding else -1] += max(0, grads_all - sum(g_chunk))
        fwd_grads = sum(g for g, live in zip(g_chunk, interleaved_forward_accumulating(
            st.stage, w.pp, w.virtual_stages, w.grad_accumulation), strict=True) if live)
        head_grads_bwd = max(sum(g for g, live in zip(g_chunk, others, strict=True) if live)
                             + (st.head_grads if first else g_chunk[c]) for c, first, _, others in inter
                             if c == len(chunks) - 1)
    if st.no_sync_grads:  # FSDP1 no_sync: the unsharded flat gradients held until the sync micro-batch (eq. N1)
        grads_all = st.no_sync_grads + st.main_grads
    if w.offload == "params":  # the two largest units, whole: the rank's shard is on the host
        gather = sum(sorted(unit_bytes, reverse=True)[:2])
    if traced is not None and layout is not None:  # units as the wrapping lays them out (formulas/fsdp2_units.py
        # eqs. U1-U4; FSDP1 LoRA wrapped adapters apart: formulas/fsdp_flat_param.py eq. W2; FSDP1 full: eq. W3)
        root, blocks = traced
        block = max(blocks, default=0)
        gather = unsharded_bytes(layout, "backward", root, block)
        gather_fwd = {"forward": unsharded_bytes(layout, "loss", root, block)}
    mp = 0
    if w.fsdp_version == 1 and w.fsdp is not None and w.precision == "fsdp-bf16-mixed" and gather:
        # FSDP1 casts the unit's shard into _mp_shard before the all-gather (formulas/fsdp_flat_param.py)
        largest = max(st.layer_weights.values()) // max(1, ctx.base_bytes)
        mp = mp_shard_bytes(largest, w.shard_group, ctx.recipe.compute_bytes)
        gather += mp
    # FSDP1 full fine-tuning: each block's backward with the block before it prefetched (eq. W3)
    prefetched = ({i: b + mp for i, b in zip(sorted(st.layers), backward_prefetch_unsharded_bytes(*traced),
                                            strict=True)} if traced is not None and fsdp1_backward_prefetch(w) else {})
    # DeepSpeed ZeRO-3 (formulas/deepspeed_zero.py): the gradient shard lives in a buffer made at initialisation,
    # the IPG bucket is fixed, and modules reused within max_reuse_distance stay gathered through the loss
    ds3 = w.zero == 3 and w.fsdp is None
    gather_bwd = prefetched
    if traced is None:
        gather_fwd = {}
    window_reach: tuple[int, int] | None = None  # ZeRO-3: (gathered bytes, layers ahead) when the lm_head is prefetched
    if ds3:
        # the persistent parameters, whole on every rank (eq. Z4); the gather windows below leave them out
        ds_persistent, persistent_units = deepspeed_zero3_persistent(ctx, st)
        if ds_persistent:
            base["persistent_params"] = ds_persistent
        elt = max(1, ctx.base_bytes)
        keys = ([-1] if -1 in st.layer_weights else []) + sorted(st.layers) + ([-2] if -2 in st.layer_weights else [])
        units = [st.layer_weights[k] - persistent_units.get(k, 0) for k in keys]
        if spec.tie_word_embeddings and keys and keys[0] == -1 and keys[-1] == -2 and w.pp == 1:
            units[-1] += units[0]  # a tied lm_head runs on the embedding's parameter: gathered again for the loss
        held = held_after_forward([b // elt for b in units])
        extra = [b if w.offload == "params" else b - shard(b, w_shard) for b in units]
        ahead = prefetch_bytes([b // elt for b in units], elt) if (w_shard > 1 or w.offload == "params") else 0
        held_extra = [x if h else 0 for x, h in zip(extra, held, strict=True)]
        gather_fwd = {k: sum(held_extra) + ahead for k in ("forward",)}
        gather_bwd = {k: sum(held_extra[:n]) + (0 if held[n] else extra[n]) + ahead for n, k in enumerate(keys)}
        # the live window of a complete trace (deepspeed_zero.live_window_elements): prefetching keeps about
        # max_live_parameters gathered while layers run, and overshoots by the lm_head when the queue reaches it
        if sum(units) and sum(extra):
            per_elt = sum(extra) / (sum(units) // elt)  # gathered bytes per element beyond the rank's own partition
            steady, reach, span = live_window_elements([b // elt for b in units], keys[-1] == -2 and w.pp == 1)
            window = int(steady * per_elt)
            gather_fwd = {"forward": max(gather_fwd["forward"], window)}
            # in the backward the queue ahead holds only the units not yet run backward (those before this one)
            elems = [b // elt for b in units]
            gather_bwd = {k: max(v, int(min(steady, sum(elems[:n + 1])) * per_elt))
                          for n, (k, v) in enumerate(gather_bwd.items())}
            if reach > steady:  # offloaded: the lm_head's partition is copied in beside its gathered buffer
                copy = gather_copy_bytes(units[-1], w_shard, w.deepspeed_gather == "pre-0.9") if (
                    w.offload == "params") else 0
                window_reach = (int(reach * per_elt) + copy, span)
        base["gradient_buckets"] = ipg_bucket_bytes(ctx.recipe.grad_bytes if not w.adapters else ctx.adapter_bytes)
        persist = persist or w.offload == "none"
    reduce_buf = 0
    if w.shard_stage in (1, 2) and w.dp > 1 and st.trained_elements and w.fsdp is None and not megatron:
        reduce_buf = reduce_bucket_bytes(st.trained_elements, ctx.recipe.grad_bytes)
    if w.shard_stage >= 2 and w.fsdp is not None and st.layer_grads and not pp_fsdp2:
        reduce_buf = max(st.layer_grads.values())  # one FSDP unit's unsharded gradients before reduce-scatter
    dequant = 0
    gptq = ctx.base_format == "gptq-int4"
    if w.method == "qlora" and gptq:
        # auto-gptq's eager dequantization (formulas/training_time.py eq. 9b): torch.matmul saves each dequantized
        # fp16 weight for the input gradient, so a layer's copies live from its (re)computed forward to its
        # backward: one layer's under full checkpointing, every layer's of the stage without
        layers_held = 1 if w.grad_checkpointing == "full" else len(st.layers)
        dequant = largest_quantized_layer(spec) * 2 * layers_held // max(1, w.tp)
    elif w.method == "qlora":  # one matrix dequantized for its GEMM (nf4_quantization.py eq. 5)
        largest = largest_quantized_matrix(spec, "nf4-dq", ctx.fused_experts)
        if quantizes_lm_head(w.nf4_quantizer) and not spec.tie_word_embeddings:
            largest = max(largest, spec.vocab_size * spec.hidden_size)
        dequant = dequant_bytes(largest, w.nf4_quantizer, act.compute,
                                compute_fp16="fp16" in ctx.recipe.name) // max(1, w.tp)

    in_bwd = w.optimizer_in_backward
    # suffix sums of the per-layer gradients by layer index (grads_part is asked once per layer: O(L), not O(L^2))
    g_keys = sorted(st.layer_grads)
    # g_suffix[n] = g_suffix[n + 1] + layer_grads[g_keys[n]], from the top down (in C, the same additions in order)
    g_suffix = list(accumulate(map(st.layer_grads.__getitem__, reversed(g_keys)), initial=0))[::-1]

    def grads_above(upper: int) -> int:
        return g_suffix[bisect_right(g_keys, upper)]

    def grads_part(upper: int | None) -> int:
        """Gradients alive when the backward has finished every layer above ``upper`` (None: all)."""
        if w.offload != "none":  # the shards are on the host (states.py); the unit's own are in gradient_buckets
            return 0
        if in_bwd:  # each gradient is consumed by its parameter's update as soon as it is accumulated
            return st.layer_grads.get(upper, st.head_grads) if upper is not None else st.head_grads
        if persist or upper is None:
            return grads_all
        g = st.head_grads + grads_above(upper)
        scale = grads_all / max(1, st.grads) if st.grads else 1
        return int(shard(g, g_shard) * scale)

    phases: list[Phase] = []
    if w.method == "qlora" and not gptq:  # the model is built: the base quantized matrix by matrix (nf4_quantization.py)
        init = Phase("model init", {k: v for k, v in base.items() if k in ("weights", "adapter_weights")})
        init.parts["quantization_transient"] = quantize_transient_bytes(
            largest_quantized_matrix(spec, "nf4-dq", ctx.fused_experts) // max(1, w.tp), w.nf4_quantizer)
        phases.append(init)
    all_kept = sum(act_kept)
    fwd_kept = m * all_kept  # saved activations on the device at forward end
    bounds = list(accumulate(map(len, chunks), initial=0))
    kept_c = [sum(act_kept[b0:b1]) for b0, b1 in zip(bounds[:-1], bounds[1:], strict=True)]
    copies_c = [sum(copies_kept[b0:b1]) for b0, b1 in zip(bounds[:-1], bounds[1:], strict=True)]
    held_fwd: tuple[int, ...] = ()
    if inter is not None:
        # Interleaved1F1B: each local stage's own in-flight micro-batches at the rank's fullest point (just before a
        # backward; for the loss stage, one of its last local stage, where the head runs), not min(pp - r, m) on
        # every layer (formulas/parallelism.py interleaved_peak_inflight)
        held_fwd = interleaved_peak_inflight(st.stage, w.pp, w.virtual_stages, w.grad_accumulation,
                                             tuple(map(add, kept_c, copies_c)),
                                             len(chunks) - 1 if st.has_head else None)
        fwd_kept = sum(map(mul, held_fwd, kept_c))
    host_act = final_norm = 0
    if w.activation_offload:  # torchtune OffloadActivations: saved tensors go to pinned host memory
        ordered = act_kept
        plain = [c for c in ckpt if not c]
        repeats = 0
        if plain:  # a checkpointed layer saves only its input: once
            n_qkv = sum(1 for r in ("attn_q", "attn_k", "attn_v") if w.method == "full" or r in act.adapted)
            n_mlp = sum(1 for r in ("ffn_gate", "ffn_up") if w.method == "full" or r in act.adapted)
            repeats = repeated_saves(act.tokens, spec.hidden_size, act.residual, act.compute, spec.head_dim,
                                     spec.norms_per_layer, n_qkv, n_mlp) * len(plain) // len(ordered)
        host_act = offload_host_bytes(ordered, m, repeats)
        # the final norm runs inside the offloading context (lm_head and the loss do not): its saves go too
        final_norm = sum(t.bytes for t in head.saved if t.name.startswith("final norm")) if head else 0
        host_act += final_norm
        if head and spec.norm_kind != "layernorm":  # its fp32 input is saved by pow and by the mul by 1/rms
            host_act += act.tokens * spec.hidden_size * max(4, act.residual)
        width = spec.intermediate_size if not spec.moe_layers[layers[-1]] else spec.hidden_size
        last_save = act_kept[-1] if ckpt[-1] else act.tokens * _div(width, w.tp) * act.compute
        fwd_kept = offload_stash_bytes(last_save, final_norm)
    # TransformerEngine's float8 weight copies (formulas/float8_training.py eq. T1): te.Linear quantizes each layer's
    # weight from the parameter itself (no autocast copy); the copy is saved from the layer's forward to its backward
    # (a checkpointed layer's forward keeps none: its recompute makes it again), none under FSDP2; kept in
    # _fp8_workspaces (every layer's, the whole step) where the loop passes is_first_microbatch: Megatron-Core does,
    # llm-foundry's blocks do not (setup.py te_first_microbatch_cache, the rule the casts' time reads too)
    te_i, te_kept = [0] * n_layers, [0] * n_layers
    # (float8 parameters, eq. T3: none; the parameter itself is the GEMM's operand, states.py sizes it)
    te_life = (te_weight_copy_lifetime(w.fsdp is not None and w.fsdp_version == 2, te_first_microbatch_cache(w))
               if w.float8 and w.float8_recipe in TE_RECIPES and not w.fp8_params else "none")
    if te_life != "none":
        moe = [spec.moe is not None and bool(spec.moe_layers[i]) for i in layers]
        per_moe = {k: te_weight_copy_bytes(float8_weight_elements(spec, w.tp, k), w.gpu_capability,
                                           recipe=w.float8_recipe)
                   for k in dict.fromkeys(moe)}
        te_i = list(map(per_moe.__getitem__, moe))
        if te_life == "workspace":
            base["fp8_weight_copies"] = sum(te_i)
        else:
            te_kept = [0 if c else b for b, c in zip(te_i, ckpt, strict=True)]
    te_c = [sum(te_kept[b0:b1]) for b0, b1 in zip(bounds[:-1], bounds[1:], strict=True)] if held_fwd else []
    te_fwd = sum(map(mul, held_fwd, te_c)) if held_fwd else m * sum(te_kept)
    te_at = list(map(add, map(add, accumulate(te_kept), map(mul, te_i if te_life == "saved" else te_kept, ckpt)),
                     repeat((m - 1) * sum(te_kept))))
    head_copy = st.lm_head_copy_elements * copy_b if head else 0
    # autocast copies: a non-checkpointed layer's stay saved by autograd (one set per in-flight micro-batch); a
    # checkpointed layer's stay in the autocast cache until the forward leaves autocast only where the cache takes
    # them (trained leaf weights that are not views: not FSDP1's flat-parameter views, formulas/training_states.py
    # autocast_cache_holds), else each lives only for its op; they come back while that layer is recomputed
    # (integers: a checkpointed layer's copies where the cache holds them, + m x the others')
    cached = autocast_cache_holds(w.method == "full", w.fsdp is not None and w.fsdp_version == 1)
    copies_fwd = (sum(map(mul, copies, ckpt)) if cached else 0) + (
        sum(map(mul, held_fwd, copies_c)) if held_fwd else m * sum(copies_kept))
    if window_reach is not None:  # ZeRO-3: the prefetch reaches the lm_head while the window's layers are ahead
        r = Phase("forward, lm_head prefetched", dict(base))
        r.parts["activations"] = m * sum(act_kept[:max(0, n_layers - window_reach[1])])
        r.parts["rotary_and_masks"] = shared_fwd
        r.parts["gathered_params"] = window_reach[0]
        if persist and fwd_grads:
            r.parts["gradients"] = fwd_grads
        phases.append(r)
    def forward_shared(p: Phase) -> None:
        """The parts every forward moment from the last layer on holds alike: rotary tables and masks, persistent
        gradients, the gathered parameters of the forward, the dequantization buffer."""
        p.parts["rotary_and_masks"] = shared_fwd
        if persist and fwd_grads:
            p.parts["gradients"] = fwd_grads
        if gather or gather_fwd:
            p.parts["gathered_params"] = gather_fwd.get("forward", gather)
        if dequant:
            p.parts["dequant_buffer"] = dequant

    if ring_forward:
        # context parallelism: the last layer's ring-attention forward buffers (formulas/context_parallel.py), live
        # while its attention runs, one layer at a time, the head not run yet. Beside them the layers below (and the
        # other micro-batches), and of the last layer its saved terms before the attention with the op's q, k, v;
        # a checkpointed (or offloaded) last layer saves nothing then: its q, k, v beside what it keeps. The
        # autocast copies are forward end's (an upper bound by the last layer's MLP copies)
        last_terms = rows[-1][0]
        at = next((n for n, x in enumerate(last_terms) if x.name.startswith("attention q")), None)
        if ckpt[-1] or w.activation_offload or at is None:
            fwd_at_attention = fwd_kept + ring_inputs
        else:
            fwd_at_attention = fwd_kept - act_kept[-1] + _sum(last_terms[:at]) + ring_inputs
        a = Phase("forward, last layer attention", dict(base))
        a.parts["activations"] = fwd_at_attention
        if copies_fwd:
            a.parts["autocast_weight_copies"] = copies_fwd
        if te_fwd:
            a.parts["fp8_weight_copies"] = te_fwd
        forward_shared(a)
        a.parts["ring_attention_forward"] = ring_forward
        phases.append(a)
    # forward end (the last stage computes the loss; other stages end their forward with their last layer)
    head_saved = _sum(head.saved, skip="lm_head autocast") if head else 0  # the head's saved terms (once)
    f = Phase("forward end", dict(base))
    f.parts["activations"] = fwd_kept
    if copies_fwd + head_copy:
        f.parts["autocast_weight_copies"] = copies_fwd + head_copy
    if te_fwd:
        f.parts["fp8_weight_copies"] = te_fwd
    if head:
        f.parts["head_activations"] = head_saved - final_norm
        f.parts["logits_and_loss"] = head.logits_forward
    forward_shared(f)
    phases.append(f)
    if head:
        b = Phase("loss backward", dict(base))
        b.parts["activations"] = fwd_kept
        copies_bwd = (sum(map(mul, held_fwd, copies_c)) if held_fwd else m * sum(copies_kept)) + head_copy
        if copies_bwd:
            b.parts["autocast_weight_copies"] = copies_bwd
        if te_fwd:
            b.parts["fp8_weight_copies"] = te_fwd
        b.parts["head_activations"] = head_saved - final_norm
        b.parts["logits_and_loss"] = head.loss_backward
        b.parts["rotary_and_masks"] = shared_saved
        if persist and head_grads_bwd:
            b.parts["gradients"] = head_grads_bwd
        if gather or gather_fwd:
            b.parts["gathered_params"] = gather_fwd.get("forward", gather)
        phases.append(b)
    head_trained = w.method == "full" or "lm_head" in w.modules_to_save
    if (head and head_trained and st.head_grads and w.loss not in ("cut-ce", "liger-flce") and w.shard_stage == 0
            and w.tp == 1):
        # the lm_head's own backward, chunk by chunk (training_activations.lm_head_backward_bytes, eq. H1): the
        # loss's saved tensors are freed by then, the lm_head input and the other head terms stay
        # the [V, h] gradient in the dtype the matmul makes it: the autocast copy's under mixed precision (its fp32
        # .grad comes from the cast after the last chunk), the weight's own otherwise
        vh = spec.vocab_size * spec.hidden_size
        dlogits, dweight = lm_head_backward_bytes(w.loss_chunks, act.head_tokens, spec.vocab_size, act.compute,
                                                  vh * (copy_b or max(1, st.head_grads // vh)))
        if copy_b and w.loss_chunks <= 1:  # one chunk: the half gradient and its fp32 cast side by side
            dweight += st.head_grads
        hb = Phase("lm_head backward", dict(base))
        hb.parts["activations"] = fwd_kept
        if copies_bwd:
            hb.parts["autocast_weight_copies"] = copies_bwd
        if te_fwd:
            hb.parts["fp8_weight_copies"] = te_fwd
        loss_saved = sum(t.bytes for t in head.saved if t.name.startswith(("loss log-softmax", "loss input logits")))
        hb.parts["head_activations"] = head_saved - final_norm - loss_saved
        hb.parts["logits_and_loss"] = dlogits
        hb.parts["rotary_and_masks"] = shared_saved
        hb.parts["gradients"] = (grads_all if persist else 0) + dweight
        hb.head_weight_grad = dweight
        if gather or gather_fwd:
            hb.parts["gathered_params"] = gather_fwd.get("forward", gather)
        if dequant:
            hb.parts["dequant_buffer"] = dequant
        phases.append(hb)
    all_copies_kept = sum(copies_kept)
    live_gather = bool(gather or gather_bwd)
    # the layer-dependent parts of "backward layer j" (position p): the activations of the layers below still saved
    # (prefix sums) and what its backward rebuilds, the autocast copies alive, the gradients of the layers above,
    # its transient and the parameters gathered
    if w.activation_offload:  # the node in flight's saved tensors (and a recompute); the rest on the host
        act_at = [(kept if c else max(t.bytes for t in r[0])) + rc
                  for kept, c, r, rc in zip(act_kept, ckpt, rows, recompute, strict=True)]
    else:  # the layers below still saved (prefix sums), the other micro-batches', the recompute (integers)
        act_at = list(map(add, map(add, accumulate(act_kept), recompute), repeat((m - 1) * all_kept)))
    copies_at = list(map(add, map(add, accumulate(copies_kept), map(mul, copies, ckpt)),
                         repeat((m - 1) * all_copies_kept)))
    if w.offload == "none" and persist and not in_bwd:  # grads_part(i) of every layer: all of them (grads_all)
        grads_at = [grads_all] * n_layers
    elif w.offload != "none" or persist or in_bwd:
        grads_at = [grads_part(i) for i in layers]
    else:  # grads_part(i) of each layer, as it computes it
        scale = grads_all / max(1, st.grads) if st.grads else 1
        # the gradients above each layer: those above the stage, then the stage's from the top down (its layers are
        # consecutive: a range), exact integers
        above = list(accumulate(map(st.layer_grads.get, reversed(layers), repeat(0)),
                                initial=st.head_grads + grads_above(layers[-1])))[-2::-1]
        if g_shard == 1 and scale == 1 and _exact_ints(above):  # shard(x, 1) and int(x * scale) give x itself
            grads_at = above
        else:
            grads_at = list(map(int, map(mul, shard_each(above, g_shard), repeat(scale))))
    if first_backward_grows and not w.activation_offload:
        # the first backward holds the m - 1 other micro-batches and the accumulators of the layers above (and the
        # head's); the second, m - 2 others and every accumulator: at each layer the larger of the two
        # (the first unless the second holds more: max(first, second, key=sum), integers)
        first_g = [st.head_grads + grads_above(i) for i in layers]
        if m > 1:
            firsts = list(map(add, act_at, first_g))
            seconds = map(add, map(sub, act_at, repeat(all_kept)), repeat(grads_all))
            keep = list(map(ge, firsts, seconds))
            act_at = [a if k else a - all_kept for a, k in zip(act_at, keep, strict=True)]
            grads_at = [g if k else grads_all for g, k in zip(first_g, keep, strict=True)]
        else:
            grads_at = first_g
    elif inter is not None:
        # each backward of local stage c: its micro-batch's layers below (and the recompute) and autocast copies,
        # the other forwarded micro-batches of every local stage; under FSDP2 the other local stages' live
        # accumulators and c's own (those above in c's first backward, all of c's after), else the gradients as
        # every layer's backward holds them (grads_part)
        prefix = list(accumulate(act_kept, initial=0))
        c_prefix = list(accumulate(copies_kept, initial=0))
        best: dict[tuple[int, bool], tuple[int, int, int]] = {}
        for c_i, first_i, held_i, live_i in inter:
            o = (sum(map(mul, held_i, kept_c)), sum(map(mul, held_i, copies_c)),
                 sum(g_c for g_c, on in zip(g_chunk, live_i, strict=True) if on) if inter_grads else 0)
            if sum(o) > sum(best.get((c_i, first_i), (-1, 0, 0))):
                best[(c_i, first_i)] = o
        persistent = grads_at
        act_at, copies_at, grads_at = [-1] * n_layers, [0] * n_layers, [0] * n_layers
        for (c_i, first_i), (o_act, o_cp, o_g) in best.items():
            above_i = st.head_grads if c_i == len(chunks) - 1 else 0
            for p in range(bounds[c_i + 1] - 1, bounds[c_i] - 1, -1):  # the stage's layers, top down
                a_p = prefix[p + 1] - prefix[bounds[c_i]] + recompute[p] + o_act
                cp_p = c_prefix[p + 1] - c_prefix[bounds[c_i]] + copies[p] * ckpt[p] + o_cp
                g_p = o_g + (above_i if first_i else g_chunk[c_i]) if inter_grads else persistent[p]
                if a_p + cp_p + g_p > act_at[p] + copies_at[p] + grads_at[p]:
                    act_at[p], copies_at[p], grads_at[p] = a_p, cp_p, g_p
                above_i += st.layer_grads.get(layers[p], 0)
    gather_at = list(map(gather_bwd.get, layers, repeat(gather))) if live_gather else [0] * n_layers
    # bitsandbytes 0.42: a layer whose backward has run keeps its matmul inputs while the graph lives (eq. G1)
    if act.frozen_keeps_input:
        kept_l = [kept_matmul_input_bytes(spec, act, i, g) for i, g in zip(layers, input_grad, strict=True)]
        kept_head = kept_lm_head_input_bytes(act, spec.hidden_size) if head else 0
        kept_at = [kept_head + x for x in accumulate(kept_l[:0:-1], initial=0)][::-1]
        kept_all = kept_head + sum(kept_l)
    else:
        kept_at, kept_all = [0] * n_layers, 0

    def backward_phase(p: int) -> Phase:
        ph = Phase(f"backward layer {layers[p]}", dict(base))
        ph.parts["activations"] = act_at[p]
        if copies_at[p]:
            ph.parts["autocast_weight_copies"] = copies_at[p]
        if te_at[p]:
            ph.parts["fp8_weight_copies"] = te_at[p]
        ph.parts["rotary_and_masks"] = shared_saved
        ph.parts["gradients"] = grads_at[p]
        ph.parts["backward_transient"] = transient[p]
        if live_gather:
            ph.parts["gathered_params"] = gather_at[p]
        if reduce_buf:
            ph.parts["gradient_buckets"] = ph.parts.get("gradient_buckets", 0) + reduce_buf
        if dequant:
            ph.parts["dequant_buffer"] = dequant
        if kept_at[p]:
            ph.parts["kept_graph_inputs"] = kept_at[p]
        return ph

    # The backward runs the layers last to first, a phase each. They hold the same parts, equal but for the five
    # above: their totals compare by those five alone (integers: exact). Built are the last and first layer's phase
    # (the estimate's details name them) and, between them, the first (in backward order) of the most bytes, so the
    # peak (the first phase of the most bytes) is the one the whole sequence gives. A long stage (over 64 layers)
    # keeps its last and first layers' phases only.
    varying = list(map(add, map(add, map(add, map(add, map(add, act_at, copies_at), map(add, grads_at, transient)),
                                        gather_at), kept_at), te_at))
    built = [n_layers - 1]
    if 2 < n_layers <= 64:
        built.append(max(range(n_layers - 2, 0, -1), key=varying.__getitem__))
    if n_layers > 1:
        built.append(0)
    phases.extend(backward_phase(p) for p in built)
    if st.has_embedding:
        e = Phase("backward end", dict(base))
        e.parts["gradients"] = grads_part(None) if in_bwd else grads_all
        e.parts["backward_transient"] = act.tokens * spec.hidden_size * act.residual
        plain_grads = (w.method == "full" and w.shard_stage == 0 and w.fsdp is None and w.tp == 1
                       and w.offload == "none")
        if spec.tie_word_embeddings and plain_grads and st.has_head:
            # a trained tied embedding: the lm_head's gradient waiting in the parameter's input buffer, the
            # embedding's own and (out of place where the lm_head's is a view) their sum (eq. T1); sharded runs,
            # tensor parallelism and offloading are not modeled here
            view = (not (copy_b and st.lm_head_copy_elements) and w.loss_chunks <= 1
                    and w.loss in ("ce", "ce-kept-logits") and not compiled_loss(w))
            g_out = e.parts["backward_transient"]
            e.parts["tied_embedding_gradients"] = tied_embedding_backward_end_bytes(
                spec.vocab_size * spec.hidden_size * ctx.recipe.grad_bytes, g_out, view, persist) - g_out
        elif plain_grads and persist and not in_bwd:
            # an untied trained embedding's new [V, h] gradient beside its kept .grad until AccumulateGrad adds it
            # in place (eq. A1); sharded runs, tensor parallelism and offloading are not modeled here
            e.parts["embedding_gradient_accumulation"] = accumulate_grad_transient_bytes(
                spec.vocab_size * spec.hidden_size * fresh_b, persist)
        if w.fsdp is not None and w.fsdp_version == 1 and w.method == "full" and w.shard_group > 1:
            # FSDP1: the root unit's view gradients and their concatenation (formulas/fsdp_flat_param.py eq. N2),
            # the root still gathered until its post-backward hook
            root = (st.layer_weights.get(-1, 0) + st.layer_weights.get(-2, 0)) // max(1, ctx.recipe.model_bytes)
            e.parts["backward_transient"] += root_grad_assembly_bytes(
                root, ctx.recipe.compute_bytes if w.precision == "fsdp-bf16-mixed" else ctx.recipe.grad_bytes)
            if gather:
                e.parts["gathered_params"] = gather
        if kept_all:
            e.parts["kept_graph_inputs"] = kept_all
        phases.append(e)
    step_tmp = 0
    foreach_tmp = step_temporary_bytes(ctx.optimizer.name, "foreach", st.trained_elements, st.largest_trained,
                                       ctx.state_bytes)
    if w.offload == "none" and not in_bwd:
        step_tmp = step_temporary_bytes(ctx.optimizer.name, ctx.optimizer_impl, st.trained_elements,
                                        st.largest_trained, ctx.state_bytes)
        _, _, o_shard = zero_shards(w.shard_stage, w.shard_group)
        # the experts' share of the step's temporaries (the step runs over each rank's state shards) over the expert
        # data-parallel ranks, the rest over the dense ones (formulas/parallelism.py expert_shard_group)
        _, _, oe_shard = zero_shards(w.shard_stage, expert_group(w))
        n_all, n_exp = max(1, st.trained_elements), st.expert_elements

        def by_group(b: int) -> int:
            e = b * n_exp // n_all
            return shard(b - e, o_shard) + shard(e, oe_shard) if e else shard(b, o_shard)

        step_tmp, foreach_tmp = by_group(step_tmp), by_group(foreach_tmp)
        s = Phase("optimizer step", dict(base))
        s.parts["gradients"] = grads_all + step_main
        s.parts["optimizer_step_temporaries"] = step_tmp
        if ds3:  # the fp32 copy of a sub-group's gradient partition (deepspeed_zero.step_grad_copy_bytes)
            s.parts["gradient_buckets"] = s.parts.get("gradient_buckets", 0) + step_grad_copy_bytes(
                -(-st.trained_elements // max(1, w.shard_group)))
        phases.append(s)
    else:
        foreach_tmp = 0
    if kept_all and w.loop_keeps_graph:  # eq. G1: the previous step's at forward end, this step's after its
        for ph in phases:                # backward (the loop rebinds loss before the next backward)
            if ph.name in ("forward end", "optimizer step"):
                ph.parts["kept_graph_inputs"] = kept_all
    if boundary:  # eq. PP3: a pipeline stage's receive buffers (kept from the first step) and in-flight outputs
        for ph in phases:
            if ph.name != "model init":
                ph.parts["pipeline_buffers"] = boundary_idle if ph.name == "optimizer step" else boundary
    if head and head.kept_logits:  # the loop's shifted fp32 logits (eq. K1): alive from the loss to the next
        for ph in phases:          # forward's return; at forward end the log-softmax term stands for it (same size)
            if ph.name not in ("forward end", "model init"):
                ph.parts["kept_logits"] = head.kept_logits
    return StageTimeline(st.stage, phases, terms, head.saved if head else (), shared_terms, m, step_tmp, foreach_tmp,
                         host_act, held_fwd)
