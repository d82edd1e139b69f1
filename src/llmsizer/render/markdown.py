"""Markdown report of a plan, and the value formatting every plan renderer shares. Renders only: every number
comes from the :class:`~llmsizer.plan.Plan` (charts become tables of the same numbers)."""

from __future__ import annotations

from typing import Any

from ..plan.result import Chart, Check, Figure, JobPlan, Plan, Section
from ..units import format_bits, format_bytes, format_count, format_seconds, format_usd
from .safe import md_text

SEVERITY_LABEL = {"error": "ERROR", "warning": "WARNING", "info": "NOTE"}



def format_value(value: Any, unit: str) -> str:
    """A figure's value for people, by unit (see plan/result.py); None is '-'."""
    if value is None:
        return "-"
    if isinstance(value, bool) or unit == "bool":
        return "yes" if value else "no"
    if isinstance(value, str) or unit == "text":
        return str(value)
    v = float(value)
    if unit == "B":
        return format_bytes(v)
    if unit == "B_disk":
        return format_bytes(v, binary=False)
    if unit == "B/s":
        return f"{format_bytes(v, binary=False)}/s ({format_bits(v)})"
    if unit == "s":
        return format_seconds(v)
    if unit == "h":
        return f"{v:,.1f} h"
    if unit == "USD":
        return format_usd(v)
    if unit == "USD/h":
        return format_usd(v) + "/h"
    if unit == "tokens":
        return f"{format_count(v)} tokens"
    if unit == "tokens/s":
        return f"{v:,.1f} tokens/s"
    if unit == "steps":
        return f"{v:,.0f}"
    if unit == "FLOP":
        return f"{v:.3g} FLOP"
    if unit == "1/s":
        return f"{v:.3g}/s"
    if unit == "share":
        return f"{v:.1%}"
    if unit == "ratio":
        return f"{v:.2f}x"
    if unit == "count":
        return f"{v:,.0f}" if v >= 100 or float(v).is_integer() else f"{v:.3g}"
    return f"{v:g}"


def format_axis(value: float, unit: str) -> str:
    """Short tick labels for charts."""
    if unit == "B":
        return format_bytes(value).replace(".00 ", " ")
    if unit == "B_disk":
        return format_bytes(value, binary=False).replace(".00 ", " ")
    if unit == "USD":
        if value >= 1e6:
            return f"${value / 1e6:.3g}M"
        if value >= 1e3:
            return f"${value / 1e3:.3g}k"
        return f"${value:.3g}"
    if unit == "tokens" and value >= 1024 and value % 1024 == 0:
        return f"{value / 1024:g}k"  # context lengths are binary thousands: 8k = 8192
    if unit in ("tokens", "requests"):
        return format_count(value).replace(".00", "") if value >= 1000 else f"{value:g}"
    if unit == "h":
        return f"{value:g} h"
    return f"{value:g}"


def _esc(text: str) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def check_line(c: Check, source: str = "") -> str:
    where = f"{source}:{c.line}: " if source and c.line else ""
    job = f"job '{c.job}': " if c.job else ""
    return f"{where}{job}{c.title}: {c.message}"


def _section_md(s: Section) -> list[str]:
    rows = [f for f in s.figures if f.value is not None]
    if not rows:
        return []
    out = [f"### {s.title}", "", "| | value | how |", "|---|---|---|"]
    for f in rows:
        how = f.formula + (f" ({f.source})" if f.source else "")
        out.append(f"| {_esc(f.label)} | {_esc(format_value(f.value, f.unit))} | {_esc(how)} |")
    for n in s.notes:
        out.append(f"\n- {n}")
    out.append("")
    return out


