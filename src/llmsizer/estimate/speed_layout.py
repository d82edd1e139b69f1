"""``speed_model``'s second stage: ``SpeedSetup``, what no layout changes (built once by ``speed.speed_model``),
and ``layout_speed``, ``estimate_speed``'s answer for one layout (count, tensor parallelism, concurrency, link),
with the rules only a layout reads (llama.cpp's KV cells and flash-attention kernel, eager transformers' cache
traffic, the all-reduces, the range bands). No arithmetic of its own beyond unpacking (every equation is in
formulas/)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..errors import InputError
from ..formulas import encoder_decoder_serving as ED
from ..formulas import flash_attention as FA
from ..formulas import hf_cache_traffic as HC
from ..formulas.dtypes import DTYPE_BYTES
from ..formulas.elementwise_traffic import SOURCE_EAGER, elementwise_seconds, inference_forward_bytes_per_token
from ..formulas.kv_cache import cross_attention_kv, kv_cache
from ..formulas.launch_overhead import host_seconds
from ..formulas.params import ParamCounts
from ..formulas.recurrent_state import layer_state_bytes_per_device, recurrent_state
from ..formulas.speed import (
    PhaseTime,
    Roofline,
    allreduce_time,
    batched_decode_time,
    decode_flops,
    host_overlapped_step,
    identical_sequence_routings,
    moe_expert_fraction,
    phase_roofline,
    phase_time,
    prefill_flops,
    step_overhead,
    unfused_attention_time,
)
from ..formulas.tensor_parallel import (
    HEAD_REPLICATING_ENGINES,
    ActivationSplit,
    PlanCollective,
    activation_split,
    kv_fraction_per_device,
    plan_collective_seconds,
    plan_rank_shares,
    shard_weights,
    transformers_plan_collectives,
)
from ..formulas.weight_formats import WeightBytes
from ..result import Assumption
from ..specs import ModelSpec
from . import efficiency as E
from . import engines as ENG
from . import ranges as R
from .device import (
    int8_peak,
    llamacpp_backend,
    nvlink_link_bandwidth,
    nvlink_link_why,
    nvlink_mesh_for,
    peer_to_peer,
    peer_to_peer_why,
)
from .formats import serving_fused_experts
from .launch import inference_kernels
from .speed_prefill import (
    attended_all_layers,
    attention_flops_step,
    llamacpp_prefill_efficiency,
    metal_prefill_efficiency,
    moe_ubatch_note,
)
from .speed_result import SpeedEstimate

# llama.cpp cache types (-ctk/-ctv) as the speed estimate names them -> whether ggml-cuda's flash attention sees a
# quantized K/V type (fattn.cu L253-268: F32, F16, Q4_0, Q8_0 have kernels; BF16 and the others none at @7b6abb2)
_FA_KV_TYPES = {"fp16": False, "fp32": False, "q8_0": True, "q4_0": True}


@dataclass(slots=True)
class SpeedSetup:
    """What no layout changes, computed once by ``speed_model``: the workload's arguments, the weight format's
    kernels and bytes, the device's peak, bandwidth and efficiencies, the engine's step, the model's parameters and
    bytes; ``layout_speed`` reads it for every (count, tensor_parallel, concurrency, link) it is asked. Written once,
    by ``speed_model``, never assigned after (only its ``decoded`` and ``layouts`` memos fill). Slots, not frozen:
    a frozen class stores each field through object.__setattr__, and a dict-backed one (frozen.fast_init) builds
    63 fields in ~1.7 us against ~0.5 us here, once per estimate."""
    spec: ModelSpec
    device: Any
    prompt_tokens: int
    output_tokens: int
    kv_dtype: str
    mla_mode: str
    compute_efficiency: float | None
    identical_sequences: bool
    state_dtypes: tuple[str, str]
    ubatch: int | None
    flash_attention: bool
    kv_unified: bool | None
    engine: str | None
    engine_version: str | None
    allreduce_latency: float | None
    llamacpp_int8_mmq: bool
    group_size: int
    other_bytes: int
    encoder_flops: float
    fmt: str  # the format whose kernels run
    bytes_fmt: str  # the format whose bytes are read
    dtype: str  # the compute dtype (compute_dtype_for)
    act_bytes: int
    peak: float | None
    peak_key: str
    bw: Any  # device.bandwidth
    ce: float  # compute efficiency
    be: float  # bandwidth efficiency, after the SM stream caps
    bw_factor: E.Factor
    kernel_floor: float  # eq. (15)
    step_fixed: float  # a decode step's fixed seconds (eq. 7)
    host_step: float  # the host step a decode step overlaps (eq. 14)
    launch_host: float  # eager transformers: a one-sequence step's launches (eq. K1)
    prefill_host: float  # eager transformers: the prefill forward's launches (eq. K1)
    eager_traffic: E.Factor | None  # eq. E13's memory-bound share, where it applies
    hf_cache: bool  # eqs. H1-H3 apply
    capability: int | None  # device_weights_capability
    pc: ParamCounts
    wb: WeightBytes
    matmul_params: int
    read_bytes: int
    matmul_parts: dict[str, float]
    unread: set[str]
    t5: ED.T5Params | None
    expert_bytes: int
    head_component: str
    head_params: int
    width: int  # attention_width
    repeated_kv: bool
    pre: tuple[Assumption, ...]  # the assumptions before the load's identical_sequences
    post: tuple[Assumption, ...]  # and after it
    settled: tuple[str, ...]  # the warnings no layout changes
    # the decode at a layout's load: (decode, its roofline, the KV and weight bytes it reads), by (count, tp,
    # concurrency, link, nvlink_mesh), everything else being this model's
    decoded: dict[tuple[Any, ...], tuple[PhaseTime | None, Roofline | None, float | None, float | None]]
    path: str | None  # llama.cpp's GEMM path (efficiency.llamacpp_gemm_path)
    llamacpp: bool
    unified: bool  # llama.cpp's unified KV buffer
    ub: int  # llama.cpp's n_ubatch
    repeats: bool  # eq. H2: K/V repeated to every query head
    eager_scores: bool  # eq. H3: eager attention writes the score tensor
    score_layers: int
    decode_loop_kernels: int | None  # eager transformers: the loop's own kernels a step (None: not that path)
    engine_host: float  # eager transformers: the engine's host step its launches overlap
    layouts: dict[int, ENG.LlamaCppKV] = field(default_factory=dict)  # llama.cpp's layout per batch (asked ~3 times)


def llamacpp_identical_routings(batch: int) -> float:
    """Eq. (11): the routings ``batch`` identical prompts diverge to in llama.cpp's batched step."""
    return identical_sequence_routings(batch, E.LLAMACPP_IDENTICAL_ROUTINGS_SCALE.expected,
                                       E.LLAMACPP_IDENTICAL_ROUTINGS_EXPONENT.expected)


def transformers_step_kernels(spec: ModelSpec, act_bytes: int, per_step: int, fmt: str, capability: int | None,
                              rows: int) -> int:
    """Eq. K4: the kernels eager transformers launches for a forward of ``rows`` rows and its loop's own ops."""
    return inference_kernels(spec, half=act_bytes < 4, per_step=per_step, weights_format=fmt, capability=capability,
                             rows=rows)


