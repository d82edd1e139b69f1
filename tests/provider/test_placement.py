"""Placement on small inventories, each built to exercise one constraint."""

from __future__ import annotations

import datetime as dt
from dataclasses import replace
from pathlib import Path

import pytest

from llmsizer.provider.placement import (
    Booking,
    DeviceFit,
    Item,
    JobNeed,
    Quantized,
    check_job,
    check_needs,
    earliest,
    peak,
    storage_items,
    try_window,
)

from .conftest import inv

ROOT = Path(__file__).resolve().parents[2]
T0 = dt.datetime(2025, 10, 1)
H = 3600.0
D = 86400.0


def train(**kw) -> JobNeed:
    base = dict(name="t", kind="training", device="h100-sxm", devices=8, nodes=1, seconds=10 * H, start=T0,
                memory_per_device=40 * 2**30, verdict_need_per_device=40 * 2**30)
    base.update(kw)
    return JobNeed(**base)


def serve(**kw) -> JobNeed:
    base = dict(name="s", kind="inference", device="h100-sxm", devices=1, nodes=1, seconds=30 * D, start=T0,
                memory_per_device=60 * 2**30, verdict_need_per_device=60 * 2**30)
    base.update(kw)
    return JobNeed(**base)


FABRICS = inv("""
    sites:
      - id: s1
        fabrics: [{id: fa}, {id: fb}]
    nodes:
      - {id: a, count: 3, site: s1, device: h100-sxm, devices: 8, fabric: fa, pools: [training]}
      - {id: b, count: 3, site: s1, device: h100-sxm, devices: 8, fabric: fb, pools: [training]}
""")


def test_multi_node_training_stays_inside_one_fabric():
    p = try_window(train(devices=24, nodes=3), FABRICS, [], T0)
    assert len({n[0] for n in p.nodes}) == 1  # all a-* or all b-*
    c = check_job(train(devices=32, nodes=4), FABRICS, [])
    assert not c.fits and c.binding == "fabric"
    assert "at most 3 on one fabric" in c.reason
    # the inventory decides how many nodes share a fabric: no later window lifts it, none is searched (probe10 #4)
    assert c.waits is False and c.placement is None


NO_FABRIC = inv("""
    sites: [{id: s1}]
    nodes:
      - {id: gpunode, count: 3, site: s1, device: a40, devices: 1, pools: [training, serving]}
""")


def test_nodes_without_a_fabric_refuse_multi_node_training_and_name_the_fix():
    """An imported cluster states no fabric (probe10 defect 4): a 2-node training job was answered "no window found
    within two years" after searching them, waits true; the inventory decides it, so it is refused at once, naming
    the nodes that state none. A 2-node service runs no collective between its nodes: placed."""
    c = check_job(train(device="a40", devices=2, nodes=2), NO_FABRIC, [])
    assert not c.fits and c.binding == "fabric" and c.waits is False and c.placement is None
    assert "at most 0 on one fabric" in c.reason
    assert "these nodes state no fabric: gpunode-01, gpunode-02, gpunode-03" in c.reason
    assert check_job(serve(device="a40", devices=2, nodes=2, memory_per_device=20 * 2**30,
                           verdict_need_per_device=20 * 2**30), NO_FABRIC, []).fits


def test_fabric_blocked_by_booking_then_earliest_window():
    held = Booking("x", "other", "training", (Item("node:a-01", 8, T0, T0 + dt.timedelta(hours=5)),
                                              Item("node:b-01", 8, T0, T0 + dt.timedelta(hours=20))))
    c = check_job(train(devices=24, nodes=3), FABRICS, [held])
    assert not c.fits and c.binding == "fabric"
    assert c.placement is not None and c.placement.start == T0 + dt.timedelta(hours=5)
    assert c.placement.nodes == ("a-01", "a-02", "a-03")
    assert any(a.startswith("start later: from 2025-10-01 05:00") for a in c.alternatives)


POOLS = inv("""
    sites: [{id: s1}]
    nodes:
      - {id: t, site: s1, device: h100-sxm, devices: 8, pools: [training]}
      - {id: both, site: s1, device: h100-sxm, devices: 8, pools: [training, serving]}
""")


