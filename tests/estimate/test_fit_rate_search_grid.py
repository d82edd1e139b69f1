"""fit at a request rate with no tensor-parallel degree given answers what a brute force over the pinned answers
gives: for each degree that divides the devices, ``fit --tp t --request-rate R``; of those that fit, the one with
the least mean request seconds (a tie to the smaller degree: the rule at a rate, fit.py ``rate_layout_why``), its
answer whole (layout, requests in flight, request seconds); where every layout refuses the rate, the refusal on the
one whose capacity is the most (a tie to the smaller degree), that capacity stated; where no layout carries any
rate (every capacity 0 or unknown: the memory fits on none), the layout ``fit`` takes without a rate, which where
no pinned rate-less ``fit --tp t`` fits is the largest degree (the least memory per device: review30 D1, 405B on
aws-p5.48xlarge and 70B on 2 x L40S at 1 request/s answered TP 1, the furthest from fitting). The truth is the pinned answers,
each run on its own, never the unpinned search's ranking (probe22 D4: 8 x H100 at 50 requests/s answered DOES NOT
FIT [TP 8] while TP 1 x 8 pinned fits; 1024 x H100 at 1e7 requests/s was refused on TP 8, 4.46e3 requests/s, where
TP 1 carries 6.94e3)."""

from __future__ import annotations

import math

import pytest

from llmsizer.errors import InputError
from llmsizer.estimate.fit import fit

GRID = [  # (model, device, counts, rates, engine): rates below, near and past what the small layouts carry
    ("llama-3.1-8b", "h100-sxm", (2, 8), (5.0, 50.0, 120.0, 1e4), None),
    ("llama-3.1-8b", "h100-sxm", (1024,), (1e7,), None),
    ("llama-3.1-8b", "h100-sxm", (8,), (20.0, 60.0), "sglang"),
    ("llama-3.1-8b", "l40s", (4,), (2.0, 20.0), None),
    ("qwen3-0.6b", "a100-sxm-80gb", (2, 4), (30.0, 150.0), None),
    ("llama-3.1-70b", "h100-sxm", (4, 8), (1.0, 8.0), None),
    ("llama-3.1-70b", "h200", (8,), (4.0, 30.0), "sglang"),
    ("llama-3.1-405b", "aws-p5.48xlarge", (None,), (1.0,), None),  # fits on no layout (review30 D1)
    ("llama-3.1-70b", "l40s", (2,), (1.0,), None),  # fits on no layout (review30 D1)
]
# an instance brings its own devices (count None): AWS's p5.48xlarge is 8 x H100 (aws.amazon.com/ec2/instance-types/p5)
DEVICES = {"aws-p5.48xlarge": 8}
CASES = [(m, d, n, r, e) for m, d, ns, rs, e in GRID for n in ns for r in rs]


def _seconds(r) -> float:
    load = r.speed.load if r.speed is not None else None
    return float(load["request_seconds"]) if r.fits and load and "request_seconds" in load else math.inf


@pytest.mark.parametrize(("model", "device", "count", "rate", "engine"), CASES)
def test_unpinned_rate_fit_is_the_best_pinned(model: str, device: str, count: int | None, rate: float,
                                              engine: str | None) -> None:
    pinned = {}
    n = count or DEVICES[device]
    for t in (t for t in range(1, n + 1) if n % t == 0):
        try:
            pinned[t] = fit(model, device, count, tensor_parallel=t, request_rate=rate, fits_at=False,
                           engine=engine)
        except InputError:  # a degree the model's heads do not divide: not a layout
            continue
    carried = {t: _seconds(r) for t, r in pinned.items() if math.isfinite(_seconds(r))}
    got = fit(model, device, count, request_rate=rate, fits_at=False, engine=engine)
    if not carried:  # refused on every layout: on the one that carries the most
        caps = {t: r.details.get("rate_capacity") for t, r in pinned.items()}
        if not any(c is not None and c > 0 for c in caps.values()):  # carries no rate on any layout
            free = {t: fit(model, device, count, tensor_parallel=t, fits_at=False, engine=engine) for t in pinned}
            assert not any(r.fits for r in free.values())  # (the grid's such cases: the memory fits on none)
            least = max(free)  # fit's rule where none fits: the largest degree, the least memory per device
            assert min(free, key=lambda t: free[t].memory_per_device) == least
            assert not got.fits and got.tensor_parallel == least, (got.tensor_parallel, caps)
            assert got.reasons == pinned[least].reasons
            return
        most = max(caps, key=lambda t: (-1.0 if caps[t] is None else caps[t], -t))
        assert not got.fits and got.tensor_parallel == most, (got.tensor_parallel, caps)
        assert got.details.get("rate_capacity") == caps[most]
        assert got.reasons == pinned[most].reasons
        return
    best = min(carried, key=lambda t: (carried[t], t))
    assert got.fits and got.tensor_parallel == best, (got.tensor_parallel, carried)
    want = pinned[best]
    assert got.replicas == want.replicas
    assert got.details["concurrency"] == want.details["concurrency"]
    assert _seconds(got) == pytest.approx(_seconds(want), rel=1e-12)
    assert got.speed.load["ttft_seconds"] == pytest.approx(want.speed.load["ttft_seconds"], rel=1e-12)
