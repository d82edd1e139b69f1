"""The request-rate model's capacity limits (estimate/serving_load.py rate_fixed_point, sustained_rate, slots_for;
estimate/fit.py admission_queued): a rate past the decode's capacity, or at or above what the sequences the engine
admits serve, is refused with the capacity named; below that, a rate needing more in flight than the engine admits
waits for admission (M/M/c, eq. Q12); llama.cpp's slots cover the 99 % tail of the requests in flight; the
rate mode states H and warns as the closed mode does. Expected values are derived by hand (linear-step algebra,
Little's law, Poisson sums) or read from an independent path (the closed model, eqs. Q6'-Q7, at a large population)."""

from __future__ import annotations

import math
import re

import pytest

from llmsizer.errors import FieldError
from llmsizer.estimate.fit import fit
from llmsizer.estimate.serving_load import RateCapacityError, rate_fixed_point


def _linear(rate: float, fixed: float, per: float):
    """A request of R(C) = fixed + per x C seconds at C in flight (a decode step linear in the sequences it carries:
    N (t0 + k C)). Little's law: C = rate R(C) has the fixed point C* = rate fixed / (1 - rate per) where rate per < 1,
    none otherwise; the closed throughput C / R(C) rises to its sup 1 / per (the capacity)."""
    calls: list[int] = []

    def run(c: int) -> float:
        calls.append(c)
        return rate * (fixed + per * c)  # the answer: its mean in flight
    return run, calls


@pytest.mark.parametrize("rate, fixed, per", [(2.0, 1.0, 0.1), (0.99, 50.0, 1.0), (0.999, 10.0, 1.0)])
def test_the_least_fixed_point_however_slow_the_climb(rate: float, fixed: float, per: float) -> None:
    """rate x per near 1 (0.99, 0.999: each round climbs by 1 %, 0.1 %) still ends at C* = ceil of the exact root,
    which the plain climb of 32 rounds did not reach (it returned an unsettled answer)."""
    run, _ = _linear(rate, fixed, per)
    exact = rate * fixed / (1 - rate * per)
    flight = rate_fixed_point(run, lambda f: f, rate)
    # the answer is the run at the least C with ceil(C's flight) <= C: C = ceil(C*) (for C >= C*: rate R(C) <= C)
    assert flight == pytest.approx(rate * (fixed + per * math.ceil(exact - 1e-9)))


@pytest.mark.parametrize("rate", [1.01, 1.5, 40.0])
def test_past_the_decode_capacity_is_refused_naming_it(rate: float) -> None:
    """per = 1 s: the capacity is 1 / per = 1 request/s. Past it no C solves C = rate (1 + C); the refusal names the
    most C / R(C) tried, which at C = 2^24 is 2^24 / (1 + 2^24) ~ 1."""
    run, _ = _linear(rate, 1.0, 1.0)
    with pytest.raises(RateCapacityError, match=r"decode's capacity, about 1/s") as e:
        rate_fixed_point(run, lambda f: f, rate)
    assert e.value.capacity == pytest.approx(1.0, rel=1e-6)


LLAMA = dict(engine="llamacpp", context=4096, output_tokens=1024)


def test_fit_refuses_a_rate_past_the_decode_capacity_and_names_the_closed_loop_throughput() -> None:
    """Llama-3.1-8B on an RTX 4090 under llama.cpp, 1,024 output tokens: the decode step grows with the slots, so
    the requests/s tend to a bound. The refusal's capacity (the open model inverted at the largest C tried) is the
    closed model's requests/s at a population that large (eqs. Q6'-Q7, an independent solution: MVA of the closed
    network), and a rate just below it is answered with a settled fixed point (Little's law holds)."""
    over = fit("llama-3.1-8b-instruct", "rtx-4090", request_rate=2, **LLAMA)  # an answer: it does not carry 2/s
    assert not over.fits and over.speed is None and "bound by the decode" in over.reasons[0]
    cap = float(over.details["rate_capacity"])
    assert f"carries at most about {cap:.3g} requests/s" in over.reasons[0]
    closed = fit("llama-3.1-8b-instruct", "rtx-4090", concurrency=2**20, **LLAMA)
    assert closed.speed is not None and closed.speed.load is not None
    assert cap == pytest.approx(float(closed.speed.load["requests_per_second"]), rel=0.02)
    r = fit("llama-3.1-8b-instruct", "rtx-4090", request_rate=0.95 * cap, **LLAMA)
    assert r.speed is not None and r.speed.load is not None
    load = r.speed.load
    assert load["in_flight"] == pytest.approx(0.95 * cap * load["request_seconds"])  # Little's law
    assert r.speed.concurrency >= load["in_flight"]  # the step timed at (at least) the requests in flight


