"""The calibrated llama.cpp prefill constants of estimate/efficiency.py (LLAMACPP_MMQ, LLAMACPP_CUBLAS,
LLAMACPP_MMQ_ID), re-derived from their named rows through the real composition (estimate_speed).

efficiency.py states: cuBLAS solved exactly from llama-bench Llama-3-8B F16 pp512 on RTX 4090 (XiongjieDai README
@00dd2bd, XD06); MMQ only from rows whose build ran MMQ (DGX Spark, build 6918): e the geometric mean of the
efficiencies meeting the dense rows Qwen2.5-7B Q8_0 (PM0098) and Gemma-3-4B Q4_0 (PM0101), with the dense products'
weights read once per 128-column tile (formulas/speed.py eq. 9''); then e_id, the share of the routed-expert tiles
(formulas/speed.py moe_expert_tiles), such that Qwen3-Coder-30B-A3B Q8_0 pp2048 (PM0096) is met;
LLAMACPP_MMQ_STEP from the same dense rows without the tile-read term. Each efficiency is found by bisection (the time
is monotone in it).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

from llmsizer.catalog.hardware import builtin_catalog
from llmsizer.catalog.models import find
from llmsizer.estimate import efficiency as E
from llmsizer.estimate.speed import estimate_speed

# (device, catalog model, format, prompt tokens, ubatch, measured tokens/s, flash attention, where)
CUBLAS_ROW = ("rtx-4090", "llama-3.1-8b", "gguf:f16", 512, 512, 9382.00, False, "XiongjieDai README @00dd2bd (XD06)")
MOE_ROW = ("dgx-spark", "qwen3-30b-a3b", "gguf:q8_0", 2048, 2048, 3175.62, True, "validation row PM0096")
DENSE_MMQ_ROWS = (
    ("dgx-spark", "qwen2.5-7b", "gguf:q8_0", 2048, 2048, 2276.28, True, "validation row PM0098"),
    ("dgx-spark", "gemma-3-4b-it", "gguf:q4_0", 2048, 2048, 5713.05, True, "validation row PM0101"),
)
CALIBRATION_ROWS = (CUBLAS_ROW, MOE_ROW, *DENSE_MMQ_ROWS)


@contextmanager
def _constants(mmq: float, cublas: float, mmq_id: float) -> Iterator[None]:
    saved = E.LLAMACPP_MMQ, E.LLAMACPP_CUBLAS, E.LLAMACPP_MMQ_ID
    E.LLAMACPP_MMQ = dataclasses.replace(saved[0], expected=mmq)
    E.LLAMACPP_CUBLAS = dataclasses.replace(saved[1], expected=cublas)
    E.LLAMACPP_MMQ_ID = dataclasses.replace(saved[2], expected=mmq_id)
    try:
        yield
    finally:
        E.LLAMACPP_MMQ, E.LLAMACPP_CUBLAS, E.LLAMACPP_MMQ_ID = saved


def _rate(row: tuple, mmq: float, cublas: float, mmq_id: float) -> float:
    dev, model, fmt, prompt, ub, _, flash, _ = row
    with _constants(mmq, cublas, mmq_id):
        s = estimate_speed(find(model).spec(), builtin_catalog().devices[dev], weights_format=fmt,
                           prompt_tokens=prompt, output_tokens=1, kv_dtype="fp16", ubatch=ub, flash_attention=flash)
    assert s.prefill_tokens_per_second is not None
    return s.prefill_tokens_per_second


def _bisect(f, lo: float, hi: float, n: int = 60) -> float:
    """Root of an increasing function ``f`` on [lo, hi]."""
    for _ in range(n):
        mid = (lo + hi) / 2
        if f(mid) < 0:
            lo = mid
        else:
            hi = mid
    return (lo + hi) / 2


def _mmq_efficiency(ec: float) -> float:
    """The dense rows have no routed experts: e_id does not enter (any value)."""
    es = [_bisect(lambda e, row=row: _rate(row, e, ec, 0.5) - row[5], 0.005, 1.0, 40) for row in DENSE_MMQ_ROWS]
    return math.exp(sum(math.log(e) for e in es) / len(es))


def solve() -> tuple[float, float, float]:
    ec = _bisect(lambda e: _rate(CUBLAS_ROW, 0.5, e, 0.5) - CUBLAS_ROW[5], 0.01, 1.0, 40)
    em = _mmq_efficiency(ec)
    eid = _bisect(lambda e: _rate(MOE_ROW, em, ec, e) - MOE_ROW[5], 0.005, 1.0, 40)
    return em, ec, eid


def test_prefill_constants_follow_from_their_rows() -> None:
    em, ec, eid = solve()
    assert em == pytest.approx(E.LLAMACPP_MMQ.expected, abs=0.0005)
    assert ec == pytest.approx(E.LLAMACPP_CUBLAS.expected, abs=0.0005)
    assert eid == pytest.approx(E.LLAMACPP_MMQ_ID.expected, abs=0.0005)


def test_batched_step_mmq_rate_is_the_all_arithmetic_share_of_the_dense_rows(monkeypatch) -> None:
    """efficiency.LLAMACPP_MMQ_STEP: the same two dense rows with the tile-read term off (every second counted as
    MMQ arithmetic); the dense rows have no routed experts, so e_id does not enter."""
    monkeypatch.setattr(E, "LLAMACPP_MMQ_TILE_COLUMNS", 0)
    assert _mmq_efficiency(E.LLAMACPP_CUBLAS.expected) == pytest.approx(E.LLAMACPP_MMQ_STEP.expected, abs=0.0005)


def test_mmq_tile_reads_follow_mmq_cuh() -> None:
    """Eq. (9''): one weight read per 128-column tile per ubatch (mmq.cuh get_mmq_x_max_host: 128 with MMA)."""
    from llmsizer.formulas.speed import mmq_tile_reads

    assert E.LLAMACPP_MMQ_TILE_COLUMNS == 128
    assert mmq_tile_reads(2048, 2048, 128) == 16
    assert mmq_tile_reads(512, 512, 128) == 4
    assert mmq_tile_reads(4096, 512, 128) == 32
    assert mmq_tile_reads(600, 512, 128) == 5  # 4 for the full ubatch, 1 for the 88 tokens left
    assert mmq_tile_reads(100, 512, 128) == 1


def test_calibration_rows_are_met() -> None:
    """The cuBLAS and MoE rows exactly; the two dense MMQ rows within the +-4 % their geometric mean leaves."""
    for row in (CUBLAS_ROW, MOE_ROW):
        got = _rate(row, E.LLAMACPP_MMQ.expected, E.LLAMACPP_CUBLAS.expected, E.LLAMACPP_MMQ_ID.expected)
        assert got == pytest.approx(row[5], rel=0.01), row
    for row in DENSE_MMQ_ROWS:
        got = _rate(row, E.LLAMACPP_MMQ.expected, E.LLAMACPP_CUBLAS.expected, E.LLAMACPP_MMQ_ID.expected)
        assert got == pytest.approx(row[5], rel=0.04), row


def test_kernel_path_follows_ggml_cuda() -> None:
    """ggml_cuda_should_use_mmq: quantized types take MMQ on NVIDIA; F16/BF16/F32 go to cuBLAS; not elsewhere."""
    assert E.llamacpp_gemm_path("gguf:q4_k_m", "gpu", "NVIDIA") == E.MMQ_PATH
    assert E.llamacpp_gemm_path("gguf:mxfp4_moe", "gpu", "NVIDIA") == E.MMQ_PATH
    assert E.llamacpp_gemm_path("gguf:f16", "gpu", "NVIDIA") == E.CUBLAS_PATH
    assert E.llamacpp_gemm_path("gguf:q4_0", "apple", "Apple") is None
    assert E.llamacpp_gemm_path("bf16", "gpu", "NVIDIA") is None


def test_builds_before_june_2024_dequantize_for_cublas() -> None:
    """ggml-cuda.cu @8c44bc9 ggml_cuda_mul_mat: quantized products over 32 columns on Volta+ go to
    ggml_cuda_op_mul_mat_cublas, which converts the whole weight matrix to F16 first; MMQ (dp4a) below Volta."""
    assert E.llamacpp_gemm_path("gguf:q4_k_m", "gpu", "NVIDIA", False, 8.9) == E.DEQUANT_CUBLAS_PATH
    assert E.llamacpp_gemm_path("gguf:q4_k_m", "gpu", "NVIDIA", False, 6.1) == E.MMQ_PATH
    assert E.llamacpp_gemm_path("gguf:f16", "gpu", "NVIDIA", False, 8.9) == E.CUBLAS_PATH


def test_dequantize_path_adds_one_conversion_per_ubatch() -> None:
    """Independent of any fit: the old build's Q4_K_M prefill = the F16 path's GEMM time on the same FLOPs plus, per
    ubatch, the Q4_K_M bytes of the matrix weights read and 2 bytes per weight written, at the decode stream rate."""
    from llmsizer.formulas.params import count_params
    from llmsizer.formulas.weight_formats import weight_bytes

    spec = find("llama-3.1-8b").spec()
    dev = builtin_catalog().devices["rtx-4090"]

    def t(fmt: str, tokens: int, int8_mmq: bool) -> float:
        s = estimate_speed(spec, dev, weights_format=fmt, prompt_tokens=tokens, output_tokens=1, kv_dtype="fp16",
                           flash_attention=False, llamacpp_int8_mmq=int8_mmq)
        assert s.prefill is not None
        return s.prefill.seconds

    pc, wb = count_params(spec), weight_bytes(spec, "gguf:q4_k_m", 128, 2)
    gemm = pc.active - pc.by_component["embedding"] - pc.by_component["lm_head"]
    qbytes = wb.total - wb.by_component["embedding"] - wb.by_component["lm_head"]
    rate = dev.bandwidth * E.LLAMACPP_DECODE_BANDWIDTH.expected
    for tokens in (512, 4096):
        extra = t("gguf:q4_k_m", tokens, False) - t("gguf:f16", tokens, False)
        assert extra == pytest.approx(-(-tokens // 512) * (qbytes + 2 * gemm) / rate, rel=1e-6)
    assert t("gguf:f16", 512, False) == t("gguf:f16", 512, True)  # F16 weights: the same path in every build


def test_without_flash_attention_the_scores_pass_through_memory() -> None:
    """The time difference of fa 0 vs fa 1 is 16 bytes per score (heads x attended tokens x layers) at the
    llama.cpp bandwidth: 32 heads x 4096 x 4097 / 2 x 32 layers for Llama-3-8B pp4096."""
    spec = find("llama-3.1-8b").spec()
    dev = builtin_catalog().devices["rtx-4090"]
    t = {fa: estimate_speed(spec, dev, weights_format="gguf:q4_k_m", prompt_tokens=4096, output_tokens=1,
                            flash_attention=fa).prefill.seconds for fa in (True, False)}
    scores = 32 * (4096 * 4097 / 2) * 32
    assert t[False] - t[True] == pytest.approx(16 * scores / (dev.bandwidth * E.LLAMACPP_DECODE_BANDWIDTH.expected),
                                               rel=1e-6)


def test_gemm_time_is_eq_9() -> None:
    from llmsizer.formulas.speed import gemm_time

    assert gemm_time(1e12, 1e12, 0.5, 100, 0) == pytest.approx(2.0)
    assert gemm_time(1e12, 1e12, 0.5, 100, 100) == pytest.approx(4.0)  # half efficiency at n = n_h