def test_training_and_serving_on_separate_resources():
    only_serving = inv("""
        sites: [{id: s1}]
        nodes: [{id: v, site: s1, device: h100-sxm, devices: 8, pools: [serving]}]
    """)
    c = check_job(train(), only_serving, [])
    assert not c.fits and c.binding == "pool" and "training pool" in c.reason
    assert try_window(serve(), POOLS, [], T0).nodes == ("both",)  # the only serving node
    # a node running a service does not take training at the same time, even with devices free
    svc = Booking("svc", "s", "inference", (Item("node:both", 1, T0, T0 + dt.timedelta(days=30)),))
    busy_t = Booking("tr", "t0", "training", (Item("node:t", 8, T0, T0 + dt.timedelta(days=1)),))
    c = check_job(train(devices=4), POOLS, [svc, busy_t])
    assert not c.fits and c.binding == "busy"
    assert c.placement is not None and c.placement.nodes == ("t",)  # after the other training run


def test_node_size_and_unknown_device():
    assert check_job(train(devices=16), POOLS, []).binding == "node-size"
    c = check_job(train(device="a100-pcie-80gb"), POOLS, [])
    assert c.binding == "device" and "h100-sxm" in c.reason and c.placement is None


STORAGE = inv("""
    sites: [{id: s1}]
    nodes: [{id: n, count: 2, site: s1, device: h100-sxm, devices: 8, pools: [training]}]
    storage: [{id: fs, site: s1, capacity: 10 TB}]
""")


def ckpt_job(**kw) -> JobNeed:
    return train(storage_fixed=4 * 10**12, checkpoint_bytes=10**12, checkpoint_interval=H, checkpoints_max=5,
                 seconds=10 * H, **kw)


def test_storage_items_accumulate_checkpoints():
    need = ckpt_job()
    items = storage_items(need, "fs", T0, need.end)
    assert peak(items, T0, T0 + dt.timedelta(minutes=30)) == 4e12  # before the first checkpoint
    assert peak(items, T0 + dt.timedelta(hours=1), T0 + dt.timedelta(hours=2)) == 5e12
    assert peak(items, T0, need.end) == 9e12 == need.storage_peak


def test_storage_capacity_over_the_whole_run():
    assert try_window(ckpt_job(), STORAGE, [], T0).storage_pool == "fs"
    # another booking holds 3 TB for the first 2 hours: fine, our checkpoints accumulate later
    early = Booking("e", "early", "training", (Item("storage:fs", 3e12, T0, T0 + dt.timedelta(hours=2)),))
    assert try_window(ckpt_job(), STORAGE, [early], T0).storage_pool == "fs"
    # held for the whole run: at our peak (9 TB) the pool would need 12 TB
    late = Booking("l", "late", "training", (Item("storage:fs", 3e12, T0, T0 + dt.timedelta(days=2)),))
    c = check_job(ckpt_job(), STORAGE, [late])
    assert not c.fits and c.binding == "storage" and "checkpoints accumulating" in c.reason
    assert c.placement is not None and c.placement.start == T0 + dt.timedelta(days=2)


MAINT = inv("""
    sites: [{id: s1}]
    nodes: [{id: n, site: s1, device: h100-sxm, devices: 8, pools: [training, serving]}]
    maintenance: [{nodes: [n], start: 2025-10-01 04:00, end: 2025-10-01 08:00, note: firmware}]
""")


def test_maintenance_window_blocks_a_run_and_moves_it():
    c = check_job(train(), MAINT, [])
    assert not c.fits and c.binding == "maintenance" and "firmware" in c.reason
    assert c.placement is not None and c.placement.start == dt.datetime(2025, 10, 1, 8)
    # a run that ends before the window fits
    assert check_job(train(seconds=3 * H), MAINT, []).fits
    # a service that states its own maintenance windows accepts the provider's
    assert check_job(serve(accepts_maintenance=True), MAINT, []).fits
    assert check_job(serve(), MAINT, []).binding == "maintenance"


ADDR = inv("""
    sites:
      - {id: s1, public_addresses: 1, isolated_segments: 1}
      - {id: s2}
    nodes:
      - {id: n1, site: s1, device: h100-sxm, devices: 8, pools: [serving]}
      - {id: n2, site: s2, device: h100-sxm, devices: 8, pools: [serving]}
""")


