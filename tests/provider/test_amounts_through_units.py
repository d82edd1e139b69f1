"""Amounts the provider side prints go through the one bytes formatter (render7 #2): a booking conflict printed a
storage pool's or a node's RAM bytes raw (`storage:fs would hold 1.2e+13 of 1e+13`), the check's head line and the
storage refusal divided by 1e12 by hand, the memory verdict by 2**30. Each expected text below is the amount the
test gives, written by hand in the unit people read it in (disks decimal, memory binary)."""

from __future__ import annotations

import datetime as dt
import re
from pathlib import Path

from llmsizer.provider.placement import Item, format_amount

T0, T1 = dt.datetime(2030, 1, 1), dt.datetime(2030, 1, 2)
SRC = Path(__file__).resolve().parents[2] / "src" / "llmsizer"


def test_a_conflict_states_the_amounts_in_their_units() -> None:
    from llmsizer.provider.store import taking_refusal

    cases = [("storage:fs", 12e12, 10e12, "12.00 TB of 10.00 TB"),
             ("ram:n1", 300 * 2**30, 256 * 2**30, "300.00 GiB of 256.00 GiB"),
             ("node:n1", 9, 8, "would hold 9 of 8")]
    for res, asked, cap, said in cases:
        c = taking_refusal("j", [Item(res, asked, T0, T1)], [], {res: cap})
        assert c is not None and said in c, (res, c)


def test_format_amount_by_resource() -> None:
    assert format_amount("storage:x", 5.64e12) == "5.64 TB"
    assert format_amount("ram:x", 2**39) == "512.00 GiB"
    assert format_amount("addr:s1", 1) == "1"


def test_no_hand_made_byte_units_in_renderers_or_the_provider() -> None:
    """A byte count divided by hand and labelled GiB/GB/TB in an f-string (the ways found before this change)."""
    hand = re.compile(r"/\s*(2\s*\*\*\s*(30|40|20)|1e(9|12|6)|1024\s*\*\*\s*[23])[^}]*}\s*(Ki|Mi|Gi|Ti|K|M|G|T)B")
    found = [f"{p.relative_to(SRC)}:{n}" for d in ("render", "provider") for p in sorted((SRC / d).glob("*.py"))
             for n, line in enumerate(p.read_text().splitlines(), 1) if hand.search(line)]
    found += [f"cli/capacity_cmd.py:{n}" for n, line in
              enumerate((SRC / "cli" / "capacity_cmd.py").read_text().splitlines(), 1) if hand.search(line)]
    # the scheduler's own unit: a node's NVML memory label is whole MiB, and the device's memory is said in it to compare
    assert [f for f in found if not f.startswith("provider/scheduler_import.py:")] == []


def test_no_quantized_alternative_without_an_estimate() -> None:
    """render7 #3 on the provider's side: 'about 60 GiB per device' said neither what it was scaled from nor what it
    was held against; it was a made-up 0.6 x the plan's memory. A need that carries no way to re-estimate the service
    (built by hand, no plan behind it) is now offered no quantized alternative at all; one from a plan names fit's
    memory line (tests/provider/test_quantized_alternative.py). 100 GiB needed, an A100 80GB free, the H100 busy."""
    from llmsizer.provider.placement import Booking, JobNeed, check_job

    from .conftest import inv

    i = inv("""
        sites: [{id: s1}]
        nodes:
          - {id: h, site: s1, device: h100-sxm, devices: 1, pools: [serving]}
          - {id: a, site: s1, device: a100-pcie-80gb, devices: 1, pools: [serving]}
    """)
    svc = JobNeed(name="s", kind="inference", device="h100-sxm", devices=1, nodes=1, seconds=30 * 86400.0,
                  start=T0, memory_per_device=100 * 2**30, verdict_need_per_device=100 * 2**30)
    busy = Booking("x", "other", "inference", (Item("node:h", 1, T0, T0 + dt.timedelta(days=90)),))
    c = check_job(svc, i, [busy])
    assert not c.fits and c.alternatives  # the premise: alternatives are looked for (a later start is offered)
    assert not any("quantized" in a for a in c.alternatives), c.alternatives
