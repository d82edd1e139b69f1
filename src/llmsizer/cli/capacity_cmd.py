"""`llmsizer capacity check|book|confirm|release|show`: the provider's side. Does each job of a request fit in the
inventory, given the bookings already made; record a placement atomically; release it; show utilisation."""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import sys
from pathlib import Path
from typing import Any

from ..errors import InputError
from ..inputs import check_output
from ..render.safe import say
from .commands import COMMAND_HELP

EPILOG = """examples:
  llmsizer capacity check examples/pretraining-multinode.yaml --inventory examples/provider/inventory.yaml
  llmsizer capacity book examples/pretraining-multinode.yaml --inventory examples/provider/inventory.yaml --db bookings.db
  llmsizer capacity book my-request.yaml --inventory inv.yaml --db postgresql://user@host/llmsizer --earliest
  llmsizer capacity show --inventory examples/provider/inventory.yaml --db bookings.db --at 2025-10-05 --svg usage.svg
  llmsizer capacity show --inventory examples/provider/inventory.yaml --db bookings.db --html capacity.html
  llmsizer capacity release 3f2a9c0d1e4b --db bookings.db

--db is a SQLite file (default: llmsizer-bookings.db, created on first use) or a postgresql:// URL (needs
`pip install 'llmsizer[provider]'`). Exit status of check/book: 0 when every job fits (is booked), 1 when some
do not, 2 on invalid input or a booking that no longer fits. `book` is all or none: every job of the request
is recorded in one transaction, or nothing is.
"""


