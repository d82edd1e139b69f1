"""The provider's side over HTTP, ``/api/v1/capacity/...`` (contract: ``API.md``): check, book, the lifecycle
(hold, confirm, activate, finish, release, expire), show, audit, export, and the console's view. Each route builds
the namespace the CLI's ``capacity`` parser would and calls the same answer function (``cli/capacity_cmd.py``),
so every body is what ``llmsizer capacity ... --json`` prints.

The inventory, the reservation store and the auth file are the server's, fixed when it starts
(:class:`ProviderConfig`, from ``serve --inventory/--db/--auth`` or the environment); a request never names a file.
Who may do what is ``provider/auth.py``'s table: a bearer token (``Authorization: Bearer ...``) or a signed-in
console session (``sessions.py``; a mutating call repeats its CSRF nonce in ``X-CSRF-Token``). A refusal is a 403
with the CLI's message, written to the audit log."""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fastapi import APIRouter, Request
from starlette.responses import Response

from ..numbers import DEFAULT_HOLD_HOURS, HOLD_HOURS, not_a_boolean
from ..provider.store import LOGIN_FAILURES, LOGIN_WINDOW
from ..render.safe import term
from . import sessions
from .api import EXIT_HEADER, PREFIX, body_of, json_answer, request_text, run
from .problems import PROBLEM_JSON, PROBLEM_SCHEMA, Problem

router = APIRouter(prefix=f"{PREFIX}/capacity")
NOTES_HEADER = "X-Llmsizer-Notes"
WEB_ACTOR = "web"  # the audit log's actor of a call refused before anyone was identified (the role's name after)


#: the lifecycle routes: action -> the state it moves to (the CLI's ``capacity ACTION ID...``)
STATES = {"hold": "held", "confirm": "confirmed", "activate": "active", "finish": "finished",
          "release": "released", "expire": "expired"}


@dataclass(frozen=True)
class ProviderConfig:
    """What ``serve`` was started with: the inventory file, the store's URL, the auth file (None: no roles, as on
    the CLI without --auth), and the session key."""

    inventory: str
    db: str | None = None
    auth: str | None = None
    session_key: bytes = b""


_ERRORS: dict[int | str, dict[str, Any]] = {
    s: {"description": d, "content": {PROBLEM_JSON: {"schema": PROBLEM_SCHEMA}}}
    for s, d in ((400, "bad input: the CLI's one-line message"), (403, "the token or session does not hold the "
                 "role (the CLI's message; logged in the audit log)"),
                 (503, "the server was started without --inventory"))}


NO_INVENTORY = ("this server has no provider inventory: start it with `llmsizer serve --inventory FILE --db URL "
                "[--auth FILE]`")


def config_of(request: Request) -> ProviderConfig:
    cfg: ProviderConfig | None = getattr(request.app.state, "provider", None)
    if cfg is None:
        raise Problem(503, NO_INVENTORY, None)
    return cfg


def namespace(http: Request, cfg: ProviderConfig, **fields: Any) -> argparse.Namespace:
    """The CLI's namespace for one call: the server's files, the caller's credentials, ``fields``."""
    args = argparse.Namespace(inventory=cfg.inventory, db=cfg.db, auth=cfg.auth, hardware_file=[], actor=WEB_ACTOR,
                              token_file=None, json=True, **fields)
    header = http.headers.get("authorization", "")
    if header[:7].lower() == "bearer ":
        args.web_token = header[7:].strip() or None
        return args
    got = sessions.read(cfg.session_key, http.cookies.get(sessions.COOKIE))
    if got is not None:
        who, nonce = got
        if http.method != "GET" and not sessions.csrf_ok(nonce, http.headers.get(sessions.CSRF_HEADER)):
            message = ("missing or wrong X-CSRF-Token header: a signed-in change repeats the session's CSRF token "
                       "(GET /api/v1/capacity/session gives it)")
            from ..cli.capacity_cmd import log_denied
            log_denied(argparse.Namespace(db=cfg.db, actor=who.name), "csrf", f"{http.method} {http.url.path}: "
                       f"{message}")
            raise Problem(403, message, "X-CSRF-Token")
        args.web_role = who
        return args
    args.web_token = None
    return args


