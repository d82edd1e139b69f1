"""The calibrated llama.cpp prefill constants of estimate/efficiency.py (LLAMACPP_MMQ, LLAMACPP_CUBLAS,
LLAMACPP_HALF_COLUMNS), re-derived from their three named rows through the real composition (estimate_speed).

efficiency.py states: three constants solved exactly from llama-bench Llama-3-8B pp512 Q4_K_M and F16 on RTX 4090
(XiongjieDai README @00dd2bd) and Qwen3-Coder-30B-A3B Q8_0 pp2048 on DGX Spark (validation row PM0096). The
solve: for a half-efficiency column count h, the F16 row fixes the cuBLAS efficiency and the dense Q4_K_M row the
MMQ efficiency (each by bisection, the time being monotone in it); h is then bisected until the MoE row matches.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

from llmsizer.catalog.hardware import builtin_catalog
from llmsizer.catalog.models import find
from llmsizer.estimate import efficiency as E
from llmsizer.estimate.speed import estimate_speed

# (device, catalog model, format, prompt tokens, ubatch, measured tokens/s, flash attention, where)
CALIBRATION_ROWS = (
    ("rtx-4090", "llama-3.1-8b", "gguf:q4_k_m", 512, 512, 7138.99, False, "XiongjieDai README @00dd2bd (XD04)"),
    ("rtx-4090", "llama-3.1-8b", "gguf:f16", 512, 512, 9382.00, False, "XiongjieDai README @00dd2bd (XD06)"),
    ("dgx-spark", "qwen3-30b-a3b", "gguf:q8_0", 2048, 2048, 3175.62, True, "validation row PM0096"),
)


@contextmanager
def _constants(mmq: float, cublas: float, half: float) -> Iterator[None]:
    saved = E.LLAMACPP_MMQ, E.LLAMACPP_CUBLAS, E.LLAMACPP_HALF_COLUMNS
    E.LLAMACPP_MMQ = dataclasses.replace(saved[0], expected=mmq)
    E.LLAMACPP_CUBLAS = dataclasses.replace(saved[1], expected=cublas)
    E.LLAMACPP_HALF_COLUMNS = dataclasses.replace(saved[2], expected=half)
    try:
        yield
    finally:
        E.LLAMACPP_MMQ, E.LLAMACPP_CUBLAS, E.LLAMACPP_HALF_COLUMNS = saved


def _rate(row: tuple, mmq: float, cublas: float, half: float) -> float:
    dev, model, fmt, prompt, ub, _, flash, _ = row
    with _constants(mmq, cublas, half):
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


def solve() -> tuple[float, float, float]:
    q4, f16, moe = CALIBRATION_ROWS

    def effs(h: float) -> tuple[float, float]:
        ec = _bisect(lambda e: _rate(f16, 0.5, e, h) - f16[5], 0.01, 1.0, 40)
        em = _bisect(lambda e: _rate(q4, e, ec, h) - q4[5], 0.005, 1.0, 40)
        return em, ec

    def moe_excess(h: float) -> float:  # predicted - measured on the MoE row; decreasing in h
        em, ec = effs(h)
        return -(_rate(moe, em, ec, h) - moe[5])

    h = _bisect(moe_excess, 0.0, 4096.0, 30)
    em, ec = effs(h)
    return em, ec, h


def test_prefill_constants_follow_from_their_rows() -> None:
    em, ec, h = solve()
    assert em == pytest.approx(E.LLAMACPP_MMQ.expected, abs=0.0005)
    assert ec == pytest.approx(E.LLAMACPP_CUBLAS.expected, abs=0.0005)
    assert h == pytest.approx(E.LLAMACPP_HALF_COLUMNS.expected, abs=0.5)


def test_calibration_rows_are_met() -> None:
    for row in CALIBRATION_ROWS:
        got = _rate(row, E.LLAMACPP_MMQ.expected, E.LLAMACPP_CUBLAS.expected, E.LLAMACPP_HALF_COLUMNS.expected)
        assert got == pytest.approx(row[5], rel=0.01), row


def test_kernel_path_follows_ggml_cuda() -> None:
    """ggml_cuda_should_use_mmq: quantized types take MMQ on NVIDIA; F16/BF16/F32 go to cuBLAS; not elsewhere."""
    assert E.llamacpp_gemm_path("gguf:q4_k_m", "gpu", "NVIDIA") == E.MMQ_PATH
    assert E.llamacpp_gemm_path("gguf:mxfp4_moe", "gpu", "NVIDIA") == E.MMQ_PATH
    assert E.llamacpp_gemm_path("gguf:f16", "gpu", "NVIDIA") == E.CUBLAS_PATH
    assert E.llamacpp_gemm_path("gguf:q4_0", "apple", "Apple") is None
    assert E.llamacpp_gemm_path("bf16", "gpu", "NVIDIA") is None


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
