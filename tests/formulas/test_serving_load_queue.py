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
)


def exact_mva(customers: int, demand: float, think: float) -> float:
    """Exact MVA of one queue + one delay: R(n) = D (1 + Q(n - 1)), X(n) = n / (R(n) + Z), Q(n) = X(n) R(n)."""
    q = 0.0
    r = demand
    for n in range(1, customers + 1):
        r = demand * (1 + q)
        q = n / (r + think) * r
    return r


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
    """C >= 2: the TTFT adds H and half a running step (the mean residual of back-to-back steps of one length) to
    Q6's R, computed with H and that wait in the think time; a burst's j-th request waits j H (mean (C + 1) / 2 H)
    and at most one whole step. Little's law holds with them."""
    c, d, t, n, h = 16, 0.03, 0.02, 100, 0.025
    s = loaded_serving(c, d, t, n, None, host_seconds=h)
    step = s["step_seconds"]
    assert s["step_wait_seconds"] == pytest.approx(step / 2)
    think = n * step + h + step / 2
    assert s["device_ttft_seconds"] == pytest.approx(interactive_response_seconds(c, d, think), rel=1e-6)
    assert s["ttft_seconds"] == pytest.approx(h + step / 2 + s["device_ttft_seconds"], rel=1e-9)
    assert s["request_seconds"] == pytest.approx(c / s["requests_per_second"], rel=1e-9)
    assert s["requests_per_second"] < loaded_serving(c, d, t, n, None)["requests_per_second"]
    b = burst_serving(c, c * d, 1, t, n, host_seconds=h)
    assert b["ttft_seconds"] == pytest.approx(h * (c + 1) / 2 + t + c * d)
    assert b["request_seconds"] == pytest.approx(c * h + t + c * d + (n - 1) * t)
    with pytest.raises(InputError):
        loaded_serving(c, d, t, n, None, host_seconds=-1.0)
