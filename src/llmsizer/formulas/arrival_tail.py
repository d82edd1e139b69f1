"""The tail of the requests in flight under random arrivals: how many slots keep all but a stated share of arrivals
from waiting.

Requests arriving as a Poisson process at rate lambda, each holding a slot for a time of mean R (any distribution),
are an M/G/inf system while slots are free: the number in flight is Poisson with mean m = lambda R (Kleinrock 1975,
"Queueing Systems" vol. 1 sec. 3.8 / Harchol-Balter 2013 "Performance Modeling and Design of Computer Systems" sec.
27.2: the M/G/inf occupancy is Poisson(lambda E[S]), insensitive to the service distribution). With c slots an
arrival finds them all busy about as often as N >= c (PASTA, Wolff 1982); the slots for a tail q are the least c
with P(N <= c - 1) >= q, i.e. one more than the q-quantile of Poisson(m) (Erlang's loss system, whose blocking
E(c, m) is below P(N >= c), bounds the same event from below):

    c_q(m) = 1 + min{k : sum_{j<=k} e^-m m^j / j! >= q}                                                  (T1)

(m > 400: the Cornish-Fisher normal approximation k = ceil(m + z_q sqrt(m) + (z_q^2 - 1) / 6 - 1/2) of the Poisson
quantile, within one of the exact sum there.)
"""

from __future__ import annotations

import math
from statistics import NormalDist

from ..errors import InputError

EXACT_MEAN_LIMIT = 400.0  # above it eq. (T1)'s sum is replaced by its normal approximation (e^-m underflows ~745)


def poisson_quantile(mean: float, q: float) -> int:
    """The least k >= 0 with P(N <= k) >= ``q`` for N ~ Poisson(``mean``)."""
    if not (mean >= 0 and math.isfinite(mean)) or not 0 < q < 1:
        raise InputError("mean must be >= 0 and finite, q in (0, 1)")
    if mean > EXACT_MEAN_LIMIT:
        z = NormalDist().inv_cdf(q)
        return max(0, math.ceil(mean + z * math.sqrt(mean) + (z * z - 1) / 6 - 0.5))
    term = math.exp(-mean)
    total, k = term, 0
    while total < q:
        k += 1
        term *= mean / k
        total += term
    return k


def slots_for_tail(mean_in_flight: float, q: float) -> int:
    """Eq. (T1): the slots that leave an arrival waiting for one with probability at most about 1 - ``q`` when the
    requests in flight are Poisson of mean ``mean_in_flight`` (at least one slot)."""
    return max(1, poisson_quantile(mean_in_flight, q) + 1)
