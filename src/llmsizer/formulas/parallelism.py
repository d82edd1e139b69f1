"""Distributed training: what each device holds under data, ZeRO/FSDP, tensor, pipeline and expert parallelism.

- **ZeRO** (Rajbhandari et al. 2020, arXiv 1910.02054, section 5.1-5.3 and Figure 1): with N_d data-parallel
  ranks, stage 1 (P_os) partitions the optimizer states (and the fp32 master copy they include), stage 2
  (P_os+g) also the gradients, stage 3 (P_os+g+p) also the parameters:
  per device = (2 + 2 + K) Psi at stage 0, 2 Psi + 2 Psi + K Psi / N_d at 1, 2 Psi + (2 + K) Psi / N_d at 2,
  (2 + 2 + K) Psi / N_d at 3. PyTorch FSDP: FULL_SHARD = stage 3, SHARD_GRAD_OP = stage 2, HYBRID_SHARD =
  stage 3 within a node and replication across nodes (torch.distributed.fsdp ShardingStrategy docs).
  Stage 3 re-gathers each layer's parameters for its forward and backward: the gathered working set is the
  current layer plus one prefetched layer (FSDP ``forward_prefetch``/``BackwardPrefetch.BACKWARD_PRE``;
  DeepSpeed ``stage3_prefetch_bucket_size``), and the layer's full gradients exist until they are
  reduce-scattered.
- **Data parallel buckets**: PyTorch DDP copies gradients into flat all-reduce buckets of ``bucket_cap_mb``
  = 25 MB each; the buckets together hold every gradient a second time unless ``gradient_as_bucket_view=True``
  (torch DistributedDataParallel docs: "the saved memory size will be equal to the total gradients size").
  DeepSpeed ZeRO-1/2 reduce through ``reduce_bucket_size`` = 5e8 elements (DeepSpeed config docs).
- **Tensor parallel** (Shoeybi et al. 2019, arXiv 1909.08053, section 3): matrices split t ways, 1-D tensors
  replicated (``tensor_parallel.replicated_elements``).
- **Pipeline parallel** with the 1F1B schedule (Narayanan et al. 2021, arXiv 2104.04473, section 2.2.1 and
  Figure 4): stage i of p keeps the activations of min(p - i, m) micro-batches in flight (m = micro-batches
  per step); the first stage is the most loaded (p micro-batches of L/p layers: the activations of a whole
  model's worth of layers, Korthikanti et al. 2022 section 4.2.3).
- **FSDP2 under pipeline parallelism** (torch.distributed.pipelining @ torch 2.13, stage.py
  ``backward_maybe_with_nosync`` lines 844-847: every micro-batch's backward of an FSDPModule stage runs with
  ``set_reshard_after_backward(False)`` and ``set_requires_gradient_sync(False)``; ``perform_reduce_grad`` (line
  1164; lines 1175-1177) turns both back on once, after the last micro-batch): no reduce-scatter until the step's end, so the
  stage's unsharded gradients accumulate there, in FSDP2's reduce dtype when the policy sets one
  (fsdp/_fully_shard/_fsdp_param.py ``to_accumulated_grad_if_needed`` lines 802-813: ``unsharded_grad.to(
  self.reduce_dtype)``, then ``accumulate_unsharded_grad_if_needed`` adds each micro-batch's, lines 815-821), and
  the parameters stay gathered after the backward. torchtitan does not reshard after the forward either when PP is on
  (parallelize_llama.py @ 9dec370 lines 326-329 ``reshard_after_forward = False``, line 339 ``fully_shard(model,
  reshard_after_forward=not pp_enabled)``): every unit of the stage stays gathered for the whole step (eqs. PP1,
  PP2 below), where plain FSDP holds one layer and its prefetch.
- **torch's pipeline stage at its boundary** (torch.distributed.pipelining @ torch 2.13, stage.py): every stage but
  the last makes one gradient receive buffer per micro-batch (``_setup_backward_recv_info`` lines 322-331 over
  ``_create_grad_recv_info`` lines 2286-2316, ``_make_tensor_from_meta``), every stage but the first one
  activation receive buffer per micro-batch (``_setup_forward_recv_info`` lines 2243-2273); both are made at the
  first step and kept. Its forward cache keeps each in-flight micro-batch's stage output until that micro-batch's
  backward (``forward_one_chunk`` line 913, popped at line 966). Eq. (PP3) below, for every run of torch's
  pipelining (with FSDP or without); under an interleaved schedule each of a rank's stages keeps its own, as the
  first, a middle or the last stage of the whole chain (``pipeline_rank_boundary_bytes``).
- **Expert parallel** (Lepikhin et al. 2021, GShard, arXiv 2006.16668; Fedus et al. 2022 section 2.2): the E
  routed experts of a layer are split over ep ranks, E/ep each; tokens are exchanged all-to-all, so each rank
  processes about t k / ... tokens' worth of expert work on average, up to the capacity factor times that.
- **Offload**: ZeRO-Offload (Ren et al. 2021, arXiv 2101.06840, section 4) keeps the fp32 master weights,
  optimizer states and the gradients on the host and runs the optimizer there; ZeRO-Infinity parameter
  offload (Rajbhandari et al. 2021, arXiv 2104.07857) keeps the parameters there too, gathering each layer
  on demand.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from functools import lru_cache
from itertools import accumulate, repeat
from operator import mul, truediv

from ..errors import InputError

DDP_BUCKET_CAP_BYTES = 25 * 10**6  # torch DDP bucket_cap_mb default = 25 (MB)
DEEPSPEED_REDUCE_BUCKET_ELEMENTS = 500_000_000  # DeepSpeed zero_optimization.reduce_bucket_size default 5e8
FSDP_PREFETCH_LAYERS = 1  # one layer gathered ahead (forward_prefetch / BACKWARD_PRE)
MOE_CAPACITY_FACTOR = 1.25  # Switch Transformer (Fedus et al. 2022) section 2.2 training capacity factor


def shard(total_bytes: int, ways: int) -> int:
    """Bytes one of ``ways`` ranks holds of a flat partition (ZeRO pads to equal partitions: ceil)."""
    return math.ceil(total_bytes / max(1, ways))


def shard_each(totals: Iterable[int], ways: int) -> map[int]:
    """``shard(x, ways)`` of each of ``totals`` (the same true division and ceil, mapped in C: a per-layer list)."""
    return map(math.ceil, map(truediv, totals, repeat(max(1, ways))))


def zero_shards(stage: int, group: int) -> tuple[int, int, int]:
    """Partition factors (weights, gradients, optimizer states + master) for a ZeRO stage over ``group`` ranks.

    >>> zero_shards(2, 8)
    (1, 8, 8)
    """
    return (group if stage >= 3 else 1, group if stage >= 2 else 1, group if stage >= 1 else 1)


def expert_shard_group(shard_group: int, ep: int, tp: int = 1, etp: int = 1) -> int:
    """Ranks the ZeRO / distributed-optimizer / FSDP shards of one expert parameter span:
    ``shard_group x tp / (etp x ep)``, where ``shard_group`` is the dense parameters' (dp x cp, or a
    node's ranks under hybrid sharding) and ``etp`` the experts' own tensor-parallel size (Megatron-Core's
    expert_tensor_parallel_size; equal to ``tp`` unless stated otherwise: formulas/tensor_parallel.py
    ``resident_expert_tp``).

    Expert parallelism takes its ``ep`` ranks out of the data-parallel ranks, so each expert tensor exists on only
    ``shard_group / ep`` of them and can be partitioned over those alone:

    - Megatron-Core (NVIDIA/Megatron-LM @d98e8a64): expert_data_parallel_size = world / (expert_TP x EP x PP)
      (megatron/core/parallel_state.py:871-880; expert_TP defaults to TP, and the expert grid has cp = 1, :892);
      world = tp x pp x (dp x cp), so that is (dp x cp) x tp / (expert_TP x EP), (dp x cp) / EP at expert_TP = TP;
      the
      DDP's expert buffers use intra_expt_dp_group (distributed/distributed_data_parallel.py:285-289) and the
      distributed optimizer of the expert parameters shards over it (optimizer/__init__.py:1213-1245); with
      expert_TP = TP that is (dp x cp) / ep.
    - torchtitan (pytorch/torchtitan @b5bcd76): experts are fully_shard-ed over the 'efsdp' mesh of
      dp_shard x cp x tp / ep ranks (torchtitan/distributed/parallel_dims.py:280-282, :380; used as the experts'
      FSDP mesh in models/deepseek_v3/parallelize.py:63-68); its experts are not split by TP, so a rank's resident
      share, E / ep / (dp_shard x cp x tp / ep) = E / (tp x dp_shard x cp), is llmsizer's E / (tp x ep) over
      (dp x cp) / ep.
    - DeepSpeed-MoE (deepspeedai/DeepSpeed @edaa7221): the expert data-parallel groups take every ep-th rank of a
      pipeline stage (deepspeed/utils/groups.py:350-372), and ZeRO-1/2 partitions a MoE parameter group over its
      expert data-parallel group (runtime/zero/stage_1_and_2.py:780-787).

    ``etp x ep`` must divide ``shard_group x tp`` (a group of that many ranks exists only then: Megatron's expert grid
    and torchtitan's efsdp mesh are whole numbers of ranks); specs/training.py refuses a workload where it does not
    (hybrid sharding over a node whose data-parallel ranks ep does not divide; a stated etp outside Megatron's rule),
    and this raises ValueError rather than round.

    >>> expert_shard_group(64, 8), expert_shard_group(8, 8), expert_shard_group(16, 8), expert_shard_group(16, 32, 2, 1)
    (8, 1, 2, 1)
    >>> expert_shard_group(64, 8, 8, 1)  # Megatron, 512 GPUs TP8 PP1 EP8 ETP1: 512 / (1 x 8 x 1)
    64
    """
    ranks, ways = shard_group * max(1, tp), max(1, etp) * max(1, ep)
    if ranks % ways:
        raise ValueError(f"etp x ep = {ways} does not divide the {ranks} ranks the experts shard over")
    return ranks // ways


def zero_bytes_per_param(stage: int, group: int, weight_b: float = 2, grad_b: float = 2, k: float = 12) -> float:
    """Model-state bytes per parameter per device under ZeRO (section 5, Figure 1): e.g. (2 + 2 + 12)/N_d at 3.

    >>> zero_bytes_per_param(0, 64), zero_bytes_per_param(1, 64), zero_bytes_per_param(3, 64)
    (16.0, 4.1875, 0.25)
    """
    w, g, o = zero_shards(stage, group)
    return weight_b / w + grad_b / g + k / o


def torchtitan_stage_layer_counts(num_layers: int, stages: int, rule: str = "torchtitan") -> list[int]:
    """Decoder layers of each of ``stages`` pipeline stages as torchtitan splits them when no split points are given.

    - 'torchtitan-9dec370' (``generate_split_points``, torchtitan/parallelisms/pipelining_utils.py @ 9dec370,
      2024-12-26, lines 37-52): n // stages layers on the first stage, one more on each middle stage while the
      remainder lasts, the last stage what is left.
    - 'torchtitan' (``generate_llm_fqn_per_model_part``, torchtitan/distributed/pipeline_parallel.py @ b5bcd76,
      2026-08-21, lines 390-463, with ``pipeline_parallel_first_stage_less_layers`` = ``_last_stage_less_layers`` = 1,
      config/configs.py lines 197, 203): the embedding and the output each weigh one layer: (n + 2) // stages
      effective layers a stage, one more on the first (n + 2) % stages stages; the first and last give one up.

    >>> torchtitan_stage_layer_counts(126, 8, "torchtitan-9dec370"), torchtitan_stage_layer_counts(126, 8)
    ([15, 16, 16, 16, 16, 16, 16, 15], [15, 16, 16, 16, 16, 16, 16, 15])
    >>> torchtitan_stage_layer_counts(32, 4, "torchtitan-9dec370"), torchtitan_stage_layer_counts(32, 4)
    ([8, 8, 8, 8], [8, 9, 8, 7])
    """
    if stages < 1 or stages > num_layers:
        raise InputError(f"{stages} pipeline stages for {num_layers} layers: torchtitan needs 1 <= stages <= layers")
    if stages == 1:
        return [num_layers]
    if rule == "torchtitan-9dec370":
        base, extra = divmod(num_layers, stages)
        middle = [base + (1 if k < extra else 0) for k in range(stages - 2)]
        return [base, *middle, num_layers - base - sum(middle)]
    if rule != "torchtitan":
        raise InputError(f"unknown torchtitan split rule {rule!r}")
    base, extra = divmod(num_layers + 2, stages)
    counts = [base + (1 if k < extra else 0) for k in range(stages)]
    counts[0] -= 1
    counts[-1] -= 1
    return counts


@lru_cache(maxsize=64)
def pipeline_stage_layers(num_layers: int, pp: int, split: str = "even",
                          virtual: int = 1) -> tuple[Sequence[int], ...]:
    """Layers each of the ``pp`` pipeline ranks holds.

    'even' (Megatron-LM, DeepSpeed's ``partition_method='uniform'``): an even split, the remainder given to the
    first stages, one contiguous range a rank (``virtual`` not used: Megatron's interleaved chunks give a rank the
    same number of layers). The torchtitan rules (``torchtitan_stage_layer_counts``) split over ``pp * virtual``
    stages and give rank r the stages r, r + pp, ... (``stage_ids_this_rank`` style 'loop', pipelining_utils.py @
    9dec370 lines 102-112, pipeline_llama.py line 108): a rank's layers are its stages' layers in order (a range when
    ``virtual`` = 1, else a tuple of the layer indices).

    >>> [len(r) for r in pipeline_stage_layers(126, 8)]
    [16, 16, 16, 16, 16, 16, 15, 15]
    >>> [len(r) for r in pipeline_stage_layers(126, 8, "torchtitan-9dec370", 2)]
    [15, 16, 16, 16, 16, 16, 16, 15]
    """
    if split == "even":
        base, extra = divmod(num_layers, pp)
        out, start = [], 0
        for i in range(pp):
            n = base + (1 if i < extra else 0)
            out.append(range(start, start + n))
            start += n
        return tuple(out)
    counts = torchtitan_stage_layer_counts(num_layers, pp * virtual, split)
    starts = [0, *accumulate(counts)]
    chunks = [range(starts[k], starts[k + 1]) for k in range(pp * virtual)]
    if virtual == 1:
        return tuple(chunks)
    return tuple(tuple(i for s in range(virtual) for i in chunks[r + s * pp]) for r in range(pp))


@lru_cache(maxsize=64)
def megatron_interleaved_split(num_layers: int, pp: int, virtual: int) -> str | None:
    """The Megatron-Core setting that builds ``num_layers`` decoder layers over ``pp`` ranks of ``virtual`` model
    chunks each without a ``--pipeline-model-parallel-layout``, or None where none does (only a layout builds it).

    Megatron-Core @d98e8a64 megatron/core/transformer/transformer_block.py ``get_num_layers_to_build``: the plain
    split asserts (n + e) % pp == 0 (line 158; e = 1 for each of ``account_for_embedding_in_pipeline_split`` and
    ``account_for_loss_in_pipeline_split``) and the layers a rank holds % vp == 0 (line 178); with
    ``num_layers_in_first_pipeline_stage`` / ``_last_`` (each > 0 and % vp == 0, transformer_config.py lines
    2302-2335) the layers left over must divide over the stages left (line 133), a middle rank's share again % vp
    (transformer_config.py lines 2355-2368), and there are middle layers exactly when there are middle stages (lines
    2343-2346).

    >>> megatron_interleaved_split(80, 8, 5)
    'the even split'
    >>> megatron_interleaved_split(126, 8, 8)
    'account_for_embedding_in_pipeline_split + account_for_loss_in_pipeline_split'
    >>> megatron_interleaved_split(61, 4, 5) is None
    True
    """
    slots = ((0, "the even split"), (1, "account_for_embedding_in_pipeline_split"),
             (2, "account_for_embedding_in_pipeline_split + account_for_loss_in_pipeline_split"))
    for extra, name in slots:
        n = num_layers + extra
        if n % pp == 0 and (n // pp) % virtual == 0 and n // pp > 0:
            return name
    ends: list[int | None] = [None, *range(virtual, num_layers + 1, virtual)]
    for first in ends:
        for last in ends:
            if first is None and last is None:
                continue
            middle = num_layers - (first or 0) - (last or 0)
            stages = pp - (first is not None) - (last is not None)
            if middle < 0 or stages < 0 or bool(middle) != bool(stages):
                continue
            if stages and (middle % stages or (middle // stages) % virtual):
                continue
            return ", ".join(f"num_layers_in_{k}_pipeline_stage={v}" for k, v in (("first", first), ("last", last))
                             if v is not None)
    return None


def inflight_microbatches(stage: int, pp: int, micro_batches: int) -> int:
    """Micro-batches whose activations stage ``stage`` holds at once under 1F1B: min(pp - stage, m).

    >>> [inflight_microbatches(i, 4, 8) for i in range(4)]
    [4, 3, 2, 1]
    """
    return max(1, min(pp - stage, micro_batches))


def interleaved_1f1b_rank_ops(rank: int, pp: int, virtual: int, micro_batches: int) -> list[tuple[str, int, int]]:
    """The computations rank ``rank`` of ``pp`` runs under torch's ScheduleInterleaved1F1B with ``virtual`` stages
    a rank and ``micro_batches`` per step, in order: ('F' or 'B', local stage 0..virtual-1, micro-batch).

    torch 2.13 distributed/pipelining/schedules.py: the warmup forwards, (v - 1) x micro-batches a round + 2 per
    hop from the last rank, at most v m (``_get_warmup_ops`` lines 2872-2888); then one forward and one backward
    each step, then the remaining backwards (``_get_1f1b_rank_ops`` lines 2778-2838); the forward of step k on
    local stage (k // r) mod v, the backward on v - 1 - ((k - warmup) // r) mod v, r the micro-batches a round
    (m // max(1, m // pp): lines 2935-2936, 2981-2993); each local stage takes its micro-batches in order.

    >>> [op[:2] for op in interleaved_1f1b_rank_ops(0, 2, 2, 2)]
    [('F', 0), ('F', 0), ('F', 1), ('F', 1), ('B', 1), ('B', 1), ('B', 0), ('B', 0)]
    """
    per_round = micro_batches // max(1, micro_batches // pp)
    total = virtual * micro_batches
    warmup = min((virtual - 1) * per_round + 2 * (pp - 1 - rank), total)
    fwd_next = [0] * virtual
    bwd_next = [0] * virtual
    out: list[tuple[str, int, int]] = []

    def forward(step: int) -> None:
        c = (step // per_round) % virtual
        out.append(("F", c, fwd_next[c]))
        fwd_next[c] += 1

    def backward(step: int) -> None:
        c = virtual - 1 - ((step - warmup) // per_round) % virtual
        out.append(("B", c, bwd_next[c]))
        bwd_next[c] += 1

    for step in range(total):  # warmup forwards, then forward + backward pairs
        forward(step)
        if step >= warmup:
            backward(step)
    for step in range(total, total + warmup):  # the remaining backwards
        backward(step)
    return out


@lru_cache(maxsize=256)
def interleaved_backward_states(rank: int, pp: int, virtual: int, micro_batches: int
                                ) -> tuple[tuple[int, bool, tuple[int, ...], tuple[bool, ...]], ...]:
    """At each backward of rank ``rank`` under ScheduleInterleaved1F1B (``interleaved_1f1b_rank_ops``): (its local
    stage c, whether it is c's first backward, the micro-batches each local stage has forwarded and not backwarded
    besides this one, whether each local stage holds FSDP2 accumulated gradients besides c). A stage's unsharded
    gradients accumulate from its first backward and are reduce-scattered (freed) right after its last one: torch
    2.13 schedules.py ``_add_reduce_grad`` lines 1252-1282 schedules a stage's REDUCE_GRAD just after its m-th
    backward, run by ``perform_reduce_grad`` (stage.py lines 1164-1186: FSDP2's post_backward with gradient sync on).

    >>> list(interleaved_backward_states(0, 2, 2, 2)[:3])
    [(1, True, (2, 1), (False, False)), (1, False, (2, 0), (False, False)), (0, True, (1, 0), (False, False))]
    """
    held = [0] * virtual
    done = [0] * virtual
    out = []
    for kind, c, _ in interleaved_1f1b_rank_ops(rank, pp, virtual, micro_batches):
        if kind == "F":
            held[c] += 1
            continue
        held[c] -= 1
        accumulating = tuple(k != c and 0 < done[k] < micro_batches for k in range(virtual))
        out.append((c, done[c] == 0, tuple(held), accumulating))
        done[c] += 1
    return tuple(out)


@lru_cache(maxsize=256)
def interleaved_peak_inflight(rank: int, pp: int, virtual: int, micro_batches: int, chunk_bytes: tuple[int, ...],
                              local: int | None = None) -> tuple[int, ...]:
    """The micro-batches each local stage of rank ``rank`` holds forwarded (its forward cache, the one about to be
    backwarded included) at the rank's backward where their saved activations are the most under
    ScheduleInterleaved1F1B, ``chunk_bytes[c]`` a micro-batch's on local stage c: sum over c of held_c x
    chunk_bytes[c] is the rank's in-flight activations at that point, and the largest of any point of the step (a
    forward only adds, a backward only frees: the most is held just before a backward). ``local``: only the
    backwards of that local stage (the last one's: where its loss runs). Walked in the order of
    ``interleaved_1f1b_rank_ops`` (torch 2.13 schedules.py ``_get_warmup_ops`` lines 2872-2888,
    ``_get_1f1b_rank_ops`` lines 2778-2838) through ``interleaved_backward_states``; 1F1B's one stage a rank holds
    ``min(pp - rank, m)`` (``inflight_microbatches``), which interleaving does not: rank pp - 1's first local stage
    forwards a whole round before the rank's first backward (tests/training/test_pipeline_interleaved_fsdp2.py reads
    the saved activations of a real interleaved step).

    >>> interleaved_peak_inflight(1, 2, 2, 4, (1, 1)), interleaved_peak_inflight(0, 2, 2, 4, (1, 1))
    ((2, 1), (3, 2))
    """
    if virtual <= 1:
        return (inflight_microbatches(rank, pp, micro_batches),)
    best: tuple[int, ...] = ()
    for c, _, held, _ in interleaved_backward_states(rank, pp, virtual, micro_batches):
        if local is not None and c != local:
            continue
        now = tuple(h + (k == c) for k, h in enumerate(held))
        if not best or sum(map(mul, now, chunk_bytes)) > sum(map(mul, best, chunk_bytes)):
            best = now
    return best


@lru_cache(maxsize=256)
def interleaved_forward_accumulating(rank: int, pp: int, virtual: int, micro_batches: int) -> tuple[bool, ...]:
    """Which local stages hold accumulated gradients at some forward of rank ``rank`` (a stage between its first
    and its last backward when the rank runs a forward) under ScheduleInterleaved1F1B."""
    done = [0] * virtual
    seen = [False] * virtual
    for kind, c, _ in interleaved_1f1b_rank_ops(rank, pp, virtual, micro_batches):
        if kind == "B":
            done[c] += 1
        else:
            for k in range(virtual):
                seen[k] = seen[k] or 0 < done[k] < micro_batches
    return tuple(seen)


def pipeline_rank_chunks(num_layers: int, pp: int, split: str, virtual: int, rank: int) -> tuple[range, ...]:
    """The layers of each of rank ``rank``'s ``virtual`` stages under a torchtitan split (stages r, r + pp, ...:
    ``pipeline_stage_layers``), in local-stage order."""
    counts = torchtitan_stage_layer_counts(num_layers, pp * virtual, split)
    starts = [0, *accumulate(counts)]
    return tuple(range(starts[rank + s * pp], starts[rank + s * pp + 1]) for s in range(virtual))


def ddp_bucket_bytes(grad_bytes: int, bucket_view: bool = False) -> int:
    """Persistent flat all-reduce buckets of PyTorch DDP: a second copy of every gradient (0 with bucket views)."""
    return 0 if bucket_view else grad_bytes


def reduce_bucket_bytes(grad_elements: int, grad_b: int) -> int:
    """DeepSpeed ZeRO-1/2 gradient reduction buffer: min(reduce_bucket_size, gradient elements) elements."""
    return min(DEEPSPEED_REDUCE_BUCKET_ELEMENTS, grad_elements) * grad_b


def pipeline_fsdp2_gathered_bytes(unit_weight_bytes: list[int], shard_ways: int) -> int:
    """Eq. (PP1): FSDP2 under pipeline parallelism keeps every unit of the stage gathered through the step: the
    units' whole unsharded bytes (module doc), beside the rank's shard, which FSDP2 keeps in its own storage (the
    all-gather output is a separate full-size buffer: ``FSDPParam.alloc_all_gather_outputs``) [bytes]."""
    return sum(unit_weight_bytes) if shard_ways > 1 else 0


def pipeline_fsdp2_accumulated_grad_bytes(stage_trained_elements: int, grad_b: int) -> int:
    """Eq. (PP2): the stage's unsharded gradients accumulated over the micro-batches before the one reduce-scatter
    of the step, ``grad_b`` bytes each (the reduce dtype's: fp32 under torchtitan's MixedPrecisionPolicy) [bytes]."""
    return stage_trained_elements * grad_b


def pipeline_stage_boundary_bytes(stage: int, pp: int, micro_batches: int, inflight: int,
                                  boundary_bytes: int) -> int:
    """Eq. (PP3): what torch's pipeline stage ``stage`` of ``pp`` holds at its boundary beside its layers'
    activations, with ``micro_batches`` per step, ``inflight`` of them forwarded and not yet backwarded, each
    boundary tensor (a micro-batch's stage input or output, the residual stream) ``boundary_bytes``: a stage that is
    not the last keeps m gradient receive buffers and its in-flight outputs; a stage that is not the first keeps m
    activation receive buffers, of which the in-flight ones are its first layer's saved input (counted with the
    activations) [bytes] (module doc; tests/training/test_pipeline_buffers.py reads them from a real Schedule1F1B).

    >>> [pipeline_stage_boundary_bytes(k, 4, 8, min(4 - k, 8), 1) for k in range(4)]
    [12, 16, 16, 7]
    """
    if pp <= 1:
        return 0
    grad_recv_and_outputs = micro_batches + inflight if stage < pp - 1 else 0
    act_recv = micro_batches - inflight if stage > 0 else 0
    return (grad_recv_and_outputs + act_recv) * boundary_bytes


@lru_cache(maxsize=256)
def pipeline_rank_boundary_bytes(rank: int, pp: int, virtual: int, micro_batches: int, boundary_bytes: int,
                                 idle: bool = False) -> int:
    """Eq. (PP3) over every torch pipeline stage rank ``rank`` of ``pp`` holds [bytes]. With ``virtual`` = 1 its one
    stage under Schedule1F1B, ``min(pp - rank, m)`` micro-batches in flight (``inflight_microbatches``). With
    ``virtual`` > 1 (ScheduleInterleaved1F1B) each local stage c is a PipelineStage of its own, stage rank + c pp of
    pp x virtual (torch 2.13 schedules.py lines 453-474: every stage of the rank prepares its forward and backward
    infrastructure for the step's micro-batches; stage.py ``is_first`` / ``is_last`` lines 237-248 compare its
    index with the whole chain's): the first of the chain makes no activation receive buffers, the last no
    gradient ones. The sum is the largest over the rank's backwards in the order of ``interleaved_1f1b_rank_ops``,
    each local stage's in-flight micro-batches those its forward cache holds then (the one being backwarded
    included: stage.py pops it at line 966). ``idle``: nothing in flight (the optimizer step).

    >>> pipeline_rank_boundary_bytes(0, 4, 1, 8, 1), pipeline_rank_boundary_bytes(1, 2, 2, 4, 1)
    (12, 12)
    """
    if virtual <= 1:
        inflight = 0 if idle else inflight_microbatches(rank, pp, micro_batches)
        return pipeline_stage_boundary_bytes(rank, pp, micro_batches, inflight, boundary_bytes)
    chain = pp * virtual

    def rank_bytes(held: Sequence[int]) -> int:
        return sum(pipeline_stage_boundary_bytes(rank + c * pp, chain, micro_batches, h, boundary_bytes)
                   for c, h in enumerate(held))

    if idle:
        return rank_bytes([0] * virtual)
    held = [0] * virtual
    best = 0
    for kind, c, _ in interleaved_1f1b_rank_ops(rank, pp, virtual, micro_batches):
        if kind == "F":
            held[c] += 1
            continue
        best = max(best, rank_bytes(held))
        held[c] -= 1
    return best


def gathered_layer_bytes(layer_weight_bytes: list[int], shard_ways: int) -> int:
    """ZeRO-3/FSDP working set on top of the shards: the largest layer gathered whole plus one prefetched layer,
    minus the shard of them each rank already holds."""
    if not layer_weight_bytes or shard_ways <= 1:
        return 0
    largest = sorted(layer_weight_bytes, reverse=True)[: 1 + FSDP_PREFETCH_LAYERS]
    return sum(largest) - sum(shard(x, shard_ways) for x in largest)


def serving_stage_layers(num_layers: int, pp: int, engine: str) -> tuple[range, ...]:
    """The decoder layers each of ``pp`` serving pipeline stages builds (no layer-partition environment variable).

    vLLM 0.19.1 ``vllm/distributed/utils.py`` ``get_pp_indices`` (lines 95-140): ``num_layers // pp`` each, the
    remainder one each to the stages before the last, from the second-to-last backwards (``partitions[-i] += 1`` for
    i in 2 .. remainder + 1: the last holds the final norm and lm_head); ``VLLM_PP_LAYER_PARTITION`` (lines 111-122)
    overrides it, not modelled. SGLang 0.5.23 ``sglang/srt/distributed/utils.py`` ``get_pp_indices`` (lines
    110-150): the remainder one each to the last ``remainder`` stages (``SGLANG_PP_LAYER_PARTITION`` not modelled).

    >>> [len(r) for r in serving_stage_layers(61, 2, "vllm")], [len(r) for r in serving_stage_layers(61, 2, "sglang")]
    ([31, 30], [30, 31])
    >>> [len(r) for r in serving_stage_layers(126, 4, "vllm")]
    [31, 32, 32, 31]
    """
    if not 1 <= pp <= num_layers:
        raise InputError(f"pipeline_parallel {pp} must be between 1 and the model's {num_layers} decoder layers")
    base, extra = divmod(num_layers, pp)
    counts = [base] * pp
    if engine == "sglang":
        for i in range(pp - extra, pp):
            counts[i] += 1
    else:
        for i in range(2, extra + 2):
            counts[-i] += 1
    starts = [0, *accumulate(counts)]
    return tuple(range(starts[k], starts[k + 1]) for k in range(pp))


def serving_stage_weight_bytes(layer_bytes: Sequence[int], layers: range, stage: int, pp: int, embedding: int,
                               lm_head: int, final_norm: int, other: int, tied: bool) -> int:
    """Weight bytes one device of serving pipeline stage ``stage`` of ``pp`` holds [B]:

        W_s = sum(layer_bytes[i] for i in layers) + [s = 0 or (tied and s = pp - 1)] embedding
              + [s = pp - 1] (lm_head + final_norm) + [s = 0] other                                        (PP1)

    ``layer_bytes``: each decoder layer's bytes on one device (after tensor parallelism); ``embedding``,
    ``lm_head``, ``final_norm``: those tensors' bytes on one device; ``other``: the rest outside the decoder layers
    (a vision tower, a projector), taken on the first stage. vLLM 0.19.1 ``models/llama.py`` lines 373-391: the first
    rank builds ``embed_tokens`` (and the last too when the embeddings are tied, its ``lm_head`` then
    ``tie_weights`` to it, lines 538-553), the last rank the final ``norm`` and ``lm_head``; every other rank a
    ``PPMissingLayer`` (``models/utils.py`` lines 613-658, ``make_layers`` builds only the stage's layers);
    ``models/deepseek_v2.py`` lines 1167-1187, 1342-1350 the same (untied).

    >>> serving_stage_weight_bytes([10] * 4, range(0, 2), 0, 2, 100, 100, 1, 7, False)
    127
    >>> serving_stage_weight_bytes([10] * 4, range(2, 4), 1, 2, 100, 0, 1, 7, True)
    121
    """
    last = stage == pp - 1
    return (sum(layer_bytes[i] for i in layers) + (embedding if stage == 0 or (tied and last) else 0)
            + ((lm_head + final_norm) if last else 0) + (other if stage == 0 else 0))
