"""The request-rate model's capacity limits (estimate/serving_load.py rate_fixed_point, sustained_rate, slots_for;
estimate/fit.py admission_queued): a rate past the decode's capacity, or at or above what the sequences the engine
admits serve, is refused with the capacity named; below that, a rate needing more in flight than the engine admits
waits for admission (a load-dependent server, eq. Q13); llama.cpp's slots cover the 99 % tail of the requests in flight; the
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
    assert not over.fits and over.speed is None
    ceilings = over.details["rate_ceilings"]  # the 4090's memory binds first (its slots' KV), the decode after
    cap = float(over.details["rate_capacity"])
    assert cap == min(float(v) for v in ceilings.values()) and over.details["rate_binding"] == "memory"
    assert f"carries at most about {cap:.3g} requests/s" in over.reasons[0]
    assert "decode" not in ceilings  # past the slots that fit: at least the memory's, not said (llamarate)
    closed = fit("llama-3.1-8b-instruct", "rtx-4090", concurrency=2**20, **LLAMA)
    assert closed.speed is not None and closed.speed.load is not None
    x = float(closed.speed.load["requests_per_second"])  # the decode's sup: where fit's fixed point ceases to exist
    assert over.details["rate_refused_by"] == "decode" and x < 2
    under, past = (fit("llama-3.1-8b-instruct", "rtx-4090", request_rate=f * x, **LLAMA) for f in (0.98, 1.02))
    assert under.details["rate_refused_by"] == "memory" and past.details["rate_refused_by"] == "decode"
    assert under.reasons[0].replace(f"at {0.98 * x:g}", "") == past.reasons[0].replace(f"at {1.02 * x:g}", "")
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


def _closed_x(model: str, device: str, k: int, **kw: object) -> float:
    """X(k): the closed model's completed requests/s with k running, each replaced as it finishes (eq. Q7), read
    from fit at concurrency k (k / its time per request)."""
    r = fit(model, device, concurrency=k, **kw)
    assert r.speed is not None and r.speed.load is not None
    return k / float(r.speed.load["request_seconds"])


def _chain_by_hand(rate: float, xs: list[float]) -> tuple[float, float]:
    """The birth-death chain (Kleinrock 1975 vol. 1 sec. 3.1) of births ``rate`` and deaths X(min(k, c)), summed
    term by term up to where the geometric tail is below 1e-15 of the head: (P[k >= c], W_q = sum (k - c) p_k / rate)."""
    c = len(xs)
    terms = [1.0]
    k = 0
    while True:
        k += 1
        terms.append(terms[-1] * rate / xs[min(k, c) - 1])
        if k > c and terms[-1] < 1e-15 * sum(terms):
            break
    total = sum(terms)
    p_wait = sum(terms[c:]) / total
    waiting = sum((j - c) * t for j, t in enumerate(terms) if j > c) / total
    return p_wait, waiting / rate


def test_a_rate_past_the_admitted_mean_waits_for_admission_instead_of_being_refused() -> None:
    """Qwen3-0.6B on an H100 under vLLM with max_num_seqs 4: at 11.7 requests/s eq. Q10c's mean in flight (4.0+, as if
    all ran) passes the 4 admitted, which was refused; the replica, completing X(k) requests/s with k running (read
    from fit at concurrency k = 1..4, the closed model), serves up to X(4) ~ 11.8/s, so 11.7/s is answered with the
    wait of the birth-death chain (summed by hand here) in its TTFT, and the requests in flight grow by lambda W_q."""
    xs = [_closed_x("qwen3-0.6b", "h100-sxm", k, **QWEN_CAP4) for k in (1, 2, 3, 4)]
    rate = 11.7
    assert xs[-1] > rate  # the regime: below what the 4 admitted serve
    r = fit("qwen3-0.6b", "h100-sxm", request_rate=rate, **QWEN_CAP4)
    assert r.fits and r.speed is not None and r.speed.load is not None
    load = r.speed.load
    p, wait = _chain_by_hand(rate, xs)
    assert load["admission_wait_probability"] == pytest.approx(p, rel=1e-6)
    assert load["admission_wait_seconds"] == pytest.approx(wait, rel=1e-6)
    assert wait > 5.0  # near X(4): most arrivals wait, and long
    assert load["ttft_seconds"] > wait and r.speed.concurrency == 4
    assert load["in_flight"] == pytest.approx(rate * load["request_seconds"])  # Little's law, the wait included
    assert any(a.name == "admission_wait" and "eq. Q13" in a.why for a in r.speed.assumptions)


LLAMA_8K = dict(engine="vllm", context=8192, output_tokens=256)


def test_a_replica_running_well_below_its_admitted_count_waits_little() -> None:
    """Review8 defect 1: Llama-3.1-8B on one H100, 8k context, 51 admitted. The wait is the chain's with X(k) read
    from fit at concurrency k = 1, 2, 4, ..., 32, 51 and straight lines between (summed by hand), not M/M/51 with
    every slot held T(51) (3.0 s at 3/s, with 35 running: which the old rule reported). At 2/s (about 8 in flight)
    no arrival in 10,000 waits, so none is counted."""
    grid = (1, 2, 4, 8, 16, 32, 51)
    sample = {k: _closed_x("llama-3.1-8b", "h100-sxm", k, **LLAMA_8K) for k in grid}
    xs = []
    for lo, hi in zip(grid, grid[1:], strict=False):
        xs += [sample[lo] + (sample[hi] - sample[lo]) * (k - lo) / (hi - lo) for k in range(lo, hi)]
    xs.append(sample[51])
    r = fit("llama-3.1-8b", "h100-sxm", request_rate=3.0, **LLAMA_8K)
    assert r.speed is not None and r.speed.load is not None
    load = r.speed.load
    assert load["admitted"] == 51 and r.speed.concurrency < 51
    p, wait = _chain_by_hand(3.0, xs)
    assert load["admission_wait_probability"] == pytest.approx(p, rel=1e-6)
    assert load["admission_wait_seconds"] == pytest.approx(wait, rel=1e-6)
    t51 = 51 / sample[51]  # M/M/51 at T(51): the upper bound, many times the chain's wait
    a = 3.0 * t51
    head = sum(a**k / math.factorial(k) for k in range(51))
    last = a**51 / math.factorial(51) * 51 / (51 - a)
    assert wait < 0.5 * (last / (head + last)) * t51 / (51 - a)
    low = fit("llama-3.1-8b", "h100-sxm", request_rate=2.0, **LLAMA_8K)
    assert low.speed is not None and low.speed.load is not None and "admitted" not in low.speed.load
    assert _chain_by_hand(2.0, xs)[0] < 1e-4


def test_the_rate_notes_quote_the_answers_ttft_and_in_flight() -> None:
    """Review8 defect 2: the request_rate assumption and the prefill-bound warning are said from the final load,
    the wait for admission included: the same TTFT and requests in flight as the load (the TTFT row)."""
    r = fit("llama-3.1-8b", "h100-sxm", request_rate=3.0, **LLAMA_8K)
    assert r.speed is not None and r.speed.load is not None
    load = r.speed.load
    assert load["admission_wait_seconds"] > 0
    notes = [a.why for a in r.speed.assumptions if a.name == "request_rate"]
    assert len(notes) == 1
    assert f"TTFT {load['ttft_seconds']:.3f} s" in notes[0] and f"{load['in_flight']:.1f} in flight" in notes[0]
    bound = [w for w in r.speed.warnings if w.startswith("prefill-bound at 3 requests/s")]
    assert len(bound) == 1 and f"waits {load['ttft_seconds']:.1f} s for its first token" in bound[0]


def test_a_rare_wait_is_said_as_under_one_percent() -> None:
    """Review8 defect 2: a counted chance below 1 % prints '<1%', never '0%'."""
    from llmsizer.units import format_chance
    assert format_chance(0.00125) == "<1%" and format_chance(0.0) == "0%" and format_chance(0.578) == "58%"
    assert format_chance(0.9991) == ">99%" and format_chance(1.0) == "100%"


def test_the_layout_at_a_rate_is_ranked_by_the_time_the_answer_reports() -> None:
    """Review8 defect 3: two H100s at 6 requests/s. Each layout forced (TP 1 x 2, TP 2 x 1) gives its own mean
    request time, the wait for admission included; fit's own choice is the quicker, and its stated time is the
    answer's."""
    forced = {}
    for tp in (1, 2):
        f = fit("llama-3.1-8b", "h100-sxm", 2, tensor_parallel=tp, request_rate=6.0, **LLAMA_8K)
        assert f.speed is not None and f.speed.load is not None
        forced[tp] = float(f.speed.load["request_seconds"])
    r = fit("llama-3.1-8b", "h100-sxm", 2, request_rate=6.0, **LLAMA_8K)
    assert r.speed is not None and r.speed.load is not None
    assert r.tensor_parallel == min(forced, key=lambda t: forced[t])
    assert float(r.speed.load["request_seconds"]) == pytest.approx(forced[r.tensor_parallel])
    why = next(a.why for a in r.assumptions if a.name == "tensor_parallel")
    assert why.startswith(f"TP {r.tensor_parallel} x {2 // r.tensor_parallel}: "
                          f"{float(r.speed.load['request_seconds']):.3g} s a request")


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
