"""`capacity check` places what the plan knows, and refuses with the right reason what it cannot place (newuser6).

A training run the plan cannot time (its device has no sourced peak FLOP/s) is not placed for a made-up length:
`plan` says "duration not estimated", and `capacity check` / `book` used to place and book it for 1 h (a 3,600 s
default in provider/needs.py) as if that were the run. Now the check refuses it ([duration], exit 1) unless the
request states its own expected_duration, which is then the window, named as the request's. A CPU job larger
than every node's RAM is refused as node-size, not as a fully booked resource."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

import pytest

from cli_capture import run, run_json

ROOT = Path(__file__).resolve().parents[2]
DEVICE = "rx-7800-xt"  # no fp16 / bf16 matrix rate sourced (the MI355X had none until catalog37 read AMD's 2.5 PF)

INVENTORY = f"""\
version: 1
provider: test
sites:
  - {{id: s1, operator: provider, jurisdiction: DE}}
nodes:
  - {{id: n, count: 2, site: s1, device: {DEVICE}, devices: 1, cpus: 16, ram: 64 GiB, disk: 2 TB, pools: [training]}}
storage:
  - {{id: st, site: s1, capacity: 100 TB}}
"""


def _request(extra: str = "") -> str:
    return f"""\
version: 1
title: LoRA on a card with no sourced tensor rate
jobs:
  - name: ft
    kind: training
    model: {{name: qwen2.5-0.5b}}
    method: lora
    start: 2027-01-04
    resources: {{device: {DEVICE}, count: 1}}
    dataset: {{size: 1 GB, tokens: 500M tokens}}
    settings: {{micro_batch: 1, seq_len: 512, grad_checkpointing: full}}
    checkpoints: {{interval: 1h, keep: 2}}
{extra}"""


def test_the_device_has_no_sourced_half_precision_rate() -> None:
    """The premise, from the catalog's data file: no bf16 or fp16 peak for the device (else it would be timed)."""
    rows = json.loads((ROOT / "src/llmsizer/catalog/data/hardware/accelerators.json").read_text())["devices"]
    flops = next(r for r in rows if r["id"] == DEVICE)["flops"]
    assert all((flops.get(k) or {}).get("value") is None for k in ("bf16", "fp16"))


@pytest.mark.parametrize("expected", [None, "20h"])
def test_check_and_book_use_the_plans_duration_or_the_requests_own(tmp_path: Path, expected: str | None) -> None:
    inv = tmp_path / "inv.yaml"
    inv.write_text(INVENTORY)
    req = tmp_path / "req.yaml"
    req.write_text(_request(f"    expected_duration: {expected}\n" if expected else ""))
    code, plan = run_json("plan", str(req))
    job = plan["jobs"][0]
    seconds = next(f["value"] for s in job["sections"] if s["key"] == "duration" for f in s["figures"]
                   if f["key"] == "seconds")
    assert seconds is None  # the plan could not time the run: the truth the provider's side must keep
    assert job["facts"]["fits"] is True  # memory is not what refuses it

    common = ("--inventory", str(inv), "--now", "2026-12-01")
    code, checks = run_json("capacity", "check", str(req), *common, "--no-db")
    checks = checks["jobs"]
    (c,) = checks
    if expected is None:
        assert code == 1 and not c["fits"] and c["binding"] == "duration" and c["placement"] is None
        assert "expected_duration" in c["reason"]
        code, out, _ = run("capacity", "check", str(req), *common, "--no-db")
        assert "duration unknown" in out and "60 min" not in out
        assert run("capacity", "book", str(req), *common, "--db", str(tmp_path / "b.db"))[0] == 1
    else:
        assert code == 0 and c["fits"]
        p = c["placement"]
        span = dt.datetime.fromisoformat(p["end"]) - dt.datetime.fromisoformat(p["start"])
        assert span == dt.timedelta(hours=20)  # the request's own figure, not a default
        assert "expected_duration" in c["need"]["duration_basis"]


CPU_INVENTORY = """\
version: 1
provider: test
sites:
  - {id: s1, operator: provider, jurisdiction: DE}
nodes:
  - {id: small, site: s1, device: intel-xeon-spr-8ch, devices: 1, cpus: 56, ram: 256 GiB, disk: 4 TB, pools: [serving]}
storage:
  - {id: st, site: s1, capacity: 20 TB}
"""


def _cpu_request(model: str, quantization: str) -> str:
    return f"""\
version: 1
title: a model on a CPU server
jobs:
  - name: helper
    kind: inference
    model: {{name: {model}}}
    quantization: {quantization}
    engine: llamacpp
    resources: {{device: intel-xeon-spr-8ch, count: 1, memory: 1TiB}}
    traffic:
      concurrency: {{typical: 1, peak: 2}}
      context: {{typical: 2k, peak: 4k}}
      output: {{typical: 256, peak: 256}}
    service: {{duration: 1 month}}
"""


def test_a_cpu_job_larger_than_every_nodes_ram_is_node_size_not_busy(tmp_path: Path) -> None:
    """Before, a CPU service needing more RAM than the node has was refused as '[busy] ram:small is fully booked in
    the window (4.44372e+11 of 2.74878e+11)' on an empty inventory: no booking holds anything, and no window helps."""
    inv = tmp_path / "inv.yaml"
    inv.write_text(CPU_INVENTORY)
    req = tmp_path / "req.yaml"
    req.write_text(_cpu_request("llama-3.1-405b", "q8_0"))
    _, plan = run_json("plan", str(req))
    need = plan["jobs"][0]["facts"]["memory_per_device"]
    assert need > 256 * 2**30  # the premise: the plan's need is over the node's RAM (inventory: 256 GiB)
    code, checks = run_json("capacity", "check", str(req), "--inventory", str(inv), "--no-db")
    checks = checks["jobs"]
    (c,) = checks
    assert code == 1 and c["binding"] == "node-size", c
    assert "256.00 GiB" in c["reason"] and f"{need / 2**30:.2f} GiB" in c["reason"]
    # a model that fits the node's RAM is placed on it
    req.write_text(_cpu_request("qwen2.5-7b", "q4_k_m"))
    code, checks = run_json("capacity", "check", str(req), "--inventory", str(inv), "--no-db")
    checks = checks["jobs"]
    assert code == 0 and checks[0]["fits"] and checks[0]["placement"]["nodes"] == ["small"]