def _chart_md(c: Chart) -> list[str]:
    out = [f"**{c.title}**" + (f" ({c.note})" if c.note else ""), ""]
    if c.kind == "lines":
        xs = sorted({p[0] for s in c.series for p in s.points})
        if len(xs) > 16:
            return out + [f"({len(xs)} points; see the HTML or JSON report)", ""]
        out.append("| " + c.x_label + " | " + " | ".join(_esc(s.name) for s in c.series) + " |")
        out.append("|---" * (len(c.series) + 1) + "|")
        for x in xs:
            cells = []
            for s in c.series:
                y = next((p[1] for p in s.points if p[0] == x), None)
                cells.append(format_axis(y, c.y_unit) if y is not None else "")
            out.append(f"| {format_axis(x, c.x_unit)} | " + " | ".join(cells) + " |")
    else:
        names = [s.name for s in c.series]
        out.append("| " + c.x_label + " | " + " | ".join(_esc(n) for n in names) + " |")
        out.append("|---" * (len(names) + 1) + "|")
        for i, cat in enumerate(c.categories):
            cells = []
            for s in c.series:
                y = next((p[1] for p in s.points if int(p[0]) == i), 0.0)
                cells.append(format_axis(y, c.y_unit) if y else "")
            out.append(f"| {_esc(cat)} | " + " | ".join(cells) + " |")
    for label, y in c.markers:
        out.append(f"\n{label}: {format_axis(y, c.y_unit)}")
    out.append("")
    return out


def _figure_row(f: Figure) -> str:
    return f"| {_esc(f.label)} | {_esc(format_value(f.value, f.unit))} |"


def _job_md(j: JobPlan) -> list[str]:
    hw = j.hardware
    out = [f"## {j.name} ({j.kind})", "", j.summary + ".", "",
           f"Hardware: **{hw.label}** ({hw.origin})"
           + (f", pool `{hw.pool}`" if hw.pool else "")
           + (f", {format_usd(hw.price_per_hour)}/h ({hw.price_basis})" if hw.price_per_hour is not None else ""), ""]
    for s in j.sections:
        out += _section_md(s)
    if j.notes:
        out += ["### Notes", ""] + [f"- {n}" for n in j.notes] + [""]
    if j.charts:
        out += ["### Charts (as tables)", ""]
        for c in j.charts:
            out += _chart_md(c)
    if j.warnings:
        out += ["### Warnings", ""] + [f"- {w}" for w in j.warnings] + [""]
    if j.assumptions:
        out += ["<details><summary>Assumptions</summary>", ""]
        out += [f"- `{a.name}` = {a.value}{' (default)' if a.default else ''}: {a.why}" for a in j.assumptions]
        out += ["", "</details>", ""]
    return out


def render_markdown(plan: Plan) -> str:
    """The whole plan as Markdown (GitHub-flavoured tables)."""
    out = [f"# Plan: {plan.title}", "", f"Request: `{plan.source}`. {plan.summary_line()[:1].upper()}"
           f"{plan.summary_line()[1:]}.", ""]
    out += ["## Checks", ""]
    if plan.checks:
        out += ["| severity | job | line | check | message | what to do |", "|---|---|---|---|---|---|"]
        for c in plan.checks:
            out.append(f"| {SEVERITY_LABEL[c.severity]} | {c.job or '-'} | {c.line or '-'} | {_esc(c.title)} | "
                       f"{_esc(c.message)} | {_esc(c.advice)} |")
    else:
        out.append("No problems found.")
    out += ["", "## Totals", "", "| | |", "|---|---|"]
    out += [_figure_row(f) for f in plan.totals.figures if f.value is not None]
    out.append("")
    for chart in plan.charts:
        out += _chart_md(chart)
    for j in plan.jobs:
        out += _job_md(j)
    if plan.notes:
        out += ["## General notes", ""] + [f"- {n}" for n in plan.notes] + [""]
    return _html_safe("\n".join(out).rstrip() + "\n")


_OWN_TAGS = frozenset({"<details><summary>Assumptions</summary>", "</details>"})  # whole lines this renderer writes


def _html_safe(text: str) -> str:
    """The report with HTML escaped on every line but the renderer's own tag lines: request titles, job notes
    and model names are the user's text, and a ``<script>`` or ``<img onerror=...>`` in them must stay text
    wherever the Markdown is rendered (issue #15). Control characters are shown as escapes."""
    return "\n".join(line if line in _OWN_TAGS else md_text(line) for line in text.split("\n"))
