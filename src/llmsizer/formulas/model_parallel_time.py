"""Step time of tensor- and pipeline-parallel training (Megatron-LM): tensor-parallel collectives, pipeline
point-to-point transfers, the pipeline bubble and the data-parallel gradient all-reduce between model replicas.

Units: bytes [B], bandwidth [B/s] per direction, time [s]. Pure functions; byte counts of the ring collectives
from formulas/network.py eqs. (1)-(2).

Per device, per micro-batch of b sequences of s tokens (T = b s), hidden size h, activations of a bytes, on a
pipeline stage of L_s decoder layers, tensor-parallel degree t, pipeline stages p, v model chunks per device
(interleaved schedule), m micro-batches per pipeline and optimizer step, d data-parallel replicas.

Tensor parallelism (Shoeybi et al. 2019, arXiv 1909.08053, section 3 and Figure 4): the attention block and the MLP
block each end with an all-reduce of their [b, s, h] output in the forward pass (operator g) and begin with one of
the input gradient in the backward pass (operator f): 2 + 2 all-reduces per layer. Full activation recomputation
runs each checkpointed layer's forward again inside the backward, its two all-reduces included (Korthikanti et al.
2022, arXiv 2205.05198, section 5: the recomputed forward repeats the tensor-parallel communication). Under
sequence parallelism (Korthikanti et al. 2022 section 4.2.2, Figure 5) each all-reduce becomes an all-gather
(g) and a reduce-scatter (g-bar) of the same tensor, (t-1)/t T h a each, the same bytes as the ring all-reduce::

    V_tp = (4 L_s + 2 c_s) 2 (t - 1)/t T h a,   c_s = checkpointed layers of the stage         (T1)

torchao's float8 tensor parallelism (which torchtitan applies to float8 linears: ``PrepareFloat8ModuleInput``,
``Float8ColwiseParallel``, ``Float8RowwiseParallel``, pytorch/ao @0e0fba8 ``torchao/float8/float8_tensor_parallel.py``)
casts the sequence-parallel input to float8 before its all-gather ("the float8 cast happens before the all-gather
(i.e. Shard -> Replicate)", ``PrepareFloat8ModuleInput``), and casts the gradient of the reduce-scattered output to
float8 before the all-gather that is the reduce-scatter's backward (``Float8RowwiseParallel._prepare_output_fn``:
``redistribute`` then ``_NoopFwToFloat8BwDynamic``, "fwd noop bwd cast"); the reduce-scatters (forward outputs,
input gradients) stay in a bytes. Every pair then moves (t - 1)/t T h (1 + a)::

    V_tp = (4 L_s + 2 c_s) (t - 1)/t T h (a_g + a),   a_g = 1 (float8) or a                     (T1'')

torchtitan's op-level selective checkpointing (formulas/selective_checkpointing.py; torchtitan @820504e
``parallelize_llama.py`` lines 217-270) saves the outputs of every other matmul, the SDPA kernels and the
reduce-scatters (``_save_list``), not the all-gathers: under sequence parallelism the gathered [T, h] input of each
column-parallel block (q/k/v, gate/up), which the backward needs for those linears' weight gradients and for the
recomputed k / up matmuls, is gathered again in the backward. Under torch.compile the partitioner recomputes a
collective that a user checkpoint region tags for recomputation (torch 2.13 ``torch/_functorch/partitioners.py``:
``force_save_collectives``, lines 1973-1986, forces a save only where ``must_recompute`` is False, and
``must_recompute``, lines 166-170, is True for PREFER_RECOMPUTE; pytorch/pytorch PR #147561). Each of the c_o
op-checkpointed layers of the stage adds two all-gathers to the backward::

    V_tp += 2 c_o (t - 1)/t T h a_g                                                              (T1''')

Measured on two gloo ranks (tests/training/test_op_sac_tp_collectives.py): a torchtitan-style Llama block under that
policy runs 4 all-gathers and 2 reduce-scatters in its backward, 2 + 2 being the backward's own. Under full
recomputation with torch's non-reentrant checkpoint (early stop, as formulas/selective_checkpointing.py
``full_recompute_flops`` skips the last matmul) the recomputed forward stops before the MLP output's collective,
which only the residual add reads: 2 all-gathers and 1 reduce-scatter again (1 all-reduce without sequence
parallelism), measured the same way (4 all-gathers, 3 reduce-scatters); (T1)'s 2 c_s holds for the reentrant
checkpoint (Megatron-LM's ``CheckpointFunction``), which re-runs the whole layer. Without sequence
parallelism (all-reduces) the recomputed all-reduces are not counted.
    c_tp = V_tp / B_tp                                                                          (T2)

B_tp is the link inside a machine when the t devices share one (t <= g devices per machine); a tensor-parallel group
across machines runs its ring at min(B_intra, B_node) (formulas/network.py eq. (11)). The collectives are NOT
overlapped with compute (T3): Megatron-Core's ``tp_comm_overlap`` defaults to False (NVIDIA/Megatron-LM @d98e8a6
``megatron/core/model_parallel_config.py`` line 265, "If true, allows overlapping of Linear layer execution with
tensor parallel communication collectives"), and the SC21 code has no such option; the all-reduce output is the
next operation's input. With the overlap on (Megatron ``--tp-comm-overlap``; torchtitan ``--experimental.
enable_async_tensor_parallel``, which sets inductor's ``_micro_pipeline_tp`` to split each all-gather + matmul and
matmul + reduce-scatter into chunks that overlap, torchtitan @9dec370 ``torchtitan/parallelisms/
parallelize_llama.py`` lines 201-204) a micro-batch takes the longer of its compute and its collectives (an upper
bound of the gain: every collective hidden)::

    t_stage + c_tp   (T3, default)          max(t_stage, c_tp)   (T3', overlapped)

Under sequence parallelism (T3') is replaced by the micro-pipeline the fused ops actually run (T5). torch's
symmetric-memory ops (torch/distributed/_symmetric_memory/__init__.py @cf30153c4c13, torch 2.13.0), which inductor's
micro-pipeline pass puts in place of each all-gather + matmul and matmul + reduce-scatter: ``_fused_all_gather_matmul``
(line 853) -> ``_fused_all_gather_matmul_impl`` (line 545) -> ``_pipelined_all_gather_and_consume`` (line 296) ->
``_pipelined_multi_all_gather_and_consume`` (line 146): the gathered input's T rows are cut into t shards of T/t rows;
the local shard's matmul runs first (line 269) while nothing has arrived, then each of the t - 1 remote shards is
copied and consumed in turn on two alternating streams (lines 271-280), so the copies overlap the matmuls except
for the last shard's matmul, which follows the last copy. ``_fused_matmul_reduce_scatter`` (line 1206) ->
``_fused_matmul_reduce_scatter_impl`` (line 1254: ``x.chunk(group.size())``, line 1315) ->
``_pipelined_produce_and_all2all`` (line 325): each of the t - 1 remote ranks' chunk matmuls runs, then its copy
(lines 367-432), and the local chunk is computed last (line 438): the first chunk's matmul has nothing to overlap.
With G the pair's matmul at its full shape (T rows), G' the same FLOPs as t matmuls of T/t rows each at the
efficiency of their shape (formulas/gemm_shapes.py eqs. (2)-(4)) and c the collective's time over B_tp, a two-stage
pipeline of t matmuls of G'/t and t - 1 copies of c/(t - 1) ends at max(G', c + G'/t) (the flow-shop bound: either
the matmuls back to back, or the first matmul, every copy, then one more matmul), so each pair exposes::

    x_pair = max(0, c - G' (t - 1)/t) + (G' - G)                                                  (T5)
    t_micro = t_stage + sum over the pairs of x_pair                                             (T5')

Per layer the pairs are the four blocks' forward matmuls (q/k/v and gate/up after an all-gather, o and down before a
reduce-scatter) and their input-gradient matmuls in the backward (o and down after the all-gather of the output
gradient, q/k/v and gate/up before the reduce-scatter of the input gradient), and the forward pairs again in a
recomputed layer: the collectives of eq. (T1). Not counted: the local shard's copy into the symmetric buffer and the
barrier before the first matmul (lines 258-263: "giving up the chance to overlap"), and the reduce-scatter's
summation of the t partial results (``reduce_partials``), both memory-bound passes of one shard / one output.
Without sequence parallelism (all-reduces, no fused op) (T3') stays.

Megatron-LM overlaps the backward collective of each column-parallel linear (the attention block's QKV, the MLP's
first projection) with that linear's own backward GEMMs (``LinearWithGradAccumulationAndAsyncCommunication``,
NVIDIA/Megatron-LM @9aad920 ``megatron/mpu/layers.py`` lines 241-315, the code of Korthikanti et al. 2022; on by
default, ``--no-async-tensor-model-parallel-allreduce`` turns it off, ``megatron/arguments.py`` lines 564-569; in
Megatron-Core always, ``allreduce_dgrad`` @d98e8a6 ``megatron/core/tensor_parallel/layers.py`` lines 694-710 and
1144-1146; not in the SC21 code of Narayanan et al. 2021, @6985e58, which predates it, 2021-09-02 commit 16c9044).
Without sequence parallelism the all-reduce of the input gradient dX = dY W (operator f's backward) is launched
asynchronously and runs while the weight-gradient GEMM dW = dY^T X runs (lines 277-283, 312-313). Under sequence
parallelism the linear saved only its 1/t sequence shard of X: the backward all-gathers X again while the
input-gradient GEMM runs (lines 245-269), then reduce-scatters dX while the weight-gradient GEMM runs (lines
285-310); the all-gather that is the backward of g-bar (``_ReduceScatterToSequenceParallelRegion.backward``,
``megatron/mpu/mappings.py`` lines 244-245) stays blocking. With F_b the FLOPs of block b's column-parallel GEMMs
(the input- and weight-gradient GEMMs have the same FLOPs, 2 T h w_out / t), R the rate the GEMMs run at, c_x the
time of one collective over B_tp, per layer::

    without sequence parallelism:  hidden = sum_b min(c_AR, F_b / R),  no extra bytes
    with sequence parallelism:     hidden = sum_b [min(c_AG, F_b / R) + min(c_RS, F_b / R)],
                                   backward + 2 all-gathers of (t - 1)/t T h a (the re-gathered inputs)       (T4)
    t_micro = t_stage + c_tp - L_s hidden                                                                    (T3'')

Korthikanti et al. 2022 section 6.2 names this overlap as why full recomputation costs 39 % of a 22B layer instead of
the expected 33 % (Table 4: the backward's all-reduces hide behind the weight-gradient GEMMs, the recomputed
forward's do not). Checked against Table 4 in tests/formulas/test_sequence_parallel_time.py.

Pipeline parallelism (Narayanan et al. 2021, arXiv 2104.04473, section 2.2): with per-micro-batch forward and
backward times t_f, t_b of one stage, the 1F1B schedule takes (m + p - 1)(t_f + t_b) per optimizer step, a bubble
fraction (p - 1)/m; the interleaved schedule with v model chunks per device shrinks the bubble to (p - 1)/(v m)
(section 2.2.2, "the pipeline bubble time [is] t_pb^int = (p-1)(t_f + t_b)/v") at v times the point-to-point
communication. Each stage boundary sends the stage's output forward and receives its gradient backward, T h a bytes
each; with the scatter/gather optimisation (section 4.1, on by default: SC21 commit 6985e58
``megatron/arguments.py`` lines 607-609 ``--no-scatter-gather-tensors-in-pipeline``) each of the t tensor-parallel
ranks sends 1/t of it over its own network card. The transfers block (``megatron/p2p_communication.py`` @6985e58
lines 120-130: ``req.wait()`` then ``torch.cuda.synchronize()``), so they add to the micro-batch::

    V_p2p = 2 v T h a / t                                                                       (P1)
    c_p2p = V_p2p / B_p2p,   B_p2p = B_intra when t p <= g (the stages share a machine), else B_node / g   (P2)
    t_micro = t_stage + c_tp + c_p2p   (T3' overlapped: max(t_stage, c_tp) + c_p2p)              (P3)
    t_pipe = (m + (p - 1)/v) t_micro                                                            (P4)

Data parallelism across the d model replicas: each device all-reduces the gradients of its own shard of the
model, G / (t p) bytes, once per optimizer step after the last micro-batch's backward, NOT overlapped (Megatron's
default: the SC21 ``train_step`` calls ``allreduce_gradients()`` after ``forward_backward_func`` returns,
``megatron/training.py`` @6985e58 lines 369-374; Megatron-Core ``DistributedDataParallelConfig.overlap_grad_reduce``
defaults to False, ``megatron/core/distributed/distributed_data_parallel_config.py`` @d98e8a6 line 18). Every rank of
a machine reduces at the same time, each in its own group's ring, and those rings share the machine's network: a ring
that leaves a machine carries, over each machine boundary, what one rank sends, V = 2 (d - 1)/d S (formulas/network.py
eq. (1); NCCL's rings leave each machine once per channel, eq. (11)), so g / g_d rings of g_d ranks each in the
machine send (g / g_d) V through its NICs. g_d is the group's ranks inside one machine: Megatron-Core builds its
groups from one rank order, 'tp-cp-ep-dp-pp' by default (NVIDIA/Megatron-LM @d98e8a64 megatron/core/parallel_state.py
line 617; ``RankGenerator``, :465-550), so the dense gradients' dp-cp group (:963) is d x cp ranks t apart inside a
pipeline stage's t x cp x d consecutive ranks, and the expert data-parallel group (:1457, the expert grid of :887-895,
cp = 1, its tp the experts' etp) d_e ranks etp x ep apart; g_d is formulas/expert_parallel_time.py eq. (E3')'s n of
such a strided group (the smallest over the machines, the slowest ring)::

    c_dp = 2 (d - 1)/d (G / (t p)) / B_dp,
    B_dp = B_intra (the group inside one machine), else min(B_intra, g_d B_node / g)             (P5)
    t_step = t_pipe + c_dp                                                                      (P6)

Megatron-Core reduces the dense buffers' buckets, then the expert buffers' (distributed_data_parallel.py:664-665,
:677-678; each collective synchronous without ``overlap_grad_reduce``, param_and_grad_buffer.py:682-685), so a rank
whose reduction has shares V_i on groups of bus bandwidth B_i takes sum V_i / B_i, the bandwidth its whole volume
sees::

    B_dp = sum_i V_i / sum_i (V_i / B_i)                                                        (P5e)

With Megatron's ``--overlap-grad-reduce`` the reduce-scatter c_rs of (P5) runs bucket by bucket beside the last
micro-batch's backward (formulas/training_time.py eq. (7g)). Only pipeline rank 0 cuts its buffer into buckets; the
later ranks keep one bucket per model chunk, their reduction "not on the critical path" (NVIDIA/Megatron-LM
@d98e8a64 distributed_data_parallel.py lines 160-171; megatron/training/training.py lines 2504-2515: every chunk after
the first one bucket too), since rank s ends its last backward s chunk-backwards before rank 0 (the pipeline's
drain). With T_b = (1 - phi) t_micro the stage's backward of one micro-batch, x(B, c, T) eq. (7g) for buckets B,
rank 0's buckets B_0 (its buffer a share sigma_0 of the average device's, the embedding's shard on top) and a later
rank's B_1::

    x_rs = max(x(B_0, sigma_0 c_rs, T_b), x(B_1, c_rs, T_b) - T_b / v)
    c_dp' = x_rs + (x(B_0, sigma_0 c_ag, phi t_micro) with --overlap-param-gather and p = 1, else c_ag)         (P5')

the all-gather c_ag of the distributed optimizer hidden behind the first forward as eq. (7g) says without pipeline
parallelism; with it, each rank's chunks after the first are gathered only at their own first forward
(param_and_grad_buffer.py lines 555-558), which this does not time: c_ag stays whole. t_step = t_pipe + c_dp'.

FSDP / ZeRO-3 over the d replicas (torchtitan's 2D / 3D runs: ``fully_shard`` over the data-parallel mesh of the
tensor-parallel DTensors) replaces the gradient all-reduce of (P5) by FSDP's own collectives, each on one data-parallel
group: every unit of the device's stage all-gathers its tensor-parallel shard of the parameters (a unit's bytes are
already 1/t), and the gradients of the stage's shard are reduce-scattered. Their payloads, in their own dtypes, are
formulas/training_time.py eq. (7c)'s W, W_b and G for the units of the stage (estimate/training/gather_units.py
``fsdp_collective_volume`` on the stage's states), at B_dp of (P5):

- without pipeline parallelism (p = 1) every micro-batch gathers, re-gathers and reduce-scatters as plain FSDP does,
  overlapped by phase with the micro-batch (its compute and its tensor-parallel collectives, which run in line on
  the compute stream) as eq. (8'), phi the forward's share::

      t_micro' = max(phi t_micro + a_1, c_f + phi t_micro / U) + max((1 - phi) t_micro + r_U, c_b + (1 - phi) t_micro / U)

- under torch's pipeline stages (p > 1) each stage gathers once per step and reduce-scatters once per step: torchtitan
  does not reshard after the forward when PP is on (``reshard_after_forward_policy`` 'default' -> ``not
  pp_enabled``, pytorch/torchtitan @b5bcd76 ``torchtitan/distributed/fsdp.py`` lines 129-132, "For PP, by default do
  not reshard after forward to avoid per-microbatch all-gathers"; the policy's default, ``config/configs.py`` line
  145; @9dec370 ``parallelize_llama.py`` lines 326-339), torch's pipeline stage runs every micro-batch's backward
  with ``set_reshard_after_backward(False)`` and ``set_requires_gradient_sync(False)`` (torch 2.13
  ``distributed/pipelining/stage.py`` ``backward_maybe_with_nosync`` lines 844-847), and ``perform_reduce_grad``
  (lines 1164-1191), which the schedule calls after the last micro-batch's backward (``schedules.py`` line 960,
  1177; 2607 for the multi-stage schedules), turns both on and runs every unit's ``post_backward``: the one
  reduce-scatter of the step, after the last compute; the reduce-scatter is not hidden (the first stage's is the
  step's last collective). When the gathers run decides what the pipeline fill waits for (torch 2.13, read in
  ``distributed/pipelining/schedules.py``, ``distributed/fsdp/_fully_shard/``):

  * ``Schedule1F1B`` and ``ScheduleGPipe`` (one stage a rank) issue no unshard of their own: a stage's all-gathers
    run in FSDP2's pre-forward hooks of its first forward, which starts only once that micro-batch's activations
    have arrived (``schedules.py`` lines 1064-1075: ``_wait_batch_p2p`` of the forward receive, then
    ``forward_one_chunk``; GPipe lines 905-915); on a GPU the root pre-forward makes the all-gather streams wait for
    the current stream, which holds that receive (``_fsdp_state.py`` ``_root_pre_forward`` lines 151-154). So
    stage s gathers only after stage s - 1's first forward, each stage hides its gathers behind its own first
    forward as the forward of eq. (8') and no more, and the waits add up along the fill: the last stage starts
    its first micro-batch sum_s e_s late, every stage's e_s on the critical path (P7)::

        e_s = max(phi t_micro + a_1, c_f + phi t_micro / U) - phi t_micro,    c_fsdp = p e_s + c_b,   W_b = 0

  * ``ScheduleInterleaved1F1B`` (v stages a rank, run by ``_PipelineScheduleRuntime``) lowers its schedule with
    ``_add_unshard_reshard`` (lines 1285-1366): before a rank's first action it issues an UNSHARD of each of the
    next ``max_active_stages`` = 3 local stages it will run (every local stage when v <= 3), each an
    ``unshard(async_op=True)`` of every FSDP module of the stage (lines 2489-2500), on the current stream
    (``_fsdp_param_group.py`` ``get_all_gather_streams`` lines 116-126), and a FORWARD first waits for its stage's
    handles (``_assert_unsharded``, lines 2394-2405, 2516-2517). Every rank's all-gathers thus start with the step,
    one after the other on its data-parallel link, and run while the rank waits for the fill: rank r > 0 has its
    first chunk's by the time its input arrives, rank 0 waits for the whole of its first chunk's (c_f / v, none
    of it hidden behind compute), and its chunk j must be gathered ((j + 1) c_f / v after the start) by the time
    micro-batch 0 comes round to it, after j p chunk forwards of phi t_micro / v::

        c_fsdp = max(c_f / v, c_f - (v - 1) p phi t_micro / v) + c_b                                    (P7')

  Measured on 4 gloo ranks (PP 2 x FSDP 2, a slowed all-gather and a slowed forward):
  tests/training/test_pipeline_fsdp_gather_fill.py. The stage with the most FSDP bytes is taken for every stage
  (p e_s: an upper bound of the sum when stages differ). With v > 3 the runtime re-gathers evicted stages within
  the step (more all-gathers than counted here).

Ring latency (the alpha term) is not counted: per-layer messages are T h a = tens to hundreds of MB at the
micro-batch sizes of these runs (formulas/network.py, bandwidth term dominant).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

from ..errors import InputError
from .expert_parallel_time import machine_shares
from .network import all_gather_bytes, allreduce_bytes, reduce_scatter_bytes
from .training_time import Buckets, DataParallelComm, bucketed_seconds, micro_step_seconds


def tensor_parallel_bytes(layers: int, recomputed_layers: int, tokens: int, hidden: int, act_bytes: float,
                          tp: int, gather_bytes: float | None = None, regathered_layers: int = 0,
                          early_stop: bool = False, sequence_parallel: bool = False) -> tuple[float, float]:
    """Eq. (T1): (forward, backward) bytes each tensor-parallel rank sends per micro-batch of ``tokens`` tokens on a
    stage of ``layers`` layers, ``recomputed_layers`` of them recomputed in full (their forward collectives run
    again in the backward); ``gather_bytes``: under sequence parallelism, the element size of the all-gather half of
    each pair when it differs from ``act_bytes`` (eq. (T1''): float8 all-gathers); ``regathered_layers``: layers
    under op-level selective checkpointing with sequence parallelism, whose two all-gathers run again in the
    backward (eq. (T1''')); ``early_stop``: the recomputation stops before the layer's last collective (the MLP
    output's reduce-scatter, or its all-reduce without sequence parallelism: torch's non-reentrant checkpoint, whose
    backward needs nothing that collective produces; formulas/selective_checkpointing.py ``full_recompute_flops``);
    ``sequence_parallel``: the pairs are all-gathers and reduce-scatters (implied by ``gather_bytes``).

    >>> tensor_parallel_bytes(2, 2, 10, 10, 2, 2)   # one all-reduce of 200 B over 2 ranks sends 200 B
    (800.0, 1600.0)
    >>> tensor_parallel_bytes(2, 2, 10, 10, 2, 2, gather_bytes=1)   # all-gathers of 100 B, reduce-scatters of 200 B
    (600.0, 1200.0)
    >>> tensor_parallel_bytes(2, 0, 10, 10, 2, 2, regathered_layers=2)   # + 2 x 2 all-gathers of 100 B
    (800.0, 1200.0)
    >>> tensor_parallel_bytes(2, 2, 10, 10, 2, 2, early_stop=True, sequence_parallel=True)   # less 2 reduce-scatters
    (800.0, 1400.0)
    >>> tensor_parallel_bytes(2, 2, 10, 10, 2, 2, early_stop=True)   # less 2 all-reduces
    (800.0, 1200.0)
    """
    if layers < 0 or not 0 <= recomputed_layers <= layers or not 0 <= regathered_layers <= layers:
        raise InputError("stage layers must not be negative, recomputed and regathered layers between 0 and the "
                         "stage's layers")
    gather = all_gather_bytes(float(tokens) * hidden * (act_bytes if gather_bytes is None else gather_bytes), tp)
    if gather_bytes is None:
        one = allreduce_bytes(float(tokens) * hidden * act_bytes, tp)
        last = reduce_scatter_bytes(float(tokens) * hidden * act_bytes, tp) if sequence_parallel else one
    else:
        last = reduce_scatter_bytes(float(tokens) * hidden * act_bytes, tp)
        one = gather + last
    again = (2.0 * one - last) if early_stop else 2.0 * one
    return 2.0 * layers * one, 2.0 * layers * one + recomputed_layers * again + 2.0 * regathered_layers * gather


def tensor_parallel_backward_overlap(tokens: int, hidden: int, act_bytes: float, tp: int, bandwidth: float,
                                     block_flops: Sequence[float], gemm_rate: float, sequence_parallel: bool
                                     ) -> tuple[float, float]:
    """Eq. (T4) for one layer: (extra backward bytes, seconds of collectives hidden behind GEMMs) when Megatron
    overlaps each column-parallel linear's backward collective with its GEMMs; ``block_flops``: the FLOPs of each
    block's column-parallel input-gradient (= weight-gradient) GEMMs per micro-batch of ``tokens`` tokens on one
    rank, run at ``gemm_rate`` FLOP/s; ``bandwidth``: B_tp [B/s].

    >>> tensor_parallel_backward_overlap(10, 10, 2, 2, 100.0, [1e3, 1e3], 1e3, False)   # 2 x min(2 s, 1 s)
    (0.0, 2.0)
    >>> tensor_parallel_backward_overlap(10, 10, 2, 2, 100.0, [1e3, 1e3], 1e3, True)   # + 2 all-gathers of 100 B;
    (200.0, 4.0)
    >>> # each block hides its all-gather (1 s) behind the input-gradient GEMM, its reduce-scatter behind the other
    """
    if tp < 1 or bandwidth <= 0 or gemm_rate <= 0 or any(f < 0 for f in block_flops):
        raise InputError("tp must be >= 1, bandwidth and GEMM rate positive, GEMM FLOPs not negative")
    if tp == 1:
        return 0.0, 0.0
    one = float(tokens) * hidden * act_bytes
    gemms = [f / gemm_rate for f in block_flops if f > 0]  # a block without column-parallel linears has no collective
    if not sequence_parallel:
        c_ar = allreduce_bytes(one, tp) / bandwidth
        return 0.0, sum(min(c_ar, g) for g in gemms)
    gather = all_gather_bytes(one, tp)
    c_ag, c_rs = gather / bandwidth, reduce_scatter_bytes(one, tp) / bandwidth
    return len(gemms) * gather, sum(min(c_ag, g) + min(c_rs, g) for g in gemms)


def micro_pipelined_pair_seconds(comm_seconds: float, gemm_seconds: float, chunked_gemm_seconds: float,
                                 tp: int) -> float:
    """Eq. (T5): the seconds one fused collective + matmul pair adds to the compute it holds: ``comm_seconds`` c,
    ``gemm_seconds`` G (the matmul at its full shape, already in the stage's compute), ``chunked_gemm_seconds`` G'
    (the same matmul as ``tp`` chunks of 1/t of its rows).

    >>> micro_pipelined_pair_seconds(1.0, 8.0, 8.0, 8)   # the copies hide behind 7/8 of the matmuls
    0.0
    >>> micro_pipelined_pair_seconds(8.0, 8.0, 8.0, 8)   # c + G/t - G: the last chunk's matmul after the last copy
    1.0
    >>> micro_pipelined_pair_seconds(10.0, 8.0, 10.0, 8)  # chunks at a worse shape: 2 s more, 1.25 s of copy exposed
    3.25
    """
    if tp < 1 or min(comm_seconds, gemm_seconds, chunked_gemm_seconds) < 0:
        raise InputError("tp must be >= 1 and the seconds not negative")
    if tp == 1:
        return 0.0
    return max(0.0, comm_seconds - chunked_gemm_seconds * (tp - 1) / tp) + (chunked_gemm_seconds - gemm_seconds)


def pipeline_p2p_bytes(tokens: int, hidden: int, act_bytes: float, tp: int = 1, virtual: int = 1,
                       scatter_gather: bool = True) -> float:
    """Eq. (P1): bytes one device sends and receives over stage boundaries per micro-batch (activations forward,
    their gradients backward, once per model chunk); each of the ``tp`` ranks carries 1/tp with scatter/gather.

    >>> pipeline_p2p_bytes(10, 10, 2, tp=2, virtual=3)
    600.0
    """
    if tp < 1 or virtual < 1:
        raise InputError("tp and virtual stages must be >= 1")
    return 2.0 * virtual * tokens * hidden * act_bytes / (tp if scatter_gather else 1)


def bubble_fraction(stages: int, micro_batches: int, virtual: int = 1) -> float:
    """Narayanan et al. 2021 section 2.2: the pipeline bubble as a share of the ideal time, (p - 1)/(v m).

    >>> bubble_fraction(8, 48, 2)
    0.07291666666666667
    """
    if stages < 1 or micro_batches < 1 or virtual < 1:
        raise InputError("stages, micro-batches and virtual stages must be >= 1")
    return (stages - 1) / (virtual * micro_batches)


def data_parallel_bus_bandwidth(intra: float, network: float | None, devices_per_node: int, group: int, stride: int,
                                world: int) -> float:
    """Eq. (P5): the bus bandwidth of one data-parallel ring of ``group`` ranks ``stride`` apart (the dense dp-cp
    group: t; the expert data-parallel group: etp x ep) among the ``world`` ranks, every rank of a machine of
    ``devices_per_node`` g reducing at once in its own group: the link inside one machine where the group stays in
    it, else min(link, g_d ``network`` / g), g_d the group's ranks in a machine (eq. (E3'), the fewest).

    >>> data_parallel_bus_bandwidth(300e9, 200e9, 8, 4, 8, 32)   # t = 8: one rank per machine, its 25 GB/s card
    25000000000.0
    >>> data_parallel_bus_bandwidth(300e9, 200e9, 8, 2, 8, 16)   # EP 8 on 2 x 8: 8 rings of 2 share the machine's
    25000000000.0
    >>> data_parallel_bus_bandwidth(300e9, 200e9, 8, 4, 2, 32)   # t = 2, p = 4: each stage's groups in one machine
    300000000000.0
    """
    if intra <= 0 or devices_per_node < 1 or group < 1 or stride < 1 or world < group * stride:
        raise InputError("link bandwidth must be positive, devices per node, group and stride >= 1, the group inside "
                         "the world")
    inside = min(machine_shares(group, stride, devices_per_node, world))
    if inside >= group:
        return intra
    if network is None or network <= 0:
        raise InputError(f"a data-parallel group of {group} ranks across machines needs their network bandwidth "
                         "(per machine)")
    return min(intra, inside * network / devices_per_node)


def serial_bus_bandwidth(shares: Sequence[tuple[float, float]]) -> float:
    """Eq. (P5e): the bus bandwidth a reduction of volumes V_i run one after the other, each at its own bus
    bandwidth B_i (``shares``: (V_i, B_i)), sees as a whole: sum V_i / sum (V_i / B_i); with no volume, the first B.

    >>> serial_bus_bandwidth([(1.5e9, 25e9), (1.8e9, 3.125e9)])   # 0.06 s + 0.576 s for 3.3 GB
    5188679245.28302
    """
    if not shares or any(v < 0 or b <= 0 for v, b in shares):
        raise InputError("volumes must not be negative, bandwidths positive, at least one share")
    total = sum(v for v, _ in shares)
    if total == 0:
        return shares[0][1]
    return total / sum(v / b for v, b in shares)


def pipeline_fill_gather_seconds(stages: int, virtual: int, forward_seconds: float, fsdp: DataParallelComm) -> float:
    """Eqs. (P7), (P7'): the seconds of FSDP2's all-gathers the pipeline fill waits for in a step of ``stages`` ranks,
    ``virtual`` stages a rank (1: ``Schedule1F1B`` / ``ScheduleGPipe``; more: ``ScheduleInterleaved1F1B``), from a
    rank's forward per micro-batch phi t_micro [s] (all its stages) and its gathers (``fsdp``: c_f the forward's
    all-gathers of all its stages, a_1 the first unit's, U its units).

    >>> from llmsizer.formulas.training_time import data_parallel_comm
    >>> c = data_parallel_comm(2, 2, 100.0, 0.0, "full", 1, 200.0, regathered_bytes=0.0)   # c_f = a_1 = 0.25 s
    >>> pipeline_fill_gather_seconds(4, 1, 1.0, c)   # each of the 4 stages waits for its own, one after the other
    1.0
    >>> pipeline_fill_gather_seconds(4, 2, 1.0, c)   # prefetched at the step's start: rank 0's first chunk's only
    0.125
    """
    if stages < 1 or virtual < 1 or forward_seconds < 0:
        raise InputError("stages and virtual stages must be >= 1, forward seconds not negative")
    t_f, c_f = forward_seconds, fsdp.forward_seconds
    if virtual == 1:
        return stages * (max(t_f + fsdp.first_seconds, c_f + t_f / fsdp.units) - t_f)
    return max(c_f / virtual, c_f - (virtual - 1) * stages * t_f / virtual)


class ModelParallelStep(NamedTuple):
    """Eqs. (T1)-(P6) for one device: per micro-batch and per optimizer step [s, B]."""

    stage_seconds: float  # t_stage: the stage's compute per micro-batch
    tp_seconds: float  # c_tp per micro-batch (T2): its traffic time, overlapped or not
    p2p_seconds: float  # c_p2p per micro-batch (P2), blocking
    dp_seconds: float  # c_dp per optimizer step (P5), after the backward
    bubble_seconds: float  # (p - 1)/v t_micro per optimizer step (P4)
    step_seconds: float  # t_step (P6)
    tp_bytes: float  # per micro-batch
    p2p_bytes: float  # per micro-batch
    dp_bytes: float  # per optimizer step
    bubble: float  # (p - 1)/(v m)
    tp_bandwidth: float
    p2p_bandwidth: float
    dp_bandwidth: float
    micro_batches: int
    tp_overlap: bool = False  # eq. (T3'): the collectives overlap the GEMMs
    tp_hidden_seconds: float = 0.0  # eq. (T4): per micro-batch, backward collectives hidden behind their GEMMs
    # per optimizer step, the data-parallel time compute does not hide: c_dp (P5), FSDP's exposed part (P7)
    dp_exposed_seconds: float = 0.0
    fsdp: bool = False  # the data-parallel traffic is FSDP's all-gathers and reduce-scatters (P7), not (P5)
    # eq. (T5'): per micro-batch, what the fused micro-pipelined pairs add to the compute (None: not timed so; with
    # tp_overlap, eq. (T3') then)
    tp_pipelined_seconds: float | None = None

    @property
    def exposed_tp_seconds(self) -> float:
        """The tensor-parallel time a micro-batch waits for: c_tp (T3) less what Megatron's backward overlap hides
        (T3''), or what compute does not hide (T3')."""
        if self.tp_overlap and self.tp_pipelined_seconds is not None:
            return self.tp_pipelined_seconds
        if self.tp_overlap:
            return max(0.0, self.tp_seconds - self.stage_seconds)
        return self.tp_seconds - self.tp_hidden_seconds

    @property
    def tp_seconds_per_step(self) -> float:
        return self.micro_batches * self.tp_seconds

    @property
    def p2p_seconds_per_step(self) -> float:
        return self.micro_batches * self.p2p_seconds

    @property
    def tp_bytes_per_step(self) -> float:
        return self.micro_batches * self.tp_bytes

    @property
    def p2p_bytes_per_step(self) -> float:
        return self.micro_batches * self.p2p_bytes

    @property
    def compute_seconds_per_step(self) -> float:
        return self.micro_batches * self.stage_seconds

    @property
    def comm_share(self) -> float:
        """Share of the step spent in communication compute does not hide: m (c_tp + c_p2p) + c_dp over t_step
        (with eq. (T3') only the tensor-parallel time beyond the compute)."""
        comm = self.micro_batches * (self.exposed_tp_seconds + self.p2p_seconds) + self.dp_exposed_seconds
        return comm / self.step_seconds if self.step_seconds > 0 else 0.0


class DataParallelOverlap(NamedTuple):
    """Megatron's ``--overlap-grad-reduce`` beside tensor / pipeline parallelism (eq. (P5')): the buckets of eq. (7g)
    of formulas/training_time.py."""

    first: Buckets  # the first pipeline rank's buckets (its embedding's last), the rank that ends the backward
    first_scale: float  # its buffer over the average device's (the embedding's shard on top)
    later: Buckets | None  # a later rank's (one bucket a model chunk; None with one stage)
    gather_bytes: float  # the distributed optimizer's all-gather: its part of dp_bytes
    gather: bool  # --overlap-param-gather


def model_parallel_step(stage_seconds: float, micro_batches: int, stages: int, virtual: int, tp_bytes: float,
                        tp_bandwidth: float, p2p_bytes: float, p2p_bandwidth: float, dp_bytes: float,
                        dp_bandwidth: float, tp_overlap: bool = False,
                        tp_hidden_seconds: float = 0.0, fsdp: DataParallelComm | None = None,
                        forward_share: float = 1.0 / 3.0,
                        tp_pipelined_seconds: float | None = None,
                        dp_overlap: DataParallelOverlap | None = None) -> ModelParallelStep:
    """Eqs. (P3)-(P7): one optimizer step of one device from its stage's compute per micro-batch and the bytes it
    moves (tensor-parallel and point-to-point per micro-batch, data-parallel per step) at their bandwidths;
    ``tp_hidden_seconds``: the tensor-parallel time per micro-batch Megatron's backward overlap hides (eq. (T4));
    ``fsdp``: FSDP's collectives on the data-parallel group (formulas/training_time.py eq. (7c) of the stage's
    payloads at B_dp; ``dp_bytes`` then 0), every micro-batch without pipeline parallelism, once per step with it
    (eq. (P7)); ``forward_share``: phi of eq. (8'); ``tp_pipelined_seconds``: with ``tp_overlap``, what the fused
    micro-pipelined pairs add per micro-batch (eq. (T5'), in place of eq. (T3')'s max; None: eq. (T3'));
    ``dp_overlap``: Megatron's bucketed reduction (eq. (P5')), of which only what the last backward does not hide is
    added.

    >>> s = model_parallel_step(1.0, 8, 4, 1, 10.0, 100.0, 0.0, 1.0, 0.0, 1.0)
    >>> round(s.step_seconds, 4), round(s.bubble_seconds, 4)
    (12.1, 3.3)
    >>> from llmsizer.formulas.training_time import data_parallel_comm
    >>> c = data_parallel_comm(2, 2, 100.0, 200.0, "full", 4, 100.0, regathered_bytes=0.0)  # c_f 0.5 s, c_b 1 s
    >>> f = model_parallel_step(3.0, 8, 4, 1, 0.0, 1.0, 0.0, 1.0, 0.0, 1.0, fsdp=c)  # (8 + 3) x 3 s + 4 a_1 + c_b
    >>> f.step_seconds, f.dp_exposed_seconds   # each stage's gathers (0.5 s) hide behind its first forward (1 s)
    (34.5, 1.5)
    >>> # but its a_1 (0.125 s), and the 4 stages' first forwards run one after the other (eq. (P7))
    """
    if stage_seconds < 0 or micro_batches < 1 or stages < 1 or virtual < 1:
        raise InputError("stage seconds must not be negative; micro-batches, stages, virtual stages >= 1")
    for b in (tp_bandwidth, p2p_bandwidth, dp_bandwidth):
        if b <= 0:
            raise InputError(f"bandwidth must be positive, got {b}")
    c_tp = tp_bytes / tp_bandwidth
    if not 0.0 <= tp_hidden_seconds <= c_tp * (1.0 + 1e-12):
        raise InputError("hidden tensor-parallel seconds must be between 0 and the tensor-parallel time")
    c_p2p = p2p_bytes / p2p_bandwidth if stages > 1 else 0.0
    c_dp = dp_bytes / dp_bandwidth
    if tp_pipelined_seconds is not None and tp_pipelined_seconds < 0:
        raise InputError("pipelined tensor-parallel seconds must not be negative")
    micro = (stage_seconds + tp_pipelined_seconds if tp_overlap and tp_pipelined_seconds is not None
             else max(stage_seconds, c_tp) if tp_overlap
             else stage_seconds + c_tp - tp_hidden_seconds if tp_hidden_seconds else stage_seconds + c_tp) + c_p2p
    exposed = c_dp
    if dp_overlap is not None and fsdp is None:  # eq. (P5'): eq. (7g) on the first rank and on a later one
        c_ag = dp_overlap.gather_bytes / dp_bandwidth
        c_rs, t_b, t_f = c_dp - c_ag, (1 - forward_share) * micro, forward_share * micro
        exposed = bucketed_seconds(c_rs * dp_overlap.first_scale, dp_overlap.first, t_b)
        if dp_overlap.later is not None:
            exposed = max(exposed, bucketed_seconds(c_rs, dp_overlap.later, t_b) - t_b / virtual)
        exposed += (bucketed_seconds(c_ag * dp_overlap.first_scale, dp_overlap.first, t_f)
                    if dp_overlap.gather and stages == 1 else c_ag)
    if fsdp is not None and stages == 1:  # every micro-batch, overlapped by phase (eq. (8'))
        with_fsdp = micro_step_seconds(micro, forward_share, fsdp)
        exposed, micro = micro_batches * (with_fsdp - micro), with_fsdp
        c_dp, dp_bytes = micro_batches * (fsdp.forward_seconds + fsdp.backward_seconds), micro_batches * fsdp.bytes
    elif fsdp is not None:  # once per step: the gathers the fill waits for, the reduce-scatter after the last backward
        exposed = pipeline_fill_gather_seconds(stages, virtual, forward_share * micro, fsdp) + fsdp.backward_seconds
        c_dp, dp_bytes = fsdp.forward_seconds + fsdp.backward_seconds, fsdp.bytes
    bubble = (stages - 1) / virtual * micro
    pipe = micro_batches * micro + bubble
    after = 0.0 if fsdp is not None and stages == 1 else exposed  # what the micro-batches do not already hold
    return ModelParallelStep(stage_seconds, c_tp, c_p2p, c_dp, bubble, pipe + after, tp_bytes, p2p_bytes if stages > 1 else 0.0, dp_bytes,
                             bubble_fraction(stages, micro_batches, virtual), tp_bandwidth, p2p_bandwidth,
                             dp_bandwidth, micro_batches, tp_overlap, tp_hidden_seconds, exposed, fsdp is not None,
                             tp_pipelined_seconds if tp_overlap else None)


def serving_pipeline_micro_batch(concurrency: int, pp: int) -> int:
    """Sequences in one micro-batch of a serving pipeline of ``pp`` stages at ``concurrency`` running sequences:
    the engine keeps up to ``pp`` batches in flight (vLLM 0.19.1 ``v1/executor/multiproc_executor.py`` lines 469-472:
    ``max_concurrent_batches`` is ``pipeline_parallel_size``, "PP requires PP-size concurrent batches to fill the
    pipeline"; ``v1/engine/core.py`` ``step_with_batch_queue`` lines 421-535 schedules the next batch from the
    requests not already in flight while earlier ones run), so the running sequences split into
    m = min(C, pp) micro-batches of

        b = ceil(C / m)                                                                                      (PP3)

    >>> serving_pipeline_micro_batch(1, 2), serving_pipeline_micro_batch(64, 2), serving_pipeline_micro_batch(3, 2)
    (1, 32, 2)
    """
    if concurrency < 1 or pp < 1:
        raise InputError("concurrency and pipeline stages must be >= 1")
    return -(-concurrency // min(concurrency, pp))


def serving_pipeline_step(pass_seconds: float, hop_bytes: float, bandwidth: float | None, pp: int,
                          hop_latency: float = 0.0) -> float:
    """Seconds of one decode step of a micro-batch through ``pp`` serving pipeline stages [s]:

        t_step = sum_s t_s(b) + (pp - 1) (alpha_p2p + (2 b h a / tp) / B_p2p)                                  (PP4)

    ``pass_seconds``: sum_s t_s(b), the stages' times at the micro-batch of b sequences (each stage reads its own
    layers' weights and KV: together one tensor-parallel step of the whole model at b); ``hop_bytes``: what one
    device sends the next stage, 2 b h a / tp (vLLM 0.19.1 ``models/llama.py`` lines 430-433: a stage before the
    last returns ``IntermediateTensors`` of hidden_states and residual, b x h each; ``v1/worker/gpu_worker.py``
    lines 824-829 ``isend_tensor_dict(..., all_gather_group=get_tp_group())``: each tensor-parallel rank sends a
    1/tp slice and the receiver all-gathers it, ``distributed/parallel_state.py`` lines 821-825; that all-gather
    inside the machine not counted); ``bandwidth`` B_p2p [B/s] one device's (None: not counted); ``hop_latency``
    alpha_p2p [s] each send's latency (formulas/network.py eq. (14) between machines; 0 inside one, as eq. (P2)'s
    training point-to-point, which does not count it). Every sequence gets
    one token per t_step; the m micro-batches in flight (eq. PP3) each return a token per t_step, so the replica
    puts out C / t_step tokens/s while each stage's busy time m t_s stays within t_step (stages of equal work).

    >>> serving_pipeline_step(0.010, 1e6, 50e9, 2)
    0.01002
    """
    if pp < 1:
        raise InputError("pipeline stages must be >= 1")
    if hop_latency < 0:
        raise InputError(f"hop_latency must not be negative, got {hop_latency}")
    hop = hop_bytes / bandwidth if bandwidth else 0.0
    return pass_seconds + (pp - 1) * (hop + hop_latency)
