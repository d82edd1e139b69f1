"""formulas/serving_queue.py eqs. Q4-Q9: the prefill demand of a continuous-batching server at C requests in flight.

Q6 (Schweitzer's approximate MVA in closed form) is checked against the exact mean value analysis of the same
closed network (Reiser & Lavenberg 1980: one queueing station of demand D, a delay of Z; the recursion written out
here, independent of llmsizer), and Q5 / Q7 / Q8 at their limits."""

from __future__ import annotations

import pytest

from llmsizer.errors import InputError
from llmsizer.formulas.serving_queue import (
    burst_serving,
    interactive_response_seconds,
    loaded_serving,
    loaded_step_seconds,
    station_responses,
    step_wait_seconds,
)


def exact_mva(customers: int, demand: float, think: float) -> float:
    """Exact MVA of one queue + one delay: R(n) = D (1 + Q(n - 1)), X(n) = n / (R(n) + Z), Q(n) = X(n) R(n)."""
    q = 0.0
    r = demand
    for n in range(1, customers + 1):
        r = demand * (1 + q)
        q = n / (r + think) * r
    return r


def exact_mva_stations(customers: int, demands: tuple[float, ...], think: float) -> tuple[float, ...]:
    """Exact MVA (Reiser & Lavenberg 1980) of single-server queueing stations ``demands`` and one delay ``think``:
    R_k(n) = D_k (1 + Q_k(n - 1)), X(n) = n / (Z + sum_k R_k(n)), Q_k(n) = X(n) R_k(n)."""
    q = [0.0] * len(demands)
    r = list(demands)
    for n in range(1, customers + 1):
        r = [d * (1 + qk) for d, qk in zip(demands, q, strict=True)]
        x = n / (think + sum(r))
        q = [x * rk for rk in r]
    return tuple(r)


@pytest.mark.parametrize("customers, demand, think", [
    (1, 6.6, 16.6), (4, 6.6, 16.6), (32, 6.6, 16.6), (32, 0.03, 2.0), (48, 0.03, 2.5), (200, 0.01, 1.0),
    (8, 1.0, 0.0)])
def test_q6_is_near_the_exact_mean_value_analysis(customers: int, demand: float, think: float) -> None:
    exact = exact_mva(customers, demand, think)
    # the approximation errs most at the knee (C D near D + Z): 13 % at C = 4 here, within 15 %
    assert interactive_response_seconds(customers, demand, think) == pytest.approx(exact, rel=0.15)


def test_q6_limits() -> None:
    assert interactive_response_seconds(1, 2.0, 30.0) == pytest.approx(2.0)  # alone: its own prefill
    assert interactive_response_seconds(10, 2.0, 0.0) == pytest.approx(20.0)  # no think time: all ahead of it
    # saturated (C D >> Z): the server's cycle C D less the think time
    assert interactive_response_seconds(1000, 1.0, 50.0) == pytest.approx(1000 - 50, rel=1e-3)


def test_q5_stretches_the_step_by_the_prefill_share() -> None:
    assert loaded_step_seconds(0.02, 0.0, None) == 0.02
    assert loaded_step_seconds(0.02, 0.5, None) == pytest.approx(0.04)  # Q5b: half the device time is prefill
    # Q5a: half the time in 1 s chunk steps, half in 20 ms decode steps: 0.5 + 25 steps a second
    assert loaded_step_seconds(0.02, 0.5, 1.0) == pytest.approx(1 / 25.5)
    with pytest.raises(InputError):
        loaded_step_seconds(0.02, 1.0, None)


def test_one_request_is_its_idle_time() -> None:
    s = loaded_serving(1, 6.587, 0.0649, 256, None)
    assert s["ttft_seconds"] == pytest.approx(6.587) and s["step_seconds"] == pytest.approx(0.0649)
    assert s["requests_per_second"] == pytest.approx(1 / (6.587 + 256 * 0.0649))


def test_the_device_time_adds_up() -> None:
    """Q7: the prefill share is X D, and the prefill plus the decode steps the requests' tokens need fill the device
    (Q5b: the steps run in the time the prefill leaves) -- within the (C - 1) / C the decoding request sees."""
    c, d, t, n = 32, 6.587, 0.0649, 256
    s = loaded_serving(c, d, t, n, None)
    assert s["prefill_share"] == pytest.approx(s["requests_per_second"] * d, rel=1e-6)
    assert s["request_seconds"] == pytest.approx(c / s["requests_per_second"], rel=1e-6)  # Little's law
    assert s["prefill_share"] < 1 and s["ttft_seconds"] > 5 * d


def test_q8_burst() -> None:
    """Q8 after at most one whole running step (Q9b's t_d): with no server time, the burst's own figures plus it."""
    b = burst_serving(32, 32 * 6.587, 60, 0.0649, 256)
    assert b["ttft_seconds"] == pytest.approx(32 * 6.587 * 61 / 120 + 0.0649)
    assert b["requests_per_second"] == pytest.approx(32 / (0.0649 + 32 * 6.587 + 255 * 0.0649))
    one_step = burst_serving(4, 0.1, 1, 0.02, 10)  # every prompt in one step: all wait for all of it
    assert one_step["ttft_seconds"] == pytest.approx(0.1 + 0.02)
    alone = burst_serving(1, 0.1, 1, 0.02, 10)  # one request finds the engine idle: no step to wait for
    assert alone["ttft_seconds"] == pytest.approx(0.1)


