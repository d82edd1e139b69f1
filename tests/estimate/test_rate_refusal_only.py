"""recommend's copies search asks each pick below MAX_REPLICAS with ``refusal_only`` (format_search.py
``pick_format``, fit.py ``fit``): a rung the rate refuses is answered without its ceilings, and a rung's climb to
eq. Q10c's fixed point stops once it is certain to be refused by the admitted sequences (eq. Q13, any replicas:
``_admission_certain``) or to miss a per-user speed floor (``fit(miss=)``). The copies search reads such a pick only
by its status, rung, ``past_capacity``, ``rate_bound`` and whether one request per replica misses
(``serves_alone``); each must be what the same pick asked in full says, and the recommendation the same."""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest

import llmsizer.estimate.fit as F
import llmsizer.recommend as R
from llmsizer.catalog.models import find
from llmsizer.estimate.fit import RateMissCertain, RateOverloadError, fit
from llmsizer.estimate.format_search import FormatPick, LatencyLimits, misses_at_every_load, pick_format, serves_alone


def _read(p: FormatPick) -> tuple[Any, ...]:
    """What the copies search reads of a pick below MAX_REPLICAS: a met rung in full; a miss that more copies may
    mend (past capacity without a bound, or a fitting rung with more in flight than replicas) as one class."""
    if p.status == "meets":
        assert p.fit is not None
        return ("meets", p.weights_format, p.fit.details.get("concurrency"), p.reasons, p.warnings)
    if p.past_capacity and p.rate_bound is None or not p.past_capacity and p.fit is not None and not serves_alone(p.fit):
        return ("more copies",)
    return ("past", p.rate_bound) if p.past_capacity else ("stop", p.reasons)


def _compare(monkeypatch: pytest.MonkeyPatch, shortcut: str, **kw: Any) -> Counter[str]:
    seen: Counter[str] = Counter()
    real = F.RateMissCertain if shortcut == "miss" else F._admission_certain

    if shortcut == "miss":
        class Counted(RateMissCertain):
            def __init__(self, result: Any) -> None:
                seen["shortcut"] += 1
                super().__init__(result)
        monkeypatch.setattr(F, "RateMissCertain", Counted)
    else:
        def counted(r: Any, rate: float, *more: Any) -> Any:
            refused = real(r, rate, *more)
            if refused is not None:
                seen["shortcut"] += 1
                seen["shortcut with several replicas"] += r.replicas > 1
            return refused
        monkeypatch.setattr(F, "_admission_certain", counted)

    def pick(*a: Any, **k: Any) -> FormatPick:
        p = pick_format(*a, **k)
        if k.get("refusal_only"):
            full = pick_format(*a, **{**k, "refusal_only": False, "sized_memo": {}})
            assert _read(p) == _read(full)
            seen["compared"] += 1
        return p

    monkeypatch.setattr(R, "pick_format", pick)
    quick = R.recommend_inference(find("llama-3.1-8b").spec(), **kw)
    monkeypatch.setattr(R, "pick_format", lambda *a, **k: pick_format(*a, **{**k, "refusal_only": False}))
    assert quick.to_dict() == R.recommend_inference(find("llama-3.1-8b").spec(), **kw).to_dict()
    return seen


def test_admission_shortcut_reads_alike(monkeypatch: pytest.MonkeyPatch) -> None:
    seen = _compare(monkeypatch, "admission", engine="vllm", context=4096, output_tokens=512, request_rate=20)
    assert seen["compared"] > 100 and seen["shortcut"] > 0 and seen["shortcut with several replicas"] > 0


def test_miss_shortcut_reads_alike(monkeypatch: pytest.MonkeyPatch) -> None:
    seen = _compare(monkeypatch, "miss", engine="llamacpp", context=4096, output_tokens=256, request_rate=5)
    assert seen["compared"] > 100 and seen["shortcut"] > 0


def test_refusal_only_raises_what_fit_answers() -> None:
    spec = find("llama-3.1-8b").spec()
    kw: dict[str, Any] = dict(engine="vllm", weights="bf16", context=4096, output_tokens=512, fits_at=False,
                              request_rate=5)
    full = fit(spec, "h100-80gb", **kw)
    assert not full.fits and full.details["rate_refused_by"] == "admission"
    with pytest.raises(RateOverloadError) as e:
        fit(spec, "h100-80gb", refusal_only=True, **kw)
    assert e.value.kind == "admission" and e.value.capacity == pytest.approx(full.details["rate_ceilings"]["admission"])


def test_a_certain_miss_misses_at_the_fixed_point() -> None:
    spec = find("llama-3.1-8b").spec()
    miss = misses_at_every_load(LatencyLimits(user_tokens_per_second=40.0))
    assert miss is not None and misses_at_every_load(LatencyLimits(max_ttft=1.0)) is None
    kw: dict[str, Any] = dict(engine="llamacpp", weights="q4_k_m", context=4096, output_tokens=256, fits_at=False,
                              request_rate=0.7)
    with pytest.raises(RateMissCertain) as e:
        fit(spec, "rtx-4090", refusal_only=True, miss=miss, **kw)
    early = e.value.result
    full = fit(spec, "rtx-4090", **kw)  # the climb to its end
    assert full.fits and miss(full) and not serves_alone(full)
    assert early.details["concurrency"] < full.details["concurrency"]  # the climb stopped before its end


def test_several_layouts_refuse_without_ceilings_and_climb_in_full() -> None:
    """A rung of several tensor-parallel degrees (4 devices: TP 1, 2, 4) gets ``refusal_only`` too (its ceilings
    unbuilt) but not the climb's stops (``climb_stops`` False: the layout, and its admitted count, may change with
    C): a refused rate raises the refusal fit states in full, and a carried rate's answer is fit's own."""
    spec = find("llama-3.1-8b").spec()
    kw: dict[str, Any] = dict(engine="vllm", weights="bf16", context=4096, output_tokens=512, fits_at=False)
    full = fit(spec, "h100-sxm", 4, request_rate=200, **kw)
    assert not full.fits and "rate_refused_by" in full.details
    with pytest.raises(RateOverloadError) as e:
        fit(spec, "h100-sxm", 4, request_rate=200, refusal_only=True, climb_stops=False, **kw)
    assert e.value.kind == full.details["rate_refused_by"]
    carried = fit(spec, "h100-sxm", 4, request_rate=8, **kw)
    assert carried.fits
    assert fit(spec, "h100-sxm", 4, request_rate=8, refusal_only=True, climb_stops=False, **kw).to_dict() \
        == carried.to_dict()
