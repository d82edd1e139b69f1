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
    m = re.search(r"set resources\.count: (\d+), resources\.nodes: (\d+), settings\.grad_checkpointing: full in "
                  r"the request", note)
    assert m, note
    # the keys as written, set in the request, are read and fit; one machine fewer does not
    count, nodes = int(m.group(1)), int(m.group(2))
    ckpt = ", grad_checkpointing: full"
    text = (REQUEST % (ckpt, count)).replace(f"count: {count}}}", f"count: {count}, nodes: {nodes}}}")
    fits = make_plan(parse_request(text, source="r.yaml")).jobs[0].facts
    assert fits["fits"] and fits["memory_per_device"] <= fits["budget_per_device"]
    short = make_plan(parse_request(REQUEST % (ckpt, count - count // nodes), source="r.yaml")).jobs[0].facts
    assert not short["fits"] and short["memory_per_device"] > short["budget_per_device"]


BIG = """version: 1
jobs:
  - name: ft
    kind: training
    model: {name: llama-3.3-70b-instruct}
    method: full
    settings: {offload: none%s}
    dataset: {tokens: 2M}
    resources: {device: h100-sxm, count: %d%s}
"""


def test_a_count_past_one_machine_is_whole_machines_a_request_can_place() -> None:
    """review9 #3: 70B full fine-tuning on 8 H100s named "resources.count: 17 ... 3 machines of 8 devices", which no
    request places (17 does not split over 3 nodes; without nodes, 17 devices in one machine). The count named is
    now whole machines with its nodes, and that request, as written, is read (the reader's even-split rule) and
    its plan fits."""
    job = make_plan(parse_request(BIG % ("", 8, ""), source="r.yaml")).jobs[0]
    (note,) = [n for n in job.notes if "alternative:" in n]
    m = re.search(r"set resources\.count: (\d+), resources\.nodes: (\d+), settings\.grad_checkpointing: full in "
                  r"the request", note)
    assert m, note
    count, nodes = int(m.group(1)), int(m.group(2))
    assert count % nodes == 0 and count // nodes == 8, note  # h100-sxm: TrainingWorkload's 8 devices per machine
    facts = make_plan(parse_request(BIG % (", grad_checkpointing: full", count, f", nodes: {nodes}"),
                                    source="r.yaml")).jobs[0].facts
    assert facts["fits"] and facts["memory_per_device"] <= facts["budget_per_device"], facts