def test_addresses_and_isolation():
    # s2 has no addresses: the fixed-address service goes to s1
    p = try_window(serve(fixed_address=True, isolation="vpc"), ADDR, [], T0)
    assert p.site == "s1" and {"addr:s1", "seg:s1"} <= {i.resource for i in p.items}
    held = Booking("x", "other", "inference", p.items)
    c = check_job(serve(fixed_address=True), ADDR, [held])
    assert not c.fits and c.binding == "addresses"
    c = check_job(serve(isolation="air-gapped"), ADDR, [held])
    assert not c.fits and c.binding == "isolation"
    assert check_job(serve(), ADDR, [held]).fits  # no address needed: s1 or s2


def test_deadline_reason_names_its_time_of_day():
    # a same-day deadline (start 00:00, deadline 06:00, a 10 h run): the reason prints both instants to the minute,
    # not the deadline's date alone (which read "ends 2025-10-01 10:00, after the deadline 2025-10-01")
    grid = inv("""
        sites: [{id: s1}]
        nodes:
          - {id: h, count: 1, site: s1, device: h100-sxm, devices: 8, pools: [training]}
    """)
    c = check_job(train(deadline=T0 + dt.timedelta(hours=6)), grid, [])
    assert not c.fits and c.binding == "deadline"
    assert "the run ends 2025-10-01 10:00, after the deadline 2025-10-01 06:00" in c.reason


def test_deadline_and_alternatives():
    mixed = inv("""
        sites: [{id: s1}]
        nodes:
          - {id: h, count: 2, site: s1, device: h100-sxm, devices: 8, pools: [training]}
          - {id: a, count: 2, site: s1, device: a100-pcie-80gb, devices: 8, pools: [training, serving]}
    """)
    busy = Booking("x", "other", "training", (Item("node:h-01", 8, T0, T0 + dt.timedelta(days=3)),
                                              Item("node:h-02", 4, T0, T0 + dt.timedelta(days=3))))
    asked: list[tuple[str, int, int]] = []

    def timer(device: str, devices: int, nodes: int) -> float:  # what the duration rule answers, per device
        asked.append((device, devices, nodes))
        return {"h100-sxm": 6 * H, "a100-pcie-80gb": 17 * H}[device] * 8 / devices

    sized: list[tuple[str, int, int, int]] = []

    def fit_on(device: str, devices: int, nodes: int, ram: int) -> DeviceFit:  # what `fit --train` answers there
        sized.append((device, devices, nodes, ram))
        return DeviceFit("gpu", 30 * 2**30, "memory per device 30.00 GiB of ...")

    need = train(devices=8, seconds=6 * H, deadline=T0 + dt.timedelta(days=1), run_seconds=timer, fit_on=fit_on)
    c = check_job(need, mixed, [busy])
    assert not c.fits and c.binding == "busy"
    texts = " | ".join(c.alternatives)
    assert "after the deadline" in texts  # start later
    # the alternative carries ITS OWN run time (17 h on the A100s), not the original's 6 h, and is placed for it;
    # 1, 2 and 4 A100s hold it too, but their runs (136, 68, 34 h) end after the one-day deadline
    assert "other device type: 8 x a100-pcie-80gb on 1 node(s) at s1 (`llmsizer fit --train`: memory per device " \
           "30.00 GiB of ...), about 17.0 h on a100-pcie-80gb (estimate/duration.py), ends 2025-10-01 17:00" in texts
    assert [a for a in asked if a[0] == "a100-pcie-80gb"] == [("a100-pcie-80gb", n, 1) for n in (1, 2, 4, 8)]
    assert [s[:3] for s in sized] == [("a100-pcie-80gb", n, 1) for n in (1, 2, 4, 8)]
    # without a way to time it, no other device is offered for a training run (no guessed duration)
    assert not any("other device type" in a for a in check_job(replace(need, run_seconds=None), mixed,
                                                               [busy]).alternatives)
    # without a way to size it (a hand-made need, or fit says it fits nowhere), none either (no guessed memory)
    for unsized in (replace(need, fit_on=None), replace(need, fit_on=lambda d, n, k, r: None)):
        assert not any("other device type" in a for a in check_job(unsized, mixed, [busy]).alternatives)
    # an alternative whose own run time misses the deadline is not offered
    slow = replace(need, run_seconds=lambda d, n, k: 30 * H)
    assert not any("other device type" in a for a in check_job(slow, mixed, [busy]).alternatives)
    # a service on 2 devices where nodes have 1: a quantized serving on 1 device is offered when the estimate
    # (need.quantized, plan/inference.py quantized_fit in a real check) says one device holds it, and only then
    one = inv("""
        sites: [{id: s1}]
        nodes: [{id: v, site: s1, device: h100-sxm, devices: 1, pools: [serving]}]
    """)
    said: list[tuple[str, int, int]] = []

    def quantized(device: str, devices: int, ram: int) -> Quantized | None:
        said.append((device, devices, ram))
        return Quantized("awq-int4", "vllm", "gpu", 50 * 2**30, "memory per device 50.00 GiB of ...") \
            if devices == 1 else None

    svc = serve(device="h100-sxm", devices=2, seconds=10 * D)
    c = check_job(replace(svc, quantized=quantized), one, [])
    assert c.binding == "node-size"
    assert ("serve a quantized model: awq-int4 on vllm, 1 x h100-sxm at s1 (`llmsizer fit --weights awq-int4` at "
            "the plan's peak load: memory per device 50.00 GiB of ...)") in c.alternatives, c.alternatives
    assert said == [("h100-sxm", 1, 0)]  # the node's 1 device: at most what a node holds is asked
    assert not any("quantized" in a for a in check_job(replace(svc, quantized=lambda d, n, r: None), one,
                                                       []).alternatives)
    assert not any("quantized" in a for a in check_job(svc, one, []).alternatives)  # no estimate: no guess


