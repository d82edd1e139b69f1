"""formulas/serving_queue.py eq. Q14: a closed burst of N requests through c admitted slots. Checked against an
independent event simulation of the two patterns: a first-come-first-served slot pool whose requests each hold a
slot a fixed time (continuous admission, Q14a: the slots hand over one completion every 1 / X apart when X = c / T)
and lockstep waves (Q14b: the j-th group of c starts at j rounds), each request's wait read off the simulated clock."""

from __future__ import annotations

import heapq

import pytest

from llmsizer.errors import InputError
from llmsizer.formulas.serving_queue import burst_admission_wait, burst_waves


def _fcfs_wait(n: int, c: int, hold: float, stagger: bool) -> float:
    """The mean wait of n requests sent at once to c slots, first come first served. The first c run at once; their
    slots come free (``stagger``) one every hold / c, as in the steady state of a closed load of c requests (one
    completion every 1 / X), or (lockstep) all after one ``hold``. Each later request takes the first free slot and
    holds it ``hold``."""
    free = [(k + 1) * hold / c if stagger else hold for k in range(c)]
    heapq.heapify(free)
    waits = [0.0] * min(n, c)
    for _ in range(c, n):
        start = heapq.heappop(free)
        waits.append(start)
        heapq.heappush(free, start + hold)
    return sum(waits) / n


@pytest.mark.parametrize(("n", "c"), [(1, 1), (10, 10), (11, 10), (500, 59), (100, 7), (1000, 1000), (37, 4)])
def test_q14a_is_the_staggered_slot_pool(n: int, c: int) -> None:
    """Continuous admission: completions X = c / T per second, one every T / c once the slots are staggered."""
    hold = 2.5
    expected = _fcfs_wait(n, c, hold, stagger=True)
    assert burst_admission_wait(n, c, c / hold) == pytest.approx(expected, rel=1e-9, abs=1e-12)


@pytest.mark.parametrize(("n", "c"), [(1, 1), (10, 10), (11, 10), (500, 59), (100, 7), (37, 4)])
def test_q14b_is_the_lockstep_slot_pool(n: int, c: int) -> None:
    """Waves in lockstep: the simulated pool with every slot starting together and held one round."""
    rnd = 3.0
    out = burst_waves(n, c, rnd)
    assert out["wait_seconds"] == pytest.approx(_fcfs_wait(n, c, rnd, stagger=False), rel=1e-9, abs=1e-12)
    waves = -(-n // c)
    assert out["waves"] == waves
    assert out["requests_per_second"] == pytest.approx(n / (waves * rnd))


def test_q14_orders_the_patterns() -> None:
    """Lockstep waits at least as long as the staggered pool at the same round (= the hold time)."""
    for n, c in ((500, 59), (100, 7), (2, 1)):
        assert burst_waves(n, c, 1.0)["wait_seconds"] >= burst_admission_wait(n, c, c / 1.0)


def test_q14_refuses_bad_input() -> None:
    with pytest.raises(InputError):
        burst_admission_wait(0, 1, 1.0)
    with pytest.raises(InputError):
        burst_waves(5, 0, 1.0)
