"""``speed_model``'s second stage: ``layout_speed``, ``estimate_speed``'s answer for one layout (count, tensor
parallelism, concurrency, link) of a ``SpeedSetup``: the layout's shares and collectives, the prefill, the decode
(speed_decode.py), and the rules only a layout reads (the tp_allreduce assumption, llama.cpp's KV cells shown and
unfused attention, eager transformers' prefill traffic, the range bands). No arithmetic of its own beyond unpacking
(every equation is in formulas/)."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from ..errors import InputError
from ..formulas import encoder_decoder_serving as ED
from ..formulas import hf_cache_traffic as HC
from ..formulas.dtypes import DTYPE_BYTES
from ..formulas.elementwise_traffic import SOURCE_EAGER, elementwise_seconds, inference_forward_bytes_per_token
from ..formulas.kv_cache import cross_attention_kv, kv_cache
from ..formulas.model_parallel_time import serving_pipeline_step
from ..formulas.network import NCCL_TUNING_SOURCE, ring_bus_bandwidth
from ..formulas.serving_expert_parallel import (
    SGLANG_FULL_GROUP_COMPONENTS,
    dp_attention_exchange_seconds,
    exchange_seconds,
    expert_share,
    expert_split_weights,
    full_group_weights,
    local_experts,
    moe_split,
)
from ..formulas.speed import (
    PhaseTime,
    Roofline,
    chunked_scan_seconds,
    host_overlapped_step,
    phase_roofline,
    phase_time,
    prefill_flops,
)
from ..formulas.tensor_parallel import (
    activation_split,
    kv_fraction_per_device,
    plan_rank_shares,
    shard_weights,
    transformers_plan_collectives,
)
from ..formulas.vllm_mxfp4 import vllm_mxfp4_backend, vllm_mxfp4_padded_sizes, vllm_mxfp4_resident_extra
from ..formulas.weight_formats import WeightBytes
from ..result import Assumption
from ..specs import ModelSpec
from . import efficiency as E
from . import engines as ENG
from . import ranges as R
from .device import (
    llamacpp_backend,
    nvlink_link_bandwidth,
    nvlink_link_why,
    nvlink_mesh_for,
    peer_to_peer,
    peer_to_peer_why,
)
from .formats import serving_fused_experts
from .speed_decode import (
    collective_seconds,
    cross_allreduce_latency,
    decode_step,
    llamacpp_cells_at,
    llamacpp_cells_read,
    state_bytes,
)
from .speed_prefill import attention_flops_step, llamacpp_prefill_efficiency, metal_prefill_efficiency, moe_ubatch_note
from .speed_result import SpeedEstimate
from .speed_setup import Collectives, Layout, MachineNetwork, SpeedSetup


def _hf_prefill_bytes(s: SpeedSetup, kv: float, tp: int) -> float:
    """Eqs. H2-H3 over one prompt (eager attention: every score of the s x s matrix, per attention layer)."""
    spec, prompt_tokens = s.spec, s.prompt_tokens
    out = HC.repeat_kv_bytes(kv, spec.num_heads, spec.num_kv_heads) if s.repeats else 0.0
    if s.eager_scores:
        out += s.score_layers * HC.eager_score_bytes(1, max(spec.num_heads // tp, 1), prompt_tokens, prompt_tokens,
                                                     s.act_bytes)
    return out


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


def host_range_note(host_range: tuple[str, float], decode: PhaseTime, concurrency: int, details: dict[str, Any],
                    assumptions: list[Assumption], warnings: list[str]) -> None:
    """A release whose host step is not established but bounded (engines.StepHost.range_seconds, engines.
    HOST_RANGE_STAND_IN): the bound and its composition written to ``details`` (``SpeedEstimate.decode_range``'s slow
    end reads them), named in ``assumptions``; where the modelled step is shorter than the bound -- a release whose
    host step is established at it (vLLM >= 0.14, eq. 14: a step of at least that) is then estimated slower than this
    one -- the inversion is stated in ``warnings``."""
    mode, h = host_range
    slow = decode.seconds + h if mode == "serial" else max(decode.seconds, h)  # eq. 7 / eq. 14
    details["host_range_seconds"], details["host_range_mode"] = h, mode
    f = ENG.HOST_RANGE_STAND_IN
    assumptions.append(Assumption(
        "decode_range_host_seconds", h, True,
        f"the decode range's low end: this release's host step is not established, so its slow end takes the one "
        f"measured host step of the same engine's host code, {h * 1e3:.2f} ms ({f.name}), "
        + ("added to every step (formulas/speed.py eq. 7)" if mode == "serial" else
           "overlapped: max(device, host) (formulas/speed.py eq. 14)")
        + f": {decode.seconds * 1e3:.2f} -> {slow * 1e3:.2f} ms a step; a bound, not an estimate "
        f"(estimate/engines.py HOST_RANGE_STAND_IN); {f.source}"))
    if decode.seconds < h:
        warnings.append(
            f"host step not established for this release: its decode step ({decode.seconds * 1e3:.2f} ms, the device "
            f"alone) is shorter than the {h * 1e3:.2f} ms host step measured on a newer release ({f.name}), the "
            "floor of vLLM >= 0.14's step (asynchronous scheduling, formulas/speed.py eq. 14), so a newer release "
            f"is estimated about {h / decode.seconds:.1f}x slower "
            "than this one: the inversion is the missing measurement's, not the engines'; the decode range's low "
            f"end takes that host step ({concurrency / slow:,.0f} tokens/s before the calibrated band)")


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


def layout_collectives(s: SpeedSetup, count: int, tp: int, concurrency: int, link_bandwidth: float | None,
                       nvlink_mesh: bool | None, warnings: list[str],
                       network: MachineNetwork | None = None) -> Collectives:
    """The collectives of ``tp`` devices decoding ``concurrency`` sequences: the bandwidth the all-reduces reach (the
    one rule training's collectives read: device.nvlink_link_bandwidth, formulas/network.py eq. 12 on NVLink,
    whichever kernel the engine runs) and the all-reduce kernel of a decode step of the sequences (engines.
    tp_allreduce): 2 per layer (row-parallel o_proj and down_proj) and, in vLLM / SGLang, one for the
    vocabulary-parallel embedding; transformers (tp_plan "auto"): the collectives its plan's styles run, not two
    all-reduces per layer (formulas/tensor_parallel.py transformers_plan_collectives, eq. TP2). ``network``: the
    machines the group spans and their network, where it spans more than one: training's rule for a ring across
    machines, the bus bandwidth min(in-machine, the machine's network) (formulas/network.py eq. (11)), NCCL (the
    engines' custom kernel is off across machines) at its in-machine latency plus what NCCL's tuning model adds for
    the network hops (eq. (13'), ``cross_allreduce_latency``)."""
    device, spec = s.device, s.spec
    link, link_share = nvlink_link_bandwidth(device, link_bandwidth) if link_bandwidth else (link_bandwidth, None)
    if tp > 1 and link is None:
        warnings.append(f"no interconnect bandwidth for {count} x {device.id}; tensor-parallel communication "
                        "is not counted")
    if nvlink_mesh is None and tp > 1 and s.engine in ENG.ALLREDUCE_ENGINES + ENG.NCCL_ONLY_ENGINES:
        nvlink_mesh = nvlink_mesh_for(device, None, tp)  # the device's own link (fit passes an instance's)
    p2p = peer_to_peer(device)
    library = "RCCL" if device.vendor == "AMD" else "NCCL"  # ROCm's torch.distributed "nccl" backend is RCCL
    net = network if tp > 1 and network is not None and network.machines > 1 else None
    machines = net.machines if net is not None else 1
    ar_path = ENG.tp_allreduce(s.engine, tp, concurrency * spec.hidden_size * s.act_bytes, nvlink_mesh, p2p, library,
                               machines)
    if s.allreduce_latency is not None and s.allreduce_latency < 0:
        raise InputError("allreduce_latency must not be negative")
    alpha = s.allreduce_latency if s.allreduce_latency is not None else \
        cross_allreduce_latency(ar_path, tp, machines, nvlink_mesh)
    reductions = 2 * spec.num_layers + (1 if ar_path is not None else 0)
    plan_comm = transformers_plan_collectives(spec) if s.engine == "transformers" and tp > 1 else None
    intra = link
    if net is not None and link:  # eq. (11): the ring leaves each machine once per channel, on its NICs
        link = ring_bus_bandwidth(link, machines, net.bandwidth)
    return Collectives(tp, concurrency, link, link_share, nvlink_mesh, p2p, library, ar_path, alpha, reductions,
                       plan_comm, net, intra if net is not None else None)



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
        net = c.network
        across = "" if net is None else (
            f"; the group spans {net.machines} machines: bus bandwidth min({(c.intra_link or 0) / 1e9:.4g} GB/s in a "
            f"machine, {net.bandwidth / 1e9:.4g} GB/s {net.what} per machine) (formulas/network.py eq. (11), "
            "training's rule for a ring across machines)"
            + (f", latency {lat.expected * 1e6:.2f} us measured in one machine + "
               f"{(c.alpha - lat.expected) * 1e6:.2f} us for the network hops (eq. (13'): NCCL's tuning model, "
               f"{NCCL_TUNING_SOURCE})" if lat is not None and s.allreduce_latency is None else ""))
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
               and (ar_path.kernel.startswith("custom") or not c.p2p) else "") + across)
    return None


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


def _gdn_heads_past(heads: float) -> str:
    """The extrapolation eq. (17) makes past the heads per GPU its check covers (efficiency.GDN_CHUNK_HEADS_CHECKED)."""
    if heads <= E.GDN_CHUNK_HEADS_CHECKED:
        return ""
    return (f" (past the {E.GDN_CHUNK_HEADS_CHECKED} the held-out row GK10 checks, there already 19 % above the fit: "
            "the fit has no head term, so the scan time is likely under-estimated here)")


def gdn_prefill_seconds(s: SpeedSetup, lay: Layout, warnings: list[str]) -> tuple[float, float]:
    """formulas/speed.py eq. (17): a serving engine's chunked Gated DeltaNet scans over one prompt on a GPU
    (efficiency.gdn_chunk_kernel; elsewhere 0), named in ``lay``'s assumptions, as (the calls' fixed part L t_g, paid
    once per forward: the prefill's overhead; the chunks' part L t_ch ceil(T / 64), paid per prompt: beside its
    attention, which eq. P1 scales by the prompts); the warning names what the decode step of those layers leaves
    out (their recurrent kernel timed by its state bytes only)."""
    spec = s.spec
    rec = spec.recurrent
    if rec is None or not E.gdn_chunk_kernel(s.engine, s.device.kind, rec.kind):
        return 0.0, 0.0
    layers = spec.recurrent_layer_count
    call, step = E.GDN_CHUNK_CALL_SECONDS.expected, E.GDN_CHUNK_STEP_SECONDS.expected
    t = chunked_scan_seconds(layers, s.prompt_tokens, E.GDN_CHUNK_TOKENS, call, step)
    heads = rec.num_heads / max(1, lay.split.ways("mixer", lay.tp))
    lay.assumptions.append(Assumption(
        "gdn_chunk_scan", f"{layers} x ({call * 1e6:.1f} us + {-(-s.prompt_tokens // E.GDN_CHUNK_TOKENS)} chunks x "
        f"{step * 1e6:.3f} us) = {t * 1e3:.2f} ms a prompt", True,
        "formulas/speed.py eq. (17): the chunked Gated DeltaNet prefill (vLLM / SGLang flash-linear-attention "
        "chunk_gated_delta_rule: its state scan walks the 64-token chunks in order), fitted on vLLM PR #38981's "
        f"B200 kernel times at {E.GDN_CHUNK_FIT_HEADS} value heads per GPU (validation/gdn_chunk_kernel_times.csv); "
        f"here {heads:g} per GPU{_gdn_heads_past(heads)} "
        "and this GPU take the B200 figures (no published row times another); the calls' "
        f"{layers * call * 1e3:.2f} ms once per forward (each prefill step of a burst pays it again: "
        "estimate/speed_result.py eq. P1s), the chunks' part per prompt; a lone prompt longer than the engine's "
        "chunk budget pays the calls once per step too, not counted"))
    warnings.append(
        f"Gated DeltaNet decode: the {layers} recurrent layers' decode kernels (causal_conv1d_update, "
        "fused_recurrent_gated_delta_rule / fused_sigmoid_gating_delta_rule_update) are timed by their state bytes at "
        "the step's bandwidth share only; vLLM PR #31722's published B200 / H200 times of the recurrent kernel at "
        "Qwen3-Next shapes (8 value heads per GPU, bf16 state) reach 0.27-0.52 of the datasheet bandwidth, so "
        "the decode step may be longer than estimated (not modelled: no published row times the conv and gating "
        "kernels)")
    return layers * call, t - layers * call


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
        gdn_calls, gdn_chunks = gdn_prefill_seconds(s, lay, warnings)
        prefill = phase_time(rank_flops(lay, p_flops, p_attn, lay.rank_head, prompt_tokens, enc_flops), p_bytes,
                             peak, bw, ce_p, s.be, collective_seconds(s, lay.comm, prompt_tokens, 1),
                             gdn_calls, attention_seconds=gdn_chunks, elementwise_seconds=t_ew)
        if s.prefill_host:  # eq. K1: the forward's launches overlap its device work
            prefill = host_overlapped_step(prefill, s.prefill_host)
        if peak and bw:
            roof_p = phase_roofline(rank_flops(lay, p_flops, p_attn, lay.rank_head, prompt_tokens, s.encoder_flops),
                                    p_bytes, prefill, peak, bw)
    return prefill, roof_p, p_flops, p_attn


def llamacpp_kv_assumptions(s: SpeedSetup, concurrency: int, assumptions: list[Assumption]) -> None:
    """llama.cpp's unified-KV choice and, for a sliding-window model, the cells a decode step reads (engines.
    llamacpp_kv_cells; src/llama-kv-cache-iswa.cpp size_swa), appended to ``assumptions``."""
    lay = llamacpp_cells_at(s, concurrency)
    assumptions.append(Assumption("kv_unified", s.unified, s.kv_unified is None, ENG.LLAMACPP_KV_UNIFIED_SOURCE))
    if s.spec.sliding_window:
        scan = lay.ring and s.flash_attention and not s.unified and concurrency > 1
        fa_kernel, _, _, ring_read = llamacpp_cells_read(s, concurrency)
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


def mxfp4_rank_read(s: SpeedSetup, wb_dev: WeightBytes, tp: int,
                    assumptions: list[Assumption]) -> WeightBytes:
    """A rank's bytes under vLLM's MXFP4 MoE at ``tp`` > 1 ranks: FusedMoE splits the intermediate size first
    (I / TP, vllm 0.19.1 model_executor/layers/fused_moe/layer.py:425-426) and the backend then pads that
    per-rank size (layer.py:536-547 -> oracle/mxfp4.py:376-400), so each rank reads eq. X4's extra of its own padded
    shard (formulas/vllm_mxfp4.py ``vllm_mxfp4_resident_extra`` at ``tp``, the memory estimate's one rule), not
    1 / tp of the tensor-parallel-1 extra ``shard_weights`` split off ``s.wb`` (gpt-oss Marlin at TP 2: 1440 -> 1536,
    not 2944 / 2). The difference goes to the rank's experts and total."""
    rank = vllm_mxfp4_resident_extra(s.spec, s.bytes_fmt, tp, s.capability, read=True)
    delta = round(rank - s.mx_read / tp)
    moe = s.spec.moe
    if moe is not None:
        backend = vllm_mxfp4_backend(s.capability)
        hp, ip = vllm_mxfp4_padded_sizes(backend, s.spec.hidden_size, moe.expert_intermediate_size // tp)
        assumptions.append(Assumption(
            "mxfp4_expert_read_per_rank", f"{backend}, TP {tp}", True,
            f"each of {tp} ranks runs its experts at hidden {hp}, intermediate {ip} (I / TP = "
            f"{moe.expert_intermediate_size // tp} padded by the backend): it reads {rank / 2**30:.3f} GiB more over "
            f"all its expert shards than its checkpoint share ({delta / 2**30:+.3f} GiB against 1 / {tp} of the TP-1 "
            "extra; formulas/vllm_mxfp4.py eq. X4)"))
    if not delta:
        return wb_dev
    comp = wb_dev.by_component
    return replace(wb_dev, total=wb_dev.total + delta,
                   by_component={**comp, "experts": comp.get("experts", 0) + delta})


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


def data_parallel_shares(s: SpeedSetup, lay: Layout, wb_dev: WeightBytes, dp: int, expert_parallel: bool,
                         assumptions: list[Assumption]) -> Layout:
    """``lay``, one device of a data-parallel rank of ``lay.tp`` devices among ``dp`` (formulas/
    serving_expert_parallel.py): its routed experts split by eqs. EP1-EP2 (the same ``expert_split_weights`` the
    memory estimate holds them by), run over the ``dp`` ranks' gathered routings (eq. EP4)."""
    spec = s.spec
    experts = spec.moe.num_experts if spec.moe is not None else 1
    expert_tp, ep = moe_split(lay.tp, dp, expert_parallel)
    full = float(s.wb.by_component.get("experts", 0))
    split = expert_split_weights(wb_dev, int(full), experts, lay.tp, ep, expert_tp)
    held = float(split.by_component.get("experts", 0))
    assumptions.append(Assumption(
        "expert_split", f"{local_experts(experts, ep)} of {experts} experts" if ep > 1 else f"expert TP {expert_tp}",
        True, f"{dp} data-parallel rank(s) x {lay.tp} tensor-parallel: each device holds "
        f"{expert_share(experts, ep, expert_tp):.4g} of the routed experts' bytes and runs them over the {dp} ranks' "
        "gathered tokens (formulas/serving_expert_parallel.py eqs. EP1-EP2, EP4)"))
    return replace(lay, routing_ranks=dp, experts_held=local_experts(experts, ep) / experts if ep > 1 else 1.0,
                   expert_scale=expert_share(experts, ep, expert_tp) * lay.tp,
                   rank_read=lay.rank_read - lay.rank_experts + held if lay.rank is not None else lay.rank_read,
                   rank_experts=held if lay.rank is not None else lay.rank_experts)


def sglang_dp_shares(s: SpeedSetup, lay: Layout, wb_dev: WeightBytes, dp: int,
                     assumptions: list[Assumption]) -> tuple[Layout, WeightBytes]:
    """``lay`` and ``wb_dev``, one device of SGLang's attention-DP rank of ``lay.tp`` devices among ``dp``: its dense
    MLP, shared-expert and lm_head bytes those of the whole TP group of dp x tp devices (formulas/
    serving_expert_parallel.py eq. EP1s, the same ``full_group_weights`` the memory estimate holds them by), so a
    decode step reads that much less; its attention-TP all-reduces one a layer (attention's), the FFN's sum being in
    eq. EP4s's reduce-scatter. The FLOPs are unchanged: dp x b tokens through 1 / (dp x tp) of those weights."""
    group = shard_weights(s.spec, s.wb, dp * lay.tp, s.act_bytes, s.engine, s.group_size,
                          serving_fused_experts(s.spec, s.engine, s.bytes_fmt), s.other_bytes, s.capability)
    split = full_group_weights(wb_dev, group, dp, lay.tp)
    less = float(sum(b - split.by_component.get(c, 0) for c, b in wb_dev.by_component.items()
                     if c in SGLANG_FULL_GROUP_COMPONENTS and c not in s.unread))
    assumptions.append(Assumption(
        "dp_attention_split", f"FFN and lm_head over {dp * lay.tp} devices", True,
        f"SGLang --attn-dp-size {dp}: attention and the embedding tensor-parallel over each rank's {lay.tp} "
        f"device(s), the dense MLPs, shared experts and lm_head over all {dp * lay.tp} ({less / 2**20:.1f} MiB a "
        "device reads less a step than over its rank's; formulas/serving_expert_parallel.py eq. EP1s)"))
    comm = lay.comm
    if comm.tp > 1 and comm.plan_comm is None:
        comm = replace(comm, reductions=s.spec.num_layers + (1 if comm.ar_path is not None else 0))
    if lay.rank is not None:
        return replace(lay, rank_read=lay.rank_read - less, comm=comm), split
    return replace(lay, read_less=less / lay.shard if lay.shard else less, comm=comm), split


def dp_attention_exchanged(s: SpeedSetup, comm: Collectives, dp: int, tp: int, prefill: PhaseTime | None,
                           decode: PhaseTime | None, single: PhaseTime | None, concurrency: int,
                           assumptions: list[Assumption],
                           warnings: list[str]) -> tuple[PhaseTime | None, PhaseTime | None, PhaseTime | None, float]:
    """``expert_exchanged`` for SGLang's attention DP (formulas/serving_expert_parallel.py eq. EP4s): every decoder
    layer's FFN all-gathers the ``dp`` ranks' hidden states over the dp x ``tp`` devices and reduce-scatters its
    outputs, the lm_head gathers them and all-gathers its logits once, over the device link ``comm.link`` (the
    devices in one machine, as eq. EP4's); the decode step's exchange [s]. No link known: not counted, said."""
    spec = s.spec
    link = comm.intra_link or comm.link
    group = dp * tp
    if link is None:
        warnings.append(f"no interconnect bandwidth for the {dp} attention data-parallel ranks: SGLang's token "
                        "exchange (each layer's gather and reduce-scatter) is not counted")
        return prefill, decode, single, 0.0

    mesh = comm.nvlink_mesh if comm.nvlink_mesh is not None else nvlink_mesh_for(s.device, None, group)

    def alpha(message: float, all_reduce: bool) -> float:  # the collective's latency, as the all-reduces' (eq. 6)
        if s.allreduce_latency is not None:
            return s.allreduce_latency
        path = ENG.tp_allreduce(s.engine, group, message, mesh, comm.p2p, comm.library, all_reduce=all_reduce)
        return path.latency.expected if path is not None else 0.0

    def x(tokens: int) -> float:  # SUM_LEN: each hidden-state gather / scatter an all-reduce of the gathered buffer
        buffer = dp * tokens * spec.hidden_size * s.act_bytes
        return dp_attention_exchange_seconds(tokens, spec.hidden_size, spec.vocab_size, spec.num_layers, s.act_bytes,
                                             dp, group, group, link, link, alpha(buffer, True),
                                             alpha(dp * tokens * spec.vocab_size * s.act_bytes, False))

    def over(p: PhaseTime | None, tokens: int) -> PhaseTime | None:
        return None if p is None else replace(p, seconds=p.seconds + x(tokens), comm_seconds=p.comm_seconds + x(tokens))

    step = x(concurrency)
    a_h = alpha(dp * concurrency * spec.hidden_size * s.act_bytes, True)
    a_v = alpha(dp * concurrency * spec.vocab_size * s.act_bytes, False)
    assumptions.append(Assumption(
        "expert_exchange", f"{step * 1e3:.3f} ms a decode step", True,
        f"{spec.num_layers} layers x (the all-gather of the {dp} ranks' {concurrency} tokens' hidden states before the "
        f"FFN, the reduce-scatter of its outputs) and the lm_head's gather of its {spec.vocab_size} logits, over "
        f"{group} devices at {link / 1e9:.0f} GB/s per device, {2 * spec.num_layers + 2} collectives each paying "
        f"its latency as the tensor-parallel all-reduces do (estimate/engines.py tp_allreduce: "
        f"{2 * spec.num_layers + 1} x {a_h * 1e6:.2f} us for the hidden states, {a_v * 1e6:.2f} us for the logits) "
        "(SGLang's default --moe-a2a-backend none under attention DP; formulas/serving_expert_parallel.py eq. EP4s "
        "with formulas/expert_parallel_time.py eq. E3), not overlapped with compute"))
    return over(prefill, s.prompt_tokens), over(decode, concurrency), over(single, 1), step


def expert_exchanged(s: SpeedSetup, comm: Collectives, dp: int, prefill: PhaseTime | None, decode: PhaseTime | None,
                     single: PhaseTime | None, concurrency: int, assumptions: list[Assumption],
                     warnings: list[str]) -> tuple[PhaseTime | None, PhaseTime | None, PhaseTime | None, float]:
    """The phases of one data-parallel rank with the MoE layers' token exchange over the ``dp`` ranks added (formulas/
    serving_expert_parallel.py eq. EP4, each layer's dispatch and combine over the device link ``comm.link``, the
    ranks in one machine): a decode step of ``concurrency`` sequences, one sequence's, and one prompt's prefill; and
    the decode step's exchange [s]. No link known: not counted, said."""
    spec = s.spec
    link = comm.intra_link or comm.link
    if link is None or spec.moe is None:
        warnings.append(f"no interconnect bandwidth for the {dp} data-parallel ranks: the MoE layers' token exchange "
                        "(dispatch and combine) is not counted")
        return prefill, decode, single, 0.0
    layers = sum(1 for m in spec.moe_layers if m)
    experts = spec.moe.num_experts
    mesh = comm.nvlink_mesh if comm.nvlink_mesh is not None else nvlink_mesh_for(s.device, None, dp * comm.tp)

    def alpha(tokens: int) -> float:  # one NCCL collective's latency (pynccl, no custom kernel), as eq. 6's alpha
        if s.allreduce_latency is not None:
            return s.allreduce_latency
        path = ENG.tp_allreduce(s.engine, dp, dp * tokens * (spec.hidden_size + experts) * s.act_bytes, mesh,
                                comm.p2p, comm.library, all_reduce=False)
        return path.latency.expected if path is not None else 0.0

    def x(tokens: int) -> float:
        return layers * exchange_seconds(tokens, spec.hidden_size, experts, s.act_bytes, dp, dp, link, link,
                                         alpha(tokens))

    def over(p: PhaseTime | None, tokens: int) -> PhaseTime | None:
        return None if p is None else replace(p, seconds=p.seconds + x(tokens), comm_seconds=p.comm_seconds + x(tokens))

    step = x(concurrency)
    assumptions.append(Assumption(
        "expert_exchange", f"{step * 1e3:.3f} ms a decode step", True,
        f"{layers} MoE layers x (the all-gather of each rank's {concurrency} tokens' hidden states and {experts} router "
        f"logits, the reduce-scatter of the outputs) over {dp} data-parallel ranks at {link / 1e9:.0f} GB/s per device, "
        f"2 NCCL collectives a layer at {alpha(concurrency) * 1e6:.2f} us each as the tensor-parallel all-reduces pay "
        "theirs (estimate/engines.py tp_allreduce) "
        "(vLLM's default all2all backend allgather_reducescatter; formulas/serving_expert_parallel.py eq. EP4 with "
        "formulas/expert_parallel_time.py eq. E3), not overlapped with compute"))
    return over(prefill, s.prompt_tokens), over(decode, concurrency), over(single, 1), step


def layout_speed(s: SpeedSetup, count: int, tensor_parallel: int | None, concurrency: int,
                 link_bandwidth: float | None, nvlink_mesh: bool | None, decode_only: bool = False,
                 network: MachineNetwork | None = None, data_parallel: int = 1,
                 expert_parallel: bool = False) -> SpeedEstimate:
    """``estimate_speed``'s answer for one layout of the model ``s`` (``speed_model``'s second stage): the layout's
    shares and collectives (``layout_shares``, ``layout_collectives``), the prefill (``prefill_phase``), the decode
    at the load and of one sequence (``decode_step``), the range bands (``range_band_assumptions``). ``network``:
    the machines a tensor-parallel group spans and their network (``layout_collectives``; None: one machine).
    ``data_parallel`` > 1: one of that many data-parallel ranks (``expert_parallel``: vLLM
    --enable-expert-parallel) at ``concurrency`` sequences of its own, an MoE's experts split and exchanged over the
    ranks (``data_parallel_shares``, ``expert_exchanged``)."""
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
    if s.mx_read and tp > 1:  # vLLM MXFP4: each rank's own padded expert shards (eq. X4 per rank)
        wb_dev = mxfp4_rank_read(s, wb_dev, tp, assumptions)
    comm = layout_collectives(s, count, tp, concurrency, link_bandwidth, nvlink_mesh, warnings, network)
    lay = layout_shares(s, wb_dev, tp, concurrency, comm, assumptions)
    exchange = data_parallel > 1 and spec.moe is not None and bool(s.expert_bytes)
    dp_attention = data_parallel > 1 and s.engine == "sglang"  # SGLang's split and exchange (eqs. EP1s, EP4s)
    if exchange:
        lay = data_parallel_shares(s, lay, wb_dev, data_parallel, expert_parallel, assumptions)
    if dp_attention:
        lay, wb_dev = sglang_dp_shares(s, lay, wb_dev, data_parallel, assumptions)
        comm = lay.comm
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
    key = (count, tp, concurrency, link_bandwidth, comm.nvlink_mesh, comm.network, data_parallel, expert_parallel)
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
    single, _ = decode_step(s, lay, 1, unfused, unfused_peak) if concurrency > 1 and decode is not None and \
        not decode_only else (decode, roof_d)
    step_exchange = 0.0
    if dp_attention:
        prefill, decode, single, step_exchange = dp_attention_exchanged(s, comm, data_parallel, tp, prefill, decode,
                                                                        single, concurrency, assumptions, warnings)
    elif exchange:
        prefill, decode, single, step_exchange = expert_exchanged(s, comm, data_parallel, prefill, decode, single,
                                                                  concurrency, assumptions, warnings)
    if decode_only:  # the same decode as the full answer's, nothing else
        return SpeedEstimate(spec.name, device.id, count, tp, s.bytes_fmt, s.dtype, prompt_tokens, s.output_tokens,
                             concurrency, None, decode if bw is not None else None, None, None, None)
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
    if exchange or dp_attention:
        details.update(data_parallel=data_parallel, expert_parallel=expert_parallel,
                       expert_exchange_seconds_per_decode_step=step_exchange,
                       expert_bytes_per_device=lay.rank_experts if lay.rank is not None
                       else s.expert_bytes * lay.expert_scale * lay.shard)
    if s.t5 is not None:
        details["decode_read_weight_bytes"] = s.read_bytes
    if comm.plan_comm is not None:  # eq. TP2's collectives per forward (their seconds: each phase's comm_seconds)
        details["tp_plan_collectives"] = {k: sum(c.kind == k for c in comm.plan_comm) for k in ("all_reduce",
                                                                                                "all_gather")}
    if spec.recurrent_layer_count:
        details["recurrent_state_bytes_per_decode_step"] = 2 * state_bytes(s, lay.split, tp, concurrency)
        details["state_dtypes"] = list(s.state_dtypes)
    if s.host_range is not None and decode is not None:
        host_range_note(s.host_range, decode, concurrency, details, assumptions, warnings)
    serving = range_band_assumptions(spec, device, s.engine, s.engine_version, s.llamacpp, s.launch_host, tp, concurrency,
                                     prefill, decode, details, assumptions, warnings)
    return SpeedEstimate(spec.name, device.id, count, tp, s.bytes_fmt, s.dtype, prompt_tokens, s.output_tokens,
                         concurrency, prefill, decode, single, roof_p, roof_d, tuple(assumptions), tuple(warnings),
                         details, serving, s.engine_version, R.TRANSFORMERS if s.launch_host else None,
                         s.engine == "transformers")


def pipelined(sp: SpeedEstimate, concurrency: int, pp: int, hidden: int, bandwidth: float | None,
              bandwidth_why: str, hop_latency: float = 0.0) -> SpeedEstimate:
    """One replica's speed over ``pp`` serving pipeline stages from ``sp``, its tensor-parallel speed of the whole
    model at the micro-batch of eq. PP3 (formulas/model_parallel_time.py ``serving_pipeline_micro_batch``; ``sp``'s
    concurrency): a step of eq. PP4 (``serving_pipeline_step``: the stages in turn, ``pp - 1`` sends of each
    device's 2 b h a / tp hidden-state slice at ``bandwidth`` [B/s] one device's, ``bandwidth_why`` saying whose),
    ``concurrency`` sequences each getting one token a step (the ``pp`` micro-batches in flight in turn). The single
    stream and one prompt's prefill (TTFT) cross the same ``pp - 1`` boundaries (a prompt's hidden states, its
    tokens x 2 h a / tp). ``hop_latency`` [s]: each send's latency (formulas/network.py eq. (14) across machines;
    0: not counted)."""
    a = DTYPE_BYTES.get(sp.compute_dtype, 2)
    tp = sp.tensor_parallel

    def hop(tokens: int) -> float:  # eq. PP4's boundary crossings of ``tokens`` hidden states, all pp - 1 of them
        return serving_pipeline_step(0.0, 2.0 * tokens * hidden * a / tp, bandwidth, pp, hop_latency)

    def over(p: PhaseTime | None, tokens: int) -> PhaseTime | None:
        if p is None:
            return None
        extra = hop(tokens)
        return replace(p, seconds=p.seconds + extra, comm_seconds=p.comm_seconds + extra)

    b = sp.concurrency
    note = Assumption("pipeline_parallel", pp, False,
                      f"{pp} stages of {tp} device(s): a decode step is the stages in turn at micro-batches of {b} of "
                      f"the {concurrency} running sequences (vLLM keeps {pp} batches in flight) plus {pp - 1} "
                      f"hidden-state send(s) at {bandwidth_why} (formulas/model_parallel_time.py eqs. PP3-PP4); "
                      "each stage's host step and the receiver's all-gather not counted apart")
    return replace(sp, count=tp * pp, concurrency=concurrency, decode=over(sp.decode, b),
                   decode_single=over(sp.decode_single, 1), prefill=over(sp.prefill, sp.prompt_tokens),
                   assumptions=(*sp.assumptions, note),
                   details={**sp.details, "pipeline_parallel": pp, "pipeline_micro_batch": b,
                            "pipeline_hop_seconds": hop(b)})
