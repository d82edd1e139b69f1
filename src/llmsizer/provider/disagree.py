"""Where the inventory and the live bookings disagree after the inventory changed: the one rule per kind, pure logic,
no I/O. ``capacity show`` (CLI and ``GET /capacity/show``), the console and the web's inventory editor
(``PUT /capacity/inventory``) list them with :func:`disagreements`; the lifecycle steps that take capacity refuse
over them.

- **orphaned**: a booking on a node the inventory no longer has, or has with another device
  (:func:`.store.orphaned`; hold, confirm and activate refuse: :func:`.store.moving_refusal`).
- **in maintenance**: a booking whose hold on a node overlaps a provider maintenance window on that node that the
  booking's job did not agree to (:func:`in_maintenance`). Placement never places a job across a window it does not
  accept (:func:`.placement._maintenance_ok`, by the job's :class:`~.windows.Agreement`), so such a window was added
  over the booking. What the job agreed to is recorded with the booking (schema 5, :func:`agreed`): a training run
  none; a service the windows its request states (``service.maintenance_windows``, ``interruptible``), or none.
  A window it agreed to is no disagreement and is not listed; one it did not agree to is listed, and hold, confirm
  and activate refuse the booking (:func:`maintenance_refusal`, naming the window). A service booked before the
  store recorded agreements (schema < 5) is listed with its agreement unknown, and not refused: one booked across a
  window it accepted cannot be told from one the window was added over.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ..request.windows import Agreement
from .inventory import Inventory, Maintenance
from .placement import Booking
from .store import LIVE, orphan_remedy, orphan_text, orphaned, out_of_service, out_of_service_text

#: why a service booked before schema 5 is listed, not refused
UNKNOWN = ("it was booked before the store recorded the maintenance windows a service's request agreed to, so "
           "whether it agreed to this one is unknown (listed, not refused)")


def agreed(b: Booking) -> Agreement | None:
    """What booking ``b``'s job agreed to: as recorded at booking (schema 5); a training booking made before schema 5
    agreed to none (placement's rule: training never runs across a provider window); None: a service booked before
    schema 5, not known."""
    if b.agreement is not None:
        return b.agreement
    return Agreement() if b.kind == "training" else None


@dataclass(frozen=True)
class InMaintenance:
    """Live booking ``id`` holds ``node`` across the provider's maintenance ``window`` there, which its job did not
    agree to (``agreement`` what it agreed to) or, ``agreement`` None, may have (booked before schema 5)."""

    id: str
    job: str
    kind: str
    node: str
    window: Maintenance
    agreement: Agreement | None

    @property
    def refused(self) -> bool:
        return self.agreement is not None

    def why(self) -> str:
        a = self.agreement
        if a is None:
            return UNKNOWN
        if self.kind == "training":
            return "a training job does not run across the provider's maintenance windows"
        if not a.accepts:
            return "its request agreed to no maintenance window"
        return f"it lies outside the maintenance windows its request agreed to ({'; '.join(a.windows)})"

    def to_dict(self) -> dict[str, Any]:
        m = self.window
        return {"reservation": self.id, "job": self.job, "kind": self.kind, "node": self.node,
                "start": m.start.isoformat(), "end": m.end.isoformat(), "note": m.note,
                "refused": self.refused,
                "agreed_windows": None if self.agreement is None else list(self.agreement.windows),
                "why": self.why()}


def in_maintenance(inv: Inventory, bookings: Sequence[Booking]) -> list[InMaintenance]:
    """Every (booking, node, window) where a live booking of ``bookings`` holds ``node:<id>`` over an interval
    that overlaps (``m.start < hold end and m.end > hold start``, half-open as placement's rule) a maintenance window
    of the inventory that lists that node, and the booking's job did not agree to it (:func:`agreed`, the
    agreement's ``covers``: placement's rule) or its agreement is not known; in the order of the bookings, each
    (booking, node, window) once."""
    on: dict[str, list[Maintenance]] = {}
    for m in inv.maintenance:
        for nid in m.nodes:
            on.setdefault(nid, []).append(m)
    out: list[InMaintenance] = []
    seen: set[tuple[str, str, int]] = set()
    for b in bookings:
        if b.state not in LIVE and b.state != "tentative":
            continue
        a = agreed(b)
        for i in b.items:
            if not i.resource.startswith("node:"):
                continue
            nid = i.resource[len("node:"):]
            for k, m in enumerate(on.get(nid, ())):
                if m.start < i.end and m.end > i.start and (b.id, nid, k) not in seen and \
                        not (a is not None and a.covers(m.start, m.end)):
                    seen.add((b.id, nid, k))
                    out.append(InMaintenance(b.id, b.job, b.kind, nid, m, a))
    return out


def _window(m: Maintenance) -> str:
    return f"{m.start:%Y-%m-%d %H:%M}-{m.end:%Y-%m-%d %H:%M}" + (f" {m.note}" if m.note else "")


def maintenance_text(found: Sequence[InMaintenance]) -> str:
    """One clause per finding: the booking, the node, the window and why it is listed."""
    return "; ".join(f"booking {f.id} ({f.job}, {f.kind}) on node {f.node!r} runs across the provider's "
                     f"maintenance window {_window(f.window)}: {f.why()}" for f in found)


def maintenance_refusal(inv: Inventory, live: Sequence[Booking], rid: str) -> str | None:
    """Why booking ``rid`` (among ``live``) may not take capacity (hold, confirm, activate) over the inventory's
    maintenance windows: a window in its run on one of its nodes that its job did not agree to; None otherwise
    (none, or a service booked before schema 5, whose agreement is not known: see the module's note)."""
    found = [f for f in in_maintenance(inv, [b for b in live if b.id == rid]) if f.refused]
    if not found:
        return None
    return (f"{maintenance_text(found)} (the window was added after it was booked); release it and book again "
            "(`capacity book --earliest` places it after the window), or move the window")


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


def inventory_warnings(inv: Inventory, live: Sequence[Booking], inventory: str, *, web: bool = False) -> list[str]:
    """Every warning ``capacity show`` prints of an inventory, one line each, and what the inventory editor and the
    console answer with: the reader's own (``Inventory.warnings``: a node's RAM below its devices' memory), then
    :func:`disagreement_warnings`. ``web``: the console's, whose viewer may not be the operator: the reader's lines
    name "the provider's inventory" and its line, not the file's path on the server."""
    own = list(inv.warnings)
    if web:
        own = [f"the provider's inventory, line {w.removeprefix(inv.source + ':')}"
               if w.startswith(inv.source + ":") else w for w in own]
    return [*own, *disagreement_warnings(inv, live, inventory, web=web)]


def disagreement_warnings(inv: Inventory, live: Sequence[Booking], inventory: str, *,
                          web: bool = False) -> list[str]:
    """The warnings (one line each) ``capacity show`` prints and the inventory editor answers with: the commands
    name ``inventory``, the inventory file the bookings are checked against. ``web``: listed by the console, whose
    viewer may not be the operator: the remedy in the console's words, naming no server path or command
    (store.orphan_remedy, the one wording of both)."""
    out = []
    orphans = orphaned(inv, live)
    if orphans:
        out.append(f"{orphan_text(orphans)}; the chart does not show them as booked ("
                   f"{orphan_remedy(inventory, '', named=False, web=web)})")
    drained = out_of_service(inv, live)
    if drained:
        out.append(out_of_service_text(drained))
    found = in_maintenance(inv, live)
    refused = [f for f in found if f.refused]
    if refused:
        out.append(f"{maintenance_text(refused)}; hold, confirm and activate refuse a booking across a window its "
                   "job did not agree to")
    unknown = [f for f in found if not f.refused]
    if unknown:
        out.append(maintenance_text(unknown))
    return out
