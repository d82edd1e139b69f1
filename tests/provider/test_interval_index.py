"""The interval index (placement.Held) and the pruned earliest-window search (#14, scale) give the same answers
as a brute-force reference written here without them: every booking's holds scanned for every node and every
candidate start."""

from __future__ import annotations

import datetime as dt
import random
from dataclasses import replace

import pytest

from llmsizer.provider.placement import Booking, Held, Item, JobNeed, earliest, try_window

from .conftest import inv

T0 = dt.datetime(2026, 1, 1)


def _inventory(rng: random.Random):
    lines = ["sites: [{id: s1, fabrics: [{id: f1}, {id: f2}]}]", "nodes:"]
    for k in range(rng.randrange(2, 6)):
        pool = rng.choice(["training", "serving", "training, serving"])
        fab = rng.choice(["f1", "f2"])
        lines.append(f"  - {{id: n{k}, site: s1, device: h100-sxm, devices: {rng.choice([4, 8])}, ram: 1 TiB, "
                     f"fabric: {fab}, pools: [{pool}]}}")
    if rng.random() < 0.5:
        lines.append("maintenance: [{site: s1, start: 2026-01-05 00:00, end: 2026-01-06 00:00}]")
    return inv("\n".join(lines) + "\n")


def _bookings(rng: random.Random, inventory) -> list[Booking]:
    out = []
    for b in range(rng.randrange(0, 40)):
        n = rng.choice(inventory.nodes)
        start = T0 + dt.timedelta(hours=rng.randrange(-48, 30 * 24))
        end = start + dt.timedelta(hours=rng.randrange(1, 6 * 24))
        amount = rng.randrange(1, n.devices + 1)
        items = (Item(f"node:{n.id}", amount, start, end),
                 Item(f"ram:{n.id}", n.ram * amount / n.devices, start, end))
        out.append(Booking(f"b{b}", f"j{b}", rng.choice(["training", "inference"]), items))
    return out


def _load(items: list[Item], res: str, lo: dt.datetime, hi: dt.datetime) -> float:
    its = [i for i in items if i.resource == res and i.start < hi and i.end > lo]
    points = {lo} | {i.start for i in its if lo <= i.start < hi}
    return max((sum(i.amount for i in its if i.start <= p < i.end) for p in points), default=0.0)


def reference(need: JobNeed, inventory, bookings: list[Booking], start: dt.datetime) -> tuple[str, ...] | None:
    """The nodes a brute-force placement takes at ``start`` (same choice rule: per site/fabric group in order,
    the smallest free nodes first), or None."""
    end = start + dt.timedelta(seconds=need.seconds)
    items = [i for b in bookings for i in b.items]
    per = need.per_node
    free = []
    for n in inventory.nodes:
        if n.device != need.device or need.label not in n.pools or n.devices < per:
            continue
        if not need.accepts_maintenance and any(n.id in m.nodes and m.start < end and m.end > start
                                                for m in inventory.maintenance):
            continue
        if any(b.kind != need.kind and i.resource == f"node:{n.id}" and i.start < end and i.end > start
               for b in bookings for i in b.items):
            continue
        if _load(items, f"node:{n.id}", start, end) + per > n.devices + 1e-9:
            continue
        if _load(items, f"ram:{n.id}", start, end) + n.ram * per / n.devices > n.ram + 1e-9:
            continue
        free.append(n)
    groups: dict[tuple[str, str], list] = {}
    # collectives between the nodes: a training run's, a service's whose one model copy spans machines; a service
    # whose copies each fit one machine has none between its nodes
    fabric = need.nodes > 1 and (need.kind == "training" or need.copy_nodes > 1)
    for n in free:
        if fabric and n.fabric is None:
            continue
        groups.setdefault((n.site, (n.fabric or "") if fabric else ""), []).append(n)
    for _, group in sorted(groups.items(), key=lambda kv: kv[0]):
        if len(group) >= need.nodes:
            return tuple(n.id for n in sorted(group, key=lambda n: (n.devices, n.id))[:need.nodes])
    return None


@pytest.mark.parametrize("seed", range(80))
def test_index_and_search_match_brute_force(seed):
    rng = random.Random(seed)
    inventory = _inventory(rng)
    bookings = _bookings(rng, inventory)
    need = JobNeed("x", rng.choice(["training", "inference"]), "h100-sxm", rng.choice([1, 2, 4, 8, 16]),
                   rng.choice([1, 1, 2]), rng.randrange(1, 8 * 24) * 3600.0, T0, copy_nodes=rng.choice([1, 2]))
    held = Held(bookings)
    # every single start: the indexed window check agrees with the brute force
    candidates = sorted({T0} | {i.end for b in bookings for i in b.items if i.end > T0}
                        | {m.end for m in inventory.maintenance if m.end > T0})
    for t in candidates[:40]:
        want = reference(need, inventory, bookings, t)
        try:
            got = try_window(need, inventory, held, t).nodes
        except Exception as e:  # NoFit
            assert want is None, (t, want, e)
        else:
            assert got == want, t
    # the earliest window from each of several starts: the first candidate start the brute force accepts
    for t0 in candidates[:12]:
        want_t = next(((t, nodes) for t in candidates if t >= t0 and (nodes := reference(need, inventory, bookings,
                                                                                           t))), None)
        p, _ = earliest(replace(need, start=t0), inventory, bookings)
        assert (None if p is None else (p.start, p.nodes)) == want_t, t0


def test_index_add_keeps_queries_right():
    a = Item("node:n", 2, T0, T0 + dt.timedelta(days=10))
    b = Item("node:n", 1, T0 + dt.timedelta(days=3), T0 + dt.timedelta(days=4))
    held = Held([Booking("a", "a", "training", (a,))])
    held.add(Booking("b", "b", "training", (b,)))
    day = dt.timedelta(days=1)
    assert [i for i, _ in held.overlapping("node:n", T0 + 9 * day, T0 + 11 * day)] == [a]  # the long one, found
    assert {i for i, _ in held.overlapping("node:n", T0 + 3 * day, T0 + 3 * day + dt.timedelta(hours=1))} == {a, b}
    assert held.overlapping("node:n", T0 + 10 * day, T0 + 11 * day) == []  # end excluded
    assert held.overflow([Item("node:n", 6, T0 + 3 * day, T0 + 5 * day)], {"node:n": 8}) == [("node:n", 9.0, 8)]
