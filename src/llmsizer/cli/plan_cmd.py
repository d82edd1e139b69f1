"""`llmsizer plan REQUEST.yaml [-o report.html|report.md|plan.json]`: a request in, a complete checked plan out."""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import sys
from pathlib import Path
from typing import Any

from ..errors import InputError
from ..plan import Plan, make_plan
from ..plan.result import JobPlan
from ..render.markdown import SEVERITY_LABEL, check_line, format_usd, format_value
from ..request import RequestError, load_request
from .common import write_atomic

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
    p = sub.add_parser("plan", help="a request file in, a complete checked plan out (memory, hardware, storage, "
                                    "network, duration, cost, checks)",
                       description="Plan every training and inference job of REQUEST (YAML): memory per device and "
                                   "the hardware that fits, storage, network, duration and cost, and the checks a "
                                   "reviewer would raise. Prints a summary; -o writes an HTML, Markdown or JSON report.",
                       epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("request", help="request file (YAML or JSON), or - to read it from standard input; start from "
                                   "`llmsizer request new`")
    p.add_argument("-o", "--output", help="write a report: .html (self-contained, with charts), .md or .json")
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


def cmd_plan(args: argparse.Namespace) -> int:
    fmt = args.format
    out = Path(args.output) if args.output else None
    if out is not None and fmt is None:
        fmt = FORMATS.get(out.suffix.lower())
        if fmt is None:
            raise InputError(f"cannot tell the report format of {out.name!r}: use .html, .md or .json, or --format")
    today = None
    if args.today:
        try:
            today = _dt.date.fromisoformat(args.today)
        except ValueError:
            raise InputError(f"--today {args.today!r}: write YYYY-MM-DD") from None
    try:
        req = load_request(args.request, hardware_files=args.hardware_file)
    except RequestError as e:
        for line in e.errors:
            print(f"llmsizer: error: {line}", file=sys.stderr)
        return 2
    plan = make_plan(req, hardware_files=args.hardware_file, today=today, alternatives=not args.no_alternatives)
    if out is not None:
        write_atomic(out, render(plan, fmt or "json"))
    if args.json:
        sys.stdout.write(render(plan, "json"))
    elif not args.quiet:
        print(render_plan_text(plan))
        if out is not None:
            print(f"report written to {out}")
    return 0 if plan.ok else 1


# ------------------------------------------------------------------------------------------ terminal summary

def _v(j: JobPlan, section: str, key: str) -> str:
    f = j.section(section).get(key)
    return format_value(f.value, f.unit) if f is not None else "-"


def _job_lines(j: JobPlan) -> list[str]:
    hw = j.hardware
    out = [f"{j.name} ({j.kind}): {j.summary}"]
    mem = j.section("memory")
    if j.kind == "training":
        fits = mem.value("fits")
        out.append(f"  memory    {_v(j, 'memory', 'need')} per device of a {_v(j, 'memory', 'budget')} budget"
                   f" ({'fits' if fits else 'DOES NOT FIT' if fits is False else 'budget unknown'}); "
                   f"{_v(j, 'memory', 'ratio')} the inference estimate ({_v(j, 'memory', 'inference_need')})")
        out.append(f"  storage   {_v(j, 'storage', 'total')} to provision (requested {_v(j, 'storage', 'requested')});"
                   f" one checkpoint {_v(j, 'storage', 'checkpoint_one')}, checkpoints at peak "
                   f"{_v(j, 'storage', 'checkpoints')}")
        if j.hardware.count > 1:
            out.append(f"  network   {_v(j, 'network', 'dp_bytes')} per step between data-parallel ranks; "
                       f"communication {_v(j, 'network', 'comm_seconds')} of a {_v(j, 'network', 'compute_seconds')} "
                       f"step ({_v(j, 'network', 'comm_share')} if not overlapped)")
        lost_cost = j.section("duration").value("lost_cost")
        out.append(f"  duration  {_v(j, 'duration', 'seconds')} wall-clock, {_v(j, 'duration', 'device_hours')} "
                   f"device-hours, {_v(j, 'duration', 'steps')} steps; an interruption loses up to "
                   f"{_v(j, 'duration', 'lost_per_interruption')}"
                   + (f" ({_v(j, 'duration', 'lost_cost')})" if lost_cost is not None else ""))
        budget = f"; budget {_v(j, 'cost', 'budget')}" if j.section("cost").value("budget") else ""
        if j.section("cost").value("price_per_hour") is None:
            out.append(f"  cost      unknown: no price for {hw.label} (give resources.price_per_hour){budget}")
        else:
            out.append(f"  cost      {_v(j, 'cost', 'hourly_total')} by the hour at {_v(j, 'cost', 'price_per_hour')}"
                       + budget)
    else:
        fits = mem.value("fits")
        adm = mem.get("admitted")
        out.append(f"  memory    {_v(j, 'memory', 'need_peak')} per device at peak, budget {_v(j, 'memory', 'budget')}"
                   f" ({'fits' if fits else 'DOES NOT FIT' if fits is False else 'budget unknown'})"
                   + (f"; vLLM admits {adm.value} sequences of the peak context" if adm is not None else ""))
        out.append(f"  speed     TTFT {_v(j, 'speed', 'ttft_typical')} typical / {_v(j, 'speed', 'ttft_peak')} peak; "
                   f"{_v(j, 'speed', 'tps_user_typical')} / {_v(j, 'speed', 'tps_user_peak')} per user")
        net = j.section("network")
        extras = [x for x in (net.value("isolation"), "fixed address" if net.value("fixed_address") else None) if x]
        out.append(f"  network   in {_v(j, 'network', 'ingress_typical')}, out {_v(j, 'network', 'egress_typical')} "
                   f"typical" + (f"; {', '.join(str(x) for x in extras)}" if extras else ""))
        out.append(f"  storage   {_v(j, 'storage', 'total')} to provision (requested {_v(j, 'storage', 'requested')})")
        if j.section("cost").value("price_per_hour") is None:
            out.append(f"  cost      unknown: no price for {hw.label} (give resources.price_per_hour)")
        else:
            out.append(f"  cost      {_v(j, 'cost', 'monthly_hourly')}/month by the hour ({_v(j, 'cost', 'hourly_total')}"
                       f" over {_v(j, 'cost', 'months')} months); {_v(j, 'cost', 'per_million_tokens')} per million "
                       "output tokens")
    if hw.origin == "suggested":
        out.append(f"  hardware  suggested: {hw.label}" + (f" at {format_usd(hw.price_per_hour)}/h"
                                                         if hw.price_per_hour is not None else ""))
    return out


def render_plan_text(plan: Plan) -> str:
    e, w, i = (len(plan.checks_of(s)) for s in ("error", "warning", "info"))
    out = [f"Plan: {plan.title}  ({plan.source})", f"checks: {e} error(s), {w} warning(s), {i} note(s)"]
    for c in plan.checks:
        out.append(f"  {SEVERITY_LABEL[c.severity]:<7} {check_line(c, plan.source)}")
        if c.advice:
            out.append(f"          -> {c.advice}")
    out.append("")
    for j in plan.jobs:
        out += _job_lines(j)
        for n in j.notes:
            out.append(f"  note: {n}")
        out.append("")
    t = plan.totals
    out.append("totals: " + "; ".join(f"{f.label} {format_value(f.value, f.unit)}" for f in t.figures
                                      if f.value is not None))
    return "\n".join(out)
