"""`capacity check`'s "other device type" alternative is `fit`'s answer, one answer with the CLI (task provider07).

Before, provider/placement.py scaled the device count by the plan's memory need over the raw device memory (no
headroom; for vLLM the workload's share, not the pool), and kept the job's memory verdict and device kind: a
service that did not fit its device was never offered another one, and a training run was offered 1 x l4 where
`fit --train` says one L4 does not hold it. Now each other device type of the job's pool gets the fewest devices
that fit as `fit MODEL --device D --count N` (serving: the job's engine and peak load, the plan's headroom) or
`fit --train` (training) says, through plan/inference.py and plan/training.py ``device_fit``. Each case is checked
against the CLI a user would run for the same workload; where no other device type fits, none is offered."""

from __future__ import annotations

import datetime as dt
from dataclasses import replace
from pathlib import Path

from cli_capture import run_json
from llmsizer.units import format_bytes, format_seconds

from .inventory_text import PEAK, chat_service, failing_check, one_site_inventory

TUNE = """\
version: 1
title: a fine-tune
jobs:
  - name: tune
    kind: training
    model: {name: llama-3.2-1b}
    method: full
    start: 2027-01-04
    resources: {device: DEVICE, count: COUNT}
    settings: {seq_len: 4096, micro_batch: 1, grad_checkpointing: full}
    dataset: {tokens: 100M}
"""
TUNE_FLAGS = ("--train", "--seq", "4096", "--batch", "1", "--grad-checkpointing", "full")  # TUNE's settings




def _other(c: dict) -> list[str]:
    return [a for a in c["alternatives"] if a.startswith("other device type")]


def _memory_words(fit: dict) -> str:
    """The start of fit's memory line (render/fit_text.py memory_line) from its --json numbers."""
    return f"memory per device {format_bytes(fit['memory_per_device'])} of "


def test_a_70b_that_does_not_fit_an_a100_is_offered_the_fewest_h100s_fit_says(tmp_path: Path) -> None:
    """Llama 3.1 70B at 4 x 8k tokens does not fit one A100 in bf16. On the H100 node, `fit` (vLLM, bf16) says 2
    do not hold it (vLLM's pool offers less than the 4 sequences need) and 4 do: the alternative is 4 x h100-sxm
    with fit's memory per device. Two L4s (the L4 node's all) do not hold it: no L4 line."""
    inventory = one_site_inventory("""\
        - {id: a, site: s1, device: a100-pcie-80gb, devices: 1, cpus: 32, ram: 256 GiB, pools: [serving]}
        - {id: h, site: s1, device: h100-sxm, devices: 8, cpus: 64, ram: 1 TiB, pools: [serving]}
        - {id: l, site: s1, device: l4, devices: 2, cpus: 16, ram: 128 GiB, pools: [serving]}""")
    c = failing_check(tmp_path, inventory, chat_service("llama-3.1-70b", "a100-pcie-80gb", quantization="none"))
    assert c["binding"] == "memory", c  # the premise: the plan's devices do not hold it
    fits = {}
    for dev, n in (("h100-sxm", 1), ("h100-sxm", 2), ("h100-sxm", 4), ("l4", 1), ("l4", 2)):
        code, fits[dev, n] = run_json("fit", "llama-3.1-70b", "--device", dev, "--count", str(n), *PEAK)
        assert code == (0 if fits[dev, n]["fits"] else 1)
    assert [k for k, f in fits.items() if f["fits"]] == [("h100-sxm", 4)]  # fit's answers: only 4 x h100 holds it
    (line,) = _other(c)
    h4 = fits["h100-sxm", 4]
    assert line.startswith("other device type: 4 x h100-sxm on 1 node(s) at s1 (`llmsizer fit` at the plan's peak "
                           "load: "), line
    assert _memory_words(h4) + f"{format_bytes(h4['budget_per_device'])} device memory" in line, (line, h4)
    # vLLM reserves its pool whatever the load: the line also says what this workload needs of it, as fit does
    assert f"this workload needs {format_bytes(h4['memory']['details']['workload_bytes'])}" in line, line