def test_alternative_device_is_timed_like_a_plan_for_that_device(tmp_path):
    """End to end on the LoRA example: the H100 is taken, an A100 node is free. The alternative's hours must be
    the plan's own duration for the same request naming the A100 (the one duration rule), not the H100's."""
    from llmsizer.plan import make_plan
    from llmsizer.provider.needs import needs_from_plan
    from llmsizer.request import load_request, parse_request
    from llmsizer.units import format_seconds

    text = (ROOT / "examples" / "lora-finetune-and-chat.yaml").read_text()
    req = load_request(ROOT / "examples" / "lora-finetune-and-chat.yaml")
    plan = make_plan(req, alternatives=False)
    (need,) = [n for n in needs_from_plan(plan, req) if n.name == "ticket-lora"]
    two = inv("""
        sites: [{id: s1}]
        nodes:
          - {id: h, site: s1, device: h100-sxm, devices: 1, pools: [training, training-cluster]}
          - {id: a, site: s1, device: a100-sxm-80gb, devices: 1, pools: [training, training-cluster]}
        storage: [{id: fs, site: s1, capacity: 1 PB}]
    """)
    held = Booking("x", "other", "training", (Item("node:h", 1, need.start, need.start + dt.timedelta(days=30)),))
    c = check_job(replace(need, deadline=None), two, [held])
    (alt,) = [a for a in c.alternatives if a.startswith("other device type")]
    a100 = parse_request(text.replace("device: h100-sxm\n      count: 1\n      storage: 200 GB",
                                      "device: a100-sxm-80gb\n      count: 1\n      storage: 200 GB"),
                         source="a100.yaml")
    a100_hours = make_plan(a100, alternatives=False).jobs[0].facts["seconds"] / 3600
    h100_hours = need.seconds / 3600
    assert abs(a100_hours - h100_hours) > 1  # the two devices differ: the test can tell them apart
    assert f"about {format_seconds(a100_hours * 3600)} on a100-sxm-80gb" in alt, (alt, a100_hours, h100_hours)


def test_jobs_of_one_request_do_not_share_devices():
    one = inv("""
        sites: [{id: s1}]
        nodes: [{id: n, site: s1, device: h100-sxm, devices: 8, pools: [training]}]
    """)
    a, b = check_needs([train(name="a"), train(name="b")], one, [])
    assert a.fits and not b.fits
    assert b.placement is not None and b.placement.start == a.placement.end


def test_earliest_gives_up_on_structural_misfits():
    p, why = earliest(train(devices=64), POOLS, [])
    assert p is None and why is not None and why.binding == "node-size"


