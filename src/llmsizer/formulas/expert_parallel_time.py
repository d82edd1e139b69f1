"""The expert-parallel token exchange of an MoE training step: the bytes and time of the all-to-alls that send each
rank's routed token copies to the ranks holding their experts and bring the expert outputs back.

Units: bytes [B], bandwidth [B/s] per direction, time [s]. Pure functions.

Per rank and micro-batch: T tokens on the rank as the MoE layer receives them (b s / cp, and / t under sequence
parallelism: Megatron-Core refuses MoE with tensor parallelism in training without it, NVIDIA/Megatron-LM @d98e8a64
``megatron/core/transformer/moe/moe_layer.py`` lines 636-640), k routed experts per token, hidden size h, activations
of a bytes, expert-parallel size e, expert tensor-parallel size u (Megatron's ETP), L_e MoE layers on the rank's
pipeline stage, c_e of them fully recomputed.

The dispatcher (Megatron-Core ``MoEAlltoAllTokenDispatcher``, @d98e8a64 ``megatron/core/transformer/moe/
token_dispatcher.py`` lines 375-387: "token dispatch: A2A(EP)", "dispatch postprocess: AG(TP)", "combine preprocess:
RS(TP)", "token combine: A2A(EP)"): the dropless router keeps T k routed copies (``num_out_tokens = routing_map.size(0)
* moe_router_topk``, line 556), the permuted copies go to the ranks of their experts in one all-to-all-v over the EP
group (``dispatch_all_to_all``, line 705), are all-gathered inside the expert tensor-parallel group (line 746), run
through the experts, are reduce-scattered back (line 829) and return in a second all-to-all-v (``combine_all_to_all``,
line 864). torchtitan's EP (pytorch/torchtitan @b5bcd76 ``torchtitan/models/common/token_dispatcher.py``
``_dispatch_token_exchange`` line 316 and ``_combine_token_exchange`` line 344: ``all_to_all_single`` of the routed
tokens over the EP mesh) runs the same two all-to-alls, without an expert TP group. The backward of an all-to-all is
the transposed all-to-all (Megatron ``_AllToAll.backward``, ``megatron/core/tensor_parallel/mappings.py`` line 470:
the same group, input and output splits swapped), that of the all-gather a reduce-scatter and vice versa.

Named assumption, uniform routing: each of the T k copies goes to each of the e ranks with probability 1/e, so a rank
sends T k h a / e bytes to each of its e - 1 peers (and keeps 1/e) and receives as much::

    V_a2a = T k h a (e - 1)/e                        bytes sent (= received) by one rank in one all-to-all   (E1)
    V_etp = (u - 1) T k h a                          the all-gather (or reduce-scatter) inside the ETP group  (E2)

The combine's reduce-scatter (and its backward all-gather) runs in the router probabilities' dtype, a_p bytes, not
the activations' (token_dispatcher.py line 830: ``reduce_scatter_to_sequence_parallel_region(hidden_states.to(
self.probs.dtype))``): the probabilities keep the router's logits dtype (megatron/core/transformer/moe/moe_utils.py
line 936, ``probs.type_as(logits)``), the layer input's dtype unless ``moe_router_dtype`` is 'fp32' / 'fp64'
(router.py lines 106-111; default None, transformer_config.py line 811; Megatron-Bridge's Nemotron-H and Qwen3.5
recipes set 'fp32'). Half of a layer's ETP collectives move a bytes per element (the dispatch's all-gather and its
backward reduce-scatter), half a_p (the combine's reduce-scatter and its backward all-gather).

a_p is ``routed_probs_bytes``, the one home of that fact (the saved routed probability of formulas/
training_activations.py eq. E3 reads it too). The router's probabilities (one a_p per copy, Megatron's
``global_probs`` all-to-all, line 718) are not counted: a_p bytes against h a (under 0.1 % for h >= 1024 in bf16). Capacity-factor padding (token dropping, Megatron's
``moe_expert_capacity_factor``; DeepSpeed-MoE's ``_AllToAll`` of capacity-sized buffers) is not modelled: dropless.

The link (E3). Megatron orders the expert ranks 'tp-ep-dp-pp' with tp = u (``megatron/core/parallel_state.py``
``RankGenerator``): an EP group's e ranks sit u apart among e u consecutive ranks. torchtitan has no expert TP: its
sparse mesh ['pp', 'dp_replicate', 'efsdp', 'ep'] puts 'ep' innermost over the flattened dp_shard x cp x tp ranks
(pytorch/torchtitan @b5bcd76 torchtitan/distributed/parallel_dims.py lines 187-191, 242), so its EP ranks are
consecutive (stride u = 1). DeepSpeed with tensor parallelism places them tp apart (deepspeedai/DeepSpeed @edaa7221
deepspeed/utils/groups.py lines 479-486, ``_get_expert_parallel_ranks``' example). A machine of g devices holds
ranks [m g, (m + 1) g); the group of block start b (a multiple of e u) and offset j < u holds ranks b + j + u i,
i < e. A rank's n counts its group's ranks in its own machine, itself included (eq. (E3'), ``machine_shares``):
n = min(e, g // u) when the groups align with the machines, fewer for a group that straddles two (EP 6 on machines
of 8: ranks 6-11 split 2 + 4). The step waits for its slowest rank, so t_a2a is the largest over the ranks' n. NCCL runs an all-to-all as one group of point-to-point sends and receives to every
peer (NCCL user guide, "Point-to-point communication", all-to-all example: ncclGroupStart, ncclSend / ncclRecv per
peer, ncclGroupEnd), the ones inside the machine over its link B_intra and the others over the device's share of the
machine's network B_net = B_node / g (formulas/network.py eq. (8)), concurrently::

    t_a2a = max((n - 1) V_peer / B_intra, (e - n) V_peer / B_net),   V_peer = T k h a / e                    (E3)

The ETP collectives run inside u consecutive ranks: over B_intra when u <= g.

Per MoE layer and micro-batch: dispatch and combine in the forward, their transposes in the backward, and the
forward's pair again in a fully recomputed layer (the whole layer's forward runs again, Megatron's full recompute
and torch's checkpoint, or Megatron's selective recompute module 'moe': moe_layer.py lines 701-717, a reentrant
checkpoint of the MoE layer's forward, dispatch and combine included)::

    t_ep = (4 L_e + 2 c_e) (t_a2a + (V_etp(a) + V_etp(a_p)) / 2 / B_intra)                                (E4)

Other dispatchers (Megatron-Core ``moe_token_dispatcher_type``, @d98e8a64 transformer_config.py line 891:
'allgather' | 'alltoall' | 'flex'). Both use the expert tensor x expert parallel group of P = e u ranks
(``tp_ep_group``) and no separate ETP collective:

- 'allgather' (``MoEAllGatherTokenDispatcher``, token_dispatcher.py lines 233-303): every rank all-gathers the T
  tokens of all P ranks, with no top-k factor (``gather_from_sequence_parallel_region(hidden_states,
  group=self.tp_ep_group)``, lines 299-301), and reduce-scatters the expert outputs back (line 365). Before the
  tokens it gathers the routing map, [T, E] bool (1 B), under no_grad (lines 287-292: forward only), and the
  probabilities, [T, E] in a_p, with autograd (line 296: the backward reduce-scatters their gradient). A ring over
  P ranks, its bus bandwidth B_bus of formulas/network.py eq. (11); per micro-batch, with E routed experts::

      V_ag = (P - 1) T [(4 L_e + 2 c_e) h a + (L_e + c_e) E (1 + a_p) + L_e E a_p],  t_ag = V_ag / B_bus     (E6)

  (over more than one machine whenever a group of P consecutive ranks straddles two, eq. (E3'))

- 'flex' (``MoEFlexTokenDispatcher``, lines 1809-1860: DeepEP or HybridEP fused kernels over ``tp_ep_group``, the
  experts counted u times and top-k u times). DeepEP's normal kernels send a token once per destination machine
  over RDMA (to the rank of its local index there) and forward it over NVLink to the ranks of that machine that hold
  its experts (torchtitan's comm_backend 'deepep' / 'hybridep', @b5bcd76 torchtitan/models/common/config_utils.py
  lines 388-409, the same kernels; deepseek-ai/DeepEP README, "normal kernels ... asymmetric-domain bandwidth forwarding, such as from
  NVLink domain to RDMA domain"); HybridEP is the same hierarchy. A rank's copies therefore go once per distinct
  destination, not once per chosen expert. Under uniform routing the k experts of a token are k distinct experts
  drawn from E; a set of S of them (one rank's E u / P, one machine's E n / P) holds at least one with probability::

      p(S) = 1 - C(E - S, k) / C(E, k)                                                                       (E5)

  (the expected distinct holders among G equal sets is G p(E/G): the n_dest (1 - (1 - 1/n_dest)^k) of drawing with
  replacement, exact for distinct experts). With n = min(P, g) ranks of the group in a machine and N = P / n
  machines, per token and dispatch (combine the same, reversed)::

      V_net = (N - 1) p(E n / P) h a              once per other machine holding one of its experts
      V_link = N (n - 1) p(E u / P) h a          to the other ranks of its own machine, and forwarded inside each
                                                  destination machine (by symmetry the same count per rank)
      t_flex = max(T V_link / B_intra, T V_net / B_net)                                                      (E7)

  Groups that straddle machines (P not a multiple or divisor of g) are timed as if aligned here: n = min(P, g).
  Node-limited routing (DeepSeek-V3's ``moe_router_group_topk``: a token's experts in at most M machines) lowers
  (N - 1) p(E n / P) further; it is not modelled (uniform routing over all experts).

Megatron-Core's overlap (``overlap_moe_expert_parallel_comm``, default False, model_parallel_config.py line 343;
alltoall or flex only, no full recompute, interleaved stages when pp > 1: transformer_config.py lines 3002-3032):
the combined 1F1B schedule (``megatron/core/pipeline_parallel/combined_1f1b.py``, lines 161-200) runs the forward of
one micro-batch merged with the backward of another, layer by layer, the collectives on their own stream. Per layer
pair (``megatron/core/models/common/model_chunk_schedule_plan.py`` ``run``, lines 236-301, @d98e8a64): the backward's
combine runs under the forward's attention block (``pre_dispatch_computation``), the forward's dispatch under the
backward's expert MLP, the backward's dispatch under the forward's expert MLP, and the forward's combine under the
backward's attention block. With t_x one dispatch or combine (eqs. (E3), (E6), (E7)), A and M a layer's attention
block and expert MLP compute (forward and backward), phi the forward's share of it::

      t_exposed = L_e [max(0, t_x - phi A) + max(0, t_x - (1 - phi) M) + max(0, t_x - phi M)
                       + max(0, t_x - (1 - phi) A)]                                                          (E8)

Not every micro-batch has a partner. Without pipelining (``combined_1f1b_schedule_for_no_pipelining``,
combined_1f1b.py lines 35-135 @d98e8a64) the first micro-batch's forward runs alone (line 76), then m - 1 merged
forward-backward phases (line 98), then the last backward alone (line 119): one micro-batch's exchange blocks. With
interleaved stages the warm-up forwards and the cool-down backwards run alone (schedules.py
``forward_backward_pipelining_with_interleaving``: the warm-up loop line 1573, the steady 1F1B line 1733 that
``combined_1f1b_schedule_for_interleaved_pipelining`` merges, the cool-down line 1971); ``get_pp_rank_microbatches``
(schedules.py lines 929-979) gives W = 2 (p - r - 1) + (v - 1) G + 1 warm-up virtual micro-batches of T = m v on
pipeline rank r (G = microbatch_group_size_per_vp_stage, default p: model_parallel_config.py line 568; the + 1 is the
overlap's extra forward, line 970), at most T. Taking the first stage's (r = 0, the most unpaired: its warm-up
forwards fill the pipeline and its cool-down backwards drain it), per micro-batch::

      t_step_exposed = ((T - W) t_exposed + W t_blocking) / T,   W = 1 when p = 1                           (E8')

(the SMs the collectives' kernels take from the compute are not counted).

Without the overlap, not overlapped with compute: Megatron-Core's ``overlap_moe_expert_parallel_comm`` defaults to False (@d98e8a64
``megatron/core/model_parallel_config.py`` line 343) and ``moe_shared_expert_overlap`` to False
(``megatron/core/transformer/transformer_config.py`` line 717); the experts wait for the dispatched tokens and the
next layer for the combined ones. Megatron-Core's default dispatcher is 'allgather'
(``moe_token_dispatcher_type``, transformer_config.py line 891), which gathers all T tokens of the EP x ETP group
instead; its MoE recipes (Megatron-Bridge) and torchtitan run the all-to-all timed here.
"""

