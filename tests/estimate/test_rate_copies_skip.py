"""recommend's copies search at a request rate (recommend.py ``_rate_copies``) skips the shares at or above a
past-capacity pick's ``rate_bound`` (eq. Q10a's server capacity, 1 / max(prefill, s H), of every rung on a
one-degree layout) without asking ``pick_format``. The skip must change nothing: every share skipped is one
``pick_format`` itself answers past capacity, and the recommendation is the one the search gives asking every share.
The bound itself is fit's refusal: at the bound fit refuses the rate by the server's capacity, just below it not by
that capacity."""

from __future__ import annotations

import math
from typing import Any

import pytest

import llmsizer.recommend as R
from llmsizer.catalog.models import find
from llmsizer.estimate.fit import fit
from llmsizer.estimate.format_search import FormatPick, pick_format


def _recommend(monkeypatch: pytest.MonkeyPatch, skip: bool) -> tuple[dict[tuple[Any, ...], FormatPick], Any]:
    """The recommendation at 100 requests/s and every pick the copies search asked, keyed by candidate and share."""
    asked: dict[tuple[Any, ...], FormatPick] = {}
    def pick(spec: Any, dev: Any, count: int, inst: Any, mem: Any, **kw: Any) -> FormatPick:
        p = pick_format(spec, dev, count, inst, mem, **kw)
        asked[(dev.id, count, inst.name if inst else None, mem, kw["request_rate"])] = p
        return p

    monkeypatch.setattr(R, "pick_format", pick)
    monkeypatch.setattr(R, "_ROUNDING", 1e-9 if skip else math.inf)  # inf: no share is ever skipped
    rec = R.recommend_inference(find("llama-3.1-8b").spec(), engine="vllm", context=4096, output_tokens=512,
                                request_rate=100)
    return asked, rec


def test_skipped_shares_are_past_capacity_and_the_answer_is_the_same(monkeypatch: pytest.MonkeyPatch) -> None:
    quick, rec = _recommend(monkeypatch, skip=True)
    every, full = _recommend(monkeypatch, skip=False)
    skipped = every.keys() - quick.keys()
    assert quick.keys() <= every.keys()  # the skip asks no share the full search does not
    assert skipped, "no share was skipped: the bound no longer applies to this search"
    assert all(every[k].past_capacity for k in skipped)
    assert rec.to_dict() == full.to_dict()


def test_the_bound_is_fits_server_capacity_refusal() -> None:
    spec = find("llama-3.1-8b").spec()
    kw: dict[str, Any] = dict(engine="vllm", weights="bf16", context=4096, output_tokens=512, fits_at=False)
    bound: list[float] = []
    refused = fit(spec, "rtx-4090", request_rate=100, rate_bound=bound, **kw)
    assert not refused.fits and refused.details["rate_refused_by"] == "server"
    assert len(bound) == 1 and 0 < bound[0] < 100
    assert refused.details["rate_ceilings"]["server"] == pytest.approx(bound[0])  # the bound is that ceiling
    at = fit(spec, "rtx-4090", request_rate=bound[0], **kw)  # eq. Q10a: rate >= capacity has no steady state
    assert not at.fits and at.details["rate_refused_by"] == "server"
    below = fit(spec, "rtx-4090", request_rate=bound[0] * (1 - 1e-6), **kw)
    assert below.details.get("rate_refused_by") != "server"