def test_needs_from_the_example_plans():
    from llmsizer.plan import make_plan
    from llmsizer.provider.inventory import load_inventory
    from llmsizer.provider.needs import needs_from_plan
    from llmsizer.request import load_request

    inventory = load_inventory(ROOT / "examples" / "provider" / "inventory.yaml")
    req = load_request(ROOT / "examples" / "pretraining-multinode.yaml")
    (need,) = needs_from_plan(make_plan(req, alternatives=False), req)
    assert (need.device, need.devices, need.nodes, need.checkpoints_max) == ("h100-sxm", 64, 8, 6)
    assert need.deadline == dt.datetime(2025, 10, 25)
    (c,) = check_needs([need], inventory, [])
    assert c.fits and len(c.placement.nodes) == 8
    assert len({inventory.node(n).fabric for n in c.placement.nodes}) == 1
    # the same run booked twice: its pool (pretraining-cluster: the 12 nodes of fabric a) has 4 nodes left, the
    # second waits for the first; without the pool the 4 nodes of fabric b are not one fabric of 8 either
    (c2,) = check_needs([replace(need, name="again")], inventory,
                        [Booking("b", "pretrain-8b", "training", c.placement.items)])
    assert not c2.fits and c2.binding == "busy" and c2.placement.start >= c.placement.end
    assert c2.reason.startswith("4 of 12 suitable h100-sxm node(s)")
    (c3,) = check_needs([replace(need, name="again", pool=None)], inventory,
                        [Booking("b", "pretrain-8b", "training", c.placement.items)])
    assert not c3.fits and c3.binding == "fabric" and c3.placement.start >= c.placement.end


def test_service_maintenance_windows_are_honoured():
    from llmsizer.request.windows import parse_window, within
    # the provider's window is Wednesday 2025-10-01 04:00-08:00
    def agreed(*w: str) -> JobNeed:
        return serve(accepts_maintenance=True, maintenance_windows=w)
    c = check_job(agreed("Sundays 02:00-04:00 UTC"), MAINT, [])
    assert not c.fits and c.binding == "maintenance" and "outside the job's agreed maintenance windows" in c.reason
    assert "Sundays 02:00-04:00 UTC" in c.reason
    assert c.placement is not None and c.placement.start == dt.datetime(2025, 10, 1, 8)  # after the window
    for ok in ("Wednesdays 03:00-09:00 UTC", "daily 04:00-08:00", "weekdays 01:00-09:00 UTC", "Mon-Fri 04:00-08:00",
               "Tue 23:00-09:00", "2025-10-01 00:00-12:00", "2025-09-30 12:00 - 2025-10-02 00:00",
               "by arrangement with the operator"):  # prose cannot be checked: accepted, as before
        assert check_job(agreed("Sundays 02:00-04:00", ok), MAINT, []).fits, ok
    for bad in ("Wednesdays 05:00-08:00", "Tue 23:00-05:00", "weekends 00:00-23:59", "2025-10-02 00:00-12:00"):
        assert not check_job(agreed(bad), MAINT, []).fits, bad
    assert check_job(serve(accepts_maintenance=True), MAINT, []).fits  # no windows listed: any is accepted
    assert parse_window("Sundays 02:00-04:00 CET") is None and parse_window("Sun 02:00-02:00") is None
    assert within(dt.datetime(2025, 10, 5, 2), dt.datetime(2025, 10, 5, 4), ["Sundays 02:00-04:00 UTC"])


def test_need_of_reads_maintenance_windows_and_interruptible_periods():
    from types import SimpleNamespace

    from llmsizer.provider.needs import need_of
    hw = SimpleNamespace(device="h100-sxm", count=1, nodes=1, device_kind="gpu", copy_nodes_on=lambda per_node: 1,
                         tensor_parallel=1, link_bandwidth=None)
    jp = SimpleNamespace(hardware=hw, facts={}, kind="inference", name="s", warnings=())
    from llmsizer.request.spec import InferenceJob, Service
    sv = Service(duration=86400.0, maintenance_windows=("Sundays 02:00-04:00 UTC",),
                 interruptible=("weekdays 01:00-05:00 UTC",))
    job = InferenceJob(name="s", kind="inference", service=sv)
    n = need_of(jp, job, SimpleNamespace(start=None, team=None), T0)  # type: ignore[arg-type]
    assert n.accepts_maintenance and n.maintenance_windows == ("Sundays 02:00-04:00 UTC", "weekdays 01:00-05:00 UTC")