from __future__ import annotations

import math
from collections import Counter
from functools import lru_cache
from typing import NamedTuple

from ..errors import InputError
from ..specs.training import MOE_DISPATCHERS
from .network import ring_bus_bandwidth

# Megatron-Core moe_token_dispatcher_type (transformer_config.py line 891): the workload's choices, one home
DISPATCHERS = MOE_DISPATCHERS


def all_to_all_bytes(tokens: float, topk: int, hidden: int, act_bytes: float, ep: int) -> float:
    """Eq. (E1): bytes one rank sends (= receives) in one all-to-all of the EP token exchange under uniform routing.

    >>> all_to_all_bytes(1024, 8, 2048, 2, 8)   # 7/8 of 1024 x 8 copies of 4 KiB
    29360128.0
    >>> all_to_all_bytes(1024, 8, 2048, 2, 1)
    0.0
    """
    if tokens < 0 or topk < 1 or hidden < 1 or act_bytes <= 0 or ep < 1:
        raise InputError("tokens must not be negative; top-k, hidden size, activation bytes and ep positive")
    return float(tokens) * topk * hidden * act_bytes * (ep - 1) / ep


def expert_tp_gather_bytes(tokens: float, topk: int, hidden: int, act_bytes: float, etp: int) -> float:
    """Eq. (E2): bytes one rank receives in the all-gather (or sends in the reduce-scatter) of the routed copies
    inside its expert tensor-parallel group of ``etp`` ranks.

    >>> expert_tp_gather_bytes(10, 2, 4, 2, 2)
    160.0
    """
    if tokens < 0 or topk < 1 or hidden < 1 or act_bytes <= 0 or etp < 1:
        raise InputError("tokens must not be negative; top-k, hidden size, activation bytes and etp positive")
    return float(tokens) * topk * hidden * act_bytes * (etp - 1)


