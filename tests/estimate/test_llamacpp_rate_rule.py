"""llamarate: llama.cpp at a request rate has one refusal rule. Every ceiling is computed on the statistic fit sizes
its memory at (the slots of formulas/arrival_tail.py eq. T1: the 99 % tail of the Poisson number in flight, not its
mean), and a rate between the memory's ceiling and the decode's is refused as a rate (its capacity, binding ceiling
and remedy), the same on fit, plan and recommend's per-copy ladder walk.

Independent truth: the Poisson tail is summed here by hand (eq. T1: the least k with P(N <= k) >= 0.99, N Poisson of
the mean in flight, the mean from Little's law over the answer's own request seconds), and the most slots whose
memory fits is found with fit at a fixed concurrency (the closed path, no rate)."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from llmsizer.catalog.hardware import load_catalog
from llmsizer.catalog.models import find
from llmsizer.estimate.fit import fit
from llmsizer.estimate.format_search import LatencyLimits, pick_format
from llmsizer.plan import make_plan
from llmsizer.request import parse_request

MEMORY = ("llama-3.1-8b", "h100", dict(engine="llamacpp", context=4096))  # memory binds (2.06/s < server 3.6/s)
DECODE = ("qwen2.5-0.5b", "h100", dict(engine="llamacpp", context=1024))  # decode creeps to the server's bound


def poisson_tail_slots(mean: float, q: float = 0.99) -> int:
    """The least k with P(N <= k) >= q for N ~ Poisson(mean), summed term by term (each term from its logarithm,
    -mean + k ln mean - ln k!, so a mean of thousands does not underflow the first)."""
    cdf, k = 0.0, 0
    while True:
        cdf += math.exp(-mean + k * math.log(mean) - math.lgamma(k + 1)) if mean > 0 else float(k == 0)
        if cdf >= q:
            return k
        k += 1


def most_slots_that_fit(model: str, device: str, kw: dict) -> int:
    """The largest concurrency whose memory fits (fit at a fixed concurrency, bisected)."""
    low, high = 1, 2
    while fit(model, device, concurrency=high, speed=False, **kw).fits:
        low, high = high, high * 2
    while high - low > 1:
        mid = (low + high) // 2
        low, high = (mid, high) if fit(model, device, concurrency=mid, speed=False, **kw).fits else (low, mid)
    return low


def test_the_memory_ceiling_is_the_rate_whose_tail_slots_fill_the_memory() -> None:
    model, device, kw = MEMORY
    cap = float(fit(model, device, request_rate=5, **kw).details["rate_capacity"])
    c_max = most_slots_that_fit(model, device, kw)
    below = fit(model, device, request_rate=0.999 * cap, **kw)
    assert below.fits and below.speed is not None and below.speed.load is not None
    load = below.speed.load
    mean = 0.999 * cap * float(load["request_seconds"])  # Little's law
    assert mean == pytest.approx(float(load["in_flight"]), rel=1e-9)
    slots = poisson_tail_slots(mean)
    assert slots <= below.details["concurrency"] <= c_max  # the fixed point: slots at its own step within it
    assert slots > math.ceil(mean)  # the tail, not the mean, is what the memory holds
    above = fit(model, device, request_rate=1.001 * cap, **kw)
    assert not above.fits and above.details["rate_binding"] == above.details["rate_refused_by"] == "memory"
    assert above.details["rate_capacity"] == cap and above.details["concurrency"] > c_max
    assert "shorten the context or the outputs" in above.reasons[0]


def test_every_refusal_states_the_same_ceilings_whichever_refused() -> None:
    """2.07/s: a fixed point exists but its slots do not fit (refused by the memory); 2.5/s: no fixed point (the
    decode); 5/s: past eq. Q10a's bound at one request (the server). One capacity, binding ceiling, ceilings and
    remedy; the decode's ceiling is not said where a C below its peak does not fit (its sup is at least the
    memory's): the former one (2.41/s, a search stopped by a gain) was below rates whose fixed point exists."""
    model, device, kw = MEMORY
    answers = {r: fit(model, device, request_rate=r, **kw) for r in (2.07, 2.5, 5.0)}
    assert [a.details["rate_refused_by"] for a in answers.values()] == ["memory", "decode", "server"]
    assert len({str(a.details["rate_ceilings"]) for a in answers.values()}) == 1
    assert {a.reasons[0].replace(f"at {r:g} requests/s", "at R") for r, a in answers.items()} == {
        answers[5.0].reasons[0].replace("at 5 requests/s", "at R")}
    assert set(answers[5.0].details["rate_ceilings"]) == {"server", "memory"}
    exists = fit(model, device, request_rate=2.416, **kw)  # above the former decode ceiling: a fixed point exists
    assert exists.details["rate_refused_by"] == "memory" and exists.details["concurrency"] < 2**24