def forbidden_as_403(work: Callable[[], Response]) -> Callable[[], Response]:
    from ..provider.auth import Forbidden

    def guarded() -> Response:
        try:
            return work()
        except Forbidden as e:
            raise Problem(403, term(str(e)), "token") from None
    return guarded


def _flag(fields: dict[str, Any], name: str) -> bool:
    v = fields.get(name, False)
    if v is None or isinstance(v, bool):
        return bool(v)
    raise Problem(400, f"field '{name}': expected true or false", name)


def _text(fields: dict[str, Any], name: str, default: str | None = None) -> str | None:
    v = fields.get(name, default)
    if v is None or isinstance(v, str):
        return v
    raise Problem(400, f"field '{name}': expected a string", name)


def _hold_hours(fields: dict[str, Any]) -> float:
    """``hold_hours`` read by `capacity book --hold-hours`'s own reader (the CLI parser's type: numbers.HOLD_HOURS,
    its range, its words), so a bad value is the CLI's line: before, the CLI took any float (-5: a hold already
    lapsed; nan, 1e9: a traceback) while the web checked a range of its own (review32 D1)."""
    value = fields.get("hold_hours")
    if value is None:
        return DEFAULT_HOLD_HOURS
    if isinstance(value, bool):
        raise Problem(400, f"field 'hold_hours': {not_a_boolean(value, HOLD_HOURS)}", "hold_hours")
    if not isinstance(value, (int, float, str)):
        raise Problem(400, f"field 'hold_hours': expected {HOLD_HOURS.describe()}", "hold_hours")
    from .bridge import subparser
    read: Callable[[str], float] = next(a.type for a in subparser(("capacity", "book"))._actions  # type: ignore[assignment]
                                        if "--hold-hours" in a.option_strings)
    try:
        return float(read(str(value)))
    except argparse.ArgumentTypeError as e:
        raise Problem(400, f"argument --hold-hours: {e}", "hold_hours") from None


def _only(fields: dict[str, Any], allowed: tuple[str, ...]) -> None:
    for k in fields:
        if k not in allowed:
            raise Problem(400, f"field {str(k)[:40]!r}: not a field of this call; give {', '.join(allowed)}",
                          str(k)[:64])


def _request_args(request: Request, cfg: ProviderConfig, fields: dict[str, Any], **extra: Any) -> argparse.Namespace:
    """The namespace of a check or book. ``now`` (the time the call is made at) is the server's clock unless an
    operator gives another: a requester's ``now`` is refused (403, logged), so no window in the past is booked."""
    from ..cli.capacity_cmd import _authorize
    from ..request.reader import parse_request
    text, name = request_text(fields)
    args = namespace(request, cfg, request=name, load_request=lambda: parse_request(text, source=name),
                     no_db=_flag(fields, "no_db"), now=_text(fields, "now"), **extra)
    if args.now is not None:
        _authorize(args, "now")
    return args


_CHECK_FIELDS = ("request", "filename", "now", "no_db")


@router.post("/check", summary="does each job of a request fit (capacity check --json)",
             responses={**_ERRORS})
async def check(request: Request) -> Response:
    from ..cli.capacity_cmd import check_answer
    cfg = config_of(request)
    fields = await body_of(request)
    _only(fields, _CHECK_FIELDS)

    def work() -> Response:
        data, code, _ = check_answer(_request_args(request, cfg, fields))
        return json_answer(data, code)
    return await run(request, forbidden_as_403(work), fields=fields, default="request")


_BOOK_FIELDS = (*_CHECK_FIELDS, "job", "earliest", "tentative", "state", "hold_hours")


