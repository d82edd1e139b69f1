"""recommend at a request rate answers at once with no option (one line, exit 1, no candidate sized) a rate at or above
``rate_ceiling`` of its largest candidate: MAX_REPLICAS copies, each device at most one replica, each replica at most
eq. Q10a's capacity with eq. Q11, 1 / max(D, s H) <= 1 / (s H). That it is an upper bound is checked against fit's
own refusals (the capacity each states, the least of its ceilings, at every layout), not against the bound's own
arithmetic; below the bound the search runs as before (probe22 C8: 1e9 requests/s took 24 s of the web's 30)."""

from __future__ import annotations

from typing import Any

import pytest

import llmsizer.recommend as R
from llmsizer.errors import FieldError
from llmsizer.estimate.engines import API_SERVER_SECONDS, API_SERVER_SERIAL_SHARE
from llmsizer.estimate.fit import fit
from llmsizer.formulas.serving_queue import open_capacity


@pytest.mark.parametrize(("model", "device", "count", "tp"), [
    ("qwen3-0.6b", "h100-sxm", 8, 1), ("llama-3.1-8b", "h100-sxm", 8, 1), ("llama-3.1-8b", "h100-sxm", 8, 2),
    ("llama-3.1-8b", "l4", 1, 1), ("llama-3.1-8b", "l4", 1, None)])
def test_the_ceiling_bounds_fits_capacity(model: str, device: str, count: int, tp: int | None) -> None:
    copy = R.rate_ceiling(count) / R.MAX_REPLICAS  # one copy of the devices
    engines = {"vllm", "sglang"} | ({"llamacpp"} if tp is None else set())
    for engine in engines:
        r = fit(model, device, count, tensor_parallel=tp, engine=engine, request_rate=1e9, fits_at=False)
        cap = r.details.get("rate_capacity")
        assert not r.fits and cap is not None and 0 <= cap <= copy, (engine, cap, copy)
    # the bound is eq. Q10a's at no prefill time, one replica per device, the least serial time of the engines
    least = max(open_capacity(1e-300, API_SERVER_SECONDS[e], API_SERVER_SERIAL_SHARE[e]) for e in API_SERVER_SECONDS)
    assert copy == pytest.approx(count * least, rel=1e-12)


def test_a_rate_past_every_candidate_is_answered_with_no_option_before_any_is_sized(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A rate no candidate carries is a constraint that fails (exit 1, as fit's answer at that rate), not bad input:
    no option, no rejection, the reason in one line (probe23 C3), and no candidate sized."""
    asked: list[Any] = []
    monkeypatch.setattr(R, "pick_format", lambda *a, **kw: asked.append(kw) or None)
    rec = R.recommend_inference("llama-3.1-8b", request_rate=1e9)
    assert rec.chosen is None and not rec.options and not rec.rejected and not asked
    assert rec.refusal is not None and "\n" not in rec.refusal and "past what any candidate carries" in rec.refusal
    assert rec.to_dict()["refusal"] == rec.refusal and "no option: " + rec.refusal in str(rec)


def test_the_refusal_starts_at_the_ceiling() -> None:
    assert R.rate_past_every_copy(R.rate_ceiling(8) * 0.999, 8) is None
    assert R.rate_past_every_copy(R.rate_ceiling(8) * 1.000001, 8) is not None


def test_an_engine_that_serves_no_rate_is_refused_before_any_candidate(monkeypatch: pytest.MonkeyPatch) -> None:
    asked: list[Any] = []
    monkeypatch.setattr(R, "pick_format", lambda *a, **kw: asked.append(kw) or None)
    monkeypatch.setattr(R, "_candidates", lambda *a, **kw: asked.append(kw) or ([], []))
    for rate in (5.0, 1e9):
        with pytest.raises(FieldError) as e:
            R.recommend_inference("llama-3.1-8b", request_rate=rate, engine="transformers")
        assert e.value.field == "request_rate" and "\n" not in str(e.value)
        assert "batches continuously" in str(e.value) and not asked
