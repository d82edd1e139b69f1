"""The decode step ``speed_layout.layout_speed`` times for a layout: eq. (1') FLOPs, the weight bytes of an MoE's
routings (eqs. 5, 11), the K/V cells llama.cpp reads and its flash-attention kernel (eq. F1), its batched step (eq.
10), eager transformers' cache traffic (eqs. H1-H3) and host step (eqs. K1, K4, 14), an encoder-decoder's step (eq.
S7); and the collectives every phase pays (eqs. 6, TP2). No arithmetic of its own beyond unpacking (every equation
is in formulas/)."""

from __future__ import annotations

from ..formulas import encoder_decoder_serving as ED
from ..formulas import flash_attention as FA
from ..formulas import hf_cache_traffic as HC
from ..formulas.dtypes import DTYPE_BYTES
from ..formulas.kv_cache import cross_attention_kv, kv_cache
from ..formulas.launch_overhead import host_seconds
from ..formulas.network import cross_machine_allreduce_latency
from ..formulas.recurrent_state import layer_state_bytes_per_device, recurrent_state
from ..formulas.speed import (
    PhaseTime,
    Roofline,
    allreduce_time,
    batched_decode_time,
    decode_flops,
    fused_moe_seconds,
    host_overlapped_step,
    identical_sequence_routings,
    moe_expert_fraction,
    phase_roofline,
    phase_time,
    step_overhead,
    unfused_attention_time,
)
from ..formulas.tensor_parallel import HEAD_REPLICATING_ENGINES, ActivationSplit, plan_collective_seconds
from ..result import Assumption
from ..specs import ModelSpec
from . import efficiency as E
from . import engines as ENG
from .device import int8_peak
from .launch import inference_kernels
from .speed_prefill import attended_all_layers, attention_flops_step
from .speed_setup import Collectives, Layout, SpeedSetup

# llama.cpp cache types (-ctk/-ctv) as the speed estimate names them -> whether ggml-cuda's flash attention sees a
# quantized K/V type (fattn.cu L253-268: F32, F16, Q4_0, Q8_0 have kernels; BF16 and the others none at @7b6abb2)
_FA_KV_TYPES = {"fp16": False, "fp32": False, "q8_0": True, "q4_0": True}


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


def llamacpp_cells_at(s: SpeedSetup, batch: int) -> ENG.LlamaCppKV:
    """llama.cpp's KV layout of ``batch`` sequences (engines.llamacpp_kv_cells, the memory estimate's rule), kept per
    batch: a decode step reads the cells in use of each stream, a sliding layer's whole stream once it is full (n_swa
    + n_ubatch cells per sequence, or n_swa x n_seq + n_ubatch in one unified stream), not the window alone; other
    engines read the window."""
    lay = s.layouts.get(batch)
    if lay is None:
        lay = s.layouts[batch] = ENG.llamacpp_kv_cells(s.spec.model_type, s.spec.sliding_window, s.ub, batch,
                                                       s.prompt_tokens + s.output_tokens, s.unified)
    return lay


