"""The "largest value that fits" search: the one bisection every reverse question runs (``infer --max-context`` /
``--max-concurrency``: inference/reverse.py; ``train --max-batch`` / ``--max-seq``: training/reverse.py; llama.cpp's
auto-fit, its layers per GPU, context and experts kept on the CPU: llamacpp_fit.py). Each caller keeps its own
"fits" predicate (the estimate's verdict at its chosen end of the range, a GPU's target) and its own edges (whether
the lowest value is asked, the step of its values); this module holds only the search over whole numbers.

The predicate must be monotone: true up to some value and false after it (memory is non-decreasing in context,
concurrency, micro-batch, sequence length and layers on a GPU). Then bisection finds in O(log n) calls the value a
linear scan from the low end would (tests/estimate/test_search.py compares the two on random monotone predicates).
"""

from __future__ import annotations

from collections.abc import Callable


def largest_true(ok: Callable[[int], bool], lo: int, hi: int, *, hi_first: bool = False) -> int:
    """The largest k in [lo, hi] with ``ok(k)``, ``ok`` true up to some k and false after. ``ok(lo)`` is taken as
    true and never asked (a caller whose lowest value may fail asks it first); ``lo`` when no larger k is true, or
    when ``hi < lo``. ``hi_first``: ask ``ok(hi)`` before bisecting (one call when everything fits, the usual
    answer of llama.cpp's auto-fit); the same answer either way."""
    if hi_first:
        if ok(hi):
            return hi
        hi -= 1
    while lo < hi:  # ok(lo) holds; the answer is in [lo, hi]
        mid = (lo + hi + 1) // 2
        if ok(mid):
            lo = mid
        else:
            hi = mid - 1
    return lo


def smallest_true(ok: Callable[[int], bool], lo: int, hi: int) -> int:
    """The smallest k in [lo, hi] with ``ok(k)``, ``ok`` false up to some k and true after. ``ok(hi)`` is taken as
    true and never asked; ``hi`` when no smaller k is true. The mirror of :func:`largest_true`: one past the largest
    k in [lo - 1, hi - 1] where ``ok`` is false."""
    return largest_true(lambda k: not ok(k), lo - 1, hi - 1) + 1