def test_vllm_rate_above_what_its_pool_admits_is_refused_with_both_counts() -> None:
    """Review7 defect 2: Llama-3.1-8B, H100, 8,192-token context, 4.5 requests/s: 146 in flight against 51 the KV
    pool admits; no TTFT computed as if all 146 ran. The rate 51 running sustain is the closed model's at 51
    (eq. Q7), read from fit at concurrency 51 (an independent path)."""
    kw = dict(engine="vllm", context=8192, output_tokens=256)
    over = fit("llama-3.1-8b-instruct", "h100-sxm", request_rate=4.5, **kw)  # an answer: not fitting, exit 1
    why = over.reasons[0]
    assert not over.fits and re.search(r"146\.0 requests are in flight per replica.*admits 51 per replica", why)
    assert "(TP 1 x 1 replica)" in why  # the layout "per replica" refers to
    closed = fit("llama-3.1-8b-instruct", "h100-sxm", concurrency=51, **kw)
    assert closed.speed is not None and closed.speed.load is not None
    assert f"about {float(closed.speed.load['requests_per_second']):.3g} requests/s" in why
    assert over.details["rate_capacity"] == pytest.approx(float(closed.speed.load["requests_per_second"]), rel=1e-6)
    assert "grows without bound" in why
    ok = fit("llama-3.1-8b-instruct", "h100-sxm", request_rate=1.5, **kw)  # 4.7 in flight: admitted
    assert ok.fits and ok.speed is not None and ok.speed.load is not None


def test_llamacpp_slots_cover_the_99_percent_tail() -> None:
    """Review7 defect 2: Qwen2.5-0.5B, RTX 4090, 4 requests/s: a mean of about 2.8 in flight. ceil(mean) slots left
    an arrival waiting about half the time; the slots are now the least c with P(N <= c - 1) >= 0.99 for N Poisson
    of that mean (summed here by hand, independently of formulas/arrival_tail.py)."""
    r = fit("qwen2.5-0.5b", "rtx-4090", engine="llamacpp", context=1024, output_tokens=128, request_rate=4)
    assert r.speed is not None and r.speed.load is not None
    mean = float(r.speed.load["in_flight"])
    term = cdf = math.exp(-mean)
    k = 0
    while cdf < 0.99:
        k += 1
        term *= mean / k
        cdf += term
    assert r.speed.concurrency == k + 1
    assert next(a for a in r.assumptions if a.name == "concurrency").value == k + 1


def test_several_replicas_say_the_typed_rate_and_each_share() -> None:
    """Review7 defect 5: 60 requests/s typed on 2 replicas: the assumption says 60 (30 per replica), the JSON keeps
    60 and adds 30 per replica."""
    r = fit("qwen3-0.6b", "h100-sxm", 2, engine="vllm", context=640, output_tokens=128, request_rate=60)
    assert r.replicas == 2 and r.speed is not None and r.speed.load is not None
    note = next(a for a in r.speed.assumptions if a.name == "request_rate")
    assert note.value == "60 requests/s (30 per replica)"
    assert r.speed.load["request_rate"] == 60 and r.speed.load["request_rate_per_replica"] == 30


def test_the_replicas_put_out_the_rate_times_the_output() -> None:
    """Probe4 defect 3: in a steady state every request that arrives leaves with its output, so the replicas together
    put out rate x output tokens (flow balance), whatever the rounded requests in flight per replica (100/s on 8
    B200s: 43.6 in flight each, 349 in all, which used to scale 8 replicas' tokens/s by 349 / 44 = 7.93)."""
    r = fit("llama-3.1-8b", "gcp-a4-highgpu-8g", engine="vllm", weights="fp8", context=4096, output_tokens=512,
            request_rate=100)
    assert r.fits and r.replicas == 8
    assert r.tokens_per_second_total == pytest.approx(100 * 512)
    assert r.cost is not None and r.cost["per_million_tokens"] == pytest.approx(
        r.cost["price_per_hour"] / (100 * 512 * 3600) * 1e6, rel=1e-3)
    assert "per million output tokens at 100 requests/s" in str(r)


def test_split_without_host_device_names_the_cause() -> None:
    """Review7 defect 6: a llama.cpp split with layers on the CPU has no decode speed without the host's bandwidth."""
    with pytest.raises(FieldError, match="give host_device") as e:
        fit("llama-3.1-70b-instruct", "rtx-4090", engine="llamacpp", weights="q4_k_m", context=4352,
            output_tokens=256, n_gpu_layers=40, request_rate=0.05)
    assert "host_device" in e.value.fields


def test_text_rate_is_read_as_the_cli_reads_it() -> None:
    """Review7: fit(request_rate='16') was refused while the CLI and the web read '16'; '1.6e1' likewise."""
    kw = dict(engine="vllm", context=640, output_tokens=128)
    base = fit("qwen3-0.6b", "h100-sxm", request_rate=16, **kw)
    for text in ("16", "1.6e1"):
        r = fit("qwen3-0.6b", "h100-sxm", request_rate=text, **kw)
        assert r.speed is not None and base.speed is not None and r.speed.load == base.speed.load
    with pytest.raises(FieldError, match="request_rate"):
        fit("qwen3-0.6b", "h100-sxm", request_rate="fast", **kw)