def llamacpp_cells_read(s: SpeedSetup, batch: int) -> tuple[str | None, int, int, int]:
    """(flash-attention kernel, cells per stream, streams, cells per stream of a sliding layer) that one decode
    step of ``batch`` sequences reads mid-generation. Where ggml-cuda's flash-attention kernel runs, the K/V view
    is llama.cpp's n_kv, padded to 256 cells (formulas/flash_attention.py padded_kv_cells): one stream reads all
    of it (no KV_max scan, fattn-common.cuh L879; fattn-vec.cuh L239 loops to ne11), several streams stop at the
    end of the 256-cell tile of the last open cell, the same count when the streams are equally long."""
    lay = llamacpp_cells_at(s, batch)
    ctx = s.prompt_tokens + s.output_tokens // 2
    per_stream, streams = lay.decode_kv(ctx)
    kernel = _llamacpp_fattn_kernel(s, batch, per_stream, streams)
    sliding = lay.sliding_read(s.ub, s.prompt_tokens, s.output_tokens // 2, s.flash_attention) if lay.ring else 0
    if kernel is not None:
        per_stream = min(lay.stream_tokens(), FA.padded_kv_cells(per_stream))
        if lay.ring:
            sliding = min(lay.sliding_cells, FA.padded_kv_cells(sliding))
    return kernel, per_stream, streams, sliding


def cross_allreduce_latency(path: ENG.AllReducePath | None, tp: int, machines: int, nvlink_mesh: bool | None) -> float:
    """The latency [s] of one all-reduce on ``path`` (engines.tp_allreduce; None: 0) over ``tp`` GPUs on ``machines``
    machines: the path's measured in-machine latency, plus on more than one machine what NCCL's tuning model adds for
    the network hops (formulas/network.py eq. (13'); NVLink hops inside a machine on a mesh, else PCIe)."""
    if path is None:
        return 0.0
    return cross_machine_allreduce_latency(path.latency.expected, tp, machines, bool(nvlink_mesh))

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
        machines = c.network.machines if c.network is not None else 1
        path = ENG.tp_allreduce(s.engine, tp, per_layer, c.nvlink_mesh, c.p2p, c.library, machines)
        if s.allreduce_latency is None:  # formulas/network.py eq. (13') across machines
            a = cross_allreduce_latency(path, tp, machines, c.nvlink_mesh)
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


def decode_routings(s: SpeedSetup, batch: int) -> float:
    """The independent routings of a decode step of ``batch`` sequences: distinct sequences b (eq. 5); identical
    ones one, except in llama.cpp's batched step, where they diverge to the routings of eq. (11)."""
    if s.identical_sequences:
        return llamacpp_identical_routings(batch) if s.path is not None and batch > 1 else 1.0
    return float(batch)


def decode_weight_bytes(s: SpeedSetup, lay: Layout, batch: int) -> float:
    """The weight bytes one device reads in a decode step of ``batch`` sequences, before its shard: an MoE's
    experts of b routings (eq. 5), one routing for identical sequences except in llama.cpp's batched step (eq. 11),
    times the data-parallel ranks whose tokens its experts run (``lay.routing_ranks``, formulas/
    serving_expert_parallel.py eq. EP4); under a plan (eq. TP1) the rank's shards, its routed experts' share read;
    less ``lay.read_less`` (SGLang's attention DP, eq. EP1s) where no plan gives them."""
    spec = s.spec
    w = float(s.read_bytes)
    if spec.moe is not None and s.expert_bytes:
        frac = moe_expert_fraction(spec.moe.experts_per_token, spec.moe.num_experts,
                                   decode_routings(s, batch) * lay.routing_ranks)
        w = s.read_bytes - lay.read_less - s.expert_bytes + s.expert_bytes * lay.expert_scale * frac
        if lay.rank is not None:  # the rank's shards (eq. TP1), its routed experts' share read
            w = lay.rank_read - lay.rank_experts + lay.rank_experts * frac
    elif lay.rank is not None:
        w = lay.rank_read
    else:
        w -= lay.read_less
    return w


def decode_kv_bytes(s: SpeedSetup, lay: Layout, batch: int, ctx: int) -> tuple[float, str | None]:
    """The K/V bytes one device reads in a decode step of ``batch`` sequences at context ``ctx`` (formulas/kv_cache.py)
    and llama.cpp's flash-attention kernel (None: none): llama.cpp reads its cells in use per stream
    (``llamacpp_cells_read``), a ring's cells a step scans, not the window alone."""
    spec = s.spec
    kernel = None
    if s.llamacpp:
        cells = llamacpp_cells_at(s, batch)
        kernel, per_stream, streams, sliding = llamacpp_cells_read(s, batch)
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
        attn *= llamacpp_cells_at(s, batch).cross_sequence_attention
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
    t = phase_time(flops, nbytes, peak, bw, s.ce, s.be, collective_seconds(s, lay.comm, batch, batch),
                   s.step_fixed + fused_moe_step(s, lay, batch), attention_seconds=t_attn,
                   floor_seconds=s.kernel_floor)
    hs = _transformers_decode_host(s, batch) if s.decode_loop_kernels is not None else s.host_step
    if hs:  # eq. (14): the engine's host step overlaps the device's
        t = host_overlapped_step(t, hs)
    r = phase_roofline(flops, nbytes + (kv if t_attn else 0.0), t, peak, bw) if peak and bw else None
    return t, r


def fused_moe_step(s: SpeedSetup, lay: Layout, batch: int) -> float:
    """formulas/speed.py eq. (16)'s fixed seconds in a serving engine's decode step of ``batch`` sequences on one
    device of ``lay`` (efficiency.fused_moe_kernel; elsewhere 0): the touched experts' bytes stay in the step's
    stream at its share, as every weight byte of the step; its assumption is recorded in ``lay`` at the layout's
    concurrency."""
    spec = s.spec
    moe = spec.moe
    if moe is None or not s.expert_bytes or not s.bw \
            or not E.fused_moe_kernel(s.engine, s.device.kind, s.fmt, s.kernel_floor):
        return 0.0
    # the experts it holds that the step's routings touch (the gathered ranks' under data parallelism, eq. EP4)
    touched = moe.num_experts * lay.experts_held * moe_expert_fraction(
        moe.experts_per_token, moe.num_experts, decode_routings(s, batch) * lay.routing_ranks)
    call, each = E.FUSED_MOE_CALL_SECONDS.expected, E.FUSED_MOE_EXPERT_SECONDS.expected
    layers = sum(1 for m in spec.moe_layers if m)
    fixed = fused_moe_seconds(0.0, float(s.bw), E.FUSED_MOE_STREAM_SHARE.expected, layers, touched, call, each)
    if batch == lay.concurrency:
        lay.assumptions.append(Assumption(
            "fused_moe_kernel", f"{layers} x ({call * 1e6:.1f} us + {touched:.1f} experts x {each * 1e6:.3f} us) = "
            f"{fixed * 1e3:.2f} ms a step", True,
            "formulas/speed.py eq. (16): the serving engine's fused-MoE kernel's time beyond its bytes, fitted on "
            "published fused_moe kernel times (vLLM PR #24700, SGLang PR #11730: validation/fused_moe_kernel_times.csv)"))
    return fixed


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
