"""A plan that may choose (no quantization, no engine_settings) follows fit's hint in its order: the engine's own
settings that keep the weights first, a format change after (estimate/fit.py engine_settings_fit, probe24 D4 and its
follow-up). gpt-oss-120b (released in MXFP4) on one H100 under vLLM at 8k x 8: `fit` says "fits with the weights kept
at --max-num-seqs 256; else --weights awq-int4"; the plan served awq-int4 (a re-quantization), and now serves the
released MXFP4 at engine_settings.max_num_seqs 256, the memory `fit --max-num-seqs 256` gives."""

from __future__ import annotations

import pytest

from cli.cli_run import answer
from llmsizer.plan import make_plan
from llmsizer.request import parse_request

REQUEST = """version: 1
title: probe
jobs:
- name: chat
  kind: inference
  model: {name: gpt-oss-120b}
  engine: vllm
  resources: {device: h100-sxm, count: 1}
  traffic:
    concurrency: {peak: 8, typical: 8}
    context: {peak: 8k, typical: 8k}
"""
FIT = ["fit", "gpt-oss-120b", "--device", "h100-sxm", "--engine", "vllm", "--context", "8k", "--concurrency", "8"]


def test_plan_keeps_the_weights_at_the_engine_setting_fit_names_first(capsys: pytest.CaptureFixture[str]) -> None:
    _, hint = answer(FIT, capsys)
    assert not hint["fits"] and hint["fits_at"]["weights"] == "awq-int4"  # the premise: a format would fit too
    first = hint["fits_at"]["engine_settings"][0]["changes"]
    assert first == {"max_num_seqs": 256}
    _, kept = answer([*FIT, "--max-num-seqs", "256"], capsys)
    assert kept["fits"] and kept["weights_format"] == "mxfp4"

    plan = make_plan(parse_request(REQUEST, source="r.yaml"), alternatives=False).to_dict()
    job = plan["jobs"][0]
    said = {a["name"]: a for a in job["assumptions"]}
    assert said["engine_settings"]["value"] == "engine_settings.max_num_seqs: 256"
    assert "weights" not in said or said["weights"]["value"] == "mxfp4"
    text = str(job)
    assert "awq-int4" not in text
    assert job["facts"]["memory_per_device"] == kept["memory_per_device"]
