"""`llmsizer serve`: the web app (calculator, compare, request pages) and its JSON API on localhost."""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import secrets
import shutil
import signal
import socket
import sys
import tempfile
from typing import Any

from ..errors import InputError
from ..numbers import Range
from .commands import COMMAND_HELP
from .common import int_arg

PORT = Range(1, 65535, True, "a TCP port")
WORKERS = Range(1, 64, True, "a number of worker processes")
ANSWERS = Range(0, 1_000_000, True, "a number of answers")
# estimate answers each worker remembers by default (--answer-cache; web/answer_cache.py ENTRIES reads it): one home
ANSWER_CACHE_ENTRIES = 4096
DEFAULT_PORT = 8000
DEFAULT_HOST = "127.0.0.1"
MAX_DEFAULT_WORKERS = 4
LOOPBACK = ("127.0.0.1", "localhost", "::1")
INSTALL_HINT = "pip install 'llmsizer[web]'"

EPILOG = """examples:
  llmsizer serve                      # http://127.0.0.1:8000
  llmsizer serve --port 8080
  llmsizer serve --host 0.0.0.0       # reachable from the network: anyone who can reach it can use it
  llmsizer serve --workers 1          # one process (the default: one per CPU core, at most 4)

The API answers under /api/v1 (every answer is the JSON the CLI prints with --json); its OpenAPI document is
/api/v1/openapi.json. Needs the web extra: pip install 'llmsizer[web]'.
"""


def register(sub: Any) -> None:
    p = sub.add_parser("serve", help=COMMAND_HELP["serve"],
                       description="Serve the web app (calculator, compare, request pages) and the JSON API "
                                   "(/api/v1) on this machine. Every number is the CLI's for the same input.",
                       epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--host", default=DEFAULT_HOST, help=f"address to listen on (default {DEFAULT_HOST}: this machine only)")
    p.add_argument("--port", type=int_arg(PORT), default=DEFAULT_PORT, help=f"TCP port (default {DEFAULT_PORT})")
    p.add_argument("--workers", type=int_arg(WORKERS), default=None,
                   help=f"worker processes answering on the one port (default: the CPU cores this process may use, "
                        f"at most {MAX_DEFAULT_WORKERS}); uploaded model-file headers and console sign-ins hold "
                        "on every worker")
    p.add_argument("--answer-cache", type=int_arg(ANSWERS), default=None, metavar="N",
                   help="estimate answers each worker remembers (an estimate is a pure function of the request; "
                        f"default {ANSWER_CACHE_ENTRIES}; 0: compute every answer)")
    p.add_argument("--inventory", metavar="FILE", help="the provider's inventory (YAML): serves /api/v1/capacity "
                                                       "and the console (/console); default $LLMSIZER_INVENTORY")
    p.add_argument("--db", metavar="URL", help="reservation store: SQLite file or postgresql:// URL (default "
                                               "$LLMSIZER_DB, else llmsizer-bookings.db); several servers may "
                                               "share one PostgreSQL")
    p.add_argument("--auth", metavar="FILE", help="the provider's auth file (hashed tokens and roles; default "
                                                  "$LLMSIZER_AUTH); without one, anyone who reaches the server may "
                                                  "book, confirm and release")
    p.set_defaults(func=cmd_serve)


def provider_config(args: argparse.Namespace) -> Any:
    """The provider's files, checked now (a bad inventory or auth file is one line and exit 2 before listening)."""
    inventory = args.inventory or os.environ.get("LLMSIZER_INVENTORY")
    db = args.db or os.environ.get("LLMSIZER_DB")
    auth = args.auth or os.environ.get("LLMSIZER_AUTH")
    if not inventory:
        if args.db or args.auth:
            raise InputError("--db and --auth serve the provider's side: give --inventory FILE too")
        return None
    from ..provider.auth import load_auth
    from ..provider.inventory import load_inventory
    from ..web.api_capacity import ProviderConfig
    from ..web.sessions import secret_from_env
    load_inventory(inventory)
    if auth:
        load_auth(auth)
    return ProviderConfig(inventory=str(inventory), db=db, auth=str(auth) if auth else None,
                          session_key=secret_from_env())


def _stopped(signum: int, frame: Any) -> None:
    raise SystemExit(0)


def default_workers() -> int:
    """One worker process per CPU core this process may run on, at most MAX_DEFAULT_WORKERS."""
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        cores = os.cpu_count() or 1
    return max(1, min(cores, MAX_DEFAULT_WORKERS))


def cmd_serve(args: argparse.Namespace) -> int:
    missing = [m for m in ("fastapi", "uvicorn") if importlib.util.find_spec(m) is None]
    if missing:
        raise InputError(f"serve needs the web extra ({', '.join(missing)} not installed): {INSTALL_HINT}")
    import uvicorn

    from .._version import __version__
    from ..web.app import WORKER_ENV, app_from_env
    from ..web.sessions import SECRET_ENV
    workers = args.workers or default_workers()
    if not os.environ.get(SECRET_ENV):  # one console session key for all the workers of this run
        os.environ[SECRET_ENV] = secrets.token_hex(32)
    provider = provider_config(args)
    try:  # bound here, so a taken port or a foreign address is one line (uvicorn would log and exit 1)
        sock = socket.create_server((args.host, args.port), family=socket.AF_INET6 if ":" in args.host
                                    else socket.AF_INET)
    except OSError as e:
        raise InputError(f"cannot listen on {args.host}:{args.port}: {e.strerror or e}") from None
    folder = tempfile.mkdtemp(prefix="llmsizer-uploads-")  # mode 0700: this user's only; removed at the end
    # on this machine only, the app answers only to this machine's names (a DNS-rebinding page is refused)
    os.environ[WORKER_ENV] = json.dumps({
        "hosts": list(LOOPBACK) if args.host in LOOPBACK else None,
        "inventory": provider.inventory if provider else None, "db": provider.db if provider else None,
        "auth": provider.auth if provider else None, "uploads_folder": folder, "parent": os.getpid() if workers > 1
        else None,
        "answer_cache": ANSWER_CACHE_ENTRIES if args.answer_cache is None else args.answer_cache})
    try:
        if provider is not None and provider.auth is None:
            print("llmsizer: warning: no --auth file: every capacity call (book, confirm, release) is allowed to "
                  "anyone who reaches the server", file=sys.stderr)
        if args.host not in LOOPBACK:
            print(f"llmsizer: warning: listening on {args.host}: anyone who can reach this machine can use the app",
                  file=sys.stderr)
        host = f"[{args.host}]" if ":" in args.host else args.host
        print(f"llmsizer {__version__}: serving on http://{host}:{args.port} with {workers} worker process"
              f"{'es' if workers > 1 else ''} (Ctrl-C to stop)", file=sys.stderr, flush=True)
        options: dict[str, Any] = {"log_level": "warning", "access_log": False, "server_header": False}
        with sock:
            if workers == 1:
                # uvicorn stops on SIGTERM, then raises the signal again for the handler it found: a default one
                # would end the process before the folder below is removed
                signal.signal(signal.SIGTERM, _stopped)
                uvicorn.Server(uvicorn.Config(app_from_env(), **options)).run(sockets=[sock])
            else:  # uvicorn's supervisor: each worker imports the app factory and shares the bound socket
                from uvicorn.supervisors import Multiprocess
                config = uvicorn.Config(f"{app_from_env.__module__}:{app_from_env.__name__}", factory=True,
                                        workers=workers, **options)
                Multiprocess(config, sockets=[sock]).run()
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    return 0
