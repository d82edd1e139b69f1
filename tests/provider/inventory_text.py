"""The texts the provider's alternative tests share: a one-site inventory around their node lines, a month-long chat
service request, and its traffic peak as `infer`/`fit` flags."""

from __future__ import annotations

import textwrap
from pathlib import Path

from cli_capture import run_json

NOW = ("--now", "2026-12-01")
PEAK = ("--context", "8192", "--concurrency", "4", "--output-tokens", "512")  # the chat service's traffic peak


def one_site_inventory(nodes: str) -> str:
    """An inventory of site s1 (provider-operated, DE) with 100 TB of storage and ``nodes`` (YAML list items, at any
    indentation) as its nodes."""
    return f"""\
version: 1
provider: test
sites:
  - {{id: s1, operator: provider, jurisdiction: DE}}
nodes:
{textwrap.indent(textwrap.dedent(nodes), "  ")}
storage:
  - {{id: st, site: s1, capacity: 100 TB}}
"""


def chat_service(model: str, device: str, engine: str = "", concurrency: int = 4, quantization: str = "") -> str:
    """A request for a month of chat on one ``device`` from 2027-01-04: up to ``concurrency`` sequences of 8k tokens
    (512 generated) at peak. ``quantization``: the job's (``none`` pins the checkpoint's format: left out, a plan on
    devices the default format does not fit serves the format fit names, fits_at)."""
    return f"""\
version: 1
title: a chat service
jobs:
  - name: chat
    kind: inference
    model: {{name: {model}}}
{f"    engine: {engine}" if engine else ""}
{f"    quantization: {quantization}" if quantization else ""}
    start: 2027-01-04
    resources: {{device: {device}, count: 1}}
    traffic:
      concurrency: {{typical: 1, peak: {concurrency}}}
      context: {{typical: 4k, peak: 8k}}
      output: {{typical: 256, peak: 512}}
    service: {{duration: 1 month}}
"""


def failing_check(tmp_path: Path, inventory: str, request: str) -> dict:
    """`capacity check REQUEST --inventory INVENTORY --no-db` of a one-job request that does not fit as planned (exit
    1): that job's check, whose alternatives the tests read."""
    (tmp_path / "inv.yaml").write_text(inventory)
    (tmp_path / "req.yaml").write_text(request)
    code, checks = run_json("capacity", "check", str(tmp_path / "req.yaml"), "--inventory",
                            str(tmp_path / "inv.yaml"), "--no-db", *NOW)
    checks = checks["jobs"]
    (c,) = checks
    assert code == 1 and not c["fits"], c
    return c
