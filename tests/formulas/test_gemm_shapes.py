"""GEMM shape efficiency (formulas/gemm_shapes.py) and QLoRA dequantization traffic (formulas/training_time.py
eq. 9) against their sources."""

from __future__ import annotations

import math

import pytest

from llmsizer.formulas.gemm_shapes import (
    arithmetic_intensity,
    block_shape_efficiency,
    gemm_efficiency,
    shape_efficiency,
    tile_quantization,
    training_gemms,
)
from llmsizer.formulas.training_time import NF4_DEQUANT_BYTES_PER_WEIGHT, dequantization_seconds


def test_arithmetic_intensity_matches_the_nvidia_guide_table() -> None:
    """NVIDIA Matrix Multiplication Background guide, Table 1 (FP16): a fully-connected layer with 4096 outputs and
    1024 inputs has arithmetic intensity 315 FLOPS/B at batch 512 ("arithmetic-limited" on V100, ratio 138.9) and
    1 FLOPS/B at batch 1 ("memory-limited")."""
    assert arithmetic_intensity(512, 4096, 1024) == pytest.approx(315, abs=0.5)
    assert arithmetic_intensity(1, 4096, 1024) == pytest.approx(1, abs=0.01)
    v100 = 125e12, 900e9
    assert gemm_efficiency(512, 4096, 1024, *v100) == 1.0
    assert gemm_efficiency(1, 4096, 1024, *v100) == pytest.approx(1.0 / 138.9, rel=0.01)


def test_tile_quantization() -> None:
    """Section 4.1: a dimension one past a tile multiple needs a whole extra tile (257 -> 3 tiles of 128)."""
    assert tile_quantization(256) == 1.0
    assert tile_quantization(257) == pytest.approx(257 / 384)
    assert tile_quantization(16) == 1.0  # below one tile cuBLAS takes a smaller tile; the roofline governs


def test_training_gemms_skip_the_weight_gradient_of_frozen_weights() -> None:
    assert training_gemms(8, [(4, 6, True)]) == [(8, 6, 4), (8, 4, 6), (6, 4, 8)]
    assert training_gemms(8, [(4, 6, False)]) == [(8, 6, 4), (8, 4, 6)]


def test_shape_efficiency_grows_with_tokens_per_gemm() -> None:
    """Small micro-batch x sequence leaves a 4096-wide layer memory-bound on an H100 (ridge 989.4 / 3.35 = 295
    FLOP/B); the FLOP-weighted mean rises towards 1 as the token count grows."""
    h100 = 989.4e12, 3350e9
    linears = [(4096, 4096, True), (4096, 14336, True), (14336, 4096, True)]
    effs = [shape_efficiency(training_gemms(t, linears), *h100) for t in (64, 256, 1024, 8192)]
    assert effs == sorted(effs) and effs[0] < 0.3 and effs[-1] == 1.0


def test_block_shape_efficiency_is_eq_4_summed_in_order_bit_for_bit() -> None:
    """Eq. (4) written out as a running sum over every GEMM of a step (the definition), against the block form the
    duration uses (one block object per layer kind, terms reused): the same float, not just close, on shapes
    whose terms do not add associatively (mixed magnitudes, tile-quantized and memory-bound GEMMs)."""
    h100 = 989.4e12, 3350e9
    dense = tuple(training_gemms(300, [(4096, 1024, True), (4096, 14336, False), (14336, 4096, True)]))
    moe = tuple(training_gemms(300, [(2048, 768, True)] * 8 + [(768, 2048, True)] * 8 + [(2048, 4096, False)]))
    head = tuple(training_gemms(300, [(4096, 128257, True)]))
    blocks = [dense, moe, moe, dense, moe, *[dense] * 29, head]
    flops = time = 0.0
    for block in blocks:
        for m, n, k in block:
            f = 2.0 * m * n * k
            flops += f
            time += f / gemm_efficiency(m, n, k, *h100)
    assert block_shape_efficiency(blocks, *h100) == flops / time
    assert shape_efficiency([g for b in blocks for g in b], *h100) == flops / time
    assert block_shape_efficiency([], *h100) == 1.0
    exact = math.fsum(2.0 * m * n * k / gemm_efficiency(m, n, k, *h100) for b in blocks for m, n, k in b)
    assert flops / exact != flops / time  # the rounding of the running sum shows: the order is what is checked


def test_nf4_dequantization_bytes_follow_the_bitsandbytes_layout() -> None:
    """bitsandbytes quantize_4bit(nf4, blocksize 64, compress_statistics): 0.5 B of codes and one uint8 absmax per
    64 weights (nested fp32 absmax per 256 blocks); dequantize_4bit returns bf16. Eq. (9)'s beta reads codes and
    absmax, writes and re-reads the fp32 absmax, writes the bf16 copy."""
    torch = pytest.importorskip("torch")
    bnb_f = pytest.importorskip("bitsandbytes.functional")
    w = torch.randn(256, 1024, dtype=torch.bfloat16)
    q, state = bnb_f.quantize_4bit(w, blocksize=64, compress_statistics=True, quant_type="nf4")
    n = w.numel()
    assert q.numel() * q.element_size() == n // 2
    assert state.absmax.dtype == torch.uint8 and state.absmax.numel() == n // 64
    assert state.state2.absmax.dtype == torch.float32 and state.state2.blocksize == 256
    out = bnb_f.dequantize_4bit(q, state)
    assert out.dtype == torch.bfloat16
    assert NF4_DEQUANT_BYTES_PER_WEIGHT == 0.5 + 1 / 64 + 4 / 64 + 4 / 64 + out.element_size()
    assert dequantization_seconds(1e9, 3, 1e12) == pytest.approx(3 * NF4_DEQUANT_BYTES_PER_WEIGHT / 1e3)
