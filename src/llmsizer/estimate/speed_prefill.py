"""The prefill pieces ``speed_layout.layout_speed`` composes: attention FLOPs of a step over every layer kind
(formulas/speed.py) and llama.cpp's prefill efficiency on CUDA (its GEMM path, ubatch and MoE tiles) and on Metal
(the dequantization share). No arithmetic of its own beyond unpacking (every equation is in formulas/)."""

from __future__ import annotations

from typing import Any

from ..formulas.params import routed_share
from ..formulas.speed import (
    METAL_SIMDGROUP_MATMUL_CYCLES,
    attended_tokens,
    chunked_attended_tokens,
    dequantize_time,
    gemm_time,
    metal_dequant_share,
    mmq_tile_reads,
    moe_expert_tiles,
)
from ..formulas.weight_formats import GGUF_FTYPES, gguf_product_weights
from ..result import Assumption
from ..specs import ModelSpec
from . import efficiency as E
from .device import int8_peak


def attended_all_layers(spec: ModelSpec, tokens: int, past: int) -> float:
    """Sum over layers of the tokens each new token attends, sliding layers capped at their window, chunked ones
    (Llama 4: spec.chunked_attention) within their chunk (formulas/speed.py chunked_attended_tokens)."""
    n_sliding = spec.layer_types.count("sliding")
    n_full = spec.layer_types.count("full")  # layers without attention ("none") attend to nothing
    total = n_full * attended_tokens(tokens, past)
    if n_sliding and spec.chunked_attention and spec.sliding_window:
        total += n_sliding * chunked_attended_tokens(tokens, past, spec.sliding_window)
    elif n_sliding:
        total += n_sliding * attended_tokens(tokens, past, spec.sliding_window)
    return total


def attention_flops_step(spec: ModelSpec, width: int, tokens: int, past: int) -> float:
    """Causal attention FLOPs over all layers, sliding layers capped at their window (speed.py eq. 2)."""
    return 4.0 * width * attended_all_layers(spec, tokens, past)


