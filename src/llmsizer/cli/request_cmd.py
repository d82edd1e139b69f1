"""`llmsizer request new|check|schema`: write a commented request template, validate a request, print the
request's JSON Schema."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from ..render.safe import say
from ..request import Request, load_request
from ..request.spec import TrainingJob
from .commands import COMMAND_HELP
from .common import add_force, json_text, needs_subcommand, write_atomic

EPILOG = """examples:
  llmsizer request new -o my-request.yaml
  llmsizer request check my-request.yaml
  llmsizer request check my-request.yaml --json
  llmsizer request schema -o request.schema.json

A request describes each training and inference job separately (model, data, checkpoints, hand-over; traffic,
service hours, access, operations), with optional resources, budget and deadline. Plan it with `llmsizer plan`.
"""


def register(sub: Any) -> None:
    p = sub.add_parser("request", help=COMMAND_HELP["request"],
                       description="Work with request files: `new` writes a commented template listing every field, "
                                   "`check` validates a request (each problem on one line with its line number), "
                                   "`schema` prints the JSON Schema.",
                       epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    rs = p.add_subparsers(dest="request_command", metavar="ACTION", parser_class=type(p))
    n = rs.add_parser("new", help="write a commented request template", epilog=EPILOG,
                      formatter_class=argparse.RawDescriptionHelpFormatter)
    n.add_argument("-o", "--output", help="file to write (default: print it)")
    add_force(n)
    n.set_defaults(func=cmd_new)
    c = rs.add_parser("check", help="validate a request file", epilog=EPILOG,
                      formatter_class=argparse.RawDescriptionHelpFormatter)
    c.add_argument("request", help="request file (YAML or JSON), or - to read it from standard input")
    c.add_argument("--hardware-file", action="append", default=[], metavar="FILE", help="extra hardware (JSON/YAML)")
    c.add_argument("--json", action="store_true", help="print the validated request (or the errors) as JSON")
    c.set_defaults(func=cmd_check)
    s = rs.add_parser("schema", help="print the JSON Schema of request files", epilog=EPILOG,
                      formatter_class=argparse.RawDescriptionHelpFormatter)
    s.add_argument("-o", "--output", help="file to write (default: print it)")
    add_force(s)
    s.set_defaults(func=cmd_schema)
    p.set_defaults(func=needs_subcommand(p))


def cmd_new(args: argparse.Namespace) -> int:
    from ..request.template import template
    text = template()
    if not args.output:
        sys.stdout.write(text)
        return 0
    out = Path(args.output)
    write_atomic(out, text, force=args.force)
    say(f"template written to {out}; fill it in, then: llmsizer request check {out}")
    return 0


def check_answer(load: Callable[[], Request], hardware_files: Sequence[str] = ()) -> tuple[dict[str, Any], int, Request]:
    """`request check --json` data and exit code for the request ``load`` reads (the web API returns the same). An
    invalid request raises its RequestError: bad input, exit 2 with one line per problem (a 400 problem with the
    lines on the web), as `plan` and `capacity check` answer the same file (README "Exit codes"). What only the
    estimate finds once the model is known (the engine's rules, a TP degree that does not divide the model's heads)
    is found by planning the request as `plan` does (without the search for alternatives): the same InputError, one
    line naming the file, line and job."""
    from ..plan.compose import make_plan  # the core: loaded by check and plan only

    req = load()
    make_plan(req, hardware_files=hardware_files, alternatives=False)
    return {"valid": True, "request": req.to_dict()}, 0, req


def cmd_check(args: argparse.Namespace) -> int:
    data, code, req = check_answer(lambda: load_request(args.request, hardware_files=args.hardware_file),
                                   args.hardware_file)
    if args.json:
        sys.stdout.write(json_text(data))
        return code
    n_train = sum(isinstance(j, TrainingJob) for j in req.jobs)
    say(f"{req.source}: valid request with {len(req.jobs)} job(s): {n_train} training, "
          f"{len(req.jobs) - n_train} inference ({', '.join(j.name for j in req.jobs)})")
    return 0


def cmd_schema(args: argparse.Namespace) -> int:
    from ..request.schema import schema_text
    if args.output:
        write_atomic(Path(args.output), schema_text(), force=args.force)
        say(f"schema written to {args.output}")
    else:
        sys.stdout.write(schema_text())
    return 0
