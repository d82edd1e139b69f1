"""The calibrated bands of estimate/ranges.py, re-derived from the repository's validation rows, and their
coverage: at least 90 % of the summarised rows of each kind and engine inside [low, high].

When a prediction changes, the bands move with it: this test then prints the lines to paste into
estimate/ranges.py (and `llmsizer validate --markdown docs/accuracy.md` republishes the coverage).
"""

from __future__ import annotations

import math

import pytest

from llmsizer.estimate import ranges as R
from llmsizer.validation_cases import band_rows, coverage, repo_cases


@pytest.fixture(scope="module")
def cases():
    return repo_cases()


def test_bands_follow_from_the_rows(cases) -> None:
    derived = {}
    for (kind, engine), rows in sorted(band_rows(cases).items()):
        lo, hi = R.band([c.measured / c.predicted for c in rows])
        # stated to 4 decimals, rounded outwards so that the rows at the ends stay inside
        derived[(kind, engine)] = (math.floor(lo * 1e4) / 1e4, math.ceil(hi * 1e4) / 1e4, len(rows))
    stated = {k: (b.low, b.high, b.rows) for k, b in R.BANDS.items()}
    lines = "\n".join(f"_add({k!r}, {e!r}, {lo:.4f}, {hi:.4f}, {n})" for (k, e), (lo, hi, n) in derived.items())
    assert stated == derived, "re-derive estimate/ranges.py BANDS (scripts/rederive_bands.py):\n" + lines


def test_coverage_is_at_least_90_percent_per_kind_and_engine(cases) -> None:
    for c in coverage(cases):
        assert c.low is not None, (c.kind, c.engine)
        assert c.inside >= 0.9 * c.rows, (c.kind, c.engine, c.inside, c.rows)


def test_band_drops_at_most_5_percent_each_side() -> None:
    xs = [float(i) for i in range(1, 41)]  # 40 ratios: 2 dropped each side
    assert R.band(xs) == (3.0, 38.0)
    assert R.band([2.0, 1.0, 3.0]) == (1.0, 3.0)  # fewer than 20: the full span
    assert R.calibrated_range("decode throughput", "llama.cpp", 100.0) is not None
    assert R.calibrated_range("decode throughput", "no such engine", 100.0) is None
