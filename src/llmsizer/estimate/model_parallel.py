"""The tensor/pipeline-parallel part of a training step (estimate/duration.py ``step_time``): which stage is the
slowest, which links the tensor-parallel, point-to-point and data-parallel traffic crosses, and the step time of
formulas/model_parallel_time.py eqs. (T1)-(P6) with its named assumptions."""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache
from typing import NamedTuple

from ..formulas.context_parallel import local_tokens
from ..formulas.expert_parallel_time import machine_shares
from ..formulas.float8_training import float8_gathered_element_bytes, float8_gathers_in_float8
from ..formulas.gemm_shapes import gemm_efficiency, tally
from ..formulas.model_parallel_time import (
    DataParallelOverlap,
    ModelParallelStep,
    data_parallel_bus_bandwidth,
    micro_pipelined_pair_seconds,
    model_parallel_step,
    pipeline_p2p_bytes,
    serial_bus_bandwidth,
    tensor_parallel_backward_overlap,
    tensor_parallel_bytes,
)
from ..formulas.network import (
    all_gather_bytes,
    device_share_of_node_bandwidth,
    reduce_scatter_bytes,
    ring_bus_bandwidth,
)
from ..formulas.parallelism import pipeline_stage_layers
from ..formulas.selective_checkpointing import layer_matmul_shapes, op_sac_recomputed_matmuls
from ..formulas.tensors import layer_kind_firsts
from ..formulas.training_activations import ActivationSetup
from ..formulas.training_time import Buckets, data_parallel_comm
from ..result import Assumption
from ..specs import ModelSpec, TrainingWorkload
from ..specs.training import recomputes_whole_layer
from .speed import attention_width
from .training.setup import compute_bytes, expert_group, expert_tp

TP_COMM_OVERLAP_WHY = ("Megatron-Core ModelParallelConfig.tp_comm_overlap defaults to False (NVIDIA/Megatron-LM "
                       "@d98e8a6 megatron/core/model_parallel_config.py line 265): the tensor-parallel all-reduces "
                       "(or all-gather / reduce-scatter pairs under sequence parallelism) add to the compute "
                       "(formulas/model_parallel_time.py eq. (T3))")
TP_BACKWARD_OVERLAP_WHY = ("Megatron-LM LinearWithGradAccumulationAndAsyncCommunication (@9aad920 megatron/mpu/layers.py "
                           "lines 241-315; Megatron-Core allreduce_dgrad): each column-parallel linear's backward "
                           "collective runs while its GEMMs run (formulas/model_parallel_time.py eq. (T4))")
FSDP_BESIDE_MP_WHY = {
    False: ("formulas/model_parallel_time.py eq. (P7), p = 1: FSDP over the data-parallel group of the tensor-parallel "
            "shards gathers, re-gathers and reduce-scatters every micro-batch as plain FSDP does (eq. (7c)), "
            "overlapped by phase (eq. (8'))"),
    True: ("formulas/model_parallel_time.py eq. (P7), p > 1: each stage's units gathered once per step and kept "
           "(torchtitan reshard_after_forward_policy 'default' = not pp_enabled, @b5bcd76 "
           "torchtitan/distributed/fsdp.py lines 129-132; torch 2.13 pipelining/stage.py lines 844-847: no reshard "
           "after backward, no gradient sync), one reduce-scatter after the last micro-batch's backward "
           "(perform_reduce_grad, stage.py lines 1164-1191), not hidden; the fill waits for each stage's first-forward "
           "gathers in turn under 1F1B (eq. (P7): schedules.py lines 1064-1075, no unshard before the forward "
           "receive), for rank 0's first chunk's under Interleaved1F1B, which unshards every local stage at the "
           "step's start (eq. (P7'): _add_unshard_reshard, schedules.py lines 1285-1366)"),
}
DP_GRAD_OVERLAP_WHY = ("Megatron's default: gradients all-reduced once per optimizer step after the last micro-batch's "
                       "backward, not overlapped (SC21 megatron/training.py @6985e58 lines 369-374; Megatron-Core "
                       "DistributedDataParallelConfig.overlap_grad_reduce = False, @d98e8a6 line 18; "
                       "formulas/model_parallel_time.py eq. (P5))")

