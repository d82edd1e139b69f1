"""Serving an MoE model over data-parallel attention ranks with expert parallelism (vLLM, SGLang).

Units: counts [devices, experts, sequences], bytes [B].

The layout (vLLM ``--tensor-parallel-size T --data-parallel-size D --enable-expert-parallel``; SGLang
``--tp-size D*T --dp-size D --enable-dp-attention --ep-size D*T``): D engine ranks, each of T devices, run their own
batches through attention (and the dense / shared-expert layers) tensor-parallel over T; the routed experts of every
MoE layer are split over all D x T devices.

Eq. EP1 (the routed experts' split). vllm 0.19.1 (PyPI wheel, sha256 71a87f46...),
vllm/model_executor/layers/fused_moe/config.py ``FusedMoEParallelConfig.make`` :1004-1131: the MoE layer flattens its
tensor-parallel group across the data-parallel ranks (``flatten_tp_across_dp_and_pcp`` :993-1001: tp = D x T); with
``enable_expert_parallel`` (and D x T > 1, :1084-1087) the experts are whole on each device, ep = that flattened size
and the experts' tp = 1 (:1116-1131, "In EP, each device owns a set of experts fully"); without it, ep = 1 and each
expert's intermediate is split D x T ways (:1098-1111):

    (expert_tp, ep) = (1, D x T)   with expert parallelism
                    = (D x T, 1)   without

Eq. EP2 (routed experts on the fullest device). vllm fused_moe/layer.py ``determine_expert_map`` :66-120: E // ep
experts each, the first E % ep ranks one more (:107-109), so the fullest device holds ceil(E / ep) of the E routed
experts; its expert bytes are the layer's routed-expert bytes x ceil(E / ep) / E. SGLang 0.5.23 (PyPI wheel, sha256
00b3cd5b...) splits them the same way (srt/layers/moe/fused_moe_triton/layer.py: num_local_experts = E // ep_size,
refusing E % ep_size != 0 there).

Eq. EP3 (sequences per data-parallel rank). Each of the D ranks admits and caches its own requests (vLLM's DP
coordinator balances requests over the engine ranks; SGLang's dp attention, srt/layers/dp_attention.py, gives each
attention-DP rank its own batch and KV pool), so a rank holds ceil(C / D) of C sequences at once.

Eq. EP4 (the token exchange per MoE layer and forward). With D > 1 every MoE layer gathers the D ranks' tokens
before its experts and scatters the outputs back (vllm 0.19.1 model_executor/layers/fused_moe/runner/
default_moe_runner.py :575-603, ``do_naive_dispatch_combine`` when dp_size > 1: ``dispatch_router_logits`` then
``combine``; the default ``all2all_backend`` is "allgather_reducescatter", config/parallel.py :160, whose
``AgRsAll2AllManager``, distributed/device_communicators/all2all.py :150-243, all-gathers each rank's hidden states
and router logits over the DP group and reduce-scatters the outputs over it). For T tokens on each rank, hidden size
h, E routed experts' logits and activations of a bytes, one device sends (and receives) per peer T (h + E) a in the
dispatch and T h a in the combine; each is timed as formulas/expert_parallel_time.py eq. (E3) ``all_to_all_seconds``
times a per-peer exchange (the peers inside the machine over its link, the others over the device's network share;
a ring all-gather in one machine moves the same (D - 1) T h a per device over the link)::

    t_x = t_E3((D - 1) T (h + E) a) + t_E3((D - 1) T h a)                                                   (EP4)

A decode step of b sequences per rank exchanges T = b tokens at each of its L_e MoE layers: L_e t_x(b); the
attention-DP ranks run in lockstep (vLLM pads an idle rank's step with a dummy batch), so the step is the slowest
rank's. Each device then runs its experts over the D ranks' tokens: D b routings touch its ceil(E / ep) experts
(eq. EP2), the expert bytes it reads (formulas/speed.py eq. 5 over the gathered routings).

Not modelled: the exchange's buffers (DeepEP / pplx all2all backends' workspaces), the DeepEP kernels' own exchange
(``--all2all-backend deepep_*``), and expert-parallel load balancing's redundant experts (EPLB).
"""

from __future__ import annotations

import math
from dataclasses import replace

from .expert_parallel_time import all_to_all_seconds
from .weight_formats import WeightBytes


