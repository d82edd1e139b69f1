"""formulas/serving_queue.py ``_solve_throughput`` (eq. Q6'): its bisection ends at the first step that leaves
(lo, hi) unchanged. Checked against the plain 64-step bisection written out here (no early end): the same root,
bit for bit, over demands, in-flight counts and think times drawn by hypothesis, including the think time of
``loaded_serving`` (a function of X) and a constant one."""

from __future__ import annotations

from collections.abc import Callable

from hypothesis import given, settings
from hypothesis import strategies as st

from llmsizer.formulas.serving_queue import _solve_throughput, _throughput_bound, loaded_serving


def reference(in_flight: int, demands: tuple[float, ...], think: Callable[[float], float]) -> float:
    """Eq. Q6''s root by 64 bisection steps on [0, the bound), each step run: X (sum_k R_k(X) + Z(X)) vs C."""
    lo, hi = 0.0, _throughput_bound(in_flight, demands)
    for _ in range(64):
        mid = (lo + hi) / 2.0
        cycle: float = 0
        for d in demands:
            cycle += d / (1.0 - mid * d * (in_flight - 1) / in_flight) if d else 0.0
        cycle += think(mid)
        if mid * cycle < in_flight:
            lo = mid
        else:
            hi = mid
    return lo


demand = st.floats(1e-6, 10.0, allow_nan=False, allow_infinity=False)


@settings(max_examples=400, deadline=None)
@given(st.integers(1, 5000), st.lists(st.one_of(st.just(0.0), demand), min_size=1, max_size=3).filter(any),
       st.floats(0.0, 1e4), st.floats(0.0, 50.0))
def test_same_root_as_the_full_bisection(in_flight: int, demands: list[float], think: float, slope: float) -> None:
    """A think time rising with X (Z + slope X) and a constant one: the root of the plain bisection, exactly."""
    ds = tuple(demands)
    for z in (lambda x: think + slope * x, lambda _x: think):
        assert _solve_throughput(in_flight, ds, z) == reference(in_flight, ds, z)


@settings(max_examples=200, deadline=None)
@given(st.integers(1, 4096), st.floats(1e-4, 5.0), st.floats(1e-4, 0.2), st.integers(0, 4096),
       st.floats(0.0, 0.05), st.floats(0.0, 1.0), st.integers(0, 8), st.booleans())
def test_loaded_serving_think(in_flight: int, prefill: float, step: float, out: int, host: float, share: float,
                              carrying: int, mixed: bool) -> None:
    """``loaded_serving``'s own think (Q5's step at the others' prefill share, eq. Q9a's waits): its throughput is
    the full bisection's root on the same stations and think time."""
    r = loaded_serving(in_flight, prefill, step, out, 2 * step if mixed else None, host, carrying, share)
    serial, transit = host * share, host * (1.0 - share)
    others = (in_flight - 1) / in_flight
    decoding = out > 0 and in_flight > 1

    def z(x: float) -> float:  # eq. Q5 / Q9a written out: the think time at throughput x
        if not out:
            return 0.0
        busy = min(x * prefill * others, 1.0 - 1e-12)
        t = step / (1.0 - busy) if not mixed else 1.0 / (busy / max(2 * step, step) + (1.0 - busy) / step)
        wait = (1.0 - busy) * step / 2.0 if decoding else 0.0
        carry = carrying * step if decoding else 0.0
        return out * t + wait + carry + transit
    assert r["requests_per_second"] == reference(in_flight, (serial, prefill), z)