# ------------------------------------------------------------------------------------------ data policy (#14)

POLICY_INV = """\
sites:
  - {id: own, operator: provider, jurisdiction: DE, max_sensitivity: internal}
  - {id: colo, operator: partner, jurisdiction: NL}
nodes:
  - {id: own-01, site: own, device: h100-sxm, devices: 8, pools: [training]}
  - {id: colo-01, site: colo, device: h100-sxm, devices: 8, pools: [training]}
"""


@pytest.mark.parametrize(("sensitivity", "offsite", "site"), [
    ("public", True, "colo"),  # 'colo' sorts first among the sites that may take it... both may: first by id
    ("internal", None, "colo"),
    ("internal", False, "own"),  # may not leave: only the provider's own site
    ("confidential", True, "colo"),  # 'own' is cleared for internal at most
    ("confidential", None, None),  # partner: offsite not stated; own: not cleared
    ("restricted", False, None),
])
def test_data_policy_against_site_attributes(sensitivity, offsite, site):
    from llmsizer.provider.placement import JobNeed, check_job
    i = inv(POLICY_INV)
    need = JobNeed("j", "training", "h100-sxm", 8, start=dt.datetime(2025, 10, 1), sensitivity=sensitivity,
                   offsite_allowed=offsite)
    c = check_job(need, i, [])
    if site is None:
        assert not c.fits and c.binding == "policy" and c.placement is None
        assert "own is cleared for data up to internal" in c.reason
        assert "colo is a partner data centre" in c.reason
    else:
        assert c.fits and c.placement is not None and c.placement.site == site, c.reason


def test_policy_attributes_are_validated():
    from llmsizer.provider.inventory import InventoryError
    with pytest.raises(InventoryError) as e:
        inv("sites: [{id: s, operator: friend, max_sensitivity: secret}]\n"
            "nodes: [{id: n, site: s, device: h100-sxm, devices: 8}]\n")
    assert e.value.errors == [
        "inv.yaml:1: site 's': operator: must be provider (the provider's own data centre) or partner (a "
        "partner's data centre), not 'friend'",
        "inv.yaml:1: site 's': max_sensitivity: must be one of public, internal, confidential, restricted, not "
        "'secret'"]


# ------------------------------------------------------------------------------------------ policies (#14)

NAMED = inv("""
    sites:
      - {id: de1, jurisdiction: DE, regions: [EU], fabrics: [{id: slow, bandwidth: 100 Gb/s},
                                                             {id: fast, bandwidth: 3200 Gb/s}]}
      - {id: us1, jurisdiction: US, fabrics: [{id: us-f, bandwidth: 3200 Gb/s}]}
    nodes:
      - {id: a, count: 2, site: de1, device: h100-sxm, devices: 8, fabric: slow, pools: [training, team-a]}
      - {id: b, count: 2, site: de1, device: h100-sxm, devices: 8, fabric: fast, pools: [training, team-b]}
      - {id: u, count: 2, site: us1, device: h100-sxm, devices: 8, fabric: us-f, pools: [training, team-a]}
""")


def test_request_pool_is_honoured():
    c = check_job(train(pool="team-b"), NAMED, [])
    assert c.fits and c.placement.nodes == ("b-01",)
    # team-b's nodes busy: the job waits for them, it does not move to another pool's free nodes
    held = Booking("x", "o", "training", tuple(Item(f"node:b-0{k}", 8, T0, T0 + dt.timedelta(days=2))
                                               for k in (1, 2)))
    c = check_job(train(pool="team-b"), NAMED, [held])
    assert not c.fits and c.binding == "busy" and set(c.placement.nodes) <= {"b-01", "b-02"}
    c = check_job(train(pool="team-z"), NAMED, [])
    assert not c.fits and c.binding == "pool" and c.placement is None
    assert "names pool 'team-z' (resources.pool)" in c.reason and "team-a, team-b" in c.reason