def _transformers_decode_host(s: SpeedSetup, batch: int) -> float:
    """Eq. K1: a decode step's host seconds at ``batch`` sequences (a bitsandbytes NF4 model's dequantization kernels
    depend on the rows a forward multiplies, eq. K5), overlapping the engine's host step."""
    assert s.decode_loop_kernels is not None
    kernels = transformers_step_kernels(s.spec, s.act_bytes, s.decode_loop_kernels, s.fmt, s.device.capability, batch)
    return max(s.engine_host, host_seconds(kernels, E.HOST_SECONDS_PER_KERNEL.expected))


def _hf_step_bytes(s: SpeedSetup, batch: int, ctx: int, kv: float, tp: int) -> float:
    """Eqs. H1-H3: the decode step's bytes beyond reading its ``kv`` bytes of K/V once."""
    spec = s.spec
    extra = HC.cache_append_bytes(kv)
    if s.repeats:
        extra += HC.repeat_kv_bytes(kv, spec.num_heads, spec.num_kv_heads)
    if s.eager_scores:
        extra += HC.eager_score_bytes(batch, max(spec.num_heads // tp, 1), 1, attended_all_layers(spec, 1, ctx),
                                      s.act_bytes)
    return extra


def _hf_prefill_bytes(s: SpeedSetup, kv: float, tp: int) -> float:
    """Eqs. H2-H3 over one prompt (eager attention: every score of the s x s matrix, per attention layer)."""
    spec, prompt_tokens = s.spec, s.prompt_tokens
    out = HC.repeat_kv_bytes(kv, spec.num_heads, spec.num_kv_heads) if s.repeats else 0.0
    if s.eager_scores:
        out += s.score_layers * HC.eager_score_bytes(1, max(spec.num_heads // tp, 1), prompt_tokens, prompt_tokens,
                                                     s.act_bytes)
    return out


def _llamacpp_fattn_kernel(s: SpeedSetup, batch: int, per_stream: int, streams: int) -> str | None:
    """The flash-attention kernel ggml-cuda runs for this step (formulas/flash_attention.py fattn_kernel)."""
    spec = s.spec
    capability = s.device.capability
    if not s.flash_attention or capability is None or s.kv_dtype not in _FA_KV_TYPES:
        return None
    cc = capability * 10  # ggml's scale: 8.9 -> 890
    dk, dv, heads_kv = spec.head_dim, spec.head_dim, spec.num_kv_heads
    if spec.mla is not None:  # llama.cpp's MLA cache: one latent "head" of kv_lora_rank + rope, V the latent
        dk, dv, heads_kv = spec.mla.kv_lora_rank + spec.mla.qk_rope_head_dim, spec.mla.kv_lora_rank, 1
    tokens = batch // streams if streams else batch  # one unified stream: every sequence's token in it
    return FA.fattn_kernel(dk, spec.num_heads, heads_kv, max(tokens, 1), streams, FA.padded_kv_cells(per_stream),
                           cc, kv_quantized=_FA_KV_TYPES[s.kv_dtype], head_dim_v=dv)


def _llamacpp_cells_at(s: SpeedSetup, batch: int) -> ENG.LlamaCppKV:
    """llama.cpp's KV layout of ``batch`` sequences (engines.llamacpp_kv_cells, the memory estimate's rule), kept per
    batch: a decode step reads the cells in use of each stream, a sliding layer's whole stream once it is full (n_swa
    + n_ubatch cells per sequence, or n_swa x n_seq + n_ubatch in one unified stream), not the window alone; other
    engines read the window."""
    lay = s.layouts.get(batch)
    if lay is None:
        lay = s.layouts[batch] = ENG.llamacpp_kv_cells(s.spec.model_type, s.spec.sliding_window, s.ub, batch,
                                                       s.prompt_tokens + s.output_tokens, s.unified)
    return lay


def _llamacpp_cells_read(s: SpeedSetup, batch: int) -> tuple[str | None, int, int, int]:
    """(flash-attention kernel, cells per stream, streams, cells per stream of a sliding layer) that one decode
    step of ``batch`` sequences reads mid-generation. Where ggml-cuda's flash-attention kernel runs, the K/V view
    is llama.cpp's n_kv, padded to 256 cells (formulas/flash_attention.py padded_kv_cells): one stream reads all
    of it (no KV_max scan, fattn-common.cuh L879; fattn-vec.cuh L239 loops to ne11), several streams stop at the
    end of the 256-cell tile of the last open cell, the same count when the streams are equally long."""
    lay = _llamacpp_cells_at(s, batch)
    ctx = s.prompt_tokens + s.output_tokens // 2
    per_stream, streams = lay.decode_kv(ctx)
    kernel = _llamacpp_fattn_kernel(s, batch, per_stream, streams)
    sliding = lay.sliding_read(s.ub, s.prompt_tokens, s.output_tokens // 2, s.flash_attention) if lay.ring else 0
    if kernel is not None:
        per_stream = min(lay.stream_tokens(), FA.padded_kv_cells(per_stream))
        if lay.ring:
            sliding = min(lay.sliding_cells, FA.padded_kv_cells(sliding))
    return kernel, per_stream, streams, sliding


def llamacpp_unfused_attention(device: Any, fmt: str, concurrency: int, assumptions: list[Assumption],
                               warnings: list[str]) -> tuple[E.Factor | None, float | None]:
    """llama.cpp without flash attention: the factor and the peak FLOP/s of a single-token step's KQ/KQV products
    (formulas/speed.py eq. 13), (None, None) where the backend has none or the device no sourced rate."""
    unfused: E.Factor | None = None
    unfused_peak: float | None = None
    found = E.llamacpp_unfused_attention(fmt, device.kind, device.vendor)
    if found is not None:
        unfused, rate_key = found
        unfused_peak, used_key = device.peak_flops(rate_key)
        sync = E.llamacpp_sync_mma_share(device.architecture) if rate_key == "fp16_acc16" else None
        if unfused_peak is not None and sync is not None:  # the same warp-level kernels as cuBLAS prefill
            unfused_peak *= sync.expected
        if unfused_peak is None:
            unfused = None
            warnings.append(f"{device.id}: no sourced {rate_key} peak; the single-token attention without "
                            "flash attention is timed as its cache read only (formulas/speed.py eq. 13 not "
                            "applied)")
        else:  # the one-sequence step (the decode at b = 1, and the single-stream figure at any concurrency)
            assumptions.append(Assumption(
                unfused.name, unfused.expected, True,
                "formulas/speed.py eq. (13), the one-sequence step"
                + (" (the single-stream figure; the step of several sequences does not use it)"
                   if concurrency > 1 else "")
                + ": without flash attention the one-token KQ/KQV products take "
                f"{unfused.expected} x their FLOPs at the {used_key} peak"
                + (f" x {sync.expected} ({sync.name})" if sync is not None else "") + f"; {unfused.source}"))
    return unfused, unfused_peak


def range_band_assumptions(spec: ModelSpec, device: Any, engine: str | None, engine_version: str | None,
                           llamacpp: bool, launch_host: float, tp: int, concurrency: int,
                           prefill: PhaseTime | None, decode: PhaseTime | None, details: dict[str, Any],
                           assumptions: list[Assumption], warnings: list[str]) -> str | None:
    """Which validation rows calibrate the prefill and decode ranges, and why (estimate/ranges.py): appended to
    ``assumptions``, the keys the bands read written to ``details``; returns the serving engine (None: none)."""
    serving = engine if engine in R.SERVING_ENGINES else None
    if llamacpp and serving is None and not launch_host:  # which llama.cpp band calibrates each range, and why
        backend = llamacpp_backend(device)
        details["llamacpp_backend"] = backend
        for name, kind, value in (("prefill_range_band", R.PREFILL, prefill),
                                  ("decode_range_band", R.BATCHED if concurrency > 1 else R.DECODE, decode)):
            if value is not None:
                b, why = R.llamacpp_band(kind, backend)
                assumptions.append(Assumption(name, b.engine if b else "none", True, why))
    if serving is not None and decode is not None:  # which validation rows calibrate the decode range, and why
        kind = R.BATCHED if concurrency > 1 else R.DECODE
        if spec.mla is not None and spec.moe is not None:  # ranges.MLA_MOE_MULTI_GPU_NO_BAND reads it
            details["mla_moe"] = True
            if decode.bound == "kernel latency":  # eq. 15 decides the step (ranges.MLA_MOE_FLOOR_NO_BAND)
                details["kernel_floor_bound"] = True
        b, why = R.serving_band(kind, serving, engine_version, device.id, tp, bool(details.get("mla_moe")),
                                bool(details.get("kernel_floor_bound")))
        assumptions.append(Assumption("decode_range_band", b.engine if b else "none", True, why))
        if tp > 1 and concurrency == 1 and decode.bound == "host":  # eq. (14): the host floor sets the step
            warnings.append(
                f"decode of one sequence on {tp} GPUs is host-bound: the engine's host step "
                f"({decode.seconds * 1e3:.2f} ms, estimate/engines.py STEP_HOST) decides it, above the modelled "
                f"device step ({max(decode.compute_seconds, decode.memory_seconds) * 1e3:.2f} ms of weights and KV "
                f"+ {decode.comm_seconds * 1e3:.2f} ms of all-reduces); the per-layer latency-bound kernels of a "
                "tensor-parallel step are counted for MLA + MoE layers only (formulas/speed.py eq. 15), so the "
                "step may be slower: no calibrated range")
    return serving


@dataclass(slots=True)
class Collectives:
    """One layout's tensor-parallel collectives: the link they reach, the all-reduce kernel a decode step's message
    picks (engines.tp_allreduce) and its latency, or transformers' plan (formulas/tensor_parallel.py eq. TP2).
    Built by ``layout_collectives``, read by ``collective_seconds``."""
    tp: int
    concurrency: int  # the sequences of the decode step whose message picked ``ar_path``
    link: float | None  # bytes/s the all-reduces reach (None or 0: not counted)
    link_share: Any  # nvlink_link_bandwidth's share (None: the link given as is)
    nvlink_mesh: bool | None
    p2p: bool  # peer_to_peer(device)
    library: str  # NCCL or RCCL
    ar_path: ENG.AllReducePath | None  # the kernel of a decode step's all-reduce (None: not covered)
    alpha: float  # an all-reduce's latency, seconds
    reductions: int  # all-reduces per forward: 2 per layer + 1 for the vocabulary-parallel embedding
    plan_comm: tuple[PlanCollective, ...] | None  # transformers' plan's collectives (None: not that engine)


@dataclass(slots=True)
class Layout:
    """What one layout (count, tensor_parallel, concurrency, link) fixes for every phase ``layout_speed`` times:
    each device's shares of the weights, K/V and attention, a plan's rank shares (eq. TP1), the collectives, and
    what the decode steps record (their K/V and weight bytes by batch, their assumptions). Built by ``layout_speed``
    for each call, never kept."""
    tp: int
    concurrency: int
    kv_share: float  # kv_fraction_per_device
    shard: float  # the device's share of the weights' bytes
    split: ActivationSplit  # what the engine's TP splits (transformers: its plan)
    attn_ways: int  # split.ways("attention", tp)
    rank: dict[str, float] | None  # eq. TP1's shares per component (None: every matrix split tp ways)
    rank_matmul: float  # the rank's matmul parameters (0 where rank is None)
    rank_head: float  # the rank's lm_head parameters
    rank_read: float  # the rank's bytes a decode step reads
    rank_experts: float  # the rank's routed experts' bytes
    comm: Collectives
    kv_read: dict[int, float]  # KV cache bytes one decode step of b sequences reads, by b
    weights_read: dict[int, float]  # weight bytes one device reads in a decode step of b sequences, by b
    assumptions: list[Assumption]


def layout_collectives(s: SpeedSetup, count: int, tp: int, concurrency: int, link_bandwidth: float | None,
                       nvlink_mesh: bool | None, warnings: list[str]) -> Collectives:
    """The collectives of ``tp`` devices decoding ``concurrency`` sequences: the bandwidth the all-reduces reach (the
    one rule training's collectives read: device.nvlink_link_bandwidth, formulas/network.py eq. 12 on NVLink,
    whichever kernel the engine runs) and the all-reduce kernel of a decode step of the sequences (engines.
    tp_allreduce): 2 per layer (row-parallel o_proj and down_proj) and, in vLLM / SGLang, one for the
    vocabulary-parallel embedding; transformers (tp_plan "auto"): the collectives its plan's styles run, not two
    all-reduces per layer (formulas/tensor_parallel.py transformers_plan_collectives, eq. TP2)."""
    device, spec = s.device, s.spec
    link, link_share = nvlink_link_bandwidth(device, link_bandwidth) if link_bandwidth else (link_bandwidth, None)
    if tp > 1 and link is None:
        warnings.append(f"no interconnect bandwidth for {count} x {device.id}; tensor-parallel communication "
                        "is not counted")
    if nvlink_mesh is None and tp > 1 and s.engine in ENG.ALLREDUCE_ENGINES + ENG.NCCL_ONLY_ENGINES:
        nvlink_mesh = nvlink_mesh_for(device, None, tp)  # the device's own link (fit passes an instance's)
    p2p = peer_to_peer(device)
    library = "RCCL" if device.vendor == "AMD" else "NCCL"  # ROCm's torch.distributed "nccl" backend is RCCL
    ar_path = ENG.tp_allreduce(s.engine, tp, concurrency * spec.hidden_size * s.act_bytes, nvlink_mesh, p2p, library)
    if s.allreduce_latency is not None and s.allreduce_latency < 0:
        raise InputError("allreduce_latency must not be negative")
    alpha = s.allreduce_latency if s.allreduce_latency is not None else (ar_path.latency.expected if ar_path else 0.0)
    reductions = 2 * spec.num_layers + (1 if ar_path is not None else 0)
    plan_comm = transformers_plan_collectives(spec) if s.engine == "transformers" and tp > 1 else None
    return Collectives(tp, concurrency, link, link_share, nvlink_mesh, p2p, library, ar_path, alpha, reductions,
                       plan_comm)


def tp_allreduce_assumption(s: SpeedSetup, c: Collectives, link_bandwidth: float | None) -> Assumption | None:
    """The ``tp_allreduce`` assumption: how the collectives ``c`` of a forward are timed (transformers' plan, eq.
    TP2, or 2 all-reduces per layer + the embedding's, formulas/speed.py eq. 6 / 6'); None where none is counted."""
    device, link, ar_path, alpha = s.device, c.link, c.ar_path, c.alpha
    if c.plan_comm is not None and link:
        plan_comm = c.plan_comm
        n_ar = sum(x.kind == "all_reduce" for x in plan_comm)
        sites = sorted({x.site for x in plan_comm if x.layer >= 0})
        return Assumption(
            "tp_allreduce", f"{n_ar} all-reduce{'s' * (n_ar != 1)} + {len(plan_comm) - n_ar} all-gather"
            f"{'s' * (len(plan_comm) - n_ar != 1)} per forward ({c.library}: "
            f"{alpha * 1e6:.2f} us + bytes / {link / 1e9:.4g} GB/s each)", s.allreduce_latency is None,
            "transformers' tensor-parallel plan (formulas/tensor_parallel.py transformers_plan_collectives, eq. "
            "TP2; transformers 5.24 distributed/tensor_parallel.py): the embedding's all-reduce, per layer one "
            "per row-parallel linear and split experts module"
            + (f" ({', '.join(sites)})" if sites else " (none: the plan splits no layer module)")
            + ", the lm_head's all-gather of the vocabulary (one token per sequence); an image prompt's vision "
            "tower's collectives not counted; each all-reduce by "
            "formulas/speed.py eq. (6), each all-gather by eq. (6g) at the all-reduce's latency (a stand-in: no "
            "published small all-gather timing); "
            + (f"link: {nvlink_link_why(device, link_bandwidth, c.link_share)}; " if c.link_share is not None
               and link_bandwidth else "")
            + (f"{ar_path.why}; {ar_path.latency.name} {ar_path.latency.source}"
               if ar_path and s.allreduce_latency is None else "latency given"))
    if c.tp > 1 and link and (ar_path is not None or s.allreduce_latency is not None):
        lat = ar_path.latency if ar_path else None
        return Assumption(
            "tp_allreduce", f"{c.reductions} x ({ar_path.kernel if ar_path else 'given'}: {alpha * 1e6:.2f} us + "
            f"bytes / {link / 1e9:.4g} GB/s) per step", s.allreduce_latency is None,
            "formulas/speed.py eq. (6) (eq. (6') for the custom one-stage kernel: each GPU reads the whole "
            "message from every peer): 2 all-reduces per layer + 1 for the vocabulary-parallel embedding (a "
            "decode step of the sequences; a prefill's or another batch's larger message picks its own kernel); "
            + (f"link: {nvlink_link_why(device, link_bandwidth, c.link_share)} (NCCL's figure, taken for the custom "
               "kernel's peer loads too); " if c.link_share is not None and link_bandwidth else "")
            + (f"{ar_path.why}; {lat.name} {lat.source}" if ar_path and lat and s.allreduce_latency is None
               else "latency given")
            + (f"; {peer_to_peer_why(device)}" if ar_path is not None
               and (ar_path.kernel.startswith("custom") or not c.p2p) else ""))
    return None


def collective_seconds(s: SpeedSetup, c: Collectives, tokens: int, head_tokens: int) -> float:
    """The collectives of a forward of ``tokens`` tokens (``head_tokens`` of them through the lm_head): eq. TP2
    (plan_collective_seconds) for transformers' plan, else ``reductions`` all-reduces of formulas/speed.py eq. (6)
    (eq. 6' for the custom one-stage kernel), the engine's kernel picked for this message's size."""
    tp, link = c.tp, c.link
    if tp <= 1 or not link:
        return 0.0
    if c.plan_comm is not None:
        return plan_collective_seconds(c.plan_comm, tokens, head_tokens, s.act_bytes, tp, link, c.alpha)
    per_layer = tokens * s.spec.hidden_size * s.act_bytes
    a, path = c.alpha, c.ar_path
    if path is not None and tokens != c.concurrency:  # the engine's kernel for this message's size
        path = ENG.tp_allreduce(s.engine, tp, per_layer, c.nvlink_mesh, c.p2p, c.library)
        if s.allreduce_latency is None:
            a = path.latency.expected if path else 0.0
    one = path is not None and path.kernel == "custom one-stage"
    return c.reductions * allreduce_time(per_layer, tp, link, a, one_stage=one)


def state_bytes(s: SpeedSetup, split: ActivationSplit, tp: int, batch: int) -> float:
    """The recurrent state of ``batch`` sequences on one device (heads split by tensor parallelism where the
    engine splits the mixer: ``activation_split``): formulas/recurrent_state.py."""
    spec = s.spec
    if spec.recurrent is None or not spec.recurrent_layer_count:
        return 0.0  # recurrent_state's 0 bytes, / tp
    conv_b, ssm_b = (DTYPE_BYTES[d] for d in s.state_dtypes)
    ways = split.ways("mixer", tp)
    if s.engine in HEAD_REPLICATING_ENGINES and ways > 1:  # vLLM / SGLang: each shard with its replicated
        # Mamba-2 groups (formulas/recurrent_state.py eq. 4, the one rule extra_groups)
        return batch * spec.recurrent_layer_count * layer_state_bytes_per_device(spec, ways, conv_b, ssm_b)
    return recurrent_state(spec, batch, conv_b, ssm_b).total_bytes / ways


def rank_flops(lay: Layout, flops: float, attn: float, head: float, tokens: int, enc: float) -> float:
    """A prefill's FLOPs on one rank: ``flops`` (the model's, ``attn`` of them attention's) over tp, or under
    a plan (eq. TP1) the rank's matmul parameters, its heads' attention and its share of the encoder (eq. 2')."""
    rank = lay.rank
    if rank is None:
        return (flops + enc) / lay.tp
    return prefill_flops(lay.rank_matmul, head, tokens, attn / lay.attn_ways) + enc * rank.get("vision", 1.0)


def prefill_efficiency(s: SpeedSetup, p_flops: float, p_attn: float, assumptions: list[Assumption],
                       warnings: list[str]) -> float:
    """The compute efficiency of one prompt's prefill: ``s.ce``, or llama.cpp's quantized-GEMM path on a GPU
    (speed_prefill.llamacpp_prefill_efficiency) or on Metal (metal_prefill_efficiency); llama.cpp's CPU kernel
    named."""
    spec, device, peak, bw, prompt_tokens = s.spec, s.device, s.peak, s.bw, s.prompt_tokens
    prefill_path = E.llamacpp_gemm_path(s.fmt, device.kind, device.vendor, s.llamacpp_int8_mmq,
                                        device.capability / 10 if device.capability is not None else None)
    ce_p = s.ce
    if prefill_path is not None and peak is not None and s.compute_efficiency is None:
        head_bytes = s.wb.by_component.get("embedding" if spec.tie_word_embeddings else "lm_head", 0)
        gemm_params = s.matmul_params - s.head_params
        if prefill_path != s.path and s.llamacpp_int8_mmq:  # Volta: no INT8 MMA (efficiency._TURING_CAPABILITY)
            assumptions.append(Assumption(
                "llamacpp_prefill_path", prefill_path, True,
                f"{device.id} (compute capability {device.capability / 10 if device.capability else 0:.1f}) "
                "has FP16 tensor cores and no INT8 MMA: ggml_cuda_should_use_mmq runs a quantized product "
                "of 64 columns or more through F16 cuBLAS (ggml-org/llama.cpp ggml/src/ggml-cuda/mmq.cu "
                "@027ef876 L295-309)"))
        elif prefill_path != s.path:
            assumptions.append(Assumption(
                "llamacpp_int8_mmq", False, False, "given: a llama.cpp build from before "
                + E.LLAMACPP_INT8_MMQ_SINCE + " (quantized prefill products dequantized to F16 for cuBLAS)"))
        ce_p = llamacpp_prefill_efficiency(spec, device, prefill_path, s.pc, gemm_params, prompt_tokens,
                                          s.ubatch or ENG.LLAMACPP_N_UBATCH, p_flops, p_attn, peak, assumptions,
                                          flash_attention=s.flash_attention,
                                          quantized_bytes=s.read_bytes - head_bytes,
                                          expert_quantized_bytes=float(s.expert_bytes)
                                          if spec.moe is not None else 0.0,
                                          stream_rate=bw * s.be if bw else None)
        moe_ub = s.ubatch or ENG.LLAMACPP_N_UBATCH
        # the largest ubatch llama.cpp runs at its default n_batch: it takes n_ubatch = min(n_batch,
        # n_ubatch) (src/llama-context.cpp, llama_context's constructor), n_batch 2048 by default (review22 D4)
        one = min(prompt_tokens, ENG.LLAMACPP_N_BATCH)
        if spec.moe is not None and prefill_path == E.MMQ_PATH and moe_ub < one:
            moe_ubatch_note(moe_ub, ce_p, llamacpp_prefill_efficiency(
                spec, device, prefill_path, s.pc, gemm_params, prompt_tokens, one, p_flops, p_attn,
                peak, [], flash_attention=s.flash_attention, quantized_bytes=s.read_bytes - head_bytes,
                expert_quantized_bytes=float(s.expert_bytes), stream_rate=bw * s.be if bw else None),
                prompt_tokens, one, p_flops / peak, assumptions, warnings)
    elif s.llamacpp and device.kind == "cpu" and peak is not None:
        kernel, kernel_src = E.llamacpp_cpu_kernel(s.fmt)
        assumptions.append(Assumption(
            "llamacpp_cpu_kernel", kernel, True,
            f"timed at the {s.peak_key} FMA peak, {peak / 1e12:.3g} TFLOP/s ({kernel_src})"))
    elif s.llamacpp and device.kind == "apple" and peak is not None \
            and s.compute_efficiency is None:
        ce_p = metal_prefill_efficiency(spec, s.fmt, s.ce, p_flops, prefill_flops(
            s.matmul_params, s.head_params, prompt_tokens, logit_tokens=0), assumptions)
    return ce_p


def prefill_phase(s: SpeedSetup, lay: Layout, wb_dev: WeightBytes,
                  warnings: list[str]) -> tuple[PhaseTime | None, Roofline | None, float, float]:
    """The prefill of one prompt (TTFT) on one device of the layout ``lay``: (its time, roofline, FLOPs, attention
    FLOPs). Eq. (2'): the lm_head runs for the last prompt token only (formulas/speed.py eq. 9 note); eq. (3) at
    ``prefill_efficiency``'s rate; eq. (S7) for an encoder-decoder; eq. E13's eager element-wise traffic; eq. K1's
    launches overlapping it."""
    spec, bw, peak, prompt_tokens, assumptions = s.spec, s.bw, s.peak, s.prompt_tokens, lay.assumptions
    prefill = roof_p = None
    p_attn = attention_flops_step(spec, s.width, prompt_tokens, 0)
    p_flops = prefill_flops(s.matmul_params, s.head_params, prompt_tokens, p_attn)  # eq. (2'): head on the last
    if s.t5 is not None:  # eq. (S7): the encoder over the source, the cross k/v projections, the first
        # target token
        p_flops = ED.encoder_flops(spec, 1, prompt_tokens) + ED.decode_step_flops(spec, 1, prompt_tokens, 1)
    ce_p = prefill_efficiency(s, p_flops, p_attn, assumptions, warnings)

    kv_p = kv_cache(spec, prompt_tokens, 1, s.kv_dtype, mla_mode=s.mla_mode, window_extra=0,
                    repeated_kv=s.repeated_kv).total_bytes * lay.kv_share
    shard = lay.shard
    p_bytes = (s.read_bytes * shard if lay.rank is None else lay.rank_read) + kv_p + state_bytes(s, lay.split,
                                                                                                 lay.tp, 1)
    if s.t5 is not None:  # every weight once, and the cross K/V written
        p_bytes = s.wb.total + cross_attention_kv(spec, prompt_tokens, 1, s.kv_dtype)
    # the vision encoder runs first, its products at the compute efficiency of the dtype's peak (ce), not a
    # llama.cpp quantized-kernel rate (ce_p): its FLOPs enter eq. (3) scaled to take ce's time at ce_p, and
    # its weights (left out of read_bytes) are read once
    enc_flops = s.encoder_flops * ce_p / s.ce if s.encoder_flops else 0.0
    if s.encoder_flops:
        p_bytes += s.wb.by_component.get("vision", 0) * shard if lay.rank is None else wb_dev.by_component.get(
            "vision", 0)
        assumptions.append(Assumption(
            "vision_encoder_flops", f"{s.encoder_flops:.3g}", False,
            "the vision encoder over one prompt's images/video, before the language model's prefill and "
            f"part of the TTFT, at compute efficiency {s.ce:g} (formulas/vision_compute.py eqs. V1-V4)"))
    t_ew = 0.0
    if s.eager_traffic is not None and s.t5 is None and bw:
        # eq. E13: eager transformers runs the norms, rotary, SwiGLU, residual adds and the cache append as
        # kernels of their own between the GEMMs; the append writes the prompt's K/V (out of p_bytes)
        per_token = inference_forward_bytes_per_token(spec, s.act_bytes, lay.tp, lay.split)
        scores = _hf_prefill_bytes(s, kv_p, lay.attn_ways)  # eager attention only (eqs. H2, H3)
        t_ew = elementwise_seconds(prompt_tokens * per_token + scores, bw, s.eager_traffic.expected)
        p_bytes -= kv_p
        assumptions.append(Assumption(
            "prefill_elementwise_bytes_per_token", round(per_token), True,
            f"formulas/elementwise_traffic.py eq. (E13): the eager forward's norms (fp32), rotary, activation, "
            f"residual adds, cache append, embedding and final norm, {t_ew * 1e3:.2f} ms a prompt at "
            f"{s.eager_traffic.expected} of the memory bandwidth ({s.eager_traffic.name}), after the GEMMs "
            f"(formulas/speed.py eq. 3'); {SOURCE_EAGER}"))
    if peak is not None or bw is not None:
        prefill = phase_time(rank_flops(lay, p_flops, p_attn, lay.rank_head, prompt_tokens, enc_flops), p_bytes,
                             peak, bw, ce_p, s.be, collective_seconds(s, lay.comm, prompt_tokens, 1),
                             elementwise_seconds=t_ew)
        if s.prefill_host:  # eq. K1: the forward's launches overlap its device work
            prefill = host_overlapped_step(prefill, s.prefill_host)
        if peak and bw:
            roof_p = phase_roofline(rank_flops(lay, p_flops, p_attn, lay.rank_head, prompt_tokens, s.encoder_flops),
                                    p_bytes, prefill, peak, bw)
    return prefill, roof_p, p_flops, p_attn


def llamacpp_kv_assumptions(s: SpeedSetup, concurrency: int, assumptions: list[Assumption]) -> None:
    """llama.cpp's unified-KV choice and, for a sliding-window model, the cells a decode step reads (engines.
    llamacpp_kv_cells; src/llama-kv-cache-iswa.cpp size_swa), appended to ``assumptions``."""
    lay = _llamacpp_cells_at(s, concurrency)
    assumptions.append(Assumption("kv_unified", s.unified, s.kv_unified is None, ENG.LLAMACPP_KV_UNIFIED_SOURCE))
    if s.spec.sliding_window:
        scan = lay.ring and s.flash_attention and not s.unified and concurrency > 1
        fa_kernel, _, _, ring_read = _llamacpp_cells_read(s, concurrency)
        shown = ring_read if lay.ring else lay.sliding_read(s.ub, s.prompt_tokens, s.output_tokens // 2,
                                                            s.flash_attention)
        assumptions.append(Assumption(
            "llamacpp_sliding_cells_read", shown, True,
            "llama.cpp iSWA cache, cells a decode step reads per " + ("unified stream: min(context x n_seq, "
            "pad256(n_swa x n_seq + n_ubatch))" if s.unified else "sequence's stream: min(context, pad256(n_swa "
            "+ n_ubatch))") + " (src/llama-kv-cache-iswa.cpp:69-73 size_swa; engines.llamacpp_kv_cells)"
            + ("; ggml-cuda's flash attention reads the view padded to 256 cells (src/llama-kv-cache.cpp "
               "get_n_kv)" if fa_kernel is not None else "")
            + ("; flash attention with a stream per sequence stops after the 256-cell tile of the ring's last "
               "in-window cell (ggml-cuda fattn-common.cuh:879 KV_max; engines.LLAMACPP_FA_KV_TILE)"
               if scan else "")))


def fattn_assumptions(spec: ModelSpec, kernel: str, batch: int, unified: bool,
                      assumptions: list[Assumption]) -> None:
    """The flash-attention kernel ggml-cuda picks for a decode step of ``batch`` sequences, and eq. F1's stream
    share (formulas/flash_attention.py), appended to ``assumptions``."""
    fa = E.LLAMACPP_FA_STREAM_SHARE
    assumptions.append(Assumption(
        "llamacpp_fattn_kernel", kernel, True,
        "ggml-cuda fattn.cu ggml_cuda_get_best_fattn_kernel L199-326 (ggml-org/ggml @7b6abb2) for "
        f"head size {spec.head_dim}, {spec.num_heads}/{spec.num_kv_heads} heads, "
        + ("one stream of one token" if batch == 1 else f"{batch} streams of one token" if not unified
           else f"one stream of {batch} tokens")
        + "; the K/V view padded to 256 cells (formulas/flash_attention.py)"))
    assumptions.append(Assumption(fa.name, fa.expected, True, fa.source + " (formulas/flash_attention.py "
                                  "eq. F1: the K/V cells at this share of the weight stream's rate)"))


def llamacpp_batched_step(s: SpeedSetup, lay: Layout, batch: int, attn: float, nbytes: float, kv: float,
                          kernel: str | None) -> PhaseTime:
    """Eq. (10) of formulas/speed.py: llama.cpp on an NVIDIA GPU decoding ``batch`` sequences at once; ``kv`` of
    ``nbytes`` are the K/V cells, streamed by the flash-attention ``kernel`` (None: no flash attention)."""
    spec, device, bw, peak, tp = s.spec, s.device, s.bw, s.peak, lay.tp
    mmq = s.path == E.MMQ_PATH
    factor = E.LLAMACPP_MMQ_STEP if mmq else E.LLAMACPP_CUBLAS
    # device.int8_peak: the one INT8 rule (its stand-in named by the prefill)
    gemm_peak, gemm_key = (int8_peak(device)[0], "int8") if mmq else device.peak_flops("fp16_acc16")
    fp16_peak, _ = device.peak_flops("fp16_acc16")
    if gemm_peak is None or fp16_peak is None:  # no tensor rate: the products at the dtype's peak
        gemm_peak = fp16_peak = peak
    sync = E.llamacpp_sync_mma_share(device.architecture)
    if sync is not None and gemm_peak is not None and fp16_peak is not None:  # the same kernels as prefill
        gemm_peak, fp16_peak = gemm_peak * sync.expected, fp16_peak * sync.expected
    if batch == lay.concurrency:
        assumptions = lay.assumptions
        assumptions.append(Assumption(
            "llamacpp_batched_decode", f"{batch} sequences: weights once, every sequence's KV, products at "
            f"{s.path} ({gemm_key} peak x {factor.expected}) beyond the first column, attention at the FP16 rate"
            + (" over the whole unified buffer" if s.unified else "")
            + (f"; both rates x {sync.expected} ({sync.name})" if sync is not None else ""),
            True, "formulas/speed.py eq. (10): ggml-cuda mmvq.cu/mmq.cu, "
            + ("one unified KV stream: each query computes over every sequence's cells (llama.cpp PR "
               "#14363; no published -kvu measurement checks this case yet)"
               if s.unified else "one KV stream per sequence (llama.cpp PR #14363)") + "; " + factor.source))
        if spec.moe is not None and s.identical_sequences:
            assumptions.append(Assumption(
                "identical_sequences_routing", round(llamacpp_identical_routings(batch), 2), True,
                f"identical prompts diverge in llama.cpp's batched step: {batch} sequences read the experts of "
                f"{E.LLAMACPP_IDENTICAL_ROUTINGS_SCALE.expected} "
                f"b^{E.LLAMACPP_IDENTICAL_ROUTINGS_EXPONENT.expected}"
                " routings (formulas/speed.py eq. 11; " + E.LLAMACPP_IDENTICAL_ROUTINGS_SCALE.source + ")"))
        g = E.LLAMACPP_GRAPHS_OFF_OVERHEAD_GPU
        assumptions.append(Assumption(g.name, g.expected, True, g.source))
    extra = decode_flops(s.matmul_params, batch - 1) / tp  # eq. (1') beyond the first column
    # b >= 2: no CUDA graph, no single-column fusion (efficiency.LLAMACPP_GRAPHS_OFF_OVERHEAD_GPU)
    graphs_off = step_overhead(spec.num_layers, E.LLAMACPP_GRAPHS_OFF_OVERHEAD_GPU.expected)
    share = E.LLAMACPP_FA_STREAM_SHARE.expected if kernel is not None else 1.0
    assert gemm_peak is not None and fp16_peak is not None  # float(None) failed here before: no new case
    return batched_decode_time(nbytes, float(bw), s.be, extra, float(gemm_peak), factor.expected, attn,
                               float(fp16_peak), E.LLAMACPP_CUBLAS.expected,
                               collective_seconds(s, lay.comm, batch, batch), s.step_fixed + graphs_off,
                               kv_bytes=kv if kernel is not None else 0.0, kv_share=share)


def decode_weight_bytes(s: SpeedSetup, lay: Layout, batch: int) -> float:
    """The weight bytes one device reads in a decode step of ``batch`` sequences, before its shard: an MoE's
    experts of b routings (eq. 5), one routing for identical sequences except in llama.cpp's batched step (eq. 11);
    under a plan (eq. TP1) the rank's shards, its routed experts' share read."""
    spec = s.spec
    w = float(s.read_bytes)
    if spec.moe is not None and s.expert_bytes:
        # distinct sequences: b routings (eq. 5); identical ones: one routing, except in llama.cpp's batched
        # step, where they diverge to the routings of eq. (11)
        routings: float = float(batch)
        if s.identical_sequences:
            routings = llamacpp_identical_routings(batch) if s.path is not None and batch > 1 else 1.0
        frac = moe_expert_fraction(spec.moe.experts_per_token, spec.moe.num_experts, routings)
        w = s.read_bytes - s.expert_bytes + s.expert_bytes * frac
        if lay.rank is not None:  # the rank's shards (eq. TP1), its routed experts' share read
            w = lay.rank_read - lay.rank_experts + lay.rank_experts * frac
    elif lay.rank is not None:
        w = lay.rank_read
    return w


def decode_kv_bytes(s: SpeedSetup, lay: Layout, batch: int, ctx: int) -> tuple[float, str | None]:
    """The K/V bytes one device reads in a decode step of ``batch`` sequences at context ``ctx`` (formulas/kv_cache.py)
    and llama.cpp's flash-attention kernel (None: none): llama.cpp reads its cells in use per stream
    (``_llamacpp_cells_read``), a ring's cells a step scans, not the window alone."""
    spec = s.spec
    kernel = None
    if s.llamacpp:
        cells = _llamacpp_cells_at(s, batch)
        kernel, per_stream, streams, sliding = _llamacpp_cells_read(s, batch)
        if kernel is not None and batch == lay.concurrency:
            fattn_assumptions(spec, kernel, batch, s.unified, lay.assumptions)
        extra = cells.window_extra
        if cells.ring:  # the ring's cells a step reads (the flash-attention mask scan with several streams)
            extra = sliding - cells.window
        kv = kv_cache(spec, per_stream, streams, s.kv_dtype, mla_mode=s.mla_mode,
                      window_extra=extra, repeated_kv=s.repeated_kv).total_bytes * lay.kv_share
    else:
        kv = kv_cache(spec, ctx, batch, s.kv_dtype, mla_mode=s.mla_mode, window_extra=0,
                      repeated_kv=s.repeated_kv).total_bytes * lay.kv_share
    return kv, kernel


def decode_step(s: SpeedSetup, lay: Layout, batch: int, unfused: E.Factor | None,
                unfused_peak: float | None) -> tuple[PhaseTime | None, Roofline | None]:
    """One decode step of ``batch`` sequences mid-generation (context prompt + output/2) on one device of ``lay``:
    eq. (1') FLOPs, the weight, K/V, recurrent-state and eager-cache bytes it reads, timed by eq. (4) (phase_time),
    llama.cpp's batched step (eq. 10), its flash-attention stream (eq. F1) or unfused single-token attention (eq. 13,
    ``unfused`` at ``unfused_peak``), the host step overlapping it (eq. 14). Records its K/V and weight bytes in
    ``lay``."""
    spec, bw, peak, tp = s.spec, s.bw, s.peak, lay.tp
    ctx = s.prompt_tokens + s.output_tokens // 2
    if s.t5 is not None:  # eq. (S7) mid-generation: target/2 tokens of self K/V, the source's cross K/V
        return t5_decode_step(s, batch, lay.kv_read)
    # one unified llama.cpp stream: each query's attention runs over every sequence's cells (masked, not
    # skipped)
    attn = batch * attention_flops_step(spec, s.width, 1, ctx) / lay.attn_ways
    if s.llamacpp:
        attn *= _llamacpp_cells_at(s, batch).cross_sequence_attention
    flops = decode_flops(s.matmul_params, batch) / tp + attn if lay.rank is None else decode_flops(  # eq. (1')
        lay.rank_matmul, batch, attn)
    w = decode_weight_bytes(s, lay, batch)
    kv, kernel = decode_kv_bytes(s, lay, batch, ctx)
    lay.kv_read[batch] = kv
    w_dev = w * lay.shard if lay.rank is None else w
    lay.weights_read[batch] = w_dev
    hf = _hf_step_bytes(s, batch, ctx, kv, lay.attn_ways) if s.hf_cache else 0.0
    # a recurrent layer reads its state and writes it back once per token (Gu & Dao 2023, section 3.3)
    nbytes = w_dev + kv + 2 * state_bytes(s, lay.split, tp, batch) + hf
    if peak is None and bw is None:
        return None, None
    if s.path is not None and batch > 1 and bw and peak and s.compute_efficiency is None:
        tb = llamacpp_batched_step(s, lay, batch, attn, nbytes, kv, kernel)
        return tb, phase_roofline(flops, nbytes, tb, peak, bw)
    t_attn = 0.0
    if kernel is not None and bw:
        # eq. F1: the flash-attention kernel streams the K/V cells at a share of the weight stream's rate
        # (efficiency.LLAMACPP_FA_STREAM_SHARE), after the weight products
        t_attn = FA.fattn_stream_seconds(kv, float(bw), s.be, E.LLAMACPP_FA_STREAM_SHARE.expected)
        nbytes -= kv
    elif unfused is not None and batch == 1 and bw and unfused_peak:
        # eq. (13): without flash attention the one-token KQ/KQV products read the cache inside kernels whose
        # cost follows their arithmetic (efficiency.LLAMACPP_UNFUSED_ATTENTION_WORK_*)
        t_attn = unfused_attention_time(kv, float(bw), s.be, attn, unfused_peak, unfused.expected)
        nbytes -= kv
    t = phase_time(flops, nbytes, peak, bw, s.ce, s.be, collective_seconds(s, lay.comm, batch, batch), s.step_fixed,
                   attention_seconds=t_attn, floor_seconds=s.kernel_floor)
    hs = _transformers_decode_host(s, batch) if s.decode_loop_kernels is not None else s.host_step
    if hs:  # eq. (14): the engine's host step overlaps the device's
        t = host_overlapped_step(t, hs)
    r = phase_roofline(flops, nbytes + (kv if t_attn else 0.0), t, peak, bw) if peak and bw else None
    return t, r


def t5_decode_step(s: SpeedSetup, batch: int, kv_read: dict[int, float]) -> tuple[PhaseTime | None, Roofline | None]:
    """An encoder-decoder's decode step of ``batch`` sequences mid-generation (formulas/encoder_decoder_serving.py
    eq. S7): target/2 tokens of self K/V and the source's cross K/V, every decoder weight read; its K/V bytes
    recorded in ``kv_read``."""
    spec, bw, peak, prompt_tokens = s.spec, s.bw, s.peak, s.prompt_tokens
    target = s.output_tokens // 2
    flops = ED.decode_step_flops(spec, batch, prompt_tokens, target)
    kv = (kv_cache(spec, target, batch, s.kv_dtype).total_bytes
          + cross_attention_kv(spec, prompt_tokens, batch, s.kv_dtype))
    kv_read[batch] = kv
    nbytes = s.read_bytes + kv
    if peak is None and bw is None:
        return None, None
    t = phase_time(flops, nbytes, peak, bw, s.ce, s.be, 0.0, s.step_fixed)
    if s.host_step:
        t = host_overlapped_step(t, s.host_step)
    return t, (phase_roofline(flops, nbytes, t, peak, bw) if peak and bw else None)


def layout_shares(s: SpeedSetup, wb_dev: WeightBytes, tp: int, concurrency: int, comm: Collectives,
                  assumptions: list[Assumption]) -> Layout:
    """The layout record of ``tp`` devices holding ``wb_dev`` each: their shares of the weights, K/V and attention
    (formulas/tensor_parallel.py kv_fraction_per_device, activation_split) and, under a plan, each rank's (eq. TP1:
    transformers' plan, vLLM's and SGLang's replicated linears keep matrices whole on every rank, which each rank
    multiplies in full and reads whole; plan_rank_shares None: every matrix split tp ways, llama.cpp)."""
    spec = s.spec
    shard = wb_dev.total / s.wb.total if s.wb.total else 1.0
    kv_share = kv_fraction_per_device(spec, tp, s.mla_mode == "latent", s.engine)
    split = activation_split(s.engine, spec.model_type)  # what the engine's TP splits (transformers: its plan)
    rank = plan_rank_shares(spec, s.engine, tp) if s.t5 is None and s.wb.by_component else None
    rank_matmul = rank_head = rank_read = rank_experts = 0.0
    if rank is not None:
        rank_matmul = sum(n * rank[c] for c, n in s.matmul_parts.items())
        rank_head = s.head_params * rank.get(s.head_component, 1.0)
        comp = wb_dev.by_component  # the rank's bytes of each component (shard_weights: the plan's shards)
        unread = s.unread  # a local: the generator reads it per component
        rank_read = float(sum(b for c, b in comp.items() if c not in unread))
        rank_experts = float(comp.get("experts", 0))
    return Layout(tp, concurrency, kv_share, shard, split, split.ways("attention", tp), rank, rank_matmul, rank_head,
                  rank_read, rank_experts, comm, {}, {}, assumptions)


def layout_speed(s: SpeedSetup, count: int, tensor_parallel: int | None, concurrency: int,
                 link_bandwidth: float | None, nvlink_mesh: bool | None, decode_only: bool = False) -> SpeedEstimate:
    """``estimate_speed``'s answer for one layout of the model ``s`` (``speed_model``'s second stage): the layout's
    shares and collectives (``layout_shares``, ``layout_collectives``), the prefill (``prefill_phase``), the decode
    at the load and of one sequence (``decode_step``), the range bands (``range_band_assumptions``)."""
    spec, device, bw, peak, prompt_tokens = s.spec, s.device, s.bw, s.peak, s.prompt_tokens
    if count < 1 or concurrency < 1:
        raise InputError("count, concurrency and prompt_tokens must be >= 1; output_tokens >= 0")
    tp = tensor_parallel or count
    assumptions = list(s.pre)
    warnings = list(s.settled)
    if spec.moe is not None and (s.identical_sequences or concurrency > 1):
        assumptions.append(Assumption(
            "identical_sequences", s.identical_sequences, not s.identical_sequences,
            ("every sequence carries the same tokens: one routing, or those of eq. (11) in llama.cpp's batched "
             "step (formulas/speed.py)") if s.identical_sequences else
            "distinct prompts: a decode step reads the experts of b independent routings (formulas/speed.py "
            "eq. 5)"))
    assumptions += s.post
    wb_dev = shard_weights(spec, s.wb, tp, s.act_bytes, s.engine, s.group_size,
                           serving_fused_experts(spec, s.engine, s.bytes_fmt), s.other_bytes, s.capability)
    comm = layout_collectives(s, count, tp, concurrency, link_bandwidth, nvlink_mesh, warnings)
    lay = layout_shares(s, wb_dev, tp, concurrency, comm, assumptions)
    if not decode_only:
        ar = tp_allreduce_assumption(s, comm, link_bandwidth)
        if ar is not None:
            assumptions.append(ar)

    prefill = roof_p = None
    p_flops = p_attn = 0.0
    if not decode_only:  # fit's ranking times the decode alone
        prefill, roof_p, p_flops, p_attn = prefill_phase(s, lay, wb_dev, warnings)

    if s.llamacpp:
        llamacpp_kv_assumptions(s, concurrency, assumptions)

    # llama.cpp without flash attention: a single-token step's KQ/KQV products (formulas/speed.py eq. 13)
    unfused: E.Factor | None = None
    unfused_peak: float | None = None
    if s.llamacpp and not s.flash_attention:
        unfused, unfused_peak = llamacpp_unfused_attention(device, s.fmt, concurrency, assumptions, warnings)

    # fit's ranking decoded this layout already (one speed_model per fit; not llama.cpp, whose decode_step also
    # writes assumptions)
    kv_read, weights_read = lay.kv_read, lay.weights_read
    key = (count, tp, concurrency, link_bandwidth, comm.nvlink_mesh)
    done = s.decoded.get(key) if not s.llamacpp else None
    if done is None:
        done = (*decode_step(s, lay, concurrency, unfused, unfused_peak), kv_read.get(concurrency),
                weights_read.get(concurrency))
        if not s.llamacpp:
            s.decoded[key] = done
    else:
        if done[2] is not None:
            kv_read[concurrency] = done[2]
        if done[3] is not None:
            weights_read[concurrency] = done[3]
    decode, roof_d = done[0], done[1]
    if s.launch_host and tp > 1:
        warnings.append(f"transformers tensor parallel ({tp} devices): each device launches the same kernels (eq. "
                        "K4 counts one device's) plus the launches of its tensor-parallel plan's collectives (the "
                        "all-reduces and all-gathers the tp_allreduce assumption times), which the count leaves "
                        "out: the host time per step is under-stated")
    if s.launch_host and s.output_tokens and decode is not None and decode.bound == "host":  # only when decoding
        warnings.append(f"decode is host-bound: eager transformers launches each decode step's kernels from "
                        f"Python ({s.launch_host * 1e3:.1f} ms a step against {decode.compute_seconds * 1e3:.2f} / "
                        f"{decode.memory_seconds * 1e3:.2f} ms of device compute / memory time; "
                        "formulas/launch_overhead.py eqs. K1, K4); CUDA graphs (a static cache with "
                        "torch.compile) or a serving engine remove most of it")
    if s.output_tokens == 0:  # prefill only (embeddings, scoring): no token is decoded, no decode step is timed
        decode = roof_d = None
    if decode_only:  # the same decode as the full answer's, nothing else
        return SpeedEstimate(spec.name, device.id, count, tp, s.bytes_fmt, s.dtype, prompt_tokens, s.output_tokens,
                             concurrency, None, decode if bw is not None else None, None, None, None)
    single, _ = decode_step(s, lay, 1, unfused, unfused_peak) if concurrency > 1 and decode is not None else (
        decode, roof_d)
    if bw is None:  # a compute-only decode time would be wildly optimistic
        decode = single = None
        roof_d = None
    if peak is None:
        prefill = None
        roof_p = None
    details = {"params_active": s.pc.active, "matmul_params": s.matmul_params, "weights_bytes": s.wb.total,
               "weights_bytes_per_device": wb_dev.total, "attention_width": s.width, "peak_flops": peak,
               "peak_key": s.peak_key, "bandwidth": bw, "prefill_flops": p_flops,
               "bandwidth_factor": s.bw_factor.name, "link_bandwidth": link_bandwidth,
               "allreduce_bandwidth": comm.link, "decode_overhead_seconds": s.step_fixed,
               "host_step_seconds": s.host_step, "kv_bytes_per_decode_step": kv_read.get(concurrency),
               "weight_bytes_per_decode_step": weights_read.get(concurrency),
               "prefill_flops_per_device": rank_flops(lay, p_flops, p_attn, lay.rank_head, prompt_tokens,
                                                      s.encoder_flops)}
    if s.t5 is not None:
        details["decode_read_weight_bytes"] = s.read_bytes
    if comm.plan_comm is not None:  # eq. TP2's collectives per forward (their seconds: each phase's comm_seconds)
        details["tp_plan_collectives"] = {k: sum(c.kind == k for c in comm.plan_comm) for k in ("all_reduce",
                                                                                                "all_gather")}
    if spec.recurrent_layer_count:
        details["recurrent_state_bytes_per_decode_step"] = 2 * state_bytes(s, lay.split, tp, concurrency)
        details["state_dtypes"] = list(s.state_dtypes)
    serving = range_band_assumptions(spec, device, s.engine, s.engine_version, s.llamacpp, s.launch_host, tp, concurrency,
                                     prefill, decode, details, assumptions, warnings)
    return SpeedEstimate(spec.name, device.id, count, tp, s.bytes_fmt, s.dtype, prompt_tokens, s.output_tokens,
                         concurrency, prefill, decode, single, roof_p, roof_d, tuple(assumptions), tuple(warnings),
                         details, serving, s.engine_version, R.TRANSFORMERS if s.launch_host else None,
                         s.engine == "transformers")
