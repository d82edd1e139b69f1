"""Notebook rendering: the HTML a Jupyter notebook shows for a result (``_repr_html_``), and the text ``str()``
prints for the result kinds whose terminal rendering lives with their command.

Every HTML fragment is self-contained (no scripts, no stylesheet or font to fetch; one ``<style>`` block scoped to
``.llmsizer``), escapes every text it shows, and holds the same figures, formatted the same way, as the text the
CLI prints: a table of the breakdown with its totals, then the assumptions and the warnings. Renders only.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from html import escape
from typing import TYPE_CHECKING

from ..units import format_bytes
from .recommend_text import option_name, option_rows, workload_line
from .text import estimate_facts, estimate_heading

if TYPE_CHECKING:
    from ..estimate.fit import FitResult
    from ..plan.result import Plan
    from ..recommend import Recommendation
    from ..result import Assumption, Estimate

STYLE = ("<style>.llmsizer table{border-collapse:collapse;margin:4px 0 10px}"
         ".llmsizer th,.llmsizer td{padding:2px 10px;border-bottom:1px solid #ddd;text-align:left;vertical-align:top}"
         ".llmsizer td.num{text-align:right;white-space:nowrap;font-variant-numeric:tabular-nums}"
         ".llmsizer tr.total td{font-weight:600;border-top:2px solid #999}"
         ".llmsizer .how{color:#666;font-size:90%}.llmsizer .warn{color:#b54708}"
         ".llmsizer h4{margin:10px 0 4px}</style>")


# ------------------------------------------------------------------------------------------------ helpers

def _wrap(kind: str, parts: Iterable[str]) -> str:
    return f'<div class="llmsizer llmsizer-{escape(kind)}">{STYLE}' + "".join(parts) + "</div>"


def _table(header: Sequence[str], rows: Iterable[Sequence[str]], *, num: Sequence[int] = (), how: Sequence[int] = (),
           total_rows: Sequence[int] = (), table_class: str = "") -> str:
    """An HTML table of plain-text cells (escaped here). ``num``: right-aligned columns; ``how``: muted columns;
    ``total_rows``: indexes of rows styled as totals; ``table_class``: the table's class, for readers of the HTML."""
    head = "".join(f"<th>{escape(h)}</th>" for h in header)
    body = []
    for k, row in enumerate(rows):
        cells = []
        for i, c in enumerate(row):
            cls = "num" if i in num else "how" if i in how else ""
            cells.append(f'<td class="{cls}">{escape(str(c))}</td>' if cls else f"<td>{escape(str(c))}</td>")
        body.append(('<tr class="total">' if k in total_rows else "<tr>") + "".join(cells) + "</tr>")
    cls_attr = f' class="{escape(table_class)}"' if table_class else ""
    return f"<table{cls_attr}><thead><tr>{head}</tr></thead><tbody>" + "".join(body) + "</tbody></table>"


def _assumptions(assumptions: Sequence[Assumption]) -> str:
    if not assumptions:
        return ""
    rows = [[a.name, str(a.value), "default" if a.default else "given", a.why] for a in assumptions]
    return "<h4>Assumptions</h4>" + _table(["name", "value", "", "why"], rows, how=(3,), table_class="assumptions")


def _warnings(warnings: Sequence[str]) -> str:
    if not warnings:
        return ""
    return ('<h4>Warnings</h4><ul class="warnings">'
            + "".join(f'<li class="warn">{escape(w)}</li>' for w in dict.fromkeys(warnings)) + "</ul>")


def _lines(lines: Sequence[str]) -> str:
    return "".join(f"<p>{escape(line)}</p>" for line in lines)


# ------------------------------------------------------------------------------------------------ estimate

def estimate_breakdown(est: Estimate) -> str:
    """The breakdown table: one row per component (expected bytes, low-high range, formula and source) and a TOTAL
    row per memory location, formatted as ``render_estimate`` formats them."""
    rows: list[list[str]] = []
    for it in est.items:
        lo, mid, hi = it.range
        rng = "" if lo == mid == hi else f"{format_bytes(lo)} - {format_bytes(hi)}"
        how = it.formula + (f" [{it.source}]" if it.source else "")
        rows.append([it.name, it.location, format_bytes(mid), rng, how])
    totals = []
    for loc in ("device", "host"):
        if any(i.location == loc for i in est.items):
            lo, mid, hi = est.total(loc)  # type: ignore[arg-type]
            totals.append(len(rows))
            rows.append([f"TOTAL {est.total_label(loc)}", loc, format_bytes(mid), f"{format_bytes(lo)} - {format_bytes(hi)}", ""])
    return _table(["component", "where", "expected", "range", "how"], rows, num=(2, 3), how=(4,),
                  total_rows=totals, table_class="breakdown")


def estimate_html(est: Estimate) -> str:
    """An ``Estimate`` as an HTML fragment: heading, breakdown with totals, facts, assumptions, warnings."""
    return _wrap("estimate", [f"<h4>{escape(estimate_heading(est))}</h4>", estimate_breakdown(est),
                              _lines(estimate_facts(est)), _assumptions(est.assumptions), _warnings(est.warnings)])


# ------------------------------------------------------------------------------------------------ fit

