"""`capacity check`'s need holds fit's numbers under fit's keys, one quantity per key (task planone2).

Before, a job's need had one memory key, ``memory_need``: from the plan it held the workload's share of a vLLM pool
(fit's ``verdict_need_per_device``, 36.92 GiB for Llama 3.1 8B at 16 x 8k tokens on an H100), while the "other device
type" alternative (provider/placement.py ``_on_type``) stored fit's ``memory_per_device`` there (the pool, 72.35 GiB):
one key, two quantities. Now the need carries both under fit's names, ``memory_per_device`` (what the engine takes of
each device, what a placement books) and ``verdict_need_per_device`` (what the verdict compared), each the number
`fit --json` gives for the same workload on the same devices; ``memory_need`` stays as the deprecated name of the
second. Truth: `fit --json` run as a user would for the same request."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

from cli_capture import run_json

from .inventory_text import NOW, chat_service, one_site_inventory

LOAD = ("--context", "8192", "--concurrency", "16", "--output-tokens", "512")  # chat_service(concurrency=16)'s peak
H100_NODE = "- {id: h, site: s1, device: h100-sxm, devices: 8, cpus: 64, ram: 1 TiB, pools: [serving]}"


def _fit(device: str, count: int = 1) -> dict:
    code, f = run_json("fit", "llama-3.1-8b", "--device", device, "--count", str(count), *LOAD)
    assert code == (0 if f["fits"] else 1)
    return f


def test_check_and_plan_hold_fits_memory_per_device_and_verdict_need(tmp_path: Path) -> None:
    """vLLM on one H100: fit reserves its pool (memory_per_device) and compares the workload's share of it (the
    estimate's workload_bytes); the check's need and the plan's facts give both numbers under fit's keys."""
    fit = _fit("h100-sxm")
    need_fit = fit["memory"]["details"]["workload_bytes"]
    assert fit["fits"] and fit["memory_per_device"] > need_fit  # the premise: two different quantities
    (tmp_path / "inv.yaml").write_text(one_site_inventory(H100_NODE))
    (tmp_path / "req.yaml").write_text(chat_service("llama-3.1-8b", "h100-sxm", concurrency=16))
    code, _answer = run_json("capacity", "check", str(tmp_path / "req.yaml"), "--inventory", str(tmp_path / "inv.yaml"),
                          "--no-db", *NOW)
    (c,) = _answer["jobs"]
    assert code == 0 and c["fits"], c
    need = c["need"]
    assert need["memory_per_device"] == fit["memory_per_device"] == fit["reserved_per_device"], need
    assert need["verdict_need_per_device"] == need_fit, need
    assert need["memory_need"] == need_fit  # the deprecated name, the same number as before
    code, plan = run_json("plan", str(tmp_path / "req.yaml"))
    facts = plan["jobs"][0]["facts"]
    assert facts["memory_per_device"] == fit["memory_per_device"]
    assert facts["verdict_need_per_device"] == need_fit
    assert facts["reserved_per_device"] == fit["reserved_per_device"]


def test_the_other_device_alternative_keeps_each_key_to_its_quantity() -> None:
    """The job planned on an A100 and moved to the H100 node (placement.py ``_on_type``, the "other device type"
    alternative): the moved need's two numbers are fit's on one H100, not the pool under the workload's key."""
    from llmsizer.plan import make_plan
    from llmsizer.provider.inventory import parse_inventory
    from llmsizer.provider.needs import needs_from_plan
    from llmsizer.provider.placement import _on_type
    from llmsizer.request import parse_request

    req = parse_request(chat_service("llama-3.1-8b", "a100-pcie-80gb", concurrency=16), source="req.yaml")
    (need,) = needs_from_plan(make_plan(req, alternatives=False), req, dt.datetime(2026, 12, 1))
    inv = parse_inventory(one_site_inventory(H100_NODE), source="inv.yaml")
    r = _on_type(need, inv, [], "h100-sxm")
    assert r is not None
    alt, _, _ = r
    fit = _fit("h100-sxm", alt.devices)
    assert alt.devices == 1 and alt.memory_per_device == fit["memory_per_device"]
    assert alt.verdict_need_per_device == fit["memory"]["details"]["workload_bytes"] < alt.memory_per_device
    assert alt.to_dict()["memory_need"] == alt.verdict_need_per_device


def test_a_cpu_job_books_its_memory_per_device_of_the_nodes_ram() -> None:
    """A CPU job's placement holds memory per device x its devices of the node's RAM (what the engine takes), not
    what its verdict compared."""
    from llmsizer.provider.placement import JobNeed, check_job

    from .conftest import inv

    i = inv("""
        sites: [{id: s1}]
        nodes:
          - {id: c, site: s1, device: intel-xeon-spr-8ch, devices: 2, ram: 512 GiB, pools: [serving]}
    """)
    svc = JobNeed(name="s", kind="inference", device="intel-xeon-spr-8ch", devices=2, nodes=1, seconds=86400.0,
                  start=dt.datetime(2025, 10, 1), device_kind="cpu", memory_per_device=100 * 2**30,
                  verdict_need_per_device=60 * 2**30)
    c = check_job(svc, i, [])
    assert c.fits and c.placement is not None
    (ram,) = [it for it in c.placement.items if it.resource == "ram:c"]
    assert ram.amount == 200 * 2**30
