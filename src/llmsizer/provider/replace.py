"""Re-place orphaned bookings (``capacity re-place``): a booking whose node the inventory renamed or re-equipped
(:func:`store.orphaned`) is moved to a node that holds it, or reported with the check's reason. Pure logic, no I/O;
the move itself is one store transaction (:meth:`store.Store.move`).

The one placement rule is :func:`placement.try_window` (what ``capacity check`` and ``book`` place with): each
orphaned booking's *stored job* is placed again in its own window on the current inventory, against every other
live booking (and the moves before it). The stored job is what the store keeps of the job, nothing more:

======================  ===============================================================================
JobNeed field           from the stored booking
======================  ===============================================================================
kind, name              the reservation's kind and job
device                  the reservation's device (schema 3); a booking made before records none: not moved
devices, nodes          the amount held of each ``node:`` resource, the number of them
start, seconds          the window of its ``node:`` holds (an ongoing service: ending at ONGOING_END)
device_kind, memory     the catalog's kind of the device; a CPU job's memory per device from its ``ram:`` hold
team                    its quota usage hold (``usage:<team>:<device>``), so the team's quota is re-checked
fixed_address           an ``addr:`` hold; isolation: a ``seg:`` hold
accepts_maintenance     and maintenance_windows: what its request agreed to (schema 5, ``maintenance_agreed``);
                        a booking made before records none: it moves as a job that accepts no maintenance
======================  ===============================================================================

The request's data policy, pool and network are not stored, so a booking is only moved
within the site it was booked at (the site its ``storage:``/``addr:``/``seg:`` holds name, or of its node's id in
the inventory, or of the node the old id was renamed to); its storage
holds (a pool at that site) are kept as they are. Where the inventory maps an old node id cleanly to a new one
(:func:`renamed_to`: one node of the booked device whose id is the old one with leading zeros and separators
dropped, gpu-07 -> gpu-7), that node is tried first. A multi-node booking keeps the nodes that still hold it
(never orphaned, or renamed) and only its orphaned ones are replaced by free nodes at the site; only when those
cannot hold it is it placed on any free nodes there. The answer says, per old node, what happened: kept, renamed,
or replaced (and why). Requested bookings (holds planned, none taken) are re-placed the same way and block no
other booking.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, replace

from ..request.windows import Agreement
from .inventory import Inventory, Node
from .placement import ONGOING_END, Booking, Held, Item, JobNeed, NoFit, Placement, suitable, try_window
from .quota import USAGE

#: holds that stay as they are when a booking moves (a storage pool of its site); every other hold is placed again
KEPT = ("storage:",)


@dataclass(frozen=True)
class Move:
    """Booking ``id`` moves from ``old`` holds to ``placement``'s items (plus its ``kept`` storage holds)."""

    id: str
    job: str
    old_nodes: tuple[str, ...]
    placement: Placement
    kept: tuple[Item, ...]
    how: str  # which node and why: the old node's new name, or the first free node of the device at the site
    before: tuple[Item, ...] = ()  # the holds the move was planned from (the store refuses when they changed)

    @property
    def items(self) -> tuple[Item, ...]:
        return (*self.placement.items, *self.kept)

    def to_dict(self) -> dict[str, object]:
        return {"id": self.id, "job": self.job, "from": list(self.old_nodes), "to": list(self.placement.nodes),
                "how": self.how}


@dataclass(frozen=True)
class Stuck:
    """Booking ``id`` cannot be re-placed: the check's binding constraint and reason."""

    id: str
    job: str
    old_nodes: tuple[str, ...]
    binding: str
    reason: str

    def to_dict(self) -> dict[str, object]:
        return {"id": self.id, "job": self.job, "from": list(self.old_nodes), "binding": self.binding,
                "reason": self.reason}


def _name_key(ident: str) -> tuple[object, ...]:
    """A node id with case, separators and leading zeros dropped: gpu-07, GPU_7 and gpu7 are one key."""
    return tuple(int(t) if t.isdigit() else t for t in re.findall(r"[a-z]+|\d+", ident.lower()))


