"""`llmsizer plan REQUEST.yaml [-o report.html|report.md|plan.json]`: a request in, a complete checked plan out."""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import InputError
from ..render.safe import say
from .commands import COMMAND_HELP
from .common import add_force, check_output_file, write_atomic

if TYPE_CHECKING:
    from ..plan import Plan
    from ..request import Request

# the planner, the request reader and the plan's text renderer are imported where a plan is made, not with the
# parser: `plan --help` built the parser after importing the whole planner (llmsizer.plan: every estimator; probe33
# D7; `plan --help` 1.07 -> 0.22 s CPU here)

EPILOG = """examples:
  llmsizer plan examples/lora-finetune-and-chat.yaml
  llmsizer plan examples/lora-finetune-and-chat.yaml -o report.html
  llmsizer plan examples/pretraining-multinode.yaml -o plan.md
  llmsizer plan examples/cpu-internal-tool.yaml -o plan.json
  llmsizer plan my-request.yaml --json
  llmsizer plan my-request.yaml --hardware-file our-servers.yaml
  generate-request | llmsizer plan - -o report.html

Write a request with `llmsizer request new -o my-request.yaml`; validate it with `llmsizer request check`.
Exit status: 0 when no check is an error, 1 when some are (the plan and report are still written), 2 when the
request is invalid (nothing is written).
"""

FORMATS = {".html": "html", ".htm": "html", ".md": "md", ".markdown": "md", ".json": "json"}


def register(sub: Any) -> None:
    p = sub.add_parser("plan", help=COMMAND_HELP["plan"],
                       description="Plan every training and inference job of REQUEST (YAML): memory per device and "
                                   "the hardware that fits, storage, network, duration and cost, and the checks a "
                                   "reviewer would raise. Prints a summary; -o writes an HTML, Markdown or JSON report.",
                       epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("request", help="request file (YAML or JSON), or - to read it from standard input; start from "
                                   "`llmsizer request new`")
    p.add_argument("-o", "--output", help="write a report: .html (self-contained, with charts), .md or .json")
    add_force(p, "the -o file")
    p.add_argument("--format", choices=("html", "md", "json"), help="report format (default: from the -o extension)")
    p.add_argument("--json", action="store_true", help="print the plan as JSON instead of the summary")
    p.add_argument("--hardware-file", action="append", default=[], metavar="FILE", help="extra hardware (JSON/YAML)")
    p.add_argument("--today", help="date the plan is made (YYYY-MM-DD); deadlines given as dates without a start "
                                   "count from it (default: today)")
    p.add_argument("--no-alternatives", action="store_true",
                   help="skip the catalog search for other hardware when a job names its resources (faster)")
    p.add_argument("--quiet", "-q", action="store_true", help="no summary (with -o)")
    p.set_defaults(func=cmd_plan)


def render(plan: Plan, fmt: str) -> str:
    if fmt == "html":
        from ..render.html import render_html
        return render_html(plan)
    if fmt == "md":
        from ..render.markdown import render_markdown
        return render_markdown(plan)
    return json.dumps(plan.to_dict(), indent=2, default=str) + "\n"


def plan_today(args: argparse.Namespace) -> _dt.date | None:
    """--today as a date (None: today)."""
    if not args.today:
        return None
    from ..request.quantities import LATEST_DATE
    try:
        today = _dt.date.fromisoformat(args.today)
    except ValueError:
        raise InputError(f"--today {args.today!r}: write YYYY-MM-DD") from None
    if today > LATEST_DATE:  # the bound of a request's own dates (review13 D4)
        raise InputError(f"--today {args.today!r} is after {LATEST_DATE}, the latest date a request may name")
    return today


def plan_answer(req: Request, args: argparse.Namespace, today: _dt.date | None, shown: bool = True) -> Plan:
    """The plan of a validated request under the flags (the web API plans the same way). ``shown``: a face that
    shows the alternatives renders it (a report, --json, the web); the text summary alone shows none (no option list,
    no chart), so the catalog search for them, when a job names its resources, is not run for it: the summary is
    the same as with --no-alternatives (probe28 D7: 182 fit_training, 1.4 of 1.3-1.4 s CPU for the LoRA example).
    A job naming no resources is planned on the search's choice whatever ``shown`` says."""
    from ..plan import make_plan
    return make_plan(req, hardware_files=args.hardware_file, today=today,
                     alternatives=shown and not args.no_alternatives)


def cmd_plan(args: argparse.Namespace) -> int:
    fmt = args.format
    out = Path(args.output) if args.output else None
    if out is not None and fmt is None:
        fmt = FORMATS.get(out.suffix.lower())
        if fmt is None:
            raise InputError(f"cannot tell the report format of {out.name!r}: use .html, .md or .json, or --format")
    today = plan_today(args)
    inputs = [args.request, *(args.hardware_file or ())]
    if out is not None:
        check_output_file(out, inputs, force=args.force)  # before any work: a folder, a device, an input or an
        # existing file (without --force) is refused up front
    from ..render.plan_text import render_plan_text
    from ..request import RequestError, load_request
    try:
        req = load_request(args.request, hardware_files=args.hardware_file)
    except RequestError as e:
        for line in e.errors:
            say(f"llmsizer: error: {line}", file=sys.stderr)
        return 2
    plan = plan_answer(req, args, today, shown=out is not None or args.json)  # the text alone shows no alternatives
    if out is not None:
        write_atomic(out, render(plan, fmt or "json"), inputs, force=args.force)
    if args.json:
        sys.stdout.write(render(plan, "json"))
    elif not args.quiet:
        say(render_plan_text(plan))
        if out is not None:
            say(f"report written to {out}")
    return 0 if plan.ok else 1