@router.post("/book", summary="check, then book every job atomically (capacity book --json); the same request "
             "booked again returns the existing booking (its idempotency key is the request's content and job)",
             responses={**_ERRORS})
async def book(request: Request) -> Response:
    from ..cli.capacity_cmd import book_answer
    cfg = config_of(request)
    fields = await body_of(request)
    _only(fields, _BOOK_FIELDS)
    jobs = fields.get("job") or []
    if isinstance(jobs, str):
        jobs = [jobs]
    if not isinstance(jobs, list) or not all(isinstance(j, str) for j in jobs):
        raise Problem(400, "field 'job': expected a job name or a list of them", "job")
    state = _text(fields, "state")
    if state not in (None, "requested", "held", "confirmed"):
        raise Problem(400, f"field 'state': one of requested, held, confirmed, not {str(state)[:40]!r}", "state")
    h = _hold_hours(fields)

    def work() -> Response:
        args = _request_args(request, cfg, fields, job=jobs, earliest=_flag(fields, "earliest"),
                             tentative=_flag(fields, "tentative"), state=state, hold_hours=h)
        booked, code, notes = book_answer(args)
        response = json_answer(booked, code)
        if notes:
            response.headers[NOTES_HEADER] = json.dumps([term(n) for n in notes])
        return response
    return await run(request, forbidden_as_403(work), fields=fields, default="request")


def _state_route(action: str, state: str) -> Callable[[Request], Any]:
    async def route(request: Request) -> Response:
        from ..cli.capacity_cmd import state_answer
        cfg = config_of(request)
        fields = await body_of(request)
        _only(fields, ("ids",))
        ids = fields.get("ids", [])
        if not isinstance(ids, list) or not all(isinstance(i, str) and 0 < len(i) <= 64 for i in ids) \
                or len(ids) > 1000:
            raise Problem(400, "field 'ids': expected a list of reservation ids (see GET /api/v1/capacity/show)",
                          "ids")
        if not ids and action != "expire":
            raise Problem(400, f"field 'ids': give the reservation ids to {action}", "ids")

        def work() -> Response:
            args = namespace(request, cfg, ids=ids, state=state)
            data, code = state_answer(args)
            return json_answer(data, code)
        return await run(request, forbidden_as_403(work), fields=fields, default="ids")
    route.__name__ = action
    return route


for _action, _state in STATES.items():
    router.add_api_route(f"/{_action}", _state_route(_action, _state), methods=["POST"], response_class=Response,
                         summary=f"{_action} bookings: body {{\"ids\": [...]}} (capacity {_action} ID... --json)",
                         responses={**_ERRORS})


def _show(request: Request, cfg: ProviderConfig, at: str | None, audit: bool) -> Callable[[], Response]:
    from ..cli.capacity_cmd import show_answer

    def work() -> Response:
        data = show_answer(namespace(request, cfg, at=at, audit=audit, svg=None, html=None)).data
        return json_answer(data)
    return forbidden_as_403(work)


@router.get("/show", summary="reservations, and utilisation at a time (capacity show [--at T] --json)",
            responses={**_ERRORS})
async def show(request: Request, at: str | None = None) -> Response:
    cfg = config_of(request)
    return await run(request, _show(request, cfg, at, False), fields={"at": at})


@router.get("/audit", summary="reservations and the audit log (capacity show --audit --json)", responses={**_ERRORS})
async def audit(request: Request) -> Response:
    cfg = config_of(request)
    return await run(request, _show(request, cfg, None, True), fields={})


@router.get("/export/{rid}", summary="a confirmed booking as the scheduler's input (capacity export ID --format F)",
            responses={**_ERRORS, 409: {"description": "not confirmed or active: nothing to hand over"}})
