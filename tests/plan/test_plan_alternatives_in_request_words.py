"""review8 #6: a plan of a request file words the training alternatives (``fits_if_changed``) in the request's
keys, as its ``fits_at`` advice does, not as CLI flags: the request names ``method`` and ``resources.count``, not
``--method`` and ``--count``. Each key named is one the request reader takes (the value set there parses and, for
the count, gives a plan that fits: the plan itself is the independent check)."""

from __future__ import annotations

import re

from llmsizer.plan import make_plan
from llmsizer.request import parse_request

REQUEST = """version: 1
jobs:
  - name: ft
    kind: training
    model: {name: llama-3.1-8b}
    method: full
    settings: {offload: none%s}
    dataset: {tokens: 2M}
    resources: {device: rtx-4090, count: %d}
"""


def test_alternatives_name_request_keys_and_the_count_key_works() -> None:
    """offload: none given, so no step that keeps the settings fits one RTX 4090 and the alternatives override it."""
    job = make_plan(parse_request(REQUEST % ("", 1), source="r.yaml")).jobs[0]
    (note,) = [n for n in job.notes if "alternative:" in n]
    assert "--" not in note, note  # before: "with --offload optimizer ...", "--count 9"
    assert "settings.offload: optimizer" in note and "(changes what you gave: settings.offload)" in note, note
    m = re.search(r"set resources\.count: (\d+), settings\.grad_checkpointing: full in the request", note)
    assert m, note
    # the keys as written, set in the request, are read and fit; one device fewer does not
    ckpt = ", grad_checkpointing: full"
    fits = make_plan(parse_request(REQUEST % (ckpt, int(m.group(1))), source="r.yaml")).jobs[0].facts
    assert fits["fits"] and fits["memory_per_device"] <= fits["budget_per_device"]
    short = make_plan(parse_request(REQUEST % (ckpt, int(m.group(1)) - 1), source="r.yaml")).jobs[0].facts
    assert not short["fits"] and short["memory_per_device"] > short["budget_per_device"]