def test_q9_server_time_one_request() -> None:
    """One request (C = 1): its cycle is H + D + N t_d exactly (nothing else in flight, the engine idle when it
    arrives), and its TTFT H + D; arriving together changes nothing for one."""
    s = loaded_serving(1, 0.05, 0.01, 100, None, host_seconds=0.02)
    assert s["ttft_seconds"] == pytest.approx(0.02 + 0.05) and s["step_wait_seconds"] == 0.0
    assert s["requests_per_second"] == pytest.approx(1 / (0.02 + 0.05 + 100 * 0.01))
    b = burst_serving(1, 0.05, 1, 0.01, 100, host_seconds=0.02)
    assert b["ttft_seconds"] == pytest.approx(0.07)
    assert b["requests_per_second"] == pytest.approx(1 / (0.02 + 0.05 + 99 * 0.01))


def test_q9_server_time_and_step_wait_under_load() -> None:
    """C >= 2 (eq. Q9a): the TTFT is the API server's residence R_H, the wait for a running decode step (half a decode
    step, only when arriving during one: 1 - u' of the time) and the prefill's residence R_D, both stations of the same
    closed network (eq. Q6') with w in the think time; a burst's j-th request waits j H (mean (C + 1) / 2 H) and at
    most one whole step. Little's law holds with them."""
    c, d, t, n, h = 16, 0.03, 0.02, 100, 0.025
    s = loaded_serving(c, d, t, n, None, host_seconds=h)
    others = s["prefill_share"] * (c - 1) / c
    assert s["step_wait_seconds"] == pytest.approx((1 - others) * t / 2, rel=1e-9)
    assert s["step_seconds"] == pytest.approx(t / (1 - others), rel=1e-9)  # Q5b
    think = n * s["step_seconds"] + s["step_wait_seconds"]
    r_host, r_device = station_responses(c, (h, d), think)
    assert s["api_server_seconds"] == pytest.approx(r_host, rel=1e-6)
    assert s["device_ttft_seconds"] == pytest.approx(r_device, rel=1e-6)
    assert s["ttft_seconds"] == pytest.approx(r_host + s["step_wait_seconds"] + r_device, rel=1e-9)
    assert s["request_seconds"] == pytest.approx(c / s["requests_per_second"], rel=1e-9)
    assert s["requests_per_second"] < loaded_serving(c, d, t, n, None)["requests_per_second"]
    b = burst_serving(c, c * d, 1, t, n, host_seconds=h)
    assert b["ttft_seconds"] == pytest.approx(h * (c + 1) / 2 + t + c * d)
    assert b["request_seconds"] == pytest.approx(c * h + t + c * d + (n - 1) * t)
    with pytest.raises(InputError):
        loaded_serving(c, d, t, n, None, host_seconds=-1.0)


def test_q9a_the_steps_carrying_the_prompt_pay_the_decode() -> None:
    """An additive one-forward step (eq. Q9a's k): each of the k steps that prefill the request's prompt also runs the
    others' decode, t_d more before its first token; none alone (C = 1: nothing decodes beside it)."""
    c, d, t, n, h = 8, 0.03, 0.02, 100, 0.01
    s = loaded_serving(c, d, t, n, None, host_seconds=h, carrying_steps=2)
    assert s["carry_seconds"] == pytest.approx(2 * t)
    assert s["ttft_seconds"] == pytest.approx(s["api_server_seconds"] + s["step_wait_seconds"]
                                              + s["device_ttft_seconds"] + 2 * t, rel=1e-9)
    alone = loaded_serving(1, d, t, n, None, host_seconds=h, carrying_steps=2)
    assert alone["ttft_seconds"] == pytest.approx(h + d) and alone["carry_seconds"] == 0.0
    assert step_wait_seconds(1, t, 0.0) == 0.0 and step_wait_seconds(4, t, 0.25) == pytest.approx(0.75 * t / 2)


