"""A serving job naming neither engine nor devices: every check of the job reads one engine, the one `infer` takes
without --device (plan/inference.py ``job_engine``; before, job_engine gave None and the plan's other checks fell
back to the estimate's own choice, a second copy of the rule)."""

from __future__ import annotations

import pytest

from llmsizer import estimate_inference
from llmsizer.models import load_model
from llmsizer.plan.inference import job_engine
from llmsizer.request import parse_request

REQUEST = """jobs:
  - name: chat
    kind: inference
    model: {{name: {model}}}
{more}    traffic:
      concurrency: 4
      context: 2k
"""


@pytest.mark.parametrize("model, more, fmt", [
    ("llama-3.1-8b", "", None),
    ("llama-3.1-8b", "    quantization: awq-int4\n", "awq-int4"),
    ("llama-3.1-8b", "    quantization: q4_k_m\n", "gguf:q4_k_m"),
])
def test_a_job_with_no_engine_or_devices_is_on_infers_engine(model: str, more: str, fmt: str | None) -> None:
    job = parse_request(REQUEST.format(model=model, more=more)).jobs[0]
    spec = load_model(model)
    infer = estimate_inference(model, weights=fmt)  # `infer MODEL [--weights FMT]`, no --device
    said = next(a.value for a in infer.assumptions if a.name == "engine")
    assert job_engine(job, spec, None, None, fmt) == said
