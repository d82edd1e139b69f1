"""Benchmark for issue 14: a capacity check over 1,000 nodes with 10,000 bookings <= 1 s (CPU time on the
project's 2-core machine).

The inventory is generated: 1,000 nodes of 8 x h100-sxm at two sites (10 fabrics of 50 nodes each per site), 800
in the training pool and 200 in the serving pool, a storage pool per site and two maintenance windows. 10,000
bookings (seeded random: 1-8 devices on one node, or 2-8 whole nodes of one fabric for a multi-node run; 1-14
days; starts spread over a year) are written to a SQLite store through :class:`llmsizer.provider.store.Store`
(the same code as `capacity book`, capacity ignored so the store fills). Then, timed (CPU time,
``time.process_time``, median of ``--repeat`` runs):

* reading the store (``capacity check``'s read: stdlib sqlite3, read-only),
* the check of a request of five jobs: an 8-node x 8-device training run for 10 days, a 1-device service for 30
  days, a 2-node run with a deadline, a 48-node run (busy: the earliest window is searched, alternatives too)
  and a whole-node service for a year,
* the whole `capacity check` path without the plan: read + check.

Not a timed test: run it and read the numbers.

    .venv/bin/python bench/bench_capacity.py [--nodes 1000] [--bookings 10000] [--repeat 3] [--profile N]
"""

from __future__ import annotations

import argparse
import datetime as _dt
import os
import platform
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from llmsizer.provider.inventory import parse_inventory  # noqa: E402
from llmsizer.provider.placement import Item, JobNeed, Placement, check_needs  # noqa: E402

T0 = _dt.datetime(2026, 1, 1)
TARGET = 1.0  # seconds of CPU time for the check


