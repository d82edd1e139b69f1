"""probe6 defects 1, 3, 4 and 8: what a deployment carries at a request rate, and what fit says near it.

1. A refusal's "carries at most about X requests/s" is the deployment's capacity, the least of its ceilings, the same
   at every rate asked; the admission ceiling c / T(c) is the closed model's requests/s at the c admitted (fit at
   concurrency c, an independent path: eq. Q7), and a rate just below the capacity is carried.
3. A fitting rate whose first token comes after 10 s (Nielsen 1993) is warned, on fit and plan alike, and a rate
   within NEAR_CAPACITY_SHARE of the capacity is warned as near it.
4. At a rate the queue keys are the wait for admission: the M/M/c mean wait (Erlang C, computed here by hand) and
   the mean number waiting (Little's law), and recommend does not add that wait to the TTFT a second time.
8. A deployment whose pool holds no sequence is said not to start first, with no search bound in the answer; the
   decode-capacity refusal ends with a remedy and does not cite the search bound.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from llmsizer.estimate.fit import fit
from llmsizer.estimate.rate_capacity import NEAR_CAPACITY_SHARE
from llmsizer.estimate.serving_load import RateCapacityError, rate_fixed_point
from llmsizer.plan import make_plan
from llmsizer.recommend import Constraints, recommend_inference
from llmsizer.request import parse_request

L4 = dict(engine="vllm", context=16384)  # vLLM's KV pool on an L4 admits 1 sequence of 16k tokens
H100 = dict(engine="vllm", context=2048, output_tokens=1024)


@pytest.mark.parametrize(("device", "kw", "rates", "admitted"), [
    ("l4", L4, (0.3, 0.35, 5.0), 1),  # 0.35 and 5 pass the prefill ceiling (0.309/s) too
    ("h100-sxm", H100, (40.0, 200.0), None),  # 200 passes the prefill ceiling (44.5/s)
])
def test_the_capacity_does_not_depend_on_the_rate_asked(device: str, kw: dict, rates: tuple[float, ...],
                                                         admitted: int | None) -> None:
    over = [fit("llama-3.1-8b", device, request_rate=r, **kw) for r in rates]
    caps = {float(o.details["rate_capacity"]) for o in over}
    assert all(not o.fits for o in over) and len(caps) == 1
    cap = caps.pop()
    assert all(o.details["rate_binding"] == "admission" for o in over)
    assert all(o.reasons[0].endswith("shorten the context (more KV room per replica admits more sequences at once)")
               for o in over)  # the remedy of the ceiling that binds, not "shorten the prompts"
    assert all(f"carries at most about {cap:.3g} requests/s" in o.reasons[0] for o in over)
    # the admission ceiling is the closed model's requests/s with the c admitted running (fit at concurrency c)
    c = admitted if admitted is not None else int(over[0].estimate.details["max_concurrency_at_context"])
    closed = fit("llama-3.1-8b", device, concurrency=c, **kw)
    assert closed.speed is not None and closed.speed.load is not None
    assert cap == pytest.approx(float(closed.speed.load["requests_per_second"]), rel=1e-9)
    assert fit("llama-3.1-8b", device, request_rate=0.999 * cap, **kw).fits  # just below: carried
    assert not fit("llama-3.1-8b", device, request_rate=1.001 * cap, **kw).fits


def test_an_engine_with_no_admission_bound_states_one_capacity_at_every_rate() -> None:
    """llama.cpp, 2k context: the prefill ceiling is 8/s but the decode carries less, and its slots' memory less
    still; 50/s (past the prefill ceiling) and 7.9/s (below it, refused by the decode) name the same capacity, and a
    rate just below it fits."""
    kw = dict(engine="llamacpp", context=2048)
    a, b = (fit("llama-3.1-8b", "h100-sxm", request_rate=r, **kw) for r in (50, 7.9))
    assert a.details["rate_refused_by"] == "server" and b.details["rate_refused_by"] == "decode"
    assert a.details["rate_binding"] == b.details["rate_binding"] == "memory"
    cap = float(a.details["rate_capacity"])
    assert cap == pytest.approx(float(b.details["rate_capacity"]), rel=2e-3)
    assert cap < a.details["rate_ceilings"]["server"] and a.details["rate_ceilings"] == b.details["rate_ceilings"]
    assert "decode" not in a.details["rate_ceilings"]  # its sup is at least the memory's (llamarate): not said
    assert a.reasons[0].endswith("(each sequence in flight holds its KV cache)")
    below = fit("llama-3.1-8b", "h100-sxm", request_rate=0.97 * cap, **kw)
    assert below.fits and "rate_capacity" not in below.details and below.speed is not None


def test_an_engine_with_no_admission_bound_states_the_rate_its_slots_memory_carries() -> None:
    """llama.cpp, 4k context on an H100: the decode's ceiling (above 2.4/s) is reached only with more slots than the
    KV memory holds (review9 #2: 2.2/s needed 137.7 GiB of 78.65), so the capacity stated is the memory's: a rate
    just below it fits in memory, one just above is refused as a rate (llamarate: its capacity and remedy, the
    memory verdict at its own slots after it), not with the plain memory verdict."""
    kw = dict(engine="llamacpp", context=4096)
    over = fit("llama-3.1-8b", "h100", request_rate=5, **kw)
    ceil = over.details["rate_ceilings"]
    assert over.details["rate_binding"] == "memory" and ceil["memory"] < ceil["server"] and "decode" not in ceil
    cap = float(over.details["rate_capacity"])
    assert f"carries at most about {cap:.3g} requests/s" in over.reasons[0]
    assert "shorten the context or the outputs" in over.reasons[0]
    below = fit("llama-3.1-8b", "h100", request_rate=0.999 * cap, **kw)
    above = fit("llama-3.1-8b", "h100", request_rate=1.001 * cap, **kw)
    assert below.fits and not above.fits
    assert above.details["rate_capacity"] == cap and above.details["rate_binding"] == "memory"
    assert above.reasons[0] == over.reasons[0].replace("at 5 requests/s", f"at {1.001 * cap:g} requests/s")
    assert above.reasons[1].startswith("needs ")  # the memory verdict at the slots the rate needs


def test_a_slow_first_token_and_a_rate_near_capacity_are_warned() -> None:
    near = fit("llama-3.1-8b", "l4", request_rate=0.04, **L4)
    assert near.fits and near.speed is not None and (near.speed.ttft_seconds or 0) > 60
    said = near.details["rate_warnings"]
    assert "Nielsen 1993" in said["slow_first_token"] and set(said.values()) <= set(near.warnings)
    cap = fit("llama-3.1-8b", "l4", request_rate=1, **L4).details["rate_capacity"]
    assert 0.04 >= NEAR_CAPACITY_SHARE * cap and f"at most about {cap:.3g} requests/s" in said["near_capacity"]
    calm = fit("llama-3.1-8b", "l4", request_rate=0.002, **L4)  # TTFT a few seconds, far below the capacity
    assert calm.fits and calm.speed is not None and (calm.speed.ttft_seconds or 0) < 10
    assert "rate_warnings" not in calm.details
    assert not any("Nielsen" in w or "near capacity" in w for w in calm.warnings)


def test_the_plan_checks_a_slow_first_token_and_a_peak_near_capacity(tmp_path: Path) -> None:
    text = ("version: 1\ntitle: rate\njobs:\n- name: j\n  kind: inference\n  model: {name: llama-3.1-8b}\n"
            "  engine: vllm\n  resources: {device: l4, count: 1}\n  traffic:\n"
            "    requests_per_second: {typical: 0.02, peak: 0.04}\n"
            "    context: {typical: 16384, peak: 16384}\n")
    path = tmp_path / "r.yaml"
    path.write_text(text)
    plan = make_plan(parse_request(text, source=str(path)), alternatives=False)
    ids = {c.id: c for c in plan.checks if c.severity == "warning"}
    assert "slow-first-token" in ids and "near-capacity" in ids
    assert "Nielsen 1993" in ids["slow-first-token"].message
    f = fit("llama-3.1-8b", "l4", request_rate=0.04, **L4)  # the peak as fit answers it: the same words
    assert f.details["rate_warnings"]["near_capacity"] in ids["near-capacity"].message


def _birth_death_wait(rate: float, xs: dict[int, float]) -> tuple[float, float]:
    """(mean wait, mean number waiting) of a load-dependent server, by hand (Kleinrock 1975 vol. 1 sec. 3.1): with k
    present it completes X(min(k, c)) per second; p_k proportional to rate^k / prod_{i<=k} X(min(i, c)); beyond c
    the tail is geometric with ratio rate / X(c); the mean number waiting is sum_{k>c} (k - c) p_k."""
    c = max(xs)
    weights = [1.0]
    for k in range(1, c + 1):
        weights.append(weights[-1] * rate / xs[k])
    rho = rate / xs[c]
    tail = weights[c] * rho / (1 - rho)  # sum_{k>c} p_k (unnormalised)
    waiting = weights[c] * rho / (1 - rho) ** 2  # sum_{k>c} (k - c) p_k (unnormalised)
    total = sum(weights) + tail
    lq = waiting / total
    return lq / rate, lq


def test_the_queue_keys_at_a_rate_are_the_wait_for_admission() -> None:
    r = fit("llama-3.1-8b", "gcp-g2-standard-4", weights="fp8", engine="vllm", context=16384, request_rate=0.15)
    assert r.fits and r.speed is not None and r.speed.load is not None
    load = r.speed.load
    xs = {int(k): float(x) for k, x in load["closed_throughputs"]}
    assert sorted(xs) == list(range(1, int(load["admitted"]) + 1))  # c = 5 admitted: X read at every k
    wait, waiting = _birth_death_wait(0.15, xs)
    assert wait > 10 and r.details["queue_wait_seconds"] == pytest.approx(wait, rel=1e-9)
    assert r.details["queued_sequences"] == pytest.approx(waiting, rel=1e-9)
    assert waiting == pytest.approx(0.15 * wait, rel=1e-12)  # Little's law
    assert r.details["queue_wait_in_ttft"] is True
    assert r.speed.ttft_seconds is not None and r.speed.ttft_seconds > wait  # the TTFT holds the wait already
    d = r.to_dict()
    assert d["details"]["queue_wait_seconds"] == r.details["queue_wait_seconds"]


def test_recommend_reports_the_wait_and_does_not_add_it_twice() -> None:
    rec = recommend_inference("llama-3.1-8b", constraints=Constraints(), context=16384, request_rate=0.3)
    c = rec.chosen
    assert c is not None and c.ttft_seconds is not None
    assert c.queue_wait_seconds and c.queue_wait_seconds > 1 and c.queue_wait_in_ttft
    slow = [w for w in rec.warnings if "Nielsen" in w]
    from llmsizer.units import format_seconds
    assert not slow or f"after {format_seconds(c.ttft_seconds)}," in slow[0]  # the TTFT, not TTFT + the wait


def test_a_deployment_that_does_not_start_says_so_first_with_no_search_bound() -> None:
    r = fit("llama-3.1-8b", "l4", engine="sglang", context=16384, request_rate=0.2)
    assert not r.fits and "fail at start-up" in r.reasons[0]
    rate = next(w for w in r.reasons if w.startswith("does not carry the rate"))
    assert "admits none" in rate and rate.endswith("fix the memory first")
    every = " ".join((*r.reasons, *(str(a.value) for a in r.all_assumptions)))
    assert "16,777,216" not in every and "16777216" not in every


def test_the_decode_refusal_ends_with_a_remedy_and_not_the_search_bound() -> None:
    with pytest.raises(RateCapacityError) as e:  # f(C) = 2C + 1 > C everywhere: no fixed point up to the bound
        rate_fixed_point(lambda c: c, lambda c: 2.0 * c + 1, 1.0, limit=64)
    said = str(e.value)
    assert said.endswith("lower the rate, add replicas or shorten the outputs") and "64" not in said
