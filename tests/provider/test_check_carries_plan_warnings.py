"""probe14 D10: `capacity check` says the plan's warnings on each job, word for word (JobNeed.warnings).

Before, the check placed an 8-node Megatron run on a 3,200 Gb/s fabric and kept the plan's 5.9 h without the
plan's own warning that this time was taken over the link inside one machine (no network between the machines
given), "a lower bound of its time": the provider booked a window the requester was told may be too short.
Since probe21 D2 the check plans such a run again on the fabric it places it on (its bandwidth as the network), and
keeps the lower bound, with the plan's warning, only where the fabric states no bandwidth."""

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
    """On a fabric that states no bandwidth the run is held for the plan's own time, and the check says the plan's
    warning that it is a lower bound, word for word, and notes what the window is."""
    req = tmp_path / "req.yaml"
    req.write_text(REQUEST)
    _, plan = run_json("plan", str(req))
    said = plan["jobs"][0]["warnings"]
    assert any(LOWER_BOUND in w for w in said)  # the premise: no network named between the 8 machines
    bare = tmp_path / "inv.yaml"  # the example's fabrics, stating no bandwidth
    bare.write_text(INVENTORY.read_text().replace(", bandwidth: 3200 Gb/s}", "}"))
    common = ("--inventory", str(bare), "--now", "2026-12-01", "--no-db")
    _, checks = run_json("capacity", "check", str(req), *common)
    checks = checks["jobs"]
    (c,) = checks
    assert c["fits"]
    assert c["need"]["warnings"] == said
    assert c["need"]["seconds"] == plan["jobs"][0]["facts"]["seconds"]
    assert c["notes"] and "states no bandwidth: the window is the plan's" in c["notes"][0]
    _, out, _ = run("capacity", "check", str(req), *common)
    assert sum(LOWER_BOUND in line and "warning (plan)" in line for line in out.splitlines()) == 1
    assert sum(line.startswith("  note: ") and "states no bandwidth" in line for line in out.splitlines()) == 1


def test_check_says_the_plan_on_the_fabric_it_places(tmp_path: Path) -> None:
    """probe21 D2: on a fabric that states its bandwidth, the run is the plan the request gets with that network
    (resources.network): its time and warnings, not the lower bound's."""
    req = tmp_path / "req.yaml"
    req.write_text(REQUEST)
    named = tmp_path / "named.yaml"
    named.write_text(REQUEST.replace("pool: training-cluster}", "pool: training-cluster, network: 3200 Gb/s}"))
    _, plan = run_json("plan", str(named))
    _, checks = run_json("capacity", "check", str(req), "--inventory", str(INVENTORY), "--now", "2026-12-01",
                         "--no-db")
    checks = checks["jobs"]
    (c,) = checks
    assert c["fits"] and c["need"]["timed_on_fabric"] == "fra1-ib-a"
    assert c["need"]["warnings"] == plan["jobs"][0]["warnings"]
    assert not any(LOWER_BOUND in w for w in c["need"]["warnings"])
    assert c["need"]["seconds"] == plan["jobs"][0]["facts"]["seconds"]
