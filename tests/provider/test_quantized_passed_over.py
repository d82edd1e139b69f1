"""capacity check's quantized alternative says why a lower format was chosen over one that fits in memory (probe33
D1): the search's own sentence (estimate/format_search.py PassedOver.words, recommend Option.passed_over), checked
against `models --fits-on` on the same device and load, whose row names the same rung and the same reason."""

from __future__ import annotations

from pathlib import Path

from cli_capture import run_json

from .inventory_text import failing_check, one_site_inventory

REQUEST = """\
version: 1
title: a MoE chat service
jobs:
  - name: chat
    kind: inference
    model: {name: qwen3.5-122b-a10b}
    quantization: none
    start: 2027-01-04
    resources: {device: a100-pcie-80gb, count: 1}
    traffic:
      concurrency: {typical: 8, peak: 8}
      context: {typical: 16k, peak: 16k}
      output: {typical: 256, peak: 256}
    service: {duration: 1 month}
"""


def test_quantized_alternative_names_the_rung_passed_over(tmp_path: Path) -> None:
    code, d = run_json("models", "--fits-on", "a100-pcie-80gb", "--context", "16k", "--concurrency", "8",
                       "--output-tokens", "256", "qwen3.5-122b-a10b")
    (m,) = d["models"]
    assert m["status"] == "meets" and m["passed_over"], m  # the premise: a better rung misses reading speed
    inv = one_site_inventory("  - {id: a, site: s1, device: a100-pcie-80gb, devices: 1, cpus: 32, ram: 256 GiB, "
                             "pools: [serving]}")
    c = failing_check(tmp_path, inv, REQUEST)
    (line,) = [a for a in c["alternatives"] if a.startswith("serve a quantized model")]
    assert line.startswith(f"serve a quantized model: {m['weights_format']} on {m['engine']}, 1 x a100-pcie-80gb"), line
    assert f"chosen because {m['passed_over']}" in line, line