DP_GRAD_OVERLAP_GIVEN_WHY = (
    "given: Megatron --overlap-grad-reduce: each bucket of the grad buffer reduce-scattered as soon as the last "
    "micro-batch's backward has produced it (formulas/training_time.py eq. (7g)), timed on the first pipeline rank "
    "(bucketed, its embedding's bucket last) and on a later one (one bucket a model chunk, distributed_data_parallel.py "
    "lines 160-171 @d98e8a64, whose last backward ends one chunk's backward earlier), the backward taken to be the "
    "last micro-batch's on the stage")
DP_GATHER_NOT_HIDDEN_PP = (
    "; overlap_param_gather under pipeline parallelism not hidden: each rank's model chunks after the first are one "
    "bucket gathered only at their first forward (param_and_grad_buffer.py lines 555-558), and Bridge's "
    "align_param_gather / overlap_param_gather_with_optimizer_step are not modelled")


@lru_cache(maxsize=256)
def _layer_kind_loads(spec: ModelSpec) -> tuple[tuple[tuple[bool, str], ...], dict[tuple[bool, str], tuple[float, bool]]]:
    """Each decoder layer's kind (MoE, layer type) and, per kind, its forward FLOPs per token / 2 without the
    attention core's sequence term (its matmul weights and an MoE layer's top-k routed experts) and whether it runs
    an attention core: what ``_layer_loads`` reads of the model alone, memoized on it (``_layer_loads`` adds the
    sequence term of its ``seq_len``)."""
    st = ActivationSetup(batch=1, seq=1, full=True, adapted=frozenset(), rank=0, tp=1)
    has_moe = spec.moe is not None
    keys = tuple((bool(m) and has_moe, t) for m, t in zip(spec.moe_layers, spec.layer_types, strict=True))
    base: dict[tuple[bool, str], tuple[float, bool]] = {}
    for i, key in enumerate(keys):
        if key in base:
            continue
        moe = key[0]
        f = float(sum(a * b for _, a, b, _ in layer_matmul_shapes(spec, i, st)))
        if moe and spec.moe is not None:
            m = spec.moe
            f += m.experts_per_token * (3 if m.expert_gated else 2) * (m.latent_size or spec.hidden_size) \
                * m.expert_intermediate_size
        base[key] = (f, spec.layer_types[i] != "none")
    return keys, base


def _layer_loads(spec: ModelSpec, seq_len: int) -> tuple[list[float], float]:
    """Forward FLOPs per token / 2 of each decoder layer (its matmul weights, an MoE layer's top-k routed experts,
    and the attention core's 2 d s) and of the lm_head: the relative work of each pipeline stage."""
    keys, base = _layer_kind_loads(spec)
    width = attention_width(spec)
    # the same float operations in the same order as layer by layer: (matmuls [+ experts]) [+ 2 d s]
    memo = {k: f + 2.0 * width * seq_len if attends else f for k, (f, attends) in base.items()}
    return list(map(memo.__getitem__, keys)), float(spec.hidden_size * spec.vocab_size)


def stage_share(spec: ModelSpec, w: TrainingWorkload) -> float:
    """The slowest pipeline stage's share of one micro-batch's work (1 without pipeline parallelism): its layers
    (formulas/parallelism.py ``pipeline_stage_layers``: the workload's split), the last stage also the
    lm_head. Its time paces the 1F1B schedule (Narayanan et al. 2021 section 2.2)."""
    if w.pp <= 1:
        return 1.0
    loads, head = _layer_loads(spec, w.seq_len)
    stages = [sum(map(loads.__getitem__, r)) for r in pipeline_stage_layers(spec.num_layers, w.pp, w.pipeline_split,
                                                                              w.virtual_stages)]
    stages[-1] += head
    return max(stages) / sum(stages)


@lru_cache(maxsize=1024)
def column_parallel_block_flops(spec: ModelSpec, layer: int, tp: int, tokens: int) -> tuple[float, ...]:
    """FLOPs of each block's column-parallel input-gradient GEMMs (= weight-gradient GEMMs) on one rank of ``tp`` for
    ``tokens`` tokens, decoder layer ``layer`` (COLUMN_PARALLEL_BLOCKS: attention q/k/v, MLP gate/up): 2 T w_in
    w_out / t each (formulas/model_parallel_time.py eq. (T4)); memoized on its immutable arguments."""
    st = ActivationSetup(batch=1, seq=1, full=True, adapted=frozenset(), rank=0, tp=tp)
    mm = layer_matmul_shapes(spec, layer, st)
    return tuple(2.0 * tokens * sum(a * b for name, a, b, _ in mm if name in block) for block in COLUMN_PARALLEL_BLOCKS)


