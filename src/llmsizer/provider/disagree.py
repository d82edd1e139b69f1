"""Where the inventory and the live bookings disagree after the inventory changed: the one rule per kind, pure logic,
no I/O. ``capacity show`` (CLI and ``GET /capacity/show``), the console and the web's inventory editor
(``PUT /capacity/inventory``) list them with :func:`disagreements`; the lifecycle steps that take capacity refuse
over them.

- **orphaned**: a booking on a node the inventory no longer has, or has with another device
  (:func:`.store.orphaned`; hold, confirm and activate refuse: :func:`.store.moving_refusal`).
- **in maintenance**: a booking whose hold on a node overlaps a provider maintenance window on that node
  (:func:`in_maintenance`). A window added over a booking is what it catches: placement never places a job across
  a window it does not accept (:func:`.placement._maintenance_ok`). A *training* booking never accepts one
  (placement's rule: only a service that states its own windows or interruptible periods does), so hold, confirm
  and activate refuse it (:func:`maintenance_refusal`, naming the window). A *service* booking is listed, not
  refused: the store keeps no record of the windows its request agreed to (``replace.py``'s table: "maintenance
  acceptance is not stored"), so one booked across a window it agreed to cannot be told from one the window was
  added over.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from .inventory import Inventory, Maintenance
from .placement import Booking
from .store import LIVE, orphan_text, orphaned


@dataclass(frozen=True)
class InMaintenance:
    """Live booking ``id`` holds ``node`` across the provider's maintenance ``window`` there."""

    id: str
    job: str
    kind: str
    node: str
    window: Maintenance

    def to_dict(self) -> dict[str, Any]:
        m = self.window
        return {"reservation": self.id, "job": self.job, "kind": self.kind, "node": self.node,
                "start": m.start.isoformat(), "end": m.end.isoformat(), "note": m.note,
                "refused": self.kind == "training"}


def in_maintenance(inv: Inventory, bookings: Sequence[Booking]) -> list[InMaintenance]:
    """Every (booking, node, window) where a live booking of ``bookings`` holds ``node:<id>`` over an interval
    that overlaps (``m.start < hold end and m.end > hold start``, half-open as placement's rule) a maintenance window
    of the inventory that lists that node; in the order of the bookings, each (booking, node, window) once."""
    on: dict[str, list[Maintenance]] = {}
    for m in inv.maintenance:
        for nid in m.nodes:
            on.setdefault(nid, []).append(m)
    out: list[InMaintenance] = []
    seen: set[tuple[str, str, int]] = set()
    for b in bookings:
        if b.state not in LIVE and b.state != "tentative":
            continue
        for i in b.items:
            if not i.resource.startswith("node:"):
                continue
            nid = i.resource[len("node:"):]
            for k, m in enumerate(on.get(nid, ())):
                if m.start < i.end and m.end > i.start and (b.id, nid, k) not in seen:
                    seen.add((b.id, nid, k))
                    out.append(InMaintenance(b.id, b.job, b.kind, nid, m))
    return out


def _window(m: Maintenance) -> str:
    return f"{m.start:%Y-%m-%d %H:%M}-{m.end:%Y-%m-%d %H:%M}" + (f" {m.note}" if m.note else "")


def maintenance_text(found: Sequence[InMaintenance]) -> str:
    return "; ".join(f"booking {f.id} ({f.job}, {f.kind}) on node {f.node!r} runs across the provider's "
                     f"maintenance window {_window(f.window)}" for f in found)


def maintenance_refusal(inv: Inventory, live: Sequence[Booking], rid: str) -> str | None:
    """Why booking ``rid`` (among ``live``) may not take capacity (hold, confirm, activate) over the inventory's
    maintenance windows: a training booking on a node with a window in its run; None otherwise (a service: see
    the module's note)."""
    found = [f for f in in_maintenance(inv, [b for b in live if b.id == rid]) if f.kind == "training"]
    if not found:
        return None
    return (f"{maintenance_text(found)}: a training job does not run across the provider's maintenance windows "
            "(the window was added after it was booked); release it and book again (`capacity book --earliest` "
            "places it after the window), or move the window")


def disagreements(inv: Inventory, live: Sequence[Booking]) -> dict[str, list[dict[str, Any]]]:
    """What ``show``, the console and the inventory editor list: ``orphaned`` and ``maintenance`` (each only when
    some booking is so). ``live``: every live booking, requested ones too."""
    out: dict[str, list[dict[str, Any]]] = {}
    orphans = orphaned(inv, live)
    if orphans:
        out["orphaned"] = [o.to_dict() for o in orphans]
    found = in_maintenance(inv, live)
    if found:
        out["maintenance"] = [f.to_dict() for f in found]
    return out


def disagreement_warnings(inv: Inventory, live: Sequence[Booking], inventory: str) -> list[str]:
    """The warnings (one line each) ``capacity show`` prints and the inventory editor answers with: the commands
    name ``inventory``, the inventory file the bookings are checked against."""
    out = []
    orphans = orphaned(inv, live)
    if orphans:
        out.append(f"{orphan_text(orphans)}; the chart does not show them as booked (restore the node in the "
                   f"inventory, move them with `llmsizer capacity re-place --inventory {inventory}`, or release "
                   f"them with `llmsizer capacity release --orphans --inventory {inventory}`)")
    found = in_maintenance(inv, live)
    if found:
        out.append(f"{maintenance_text(found)}: hold, confirm and activate refuse a training booking so; a "
                   "service's may be one it agreed to (its request's maintenance windows are not stored)")
    return out
