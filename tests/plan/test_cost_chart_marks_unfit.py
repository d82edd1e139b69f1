"""The cost-per-option chart marks the request's own option when the plan's memory check says it does not fit
(probe24 D5: a QLoRA job on one RTX 4090 needing 41.35 GiB against a 21.59 GiB budget was listed as "request:
rtx-4090 (hourly) $42.7" with no mark). The mark reads the plan's own verdict (section memory, 'fits'); the truth
here is arithmetic no estimate is needed for: full training of an 8B model in mixed precision with Adam holds at
least 16 bytes per parameter (Rajbhandari et al. 2020, ZeRO, section 3.1: 2 + 2 + 12 bytes), 128 GB, far past a
24 GB card, while the same job on 8 x H100 80 GB fits (the memory section says so)."""

from __future__ import annotations

from llmsizer.plan import make_plan
from llmsizer.request import parse_request

from .test_checks import CLEAN_TRAIN, edit, request


def _plan(resources):
    job = edit(CLEAN_TRAIN, model={"name": "llama-3.1-8b"}, method="full", resources=resources,
               checkpoints__storage=None)
    jp = make_plan(parse_request(request(job), source="r.yaml"), alternatives=False).jobs[0]
    chart = next(c for c in jp.charts if c.id.endswith("-cost"))
    return jp.section("memory").get("fits").value, chart.categories


def test_request_option_that_does_not_fit_is_marked():
    fits, cats = _plan({"device": "rtx-4090", "count": 1, "price_per_hour": "$0.40/h"})
    assert fits is False
    assert cats[0] == "request: rtx-4090 (hourly, does not fit)"


def test_request_option_that_fits_is_not_marked():
    fits, cats = _plan({"device": "h100-sxm", "count": 8, "price_per_hour": "$20/h"})
    assert fits is True
    assert not any("does not fit" in c for c in cats), cats
