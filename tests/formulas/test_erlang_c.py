"""formulas/serving_queue.py eq. Q12: Erlang C (the M/M/c queue; the upper bound of eq. Q13's wait for admission). Checked against the textbook closed
form of the M/M/2 queue, against M/M/1 (c = 1: Erlang C is the utilisation), and against the direct sum of the
stationary distribution (Kleinrock 1975, vol. 1 sec. 3.5: p_0 and P[queueing]), evaluated here in logarithms so
that it stays exact where the factorials overflow."""

from __future__ import annotations

import math

import pytest

from llmsizer.errors import InputError
from llmsizer.formulas.serving_queue import erlang_c


def _direct(c: int, a: float) -> float:
    """P[queueing] = (a^c / c!) (c / (c - a)) / (sum_{k<c} a^k / k! + (a^c / c!) (c / (c - a))), in log space."""
    logs = [k * math.log(a) - math.lgamma(k + 1) for k in range(c)]
    tail = c * math.log(a) - math.lgamma(c + 1) + math.log(c / (c - a))
    top = max([*logs, tail])
    head = sum(math.exp(x - top) for x in logs)
    last = math.exp(tail - top)
    return last / (head + last)


def test_two_servers_at_one_erlang_wait_a_third_of_the_time() -> None:
    """M/M/2 at a = 1 (rho = 1/2): p_0 = (1 - rho) / (1 + rho) = 1/3 and P[queueing] = 2 rho^2 / (1 + rho) = 1/3;
    L_q = 2 rho^3 / (1 - rho^2) = 1/3, so at lambda = 1, T = 1 the mean wait L_q / lambda = 1/3 s."""
    assert erlang_c(2, 1.0) == pytest.approx(1 / 3)


@pytest.mark.parametrize("rho", [0.1, 0.5, 0.9, 0.99])
def test_one_server_is_m_m_1(rho: float) -> None:
    """c = 1: an arrival waits when the server is busy, P = rho, and W_q = rho T / (1 - rho) (M/M/1)."""
    assert erlang_c(1, rho) == pytest.approx(rho)


@pytest.mark.parametrize("c, a", [(3, 2.5), (10, 8.0), (51, 40.0), (51, 50.5), (1024, 1000.0), (4096, 100.0)])
def test_the_recursion_matches_the_direct_sum(c: int, a: float) -> None:
    assert erlang_c(c, a) == pytest.approx(_direct(c, a), rel=1e-9)


def test_no_steady_state_at_or_above_c() -> None:
    """a >= c: no steady state, refused."""
    with pytest.raises(InputError):
        erlang_c(4, 4.0)
    with pytest.raises(InputError):
        erlang_c(0, 0.5)
