"""fit's tensor-parallel layout at a request rate is ranked by eq. Q10 (open arrivals): every stable layout puts out
the rate's tokens/s, so the layout taken is the one with the least mean request seconds, each replica at its share
of the rate; a layout whose replicas' share reaches 1 / H (the API server's capacity, M/M/1) is never taken. Checked
against fit pinned at each degree (`fit --tp t --request-rate R`), not against the ranking's own numbers."""

from __future__ import annotations

import math

import pytest

from llmsizer.estimate.engines import API_SERVER_SECONDS
from llmsizer.estimate.fit import fit

H = API_SERVER_SECONDS["vllm"]
QWEN = dict(engine="vllm", context=640, output_tokens=128)


def _seconds(model: str, tp: int | None, rate: float, **kw) -> tuple[int, float]:
    r = fit(model, "h100-sxm", 8, tensor_parallel=tp, request_rate=rate, **kw)
    assert r.fits and r.speed is not None and r.speed.load is not None
    return r.tensor_parallel, float(r.speed.load["request_seconds"])


def test_layouts_past_capacity_are_not_taken() -> None:
    """120/s over 8 H100s: one replica (TP 8) or two (TP 4) would carry 120 or 60/s each, at or past 1 / H = 44.5/s."""
    rate = 120.0
    for tp in (8, 4):
        assert rate / (8 // tp) >= 1 / H
        over = fit("qwen3-0.6b", "h100-sxm", 8, tensor_parallel=tp, request_rate=rate, **QWEN)
        assert not over.fits and "capacity" in over.reasons[0]
        assert over.details["rate_capacity"] == pytest.approx(8 // tp / H, rel=0.01)  # 1 / H per replica
    taken, w = _seconds("qwen3-0.6b", None, rate, **QWEN)
    assert rate / (8 // taken) < 1 / H
    assert w == min(_seconds("qwen3-0.6b", t, rate, **QWEN)[1] for t in (1, 2))


@pytest.mark.parametrize("rate", [5.0, 20.0])
def test_the_quickest_layout_is_taken(rate: float) -> None:
    kw = dict(engine="vllm", context=4096, output_tokens=256)
    taken, w = _seconds("llama-3.1-8b", None, rate, **kw)
    pinned = {t: _seconds("llama-3.1-8b", t, rate, **kw)[1] for t in (1, 2, 4, 8)}
    assert math.isclose(w, pinned[taken], rel_tol=1e-9)
    assert w <= min(pinned.values()) * (1 + 1e-9)
