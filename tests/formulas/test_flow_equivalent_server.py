"""formulas/serving_queue.py eq. Q13: the wait for admission at a load-dependent (flow-equivalent) server. Checked
against textbook truth: with X(k) = k / T for k <= c the chain is M/M/c (Erlang C: M/M/2 at a = 1 waits a third of
the time; the direct sum of Kleinrock 1975 vol. 1 sec. 3.5 in logarithms for larger c), with X constant it is M/M/1
(L = rho / (1 - rho), P[N >= c] = rho^c, Kleinrock sec. 3.2), and a two-rate chain summed by hand; the grid of X and
its straight lines (samples kept, a line reproduced exactly, the order kept)."""

from __future__ import annotations

import math

import pytest

from llmsizer.errors import InputError
from llmsizer.formulas.serving_queue import (
    OverCapacityError,
    admission_grid,
    grid_throughputs,
    load_dependent_queue,
)


def _erlang_c_direct(c: int, a: float) -> float:
    """P[queueing] of M/M/c: (a^c / c!) (c / (c - a)) / (sum_{k<c} a^k / k! + (a^c / c!) (c / (c - a))), in logs."""
    logs = [k * math.log(a) - math.lgamma(k + 1) for k in range(c)]
    tail = c * math.log(a) - math.lgamma(c + 1) + math.log(c / (c - a))
    top = max([*logs, tail])
    last = math.exp(tail - top)
    return last / (sum(math.exp(x - top) for x in logs) + last)


def test_two_servers_at_one_erlang_is_erlang_c() -> None:
    """X(k) = k / T, c = 2, lambda T = 1 (rho = 1/2): M/M/2, P[queueing] = 2 rho^2 / (1 + rho) = 1/3,
    L_q = 2 rho^3 / (1 - rho^2) = 1/3, so W_q = 1/3 s at lambda = 1 and L = 2 rho / (1 - rho^2) = 4/3."""
    q = load_dependent_queue(1.0, [1.0, 2.0])
    assert q["wait_probability"] == pytest.approx(1 / 3)
    assert q["wait_seconds"] == pytest.approx(1 / 3)
    assert q["in_flight"] == pytest.approx(4 / 3)
    assert q["in_service"] == pytest.approx(1.0)  # = a: the servers' mean busy count


@pytest.mark.parametrize("c, a", [(3, 2.5), (10, 8.0), (51, 40.0), (51, 50.5), (1024, 1000.0), (4096, 100.0)])
def test_linear_throughput_is_m_m_c(c: int, a: float) -> None:
    """X(k) = k / T for k <= c: the chain's P[wait] is Erlang C and W_q = C T / (c - a) (Kleinrock sec. 3.5)."""
    service = 2.0
    q = load_dependent_queue(a / service, [k / service for k in range(1, c + 1)])
    p = _erlang_c_direct(c, a)
    assert q["wait_probability"] == pytest.approx(p, rel=1e-9)
    assert q["wait_seconds"] == pytest.approx(p * service / (c - a), rel=1e-9)


@pytest.mark.parametrize("rho, c", [(0.1, 1), (0.5, 1), (0.5, 5), (0.9, 3), (0.99, 10)])
def test_constant_throughput_is_m_m_1(rho: float, c: int) -> None:
    """X(k) = mu at every k: one server whatever c (M/M/1): L = rho / (1 - rho), P[N >= c] = rho^c, and the mean
    waiting sum_{k>c} (k - c) rho^k (1 - rho) = rho^(c+1) / (1 - rho)."""
    q = load_dependent_queue(rho * 3.0, [3.0] * c)
    assert q["in_flight"] == pytest.approx(rho / (1 - rho), rel=1e-9)
    assert q["wait_probability"] == pytest.approx(rho**c, rel=1e-9)
    assert q["waiting"] == pytest.approx(rho ** (c + 1) / (1 - rho), rel=1e-9)


def test_a_two_rate_chain_summed_by_hand() -> None:
    """c = 2, X(1) = 1, X(2) = 4, lambda = 2: p_1 = 2 p_0, p_2 = (2 / 1)(2 / 4) p_0 = p_0, past 2 a ratio of 1/2:
    sum = p_0 (1 + 2 + 1 / (1 - 1/2)) = 5 p_0, P[wait] = 2/5, L_q = p_2 (1/2) / (1/2)^2 = 2 p_0 = 2/5, W_q = 1/5 s.
    M/M/2 with each slot held T(2) = 2 / X(2) = 1/2 s (a = 1) waits 1/3 of the time: less, since at one present
    the chain serves at 1/s, not 2/s."""
    q = load_dependent_queue(2.0, [1.0, 4.0])
    assert q["wait_probability"] == pytest.approx(2 / 5)
    assert q["waiting"] == pytest.approx(2 / 5)
    assert q["wait_seconds"] == pytest.approx(1 / 5)


def test_no_steady_state_at_or_above_x_c() -> None:
    """lambda >= X(c): the queue grows without bound; the refusal names X(c)."""
    with pytest.raises(OverCapacityError, match=r"4 admitted sequences serve, 10 requests/s") as e:
        load_dependent_queue(10.0, [4.0, 7.0, 9.0, 10.0])
    assert e.value.capacity == pytest.approx(10.0)
    with pytest.raises(InputError):
        load_dependent_queue(1.0, [])


def test_the_grid_and_its_lines() -> None:
    """Every k up to 8 servers, else doubling and c; between samples a straight line: a linear X is reproduced at
    every k, a rising X stays rising, and each sample is kept."""
    assert admission_grid(4) == (1, 2, 3, 4)
    assert admission_grid(51) == (1, 2, 4, 8, 16, 32, 51)
    assert admission_grid(64) == (1, 2, 4, 8, 16, 32, 64)
    assert grid_throughputs({k: 0.5 * k for k in admission_grid(51)}, 51) == pytest.approx([0.5 * k for k in range(1, 52)])
    concave = {k: math.sqrt(k) for k in admission_grid(100)}
    xs = grid_throughputs(concave, 100)
    assert len(xs) == 100 and all(b > a for a, b in zip(xs, xs[1:], strict=False))
    assert all(xs[k - 1] == concave[k] for k in concave)
    with pytest.raises(InputError):
        grid_throughputs({1: 1.0}, 2)
