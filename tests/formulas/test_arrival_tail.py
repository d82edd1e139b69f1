"""formulas/arrival_tail.py eq. T1: the slots that leave at most 1 - q of Poisson arrivals waiting, from the M/G/inf
occupancy (Poisson of the mean in flight; Kleinrock 1975 vol. 1 sec. 3.8). Checked against the Poisson sums done by
hand and, for the normal approximation, against the exact sum in log space."""

from __future__ import annotations

import math

import pytest

from llmsizer.errors import InputError
from llmsizer.formulas.arrival_tail import EXACT_MEAN_LIMIT, poisson_quantile, slots_for_tail


def test_review_case_mean_2_7() -> None:
    """Mean 2.7 in flight: P(N <= k) = e^-2.7 (1, 3.7, 7.345, 10.63, 13.95, 15.74, 16.55, 16.86) = 0.067, 0.249,
    0.494, 0.714, 0.863, 0.943, 0.979, 0.993 for k = 0..7: the 99 % quantile is 7, so 8 slots leave an arrival
    waiting with P(N >= 8) = 0.7 %, while ceil(2.7) = 3 slots leave it waiting with P(N >= 3) = 51 %."""
    assert poisson_quantile(2.7, 0.99) == 7
    assert slots_for_tail(2.7, 0.99) == 8
    assert poisson_quantile(2.7, 0.5) == 3  # the median: P(N <= 2) = 0.494 < 0.5 <= P(N <= 3) = 0.714


def test_no_one_in_flight_needs_one_slot() -> None:
    assert poisson_quantile(0.0, 0.99) == 0
    assert slots_for_tail(0.0, 0.99) == 1


def _exact_quantile(mean: float, q: float) -> int:
    """The Poisson quantile summed in log space (log pmf = k ln m - m - ln k!), independent of eq. T1's code."""
    total, k = 0.0, 0
    while True:
        total += math.exp(k * math.log(mean) - mean - math.lgamma(k + 1))
        if total >= q:
            return k
        k += 1


@pytest.mark.parametrize("mean", [EXACT_MEAN_LIMIT + 1, 1000.0, 12345.6])
@pytest.mark.parametrize("q", [0.9, 0.99])
def test_normal_approximation_within_one_of_the_exact_sum(mean: float, q: float) -> None:
    assert abs(poisson_quantile(mean, q) - _exact_quantile(mean, q)) <= 1


@pytest.mark.parametrize("mean, q", [(-1.0, 0.99), (math.inf, 0.99), (3.0, 1.0), (3.0, 0.0)])
def test_bad_input(mean: float, q: float) -> None:
    with pytest.raises(InputError):
        poisson_quantile(mean, q)