def renamed_to(old: str, device: str, inv: Inventory) -> Node | None:
    """The node ``old`` was renamed to, when the inventory maps it cleanly: exactly one node of ``device`` whose id
    is ``old``'s once case, separators and leading zeros are dropped (and ``old`` itself is not in the inventory);
    None otherwise (no such node, or several)."""
    if any(n.id == old for n in inv.nodes):
        return None
    key = _name_key(old)
    hits = [n for n in inv.nodes if n.device == device and _name_key(n.id) == key]
    return hits[0] if len(hits) == 1 else None


def stored_need(b: Booking, device_kind: str) -> JobNeed:
    """The booking's stored job as a :class:`JobNeed` (the table in the module docstring)."""
    nodes = [i for i in b.items if i.resource.startswith("node:")]
    per_node = int(max(i.amount for i in nodes))
    start = min(i.start for i in nodes)
    end = max(i.end for i in nodes)
    ram = [i.amount for i in b.items if i.resource.startswith("ram:")]
    memory = int(max(ram) / per_node) if device_kind == "cpu" and ram else 0
    team = next((i.resource[len(USAGE):].rsplit(":", 1)[0] for i in b.items if i.resource.startswith(USAGE)), None)
    agreed = b.agreement or Agreement()
    return JobNeed(b.job, b.kind, b.device, per_node * len(nodes), len(nodes), seconds=(end - start).total_seconds(),
                   start=start, memory_per_device=memory, verdict_need_per_device=memory, device_kind=device_kind,
                   fixed_address=any(i.resource.startswith("addr:") for i in b.items),
                   isolation="isolated" if any(i.resource.startswith("seg:") for i in b.items) else None,
                   ongoing=end >= ONGOING_END, team=team, accepts_maintenance=agreed.accepts,
                   maintenance_windows=agreed.windows, copy_nodes=b.copy_nodes or 1)


def _site(b: Booking, inv: Inventory, preferred: Sequence[Node]) -> str | None:
    """The site the booking was placed at, as far as the store and the inventory tell."""
    pools = {s.id: s.site for s in inv.storage}
    for i in b.items:
        kind, _, rest = i.resource.partition(":")
        if kind in ("addr", "seg"):
            return rest
        if kind == "storage" and rest in pools:
            return pools[rest]
    known = {n.id: n.site for n in inv.nodes}
    for i in b.items:
        if i.resource.startswith("node:") and i.resource[5:] in known:
            return known[i.resource[5:]]
    return preferred[0].site if preferred else None


def _mapped(old: Sequence[str], device: str, inv: Inventory) -> dict[str, Node]:
    """Old node id -> the node that still is it: the same id with the booked device (never orphaned), or the node it
    was cleanly renamed to (:func:`renamed_to`); an old node with neither is absent."""
    nodes = {n.id: n for n in inv.nodes}
    out: dict[str, Node] = {}
    for nid in old:
        n = nodes.get(nid)
        n = n if n is not None and n.device == device else renamed_to(nid, device, inv)
        if n is not None:
            out[nid] = n
    return out


def _how(old: Sequence[str], mapped: dict[str, Node], to: Sequence[str], fill: str) -> str:
    """What happened to each old node: kept (never orphaned), renamed, or replaced by a free node (``fill``)."""
    if all(mapped.get(o) is not None and mapped[o].id == o for o in old) and list(to) == list(old):
        return "its own node"
    parts = []
    kept = {n.id for n in mapped.values()}
    spare = iter(t for t in to if t not in kept)
    for o in old:
        n = mapped.get(o)
        if n is not None and n.id in to:
            parts.append(f"{o} kept (not orphaned)" if n.id == o else
                         f"{o} -> {n.id} (the old node's new name, same device)")
        else:
            parts.append(f"{o} -> {next(spare, '?')} ({fill})")
    return "; ".join(parts)