def test_a_decode_refusal_names_the_tail_slots() -> None:
    """Qwen2.5-0.5B on an H100 at 1k context: the decode's rate creeps towards eq. Q10a's bound until its slots
    outgrow the memory; the capacity is the memory's, just under it carried with the tail's slots, just over refused
    as a rate (formerly the decode's 44.44/s was stated, a gain-stopped search, below rates fit carried)."""
    model, device, kw = DECODE
    over = fit(model, device, request_rate=1000, **kw)
    cap = float(over.details["rate_capacity"])
    assert over.details["rate_binding"] == "memory" and cap < over.details["rate_ceilings"]["server"]
    below = fit(model, device, request_rate=0.9999 * cap, **kw)
    assert below.fits and below.speed is not None and below.speed.load is not None
    mean = float(below.speed.load["in_flight"])
    assert math.ceil(mean) < poisson_tail_slots(mean) <= below.details["concurrency"]  # the tail's slots, busy
    above = fit(model, device, request_rate=1.0001 * cap, **kw)
    assert not above.fits and above.details["rate_binding"] == "memory"
    assert above.details["rate_capacity"] == pytest.approx(cap, rel=1e-9)
    assert "its slots (the 99% tail of the requests in flight" in above.reasons[0]


@pytest.mark.parametrize("rate", [1.03, 2.07, 2.3, 2.5, 5.0])  # under the memory's, between it and the decode's, past
def test_fit_plan_and_the_copies_ladder_say_the_same_verdict(tmp_path: Path, rate: float) -> None:
    model, device, kw = MEMORY
    f = fit(model, device, request_rate=rate, **kw)
    assert f.fits is (rate < 2.06)
    text = (f"version: 1\ntitle: rate\njobs:\n- name: j\n  kind: inference\n  model: {{name: {model}}}\n"
            f"  engine: llamacpp\n  resources: {{device: {device}, count: 1}}\n  traffic:\n"
            f"    requests_per_second: {{typical: {rate}, peak: {rate}}}\n"
            "    context: {typical: 4096, peak: 4096}\n")
    path = tmp_path / "r.yaml"
    path.write_text(text)
    plan = make_plan(parse_request(text, source=str(path)), alternatives=False)
    facts = plan.jobs[0].facts
    dev = load_catalog().device(device)
    pick = pick_format(find(model).spec(), dev, 1, None, None, context=4096, concurrency=1, output_tokens=None,
                       weights="f16", limits=LatencyLimits(), headroom=None, engine_given="llamacpp",
                       request_rate=rate)
    if f.fits:
        assert pick.status == "meets" and "rate_refusal" not in facts
        return
    assert pick.status == "rejected" and pick.past_capacity
    assert f.reasons[0] in pick.reasons[0]  # recommend's per-copy walk: fit's refusal, word for word
    assert facts["rate_refusal"] == f.reasons[0]
    assert f.details["rate_binding"] == "memory" and f.details["rate_capacity"] == pytest.approx(2.0635, rel=1e-3)
