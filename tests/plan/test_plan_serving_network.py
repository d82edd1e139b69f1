"""A serving request whose one copy spans machines and states resources.network is timed over that network, as
`fit --network` times the same layout (one core call, estimate/fit.py ``node_network``: formulas/network.py eqs. 11
and 13' for the tensor-parallel all-reduces across machines), and its plan carries the network of each machine (the
one a provider's fabric must give). Truth: fit's answer on another surface; a slower network, a slower service."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from cli_capture import run_json


def _plan(tmp_path: Path, network: str) -> dict[str, Any]:
    (tmp_path / "r.yaml").write_text(
        "version: 1\ntitle: t\njobs:\n- name: j\n  kind: inference\n  model: {name: llama-3.1-70b}\n  engine: vllm\n"
        "  quantization: bf16\n  tensor_parallel: 8\n"
        f"  resources: {{device: a100-pcie-80gb, count: 8, nodes: 2, network: {network}}}\n"
        "  traffic:\n    concurrency: {peak: 4, typical: 4}\n    context: {peak: 4k, typical: 4k}\n"
        "    output: {peak: 256, typical: 256}\n  service: {duration: 3 days}\n")
    _, d = run_json("plan", str(tmp_path / "r.yaml"))
    return {f["key"]: f["value"] for s in d["jobs"][0]["sections"] for f in s["figures"]}


def _fit(network: str) -> dict[str, Any]:
    code, d = run_json("fit", "llama-3.1-70b", "--device", "a100-pcie-80gb", "--count", "8", "--gpus-per-node", "4",
                       "--tp", "8", "--engine", "vllm", "--weights", "bf16", "--context", "4k", "--concurrency", "4",
                       "--output-tokens", "256", "--network", network)
    assert code == 0, d
    return dict(d["speed"])


def test_plan_times_the_spanning_copy_over_resources_network(tmp_path: Path) -> None:
    figs, speed = _plan(tmp_path, "1 Gb/s"), _fit("1 Gb/s")
    assert figs["tps_user_peak"] == pytest.approx(speed["tokens_per_second_per_user"], rel=1e-9)
    assert figs["ttft_peak"] == pytest.approx(speed["ttft_seconds"], rel=1e-9)
    assert figs["node_bandwidth"] == pytest.approx(1e9 / 8)  # 1 Gb/s per machine, in B/s
    assert _plan(tmp_path, "100 Gb/s")["tps_user_peak"] > figs["tps_user_peak"]
