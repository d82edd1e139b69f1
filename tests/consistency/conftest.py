"""Shared fixtures of the consistency tests."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

# One vLLM inference job on one device for a month, its context and peak concurrency given: the request the window
# tests plan and check (test_probe7_verdict_basis.py, test_smalls6_honesty.py)
WINDOW_REQUEST = """\
version: 1
title: window
jobs:
  - name: long
    kind: inference
    model: {{name: {model}}}
    engine: vllm
    start: 2027-01-04
    traffic:
      concurrency: {{typical: 1, peak: {conc}}}
      context: {{typical: {ctx}, peak: {ctx}}}
    service: {{duration: 1 month}}
    resources: {{device: {device}, count: 1{memory}}}
"""


@pytest.fixture
def window_request(tmp_path: Path) -> Callable[..., Path]:
    """Writes :data:`WINDOW_REQUEST` to ``tmp_path/req.yaml`` with the given context (e.g. '200k'), peak
    concurrency, device and optional stated memory ('24 GB'); returns its path."""

    def write(ctx: str, conc: int = 1, device: str = "h100-sxm", memory: str = "",
              model: str = "llama-3.1-8b") -> Path:
        p = tmp_path / "req.yaml"
        p.write_text(WINDOW_REQUEST.format(model=model, ctx=ctx, conc=conc, device=device,
                                           memory=f", memory: {memory}" if memory else ""))
        return p

    return write