async def export(request: Request, rid: str, format: str, user: str | None = None,
                 account: str | None = None) -> Response:
    from ..cli.capacity_cmd import export_answer
    cfg = config_of(request)
    if format not in ("slurm", "kueue", "blazar"):
        raise Problem(400, f"format {format[:40]!r}: one of slurm, kueue, blazar", "format")

    def work() -> Response:
        text, code, message = export_answer(namespace(request, cfg, id=rid, format=format, user=user,
                                                          account=account))
        if code:
            raise Problem(409, message, "rid")
        kind = "application/yaml" if format == "kueue" else "text/plain"
        return Response(text, media_type=kind, headers={EXIT_HEADER: "0"})
    return await run(request, forbidden_as_403(work), fields={"rid": rid, "format": format, "user": user,
                                                                  "account": account})


@router.get("/inventory", summary="the server's inventory file (YAML)", responses={**_ERRORS})
async def inventory(request: Request) -> Response:
    cfg = config_of(request)

    def work() -> Response:
        from ..cli.capacity_cmd import _authorize
        from ..inputs import read_small_text
        from ..provider.inventory import MAX_INVENTORY_BYTES
        _authorize(namespace(request, cfg), "show")
        return Response(read_small_text(Path(cfg.inventory), "inventory", MAX_INVENTORY_BYTES),
                        media_type="application/yaml", headers={EXIT_HEADER: "0"})
    return await run(request, forbidden_as_403(work), fields={})


@router.put("/inventory", summary="replace the inventory (operators): body {\"inventory\": \"<YAML>\"}, checked as "
            "`capacity check` reads it, written atomically over the server's file, logged", responses={**_ERRORS})
async def edit_inventory(request: Request) -> Response:
    cfg = config_of(request)
    fields = await body_of(request)
    _only(fields, ("inventory",))
    text = _text(fields, "inventory")
    if text is None:
        raise Problem(400, "field 'inventory': give the inventory file's text (YAML)", "inventory")

    def work() -> Response:
        import hashlib

        from ..cli.capacity_cmd import _authorize
        from ..cli.common import write_atomic
        from ..inputs import read_small_text
        from ..provider.inventory import MAX_INVENTORY_BYTES, parse_inventory
        from ..provider.store import Store
        args = namespace(request, cfg)
        _authorize(args, "inventory")
        from ..errors import LlmsizerError
        try:
            inv = parse_inventory(text, source="inventory.yaml")  # a bad file: 400 with the reader's line
        except LlmsizerError as e:  # about the inventory sent, whatever flag its advice names (probe21 C2)
            lines = [term(line) for line in str(e).splitlines()] or [""]
            raise Problem(400, lines[0], "inventory", lines if len(lines) > 1 else None) from None
        path = Path(cfg.inventory)
        old = read_small_text(path, "inventory", MAX_INVENTORY_BYTES)
        write_atomic(path, text, force=True)  # the server's inventory, replaced on purpose (PUT)
        digest = [hashlib.sha256(t.encode()).hexdigest()[:12] for t in (old, text)]
        live: list[Any] = []
        if Store.exists(cfg.db):
            store = Store(cfg.db)
            try:
                store.log_inventory(digest[0], digest[1], f"{len(inv.nodes)} node(s), {len(inv.sites)} site(s)",
                                    actor=args.actor)
                live = store.bookings(requested=True)
            finally:
                store.close()
        # saved, as `capacity import` saves an inventory (no booking blocks a save); the reader's warnings and what
        # the new file leaves disagreeing with the live bookings are answered as `capacity show` warns of them (one
        # rule, disagree.py inventory_warnings)
        from ..provider.disagree import disagreements, inventory_warnings
        return json_answer({"nodes": len(inv.nodes), "sites": len(inv.sites), "before": digest[0],
                            "after": digest[1], **disagreements(inv, live),
                            "warnings": inventory_warnings(inv, live, cfg.inventory)})
    return await run(request, forbidden_as_403(work), fields=fields, default="inventory")


