"""`llmsizer capacity check|book|confirm|release|show`: the provider's side. Does each job of a request fit in the
inventory, given the bookings already made; record a placement atomically; release it; show utilisation."""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import os
import sys
from pathlib import Path
from typing import Any, NamedTuple

from ..errors import InputError
from ..inputs import regular_file
from ..numbers import DEFAULT_HOLD_HOURS, HOLD_HOURS
from ..render.safe import say
from ..result import envelope
from ..units import format_bytes, format_seconds
from .commands import COMMAND_HELP
from .common import add_force, check_output_file, emit_json, needs_subcommand, plain_float_arg

EPILOG = """examples:
  llmsizer capacity check examples/pretraining-multinode.yaml --inventory examples/provider/inventory.yaml
  llmsizer capacity book examples/pretraining-multinode.yaml --inventory examples/provider/inventory.yaml --db bookings.db --earliest
  llmsizer capacity book my-request.yaml --inventory inv.yaml --db postgresql://user@host/llmsizer --earliest
  llmsizer capacity show --inventory examples/provider/inventory.yaml --db bookings.db --svg usage.svg
  llmsizer capacity show --inventory examples/provider/inventory.yaml --db bookings.db --html capacity.html
  llmsizer capacity confirm 3f2a9c0d1e4b --inventory examples/provider/inventory.yaml --db bookings.db
  llmsizer capacity release 3f2a9c0d1e4b --db bookings.db --actor ops-alice
  llmsizer capacity show --inventory examples/provider/inventory.yaml --db bookings.db --audit

--db is a SQLite file (default: llmsizer-bookings.db, created on first booking; `check` and `show` never
create it) or a postgresql:// URL (needs `pip install 'llmsizer[provider]'`). Exit status of check/book: 0 when
every job fits (is booked), 1 when some do not (or a booking lost a race: capacity was taken between the check
and the write), 2 on invalid input (book: a window in the past too, unless --earliest; check answers for the
window as requested and says it is past). `book` is all or none: every job of the
request is recorded in one transaction, or nothing is; booking the same request and job again returns the
existing booking. With --earliest, a booking that lost a race is re-checked and tries the next window.

Lifecycle (see llmsizer/provider/store.py): requested -> held -> confirmed -> active -> finished, and released /
expired. hold, confirm and activate re-check capacity in the same transaction (they need --inventory). Exit
status of hold/confirm/activate/finish/release/expire: 0 done, 1 refused (a transition the lifecycle does not
allow, e.g. confirming a released booking, or it no longer fits: the request was understood, the answer is no),
2 on invalid input (an unknown id). Every change is written to the audit log (`capacity show --audit`), with
--actor or the OS user.
"""


#: how the auth file is named in a refusal answered over HTTP (the server's path is not the caller's business)
WEB_AUTH_SOURCE = "the provider's auth file"
#: how the reservation store is named in a refusal answered over HTTP (fixed by `serve --db`; its path not shown)
WEB_DB_SOURCE = "this server's --db"

#: the pools `capacity import` puts every node in: both, so an imported cluster takes training jobs and services
#: alike (placement keeps one node from hosting both at once); an operator who reserves nodes for one kind says so
IMPORT_POOLS = "training,serving"

