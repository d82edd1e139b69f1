"""probe14 D10: `capacity check` says the plan's warnings on each job, word for word (JobNeed.warnings).

Before, the check placed an 8-node Megatron run on a 3,200 Gb/s fabric and kept the plan's 5.9 h without the
plan's own warning that this time was taken over the link inside one machine (no network between the machines
given), "a lower bound of its time": the provider booked a window the requester was told may be too short."""

from __future__ import annotations

from pathlib import Path

from cli_capture import run, run_json

ROOT = Path(__file__).resolve().parents[2]
INVENTORY = ROOT / "examples/provider/inventory.yaml"

REQUEST = """\
version: 1
title: MoE pre-training over 8 machines
jobs:
  - name: moe
    kind: training
    model: {name: qwen3-30b-a3b}
    method: full
    purpose: pretraining
    start: 2027-01-10
    settings: {precision: megatron-bf16, micro_batch: 1, seq_len: 4096, grad_checkpointing: full, attention: flash,
               zero: 1, tp: 2, ep: 8, sequence_parallel: true, train_tokens: 10B tokens}
    dataset: {size: 100 GB, tokens: 10B tokens, sensitivity: internal, offsite_allowed: true}
    resources: {device: h100-sxm, count: 64, nodes: 8, pool: training-cluster}
"""

LOWER_BOUND = "a lower bound of its time"


def test_check_repeats_the_plans_warnings(tmp_path: Path) -> None:
    req = tmp_path / "req.yaml"
    req.write_text(REQUEST)
    _, plan = run_json("plan", str(req))
    said = plan["jobs"][0]["warnings"]
    assert any(LOWER_BOUND in w for w in said)  # the premise: no network named between the 8 machines
    common = ("--inventory", str(INVENTORY), "--now", "2026-12-01", "--no-db")
    _, checks = run_json("capacity", "check", str(req), *common)
    (c,) = checks
    assert c["fits"]
    assert c["need"]["warnings"] == said
    _, out, _ = run("capacity", "check", str(req), *common)
    assert sum(LOWER_BOUND in line and "warning (plan)" in line for line in out.splitlines()) == 1
