"""The calibrated llama.cpp decode constants of estimate/efficiency.py, re-derived from their rows.

efficiency.py states: least squares of t = bytes / (B x eta) + L x tau over the llama-bench tg512 rows of
Llama-3-8B Q4_K_M and F16 on RTX 3090 + RTX 4090 (GPU constants) and on M2 Ultra (Apple constants). This test
redoes that fit from the measured values in tests/validation/test_public_speed.py, so a constant that drifts
from its stated derivation (or rows that change) fails here.
"""

from __future__ import annotations

import pytest

from llmsizer.catalog.hardware import builtin_catalog
from llmsizer.catalog.models import find
from llmsizer.estimate import efficiency as E
from llmsizer.estimate.speed import estimate_speed
from validation.test_public_speed import CALIBRATION, EXTRA


def _fit(devices: set[str]) -> tuple[float, float]:
    """(eta, tau) minimising the squared error of the step time over the calibration rows of ``devices``."""
    xs, ls, ys = [], [], []
    for dev, model, fmt, test, value, _ in EXTRA:
        if dev not in devices or (dev, model) not in CALIBRATION or test != "tg512":
            continue
        s = estimate_speed(find(model).spec(), builtin_catalog().devices[dev], weights_format=fmt, prompt_tokens=1,
                           output_tokens=int(test[2:]), kv_dtype="fp16", bandwidth_efficiency=1.0, layer_overhead=0.0)
        assert s.decode is not None
        xs.append(s.decode.memory_seconds)  # bytes / B
        ls.append(float(find(model).spec().num_layers))
        ys.append(1.0 / value)
    # normal equations of y = a x + b l (a = 1/eta, b = tau)
    sxx = sum(x * x for x in xs)
    sll = sum(v * v for v in ls)
    sxl = sum(x * v for x, v in zip(xs, ls, strict=True))
    sxy = sum(x * y for x, y in zip(xs, ys, strict=True))
    sly = sum(v * y for v, y in zip(ls, ys, strict=True))
    det = sxx * sll - sxl * sxl
    a = (sxy * sll - sly * sxl) / det
    b = (sly * sxx - sxy * sxl) / det
    assert len(xs) >= 2
    return 1.0 / a, b


def test_gpu_constants_follow_from_the_rtx_rows():
    eta, tau = _fit({"rtx-3090", "rtx-4090"})
    assert eta == pytest.approx(E.LLAMACPP_DECODE_BANDWIDTH.expected, abs=0.001)
    assert tau == pytest.approx(E.LLAMACPP_LAYER_OVERHEAD_GPU.expected, abs=0.1e-6)


def test_apple_constants_follow_from_the_m2_ultra_rows():
    eta, tau = _fit({"apple-m2-ultra-192gb"})
    assert eta == pytest.approx(E.LLAMACPP_DECODE_BANDWIDTH_APPLE.expected, abs=0.001)
    assert tau == pytest.approx(E.LLAMACPP_LAYER_OVERHEAD_APPLE.expected, abs=0.1e-6)


def test_overhead_applies_to_gguf_on_gpus_only():
    assert E.decode_layer_overhead("gpu", "gguf:q4_k_m") is E.LLAMACPP_LAYER_OVERHEAD_GPU
    assert E.decode_layer_overhead("apple", "gguf:f16") is E.LLAMACPP_LAYER_OVERHEAD_APPLE
    assert E.decode_layer_overhead("cpu", "gguf:q4_k_m") is None
    assert E.decode_layer_overhead("gpu", "bf16") is None


@pytest.mark.parametrize("gpu", ["rtx-3090", "rtx-4090"])
def test_gpu_ranges_cover_each_gpus_own_fit(gpu):
    """The stated ranges are the envelope of the joint fit and each GPU fitted alone."""
    eta, tau = _fit({gpu})
    bw, ov = E.LLAMACPP_DECODE_BANDWIDTH, E.LLAMACPP_LAYER_OVERHEAD_GPU
    assert bw.low - 0.001 <= eta <= bw.high + 0.001
    assert ov.high - 0.2e-6 <= tau <= ov.low + 0.2e-6