def inventory_text(nodes: int) -> str:
    fabrics_per_site, per_fabric = 10, max(1, nodes // 20)
    lines = ["version: 1", "provider: bench", "sites:"]
    for s in (1, 2):
        lines.append(f"  - id: site{s}\n    public_addresses: 16\n    isolated_segments: 8\n    fabrics:")
        lines += [f"      - {{id: s{s}-f{f}, bandwidth: 3200 Gb/s}}" for f in range(fabrics_per_site)]
    lines.append("nodes:")
    for s in (1, 2):
        for f in range(fabrics_per_site):
            pool = "serving" if f >= 8 else "training"
            lines.append(f"  - {{id: s{s}-f{f}-n, count: {per_fabric}, site: site{s}, device: h100-sxm, devices: 8, "
                         f"ram: 2 TiB, fabric: s{s}-f{f}, pools: [{pool}]}}")
    lines.append("storage:\n  - {id: fs1, site: site1, capacity: 20 PB}\n  - {id: fs2, site: site2, capacity: 20 PB}")
    lines.append("maintenance:\n  - {site: site1, start: 2026-03-01 06:00, end: 2026-03-01 18:00}\n"
                 "  - {site: site2, start: 2026-04-01 06:00, end: 2026-04-02 06:00}")
    return "\n".join(lines) + "\n"


def fill_store(db: str, inv: object, bookings: int, seed: int = 14) -> None:
    from llmsizer.provider.store import Store
    rng = random.Random(seed)
    nodes = list(inv.nodes)  # type: ignore[attr-defined]
    by_fabric: dict[str, list[object]] = {}
    for n in nodes:
        by_fabric.setdefault(n.fabric, []).append(n)
    store = Store(db)
    batch: list[Placement] = []
    for k in range(bookings):
        start = T0 + _dt.timedelta(hours=rng.randrange(0, 365 * 24))
        end = start + _dt.timedelta(hours=rng.randrange(24, 14 * 24))
        if rng.random() < 0.1:
            fab = rng.choice([f for f in by_fabric if f.split("-f")[1] < "8"])
            chosen = rng.sample(by_fabric[fab], rng.randrange(2, 9))
            per = 8
        else:
            chosen = [rng.choice(nodes)]
            per = rng.randrange(1, 9)
        kind = "inference" if "serving" in chosen[0].pools else "training"  # type: ignore[attr-defined]
        items = tuple(Item(f"node:{n.id}", per, start, end) for n in chosen)  # type: ignore[attr-defined]
        batch.append(Placement(f"b{k}", kind, start, end, chosen[0].site, tuple(n.id for n in chosen),  # type: ignore[attr-defined]
                               per, "h100-sxm", None, items))
        if len(batch) == 500:
            store.submit(batch, {}, state="requested", now=T0)
            batch = []
    if batch:
        store.submit(batch, {}, state="requested", now=T0)
    # requested bookings hold nothing: make them confirmed in one statement (the bench needs held capacity, not
    # 10,000 capacity re-checks)
    with store.engine.begin() as c:
        c.exec_driver_sql("UPDATE reservations SET state = 'confirmed', hold_until = NULL")
    store.close()


def needs() -> list[JobNeed]:
    t = T0 + _dt.timedelta(days=120)
    return [
        JobNeed("pretrain", "training", "h100-sxm", 64, 8, 10 * 86400.0, t, memory_per_device=60 * 2**30, verdict_need_per_device=60 * 2**30,
                storage_fixed=50 * 10**12),
        JobNeed("chat", "inference", "h100-sxm", 1, 1, 30 * 86400.0, t, memory_per_device=40 * 2**30, verdict_need_per_device=40 * 2**30),
        JobNeed("finetune", "training", "h100-sxm", 16, 2, 3 * 86400.0, t, deadline=t + _dt.timedelta(days=20),
                memory_per_device=60 * 2**30, verdict_need_per_device=60 * 2**30),
        # 48 of a fabric's 50 nodes for 5 days: busy at the requested time, so the earliest window is searched
        JobNeed("big", "training", "h100-sxm", 384, 48, 5 * 86400.0, t, memory_per_device=60 * 2**30, verdict_need_per_device=60 * 2**30),
        JobNeed("service", "inference", "h100-sxm", 8, 1, 365 * 86400.0, t, memory_per_device=60 * 2**30, verdict_need_per_device=60 * 2**30),
    ]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nodes", type=int, default=1000)
    ap.add_argument("--bookings", type=int, default=10000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--profile", type=int, default=0, help="print the N slowest functions of one check")
    a = ap.parse_args()
    from llmsizer.provider.sqlite_read import ReadOnlySqlite
    text = inventory_text(a.nodes)
    t = time.process_time()
    inv = parse_inventory(text, source="bench-inventory.yaml")
    t_inv = time.process_time() - t
    with tempfile.TemporaryDirectory() as tmp:
        db = os.path.join(tmp, "bench.db")
        w = time.perf_counter()
        fill_store(db, inv, a.bookings)
        fill = time.perf_counter() - w
        reads, checks, totals = [], [], []
        results = []
        for _ in range(a.repeat):
            t = time.process_time()
            store = ReadOnlySqlite(db)
            bookings = store.bookings()
            store.close()
            t1 = time.process_time()
            results = check_needs(needs(), inv, bookings)
            t2 = time.process_time()
            reads.append(t1 - t)
            checks.append(t2 - t1)
            totals.append(t2 - t)
        if a.profile:
            import cProfile
            import pstats
            pr = cProfile.Profile()
            pr.enable()
            check_needs(needs(), inv, bookings)
            pr.disable()
            pstats.Stats(pr).sort_stats("cumulative").print_stats(a.profile)
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(f"machine: {platform.processor() or platform.machine()}, {os.cpu_count()} logical CPUs, Python "
          f"{platform.python_version()}, load average {load:.2f}")
    print(f"inventory: {len(inv.nodes)} nodes, parsed in {t_inv:.3f} s CPU; store: {len(bookings)} bookings "
          f"({sum(len(b.items) for b in bookings)} holds), written in {fill:.1f} s")
    for r in results:
        where = f"{r.placement.start:%Y-%m-%d %H:%M} on {len(r.placement.nodes)} node(s)" if r.placement else "-"
        print(f"  {r.need.name:<9} fits={r.fits!s:<5} binding={r.binding or '-':<9} placement: {where}")
    med = statistics.median
    print(f"read bookings (sqlite3, read-only): {med(reads):.3f} s CPU median of {a.repeat}")
    print(f"check of 5 jobs                   : {med(checks):.3f} s CPU median (target <= {TARGET:g} s) "
          f"{'met' if med(checks) <= TARGET else 'NOT met'}")
    print(f"read + check                      : {med(totals):.3f} s CPU median "
          f"{'met' if med(totals) <= TARGET else 'NOT met'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