# ------------------------------------------------------------------------------------------------------ console

@router.post("/login", summary="sign in to the console with a token: a session cookie and its CSRF token; after "
             f"{LOGIN_FAILURES} failed sign-ins from one client within {LOGIN_WINDOW.total_seconds() / 60:g} minutes, "
             "a 429 until the window ends",
             responses={**_ERRORS, 429: {"description": "too many failed sign-ins from this client (Retry-After)",
                                         "content": {PROBLEM_JSON: {"schema": PROBLEM_SCHEMA}}}})
async def login(request: Request) -> Response:
    from dataclasses import replace

    from ..cli.capacity_cmd import WEB_AUTH_SOURCE
    from ..provider.auth import Forbidden, authorize, load_auth
    cfg = config_of(request)
    fields = await body_of(request)
    _only(fields, ("token",))
    token = _text(fields, "token")
    if cfg.auth is None:
        raise Problem(400, "this server has no auth file (serve --auth FILE): there is nothing to sign in to; "
                           "every call is allowed", "token")
    auth_path = cfg.auth
    client = login_client(request)

    def work() -> Response:
        from ..cli.capacity_cmd import log_denied
        from ..provider.store import Store
        store = Store(cfg.db)  # the failures live in the store: every server process sees the same count
        try:
            wait = store.login_wait(client)
            if wait > 0:
                message = (f"too many failed sign-ins from this client ({LOGIN_FAILURES} within "
                           f"{LOGIN_WINDOW.total_seconds() / 60:g} min): try again in {wait:.0f} s")
                log_denied(argparse.Namespace(db=cfg.db, actor=WEB_ACTOR), "login", message)
                raise Problem(429, message, "token", headers={"Retry-After": str(max(1, int(wait + 0.999)))})
            try:
                who = authorize(token, "show", replace(load_auth(auth_path), source=WEB_AUTH_SOURCE), said="sign-in")
            except Forbidden as e:
                store.login_failed(client)
                log_denied(argparse.Namespace(db=cfg.db, actor=WEB_ACTOR), "login", str(e))
                raise
            store.login_succeeded(client)
        finally:
            store.close()
        cookie, nonce = sessions.issue(cfg.session_key, who)
        response = json_answer({"name": who.name, "role": who.role, "csrf": nonce})
        response.set_cookie(sessions.COOKIE, cookie, max_age=sessions.SESSION_S, httponly=True, samesite="strict",
                            secure=request.url.scheme == "https", path="/")
        return response
    return await run(request, forbidden_as_403(work), fields=fields, default="token")


def login_client(request: Request) -> str:
    """The key failed sign-ins are counted under: the client's address (a token names its holder only once it is
    right, so a wrong one has no user to count against), hashed so the store keeps no address. Behind a proxy every
    client shares the proxy's address: the limit then holds for all of them together."""
    import hashlib
    host = request.client.host if request.client else "?"
    return hashlib.sha256(f"llmsizer-login|{host}".encode()).hexdigest()[:32]


@router.post("/logout", summary="end the console session")
async def logout(request: Request) -> Response:
    response = json_answer({"signed_in": False})
    response.delete_cookie(sessions.COOKIE, path="/", httponly=True, samesite="strict")
    return response


@router.get("/status", summary="whether this server has a provider inventory (the console asks it first, so a server "
            "without one answers 200 with why, not a 503 per call)")
async def status(request: Request) -> Response:
    cfg: ProviderConfig | None = getattr(request.app.state, "provider", None)
    return json_answer({"inventory": cfg is not None, "detail": None if cfg is not None else NO_INVENTORY})


@router.get("/session", summary="who is signed in, their role and the session's CSRF token")
async def session(request: Request) -> Response:
    cfg = config_of(request)
    if cfg.auth is None:
        return json_answer({"signed_in": True, "name": None, "role": "operator", "csrf": "", "auth": False})
    got = sessions.read(cfg.session_key, request.cookies.get(sessions.COOKIE))
    if got is None:
        return json_answer({"signed_in": False, "auth": True})
    who, nonce = got
    return json_answer({"signed_in": True, "name": who.name, "role": who.role, "csrf": nonce, "auth": True})


