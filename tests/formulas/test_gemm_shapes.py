"""GEMM shape efficiency (formulas/gemm_shapes.py) and QLoRA dequantization traffic (formulas/training_time.py
eq. 9) against their sources."""

from __future__ import annotations

import heapq
import math

import pytest

from llmsizer.errors import InputError
from llmsizer.formulas.gemm_shapes import (
    TE_GROUPED_GEMM_STREAMS,
    arithmetic_intensity,
    block_shape_efficiency,
    expert_rows,
    gemm_efficiency,
    gemm_tiles,
    grouped_tile,
    grouped_wave_efficiency,
    occupied_experts,
    shape_efficiency,
    tile_quantization,
    training_gemms,
    wave_quantization,
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


def _makespan(gemms: int, tiles: int, sms: int, streams: int) -> int:
    """An event simulation of TransformerEngine's multi-stream grouped GEMM (cublaslt_gemm.cu
    ``multi_stream_cublas_gemm``: GEMM i on stream i mod ``streams``, a stream's GEMMs one after another): every tile
    takes one time unit, a free SM takes the next pending tile of the earliest-launched GEMM in flight, and a stream
    launches its next GEMM when its last tile ends. Returns the time the group ends."""
    t, free = 0, sms
    in_flight = list(range(min(streams, gemms)))
    pending = dict.fromkeys(in_flight, tiles)
    done = dict.fromkeys(in_flight, 0)
    ends: list[tuple[int, int]] = []
    while True:
        for g in in_flight:
            while pending[g] and free:
                pending[g] -= 1
                free -= 1
                heapq.heappush(ends, (t + 1, g))
        if not ends:
            return t
        t, g = heapq.heappop(ends)
        free += 1
        done[g] += 1
        if done[g] == tiles:
            in_flight.remove(g)
            if g + streams < gemms:
                in_flight.append(g + streams)
                pending[g + streams], done[g + streams] = tiles, 0


def test_wave_quantization_is_the_guides_wave_count() -> None:
    """Section 4.2: an A100's 108 SMs run one 256 x 128 tile each per wave, so utilisation is highest at a whole
    number of waves and one tile more needs a second, almost empty wave; section 4.1: a partial tile's idle part."""
    assert wave_quantization(108, 108) == wave_quantization(216, 108) == 1.0
    assert wave_quantization(109, 108) == pytest.approx(109 / 216)
    assert wave_quantization(54, 108) == 0.5
    # a 1024 x 5760 GEMM on 132 SMs: 4 x 45 = 180 tiles of 256 x 128 or 8 x 23 = 184 of 128 x 256, two waves
    assert gemm_tiles(1024, 5760) == 180 and gemm_tiles(1024, 5760, (128, 256)) == 184
    assert grouped_wave_efficiency(1024, 5760, 1, 132) == pytest.approx(1024 * 5760 / (256 * 128 * 264))
    # with the tile's own quantization: a 257-row GEMM's last row of tiles is almost empty (best 128 x 128: the
    # 128 columns take a 128 side, eq. (6a), so 3 rows of 128 rather than 2 of 256)
    assert grouped_wave_efficiency(257, 128, 1, 1) == pytest.approx(257 / 384)


@pytest.mark.parametrize("gemms", [1, 2, 3, 4, 5, 8, 16, 32])
def test_grouped_wave_efficiency_against_an_event_simulation(gemms: int) -> None:
    """Eq. (6)'s makespan against the simulated schedule of ``_makespan`` (written without eq. (6)), for tile
    counts from a fraction of a wave to several waves on the SM counts of an A100, H100, B200 and GB200: never
    longer (a lower bound: the work's waves, one stream's GEMMs in a row), equal but where four GEMMs in flight hold
    a little more than the SMs and a stream's next GEMM waits for its last (then at most 2 waves short)."""
    exact = 0
    for sms in (108, 132, 148, 152):
        for tiles in (1, 7, 40, 97, 131, 132, 133, 184, 264, 400, 721):
            simulated = _makespan(gemms, tiles, sms, TE_GROUPED_GEMM_STREAMS)
            w = grouped_wave_efficiency(tiles, 1, gemms, sms, tile=(1, 1))
            modelled = gemms * tiles / (sms * w)
            assert modelled == pytest.approx(round(modelled))
            assert simulated - 2 <= round(modelled) <= simulated
            exact += round(modelled) == simulated
    assert exact >= 42  # of 44


def test_grouped_wave_efficiency_is_exact_on_the_megatron_rows_shapes() -> None:
    """The per-expert GEMMs of PM1361-PM1367 (fc1 and fc2: forward, input gradient, weight gradient outputs) on
    their GPUs' SMs: the simulated schedule of the better tile orientation's tiles ends when eq. (6) says."""
    for rows, x, fc1, fc2, local, sms in ((1024, 2880, 5760, 2880, 16, 132), (4096, 2048, 1536, 768, 8, 132),
                                          (4096, 4096, 3072, 1536, 4, 132), (4096, 2880, 5760, 2880, 16, 148),
                                          (32768, 2880, 5760, 2880, 2, 152), (3072, 2688, 1856, 1856, 16, 132)):
        for m, n in ((rows, fc1), (rows, x), (fc1, x), (rows, x), (rows, fc2), (x, fc2)):
            simulated = max(local * m * n / (256 * 128 * sms * _makespan(local, gemm_tiles(m, n, t), sms,
                                                                             TE_GROUPED_GEMM_STREAMS))
                            for t in ((256, 128), (128, 256)))
            assert grouped_wave_efficiency(m, n, local, sms) == pytest.approx(simulated, rel=1e-12)


def test_grouped_wave_efficiency_limits() -> None:
    """Many GEMMs side by side fill the waves (w -> 1); GEMMs of a few tiles each, four in flight, leave most SMs
    idle (w -> 4 n_t / S)."""
    assert grouped_wave_efficiency(4096, 4096, 4096, 132) > 0.999
    # 256 x 128 GEMMs in 128 x 128 tiles (the 128 side below 256, eq. (6a)): n_t = 2, four in flight hold 8 SMs
    assert grouped_wave_efficiency(256, 128, 64, 132) == pytest.approx(4 * 2 / 132)
    assert grouped_wave_efficiency(256, 256, 64, 132) == pytest.approx(4 * 2 / 132)


def test_expert_rows_hold_the_routed_tokens() -> None:
    """Eq. (7): the local experts' rows times their width are the k routed copies of the device's tokens times the
    expert width the step counts (I / tp); gpt-oss-120b at EP 8 (128 experts, top 4, 4096 tokens): 1024 rows."""
    assert expert_rows(4096, 4, 128, ep=8) == 1024
    for t, k, e, ep, tp, etp in ((4096, 8, 128, 16, 1, 1), (4096, 8, 128, 32, 2, 1), (8192, 6, 64, 8, 4, 2)):
        local, width = e // ep, 1536 / etp
        assert local * expert_rows(t, k, e, ep, tp, etp) * width == pytest.approx(t * k * 1536 / tp)
    with pytest.raises(InputError):
        expert_rows(4096, 8, 128, ep=3)


def test_a_grouped_gemm_below_the_tile_takes_a_smaller_tile() -> None:
    """Eq. (6a), as eq. (3) says: below 128 rows cuBLAS takes a smaller tile (cublasLtMatmulTile_t: power-of-two
    sides from 8), so a 16-row expert GEMM wastes no tile rows. gpt-oss-20b on one H100 at seq 128: 32 experts of
    128 x 4 / 32 = 16 rows; fc1 16 x 5760 in 16 x 128 tiles: 45 per GEMM, 1440 for 32, 11 waves of 132 (one stream's
    8 GEMMs need only 8) -- counted here by hand, and the event simulation's schedule ends there too."""
    assert [grouped_tile(x, 256) for x in (1, 8, 9, 16, 100, 128, 255, 256, 4096)] == [8, 8, 16, 16, 128, 128, 256,
                                                                                       256, 256]
    assert gemm_tiles(16, 5760, (16, 128)) == 45
    assert _makespan(32, 45, 132, TE_GROUPED_GEMM_STREAMS) == 11
    assert grouped_wave_efficiency(16, 5760, 32, 132) == pytest.approx(32 * 16 * 5760 / (16 * 128 * 132 * 11))
    # the 256 x 128 tile would charge 16 of 256 rows: the double penalty the roofline already prices
    assert grouped_wave_efficiency(16, 5760, 32, 132) > 0.99 > 16 / 128


def test_occupied_experts_against_a_simulated_routing() -> None:
    """Eq. (8) against random top-k routing simulated without it: Qwen3-30B-A3B (128 experts, top 8) at EP 8, one
    token per device (M_e = 1 x 8 x 8 / 128 = 0.5): the 8 tokens of the EP group each pick 8 distinct experts at
    random; rank 0's 16 experts get a row on average 16 (1 - (15/16)^8) = 6.45 -> 6 GEMMs of 8 / 6 rows. And a
    16-row case (gpt-oss-20b, 32 experts, top 4, 128 tokens): every expert gets rows."""
    import random
    rng = random.Random(1)
    trials = 20000
    hit = sum(len({e for _ in range(8) for e in rng.sample(range(128), 8) if e < 16}) for _ in range(trials))
    assert hit / trials == pytest.approx(16 * (1 - (15 / 16) ** 8), abs=0.05)
    assert occupied_experts(0.5, 16, 8, 128) == (round(hit / trials), 16 * 0.5 / round(hit / trials))
    assert occupied_experts(16.0, 32, 4, 32) == (32, 16.0)
    assert occupied_experts(1e-3, 16, 8, 128) == (1, 16e-3)  # at least one GEMM, all the rows in it
