"""A service's terminal summary in the plan prints fit's memory line for the same devices, and its JSON fit's numbers under fit's
keys (task planone2).

Before, a serving job's summary read "94.97 GiB per device at peak, budget 79.65 GiB (DOES NOT FIT ...)" for Qwen3
30B-A3B at 16 x 16k tokens on one H100 under SGLang: the workload's need called memory per device, beside a budget
that was what the pool offers, while `fit` for the same question says "memory per device 79.65 GiB of 79.65 GiB
device memory, 0 B left; reserved 79.65 GiB per device ...; this workload needs 94.97 GiB of the 79.65 GiB it offers".
Now the plan prints fit's line (render/fit_text.py ``memory_words``) for a service at peak. Truth: the `fit` CLI run as a user would for the same workload."""

from __future__ import annotations

from pathlib import Path

from cli_capture import run_json
from llmsizer.cli.main import main

SGLANG = """\
version: 1
title: q4
jobs:
  - name: j
    kind: inference
    model: {name: qwen3-30b-a3b}
    engine: sglang
    quantization: none  # bf16 pinned, as fit with no --weights: left out, the plan would take fit's fp8 (fits_at)
    resources: {device: h100-sxm, count: 1}
    traffic:
      concurrency: {typical: 16, peak: 16}
      context: {typical: 16384, peak: 16384}
      output: {typical: 256, peak: 256}
"""
SGLANG_FIT = ("fit", "qwen3-30b-a3b", "--engine", "sglang", "--device", "h100-sxm", "--context", "16384",
              "--concurrency", "16", "--output-tokens", "256")


def _text(capsys, *argv: str) -> str:
    main(list(argv))
    return capsys.readouterr().out


def _fit_memory_line(text: str) -> str:
    (line,) = [ln.strip() for ln in text.splitlines() if ln.strip().startswith("memory per device ")]
    return line


def test_a_pool_engines_summary_is_fits_memory_line(tmp_path: Path, capsys) -> None:
    (tmp_path / "q4.yaml").write_text(SGLANG)
    code, fit = run_json(*SGLANG_FIT)
    assert code == 1 and not fit["fits"]  # the premise: 16 x 16k does not fit SGLang's pool on one H100
    d = fit["memory"]["details"]
    assert d["workload_bytes"] > fit["memory_per_device"]  # the need is over the pool: two quantities
    code, plan = run_json("plan", str(tmp_path / "q4.yaml"))
    facts = plan["jobs"][0]["facts"]
    for key in ("memory_per_device", "budget_per_device", "reserved_per_device"):
        assert facts[key] == fit[key], key
    assert facts["verdict_need_per_device"] == d["workload_bytes"]
    assert facts["verdict_budget_per_device"] == d["workload_budget_bytes"]
    words = _fit_memory_line(_text(capsys, *SGLANG_FIT))
    text = _text(capsys, "plan", str(tmp_path / "q4.yaml"))
    (line,) = [ln for ln in text.splitlines() if ln.startswith("  memory    ")]
    assert line.startswith(f"  memory    DOES NOT FIT at peak: {words}; budget = "), (line, words)
    assert "per device at peak" not in text