def test_q6_prime_by_hand() -> None:
    """Eq. Q6' by hand, two customers, H = 10 ms, D = 20 ms, Z = 100 ms: Schweitzer's R_k = D_k / (1 - X D_k / 2)
    with X = 2 / (R_H + R_D + Z). Exact MVA at n = 2 (R_k = D_k (1 + X(1) D_k), X(1) = 1 / 0.13):
    R_H = 0.01 x (1 + 0.01 / 0.13) = 0.010769, R_D = 0.02 x (1 + 0.02 / 0.13) = 0.023077."""
    r_host, r_device = station_responses(2, (0.01, 0.02), 0.1)
    x = 2 / (r_host + r_device + 0.1)
    assert r_host == pytest.approx(0.01 / (1 - x * 0.01 / 2), rel=1e-9)
    assert r_device == pytest.approx(0.02 / (1 - x * 0.02 / 2), rel=1e-9)
    assert (r_host, r_device) == pytest.approx((0.010769, 0.023077), rel=0.02)  # Schweitzer within 2 % of exact here
    assert exact_mva_stations(2, (0.01, 0.02), 0.1) == pytest.approx((0.010769, 0.023077), rel=1e-4)
    assert station_responses(1, (0.01, 0.02), 0.1) == pytest.approx((0.01, 0.02))  # alone: its own demands
    assert station_responses(5, (0.0, 0.02), 0.0) == pytest.approx((0.0, 0.1))  # one station, no think: C D
    assert station_responses(5, (0.0, 0.02), 0.3)[1] == pytest.approx(interactive_response_seconds(5, 0.02, 0.3))


@pytest.mark.parametrize("customers, demands, think", [
    # the L4 sweep's shape (H 22.5 ms, D 4.5 ms, Z ~ 128 steps of ~ 7 ms), at 2..32 requests: the server's knee
    (2, (0.0225, 0.0045), 0.9), (8, (0.0225, 0.0045), 0.9), (16, (0.0225, 0.0045), 0.95),
    (32, (0.0225, 0.0045), 1.0), (48, (0.0225, 0.03), 1.6), (200, (0.01, 0.002), 1.0), (8, (0.02, 0.02), 0.0)])
def test_q6_prime_is_near_the_exact_mean_value_analysis(customers: int, demands: tuple[float, float],
                                                       think: float) -> None:
    """Eq. Q6' (Schweitzer, two queueing stations) against the exact MVA of the same network: each station's residence
    within 20 % (the approximation errs most at the knee), the TTFT's sum R_H + R_D within 15 %."""
    approx, exact = station_responses(customers, demands, think), exact_mva_stations(customers, demands, think)
    for a, e in zip(approx, exact, strict=True):
        assert a == pytest.approx(e, rel=0.20), (approx, exact)
    assert sum(approx) == pytest.approx(sum(exact), rel=0.15)


def test_the_server_queue_slows_the_loaded_server() -> None:
    """Eq. Q6' with H a queue, against H as a pure delay (the earlier Q9a): at 32 requests of the L4 sweep's shape the
    server's busy share X H nears 1 and its residence R_H grows several-fold over H; at 2 requests it is near H."""
    d, t, n, h = 0.0045, 0.006, 128, 0.0225
    busy = loaded_serving(32, d, t, n, None, host_seconds=h)
    light = loaded_serving(2, d, t, n, None, host_seconds=h)
    assert busy["api_server_busy"] > 0.7 and busy["api_server_seconds"] > 2 * h
    assert light["api_server_seconds"] < 1.1 * h
    assert busy["api_server_busy"] == pytest.approx(busy["requests_per_second"] * h, rel=1e-9)
    assert busy["requests_per_second"] < 1 / h  # one process serves at most 1 / H requests a second


def test_a_prefill_only_service_queues_too() -> None:
    """N = 0 (a prefill-only service): no decode, no step to wait for; the C requests cycle through the server and
    the prefill, so the TTFT is the cycle C / X, and saturated (C D >> H) R_D -> C D - R_H."""
    c, d, h = 64, 0.05, 0.002
    s = loaded_serving(c, d, 0.0, 0, None, host_seconds=h)
    assert s["step_seconds"] == 0.0 and s["step_wait_seconds"] == 0.0
    assert s["ttft_seconds"] == pytest.approx(s["request_seconds"], rel=1e-9)
    assert s["device_ttft_seconds"] == pytest.approx(c * d - s["api_server_seconds"], rel=1e-3)
    assert loaded_serving(1, d, 0.0, 0, None, host_seconds=h)["ttft_seconds"] == pytest.approx(d + h)
    b = burst_serving(c, c * d, 2, 0.0, 0, host_seconds=h)
    assert b["request_seconds"] == pytest.approx(c * h + c * d)  # no step to wait for, no decode


def test_q8_a_prompt_ends_with_its_last_chunk() -> None:
    """Q8 with the prompts' lengths: a prompt's first token comes after the step holding its last token. One 3,840-token
    prompt in chunks of 2,048 ends with the round's second (last) step: its whole prefill, not 3/4 of it; 4 prompts of
    256 tokens in one 2,048-token step all wait for it; 4 prompts of 1,024 in 2 steps end in steps 1, 1, 2, 2."""
    alone = burst_serving(1, 7.0, 2, 0.05, 10, 0.02, (3840, 2048))
    assert alone["ttft_seconds"] == pytest.approx(0.02 + 7.0)
    assert burst_serving(4, 0.1, 1, 0.02, 10, 0.0, (256, 2048))["ttft_seconds"] == pytest.approx(0.02 + 0.1)
    assert burst_serving(4, 0.4, 2, 0.02, 10, 0.0, (1024, 2048))["ttft_seconds"] == pytest.approx(
        0.02 + 0.4 * 1.5 / 2)
