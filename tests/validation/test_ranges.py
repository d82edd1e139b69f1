"""The calibrated bands of estimate/ranges.py, re-derived from the repository's validation rows, and their
coverage: at least 90 % of the summarised rows of each kind and engine inside [low, high].

When a prediction changes, the bands move with it: this test then prints the lines to paste into
estimate/ranges.py (and `llmsizer validate --markdown docs/accuracy.md` republishes the coverage).
"""

from __future__ import annotations

import math
import random

import pytest

from llmsizer.estimate import ranges as R
from llmsizer.validation_cases import DECODE, VLLM, band_keys, band_rows, coverage, repo_cases


@pytest.fixture(scope="module")
def cases():
    return repo_cases()


def test_bands_follow_from_the_rows(cases) -> None:
    derived = {}
    for (kind, engine), rows in sorted(band_rows(cases).items()):
        lo, hi = R.stated(*R.band([c.measured / c.predicted for c in rows]))
        devices = tuple(sorted({c.device for c in rows})) if all(c.device for c in rows) else ()
        derived[(kind, engine)] = (lo, hi, len(rows), devices)
    stated = {k: (b.low, b.high, b.rows, b.devices) for k, b in R.BANDS.items()}
    lines = "\n".join(f"_add({k!r}, {e!r}, {lo:.4f}, {hi:.4f}, {n}, {d!r})"
                      for (k, e), (lo, hi, n, d) in derived.items())
    assert stated == derived, ("stale bands: run `PYTHONPATH=src python scripts/gen_docs.py` (it runs "
                               "scripts/rederive_bands.py and regenerates docs/accuracy.md):\n" + lines)


def test_coverage_is_at_least_90_percent_per_kind_and_engine(cases) -> None:
    for c in coverage(cases):
        assert c.low is not None, (c.kind, c.engine)
        assert c.inside >= 0.9 * c.rows, (c.kind, c.engine, c.inside, c.rows)


def test_leave_one_out_coverage_is_at_least_90_percent_where_rows_allow_it(cases) -> None:
    """Out of sample: with 20 or more rows (each left-out row judged by a band of >= 19 others, the conformal
    rule) at least 90 % of the rows fall inside the band of the other rows, per kind and engine."""
    for c in coverage(cases):
        if c.rows >= 20:
            assert c.inside_loo >= 0.9 * c.rows, (c.kind, c.engine, c.inside_loo, c.rows)


def test_a_single_row_gives_no_band(cases) -> None:
    """One summarised row of a kind and band has no spread to calibrate: no band of its own, rather than one of zero
    width that claims 90 % coverage (VS06 alone); a release scope without rows (vLLM 0.8-0.13) takes the pooled
    serving band, named."""
    vs06 = [c for c in cases if c.id == "VS06"]
    assert len(vs06) == 1 and not vs06[0].excluded and band_keys(vs06[0]) == ("vllm >= 0.14", R.SERVING_POOLED)
    assert band_rows(vs06) == {}
    assert R.band_for(DECODE, "vllm 0.8-0.13") is None
    b, why = R.serving_band(DECODE, VLLM, "0.13", "a100-sxm-40gb")
    assert b is R.band_for(DECODE, R.SERVING_POOLED) and b is not None and R.SERVING_POOLED in why


def test_band_is_the_conformal_order_statistic() -> None:
    xs = [float(i) for i in range(1, 41)]  # 40 ratios: d = floor(0.05 x 41) = 2, the 2nd from each end
    assert R.band(xs) == (2.0, 39.0)
    xs = [float(i) for i in range(1, 172)]  # 171 ratios: d = 8 (the old rule kept the 9th: 89 % out of sample)
    assert R.band(xs) == (8.0, 164.0)
    assert R.band([float(i) for i in range(1, 20)]) == (1.0, 19.0)  # 19 rows: d = 1, the full span
    assert R.calibrated_range("decode throughput", "llama.cpp", 100.0) is not None
    assert R.calibrated_range("decode throughput", "no such engine", 100.0) is None


def test_small_samples_get_the_log_normal_prediction_interval() -> None:
    # 3 ratios: mean of logs 0, s = 0.1 exactly (logs -0.1, 0, 0.1), t(0.95, 2) = 2.920
    xs = [math.exp(-0.1), 1.0, math.exp(0.1)]
    lo, hi = R.band(xs)
    w = 2.920 * 0.1 * math.sqrt(1 + 1 / 3)
    assert lo == pytest.approx(math.exp(-w)) and hi == pytest.approx(math.exp(w))
    assert R.band([1.0, 1.0]) == (1.0, 1.0)  # no spread: the rows' span


def test_coverage_holds_on_fresh_draws() -> None:
    """Independent of our rows: bands from n exchangeable draws cover a fresh draw >= 90 % of the time (log-normal
    draws, where the small-n interval is exact, and heavy-tailed ones for the conformal rule)."""
    rng = random.Random(12)
    for n, draw in ((8, lambda: math.exp(rng.gauss(0, 0.2))), (30, lambda: math.exp(rng.gauss(0, 0.2))),
                    (60, lambda: math.exp(0.2 * rng.paretovariate(1.5) * rng.choice((-1, 1))))):
        hits = 0
        trials = 3000
        for _ in range(trials):
            lo, hi = R.band([draw() for _ in range(n)])
            hits += lo <= draw() <= hi
        assert hits / trials >= 0.885, (n, hits / trials)  # 90 % less 3 standard errors of 3000 trials
