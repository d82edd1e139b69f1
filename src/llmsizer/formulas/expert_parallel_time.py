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

The router's probabilities (one float per copy, Megatron's ``global_probs`` all-to-all, line 718) are not counted:
4 bytes against h a (under 0.2 % for h >= 1024 in bf16). Capacity-factor padding (token dropping, Megatron's
``moe_expert_capacity_factor``; DeepSpeed-MoE's ``_AllToAll`` of capacity-sized buffers) is not modelled: dropless.

The link (E3). Megatron orders the expert ranks 'tp-ep-dp-pp' with tp = u (``megatron/core/parallel_state.py``
``RankGenerator``): an EP group's e ranks sit u apart among e u consecutive ranks, so a machine of g devices holds
n = min(e, max(1, g // u)) of them. NCCL runs an all-to-all as one group of point-to-point sends and receives to every
peer (NCCL user guide, "Point-to-point communication", all-to-all example: ncclGroupStart, ncclSend / ncclRecv per
peer, ncclGroupEnd), the ones inside the machine over its link B_intra and the others over the device's share of the
machine's network B_net = B_node / g (formulas/network.py eq. (8)), concurrently::

    t_a2a = max((n - 1) V_peer / B_intra, (e - n) V_peer / B_net),   V_peer = T k h a / e                    (E3)

The ETP collectives run inside u consecutive ranks: over B_intra when u <= g.

Per MoE layer and micro-batch: dispatch and combine in the forward, their transposes in the backward, and the
forward's pair again in a fully recomputed layer (the whole layer's forward runs again, Megatron's full recompute
and torch's checkpoint)::

    t_ep = (4 L_e + 2 c_e) (t_a2a + V_etp / B_intra)                                                       (E4)

Not overlapped with compute: Megatron-Core's ``overlap_moe_expert_parallel_comm`` defaults to False (@d98e8a64
``megatron/core/model_parallel_config.py`` line 343) and ``moe_shared_expert_overlap`` to False
(``megatron/core/transformer/transformer_config.py`` line 717); the experts wait for the dispatched tokens and the
next layer for the combined ones. Megatron-Core's default dispatcher is 'allgather'
(``moe_token_dispatcher_type``, transformer_config.py line 891), which gathers all T tokens of the EP x ETP group
instead; its MoE recipes (Megatron-Bridge) and torchtitan run the all-to-all timed here.
"""

from __future__ import annotations

from typing import NamedTuple

from ..errors import InputError


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


def peers_in_machine(ep: int, etp: int, devices_per_node: int) -> int:
    """Eq. (E3)'s n: the ranks of one EP group (itself included) in its machine of ``devices_per_node`` devices, the
    group's ranks ``etp`` apart among ep x etp consecutive ranks (Megatron's expert rank order 'tp-ep-dp-pp').

    >>> peers_in_machine(8, 1, 8), peers_in_machine(16, 1, 8), peers_in_machine(8, 2, 8), peers_in_machine(4, 16, 8)
    (8, 8, 4, 1)
    """
    if ep < 1 or etp < 1 or devices_per_node < 1:
        raise InputError("ep, etp and devices per node must be >= 1")
    return min(ep, max(1, devices_per_node // etp))


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
    etp_bytes: float  # per ETP all-gather / reduce-scatter (E2)
    seconds: float  # t_ep

    @property
    def bytes(self) -> float:
        """All bytes one rank sends per micro-batch: the all-to-alls and the ETP collectives."""
        return self.collectives * (self.a2a_bytes + self.etp_bytes)


def expert_parallel_exchange(tokens: float, topk: int, hidden: int, act_bytes: float, ep: int, etp: int,
                             moe_layers: int, recomputed_moe_layers: int, devices_per_node: int,
                             intra_bandwidth: float, device_network_bandwidth: float) -> ExpertParallelExchange:
    """Eq. (E4): the EP token exchange of one rank's stage per micro-batch: ``moe_layers`` L_e, ``recomputed_moe_layers``
    c_e; ``device_network_bandwidth`` B_net (B_intra where the group stays in its machine or no network is known).

    >>> x = expert_parallel_exchange(1024, 8, 2048, 2, 8, 1, 2, 1, 8, 1e11, 5e10)   # 10 all-to-alls in one machine
    >>> x.collectives, round(x.seconds * 1e6, 1)
    (10, 2936.0)
    >>> expert_parallel_exchange(1024, 8, 2048, 2, 1, 1, 2, 0, 8, 1e11, 5e10).seconds
    0.0
    """
    if moe_layers < 0 or not 0 <= recomputed_moe_layers <= moe_layers:
        raise InputError("MoE layers must not be negative, recomputed ones between 0 and the MoE layers")
    v = all_to_all_bytes(tokens, topk, hidden, act_bytes, ep)
    n = peers_in_machine(ep, etp, devices_per_node)
    t_a2a = all_to_all_seconds(v, ep, n, intra_bandwidth, device_network_bandwidth)
    v_etp = expert_tp_gather_bytes(tokens, topk, hidden, act_bytes, etp)
    etp_bw = intra_bandwidth if etp <= devices_per_node else min(intra_bandwidth, device_network_bandwidth)
    count = 4 * moe_layers + 2 * recomputed_moe_layers
    intra = v * (n - 1) / (ep - 1) if ep > 1 else 0.0
    return ExpertParallelExchange(count, v, intra, v - intra, v_etp, count * (t_a2a + v_etp / etp_bw))