def register(sub: Any) -> None:
    p = sub.add_parser("capacity", help=COMMAND_HELP["capacity"],
                       description="Check a request against a provider's inventory and bookings, book placements "
                                   "atomically, release them, show utilisation over time.",
                       epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    cs = p.add_subparsers(dest="capacity_command", metavar="ACTION")

    def common(q: argparse.ArgumentParser, inventory: bool = True) -> None:
        if inventory:
            q.add_argument("--inventory", required=True, metavar="FILE", help="inventory file (YAML)")
            q.add_argument("--hardware-file", action="append", default=[], metavar="FILE",
                           help="extra hardware (JSON/YAML)")
        q.add_argument("--db", metavar="URL", help="reservation store: SQLite file (default llmsizer-bookings.db) "
                                                   "or postgresql://... URL")

    for name, helptext in (("check", "does each job fit, where and when; the binding constraint and alternatives"),
                           ("book", "check, then record the placements atomically")):
        q = cs.add_parser(name, help=helptext, description=helptext, epilog=EPILOG,
                          formatter_class=argparse.RawDescriptionHelpFormatter)
        q.add_argument("request", help="request file (YAML)")
        common(q)
        q.add_argument("--no-db", action="store_true", help="ignore existing bookings (check only)")
        q.add_argument("--now", help="time the check is made, for jobs without a start (UTC, default now)")
        q.add_argument("--json", action="store_true", help="print the result as JSON")
        if name == "book":
            q.add_argument("--job", action="append", default=[], help="book only these jobs (default: all)")
            q.add_argument("--earliest", action="store_true",
                           help="book the earliest window when the requested one does not fit")
            q.add_argument("--tentative", action="store_true", help="book as tentative (default: confirmed)")
        q.set_defaults(func=cmd_check if name == "check" else cmd_book)
    for name, state in (("release", "released"), ("confirm", "confirmed")):
        q = cs.add_parser(name, help=f"mark reservations {state}")
        q.add_argument("ids", nargs="+", metavar="ID", help="reservation ids (see `capacity show`)")
        common(q, inventory=False)
        q.set_defaults(func=cmd_state, state=state)
    q = cs.add_parser("show", help="reservations and utilisation over time")
    common(q)
    q.add_argument("--at", help="utilisation of every resource at this time (UTC)")
    q.add_argument("--svg", metavar="FILE", help="write the utilisation timeline as an SVG chart")
    q.add_argument("--html", metavar="FILE", help="write a self-contained HTML page: the timeline chart per device "
                                                  "type and the bookings table")
    q.add_argument("--json", action="store_true")
    q.set_defaults(func=cmd_show)
    p.set_defaults(func=lambda a: (p.print_help(), 2)[1])


def _store(args: argparse.Namespace) -> Any:
    from ..provider.store import Store
    return Store(args.db)


def _now(text: str | None) -> _dt.datetime | None:
    if not text:
        return None
    from ..provider.inventory import parse_time
    return parse_time(text)


def _checks(args: argparse.Namespace) -> tuple[Any, list[Any]]:
    from ..plan import make_plan
    from ..provider.inventory import load_inventory
    from ..provider.needs import needs_from_plan
    from ..provider.placement import check_needs
    from ..request import load_request

    inv = load_inventory(args.inventory, hardware_files=args.hardware_file)
    req = load_request(args.request, hardware_files=args.hardware_file)
    plan = make_plan(req, hardware_files=args.hardware_file, alternatives=False)
    needs = needs_from_plan(plan, req, _now(args.now))
    if getattr(args, "job", None):
        unknown = [j for j in args.job if j not in {n.name for n in needs}]
        if unknown:
            raise InputError(f"--job {unknown[0]!r}: no such job with hardware in {args.request}")
        needs = [n for n in needs if n.name in args.job]
    bookings = [] if args.no_db else _store(args).bookings()
    return inv, check_needs(needs, inv, bookings)


def _fmt(t: _dt.datetime) -> str:
    return f"{t:%Y-%m-%d %H:%M}"


def render_checks(checks: list[Any]) -> str:
    out = []
    for c in checks:
        n = c.need
        head = f"{n.name} ({n.kind}): {n.devices} x {n.device}" + (f" on {n.nodes} nodes" if n.nodes > 1 else "") \
            + f", {n.seconds / 3600:.1f} h from {_fmt(n.start)}, storage peak {n.storage_peak / 1e12:.2f} TB"
        out.append(head)
        p = c.placement
        if c.fits and p is not None:
            out.append(f"  FITS     at {p.site}: {', '.join(p.nodes)}; storage {p.storage_pool or '-'}; "
                       f"{_fmt(p.start)} -> {_fmt(p.end)}")
        else:
            out.append(f"  DOES NOT FIT in the requested window: [{c.binding}] {c.reason}")
            for a in c.alternatives:
                out.append(f"  - {a}")
            if p is None:
                out.append("  no window found within two years")
    return "\n".join(out)


def cmd_check(args: argparse.Namespace) -> int:
    _, checks = _checks(args)
    if args.json:
        json.dump([c.to_dict() for c in checks], sys.stdout, indent=2, default=str)
        sys.stdout.write("\n")
    else:
        say(render_checks(checks))
    return 0 if all(c.fits for c in checks) else 1


def cmd_book(args: argparse.Namespace) -> int:
    """All or none: when some job of the request does not fit, nothing is booked; the jobs that do fit are
    booked together in one transaction (re-checked under the same locks), so either all are recorded or none."""
    from ..provider.placement import capacities
    inv, checks = _checks(args)
    store = _store(args)
    cap = capacities(inv)
    missing = [c for c in checks if c.placement is None or (not c.fits and not args.earliest)]
    for c in missing:
        say(f"{c.need.name}: not booked: [{c.binding}] {c.reason}", file=sys.stderr)
    if missing:
        if len(checks) > 1:
            say("nothing of this request was booked (all or none)", file=sys.stderr)
        if args.json:
            json.dump([], sys.stdout)
            sys.stdout.write("\n")
        return 1
    placements = [c.placement for c in checks if c.placement is not None]
    rids = store.book_all(placements, cap, state="tentative" if args.tentative else "confirmed",
                          note=str(args.request))
    booked = [{"id": rid, "job": p.job, "start": p.start.isoformat(), "end": p.end.isoformat(),
               "nodes": list(p.nodes)} for rid, p in zip(rids, placements, strict=True)]
    if args.json:
        json.dump(booked, sys.stdout, indent=2)
        sys.stdout.write("\n")
    else:
        for b in booked:
            say(f"booked {b['id']}: {b['job']} {b['start']} -> {b['end']} on {', '.join(b['nodes'])}")
    return 0


def cmd_state(args: argparse.Namespace) -> int:
    store = _store(args)
    for rid in args.ids:
        store.set_state(rid, args.state)
        say(f"{rid}: {args.state}")
    return 0


def timeline(inv: Any, bookings: list[Any], points: int = 40) -> tuple[list[_dt.datetime], dict[str, list[float]]]:
    """Share of each device type's devices held, at ``points`` moments spanning the bookings."""
    from ..provider.report import timeline as _timeline
    return _timeline(inv, bookings, points)


def cmd_show(args: argparse.Namespace) -> int:
    from ..provider.inventory import load_inventory
    from ..provider.placement import capacities
    from ..provider.store import utilisation
    inputs = [args.inventory, args.db, *(args.hardware_file or ())]
    for out in (args.svg, args.html):
        if out:
            check_output(out, inputs)  # before any work
    inv = load_inventory(args.inventory, hardware_files=args.hardware_file)
    store = _store(args)
    rows = store.reservations()
    bookings = store.bookings()
    at = _now(args.at)
    if args.json:
        data: dict[str, Any] = {"reservations": rows}
        if at:
            data["utilisation"] = utilisation(bookings, capacities(inv), at)
        json.dump(data, sys.stdout, indent=2, default=str)
        sys.stdout.write("\n")
    else:
        say(f"{len(rows)} reservation(s)")
        for r in rows:
            say(f"  {r['id']}  {r['state']:<10} {r['job']:<24} {_fmt(r['start'])} -> {_fmt(r['end'])}")
        times, series = timeline(inv, bookings)
        if times:
            say(f"devices held, {_fmt(times[0])} .. {_fmt(times[-1])} (each mark: {(times[1] - times[0])})")
            bars = " .:-=+*#%@"
            for dev, vals in series.items():
                line = "".join(bars[min(9, round(v * 9))] for v in vals)
                say(f"  {dev:<22} |{line}| peak {max(vals):.0%}")
        if at:
            say(f"utilisation at {_fmt(at)}:")
            for res, share in sorted(utilisation(bookings, capacities(inv), at).items()):
                if share:
                    say(f"  {res:<32} {share:.0%}")
    if args.svg:
        from ..provider.report import timeline_svg
        from .common import write_atomic
        write_atomic(Path(args.svg), timeline_svg(inv, bookings), inputs)
    if args.html:
        from ..provider.report import render_capacity_html
        from .common import write_atomic
        title = f"Capacity: {inv.provider}" if inv.provider else "Capacity"
        write_atomic(Path(args.html), render_capacity_html(
            inv, bookings, rows, title=title,
            generated=_dt.datetime.now(_dt.timezone.utc).replace(tzinfo=None, microsecond=0)), inputs)
    return 0
