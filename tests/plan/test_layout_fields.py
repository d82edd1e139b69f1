"""A plan's alternatives search other hardware with recommend --train, which chooses the layout itself: the job's
layout fields (specs/training.py LAYOUT_FIELDS) are left out. The loss under tensor parallelism's vocabulary shards
(``ce-loss-parallel``) exists only with tp > 1, and it was passed on while tp was dropped: every plan of a torchtitan
TP job said "no alternatives searched: loss 'ce-loss-parallel' ... needs tp > 1" and listed none."""

from __future__ import annotations

import dataclasses

from llmsizer.plan import make_plan
from llmsizer.request import parse_request
from llmsizer.specs import TrainingWorkload
from llmsizer.specs.training import LAYOUT_FIELDS, without_layout

REQUEST = """
version: 1
jobs:
  - name: tp-train
    kind: training
    model: {name: llama-3.1-8b}
    method: full
    settings: {precision: bf16-mixed, micro_batch: 1, seq_len: 4k, grad_checkpointing: full, tp: 8,
               loss: ce-loss-parallel, train_tokens: 1B tokens}
    dataset: {tokens: 1B tokens}
    resources: {device: h100-sxm, count: 8}
"""


def test_a_tp_only_loss_does_not_stop_the_alternatives() -> None:
    job = make_plan(parse_request(REQUEST, source="tp.yaml")).job("tp-train")
    assert not [w for w in job.warnings if "no alternatives searched" in w], job.warnings
    assert job.options  # recommend --train ranked other hardware


def test_layout_fields_are_workload_fields() -> None:
    """A name in the list that no longer is a TrainingWorkload field would silently stop leaving anything out."""
    names = {f.name for f in dataclasses.fields(TrainingWorkload)}
    assert set(LAYOUT_FIELDS) <= names
    assert without_layout({"tp": 8, "loss": "ce-loss-parallel", "seq_len": 4096}) == {"seq_len": 4096}
    assert without_layout({"loss": "ce"}) == {"loss": "ce"}  # a loss that exists without a layout stays
