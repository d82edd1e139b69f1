"""Serving an MoE model over data-parallel attention ranks with expert parallelism (vLLM, SGLang).

Units: counts [devices, experts, sequences], bytes [B].

The layout (vLLM ``--tensor-parallel-size T --data-parallel-size D --enable-expert-parallel``; SGLang
``--tp-size D*T --attn-dp-size D --ep-size D*T``, the 0.5.23 spelling of the deprecated ``--dp-size D
--enable-dp-attention``): D engine ranks, each of T devices, run their own batches through attention; the routed
experts of every MoE layer are split over all D x T devices. vLLM runs the dense and shared-expert layers
tensor-parallel over T (eqs. EP1-EP4); SGLang runs them over all D x T devices (eqs. EP1s, EP4s).

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
00b3cd5b...) splits them evenly only (srt/layers/moe/fused_moe_triton/layer.py :414-416 ``assert
self._num_global_routed % storage_ep_size == 0``, then E // ep_size each; srt/layers/moe/topk.py :571 the same
assert): a layout with E % ep != 0 is refused there (``uneven_experts_refusal``), where vLLM places the remainder.

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

    t_x = 2 alpha + t_E3((D - 1) T (h + E) a) + t_E3((D - 1) T h a)                                         (EP4)

alpha: one collective's latency, the alpha of formulas/speed.py eq. (6) the tensor-parallel all-reduce pays (its
home: estimate/engines.py ``tp_allreduce``, for the kernel the engine runs): the dispatch is one NCCL launch (vLLM's
``all_gatherv`` of the hidden states and logits inside one ``group_start`` / ``group_end``, distributed/
device_communicators/cuda_communicator.py :352-398) and the combine one (``reduce_scatterv``, :264-292), both NCCL
(pynccl: no custom kernel), so alpha is NCCL's.

A decode step of b sequences per rank exchanges T = b tokens at each of its L_e MoE layers: L_e t_x(b); the
attention-DP ranks run in lockstep (vLLM pads an idle rank's step with a dummy batch), so the step is the slowest
rank's. Each device then runs its experts over the D ranks' tokens: D b routings touch its ceil(E / ep) experts
(eq. EP2), the expert bytes it reads (formulas/speed.py eq. 5 over the gathered routings).

Eq. EP1s (SGLang's split). SGLang 0.5.23 (PyPI wheel, sha256 00b3cd5b...) with attention DP keeps one TP group of
N = D x T devices (arg_groups/fields/parallel.py :81-90, ``--attn-dp-size``: "data-parallel attention groups inside
the TP group ... while the FFN stays tensor parallel"; layers/dp_attention.py :445-460, attn_tp = N / D). Per device,
at its defaults (``--moe-dense-tp-size`` None, ``--moe-a2a-backend none``, fields/exec_.py :836-869;
``--enable-dp-lm-head`` off, fields/parallel.py :199-205):

- attention over the attention-TP group of T (models/deepseek_v2.py :2084-2161; Qwen3-MoE: qwen3_moe.py :478-541
  ``Qwen3MoeAttention``, ``parallel_group="attn_tp"`` :532, :541), and the input embedding too (layers/
  vocab_parallel_embedding.py :166-185 ``get_embedding_tp_kwargs``: ``use_attn_tp_group`` under DP attention;
  ``Qwen3MoeModel(Qwen2MoeModel)`` qwen3_moe.py :970 -> qwen2_moe.py :1115-1121);
- the dense MLPs over all N (deepseek_v2.py :2665-2673: ``parallel_group="tp"`` unless moe_dense_tp_size == 1,
  layers/layer_boundary/layout.py :83-84; qwen2_moe.py :180 the same default), the shared experts over all N
  (deepseek_v2.py :871-896: "tp" unless an all-to-all backend replicates them), the lm_head over all N
  (deepseek_v2.py :3291-3296, ``use_attn_tp_group=enable_dp_lm_head``; vocab_parallel_embedding.py :257-263);
- the routed experts as eqs. EP1-EP2 with ep = N (fused_moe_triton/layer.py :414-416: E // ep_size each).

    W_dev = W_attn / T + W_emb / T + (W_mlp + W_shared + W_head) / N + W_experts x ceil(E / ep) / E + W_whole  (EP1s)

(vLLM: the same with T in place of N for the dense, shared and lm_head weights.) SGLang's fused shared expert
(DeepSeek-V3/R1) is off under expert parallelism on NVIDIA GPUs (deepseek_v2.py :3383-3389); without it, it is one
more expert split N ways like the rest, the same bytes.

Eq. EP4s (SGLang's exchange). With ``--moe-a2a-backend none`` every decoder layer, dense or MoE, runs its FFN over
the D ranks' gathered tokens: the hidden states are gathered over the N devices before it (layers/dp_attention.py
:987-1044 ``_dp_gather``: ``all_gather_into_tensor`` over the TP group, :716-757, after an attention-TP
reduce-scatter that completes attention's sum when T > 1; or an all-reduce of a zero-padded buffer in SUM_LEN mode),
the router runs on each device after the gather (no logits are exchanged), and the outputs are reduce-scattered back
over the N devices (:1120-1161 ``dp_reduce_scatter_tensor``, then an attention-TP all-gather when T > 1, :1159-1161). Per device
and direction a ring all-gather (reduce-scatter) of the D ranks' T_r tokens each moves (N - 1) / N x D T_r h a; so
each layer, and the lm_head once a step (layers/logits_processor.py :1216-1241 gathers the hidden states over the
ranks, :1024-1037 all-gathers the vocabulary-parallel logits over the N devices, then scatters them back)::

    t_xs = (2 L + 1) (alpha_h + t_E3((N - 1)/N D T_r h a)) + alpha_V + t_E3((N - 1)/N D T_r V a)           (EP4s)

Each of those 2 L + 2 collectives pays one latency, eq. (6)'s alpha as the tensor-parallel all-reduce does (estimate/
engines.py ``tp_allreduce``, the kernel picked for the message): with no idle rank and the gathered buffer (D T_r h a)
within the custom all-reduce's size, SGLang gathers and scatters by an all-reduce of a zero-padded buffer (SUM_LEN mode,
layers/dp_attention.py :194-195, :222-243 ``_decode_sum_len_fits_custom_all_reduce``; :1040-1043
``_dp_gather_via_all_reduce``), the custom kernel's alpha_h (CustomAllReduceV2, CUDA's default on a full NVLink
mesh: distributed/device_communicators/custom_all_reduce.py :373-395); else NCCL's all-gather / reduce-scatter, NCCL's. The
logits' all-gather (``_logits_gatherer``) is NCCL's (alpha_V). The bytes stay the ring's (a SUM_LEN all-reduce of the
padded buffer moves about twice them: not modelled).

The attention-TP pieces (T > 1) together move one all-reduce's bytes over T: one all-reduce per layer over the
attention-TP group (attention's), not vLLM's two (the FFN's sum is in the reduce-scatter over N). The dense FLOPs a
device runs are unchanged: D T_r tokens through 1 / N of the weights, T_r through 1 / T.

Not modelled: the exchange's buffers (DeepEP / pplx all2all backends' workspaces; SGLang's gathered DP buffer), the
DeepEP kernels' own exchange (vLLM ``--all2all-backend deepep_*``, SGLang ``--moe-a2a-backend deepep``, which also
replicates SGLang's shared experts), SGLang's ``--moe-dense-tp-size 1`` / ``--enable-dp-lm-head``, its fused shared
expert under EP on AMD MI30x, and expert-parallel load balancing's redundant experts (EPLB).
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


# the engines that load only an even split of the routed experts over the expert-parallel devices (eq. EP2)
EVEN_EXPERT_ENGINES: tuple[str, ...] = ("sglang",)


def uneven_experts_refusal(num_experts: int, ep: int, engine: str) -> str | None:
    """Eq. EP2's refusal: SGLang 0.5.23 loads E routed experts over ``ep`` expert-parallel devices only where ``ep``
    divides E (srt/layers/moe/fused_moe_triton/layer.py :414 ``assert self._num_global_routed % storage_ep_size ==
    0``; srt/layers/moe/topk.py :571 the same for the router's expert map); vLLM places the remainder
    (``determine_expert_map``, ceil(E / ep) on the fullest device). The reason, or None where it loads.

    >>> uneven_experts_refusal(128, 6, "sglang")[:40]
    'SGLang splits the routed experts evenly:'
    >>> uneven_experts_refusal(128, 8, "sglang"), uneven_experts_refusal(128, 6, "vllm")
    (None, None)
    """
    if engine not in EVEN_EXPERT_ENGINES or ep <= 1 or num_experts % ep == 0:
        return None
    return (f"SGLang splits the routed experts evenly: {num_experts} experts over {ep} expert-parallel devices (data "
            f"ranks x tensor-parallel devices) is uneven, and SGLang 0.5.23 refuses it at load (fused_moe_triton/"
            f"layer.py:414, E % ep_size == 0; formulas/serving_expert_parallel.py eq. EP2); give data_parallel x "
            f"tensor_parallel dividing {num_experts}, or leave expert_parallel out (each expert then "
            "tensor-parallel over them)")


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
                     intra_bandwidth: float, device_network_bandwidth: float, latency_seconds: float = 0.0) -> float:
    """Eq. EP4: one MoE layer's dispatch (all-gather of ``tokens`` hidden states and ``experts`` router logits per
    token, ``act_bytes`` each) and combine (reduce-scatter of the hidden states) over ``dp`` data-parallel ranks,
    ``in_machine`` of them in one machine [s]; each timed by formulas/expert_parallel_time.py eq. (E3) plus
    ``latency_seconds``, one collective's alpha (formulas/speed.py eq. 6).

    >>> exchange_seconds(8, 1000, 0, 2, 8, 8, 1e9, 1e8)   # 7 peers x 16 kB each way over 1 GB/s
    0.000224
    >>> exchange_seconds(8, 1000, 0, 2, 8, 8, 1e9, 1e8, 20e-6)   # + 2 collectives x 20 us
    0.000264
    >>> exchange_seconds(8, 1000, 0, 2, 1, 1, 1e9, 1e8, 20e-6)
    0.0
    """
    if tokens < 0 or hidden < 1 or experts < 0 or act_bytes <= 0 or dp < 1 or latency_seconds < 0:
        raise ValueError("tokens, experts and the latency must not be negative; hidden size, bytes and dp positive")
    if dp == 1:
        return 0.0
    sent = (dp - 1) * float(tokens) * act_bytes
    return (2 * latency_seconds + all_to_all_seconds(sent * (hidden + experts), dp, in_machine, intra_bandwidth, device_network_bandwidth)
            + all_to_all_seconds(sent * hidden, dp, in_machine, intra_bandwidth, device_network_bandwidth))


# SGLang's components split over the whole TP group of D x T devices under attention DP (eq. EP1s); every other one
# as its attention-TP group of T splits it (or the routed experts' eqs. EP1-EP2)
SGLANG_FULL_GROUP_COMPONENTS: tuple[str, ...] = ("mlp", "shared_experts", "lm_head")
SGLANG_LAYER_COMPONENTS: frozenset[str] = frozenset({"mlp", "shared_experts"})  # of those, inside the decoder layers


def full_group_weights(wb: WeightBytes, wb_group: WeightBytes, dp: int, tp: int) -> WeightBytes:
    """Eq. EP1s: ``wb``, one device's weights under its attention-TP group of ``tp`` (``shard_weights`` at tp, the
    routed experts by ``expert_split_weights``), with SGLang's dense MLP, shared-expert and lm_head bytes those of
    ``wb_group`` (``shard_weights`` at dp x tp: the whole TP group). The layers' difference is spread over them in
    proportion to their bytes, the storage labels' likewise (a ``WeightBytes`` keeps no per-layer component split)."""
    if dp < 2:
        return wb
    comps = dict(wb.by_component)
    delta = layer_delta = 0
    for c in SGLANG_FULL_GROUP_COMPONENTS:
        if c in comps:
            d = wb_group.by_component.get(c, 0) - comps[c]
            comps[c] += d
            delta += d
            layer_delta += d if c in SGLANG_LAYER_COMPONENTS else 0
    if not delta:
        return wb

    def spread(values: list[int], by: int) -> list[int]:
        total = sum(values)
        return [int(v + by * v / total) if total else v for v in values]

    storage = dict(zip(wb.by_storage, spread(list(wb.by_storage.values()), delta), strict=True))
    return replace(wb, total=wb.total + delta, by_component=comps, by_storage=storage,
                   layer_bytes=tuple(spread(list(wb.layer_bytes), layer_delta)),
                   notes=wb.notes + (f"dense MLP, shared-expert and lm_head weights tensor-parallel over all {dp * tp} "
                                     f"devices, attention and embedding over {tp} (SGLang attention DP, eq. EP1s)",))