def llamacpp_prefill_efficiency(spec: ModelSpec, device: Any, path: str, pc: Any, gemm_params: float, tokens: int,
                                 ubatch: int, flops: float, attn_flops: float, peak: float,
                                 assumptions: list[Assumption],
                                 flash_attention: bool = True, quantized_bytes: float = 0.0,
                                 stream_rate: float | None = None, expert_quantized_bytes: float = 0.0) -> float:
    """llama.cpp prefill on an NVIDIA GPU: eq. (9) of formulas/speed.py per kernel path (efficiency.LLAMACPP_MMQ):
    dense products at the path's efficiency, routed-expert products on MMQ (mul_mat_id) as the 128-column tiles each
    expert's columns fill, each a full tile's work at efficiency.LLAMACPP_MMQ_ID plus a read of the expert's weights
    (formulas/speed.py eq. 9'''), attention on the FP16 tensor path; returned as
    the equivalent share of ``peak`` so that eq. (3) keeps one form. On the dequantize + cuBLAS path of builds before
    efficiency.LLAMACPP_INT8_MMQ_SINCE the products run as the F16 path's and each ubatch first converts the
    weights to F16: the ``quantized_bytes`` of the ``gemm_params`` read and 2 bytes per weight written, per ubatch
    at ``stream_rate`` [B/s] (formulas/speed.py eq. 9'). On the MMQ path the dense (non-expert) products read their
    ``quantized_bytes`` less ``expert_quantized_bytes`` once per column tile of efficiency.LLAMACPP_MMQ_TILE_COLUMNS
    (formulas/speed.py eq. 9''), added to their arithmetic."""
    if path == E.DEQUANT_CUBLAS_PATH and stream_rate:
        t_dq = dequantize_time(quantized_bytes, gemm_params, tokens, ubatch, stream_rate)
        assumptions.append(Assumption(
            "llamacpp_dequantize_seconds", t_dq, True,
            f"per ubatch of {ubatch} tokens {quantized_bytes / 1e9:.2f} GB of quantized weights read and their F16 "
            f"copy written (formulas/speed.py eq. 9') at "
            f"{stream_rate / 1e9:.0f} GB/s: ggml-cuda.cu ggml_cuda_op_mul_mat_cublas to_fp16_cuda (ggml-org/ggml "
            "@8c44bc9 L1233-1268), the path of quantized products over 32 columns before "
            + E.LLAMACPP_INT8_MMQ_SINCE))
        t_gemm = flops / (peak * llamacpp_prefill_efficiency(
            spec, device, E.CUBLAS_PATH, pc, gemm_params, tokens, ubatch, flops, attn_flops, peak, assumptions,
            flash_attention))
        return flops / (peak * (t_gemm + t_dq))
    mmq = path == E.MMQ_PATH
    factor = E.LLAMACPP_MMQ if mmq else E.LLAMACPP_CUBLAS
    gemm_peak, gemm_key = device.peak_flops("fp16_acc16")
    if mmq:  # the sourced INT8 rate, or the named stand-in of device.int8_peak (probe18 D1a)
        gemm_peak, stand_in = int8_peak(device)
        gemm_key = "int8"
        if stand_in is not None and all(a.name != stand_in.name for a in assumptions):
            assumptions.append(stand_in)
    fp16_peak, _ = device.peak_flops("fp16_acc16")
    if gemm_peak is None or fp16_peak is None:
        return E.COMPUTE.expected
    sync = E.llamacpp_sync_mma_share(device.architecture)
    if sync is not None:  # Hopper: warp-level mma.sync reaches half the wgmma peak (efficiency.LLAMACPP_SYNC_MMA_SHARE)
        gemm_peak, fp16_peak = gemm_peak * sync.expected, fp16_peak * sync.expected
        assumptions.append(Assumption(sync.name, sync.expected, True, sync.source))
    cols = float(min(tokens, ubatch))
    experts = 0.0
    expert_cols = cols
    share = routed_share(spec)
    if spec.moe is not None:
        experts = pc.by_component.get("experts", 0) * share
        expert_cols = max(1.0, cols * share)
    t = gemm_time(2.0 * (gemm_params - experts) * tokens, gemm_peak, factor.expected, cols, 0.0)
    tile = E.LLAMACPP_MMQ_TILE_COLUMNS
    if experts and mmq and tile and spec.moe is not None:
        # eq. (9'''): each expert's columns in ceil(m / 128) MMQ tiles, each a full tile's work reading its weights
        tiles, executed = moe_expert_tiles(tokens, ubatch, spec.moe.experts_per_token, spec.moe.num_experts, tile)
        idf = E.LLAMACPP_MMQ_ID
        t += 2.0 * pc.by_component.get("experts", 0) * executed / (gemm_peak * idf.expected)
        t_expert_reads = expert_quantized_bytes * tiles / stream_rate if stream_rate else 0.0
        t += t_expert_reads
        assumptions.append(Assumption(
            "llamacpp_moe_expert_tiles", round(tiles, 3), True,
            f"per expert {tiles:.2f} MMQ tiles of {executed / tiles if tiles else 0:.0f} columns for "
            f"{tokens * share:.0f} routed columns (uniform routing), each "
            f"a full tile's work at {idf.expected} of the {gemm_key} peak ({idf.name}) and a read of the expert's "
            f"weights ({expert_quantized_bytes / 1e9:.2f} GB in all, {t_expert_reads:.4f} s): formulas/speed.py eq. "
            "(9'''), ggml-cuda mmq.cu ggml_cuda_mul_mat_q ncols_max = ne12 and mmq.cuh mul_mat_q (ggml-org/ggml "
            "@da232870); " + idf.source))
    elif experts:
        t += gemm_time(2.0 * experts * tokens, gemm_peak, factor.expected, expert_cols, 0.0)
    if mmq and stream_rate and quantized_bytes > expert_quantized_bytes and E.LLAMACPP_MMQ_TILE_COLUMNS:
        reads = mmq_tile_reads(tokens, ubatch, E.LLAMACPP_MMQ_TILE_COLUMNS)
        t_reads = (quantized_bytes - expert_quantized_bytes) * reads / stream_rate
        t += t_reads
        assumptions.append(Assumption(
            "llamacpp_mmq_tile_weight_reads", reads, True,
            f"the dense products' {(quantized_bytes - expert_quantized_bytes) / 1e9:.2f} GB read once per "
            f"{E.LLAMACPP_MMQ_TILE_COLUMNS}-column tile, {t_reads:.4f} s at {stream_rate / 1e9:.0f} GB/s "
            "(formulas/speed.py eq. 9''; ggml-cuda mmq.cuh get_mmq_x_max_host, ggml-org/ggml @da232870 L94-102)"))
    t += gemm_time(attn_flops, fp16_peak, E.LLAMACPP_CUBLAS.expected, cols, 0.0)
    if not flash_attention and device.bandwidth:
        # without flash attention the scores are materialised (llama-graph.cpp build_attn_mha: kq = mul_mat(k, q)
        # at GGML_PREC_F32, soft_max_ext, kqv = mul_mat(v, kq)): 4 passes of 4 bytes per score through memory
        scores = spec.num_heads * attended_all_layers(spec, tokens, 0)
        t += E.LLAMACPP_KQ_BYTES_PER_SCORE * scores / (device.bandwidth * E.LLAMACPP_DECODE_BANDWIDTH.expected)
    assumptions.append(Assumption("llamacpp_kernel_path", f"{path} ({gemm_key} peak)", True, factor.source))
    assumptions.append(Assumption(factor.name, factor.expected, True, factor.source))
    assumptions.append(Assumption("llamacpp_ubatch", int(cols), True,
                                  "llama.cpp n_ubatch (common/common.h default 512), capped at the prompt; "
                                  "llama.cpp also caps it at n_batch (2048 by default: a larger --ubatch needs -b "
                                  "raised with it, src/llama-context.cpp)"))
    return flops / (peak * t)