def test_a_training_run_gets_the_fewest_l4s_fit_train_says_and_the_plans_hours(tmp_path: Path) -> None:
    """A full fine-tune of Llama 3.2 1B (seq 4096, micro-batch 1, full recomputation): the request's A100 is only in
    the serving pool. `fit --train` says one L4 does not hold it and two do (ZeRO-1); the alternative is 2 x l4 with
    that memory, timed as the plan of the same request on 2 x l4 times it (the ZeRO stage its memory takes)."""
    inventory = one_site_inventory("""\
        - {id: a, site: s1, device: a100-pcie-80gb, devices: 1, cpus: 32, ram: 256 GiB, pools: [serving]}
        - {id: l, site: s1, device: l4, devices: 8, cpus: 64, ram: 512 GiB, pools: [training]}""")
    c = failing_check(tmp_path, inventory, TUNE.replace("DEVICE", "a100-pcie-80gb").replace("COUNT", "1"))
    assert c["binding"] == "pool", c
    code, one = run_json("fit", "llama-3.2-1b", "--device", "l4", "--count", "1", *TUNE_FLAGS)
    assert code == 1 and not one["fits"]
    code, two = run_json("fit", "llama-3.2-1b", "--device", "l4", "--count", "2", "--gpus-per-node", "2",
                         *TUNE_FLAGS)
    assert code == 0 and two["fits"]
    (line,) = _other(c)
    assert line.startswith("other device type: 2 x l4 on 1 node(s) at s1 (`llmsizer fit --train`: "), line
    assert _memory_words(two) + f"a {format_bytes(two['budget_per_device'])} budget" in line, (line, two)
    (tmp_path / "l4.yaml").write_text(TUNE.replace("DEVICE", "l4").replace("COUNT", "2"))
    code, plan = run_json("plan", str(tmp_path / "l4.yaml"))
    (job,) = plan["jobs"]
    assert job["facts"]["memory_need"] == two["memory_per_device"]  # the plan on 2 x l4 agrees with fit
    assert f"about {format_seconds(job['facts']['seconds'])} on l4 (estimate/duration.py)" in line, (line, job)


def test_no_other_device_type_fits_no_alternative(tmp_path: Path) -> None:
    """Llama 3.1 405B in bf16 holds more weights than 8 H100s or 2 L4s have memory: no other device type."""
    inventory = one_site_inventory("""\
        - {id: a, site: s1, device: a100-pcie-80gb, devices: 1, cpus: 32, ram: 256 GiB, pools: [serving]}
        - {id: h, site: s1, device: h100-sxm, devices: 8, cpus: 64, ram: 1 TiB, pools: [serving]}
        - {id: l, site: s1, device: l4, devices: 2, cpus: 16, ram: 128 GiB, pools: [serving]}""")
    for dev, n in (("h100-sxm", 8), ("l4", 2)):
        code, f = run_json("fit", "llama-3.1-405b", "--device", dev, "--count", str(n), *PEAK)
        assert code == 1 and not f["fits"], f  # the premise, as fit says it
    c = failing_check(tmp_path, inventory, chat_service("llama-3.1-405b", "a100-pcie-80gb"))
    assert _other(c) == [], c["alternatives"]


def test_the_alternative_takes_the_devices_kind_a_cpu_holds_its_ram(tmp_path: Path) -> None:
    """A GPU service moved to a CPU node: the alternative's need is a CPU's (device_kind), so the placement holds
    fit's memory of the node's RAM, not a GPU's share of it. The node's two sockets share 64 GiB of RAM, 40 GiB of
    it booked: fit's few GiB on one socket fit beside it, a GPU's half of the RAM (32 GiB) would not."""
    from llmsizer.plan import make_plan
    from llmsizer.provider.inventory import parse_inventory
    from llmsizer.provider.needs import needs_from_plan
    from llmsizer.provider.placement import Booking, Item, check_job
    from llmsizer.request import parse_request

    req = parse_request(chat_service("llama-3.2-1b", "h100-sxm"), source="req.yaml")
    (need,) = needs_from_plan(make_plan(req, alternatives=False), req, dt.datetime(2026, 12, 1))
    cpu = "intel-xeon-spr-8ch"
    inv = parse_inventory(one_site_inventory(
        f"- {{id: c, site: s1, device: {cpu}, devices: 2, cpus: 112, ram: 64 GiB, pools: [serving]}}"),
        source="inv.yaml")
    busy = Booking("x", "other", "inference", (Item("node:c", 1, need.start, need.start + dt.timedelta(days=90)),
                                               Item("ram:c", 40 * 2**30, need.start,
                                                    need.start + dt.timedelta(days=90))))
    code, f = run_json("fit", "llama-3.2-1b", "--device", cpu, "--memory", "32GiB", *PEAK)  # RAM per socket
    assert code == 0 and f["fits"] and f["memory_per_device"] < 24 * 2**30
    c = check_job(need, inv, [busy])
    assert c.binding == "device", c
    (line,) = [a for a in c.alternatives if a.startswith("other device type")]
    assert line.startswith(f"other device type: 1 x {cpu} on 1 node(s) at s1 (`llmsizer fit` at the plan's peak "
                           "load: " + _memory_words(f)), (line, f)
    # the same answer taken as a GPU's would hold half the node's RAM and find it booked
    fit_on = need.fit_on
    assert fit_on is not None

    def as_gpu(*args):  # fit's own answer, its device kind overwritten
        answer = fit_on(*args)
        return replace(answer, device_kind="gpu") if answer is not None else None

    assert not [a for a in check_job(replace(need, fit_on=as_gpu), inv, [busy]).alternatives
                if a.startswith("other device type")]