def dp_attention_exchange_seconds(tokens: int, hidden: int, vocab: int, layers: int, act_bytes: float, dp: int,
                                  group: int, in_machine: int, intra_bandwidth: float,
                                  device_network_bandwidth: float, latency_seconds: float = 0.0,
                                  logits_latency_seconds: float = 0.0) -> float:
    """Eq. EP4s: SGLang's token exchange of a forward under attention DP over ``dp`` ranks of ``tokens`` tokens each,
    the TP group ``group`` = dp x tp devices (``in_machine`` of them in one machine): each of ``layers`` decoder layers
    all-gathers the ranks' hidden states (``hidden`` values of ``act_bytes`` a token) before its FFN and
    reduce-scatters the outputs after it, and the lm_head gathers the hidden states and all-gathers its ``vocab``
    logits once [s]; each moves (group - 1) / group of the gathered tokens' bytes per device, timed by
    formulas/expert_parallel_time.py eq. (E3), plus one collective's latency each: ``latency_seconds`` for the
    2 x layers + 1 of the hidden states, ``logits_latency_seconds`` for the logits' all-gather (formulas/speed.py
    eq. 6's alpha).

    >>> dp_attention_exchange_seconds(8, 1000, 0, 1, 2, 8, 8, 8, 1e9, 1e8)   # 3 x 7 peers x 16 kB over 1 GB/s
    0.000336
    >>> round(dp_attention_exchange_seconds(8, 1000, 0, 1, 2, 8, 8, 8, 1e9, 1e8, 9e-6, 20e-6), 9)  # + 3 x 9 + 20 us
    0.000383
    >>> dp_attention_exchange_seconds(8, 1000, 1000, 1, 2, 1, 1, 1, 1e9, 1e8, 9e-6, 20e-6)
    0.0
    """
    if tokens < 0 or hidden < 1 or vocab < 0 or layers < 0 or act_bytes <= 0 or dp < 1 or group < dp \
            or latency_seconds < 0 or logits_latency_seconds < 0:
        raise ValueError("tokens, vocab, layers and the latencies must not be negative; hidden size, bytes and dp "
                         "positive; the group at least dp")
    if group == 1:
        return 0.0
    gathered = (group - 1) / group * dp * float(tokens) * act_bytes
    return ((2 * layers + 1) * (latency_seconds + all_to_all_seconds(gathered * hidden, group, in_machine,
                                                                     intra_bandwidth, device_network_bandwidth))
            + logits_latency_seconds
            + all_to_all_seconds(gathered * vocab, group, in_machine, intra_bandwidth, device_network_bandwidth))