def plan_moves(inv: Inventory, live: Sequence[Booking], orphan_ids: Sequence[str],
               device_kind: dict[str, str]) -> tuple[list[Move], list[Stuck]]:
    """Where each booking of ``orphan_ids`` (among ``live``: every capacity-holding booking, and the requested
    ones) goes, in order: each placed by :func:`try_window` in its own window against the other capacity-holding
    bookings and the moves before it (a requested booking holds nothing: it blocks no other, moved or not).
    A booking's nodes that still hold it (never orphaned, or renamed cleanly) are kept, and only the others are
    replaced by free nodes at its site; when those cannot hold it, any free nodes at the site.
    ``device_kind``: catalog device id -> its kind (gpu, cpu, ...)."""
    moving = set(orphan_ids)
    held = Held([b for b in live if b.id not in moving and b.state != "requested"])
    by_id = {b.id: b for b in live}
    moves: list[Move] = []
    stuck: list[Stuck] = []
    for rid in orphan_ids:
        b = by_id[rid]
        old = tuple(i.resource[5:] for i in b.items if i.resource.startswith("node:"))
        if not b.device:
            stuck.append(Stuck(rid, b.job, old, "device", "booked before the store recorded the device (schema 3): "
                               "what it needs cannot be told; restore the node in the inventory or release it"))
            continue
        need = stored_need(b, device_kind.get(b.device, "gpu"))
        mapped = _mapped(old, b.device, inv)
        preferred = list(mapped.values())
        site = _site(b, inv, preferred)
        try:
            if site is None:
                raise NoFit("policy", "the store keeps no data policy of the job and no hold or node names the site "
                            "it was booked at, so it is not moved to another site", waits=False)
            at_site = [n for n in suitable(need, inv) if n.site == site]
            if not at_site:
                raise NoFit("device", f"no {need.label} node of {b.device} with {need.per_node} device(s) at site "
                            f"{site} (the job is kept at the site it was booked at)", waits=False)
            p = _keep_what_holds(need, inv, held, at_site, [n for n in at_site if n in preferred], len(old))
            fill = f"a free {b.device} node at {site}"
            if p is not None:
                how = _how(old, mapped, p.nodes, fill + ": the inventory has no node that is the old one")
            else:
                p = try_window(need, inv, held, need.start, nodes=at_site)
                why = ("no node of the inventory is the old one renamed" if not preferred else
                       f"{', '.join(n.id for n in preferred)} (the old node(s) as the inventory has them) cannot "
                       "hold it for the window")
                how = _how(old, mapped, p.nodes, f"{fill}; {why}")
        except NoFit as e:
            stuck.append(Stuck(rid, b.job, old, e.binding, e.reason))
            continue
        kept = tuple(i for i in b.items if i.resource.startswith(KEPT))
        move = Move(rid, b.job, old, p, kept, how, b.items)
        moves.append(move)
        if b.state != "requested":  # a requested booking takes nothing until it is held
            held.add(Booking(f"moving:{rid}", b.job, b.kind, move.items, "tentative"))
    return moves, stuck


def _keep_what_holds(need: JobNeed, inv: Inventory, held: Held, at_site: list[Node], first: list[Node],
                     count: int) -> Placement | None:
    """The booking on the nodes that still hold it (``first``) plus free nodes at its site for the rest (one
    fabric with them for a job with collectives between its nodes, ``JobNeed.one_fabric``, as :func:`try_window`
    places it), or None when those cannot hold it or none of its nodes is left."""
    if not first:
        return None
    try:
        chosen = list(first)
        k = count - len(first)
        if k > 0:
            fabric = need.one_fabric
            rest = [n for n in at_site if n not in first and (not fabric or n.fabric == first[0].fabric)]
            extra = try_window(replace(need, devices=need.per_node * k, nodes=k), inv, held, need.start, nodes=rest)
            chosen += [n for n in rest if n.id in extra.nodes]
        return try_window(need, inv, held, need.start, nodes=chosen)
    except NoFit:
        return None