def test_rate_mode_states_h_and_warns_when_prefill_bound() -> None:
    """Review7 defect 3: the rate mode states the server time H (and its range) as the closed mode does, and warns
    when the prompts take half the device time or more (u = lambda D >= PREFILL_SHARE_WARN)."""
    kw = dict(engine="vllm", context=8192, output_tokens=256)
    closed = fit("llama-3.1-8b-instruct", "h100-sxm", concurrency=8, **kw)
    r = fit("llama-3.1-8b-instruct", "h100-sxm", request_rate=3.0, **kw)
    assert r.speed is not None and r.speed.load is not None and closed.speed is not None
    named = {a.name: a.value for a in r.speed.assumptions}
    assert named["api_server_seconds_per_request"] == {a.name: a.value for a in closed.speed.assumptions}[
        "api_server_seconds_per_request"]
    share = float(r.speed.load["prefill_share"])
    assert share == pytest.approx(3.0 * r.speed.prefill.seconds)  # u = lambda D
    assert (share >= 0.5) == any(w.startswith("prefill-bound at 3 requests/s") for w in r.speed.warnings)
    assert share >= 0.5


QWEN_CAP4 = dict(engine="vllm", context=640, output_tokens=128, max_num_seqs=4)


def _mmc_wait(c: int, a: float, service: float) -> tuple[float, float]:
    """M/M/c by the direct sum (Kleinrock 1975 vol. 1 sec. 3.5): (P[queueing], W_q = P T / (c - a))."""
    head = sum(a**k / math.factorial(k) for k in range(c))
    last = a**c / math.factorial(c) * c / (c - a)
    p = last / (head + last)
    return p, p * service / (c - a)


def test_a_rate_past_the_admitted_mean_waits_for_admission_instead_of_being_refused() -> None:
    """Qwen3-0.6B on an H100 under vLLM with max_num_seqs 4: at 11.7 requests/s eq. Q10c's mean in flight (4.0+, as if
    all ran) passes the 4 admitted, which was refused; the 4 slots, each held T(4) (the closed model at 4 running,
    eq. Q7, read from fit at concurrency 4: an independent path), serve up to 4 / T(4) ~ 11.8/s, so 11.7/s is
    answered with the M/M/4 wait for admission in its TTFT, and the requests in flight grow by lambda W_q (Little)."""
    closed = fit("qwen3-0.6b", "h100-sxm", concurrency=4, **QWEN_CAP4)
    assert closed.speed is not None and closed.speed.load is not None
    service = float(closed.speed.load["request_seconds"])
    rate = 11.7
    assert 4 / service > rate  # the regime: below what the 4 admitted serve
    r = fit("qwen3-0.6b", "h100-sxm", request_rate=rate, **QWEN_CAP4)
    assert r.fits and r.speed is not None and r.speed.load is not None
    load = r.speed.load
    p, wait = _mmc_wait(4, rate * service, service)
    assert load["admission_wait_probability"] == pytest.approx(p, rel=1e-9)
    assert load["admission_wait_seconds"] == pytest.approx(wait, rel=1e-9)
    assert wait > 5.0  # near c / T(c): most arrivals wait, and long
    assert load["ttft_seconds"] > wait and r.speed.concurrency == 4
    assert load["in_flight"] == pytest.approx(rate * load["request_seconds"])  # Little's law, the wait included
    assert any(a.name == "admission_wait" and "M/M/c" in a.why for a in r.speed.assumptions)


def test_the_wait_grows_smoothly_into_the_limit(capsys: pytest.CaptureFixture[str]) -> None:
    """The TTFT rises with the rate (no jump where the mean in flight crosses the admitted 4), and a rate at or above
    4 / T(4) is still refused: not fitting, exit 1, the capacity named."""
    ttfts = []
    for rate in (5.0, 10.0, 11.0, 11.5, 11.7):
        r = fit("qwen3-0.6b", "h100-sxm", request_rate=rate, **QWEN_CAP4)
        assert r.fits and r.speed is not None and r.speed.load is not None
        ttfts.append(float(r.speed.load["ttft_seconds"]))
    assert ttfts == sorted(ttfts) and ttfts[-1] / ttfts[-2] < 5
    over = fit("qwen3-0.6b", "h100-sxm", request_rate=11.9, **QWEN_CAP4)
    assert not over.fits and "admits 4 per replica" in over.reasons[0] and "grows without bound" in over.reasons[0]
    from cli.cli_run import run
    code, out, _ = run(["fit", "qwen3-0.6b", "--device", "h100-sxm", "--engine", "vllm", "--context", "640", "--output-tokens",
                        "128", "--max-num-seqs", "4", "--request-rate", "11.9"], capsys)
    assert code == 1 and "does not carry the rate" in out