def fit_html(r: FitResult) -> str:
    """A ``FitResult`` as an HTML fragment: the verdict and reasons, memory per device, the speed table, the memory
    breakdown behind it, assumptions and warnings (the figures ``render_fit`` prints)."""
    from .fit_text import SPEED_HEADER, fit_headline, memory_line, queued_wait, speed_coverage_lines, speed_rows
    if r.kind == "training":
        head = f"{r.model} training on {r.devices_text}"
    else:
        head = fit_headline(r)
    parts = [f"<h4>{escape(head)}</h4>", _lines(r.reasons)]
    if r.memory_per_device is not None and r.budget_per_device is not None:
        parts.append(_lines([memory_line(r)]))
    if r.speed is not None:
        rows = speed_rows(r.speed, queued_wait(r) is not None)
        if rows:
            parts.append("<h4>Speed</h4>" + _table(SPEED_HEADER, rows, num=(1,), table_class="speed")
                         + _lines(speed_coverage_lines(r.speed)))
    if r.estimate is not None:
        parts.append("<h4>Memory per device</h4>" + estimate_breakdown(r.estimate))
    parts += [_assumptions(r.all_assumptions), _warnings(r.all_warnings)]
    return _wrap("fit", parts)


# ------------------------------------------------------------------------------------------------ recommend

def recommendation_text(rec: Recommendation, top: int = 8) -> str:
    """What ``llmsizer recommend`` prints (the command's own renderer)."""
    from .recommend_text import render_recommendation
    return render_recommendation(rec, top)


def recommendation_html(rec: Recommendation, top: int = 8) -> str:
    """A ``Recommendation`` as an HTML fragment: the options table (as ``llmsizer recommend`` prints it), the
    choice and its reasons, advice, the cheapest rejections with their reasons, assumptions and warnings."""
    parts = [f"<h4>{escape(rec.model)}: {escape(rec.kind)} options ({len(rec.options)} meet the constraints, "
             f"{len(rec.rejected)} rejected)</h4>"]

    rows, header = option_rows(rec, top)
    if rec.kind == "inference":
        num: tuple[int, ...] = (4, 5, 6, 7, 8)
    else:
        num = (3, 4, 5, 6)
        parts.append(_lines([workload_line(rec)]))
    if rows:
        parts.append(_table(header, rows, num=num, total_rows=(0,) if rec.chosen is not None else (),
                            table_class="options"))
    if len(rec.options) > top:
        parts.append(_lines([f"... {len(rec.options) - top} more options (to_dict() has all)"]))
    if rec.refusal is not None:
        parts.append(_lines(["no option: " + rec.refusal]))
    if rec.chosen is not None:
        parts.append(_lines(["chosen: " + option_name(rec.chosen) + " - " + "; ".join(rec.chosen.reasons)]))
    parts.append(_lines([*("advice: " + a for a in rec.advice), *("quantization: " + q for q in rec.quantization)]))
    if rec.rejected:
        rej = [[option_name(o), "; ".join(o.reasons), format_bytes(o.memory_per_device) if o.memory_per_device else ""]
               for o in rec.rejected[:top]]
        parts.append("<h4>Rejected (cheapest first)</h4>"
                     + _table(["option", "why", "memory per device"], rej, num=(2,), table_class="rejected"))
        if len(rec.rejected) > top:
            parts.append(_lines([f"... {len(rec.rejected) - top} more (to_dict() has all)"]))
    parts += [_assumptions(rec.assumptions), _warnings(rec.warnings)]
    return _wrap("recommendation", parts)


# ------------------------------------------------------------------------------------------------ plan

def plan_text(plan: Plan) -> str:
    """The summary ``llmsizer plan`` prints (the command's own renderer)."""
    from .plan_text import render_plan_text
    return render_plan_text(plan)


def plan_html(plan: Plan) -> str:
    """A ``Plan`` as an HTML fragment: checks, totals, and per job its hardware, every figure with its formula,
    notes, assumptions and warnings. (``llmsizer.render.html.render_html`` writes the full report with charts.)"""
    from ..units import format_usd
    from .markdown import SEVERITY_LABEL, check_line, format_value
    parts = [f"<h4>Plan: {escape(plan.title)}  ({escape(plan.source)})</h4>", _lines([plan.summary_line()])]
    if plan.checks:
        parts.append(_table(["severity", "check", "what to do"],
                            [[SEVERITY_LABEL[c.severity], check_line(c, plan.source), c.advice] for c in plan.checks],
                            how=(2,), table_class="checks"))
    totals = [[f.label, format_value(f.value, f.unit), f.formula] for f in plan.totals.figures if f.value is not None]
    parts.append("<h4>Totals</h4>" + _table(["", "value", "how"], totals, num=(1,), how=(2,), table_class="totals"))
    for j in plan.jobs:
        hw = j.hardware
        price = f" at {format_usd(hw.price_per_hour)}/h ({hw.price_basis})" if hw.price_per_hour is not None else ""
        parts.append(f'<h4 class="job">{escape(j.name)} ({escape(j.kind)})</h4>'
                     + _lines([j.summary, f"hardware: {hw.label} ({hw.origin}){price}"]))
        rows = [[s.title, f.label, format_value(f.value, f.unit), f.formula + (f" [{f.source}]" if f.source else "")]
                for s in j.sections for f in s.figures if f.value is not None]
        parts.append(_table(["section", "figure", "value", "how"], rows, num=(2,), how=(3,)))
        parts.append(_lines([f"note: {n}" for n in j.notes]))
        parts += [_assumptions(j.assumptions), _warnings(j.warnings)]
    parts.append(_lines([f"note: {n}" for n in plan.notes]))
    return _wrap("plan", parts)