def test_jurisdiction_and_regions():
    assert check_job(train(jurisdiction="US"), NAMED, []).placement.site == "us1"
    assert check_job(train(jurisdiction="eu"), NAMED, []).placement.site == "de1"  # a region of de1
    c = check_job(train(jurisdiction="CH"), NAMED, [])
    assert not c.fits and c.binding == "policy" and c.placement is None
    assert "de1 is in DE, EU; the job must run in CH (resources.jurisdiction)" in c.reason
    assert "us1 is in US" in c.reason


def test_multi_node_job_needs_the_fabric_bandwidth_its_plan_assumes():
    need = train(devices=16, nodes=2, network=400e9, pool="team-a", jurisdiction="DE")  # 3200 Gb/s per node
    c = check_job(need, NAMED, [])
    assert not c.fits and c.binding == "fabric" and c.placement is None
    assert "needs 3200 Gb/s per node" in c.reason and "slow 100 Gb/s" in c.reason
    assert check_job(replace(need, pool=None), NAMED, []).placement.nodes == ("b-01", "b-02")  # the fast fabric
    assert check_job(replace(need, network=10e9), NAMED, []).fits  # 80 Gb/s: the slow fabric will do
    assert check_job(replace(need, nodes=1, devices=8), NAMED, []).fits  # one node: no fabric traffic


def test_ongoing_service_is_held_until_released(tmp_path):
    from llmsizer.plan import make_plan
    from llmsizer.provider.needs import needs_from_plan
    from llmsizer.provider.placement import ONGOING_END
    from llmsizer.request import parse_request
    text = (ROOT / "examples" / "lora-finetune-and-chat.yaml").read_text()
    ongoing = parse_request(text.replace("      duration: 12 months\n", "      ongoing: true\n"), source="o.yaml")
    stated = parse_request(text, source="s.yaml")
    serving = inv("""
        sites: [{id: s1, public_addresses: 2, isolated_segments: 2}]
        storage: [{id: fs, site: s1, capacity: 1 PB}]
        nodes: [{id: v, site: s1, device: a100-pcie-80gb, devices: 1, pools: [serving, serving-cluster]}]
    """)
    (svc,) = [n for n in needs_from_plan(make_plan(ongoing, alternatives=False), ongoing) if n.kind == "inference"]
    (year,) = [n for n in needs_from_plan(make_plan(stated, alternatives=False), stated) if n.kind == "inference"]
    assert svc.ongoing and not year.ongoing
    p = check_job(svc, serving, []).placement
    assert p.end == ONGOING_END and all(i.end == ONGOING_END for i in p.items)
    assert check_job(year, serving, []).placement.end == year.start + dt.timedelta(days=365)  # its 12 months
    # the ongoing service holds the device for good: another service finds no window in the next two years
    c = check_job(replace(year, name="later", start=year.start + dt.timedelta(days=500)), serving,
                  [Booking("svc", "support-chat", "inference", p.items)])
    assert not c.fits and c.placement is None


def test_a_needs_checkpoint_is_the_plans_one_checkpoint_with_the_disk_headroom_named():
    """``capacity check`` and ``plan`` say the same thing about a checkpoint: the need reports the plan's one
    checkpoint (storage ``checkpoint_one``, 503 MB for the LoRA example) beside the disk it reserves for it, which is
    that figure with the plan's disk headroom (formulas/storage.py DISK_HEADROOM, 20 %) as every stored byte is.
    Before, only the reserved 604 MB was reported, under the same name as the plan's 503 MB."""
    from llmsizer.formulas.storage import DISK_HEADROOM
    from llmsizer.plan import make_plan
    from llmsizer.provider.needs import needs_from_plan
    from llmsizer.request import load_request

    req = load_request(ROOT / "examples" / "lora-finetune-and-chat.yaml")
    plan = make_plan(req, alternatives=False)
    (need,) = [n for n in needs_from_plan(plan, req) if n.name == "ticket-lora"]
    one = plan.job("ticket-lora").value("storage", "checkpoint_one")
    assert one > 0 and need.checkpoint_file_bytes == one
    assert DISK_HEADROOM == 0.2 and need.disk_headroom == DISK_HEADROOM
    assert need.checkpoint_bytes == int(one * (1 + DISK_HEADROOM))
    d = need.to_dict()
    assert (d["checkpoint_file_bytes"], d["checkpoint_bytes"], d["disk_headroom"]) == (
        one, need.checkpoint_bytes, DISK_HEADROOM)
