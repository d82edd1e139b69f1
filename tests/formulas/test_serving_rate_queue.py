"""formulas/serving_queue.py eq. Q10: requests arriving at a rate (a Poisson process), an open network of the API
server's queue, the prefill's queue and the decode delay. Checked against M/M/1 results derived by hand and against
the closed network (eq. Q6') it is the limit of."""

from __future__ import annotations

import math

import pytest

from llmsizer.errors import InputError
from llmsizer.formulas.serving_queue import OverCapacityError, loaded_serving, open_capacity, open_serving

CAPACITY_50 = (r"capacity, 50 requests/s per replica \(1 / max\(prefill [^()]*\), eq\. Q10a\): its queue grows "
               "without bound; lower the rate, add replicas or shorten the prompts$")


def test_prefill_only_is_an_m_m_1_queue() -> None:
    """No output, no server time: one queue of service D at utilisation rho = lambda D. The M/M/1 mean response time
    is D / (1 - rho) (Kleinrock 1975, vol. 1 eq. 3.26: T = (1 / mu) / (1 - rho)); at D = 0.1 s, lambda = 6/s:
    0.1 / 0.4 = 0.25 s, and the mean number in the system rho / (1 - rho) = 1.5."""
    s = open_serving(6.0, 0.1, 0.0, 0, None)
    assert s["ttft_seconds"] == pytest.approx(0.25)
    assert s["in_flight"] == pytest.approx(1.5)
    assert s["prefill_share"] == pytest.approx(0.6)
    assert s["step_wait_seconds"] == s["carry_seconds"] == s["step_seconds"] == 0.0


def test_two_queues_in_tandem_add_their_m_m_1_times() -> None:
    """The server (H = 20 ms) then the prefill (D = 10 ms) at 25/s: 0.02 / 0.5 + 0.01 / 0.75 = 53.33 ms (Jackson
    network: each station its own M/M/1)."""
    s = open_serving(25.0, 0.01, 0.0, 0, None, host_seconds=0.02)
    assert s["ttft_seconds"] == pytest.approx(0.04 + 0.01 / 0.75)
    assert s["api_server_busy"] == pytest.approx(0.5)


def test_decode_delay_waits_and_little() -> None:
    """With output: the step of eq. Q5b at the prefill share (t_d / (1 - u)), the chance p = 1 - exp(-lambda N t)
    that steps are running when a request arrives (M/G/inf), the half step it then waits (of the decode share 1 - u)
    and k carried decode steps; the requests in flight by Little's law."""
    lam, d, td, n, k = 4.0, 0.05, 0.01, 100, 2
    s = open_serving(lam, d, td, n, None, carrying_steps=k)
    u = lam * d
    step = td / (1 - u)
    p = 1 - math.exp(-lam * n * step)
    ttft = d / (1 - u) + p * (1 - u) * td / 2 + p * k * td
    assert s["step_seconds"] == pytest.approx(step)
    assert s["decoding_probability"] == pytest.approx(p)
    assert s["ttft_seconds"] == pytest.approx(ttft)
    assert s["in_flight"] == pytest.approx(lam * (ttft + n * step))
    assert s["requests_per_second"] == lam


def test_a_lone_request_at_a_vanishing_rate_is_the_idle_one() -> None:
    """lambda -> 0: no queue, no running step: TTFT -> H + D."""
    s = open_serving(1e-9, 0.05, 0.01, 100, None, host_seconds=0.02, carrying_steps=3)
    assert s["ttft_seconds"] == pytest.approx(0.07, rel=1e-6)


def test_rates_at_or_above_capacity_are_refused() -> None:
    assert open_capacity(0.01, 0.02) == pytest.approx(50.0)
    with pytest.raises(OverCapacityError, match=CAPACITY_50):  # the parenthesis closed, per replica, the levers
        open_serving(50.0, 0.01, 0.001, 10, None, host_seconds=0.02)
    with pytest.raises(InputError, match="at or above"):
        open_serving(120.0, 0.01, 0.001, 10, None)


@pytest.mark.parametrize("host, prefill, step, busy", [(0.0225, 0.0045, 0.004, 0.8), (0.0, 0.03, 0.02, 0.5),
                                                       (0.01, 0.2, 0.05, 0.9)])
def test_the_closed_network_tends_to_the_open_one(host: float, prefill: float, step: float, busy: float) -> None:
    """Eq. Q10 is eq. Q6''s limit as C -> infinity at X = lambda (Lazowska et al. 1984 sec. 6.4.2's residence
    D / (1 - X D (C - 1) / C) -> D / (1 - X D)): 4,000 customers whose think time (the output) keeps the busiest
    station at ``busy`` give, at the open model's rate X, the same residences, step and time per request."""
    c = 4000
    rate = busy * open_capacity(prefill, host)
    out = round(c / (rate * step))  # Z ~ C / lambda: the closed throughput near ``rate``
    closed = loaded_serving(c, prefill, step, out, None, host, 0)
    opened = open_serving(closed["requests_per_second"], prefill, step, out, None, host, 0)
    for key in ("device_ttft_seconds", "api_server_seconds", "step_seconds", "request_seconds"):
        assert opened[key] == pytest.approx(closed[key], rel=0.01), key
    assert opened["in_flight"] == pytest.approx(c, rel=0.01)  # Little's law gives the closed population back
