"""The climb's early stop on admission (estimate/fit.py ``_admission_certain``): a refusal-only fit on one
tensor-parallel degree stops at its first iterate where eq. Q13's X(c) of the admitted sequences is at or below each
replica's share of the rate, with any number of replicas. The stop must be exact: the same fit climbed to its end
(``climb_stops=False``, rate_fixed_point's least fixed point, then ``admission_queued``) is refused too, and where the
stop does not fire the two answers are the same. The truth each case is checked against is that full climb."""

from __future__ import annotations

import math
from collections import Counter
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import llmsizer.estimate.fit as F
from llmsizer.catalog.models import find
from llmsizer.errors import InputError
from llmsizer.estimate.fit import RateOverloadError, fit
from llmsizer.estimate.serving_load import admission_over_capacity, admission_queue
from llmsizer.formulas.serving_queue import OverCapacityError, admission_grid

MODELS = ["llama-3.1-8b", "qwen2.5-7b", "qwen3-0.6b", "gemma-2-9b-it", "qwen3-30b-a3b"]
DEVICES = ["h100-sxm", "a100-40gb", "l4", "rtx-4090", "t4"]


def _outcome(**kw: Any) -> tuple[Any, ...]:
    """A refusal-only fit as its caller reads it: refused, or the answer in full; any other error by its words."""
    try:
        return ("answer", fit(refusal_only=True, fits_at=False, **kw).to_dict())
    except RateOverloadError:
        return ("refused",)
    except InputError as e:
        return (type(e).__name__, str(e))


def _early_and_full(**kw: Any) -> tuple[tuple[Any, ...], tuple[Any, ...], Counter[str]]:
    """The fit with the stop (its fired stops and the replicas there, and the fits each climb made) and without."""
    seen: Counter[str] = Counter()
    certain, fit_at = F._admission_certain, F._fit_at

    def counted(r: Any, rate: float, *more: Any) -> Any:
        out = certain(r, rate, *more)
        if out is not None:
            seen["stops"] += 1
            seen["stops with several replicas"] += r.replicas > 1
        return out

    def fits(*a: Any, **k: Any) -> Any:
        seen["fits"] += 1
        return fit_at(*a, **k)

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(F, "_admission_certain", counted)
        mp.setattr(F, "_fit_at", fits)
        early = _outcome(**kw)
        seen["early fits"], seen["fits"] = seen["fits"], 0
        full = _outcome(climb_stops=False, **kw)
    return early, full, seen


@settings(max_examples=60, deadline=None)
@given(model=st.sampled_from(MODELS), device=st.sampled_from(DEVICES), count=st.sampled_from([2, 4, 8]),
       tp=st.sampled_from([1, 2, 4]), engine=st.sampled_from(["vllm", "sglang"]),
       context=st.sampled_from([2048, 4096, 16384]), output=st.sampled_from([128, 512]),
       log_rate=st.floats(math.log(1.0), math.log(150.0)))
def test_the_stopped_climb_answers_as_the_full_one(model: str, device: str, count: int, tp: int, engine: str,
                                                   context: int, output: int, log_rate: float) -> None:
    early, full, seen = _early_and_full(
        model=find(model).spec(), hardware=device, count=count, tensor_parallel=min(tp, count),
        engine=engine, context=context, output_tokens=output, request_rate=round(math.exp(log_rate), 3))
    if seen["stops"]:
        assert early == ("refused",) and full == ("refused",)
    else:
        assert early == full


@pytest.mark.parametrize(("device", "rate"), [
    # 8 replicas of TP 1, 4k context (3.5k-token prompts): the sequences each replica admits serve about 5
    # requests/s, below its share of 50 requests/s and above one request's needs
    ("h100-sxm", 50),
    # 8 replicas on 16 GB T4s: the weights leave vLLM's pool no room for one sequence of 4k (``pool_holds_none``)
    ("t4", 1),
])
def test_the_stop_fires_with_several_replicas_and_saves_the_climb(device: str, rate: float) -> None:
    early, full, seen = _early_and_full(
        model=find("llama-3.1-8b").spec(), hardware=device, count=8, tensor_parallel=1,
        engine="vllm", weights="bf16", context=4096, output_tokens=512, request_rate=rate)
    assert early == full == ("refused",)
    assert seen["stops with several replicas"] == 1
    assert seen["early fits"] == 1 < seen["fits"]  # refused at the climb's first iterate; the full climb goes on


def test_no_stop_on_an_empty_pool_where_a_miss_is_asked() -> None:
    """With ``miss`` asked (a per-user speed floor), a pool that holds none may end the climb as a certain miss
    first (it needs no admitted count): the stop leaves that climb alone."""
    r = fit(find("llama-3.1-8b").spec(), "t4", 8, engine="vllm", weights="bf16", context=4096, output_tokens=512,
            fits_at=False, tensor_parallel=1, concurrency=1, speed=True)
    assert r.estimate is not None and r.estimate.details["max_concurrency_at_context"] == 0
    assert F._admission_certain(r, 1.0) is not None and F._admission_certain(r, 1.0, unmissed=False) is None


def test_the_full_fit_states_the_stops_refusal() -> None:
    """Where the stop fires on several replicas, ``fit`` asked in full (its ceilings stated) is refused by the
    admitted sequences, at the capacity the stop read."""
    kw: dict[str, Any] = dict(engine="vllm", weights="bf16", context=4096, output_tokens=512, fits_at=False,
                              tensor_parallel=2, request_rate=50)
    spec = find("llama-3.1-8b").spec()
    with pytest.raises(RateOverloadError) as e:
        fit(spec, "h100-sxm", 8, refusal_only=True, **kw)
    answer = fit(spec, "h100-sxm", 8, **kw)
    assert not answer.fits and answer.replicas == 4 and answer.details["rate_refused_by"] == "admission"
    assert e.value.kind == "admission"
    assert e.value.capacity == pytest.approx(answer.details["rate_ceilings"]["admission"])


@settings(max_examples=200, deadline=None)
@given(c=st.integers(1, 600), x1=st.floats(0.05, 50.0), growth=st.floats(1.0, 40.0), bend=st.floats(0.2, 1.0),
       share=st.floats(0.05, 1.5))
def test_over_capacity_is_eq_q13s_refusal(c: int, x1: float, growth: float, bend: float, share: float) -> None:
    """``admission_over_capacity`` refuses exactly where ``admission_queue`` (eq. Q13, the whole wait summed) raises,
    on rising X(k) grids (X(k) = X(1) (1 + (growth - 1) ((k - 1) / (c - 1)) ** bend)) and rates around X(c)."""
    closed = [[k, x1 * (1 + (growth - 1) * ((k - 1) / max(c - 1, 1)) ** bend)] for k in admission_grid(c)]
    rate = closed[-1][1] * share
    try:
        admission_queue(closed, rate)
        raised = False
    except OverCapacityError:
        raised = True
    assert (admission_over_capacity(closed, rate) is not None) == raised
    assert raised == (rate >= closed[-1][1])