def moe_split(tp: int, dp: int, expert_parallel: bool) -> tuple[int, int]:
    """(expert_tp, ep) of eq. EP1: the ways each routed expert's intermediate is split, and the ways the experts are
    split, for ``dp`` data-parallel ranks of ``tp`` tensor-parallel devices each (vLLM
    ``FusedMoEParallelConfig.make``)."""
    flat = dp * tp
    if expert_parallel and flat > 1:
        return 1, flat
    return flat, 1


def local_experts(num_experts: int, ep: int) -> int:
    """Routed experts on the fullest of ``ep`` expert-parallel devices (eq. EP2, vLLM ``determine_expert_map``):
    ceil(num_experts / ep)."""
    if ep < 1:
        raise ValueError(f"ep must be >= 1, got {ep}")
    return math.ceil(num_experts / ep)


def expert_share(num_experts: int, ep: int, expert_tp: int) -> float:
    """The share of the routed experts' bytes one device holds (eqs. EP1-EP2): ceil(E / ep) / E whole experts under
    expert parallelism, 1 / expert_tp of every expert without."""
    if ep > 1:
        return local_experts(num_experts, ep) / num_experts
    return 1.0 / expert_tp


def sequences_per_rank(concurrency: int, dp: int) -> int:
    """Sequences one of ``dp`` data-parallel ranks holds at once (eq. EP3): ceil(concurrency / dp)."""
    return math.ceil(concurrency / dp)


def expert_split_weights(wb: WeightBytes, full_expert_bytes: int, num_experts: int, tp: int, ep: int,
                         expert_tp: int) -> WeightBytes:
    """``wb``, one device's weights under tensor parallelism ``tp`` (formulas/tensor_parallel.py
    ``shard_weights``: every expert's intermediate split tp ways), with its routed experts' bytes replaced by those of
    eqs. EP1-EP2: ``full_expert_bytes`` (the routed experts of the unsharded model, component "experts") x
    ``expert_share``. The difference is spread over the layers and storage labels in proportion to their bytes (a
    ``WeightBytes`` keeps no per-layer expert split for a computed format)."""
    held = wb.by_component.get("experts", 0)
    new = int(math.ceil(full_expert_bytes * expert_share(num_experts, ep, expert_tp)))
    delta = new - held
    if not delta:
        return wb

    def spread(values: tuple[int, ...] | list[int]) -> list[int]:
        total = sum(values)
        return [int(v + delta * v / total) if total else v for v in values]

    storage = dict(zip(wb.by_storage, spread(list(wb.by_storage.values())), strict=True))
    words = (f"routed experts split over {ep} expert-parallel devices, ceil({num_experts} / {ep}) whole experts each"
             if ep > 1 else f"routed experts tensor-parallel over {expert_tp} devices")
    return replace(wb, total=wb.total + delta, by_component={**wb.by_component, "experts": new},
                   by_storage=storage, layer_bytes=tuple(spread(wb.layer_bytes)),
                   notes=wb.notes + (f"{words} (eqs. EP1-EP2; attention and the rest tensor-parallel over {tp})",))


def exchange_seconds(tokens: int, hidden: int, experts: int, act_bytes: float, dp: int, in_machine: int,
                     intra_bandwidth: float, device_network_bandwidth: float) -> float:
    """Eq. EP4: one MoE layer's dispatch (all-gather of ``tokens`` hidden states and ``experts`` router logits per
    token, ``act_bytes`` each) and combine (reduce-scatter of the hidden states) over ``dp`` data-parallel ranks,
    ``in_machine`` of them in one machine [s]; each timed by formulas/expert_parallel_time.py eq. (E3).

    >>> exchange_seconds(8, 1000, 0, 2, 8, 8, 1e9, 1e8)   # 7 peers x 16 kB each way over 1 GB/s
    0.000224
    >>> exchange_seconds(8, 1000, 0, 2, 1, 1, 1e9, 1e8)
    0.0
    """
    if tokens < 0 or hidden < 1 or experts < 0 or act_bytes <= 0 or dp < 1:
        raise ValueError("tokens and experts must not be negative; hidden size, bytes and dp positive")
    sent = (dp - 1) * float(tokens) * act_bytes
    return (all_to_all_seconds(sent * (hidden + experts), dp, in_machine, intra_bandwidth, device_network_bandwidth)
            + all_to_all_seconds(sent * hidden, dp, in_machine, intra_bandwidth, device_network_bandwidth))