def moe_ubatch_note(ubatch: int, efficiency: float, one_ubatch_efficiency: float, tokens: int, one: int,
                     peak_seconds: float, assumptions: list[Assumption], warnings: list[str]) -> None:
    """An MoE prefill on llama.cpp's MMQ path split into ubatches of ``ubatch`` < ``tokens``: each ubatch fills its
    own expert tiles and reads every expert's weights again (formulas/speed.py eq. 9'''), so n_ubatch sets the rate.
    The assumption names what the same prompt takes in ubatches of ``one`` (``one_ubatch_efficiency``: the same eq.
    (9) at ubatch = the prompt, at most llama.cpp's default n_batch 2048, which caps n_ubatch); a warning where the split at least doubles the compute time (most of it the ubatches'
    doing), naming --ubatch: llama-bench's published pp rows of MoE models run their own n_ubatch (llama.cpp's
    gpt-oss-120b DGX Spark pp2048 row, PM0093 of docs/accuracy.md, at n_ubatch 2048)."""
    t_now, t_one = peak_seconds / efficiency, peak_seconds / one_ubatch_efficiency
    assumptions.append(Assumption(
        "llamacpp_moe_ubatch_prefill_seconds", f"{t_now:.4g} s in ubatches of {ubatch}; {t_one:.4g} s in "
        + (f"one of {tokens}" if one >= tokens else f"ubatches of {one}"), True, "the MoE prefill's compute at llama.cpp's n_ubatch and with the prompt in one ubatch "
        "(formulas/speed.py eqs. 9, 9''': each ubatch fills its own expert tiles and reads the experts' weights "
        "again); "
        "--ubatch sets it"))
    if t_now >= 2.0 * t_one:
        warnings.append(f"llama.cpp n_ubatch {ubatch} sets this MoE prefill's rate: each of its "
                        f"{-(-tokens // ubatch)} ubatches gives each expert a few columns in whole MMQ tiles and reads "
                        f"its weights again, {t_now:.3g} s against "
                        f"{t_one:.3g} s "
                        + (f"with the {tokens}-token prompt in one ubatch" if one >= tokens else
                           f"in ubatches of {one}, llama.cpp's default n_batch, which caps n_ubatch")
                        + f" (--ubatch {one}, at a larger compute buffer); llama-bench's published MoE pp rows state "
                        "their own n_ubatch")


def metal_prefill_efficiency(spec: ModelSpec, fmt: str, efficiency: float, flops: float, product_flops: float,
                              assumptions: list[Assumption]) -> float:
    """llama.cpp prefill on Apple silicon (Metal): the ``product_flops`` of the layer stack's matrix products pay the
    dequantization of their weight tiles on the same shader ALUs (formulas/speed.py eq. 9m, w_q per GGML type from
    efficiency.LLAMACPP_METAL_DEQUANT_CYCLES, weighted over the products' tensors of the file type); returned as the
    share of the peak the prefill's ``flops`` reach so that eq. (3) keeps one form. F16 pays nothing (its tiles are
    copied); a type without a count leaves eq. (9m) out, named."""
    ftype = fmt[5:]
    if ftype not in GGUF_FTYPES:
        return efficiency
    mix = gguf_product_weights(spec, ftype)
    total = sum(w for _, w in mix)
    ops_by_type = E.LLAMACPP_METAL_DEQUANT_CYCLES
    missing = [g for g, _ in mix if g not in ops_by_type]
    if missing or total <= 0:
        assumptions.append(Assumption(
            "llamacpp_metal_dequant_share", "not counted", True,
            f"no dequantization count for {', '.join(missing) or 'these products'}: formulas/speed.py eq. (9m) left "
            "out, the products timed as F16's (prefill may be faster than estimated)"))
        return efficiency
    ops = sum(w * ops_by_type[g] for g, w in mix) / total
    share = metal_dequant_share(ops)
    if share <= 0.0:
        return efficiency
    types = ", ".join(f"{g} {w / total:.0%}" for g, w in mix)
    assumptions.append(Assumption(
        "llamacpp_metal_dequant_share", round(share, 4), True,
        f"{ops:.2f} issue cycles per weight ({types} of the products' weights) x 16 weights dequantized per "
        f"32 simdgroup 8x8x8 products of {METAL_SIMDGROUP_MATMUL_CYCLES} cycles per simdgroup: the products take "
        f"{1 + share:.3f} x their F16 time; "
        + E.LLAMACPP_METAL_DEQUANT_SOURCE))
    return efficiency * flops / (flops + product_flops * share)