#: ``book --earliest``: how many times a booking that lost a race is re-checked and tried in the next window
RACE_RETRIES = 20


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

    def auth(q: argparse.ArgumentParser) -> None:
        q.add_argument("--auth", metavar="FILE", help="the provider's auth file (hashed tokens and roles; default "
                                                      "$LLMSIZER_AUTH); when set, every action needs a token")
        q.add_argument("--token-file", metavar="FILE", help="file holding your token (default $LLMSIZER_TOKEN)")

    def actor(q: argparse.ArgumentParser) -> None:
        q.add_argument("--actor", help="who makes the change, for the audit log (default: the OS user)")

    for name, helptext in (("check", "does each job fit, where and when; the binding constraint and alternatives"),
                           ("book", "check, then record the placements atomically")):
        q = cs.add_parser(name, help=helptext, description=helptext, epilog=EPILOG,
                          formatter_class=argparse.RawDescriptionHelpFormatter)
        q.add_argument("request", help="request file (YAML)")
        common(q)
        q.add_argument("--no-db", action="store_true", help="ignore existing bookings (check only)")
        q.add_argument("--now", help="time the check is made, for jobs without a start (UTC, default now)")
        q.add_argument("--json", action="store_true", help="print the result as JSON: {schema_version, kind: "
                       f"capacity-{name}, " + ("jobs: [one check per job]}" if name == "check" else
                                               "reservations: [one record per booking]}"))
        auth(q)
        if name == "book":
            q.add_argument("--job", action="append", default=[], help="book only these jobs (default: all)")
            q.add_argument("--earliest", action="store_true",
                           help="book the earliest window when the requested one does not fit")
            q.add_argument("--tentative", action="store_true", help="book as held (a tentative hold that expires; "
                                                                     "default: confirmed)")
            q.add_argument("--state", choices=("requested", "held", "confirmed"),
                           help="state of the new booking (default confirmed; --tentative = held)")
            q.add_argument("--hold-hours", type=plain_float_arg(HOLD_HOURS), default=DEFAULT_HOLD_HOURS, metavar="H",
                           help="a requested/held booking expires after H hours unless confirmed "
                                f"(default {DEFAULT_HOLD_HOURS:g})")
            actor(q)
        q.set_defaults(func=cmd_check if name == "check" else cmd_book)
    for name, state, helptext in (
            ("hold", "held", "hold requested bookings (re-checks capacity; needs --inventory)"),
            ("confirm", "confirmed", "confirm held bookings (re-checks capacity; needs --inventory)"),
            ("activate", "active", "mark confirmed bookings as running (re-checks capacity; needs --inventory)"),
            ("finish", "finished", "mark running bookings as finished"),
            ("release", "released", "release (cancel) bookings"),
            ("expire", "expired", "expire requested/held bookings; without ids: every one whose hold has lapsed")):
        q = cs.add_parser(name, help=helptext, description=helptext, epilog=EPILOG,
                          formatter_class=argparse.RawDescriptionHelpFormatter)
        q.add_argument("ids", nargs="*" if state in ("expired", "released") else "+", metavar="ID",
                       help="reservation ids (see `capacity show`)")
        if state == "released":
            q.add_argument("--orphans", action="store_true",
                           help="release every live booking on a node the --inventory no longer has, or has with "
                                "another device (what `capacity show` flags as orphaned)")
        q.add_argument("--inventory", metavar="FILE", help="inventory file (YAML): the capacities to re-check")
        q.add_argument("--hardware-file", action="append", default=[], metavar="FILE",
                       help="extra hardware (JSON/YAML)")
        common(q, inventory=False)
        actor(q)
        auth(q)
        q.add_argument("--json", action="store_true", help="print the result as JSON: {schema_version, "
                       f"kind: capacity-{name}, transitions: [{{id, before, after}} or {{id, refused}} per id]}}")
        q.set_defaults(func=cmd_state, state=state)
    helptext = ("move orphaned bookings (on a node the --inventory renamed or re-equipped) to a node that holds "
                "them, each in its own window, checked as `capacity check` checks; all or none")
    q = cs.add_parser("re-place", help=helptext, description=helptext + ". Exit 0: every one moved (or none "
                      "orphaned); 1: some cannot be re-placed (each with the check's reason; nothing was moved); 2: "
                      "invalid input", epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    q.add_argument("ids", nargs="*", metavar="ID", help="only these orphaned bookings, windows ended or not "
                                                         "(default: every orphaned one, requested ones too, whose "
                                                         "window has not ended by --now: what `check` refuses over)")
    common(q)
    q.add_argument("--now", help="time of the command: bookings whose window ended by then are left alone unless "
                                 "named (UTC, default now)")
    actor(q)
    auth(q)
    q.add_argument("--json", action="store_true", help="print the result as JSON: {moved, cannot, written}")
    q.set_defaults(func=cmd_replace)
    q = cs.add_parser("show", help="reservations and utilisation over time")
    common(q)
    q.add_argument("--at", help="utilisation of every resource at this time (UTC)")
    q.add_argument("--svg", metavar="FILE", help="write the utilisation timeline as an SVG chart")
    q.add_argument("--html", metavar="FILE", help="write a self-contained HTML page: the timeline chart per device "
                                                  "type and the bookings table")
    add_force(q, "the --svg/--html file")
    q.add_argument("--audit", action="store_true", help="print the audit log: who changed what, when, before -> after")
    q.add_argument("--json", action="store_true")
    auth(q)
    q.set_defaults(func=cmd_show)
    q = cs.add_parser("export", help="hand a confirmed booking to the scheduler: a Slurm reservation + sbatch line, "
                                     "Kueue YAML (ResourceFlavor, ClusterQueue, LocalQueue) or a Blazar lease command")
    q.add_argument("id", metavar="ID", help="reservation id (see `capacity show`)")
    q.add_argument("--format", required=True, choices=("slurm", "kueue", "blazar"))
    q.add_argument("--user", help="Slurm user(s) the reservation is for (Users=); slurm needs it or --account "
                                  "(kueue, blazar: no such field, refused)")
    q.add_argument("--account", help="Slurm account(s) the reservation is for (Accounts=); slurm needs it or --user "
                                     "(kueue, blazar: no such field, refused)")
    q.add_argument("--db", metavar="URL", help="reservation store (default llmsizer-bookings.db)")
    q.add_argument("--inventory", metavar="FILE", help="inventory file (YAML): kueue needs it, for the cpu and memory "
                                                       "quota of the booked nodes")
    q.add_argument("--hardware-file", action="append", default=[], metavar="FILE",
                   help="extra hardware file the inventory's devices may name (repeatable)")
    auth(q)
    q.set_defaults(func=cmd_export)
    q = cs.add_parser("import", help="write an inventory from `scontrol show node` output (either form) or a "
                                     "Kubernetes node list (`kubectl get nodes -o json`)",
                      description="Write an inventory from `scontrol show node` output (either form) or a Kubernetes "
                                  "node list. A node that takes no new work (drained, down, cordoned) is written "
                                  "with out_of_service: (not bookable; the bookings it holds are kept, with a "
                                  "warning). Exit 0: written; 1: written, but every GPU node is out of service "
                                  "(nothing can be booked until one is back); 2: invalid input, nothing written.")
    src = q.add_mutually_exclusive_group(required=True)
    src.add_argument("--scontrol", metavar="FILE", help="saved output of `scontrol show node [--oneliner]`")
    src.add_argument("--kubectl", metavar="FILE", help="saved output of `kubectl get nodes -o json` (GPU count from "
                                                       "nvidia.com/gpu or amd.com/gpu, product from the GPU feature "
                                                       "discovery label)")
    q.add_argument("--site", required=True, help="site id for the nodes")
    q.add_argument("--device-map", action="append", default=[], metavar="TYPE=DEVICE",
                   help="Slurm GPU type or Kubernetes product label -> catalog device (a100=a100-sxm-80gb); needed "
                        "unless the type or product is a catalog name; '?=DEVICE' for an untyped Slurm GRES "
                        "(Gres=gpu:1, no Type in gres.conf); several comma-separated or one flag each")
    q.add_argument("--pools", default=IMPORT_POOLS,
                   help=f"pools every node joins (comma-separated; default {IMPORT_POOLS}: bookable by training jobs "
                        "and services, never both at once on one node; --pools serving for inference-only nodes, "
                        "--pools training for training-only ones; its Slurm partitions or Kubernetes node pool are "
                        "added)")
    q.add_argument("-o", "--output", required=True, metavar="FILE", help="inventory file to write (YAML)")
    q.add_argument("--force", action="store_true", help="overwrite an existing -o file (as `request new`)")
    q.add_argument("--hardware-file", action="append", default=[], metavar="FILE", help="extra hardware (JSON/YAML)")
    auth(q)
    q.set_defaults(func=cmd_import)
    q = cs.add_parser("token", help="make a token for the auth file: prints the token (give it to its holder) and "
                                    "the line to add (only a salted scrypt hash of it)")
    q.add_argument("--name", required=True, help="who holds it (written to the audit log)")
    q.add_argument("--role", required=True, choices=("requester", "operator"))
    q.set_defaults(func=cmd_token)
    p.set_defaults(func=needs_subcommand(p))


def _authorize(args: argparse.Namespace, action: str) -> None:
    """When the provider has an auth file (--auth or $LLMSIZER_AUTH), the token must allow ``action``; the
    token's name becomes the actor. A refusal is written to the audit log (when the store exists) and raised.
    The web API sets ``args.web_token`` (a bearer token) or ``args.web_role`` (a signed-in session's role, already
    checked against the same auth file at login) instead of the CLI's --token-file / $LLMSIZER_TOKEN."""
    from dataclasses import replace

    from ..provider.auth import Forbidden, allow, authorize, load_auth, read_token
    web = over_http(args)  # the server's auth file only, never the env
    path = getattr(args, "auth", None) or (None if web else os.environ.get("LLMSIZER_AUTH"))
    if not path:
        return
    try:
        session = getattr(args, "web_role", None)
        if session is not None:
            args.actor = session.name  # known from the signed-in session: a refusal is logged under it
            role = allow(session, action)
        else:
            token = args.web_token if hasattr(args, "web_token") else read_token(
                token_file=getattr(args, "token_file", None))
            config = load_auth(path)
            if hasattr(args, "web_token"):  # over HTTP the message names no server-side path
                config = replace(config, source=WEB_AUTH_SOURCE)
            role = authorize(token, action, config)
    except Forbidden as e:
        if e.who:  # a known token without the role: the refusal is logged under its name
            args.actor = e.who
        log_denied(args, action, str(e))
        raise
    args.actor = role.name


def over_http(args: argparse.Namespace) -> bool:
    """Whether the call is answered over HTTP (the web API sets ``web_token`` or ``web_role``): its messages then name
    no server path or operator command (WEB_AUTH_SOURCE, provider.store.orphan_remedy)."""
    return hasattr(args, "web_token") or hasattr(args, "web_role")


def log_denied(args: argparse.Namespace, action: str, detail: str) -> None:
    """Write a refused action to the audit log, when the store exists."""
    from ..provider.store import Store, StoreError
    if Store.exists(getattr(args, "db", None)):
        try:
            store = Store(args.db)
            store.log_denied(action, detail, actor=getattr(args, "actor", None))
            store.close()
        except StoreError:
            pass  # no SQLAlchemy: the refusal itself still stands


def export_answer(args: argparse.Namespace) -> tuple[str, int, str]:
    """(the scheduler's input, exit code, the message on refusal): 0 with the text; 1 when the booking is not
    confirmed or active (answered: nothing to hand over); an unknown id raises (exit 2)."""
    from ..provider.quota import USAGE
    from ..provider.scheduler_export import Handover, refuse_unused_principals, render
    _authorize(args, "export")
    refuse_unused_principals(args.format, args.account, args.user)  # bad input before the store is read
    store = _store(args, readonly=True)
    try:
        rows = {r["id"]: r for r in (store.reservations() if store else [])}
        row = rows.get(args.id)
        if row is None:
            raise InputError(f"no reservation {args.id!r} (list them with `llmsizer capacity show`)")
        if row["state"] not in ("confirmed", "active"):
            return "", 1, (f"{args.id} ({row['job']}) is {row['state']}: only a confirmed or active booking is "
                           "handed to a scheduler")
        items = next(b.items for b in store.bookings() if b.id == args.id)
    finally:
        if store is not None:
            store.close()
    nodes = tuple(sorted(i.resource.split(":", 1)[1] for i in items if i.resource.startswith("node:")))
    per = int(max((i.amount for i in items if i.resource.startswith("node:")), default=0))
    usage = next((i.resource[len(USAGE):] for i in items if i.resource.startswith(USAGE)), None)
    team, device = usage.rsplit(":", 1) if usage else (None, "gpu")
    cpus, ram = _booked_host(args, nodes) if args.format == "kueue" else (0, 0)
    return render(Handover(args.id, str(row["job"]), row["start"], row["end"], nodes, per, device, team, args.user,
                           row.get("copy_nodes"), args.account, cpus, ram),
                  args.format), 0, ""


def _booked_host(args: argparse.Namespace, nodes: tuple[str, ...]) -> tuple[int, int]:
    """The booked nodes' cpus and host RAM [bytes], summed from --inventory (the web: the server's); without one, one
    line naming the flag; a booked node the inventory no longer has is one line naming it."""
    if not getattr(args, "inventory", None):
        raise InputError("a Kueue export needs --inventory: its ClusterQueue covers the booked nodes' cpu and memory "
                         "(their cpus and ram in the inventory) beside the GPUs")
    from ..provider.inventory import load_inventory
    inv = load_inventory(args.inventory, hardware_files=getattr(args, "hardware_file", None) or [])
    known = {n.id: n for n in inv.nodes}
    gone = [n for n in nodes if n not in known]
    if gone:
        raise InputError(f"{args.inventory}: the booked node(s) {', '.join(gone)} are not in this inventory")
    return sum(known[n].cpus for n in nodes), sum(known[n].ram for n in nodes)


def cmd_export(args: argparse.Namespace) -> int:
    """Exit 0 with the scheduler's input; 1 when the booking is not confirmed or active (answered: nothing to hand
    over); 2 for an unknown id."""
    text, code, message = export_answer(args)
    if code:
        say(message, file=sys.stderr)
    else:
        say(text, end="")
    return code


def cmd_import(args: argparse.Namespace) -> int:
    from ..catalog.hardware import load_catalog
    from ..inputs import read_small_text
    from ..provider import scheduler_import as si
    from .common import write_atomic
    _authorize(args, "inventory")
    given = args.scontrol or args.kubectl
    pools = tuple(p.strip() for p in args.pools.split(",") if p.strip())
    if not pools:  # a node in no pool takes no job (placement: training on 'training', services on 'serving')
        raise InputError(f"--pools {args.pools!r} names no pool: a node in none takes no job; give training, serving "
                         f"or both (the default {IMPORT_POOLS})")
    why = "an inventory may hold storage, fabrics and policy added by hand"
    check_output_file(args.output, [given], force=args.force, why=why)
    mapping = {}
    # one flag may hold several mappings, comma-separated as --pools is: a Slurm GPU type is an entry of the Gres
    # list, which commas delimit (slurm.conf(5) "Gres"), and neither a product label nor a catalog id holds one
    for m in (x for flag in args.device_map for x in flag.split(",")):
        if "=" not in m:
            raise InputError(f"--device-map {m!r}: write TYPE=DEVICE (a100=a100-sxm-80gb), several as "
                             "a100=a100-sxm-80gb,h100=h100-sxm or one flag each")
        k, v = m.split("=", 1)
        mapping[si.gpu_type_key(k.strip())] = v.strip()  # '?=DEVICE' (or '=DEVICE'): an untyped Gres=gpu:N
    cat = load_catalog(args.hardware_file)
    known = {d.id for d in cat.devices.values()}
    for k, v in mapping.items():
        mapping[k] = cat.device(v).id  # a wrong catalog name: one line with the closest names
        known.add(mapping[k])
    nodes: list[Any]
    if args.scontrol:
        nodes = si.parse_scontrol_nodes(read_small_text(Path(given), "scontrol output", 64 * 2**20), given)
        text, notes = si.inventory_yaml(nodes, site=args.site, device_map=mapping, known=known, source=given,
                                        pools=pools)
    else:
        nodes = si.parse_kubectl_nodes(read_small_text(Path(given), "kubectl output", 64 * 2**20), given)
        text, notes = si.kubectl_inventory_yaml(nodes, site=args.site, device_map=mapping, catalog=cat,
                                                source=given, pools=pools)
    written = si.read_back(text, nodes, given=given, site=args.site, hardware_files=args.hardware_file)
    write_atomic(Path(args.output), text, [given], force=args.force, why=why)
    for n in [*notes, *(f"warning: {w}" for w in written.warnings)]:
        say(n, file=sys.stderr)
    say(f"note: {si.storage_note(args.site)}", file=sys.stderr)
    say(f"note: {si.FABRIC_NOTE}", file=sys.stderr)
    say(f"note: every node joins pool(s) {', '.join(pools)} (--pools; a training job runs only on "
        "'training' nodes, a service only on 'serving' ones)", file=sys.stderr)
    bookable = [n for n in written.nodes if not n.out_of_service]
    if not bookable:  # every GPU node out of service: written so, nothing bookable (exit 1)
        say(f"wrote {args.output}: no bookable node at site {args.site}: every GPU node is out of service "
            "(written with out_of_service:); nothing can be booked until one is back (delete its out_of_service:)",
            file=sys.stderr)
        return 1
    down = len(written.nodes) - len(bookable)
    say(f"wrote {args.output}: {len(bookable)} bookable node(s) at site {args.site}"
        + (f", {down} out of service" if down else ""))
    return 0


def cmd_token(args: argparse.Namespace) -> int:
    from ..provider.auth import hash_token, new_token
    token = new_token()
    say(f"token for {args.name} ({args.role}), shown once: {token}")
    say("add to the auth file under tokens:")
    say(f'  - {{name: {json.dumps(args.name)}, role: {args.role}, scrypt: "{hash_token(token)}"}}')
    return 0


def _store(args: argparse.Namespace, *, readonly: bool = False) -> Any:
    """The reservation store; ``readonly``: None when a SQLite file is not there (nothing is created), and a
    SQLite file is read with the standard library (no SQLAlchemy needed to check against it)."""
    from ..provider.store import Store, db_url, sqlite_path
    path = sqlite_path(db_url(args.db))
    if path is not None and os.path.lexists(path):
        regular_file(path, "--db")  # a named pipe would hang SQLite's open; /dev/null would read as empty
    if readonly and not Store.exists(args.db):
        return None
    if readonly and path is not None:
        from ..provider.sqlite_read import ReadOnlySqlite
        return ReadOnlySqlite(path)
    return Store(args.db, readonly=readonly)


def _now(text: str | None) -> _dt.datetime | None:
    if not text:
        return None
    from ..provider.inventory import parse_time
    from ..request.quantities import LATEST_DATE
    t = parse_time(text)
    if t.date() > LATEST_DATE:  # the bound of a request's own dates (review13 D4: 9999-12-30 answered exit 1)
        raise InputError(f"--now {text!r} is after {LATEST_DATE}, the latest date a request may name")
    return t


def _utcnow(args: argparse.Namespace) -> _dt.datetime:
    """The time of the command: --now, else the clock read once per command and kept on ``args``, so the start a job
    without one takes (now) is never 'before now' when a later step (the note of `check`, the refusal of `book`)
    asks the clock again a second later."""
    kept = getattr(args, "_clock", None)
    if kept is None:
        kept = _now(getattr(args, "now", None)) or _dt.datetime.now(_dt.timezone.utc).replace(tzinfo=None, microsecond=0)
        args._clock = kept
    return kept


def _needs(args: argparse.Namespace) -> tuple[Any, Any, list[Any]]:
    from ..plan import make_plan
    from ..provider.inventory import load_inventory
    from ..provider.needs import needs_from_plan
    from ..request import load_request

    inv = load_inventory(args.inventory, hardware_files=args.hardware_file)
    loader = getattr(args, "load_request", None)  # the web API: the request's text, parsed names-only
    req = loader() if loader is not None else load_request(args.request, hardware_files=args.hardware_file)
    # one clock for the whole check: the plan's "today" (a date deadline without a start counts from it, and the
    # hardware suggested to meet it) is --now's day, so the same request checked with the same --now answers the same
    now = _utcnow(args)
    plan = make_plan(req, hardware_files=args.hardware_file, alternatives=False, today=now.date())
    needs = needs_from_plan(plan, req, now, args.hardware_file)
    if getattr(args, "job", None):
        names = [n.name for n in needs]
        unknown = [j for j in args.job if j not in names]
        if unknown:
            from ..suggest import did_you_mean
            raise InputError(f"--job {unknown[0]!r}: no such job with hardware in {args.request}"
                             f"{did_you_mean(unknown[0], names)} (its jobs with hardware: {', '.join(names) or 'none'})")
        needs = [n for n in needs if n.name in args.job]
    return inv, req, needs


def _bookings(args: argparse.Namespace) -> list[Any]:
    if args.no_db:
        return []
    store = _store(args, readonly=True)
    if store is None:
        return []
    try:
        return list(store.bookings())
    finally:
        store.close()


def _checks(args: argparse.Namespace) -> tuple[Any, list[Any], list[Any], dict[str, tuple[str, str]]]:
    """The inventory, the jobs' needs, the checks of those not booked yet, and job -> (id, state) of those already booked (the
    idempotency key `book` recognises, :func:`already_booked`: checked against its own booking, a booked job
    would not fit)."""
    from ..provider.placement import check_needs
    from ..provider.store import out_of_service, out_of_service_text, refuse_orphans
    inv, req, needs = _needs(args)
    found: dict[str, tuple[str, str]] = {}
    store = None if args.no_db else _store(args, readonly=True)
    if store is not None:
        try:
            found = already_booked(store, {n.name: request_key(req, n.name) for n in needs})
        finally:
            store.close()
    bookings = _bookings(args)
    # a renamed node would look free: no answer on its device until reconciled (a check on other devices goes on)
    refuse_orphans(inv, bookings, _utcnow(args), web=over_http(args), devices=[n.device for n in needs])
    drained = out_of_service(inv, bookings, _utcnow(args))
    if drained:
        say(f"warning: {out_of_service_text(drained)}", file=sys.stderr)
    rest = [n for n in needs if n.name not in found]
    return inv, needs, check_needs(rest, inv, bookings, _utcnow(args)), found  # no earlier window than now


def already_booked(store: Any, keys: dict[str, str]) -> dict[str, tuple[str, str]]:
    """job name -> (reservation id, state) for each job of ``keys`` (job -> its idempotency key, :func:`request_key`)
    that has a live booking in ``store`` (None: no store, nothing booked): the one rule `book` (nothing new
    recorded) and `check` (answered "already booked") share."""
    found = store.live_by_key(list(keys.values())) if store is not None else {}
    return {name: found[k] for name, k in keys.items() if k in found}


def already_booked_line(rid: str, job: str, state: str) -> str:
    """What `book` and `check` say of a job booked before (its idempotency key matched a live booking)."""
    return (f"already booked {rid}: {job} ({state}); the same request and job was booked before, nothing new was "
            "recorded")


def request_key(req: Any, job: str) -> str:
    """The idempotency key of one job of a request: sha256 of the request's canonical content (every field, as
    read and normalised; not the file name or layout) and the job name."""
    import dataclasses
    import hashlib
    data = dataclasses.asdict(req)
    data.pop("source", None)
    data.pop("lines", None)
    text = json.dumps({"request": data, "job": job}, sort_keys=True, default=str, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:32]


def _fmt(t: _dt.datetime) -> str:
    from ..provider.placement import ONGOING_END
    return "until released" if t >= ONGOING_END else f"{t:%Y-%m-%d %H:%M}"


def render_checks(checks: list[Any], inv: Any = None, now: _dt.datetime | None = None) -> str:
    from ..provider.placement import NO_WINDOW

    out = [f"warning: {w}" for w in (inv.warnings if inv is not None else ())]
    for c in checks:
        n = c.need
        span = ("ongoing (held until released)" if n.ongoing else "duration unknown" if n.duration_verdict
                else format_seconds(n.seconds) + (f" ({n.duration_basis})" if n.duration_basis else ""))
        head = f"{n.name} ({n.kind}): {n.devices} x {n.device}" + (f" on {n.nodes} nodes" if n.nodes > 1 else "") \
            + f", {span} from {_fmt(n.start)}, storage peak {format_bytes(n.storage_peak, binary=False)}"
        out.append(head)
        if c.assumption:
            out.append(f"  {c.assumption}")
        out.extend(f"  warning (plan): {w}" for w in n.warnings)  # the plan's own words, as `plan` says them
        out.extend(f"  note: {w}" for w in c.notes)  # how the check timed the window (placement.py timing_note)
        if now is not None and n.start < now:  # what `book` refuses (book_answer): say so before it is tried
            out.append(f"  note: the requested window starts before now ({_fmt(now)} UTC): `capacity book` refuses "
                       "it; book with --earliest for the first window from now")
        p = c.placement
        if c.fits and p is not None:
            where = f"{p.site} ({inv.site(p.site).label})" if inv is not None else p.site
            out.append(f"  FITS     at {where}: {', '.join(p.nodes)}; storage {p.storage_pool or '-'}; "
                       f"{_fmt(p.start)} -> {_fmt(p.end)}")
            if p.quota:
                out.append(f"  quota: {p.quota}")
        else:
            out.append(f"  DOES NOT FIT in the requested window: [{c.binding}] {c.reason}")
            for a in c.alternatives:
                out.append(f"  - {a}")
            if p is None:
                out.append(f"  {NO_WINDOW}" if c.waits else
                           "  no later window searched: this constraint does not change with time")
    return "\n".join(out)


def check_answer(args: argparse.Namespace) -> tuple[dict[str, Any], int, str]:
    """(the --json answer ``{schema_version, kind: "capacity-check", jobs: [...]}``, exit code: 0 every job fits or
    is already booked, 1 some do not, the text). A job the store already holds a live booking of (the idempotency
    key `book` recognises) is answered as `book` answers it: ``{job, fits: true, existing: true, id, state}`` and
    "already booked ID: ..." (exit 0); every other entry carries ``existing: false``."""
    _authorize(args, "check")
    inv, needs, checks, found = _checks(args)
    by = {c.need.name: c for c in checks}
    data: list[dict[str, Any]] = []
    lines: list[str] = []
    for n in needs:
        if n.name in found:
            rid, state = found[n.name]
            data.append({"job": n.name, "fits": True, "existing": True, "id": rid, "state": state})
            lines.append(already_booked_line(rid, n.name, state))
        else:
            data.append({**by[n.name].to_dict(), "existing": False})
    text = render_checks(checks, inv, _utcnow(args))
    return (envelope("capacity-check", {"jobs": data}), 0 if all(c.fits for c in checks) else 1,
            "\n".join([*lines, *([text] if text else [])]))


def store_not_created(db: str | None) -> str | None:
    """The SQLite file of the reservation store ``db`` names when it is not there yet, else None. `check` and
    `show` read such a store as empty (a store is created by the first booking: legitimate), and say so, naming
    the path (a mistyped --db read as "no reservations" would otherwise pass unnoticed)."""
    from ..provider.store import Store, db_url, sqlite_path
    return None if Store.exists(db) else sqlite_path(db_url(db))


def _say_store_not_created(path: str | None) -> None:
    from ..provider.store import creation_hint
    if path is not None:
        say(f"note: --db {path} does not exist yet: read as a store with no reservations ({creation_hint(path)})",
            file=sys.stderr)


def cmd_check(args: argparse.Namespace) -> int:
    data, code, text = check_answer(args)
    if not args.no_db:  # --no-db reads no store: nothing to say of one
        _say_store_not_created(store_not_created(args.db))
    if args.json:
        emit_json(data)
    else:
        say(text)
    return code


def past_start_line(req: Any, job: str, start: _dt.datetime, now: _dt.datetime) -> str:
    """``book``'s refusal of a window that starts before now, in the form of every other request error
    (``FILE:LINE: job 'x' (kind): start: ...``): the line of the job's own ``start``, else of the request's."""
    j = next(x for x in req.jobs if x.name == job)
    line = req.line_of(j, "start") if j.start else req.line_of(None, "start") or j.line
    return (f"{req.source}:{line}: job '{j.name}' ({j.kind}): start: the requested window starts {_fmt(start)}, "
            f"before now ({_fmt(now)} UTC); give a later start or use --earliest")


def book_answer(args: argparse.Namespace) -> tuple[dict[str, Any], int, list[str]]:
    """All or none: when some job of the request does not fit, nothing is booked; the jobs that do fit are
    booked together in one transaction (re-checked under the same locks), so either all are recorded or none.
    The same request and job booked again returns the existing live booking (idempotency key).
    Returns (the --json answer ``{schema_version, kind: "capacity-book", reservations: [...]}``, exit code, the
    lines the CLI prints to stderr)."""
    from dataclasses import replace

    from ..provider.placement import capacities
    _authorize(args, "book-confirmed" if (args.state or ("held" if args.tentative else "confirmed")) == "confirmed"
               else "submit")
    inv, req, needs = _needs(args)
    now = _utcnow(args)
    if args.earliest:  # the search starts now at the earliest: a window in the past is never offered
        needs = [replace(n, start=max(n.start, now)) for n in needs]
    else:
        past = [past_start_line(req, n.name, n.start, now) for n in needs if n.start < now]
        if past:
            from ..request import RequestError
            raise RequestError(past)
    state = args.state or ("held" if args.tentative else "confirmed")
    cap = capacities(inv)
    keys = {n.name: request_key(req, n.name) for n in needs}
    # a SQLite store not there yet is created by the first change only (docs/provider.md): until the write, the
    # booking reads it as empty, so a refused book leaves no file behind
    store = _FirstChangeStore(args)
    try:
        booked, code, notes = _book(args, inv, needs, now, state, cap, keys, store)
        return envelope("capacity-book", {"reservations": booked}), code, notes
    finally:
        store.close()


class _FirstChangeStore:
    """The store of a booking: ``read`` is the open store, or None while a SQLite file is not there yet (read as
    empty); ``write()`` opens it, creating the file, just before the first change."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.read: Any = _store(args) if store_not_created(args.db) is None else None

    def write(self) -> Any:
        if self.read is None:
            self.read = _store(self.args)
        return self.read

    def close(self) -> None:
        if self.read is not None:
            self.read.close()


def _book(args: argparse.Namespace, inv: Any, needs: list[Any], now: _dt.datetime, state: str,
          cap: dict[str, float], keys: dict[str, str], store: _FirstChangeStore
          ) -> tuple[list[dict[str, Any]], int, list[str]]:
    from ..provider.placement import NO_WINDOW, check_needs
    from ..provider.store import BookingConflict, Submitted, refuse_orphans
    found = already_booked(store.read, keys)
    done_before = [Submitted(found[n.name][0], n.name, True, found[n.name][1]) for n in needs if n.name in found]
    needs = [n for n in needs if n.name not in found]
    notes: list[str] = []
    done: list[Any] = []
    placements: list[Any] = []
    tries = RACE_RETRIES if args.earliest else 1
    for attempt in range(tries if needs else 0):
        held = [] if args.no_db or store.read is None else store.read.bookings()
        # before anything is written: the same rule as `check`
        refuse_orphans(inv, held, now, web=over_http(args), devices=[n.device for n in needs])
        checks = check_needs(needs, inv, held)
        missing = [c for c in checks if c.placement is None or (not c.fits and not args.earliest)]
        for c in missing:
            notes.append(f"{c.need.name}: not booked: [{c.binding}] {c.reason}"
                         + (f"; {NO_WINDOW}" if c.placement is None and c.waits else ""))
        if missing:
            if len(checks) > 1:
                notes.append("nothing of this request was booked (all or none)")
            return [], 1, notes
        placements = [c.placement for c in checks if c.placement is not None]
        try:
            done = store.write().submit(placements, cap, state=state, note=str(args.request), quotas=inv.quotas,
                                keys=[keys[p.job] for p in placements], actor=args.actor, not_before=now,
                                hold_for=_dt.timedelta(hours=args.hold_hours))
            break
        except BookingConflict as e:
            # another booking took the capacity between the check and the write: the request was understood and
            # the answer is "no longer fits" (exit 1, like a job that does not fit), not invalid input
            if attempt + 1 < tries:
                notes.append(f"lost a race ({e}); trying the next window")
                continue
            notes.append(f"not booked: {e}" + (f" (after {tries} tries)" if tries > 1 else
                                               "; --earliest books the next free window instead"))
            return [], 1, notes
    subs = [*done_before, *done]
    return booking_records(store.read, subs) if subs else [], 0, notes


def booking_records(store: Any, subs: list[Any]) -> list[dict[str, Any]]:
    """``book``'s answer, ONE shape for a new booking and an existing one (the same request and job booked before):
    the stored record (:meth:`Store.records`: the reservation with the plan's numbers it was booked for, the nodes
    it holds), times in ISO 8601, and ``existing``."""
    from ..provider.store import FIGURES
    recs = store.records([d.id for d in subs])
    out = []
    for d in subs:
        r = recs[d.id]
        out.append({"id": d.id, "job": r["job"], "kind": r["kind"], "state": r["state"], "existing": d.existing,
                    "start": r["start"].isoformat(), "end": r["end"].isoformat(), "nodes": r["nodes"],
                    **{k: r[k] for k, _ in FIGURES}})
    return out


def cmd_book(args: argparse.Namespace) -> int:
    data, code, notes = book_answer(args)
    for n in notes:
        say(n, file=sys.stderr)
    if args.json:
        emit_json(data)
        return code
    for b in data["reservations"]:
        if b["existing"]:
            say(already_booked_line(b["id"], b["job"], b["state"]))
        else:
            say(f"booked {b['id']}: {b['job']} {b['start']} -> {b['end']} on {', '.join(b['nodes'])} "
                f"({b['state']})")
    return code


#: the lifecycle commands: state -> the action the auth table names
STATE_ACTIONS = {"held": "hold", "confirmed": "confirm", "active": "activate", "finished": "finish",
                 "released": "release", "expired": "expire"}


def no_store_refusal(args: argparse.Namespace) -> str | None:
    """The one refusal of a step that changes bookings in a store that is not there (`confirm`, `release`, ...,
    `re-place`; the web's routes for them): None when the store exists. Nothing is created: the ids asked for are in
    no store, and creating an empty one for them was "bad input wrote a file" (probe22 C7). The command line names
    its --db path (a mistyped one is the likely cause); over HTTP the server's store is named without its path
    (``over_http``: WEB_DB_SOURCE), in the same words."""
    from ..provider.store import Store, creation_hint, db_url, sqlite_path
    if Store.exists(args.db):
        return None
    path = sqlite_path(db_url(args.db))
    if over_http(args) or path is None:
        return f"{WEB_DB_SOURCE}: no reservation store there (`llmsizer capacity book` creates it); nothing was changed"
    return f"--db {path}: no reservation store there ({creation_hint(path)}); nothing was changed"


def state_answer(args: argparse.Namespace) -> tuple[dict[str, Any], int]:
    """``{schema_version, kind: "capacity-ACTION" (hold, confirm, ..., release, expire), transitions: [...]}``, one
    entry per id: ``{id, before, after}`` when changed, ``{id, refused}`` when the lifecycle or the capacity
    says no. Exit code 0 when every change was made, 1 when one was refused, invalid input raises (exit 2). A
    SQLite store that is not there is an error (``no_store_refusal``), not created, on the command line and the web
    alike; `expire` with no ids has nothing due there."""
    out, status = _state_changes(args)
    return envelope(f"capacity-{STATE_ACTIONS[args.state]}", {"transitions": out}), status


def _state_changes(args: argparse.Namespace) -> tuple[list[dict[str, Any]], int]:
    from ..provider.store import HOLDING
    _authorize(args, STATE_ACTIONS[args.state])
    if args.state == "released" and not args.ids and not getattr(args, "orphans", False):
        raise InputError("release: give reservation ids (see `capacity show`) or --orphans with --inventory")
    if getattr(args, "orphans", False) and not args.inventory:
        raise InputError("release --orphans: give --inventory FILE (the inventory the bookings are checked against)")
    cap = None
    quotas: tuple[Any, ...] = ()
    if args.state in HOLDING:
        if not args.inventory:
            raise InputError(f"becoming {args.state} re-checks capacity: give --inventory FILE")
        from ..provider.inventory import load_inventory
        from ..provider.placement import capacities
        inv = load_inventory(args.inventory, hardware_files=args.hardware_file)
        cap, quotas = capacities(inv), inv.quotas
    missing = no_store_refusal(args)  # before: an empty store was created, then "no reservation"
    if missing is not None:
        if args.state == "expired" and not args.ids:
            return [], 0  # nothing booked, nothing due
        raise InputError(missing)
    store = _store(args)
    try:
        if getattr(args, "orphans", False):
            from ..provider.inventory import load_inventory
            from ..provider.store import orphaned
            inv = load_inventory(args.inventory, hardware_files=args.hardware_file)
            found = orphaned(inv, store.bookings(requested=True))  # what `show` flags, past or future
            args.ids = list(dict.fromkeys([*args.ids, *(i for o in found for i in o.ids)]))
            if not args.ids:
                return [], 0  # nothing orphaned: nothing to release
        blocked: dict[str, str] = {}
        if args.state in HOLDING:
            from ..provider.disagree import maintenance_refusal
            from ..provider.store import moving_refusal
            # the rule of `check` and `book` (one home): taking capacity on an inventory that disagrees with the
            # bookings could give a renamed or re-equipped node twice
            live = store.bookings(also=args.ids)
            why = moving_refusal(inv, live, args.ids, _utcnow(args), web=over_http(args))
            if why is not None:
                raise InputError(why)
            # a training booking across a maintenance window added since it was booked: refused (exit 1, answered)
            blocked = {rid: w for rid in args.ids if (w := maintenance_refusal(inv, live, rid)) is not None}
        return _transitions(args, store, cap, quotas, blocked)
    finally:
        store.close()


def _transitions(args: argparse.Namespace, store: Any, cap: dict[str, float] | None,
                 quotas: tuple[Any, ...], blocked: dict[str, str] | None = None) -> tuple[list[dict[str, Any]], int]:
    """Each id's transition; ``blocked``: id -> why it may not take capacity (refused without trying)."""
    from ..provider.store import BookingConflict, IllegalTransition
    if args.state == "expired" and not args.ids:
        return [{"id": rid, "before": None, "after": "expired"} for rid in store.expire_due(actor=args.actor)], 0
    status = 0
    out: list[dict[str, Any]] = []
    for rid in args.ids:
        if blocked and rid in blocked:
            out.append({"id": rid, "refused": blocked[rid]})
            status = 1
            continue
        try:
            before = store.transition(rid, args.state, cap, actor=args.actor, quotas=quotas)
        except (IllegalTransition, BookingConflict) as e:
            out.append({"id": rid, "refused": str(e)})
            status = 1
            continue
        out.append({"id": rid, "before": before, "after": args.state})
    return out, status


def cmd_state(args: argparse.Namespace) -> int:
    """Exit 0 when every change was made, 1 when one was refused (a transition the lifecycle does not allow, or
    it no longer fits), 2 on invalid input (unknown id, missing --inventory)."""
    data, status = state_answer(args)
    if getattr(args, "json", False):
        emit_json(data)
        return status
    for e in data["transitions"]:
        if "refused" in e:
            say(f"{e['id']}: refused: {e['refused']}", file=sys.stderr)
        elif e["before"] is None:
            say(f"{e['id']}: expired")
        else:
            say(f"{e['id']}: {e['before']} -> {e['after']}")
    return status


def replace_answer(args: argparse.Namespace) -> tuple[dict[str, Any], int]:
    """``capacity re-place``: every orphaned booking whose window has not ended by ``--now`` (the refusal's own
    rule, :func:`provider.store.orphaned` with ``now``: an ended window is neither moved nor able to block the
    others), or those of ``args.ids`` (any orphaned one, ended or not), requested bookings included (their planned
    holds; the hold/confirm refusal names them), placed again by the check's own rule
    (:func:`provider.replace.plan_moves`) and moved in one store transaction (:meth:`Store.move`), or nothing moved.
    Returns ({moved, cannot, written}, exit code: 0 all moved, 1 some cannot or the store changed meanwhile)."""
    from ..catalog.hardware import load_catalog
    from ..provider.inventory import load_inventory
    from ..provider.placement import capacities
    from ..provider.replace import plan_moves
    from ..provider.store import BookingConflict, orphaned
    _authorize(args, "re-place")
    inv = load_inventory(args.inventory, hardware_files=args.hardware_file)
    missing = no_store_refusal(args)
    if missing is not None:
        raise InputError(missing)
    store = _store(args)
    try:
        live = store.bookings(requested=True)
        found = [i for o in orphaned(inv, live) for i in o.ids]
        for rid in args.ids:
            if rid not in found:
                raise InputError(f"{rid}: not an orphaned booking of --inventory {args.inventory} (see `llmsizer "
                                 "capacity show`)")
        due = [i for o in orphaned(inv, live, _utcnow(args)) for i in o.ids]
        ids = list(dict.fromkeys(args.ids or due))
        cat = load_catalog(args.hardware_file)
        kinds = {b.device: cat.device(b.device).kind for b in live if b.id in ids and b.device}
        moves, stuck = plan_moves(inv, live, ids, kinds)
        data: dict[str, Any] = {"moved": [m.to_dict() for m in moves], "cannot": [s.to_dict() for s in stuck],
                                "written": False}
        if stuck:
            return data, 1
        try:
            store.move(moves, capacities(inv), actor=args.actor)
        except BookingConflict as e:
            data["moved"], data["cannot"] = [], [{"id": m.id, "job": m.job, "from": list(m.old_nodes),
                                                  "binding": "busy", "reason": str(e)} for m in moves]
            return data, 1
        data["written"] = bool(moves)
        return data, 0
    finally:
        store.close()


def cmd_replace(args: argparse.Namespace) -> int:
    data, code = replace_answer(args)
    if args.json:
        emit_json(data)
        return code
    verb = "moved" if data["written"] else "could move"
    for m in data["moved"]:
        say(f"{m['id']}: {m['job']} {verb} {', '.join(m['from'])} -> {', '.join(m['to'])} ({m['how']})")
    for s in data["cannot"]:
        say(f"{s['id']}: {s['job']} on {', '.join(s['from'])} cannot be re-placed: [{s['binding']}] {s['reason']}",
            file=sys.stderr)
    if data["cannot"] and data["moved"]:
        say("nothing was moved (all or none): the bookings above that could move stay where they are",
            file=sys.stderr)
    elif not data["moved"] and not data["cannot"]:
        say("no orphaned booking: nothing to re-place")
    return code


def timeline(inv: Any, bookings: list[Any], points: int = 40) -> tuple[list[_dt.datetime], dict[str, list[float]]]:
    """Share of each device type's devices held, at ``points`` moments spanning the bookings."""
    from ..provider.report import timeline as _timeline
    return _timeline(inv, bookings, points)


class Shown(NamedTuple):
    """What ``capacity show`` (and the console) answer from one read of the store."""

    inv: Any
    rows: list[dict[str, Any]]  # every reservation (store.with_figures' records)
    bookings: list[Any]  # what holds capacity: the chart's (requested and orphaned ones left out)
    audit: list[dict[str, Any]]
    at: _dt.datetime | None
    data: dict[str, Any]  # the --json answer
    live: list[Any]  # every live booking, requested ones too (what the warnings and confirm's rules read)


def show_answer(args: argparse.Namespace) -> Shown:
    """The inventory, reservations, bookings, audit entries, the --at time, the --json answer and the live bookings,
    from one read of the store."""
    from ..provider.inventory import load_inventory
    from ..provider.placement import capacities
    from ..provider.store import utilisation
    _authorize(args, "show")
    at = _now(args.at)
    inv = load_inventory(args.inventory, hardware_files=args.hardware_file)
    store = _store(args, readonly=True)
    try:
        rows = store.reservations() if store else []
        everything = store.bookings(requested=True) if store else []
        audit = store.audit() if store and args.audit else []
    finally:
        if store is not None:
            store.close()
    from ..provider.disagree import disagreements
    data: dict[str, Any] = {"reservations": rows}
    bookings = [b for b in everything if b.state != "requested"]  # what holds capacity: the chart
    # every live booking, requested ones too (what re-place reaches): orphaned ones listed, and counted against
    # nothing (not against a renamed node's new id or its new device); ones across a maintenance window listed
    data.update(disagreements(inv, everything))
    if data.get("orphaned"):
        gone = {i for o in data["orphaned"] for i in o["reservations"]}
        bookings = [b for b in bookings if b.id not in gone]
    if args.audit:
        data["audit"] = audit
    if at or not args.audit:  # the audit log's answer is {reservations, audit} (API.md), the log, not a moment
        # the share of every resource held at --at, else now (the clock the console's "now" reads): the one rule,
        # provider/store.py utilisation, over the bookings the chart shows
        moment = at or _utcnow(args)
        data["utilisation_at"] = moment.isoformat()
        data["utilisation"] = utilisation(bookings, capacities(inv), moment)
    return Shown(inv, rows, bookings, audit, at, data, everything)


def cmd_show(args: argparse.Namespace) -> int:
    from ..provider.placement import capacities
    from ..provider.store import utilisation
    inputs = [args.inventory, args.db, *(args.hardware_file or ())]
    if args.svg and args.html and Path(args.svg).expanduser().resolve() == Path(args.html).expanduser().resolve():
        raise InputError(f"--svg and --html name the same file ({args.html}); give each its own")
    for out in (args.svg, args.html):
        if out:
            check_output_file(out, inputs, force=args.force)  # before any work (an existing file: --force)
    inv, rows, bookings, audit, at, data, live = show_answer(args)
    missing = store_not_created(args.db)  # read as empty, said with its path (the CLI's own: the web's store is
    _say_store_not_created(missing)  # the server's, whose path it does not show)
    if missing is not None:
        data["store_not_created"] = missing
    from ..provider.disagree import inventory_warnings
    for w in inventory_warnings(inv, live, args.inventory):  # the reader's, then the bookings' (one rule)
        say(f"warning: {w}", file=sys.stderr)
    if args.json:
        emit_json(data)
    else:
        say(f"{len(rows)} reservation(s)")
        for r in rows:
            say(f"  {r['id']}  {r['state']:<10} {r['job']:<24} {_fmt(r['start'])} -> {_fmt(r['end'])}"
                + (f"  {r['figures_text']}" if r["figures_text"] else "") + f"  ({r['agreement_text']})")
        times, series = timeline(inv, bookings)
        if times:
            mark = format_seconds((times[1] - times[0]).total_seconds())
            say(f"devices held, {_fmt(times[0])} .. {_fmt(times[-1])} (each mark: {mark})")
            bars = " .:-=+*#%@"
            for dev, vals in series.items():
                line = "".join(bars[min(9, round(v * 9))] for v in vals)
                say(f"  {dev:<22} |{line}| peak {max(vals):.0%}")
        if args.audit:
            say(f"audit log: {len(audit)} change(s)")
            for e in audit:
                say(f"  {_fmt(e['at'])}  {e['actor']:<12} {e['action']:<9} {e['reservation']}  "
                      f"{e['before'] or '(new)'} -> {e['after']}" + (f"  {e['detail']}" if e.get("detail") else ""))
        if at:
            say(f"utilisation at {_fmt(at)}:")
            for res, share in sorted(utilisation(bookings, capacities(inv), at).items()):
                if share:
                    say(f"  {res:<32} {share:.0%}")
    if args.svg:
        from ..provider.report import timeline_svg
        from .common import write_atomic
        write_atomic(Path(args.svg), timeline_svg(inv, bookings), inputs, force=args.force)
    if args.html:
        from ..provider.report import render_capacity_html
        from .common import write_atomic
        title = f"Capacity: {inv.provider}" if inv.provider else "Capacity"
        write_atomic(Path(args.html), render_capacity_html(
            inv, bookings, rows, title=title,
            generated=_dt.datetime.now(_dt.timezone.utc).replace(tzinfo=None, microsecond=0)), inputs, force=args.force)
    return 0