@router.get("/console", summary="what the console draws: the inventory's nodes, the bookings' holds per node, the "
            "queue (requested and held bookings) with whether each still fits", responses={**_ERRORS})
async def console(request: Request) -> Response:
    cfg = config_of(request)

    def work() -> Response:
        return json_answer(console_view(namespace(request, cfg, at=None, audit=True, svg=None, html=None)))
    return await run(request, forbidden_as_403(work), fields={})


def console_view(args: argparse.Namespace) -> dict[str, Any]:
    from ..cli.capacity_cmd import show_answer
    from ..provider.disagree import inventory_warnings, maintenance_refusal
    from ..provider.placement import capacities
    from ..provider.store import HOLDING, moving_refusal, taking_refusal, utcnow, utilisation
    # one read of the store; ``live``: every booking confirm would see, orphaned and requested ones included (the
    # chart's ``bookings`` drop them)
    inv, rows, bookings, audit_rows, _, shown, live = show_answer(args)
    cap = capacities(inv)
    # utilisation (the store's rule) now and at its peak: the moments a hold starts are where the load can rise
    starts = sorted({i.start for b in bookings for i in b.items if i.resource.startswith("node:")})
    shares = [utilisation(bookings, cap, t) for t in starts]
    now = utilisation(bookings, cap, utcnow())
    nodes = [{"id": n.id, "site": n.site, "device": n.device, "devices": n.devices, "pools": list(n.pools),
              "fabric": n.fabric, "now": now.get(f"node:{n.id}", 0.0),
              "peak": max((u.get(f"node:{n.id}", 0.0) for u in shares), default=0.0)} for n in inv.nodes]
    items = {b.id: b for b in bookings}
    planned = {b.id: b for b in live}  # a requested booking's placed holds too (confirm re-checks those)
    queue, holds = [], []
    for r in rows:
        b = items.get(r["id"])
        for i in (b.items if b else ()):
            if i.resource.startswith("node:"):
                holds.append({"id": r["id"], "job": r["job"], "state": r["state"], "node": i.resource[5:],
                              "amount": i.amount, "start": i.start, "end": i.end})
        if r["state"] in ("requested", "held"):
            # confirm's rules, each from its one home, in confirm's order (cli/capacity_cmd.py state_answer): the
            # orphan rule (store.moving_refusal: this booking on a node the inventory lost or re-equipped, or any
            # live booking so from now on), the maintenance rule (disagree.maintenance_refusal), then
            # store.transition's capacity-and-quota rule (store.taking_refusal) over the holds of every other
            # booking that holds capacity, team usage included. A requested booking holds nothing yet, but its holds
            # were placed when it was booked: those are what confirm checks
            p = planned.get(r["id"])
            mine = list(p.items) if p else []
            others = [i for o in live if o.id != r["id"] and o.state in HOLDING for i in o.items]
            refused = (moving_refusal(inv, live, [r["id"]], utcnow(), web=True)
                       or maintenance_refusal(inv, live, r["id"])
                       or (taking_refusal(r["job"], mine, others, cap, inv.quotas) if mine else None))
            fits = False if refused else True if mine else None
            queue.append({**r, "fits": fits, "binding": refused or ""})
    # the console lists what `capacity show` warns of, in its words (one rule, disagree.py), as the save does
    flags = inventory_warnings(inv, live, args.inventory, web=True)
    return {"provider": inv.provider, "nodes": nodes, "reservations": rows, "holds": holds, "queue": queue,
            "audit": audit_rows, "orphaned": shown.get("orphaned", []), "maintenance": shown.get("maintenance", []),
            "flags": flags}
