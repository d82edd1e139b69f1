"""The A10G's tensor peaks (AWS-only GA102 SKU): the FP16/BF16 figures of the NVIDIA A10G datasheet AWS hosts, and
the INT8 rate derived from it and the GA102 per-SM rates.

Truth typed here, not read from the catalog: the datasheet's '70 TF dense (140 with sparsity)' and FP32 '35' as
public notes quote it (search-index ids 70097340805, 71623055017, 39808839677); NVIDIA's GA102 whitepaper figures
for the RTX A6000 (84 SMs, 1,800 MHz boost, BF16 154.8, INT8 309.7 dense) and the RTX 3090 (82 SMs, 1,695 MHz,
FP16 tensor with FP32 accumulate 71); the A10 datasheet (72 SMs, 1,695 MHz, 125 TF, INT8 250 TOPS); an A10G bf16
8192^3 matmul measured at 66.6 TF (search-index id 70097340805)."""

from __future__ import annotations

import pytest

from llmsizer.catalog.hardware import builtin_catalog

DATASHEET_TENSOR_DENSE = 70e12  # 'BF16 tensor throughput as 70 TF dense (140 with sparsity)'
DATASHEET_TENSOR_SPARSE = 140e12
DATASHEET_FP32 = 35e12  # '| A10G | Ampere | 35 | 35 | 70 | [Datasheet][a10g]'
A10_INT8_DENSE = 250e12  # the A10 datasheet; the A10G's is lower 'for every level of precision, from FP32 to INT4'
MEASURED_BF16_MATMUL = 66.6e12
A10G_SMS, A10G_CLOCK = 80, 1.71e9  # the row's measured SM count and clock (a10g-sms-measured)


def _per_sm_clock(flops: float, sms: int, clock_hz: float) -> float:
    return flops / (sms * clock_hz)


def _a10g():
    return builtin_catalog().devices["a10g"]


def test_fp16_and_bf16_are_the_datasheet_s_dense_figures() -> None:
    d = _a10g()
    for key in ("fp16", "bf16"):
        assert d.peak_flops(key) == (DATASHEET_TENSOR_DENSE, key)
        assert d.flops[key].source == "nvidia-aws-a10g-datasheet"
        assert float(d.flops_sparse[key].base) == DATASHEET_TENSOR_SPARSE
    # no FP16-accumulate figure is published: llama.cpp's cuBLAS path falls back to the FP32-accumulate rate
    assert d.peak_flops("fp16_acc16") == (DATASHEET_TENSOR_DENSE, "fp16")


def test_the_datasheet_s_fp16_is_the_geforce_ga102_fp32_accumulate_rate_per_sm() -> None:
    """70 TF over 80 SMs at 1.71 GHz is 512 FLOP per SM per clock: the RTX 3090's FP32-accumulate rate (71 / (82 x
    1.695 GHz)), half the professional GA102 parts' (RTX A6000 154.8 / (84 x 1.8), A10 125 / (72 x 1.695))."""
    a10g = _per_sm_clock(DATASHEET_TENSOR_DENSE, A10G_SMS, A10G_CLOCK)
    rtx3090 = _per_sm_clock(71e12, 82, 1.695e9)
    a6000 = _per_sm_clock(154.8e12, 84, 1.8e9)
    a10 = _per_sm_clock(125e12, 72, 1.695e9)
    assert a10g == pytest.approx(512, rel=0.005)
    assert a10g == pytest.approx(rtx3090, rel=0.01)
    assert a6000 == pytest.approx(1024, rel=0.005) and a10 == pytest.approx(1024, rel=0.005)


def test_the_measured_bf16_matmul_stays_under_the_peak() -> None:
    peak, _ = _a10g().peak_flops("bf16")
    assert peak is not None
    assert 0.9 * peak < MEASURED_BF16_MATMUL <= peak  # 95 % of 70; it would be 48 % of the A10-rate 140


def test_int8_is_sms_x_clock_x_half_the_ga102_rate_and_below_the_a10_s() -> None:
    d = _a10g()
    i8 = d.flops["int8"]
    assert i8.source == "derived"
    a6000_int8 = _per_sm_clock(309.7e12, 84, 1.8e9)  # 'Peak INT8 Tensor TOPS 309.7' (GA102 whitepaper)
    assert a6000_int8 == pytest.approx(2048, rel=0.005)
    assert float(i8.base) == pytest.approx(A10G_SMS * A10G_CLOCK * a6000_int8 / 2, rel=0.005)
    assert float(i8.base) < A10_INT8_DENSE
    # the dense FP16 : INT8 ratio of every Ampere datasheet (A10 125 : 250, A6000 154.8 : 309.7)
    assert float(i8.base) == pytest.approx(2 * DATASHEET_TENSOR_DENSE, rel=0.005)


def test_fp32_derivation_agrees_with_the_datasheet_figure() -> None:
    peak, _ = _a10g().peak_flops("fp32")
    assert peak == pytest.approx(DATASHEET_FP32, rel=0.001)