# The fused micro-pipelined pairs of one decoder layer under async tensor parallelism (formulas/model_parallel_time.py
# eq. (T5)): each block's linears and whether its forward matmul follows an all-gather (column-parallel: q/k/v,
# gate/up) or precedes a reduce-scatter (row-parallel: o, down); its input-gradient matmul in the backward pairs with
# the other collective. Which pairs inductor fuses (torch/_inductor/fx_passes/micro_pipeline_tp.py @cf30153c4c13,
# torch 2.13.0): an all-gather with every matmul consuming it (``_find_consumer_matmuls``, line 725: q, k and v share
# one fused op), but a reduce-scatter only where its input IS one matmul (``_find_producer_matmul``, lines 957-985:
# aten.mm / _scaled_mm, or one between two reshapes; anything else returns None). The backward reduce-scatter of a
# column-parallel block of several linears (q/k/v, gate/up as separate nn.Linear, torchtitan's Llama) scatters the
# sum of their input-gradient matmuls, so it is not fused and runs as a blocking NCCL reduce-scatter (eq. (T3)).
ASYNC_TP_UNFUSED = ("the backward reduce-scatter of a column-parallel block of several linears (its input gradient a "
                    "sum of matmuls: torch/_inductor/fx_passes/micro_pipeline_tp.py _find_producer_matmul fuses only "
                    "one matmul)")
ASYNC_TP_BLOCKS = ((frozenset({"q", "k", "v"}), True), (frozenset({"o"}), False), (frozenset({"gate", "up"}), True),
                   (frozenset({"down"}), False))
# the column-parallel linears of a decoder layer (formulas/selective_checkpointing.py layer_matmul_shapes names), per
# block: their input gradient is what the block's backward collective carries (Megatron fuses each block's into one).
# ASYNC_TP_BLOCKS' gathered blocks (those whose forward follows an all-gather): one table of the layer's blocks
COLUMN_PARALLEL_BLOCKS = tuple(names for names, gathered in ASYNC_TP_BLOCKS if gathered)


