"""recommend's copies search at a request rate (recommend.py ``_rate_copies``) asks MAX_REPLICAS copies right after
one copy where one copy is past capacity, and where MAX_REPLICAS copies are past capacity too it answers with that
pick without asking the counts between (ratefast: recommend --request-rate 20 took ~15 s CPU, mostly refused
CPU and Apple candidates walking 1, 2, 4 ... 64 copies). The rule: a deployment's refusal of a rate is monotone in
the rate (its ceilings do not depend on the rate asked), so a rung refused at the smallest share is refused at every
larger one. The truth checked here is pick_format itself, asked at every count the doubling would have walked
(as the doubling asks it, ``refusal_only``): each is past capacity, so the doubling ends at MAX_REPLICAS's pick, the
row the search gives. And a pick's reason for a past-capacity rung (the first, the only one read; later rungs are
asked refusal-only) is fit's own answer for that rung at that share."""

from __future__ import annotations

from typing import Any

import pytest

import llmsizer.recommend as R
from llmsizer.catalog.hardware import HardwareCatalog, load_catalog
from llmsizer.catalog.models import find
from llmsizer.estimate.fit import fit
from llmsizer.estimate.format_search import FormatPick, pick_format
from llmsizer.recommend import MAX_REPLICAS, recommend_inference

RATE = 20.0
WORK: dict[str, Any] = dict(context=4096, output_tokens=256)


def _catalog() -> HardwareCatalog:
    """A CPU instance and an Apple chip: llama.cpp, far below 20 requests/s even as 64 copies."""
    cat = load_catalog()
    inst = cat.instances["aws-m7a.2xlarge"]
    apple = cat.devices["apple-m4-16gb"]
    return HardwareCatalog({inst.device.id: inst.device, apple.id: apple}, {inst.id: inst},
                           dict(cat.interconnects), dict(cat.sources))


def test_refused_candidates_jump_to_the_most_copies_and_every_count_between_is_refused(
        monkeypatch: pytest.MonkeyPatch) -> None:
    asked: dict[tuple[str, str | None, Any], list[tuple[float, FormatPick, dict[str, Any]]]] = {}

    def pick(spec: Any, dev: Any, count: int, inst: Any, mem: Any, **kw: Any) -> FormatPick:
        p = pick_format(spec, dev, count, inst, mem, **kw)
        asked.setdefault((dev.id, inst.id if inst else None, mem), []).append((kw["request_rate"], p, kw))
        return p

    monkeypatch.setattr(R, "pick_format", pick)
    rec = recommend_inference("llama-3.1-8b", request_rate=RATE, catalog=_catalog(), quantization_advice=False,
                              **WORK)
    assert not rec.options and len(rec.rejected) == 2
    spec = find("llama-3.1-8b").spec()
    for (dev_id, inst_id, mem), picks in asked.items():
        shares = [share for share, _, _ in picks]
        assert shares == [RATE, RATE / MAX_REPLICAS], (dev_id, shares)  # one copy, then the most: nothing between
        assert all(p.past_capacity for _, p, _ in picks)
        _, last, kw = picks[-1]
        row = next(o for o in rec.rejected if o.device == dev_id)
        assert last.reasons[0] in row.reasons[0]  # the row is MAX_REPLICAS's pick, as the doubling ends with
        cat = _catalog()
        dev = cat.devices[dev_id]
        inst = cat.instances[inst_id] if inst_id else None
        count = inst.device_count if inst else 1
        k = 2
        while k < MAX_REPLICAS:  # every count the doubling walks: past capacity too (pick_format asked anew)
            between = pick_format(spec, dev, count, inst, mem, **{**kw, "request_rate": RATE / k,
                                                                   "refusal_only": True, "sized_memo": None})
            assert between.past_capacity, (dev_id, k, between.reasons)
            k *= 2


def test_a_past_capacity_pick_says_fits_refusal_of_its_first_rung() -> None:
    share = RATE / MAX_REPLICAS
    cat = _catalog()
    dev = cat.devices["apple-m4-16gb"]
    spec = find("llama-3.1-8b").spec()
    p = pick_format(spec, dev, 1, None, None, concurrency=1, weights=None, limits=R.Constraints().latency(),
                    headroom=None, request_rate=share, **WORK)
    assert p.past_capacity
    fmt, said = p.reasons[0].removeprefix("at ").split(": ", 1)
    r = fit(spec, dev.id, weights=fmt.lower(), request_rate=share, fits_at=False, **WORK)
    assert not r.fits and "rate_capacity" in r.details
    assert said == r.reasons[0]
