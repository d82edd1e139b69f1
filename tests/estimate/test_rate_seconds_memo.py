"""fit.py ``rate_seconds`` (a layout's mean request seconds at a per-replica rate, eq. Q10 with eq. Q13's wait) is
memoized on the speed estimate and the X(k) grid themselves: a hit answers only the same objects at the same rate,
engine and chunk, and ``clear_caches`` empties the memo (a cold benchmark must not read it)."""

from __future__ import annotations

import math

from llmsizer.estimate import fit as F
from llmsizer.estimate.caches import clear_caches
from llmsizer.estimate.fit import fit, rate_seconds


def _ranked() -> list[tuple[tuple, tuple]]:
    """The memo's entries after a fit whose layouts (TP 1, 2, 4 on 4 devices) were ranked at 8 requests/s."""
    clear_caches()
    r = fit("llama-3.1-8b", "h100-sxm", 4, engine="vllm", context=4096, output_tokens=512, request_rate=8)
    assert r.fits
    return list(F._RATE_SECONDS_MEMO.items())


def test_a_layout_ranked_at_a_rate_fills_the_memo_and_clear_caches_empties_it() -> None:
    assert len(_ranked()) >= 3  # each of the three layouts at least once
    clear_caches()
    assert not F._RATE_SECONDS_MEMO


def test_a_hit_is_the_same_question_only() -> None:
    (_, engine, rate, chunk, _), (sp, grid, seconds) = next(
        (k, v) for k, v in _ranked() if math.isfinite(v[2]) and v[1] is not None)
    clear_caches()
    assert rate_seconds(sp, engine, rate, chunk, grid) == seconds  # recomputed cold: the hit was this question's
    slower = rate_seconds(sp, engine, rate * 1.5, chunk, grid)
    assert slower > seconds  # the rate is in the key: more arrivals, more waiting (or past capacity: inf)