@lru_cache(maxsize=256)  # pure in its ints; called per estimate of a layout search
def machine_shares(ep: int, stride: int, devices_per_node: int, world: int) -> tuple[int, ...]:
    """Eq. (E3'): the distinct n over the ranks of ``world``, n a rank's EP group ranks (itself included) inside its
    machine of ``devices_per_node``, the group's ``ep`` ranks ``stride`` apart among ep x stride consecutive ranks
    (Megatron's expert order 'tp-ep-dp-pp', stride = etp; torchtitan's and AutoEP's stride 1). The pattern repeats
    every lcm(ep x stride, devices_per_node) ranks: only those are walked.

    >>> machine_shares(8, 1, 8, 16), machine_shares(16, 1, 8, 16), machine_shares(8, 2, 8, 16)
    ((8,), (8,), (4,))
    >>> machine_shares(6, 1, 8, 24), machine_shares(4, 16, 8, 64)    # ranks 6-11 straddle: 2 + 4
    ((2, 4, 6), (1,))
    """
    if ep < 1 or stride < 1 or devices_per_node < 1 or world < 1:
        raise InputError("ep, etp, devices per node and ranks must be >= 1")
    block = ep * stride
    period = block * devices_per_node // math.gcd(block, devices_per_node)
    shares: set[int] = set()
    for b in range(0, max(block, min(world, period)), block):
        for j in range(stride):
            shares.update(Counter((b + j + stride * i) // devices_per_node for i in range(ep)).values())
    return tuple(sorted(shares))


def all_to_all_seconds(bytes_sent: float, ep: int, in_machine: int, intra_bandwidth: float,
                       device_network_bandwidth: float) -> float:
    """Eq. (E3): one all-to-all of ``bytes_sent`` (eq. (E1)) over ``ep`` ranks, ``in_machine`` of them (itself
    included) in its machine: the sends to the machine's peers over ``intra_bandwidth`` and to the others over the
    device's share of the network ``device_network_bandwidth``, concurrently.

    >>> all_to_all_seconds(7e6, 8, 8, 1e9, 1e8)     # all 7 peers inside: 7 MB at 1 GB/s
    0.007
    >>> all_to_all_seconds(15e6, 16, 8, 1e9, 1e8)   # 7 MB over the link, 8 MB over the network share: the network's
    0.08
    """
    if bytes_sent < 0 or ep < 1 or not 1 <= in_machine <= ep or intra_bandwidth <= 0 or device_network_bandwidth <= 0:
        raise InputError("bytes must not be negative, 1 <= ranks in the machine <= ep, bandwidths positive")
    if ep == 1:
        return 0.0
    per_peer = bytes_sent / (ep - 1)
    return max((in_machine - 1) * per_peer / intra_bandwidth, (ep - in_machine) * per_peer / device_network_bandwidth)


class ExpertParallelExchange(NamedTuple):
    """Eq. (E4) for one rank and micro-batch."""

    collectives: int  # all-to-alls (and as many ETP all-gathers / reduce-scatters): 4 L_e + 2 c_e
    a2a_bytes: float  # bytes sent per all-to-all (E1)
    intra_bytes: float  # of which to peers inside the machine
    inter_bytes: float  # of which over the network
    etp_bytes: float  # per ETP all-gather / reduce-scatter (E2), the mean of the a and a_p halves
    seconds: float  # t_ep

    @property
    def bytes(self) -> float:
        """All bytes one rank sends per micro-batch: the all-to-alls and the ETP collectives."""
        return self.collectives * (self.a2a_bytes + self.etp_bytes)


def holder_probability(experts: int, topk: int, held: float) -> float:
    """Eq. (E5): the probability that a token's ``topk`` distinct experts, drawn uniformly from ``experts``, include
    at least one of a set of ``held`` of them (a rank's or a machine's experts; fractional sets interpolate).

    >>> round(holder_probability(128, 8, 8), 4), holder_probability(8, 2, 8), holder_probability(8, 2, 0)
    (0.4123, 1.0, 0.0)
    >>> round(16 * holder_probability(128, 8, 8), 1)   # distinct ranks of 16 holding 8 experts each: 6.6, not 8
    6.6
    """
    if experts < 1 or not 1 <= topk <= experts or held < 0:
        raise InputError("experts must be positive, 1 <= top-k <= experts, the held experts not negative")
    s = min(float(held), float(experts))
    lo = math.floor(s)

    def miss(n: int) -> float:
        return math.comb(experts - n, topk) / math.comb(experts, topk)

    m = miss(lo) if lo == s else miss(lo) + (s - lo) * (miss(lo + 1) - miss(lo))
    return 1.0 - m


def flex_dispatch_bytes(tokens: float, experts: int, topk: int, hidden: int, act_bytes: float, ranks: int,
                        etp: int, in_machine: int) -> tuple[float, float]:
    """Eq. (E7)'s bytes one rank sends in one flex (DeepEP / HybridEP) dispatch over ``ranks`` P = ep x etp ranks,
    ``in_machine`` n of them per machine: (over the link inside the machine, over the network).

    >>> link, net = flex_dispatch_bytes(1, 128, 8, 1, 1, 16, 1, 8)    # Qwen3-30B-A3B, EP 16 on 2 machines of 8
    >>> round(link, 3), round(net, 3)                                   # vs the all-to-all's 3.5 + 4 copies
    (5.772, 0.997)
    """
    if tokens < 0 or hidden < 1 or act_bytes <= 0 or ranks < 1 or etp < 1 or not 1 <= in_machine <= ranks:
        raise InputError("tokens must not be negative, hidden, bytes, ranks, etp positive, 1 <= n <= ranks")
    machines = ranks / in_machine
    per_token = hidden * act_bytes * float(tokens)
    p_rank = holder_probability(experts, topk, experts * etp / ranks)
    p_machine = holder_probability(experts, topk, experts * in_machine / ranks)
    return (per_token * machines * (in_machine - 1) * p_rank, per_token * (machines - 1) * p_machine)


def exposed_seconds(collective_seconds: float, moe_layers: int, attention_seconds: float, expert_seconds: float,
                    forward_share: float) -> float:
    """Eq. (E8): the exchange left exposed per micro-batch when each dispatch / combine of ``collective_seconds``
    overlaps another micro-batch's compute (Megatron's combined 1F1B): ``attention_seconds`` A and ``expert_seconds``
    M one layer's attention block and expert MLP, forward and backward, ``forward_share`` phi.

    >>> exposed_seconds(1.0, 2, 3.0, 3.0, 1 / 3)    # every collective under at least 1 s of compute
    0.0
    >>> exposed_seconds(2.0, 1, 3.0, 6.0, 1 / 3)    # the combine under the forward's attention (1 s): 1 s exposed
    1.0
    """
    if collective_seconds < 0 or moe_layers < 0 or attention_seconds < 0 or expert_seconds < 0 \
            or not 0 <= forward_share <= 1:
        raise InputError("times and layers must not be negative, the forward share within [0, 1]")
    phi = forward_share
    return moe_layers * sum(max(0.0, collective_seconds - c) for c in (
        phi * attention_seconds, (1 - phi) * expert_seconds, phi * expert_seconds, (1 - phi) * attention_seconds))


def routed_probs_bytes(act_bytes: float, router_fp32: bool = False) -> float:
    """a_p, the bytes of one routed probability in Megatron-Core: the router's logits dtype (``probs.type_as(logits)``,
    moe/moe_utils.py line 936 @d98e8a64), which is the layer input's, ``act_bytes``, unless ``moe_router_dtype`` is
    'fp32' (router.py lines 106-111; default None, transformer_config.py line 811). The dispatchers carry them in
    that dtype (token_dispatcher.py line 830) and ``WeightedSwiGLUFunction`` saves them as they come
    (fusions/fused_bias_swiglu.py lines 266-270).

    >>> routed_probs_bytes(2), routed_probs_bytes(2, router_fp32=True)
    (2, 4)
    """
    return 4 if router_fp32 else act_bytes


def unpaired_microbatches(micro_batches: int, pp: int, virtual_stages: int) -> tuple[int, int]:
    """Eq. (E8'): (W, T), the virtual micro-batches the first pipeline stage runs alone (W: warm-up forwards, whose
    backwards run alone in the cool-down) of the T = m v it runs per step, under Megatron's combined 1F1B.

    >>> unpaired_microbatches(8, 1, 1)       # no pipelining: the first forward and the last backward alone
    (1, 8)
    >>> unpaired_microbatches(512, 8, 4)     # PP8 VP4: 2 x 7 + 3 x 8 + 1 warm-up of 2048
    (39, 2048)
    >>> unpaired_microbatches(4, 4, 2)       # every micro-batch in the warm-up
    (8, 8)
    """
    if micro_batches < 1 or pp < 1 or virtual_stages < 1:
        raise InputError("micro-batches, pipeline stages and virtual stages must be at least 1")
    total = micro_batches * virtual_stages
    warmup = 1 if pp == 1 else 2 * (pp - 1) + (virtual_stages - 1) * pp + 1
    return min(warmup, total), total


def paired_exposed_seconds(paired_seconds: float, blocking_seconds: float, micro_batches: int, pp: int,
                           virtual_stages: int) -> float:
    """Eq. (E8'): the exchange exposed per micro-batch when the paired ones expose ``paired_seconds`` (eq. (E8)) and
    the unpaired ones all of ``blocking_seconds``.

    >>> paired_exposed_seconds(0.0, 1.0, 1, 1, 1)    # one micro-batch: no partner, all exposed
    1.0
    >>> paired_exposed_seconds(0.0, 1.0, 4, 1, 1)    # 3 pairs hidden, one micro-batch's exchange alone
    0.25
    """
    warmup, total = unpaired_microbatches(micro_batches, pp, virtual_stages)
    return ((total - warmup) * paired_seconds + warmup * blocking_seconds) / total


def expert_parallel_exchange(tokens: float, topk: int, hidden: int, act_bytes: float, ep: int, etp: int,
                             moe_layers: int, recomputed_moe_layers: int, devices_per_node: int,
                             intra_bandwidth: float, device_network_bandwidth: float, dispatcher: str = "alltoall",
                             experts: int = 0, world: int = 0, probs_bytes: float | None = None
                             ) -> ExpertParallelExchange:
    """Eq. (E4): the EP token exchange of one rank's stage per micro-batch: ``moe_layers`` L_e, ``recomputed_moe_layers``
    c_e; ``device_network_bandwidth`` B_net (B_intra where the group stays in its machine or no network is known);
    ``dispatcher`` 'alltoall' (E1)-(E3), 'allgather' (E6) or 'flex' (E7; both need ``experts``); ``world`` the
    ranks the EP groups tile (eq. (E3'), 0: one group of ep x etp), ``probs_bytes`` a_p of the combine's ETP
    reduce-scatter and of the allgather dispatcher's probabilities (None: ``routed_probs_bytes(act_bytes)``).

    >>> x = expert_parallel_exchange(1024, 8, 2048, 2, 8, 1, 2, 1, 8, 1e11, 5e10)   # 10 all-to-alls in one machine
    >>> x.collectives, round(x.seconds * 1e6, 1)
    (10, 2936.0)
    >>> expert_parallel_exchange(1024, 8, 2048, 2, 1, 1, 2, 0, 8, 1e11, 5e10).seconds
    0.0
    >>> g = expert_parallel_exchange(1024, 8, 2048, 2, 8, 1, 2, 1, 8, 1e11, 5e10, "allgather", 128)
    >>> g.bytes == 7 * 1024 * (10 * 2048 * 2 + 3 * 128 * 3 + 2 * 128 * 2), round(g.seconds * 1e6, 1)
    (True, 3055.3)
    """
    if moe_layers < 0 or not 0 <= recomputed_moe_layers <= moe_layers:
        raise InputError("MoE layers must not be negative, recomputed ones between 0 and the MoE layers")
    if dispatcher not in DISPATCHERS:
        raise InputError(f"dispatcher must be one of {', '.join(DISPATCHERS)}")
    count = 4 * moe_layers + 2 * recomputed_moe_layers
    if dispatcher != "alltoall":
        ranks = ep * etp
        n = min(ranks, devices_per_node)
        if experts < 1:
            raise InputError(f"the {dispatcher} dispatcher needs the routed experts' count")
        if dispatcher == "allgather":
            a_p = routed_probs_bytes(act_bytes) if probs_bytes is None else probs_bytes
            # the tokens of every collective; the routing map and probabilities of each forward dispatch, the
            # probabilities' gradient of each backward one (eq. (E6)): the mean per collective
            v = (ranks - 1) * float(tokens) * (count * hidden * act_bytes + (moe_layers + recomputed_moe_layers)
                                               * experts * (1 + a_p) + moe_layers * experts * a_p) / max(count, 1)
            # the ring of ep x etp consecutive ranks leaves its machine when some group straddles two (eq. (E3'))
            whole = min(machine_shares(ranks, 1, devices_per_node, world or ranks)) == ranks
            bus = ring_bus_bandwidth(intra_bandwidth, 1 if whole else max(2, -(-ranks // n)),
                                     device_network_bandwidth * devices_per_node) if ranks > 1 else intra_bandwidth
            intra = v * (n - 1) / (ranks - 1) if ranks > 1 else 0.0
            return ExpertParallelExchange(count, v, intra, v - intra, 0.0, count * v / bus)
        link, net = flex_dispatch_bytes(tokens, experts, topk, hidden, act_bytes, ranks, etp, n)
        t = max(link / intra_bandwidth, net / device_network_bandwidth)
        return ExpertParallelExchange(count, link + net, link, net, 0.0, count * t)
    v = all_to_all_bytes(tokens, topk, hidden, act_bytes, ep)
    # the slowest rank's n (eq. (E3'))
    t_a2a, n = max((all_to_all_seconds(v, ep, m, intra_bandwidth, device_network_bandwidth), -m)
                   for m in machine_shares(ep, etp, devices_per_node, world or ep * etp))
    n = -n
    p_bytes = routed_probs_bytes(act_bytes) if probs_bytes is None else probs_bytes
    v_etp = (expert_tp_gather_bytes(tokens, topk, hidden, act_bytes, etp)
             + expert_tp_gather_bytes(tokens, topk, hidden, p_bytes, etp)) / 2
    etp_bw = intra_bandwidth if etp <= devices_per_node else min(intra_bandwidth, device_network_bandwidth)
    intra = v * (n - 1) / (ep - 1) if ep > 1 else 0.0
    return ExpertParallelExchange(count, v, intra, v - intra, v_etp, count * (t_a2a + v_etp / etp_bw))