@lru_cache(maxsize=1024)
def micro_pipelined_layer(spec: ModelSpec, layer: int, tp: int, tokens: int, c_ag: float, c_rs: float,
                          gemm_rate: float, bandwidth: float, elem_bytes: float, recomputed: bool,
                          regathered: bool = False, early_stop: bool = False) -> tuple[float, float]:
    """Eq. (T5) over one decoder layer's pairs (``ASYNC_TP_BLOCKS``; the forward pairs twice in a ``recomputed``
    layer): (seconds the pairs add to the compute, seconds of collectives they carry). ``c_ag`` / ``c_rs``: one
    all-gather / reduce-scatter of the layer's T x h activations over B_tp; each matmul at ``gemm_rate`` FLOP/s at its
    full T rows, and t chunks of T/t rows at the ratio of their shape efficiencies (formulas/gemm_shapes.py eqs.
    (2)-(4), at ``bandwidth``); ``regathered``: an op-checkpointed layer, whose column-parallel blocks' all-gathers
    run again in the backward (eq. (T1''')), each fused with the block's recomputed matmuls
    (formulas/selective_checkpointing.py ``op_sac_recomputed_matmuls``: k, up), the lhs consumers inductor's pass
    finds (``_find_consumer_matmuls``, line 725; the weight-gradient matmuls read the gathered input as their rhs),
    or blocking where the block has none; ``early_stop``: a recomputed layer's forward stops before its last pair (the
    MLP output's reduce-scatter, eq. (T1''')); memoized on its immutable arguments."""
    st = ActivationSetup(batch=1, seq=1, full=True, adapted=frozenset(), rank=0, tp=tp)
    mm = layer_matmul_shapes(spec, layer, st)
    again = op_sac_recomputed_matmuls(spec, layer, st) if regathered else []
    added = carried = 0.0
    rows = max(1, tokens // tp)

    def chunked(w_in: int, w_out: int, n: int, k: int) -> tuple[float, float]:
        """(G, G') of one matmul of ``tokens`` rows, output width n, reduction k."""
        t_g = 2.0 * tokens * w_in * w_out / gemm_rate
        return t_g, t_g * (gemm_efficiency(tokens, n, k, gemm_rate, bandwidth, elem_bytes)
                           / gemm_efficiency(rows, n, k, gemm_rate, bandwidth, elem_bytes))

    for names, gathered in ASYNC_TP_BLOCKS:
        lin = [(a, b) for name, a, b, _ in mm if name in names]
        if not lin:
            continue
        for backward in (False, True):
            g = g_chunked = 0.0
            for w_in, w_out in lin:
                t_g, t_c = chunked(w_in, w_out, *((w_in, w_out) if backward else (w_out, w_in)))
                g, g_chunked = g + t_g, g_chunked + t_c
            c = c_ag if gathered != backward else c_rs
            last = (names, gathered) == ASYNC_TP_BLOCKS[-1]
            times = 2 if recomputed and not backward and not (early_stop and last) else 1
            # a column-parallel block of several linears: its input gradient is the sum of their matmuls, which
            # inductor's pass does not fuse with the reduce-scatter (ASYNC_TP_UNFUSED): c stays blocking
            unfused = backward and gathered and len(lin) > 1
            added += times * (c if unfused else micro_pipelined_pair_seconds(c, g, g_chunked, tp))
            carried += times * c
        if regathered and gathered:  # eq. (T1'''): the block's all-gather again in the backward
            pairs = [chunked(w_in, w_out, w_out, w_in) for name, w_in, w_out in again if name in names]
            g, g_chunked = sum(p[0] for p in pairs), sum(p[1] for p in pairs)
            added += micro_pipelined_pair_seconds(c_ag, g, g_chunked, tp) if pairs else c_ag
            carried += c_ag
    return added, carried


def dp_ring_bandwidth(w: TrainingWorkload, dense_bus: float, intra: float, network: float | None, dense: float,
                      experts: float, notes: list[Assumption]) -> float:
    """The bus bandwidth [B/s] a rank's gradient reduction sees as a whole (formulas/model_parallel_time.py eq.
    (P5e)): its ``dense`` ring share (estimate/duration.py ``dp_ring_shares``) at ``dense_bus``, then its ``experts``
    share on the expert data-parallel group (setup.py ``expert_group``: Megatron-Core's, expert_tp x ep ranks apart in
    its rank order) at that group's eq. (P5) bandwidth, the machine's ``network`` shared with the other expert groups'
    rings reducing at once. ``dense_bus`` where the experts move nothing, no network is known, or the expert groups
    do not tile the ranks as Megatron's grid does (hybrid sharding's within a machine). Its note goes to ``notes``."""
    edp = expert_group(w)
    stride = expert_tp(w) * w.ep
    if not experts or edp <= 1 or network is None or intra == float("inf") or edp * stride * w.pp != w.gpus:
        return dense_bus
    g = min(w.gpus, w.gpus_per_node)
    b_e = data_parallel_bus_bandwidth(intra, network, g, edp, stride, w.gpus)
    bus = serial_bus_bandwidth([(dense, dense_bus), (experts, b_e)])
    inside = min(machine_shares(edp, stride, g, w.gpus))
    notes.append(Assumption(
        "expert_dp_ring_bandwidth", b_e, True,
        f"the routed experts' gradients reduce over expert data-parallel groups of {edp} ranks {stride} apart "
        + ("(Megatron-Core's expert grid, order tp-cp-ep-dp-pp)" if w.megatron_grad_buffer
           else "(DeepSpeed-MoE's expert data-parallel groups, every ep-th rank of a stage: deepspeedai/DeepSpeed "
                "@edaa7221 deepspeed/utils/groups.py:350-372)")
        + f", {inside} of a group in each machine of {g}: "
        f"{g // inside} groups' rings share the machine's {network / 1e9:.4g} GB/s at once "
        f"(formulas/model_parallel_time.py eq. (P5)); after the dense share at {dense_bus / 1e9:.4g} GB/s the "
        f"reduction sees {bus / 1e9:.4g} GB/s as a whole (eq. (P5e))"))
    return bus


class FsdpStage(NamedTuple):
    """One pipeline stage's FSDP payloads on its data-parallel group (estimate/training/gather_units.py
    ``fsdp_collective_volume`` of the stage's states: tensor-parallel shards) [bytes], as eq. (P7) reads them."""

    forward: float  # all-gathered in the forward (every unit once)
    backward: float  # all-gathered again in the backward (0 under pipeline parallelism: the units stay gathered)
    reduced: float  # gradients reduce-scattered, in the reduce dtype
    units: int  # the stage's wrapped units U (its decoder layers)


def model_parallel_time(spec: ModelSpec, w: TrainingWorkload, stage_seconds: float, ring_bytes: float,
                        recomputed: Sequence[int], link_bandwidth: float | None, network: float | None,
                        notes: list[Assumption], warnings: list[str], gemm_rate: float = 0.0,
                        fsdp: FsdpStage | None = None, forward_share: float = 1.0 / 3.0,
                        memory_bandwidth: float = 0.0, op_checkpointed: Sequence[int] = (),
                        gather_bytes: float | None = None,
                        dp_buckets: tuple[Buckets, float, Buckets | None] | None = None,
                        expert_ring_share: float = 0.0) -> ModelParallelStep:
    """Eqs. (T1)-(P7) of formulas/model_parallel_time.py for one device of ``w``: ``stage_seconds`` its stage's
    compute per micro-batch, ``ring_bytes`` the whole model's reduced gradient bytes, each weighted by the ring
    share (g - 1) / g of its own data-parallel group (estimate/duration.py ``dp_ring_shares``: the dense and the
    expert groups apart), ``recomputed`` the fully recomputed layers, ``link_bandwidth`` the link inside a
    machine and ``network`` a machine's whole network (per direction); ``gemm_rate``: the FLOP/s its GEMMs run at
    (for eq. (T4) under ``w.tp_backward_overlap``); ``fsdp``: FSDP's payloads on the data-parallel group (eq. (P7)
    in place of the gradient all-reduce of eq. (P5); None: FSDP not timed beside tensor/pipeline parallelism),
    ``forward_share`` phi of eq. (8'); ``memory_bandwidth``: the device's [B/s], the roofline of eq. (T5)'s chunked
    matmuls (0: not sourced, roofline off); ``op_checkpointed``: the layers under op-level selective checkpointing,
    whose all-gathers run again in the backward under sequence parallelism (eq. (T1''')); ``gather_bytes``: the
    all-reduce's second half (the distributed optimizer's parameter all-gather), weighted as ``ring_bytes``, where
    it moves other bytes than the gradients (float8 parameters at 1 B, formulas/float8_training.py eq. T3; None:
    ``ring_bytes``); ``dp_buckets``: under Megatron's ``--overlap-grad-reduce``, estimate/duration.py
    ``megatron_grad_buckets`` (the first pipeline rank's buckets, its buffer over the average device's, a later
    rank's buckets), hidden as eq. (7g) says; ``expert_ring_share``: the routed experts' share of ``ring_bytes``,
    reduced over their own groups (``dp_ring_bandwidth``)."""
    tp, pp, v = w.tp, w.pp, w.virtual_stages if w.pp > 1 else 1
    n, g = w.gpus, min(w.gpus, w.gpus_per_node)
    dp = n // (tp * pp)  # the gradient reduction's ranks: dp x cp (formulas/context_parallel.py, the dp-cp group)
    # a context-parallel rank's tensor-parallel collectives and pipeline sends carry its seq / cp tokens
    tokens = w.micro_batch * local_tokens(w.seq_len, w.context_parallel)
    a = float(compute_bytes(w))
    ranges = pipeline_stage_layers(spec.num_layers, pp, w.pipeline_split, v)
    layers = max(len(r) for r in ranges)
    busiest = max(ranges, key=len)
    again = sum(map(busiest.__contains__, recomputed))  # (ints: True counts 1)
    regather_set = set(op_checkpointed) if tp > 1 and w.sequence_parallel else set()
    regathered = sum(map(regather_set.__contains__, busiest))
    inf = float("inf")
    intra = link_bandwidth if link_bandwidth else inf
    if not link_bandwidth:
        warnings.append(f"no interconnect bandwidth for {n} devices: tensor/pipeline/data-parallel communication is "
                        "not counted")
    crosses = [what for what, size in (("tensor-parallel", tp), ("pipeline", tp * pp), ("data-parallel", n))
               if size > g]
    if crosses and network is None and link_bandwidth:
        warnings.append(f"{', '.join(crosses)} traffic crosses machines of {g} (gpus_per_node) and no network "
                        "between them is given (--network, or an instance with a network): timed over the link "
                        "inside a machine, a lower bound of its time")
    net = network if network else None
    tp_nodes = -(-tp // g)
    b_tp = intra if tp_nodes == 1 or net is None or intra == inf else ring_bus_bandwidth(intra, tp_nodes, net)
    b_p2p = intra if tp * pp <= g or net is None or intra == inf else device_share_of_node_bandwidth(net, g)
    nodes = -(-n // g)
    # the dense gradients' dp-cp group: dp ranks tp apart (eq. (P5)); FSDP's collectives (eq. (P7)) run on it too
    b_dp = intra if nodes == 1 or net is None or intra == inf else \
        data_parallel_bus_bandwidth(intra, net, g, dp, tp, n)
    b_ring = dp_ring_bandwidth(w, b_dp, intra, net if nodes > 1 else None, 1.0 - expert_ring_share,
                               expert_ring_share, notes) if expert_ring_share and dp > 1 else b_dp
    # float8 tensor parallelism all-gathers the sequence-parallel activations and gradients in float8
    # (formulas/model_parallel_time.py eq. (T1'')) under the recipes whose weights FSDP2 gathers in float8 (one
    # predicate, float8_gathers_in_float8): torchao tensorwise (Float8ColwiseParallel casts the input tensorwise),
    # TransformerEngine (module/linear.py @d0067d0 lines 378-411: the local input is quantized, then
    # gather_along_first_dim with the input quantizer); torchao's rowwise recipes gather bf16
    float8_gather = w.sequence_parallel and w.float8 and float8_gathers_in_float8(w.float8_recipe)
    # torch's early-stopping non-reentrant checkpoint does not re-run the layer's last collective (eq. (T1'''))
    early = not recomputes_whole_layer(w.checkpoint_impl)
    fwd, bwd = tensor_parallel_bytes(layers, again, tokens, spec.hidden_size, a, tp,
                                     float8_gathered_element_bytes(w.float8_recipe) if float8_gather else None,
                                     regathered, early,
                                     w.sequence_parallel) if tp > 1 else (0.0, 0.0)
    hidden_s = regather = 0.0
    if tp > 1 and w.tp_backward_overlap and intra != inf and gemm_rate > 0:
        # eq. (T4): each layer of the busiest stage, once per layer kind (ModelSpec.layer_key: its linears)
        keys = layer_kind_firsts(spec)  # (each kind an int)
        kinds = tally(map(keys.__getitem__, busiest))
        first = {keys[i]: i for i in reversed(busiest)}
        for kind, count in kinds.items():
            extra, hid = tensor_parallel_backward_overlap(
                tokens, spec.hidden_size, a, tp, b_tp, column_parallel_block_flops(spec, first[kind], tp, tokens),
                gemm_rate, w.sequence_parallel)
            regather += count * extra
            hidden_s += count * hid
        bwd += regather
    pipelined = None
    if tp > 1 and w.tp_comm_overlap and w.sequence_parallel and intra != inf and gemm_rate > 0:
        # eq. (T5'): each fused all-gather + matmul / matmul + reduce-scatter pair of the busiest stage's layers; a
        # collective of eq. (T1) outside those pairs stays blocking
        one = float(tokens) * spec.hidden_size
        c_ag = all_gather_bytes(one * (1.0 if float8_gather else a), tp) / b_tp
        c_rs = reduce_scatter_bytes(one * a, tp) / b_tp
        again_set = set(recomputed)
        added = carried = 0.0
        # a layer's pairs depend on it only through its linears (its kind, ModelSpec.layer_key, as eq. (T4) above
        # reads them) and whether it is recomputed: each (kind, recomputed) once, added layer by layer in order
        keys = layer_kind_firsts(spec)
        pairs: dict[tuple[int, bool, bool], tuple[float, float]] = {}
        for i in busiest:
            like = (keys[i], i in again_set, i in regather_set)
            pair = pairs.get(like)
            if pair is None:
                pair = pairs[like] = micro_pipelined_layer(spec, like[0], tp, tokens, c_ag, c_rs, gemm_rate,
                                                           memory_bandwidth or inf, a, like[1], like[2], early)
            x, c = pair
            added, carried = added + x, carried + c
        pipelined = added + max(0.0, (fwd + bwd) / b_tp - carried)
    p2p = pipeline_p2p_bytes(tokens, spec.hidden_size, a, tp, v) if pp > 1 else 0.0
    # eq. (1), its (g - 1) / g in ring_bytes (0 with one rank per group): a reduce-scatter and an all-gather
    dp_b = (ring_bytes + (ring_bytes if gather_bytes is None else gather_bytes)) / (tp * pp)
    fsdp_comm = None
    if dp > 1 and fsdp is not None:  # eq. (P7): eq. (7c)'s collectives over the dp ranks at B_dp
        fsdp_comm = data_parallel_comm(dp, dp, fsdp.forward, fsdp.reduced, "grad_op" if w.fsdp == "grad_op" else "full",
                                       max(1, fsdp.units), b_dp, regathered_bytes=fsdp.backward)
        dp_b = 0.0
    elif dp > 1 and w.shard_stage >= 3:  # what eq. (P7) does not time (estimate/duration.py fsdp_stage)
        what = ("DeepSpeed ZeRO-3" if w.fsdp is None else "HSDP" if w.fsdp == "hybrid"
                else "parameter offload" if w.offload != "none" else "FSDP1 under pipeline parallelism")
        warnings.append(f"{what} beside tensor or pipeline parallelism: the data-parallel traffic is counted as one "
                        "gradient all-reduce of each device's shard per step; its parameter all-gathers are not "
                        "counted")
    elif dp > 1 and (w.zero >= 1 or w.fsdp is not None) and not w.megatron_grad_buffer:  # Megatron: eq. (7f)
        warnings.append("ZeRO-1/2 / SHARD_GRAD_OP beside tensor or pipeline parallelism: the data-parallel traffic "
                        "is counted as one gradient all-reduce (or reduce-scatter + all-gather) of each device's "
                        "shard per step")
    overlap = None
    if dp_buckets is not None and dp_b and fsdp_comm is None:
        overlap = DataParallelOverlap(*dp_buckets, (ring_bytes if gather_bytes is None else gather_bytes) / (tp * pp),
                                      w.overlap_param_gather)
    mp = model_parallel_step(stage_seconds, w.grad_accumulation, pp, v, fwd + bwd, b_tp, p2p, b_p2p, dp_b,
                             b_dp if fsdp_comm is not None else b_ring,
                             w.tp_comm_overlap, min(hidden_s, (fwd + bwd) / b_tp) if hidden_s else 0.0, fsdp_comm,
                             forward_share, pipelined, overlap)
    if tp > 1:
        given = w.given is not None and "tp_comm_overlap" in w.given
        notes.append(Assumption("tp_comm_overlap", w.tp_comm_overlap, not given,
                                TP_COMM_OVERLAP_WHY if not w.tp_comm_overlap else
                                (f"given: each all-gather + matmul and matmul + reduce-scatter runs as torch's "
                                 f"fused micro-pipeline of {tp} chunks (formulas/model_parallel_time.py eq. (T5)): "
                                 f"{pipelined * 1e3:.4g} ms per micro-batch exposed of {(fwd + bwd) / b_tp * 1e3:.4g} "
                                 "ms of collectives (the first or last chunk's matmul, the smaller matmuls' shape, "
                                 f"and, not fused, {ASYNC_TP_UNFUSED})" if pipelined is not None else
                                 "given: the collectives overlap the GEMMs, a micro-batch takes max(compute, "
                                 "tensor-parallel communication) (formulas/model_parallel_time.py eq. (T3'))")))
        given_b = w.given is not None and "tp_backward_overlap" in w.given
        notes.append(Assumption("tp_backward_overlap", w.tp_backward_overlap, not given_b,
                                TP_BACKWARD_OVERLAP_WHY + (f": {hidden_s * 1e3:.3g} ms per micro-batch hidden"
                                                           if w.tp_backward_overlap else
                                                           "; off: PyTorch tensor parallelism and Megatron's SC21 "
                                                           "code run every backward collective in line")))
        notes.append(Assumption("tp_comm_bytes_per_micro_batch", round(fwd + bwd), True,
                                f"formulas/model_parallel_time.py eq. (T1): {layers} layers x (2 + 2) all-reduces"
                                + (f" + 2 again in {again} recomputed layers" if again else "")
                                + (f" + 2 all-gathers again in the backward of {regathered} op-checkpointed layers "
                                   "(torchtitan's op SAC saves no all-gather output: eq. (T1'''))"
                                   if regathered else "")
                                + (f" + {round(regather)} B re-gathering each column-parallel linear's input in the "
                                   "backward (Megatron, eq. (T4))" if regather else "")
                                + f" of {w.micro_batch} x {tokens // w.micro_batch} x {spec.hidden_size} activations over {tp} "
                                + ("devices (all-gather + reduce-scatter pairs, sequence parallel"
                                   + (", the all-gathers in float8: torchao Float8ColwiseParallel / "
                                      "PrepareFloat8ModuleInput, eq. (T1''))" if float8_gather else ")")
                                   if w.sequence_parallel else "devices")
                                + (f", at {b_tp / 1e9:.4g} GB/s" if b_tp != inf else "")))
    if pp > 1:
        notes.append(Assumption("pipeline_schedule", "interleaved 1F1B" if v > 1 else "1F1B", w.virtual_stages == 1,
                                f"Narayanan et al. 2021 section 2.2: bubble (p - 1)/(v m) = {pp - 1}/({v} x "
                                f"{w.grad_accumulation}) = {mp.bubble:.3g} of the micro-batches' time "
                                "(formulas/model_parallel_time.py eq. (P4)); stages paced by the slowest "
                                f"({layers} layers{' + lm_head' if len(ranges[-1]) == layers else ''})"))
        notes.append(Assumption("pipeline_p2p_bytes_per_micro_batch", round(p2p), True,
                                "formulas/model_parallel_time.py eq. (P1): activations forward + gradients backward "
                                f"x {v} chunks, 1/{tp} per device (Megatron scatter/gather), blocking"
                                + (f", at {b_p2p / 1e9:.4g} GB/s" if b_p2p != inf else "")))
    if fsdp_comm is not None:
        notes.append(Assumption("fsdp_beside_model_parallel", "once per step" if pp > 1 else "every micro-batch",
                                True, FSDP_BESIDE_MP_WHY[pp > 1] + f": {round(mp.dp_bytes)} B per step and device "
                                f"over {dp} data-parallel ranks" + (f" at {b_dp / 1e9:.4g} GB/s" if b_dp != inf else "")
                                + f", {mp.dp_exposed_seconds * 1e3:.4g} ms of it not hidden"))
    elif overlap is not None:
        notes.append(Assumption("dp_grad_overlap", True, False,
                                DP_GRAD_OVERLAP_GIVEN_WHY + ("; the parameter all-gather hidden behind the first "
                                                             "forward the same way" if overlap.gather and pp == 1
                                                             else DP_GATHER_NOT_HIDDEN_PP if overlap.gather else "")
                                + f": {mp.dp_exposed_seconds * 1e3:.4g} ms of {mp.dp_seconds * 1e3:.4g} ms per step "
                                "not hidden"))
    elif dp_b:
        notes.append(Assumption("dp_grad_overlap", False, True, DP_GRAD_OVERLAP_WHY))
    if fsdp_comm is not None and pp > 1 and v > 3:
        warnings.append(f"{v} interleaved stages a rank: torch's runtime keeps at most 3 stages unsharded "
                        "(_add_unshard_reshard max_active_stages = 3) and gathers the evicted ones again within the "
                        "step; their FSDP all-gathers are counted once")
    if pp > 1 and w.grad_accumulation < pp:
        warnings.append(f"{w.grad_accumulation} micro-batches per step on {pp} pipeline stages: the bubble "
                        f"(p - 1)/(v m) = {mp.bubble:.2g} of the step (give grad_accumulation = micro-batches per "
                        "pipeline and step)")
    return mp
