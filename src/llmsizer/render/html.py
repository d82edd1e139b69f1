"""A self-contained HTML report of a plan: one file, inline CSS and inline SVG charts, no scripts, no fonts or
images to fetch (a Content-Security-Policy of ``default-src 'none'`` enforces it). Renders only."""

from __future__ import annotations

from html import escape

from .._version import __version__
from ..plan.result import Check, JobPlan, Plan, Section
from ..units import format_usd
from .markdown import SEVERITY_LABEL, format_value
from .svg import render_chart

CSS = """
:root { --err: #b42318; --warn: #b54708; --info: #175cd3; --ok: #067647; --line: #e4e7ec; --muted: #667085; }
* { box-sizing: border-box; }
body { margin: 0; padding: 24px 32px 48px; color: #101828; background: #f9fafb;
       font: 14px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, Helvetica, Arial, sans-serif; }
main { max-width: 1120px; margin: 0 auto; }
h1 { font-size: 24px; margin: 0 0 4px; } h2 { font-size: 19px; margin: 32px 0 8px; }
h3 { font-size: 15px; margin: 18px 0 6px; }
.muted { color: var(--muted); }
.card { background: #fff; border: 1px solid var(--line); border-radius: 8px; padding: 16px 20px; margin: 12px 0; }
.badges span { display: inline-block; border-radius: 999px; padding: 2px 10px; margin-right: 6px; font-weight: 600;
               font-size: 12px; }
.b-error { background: #fee4e2; color: var(--err); } .b-warning { background: #fef0c7; color: var(--warn); }
.b-info { background: #d1e9ff; color: var(--info); } .b-ok { background: #d1fadf; color: var(--ok); }
table { border-collapse: collapse; width: 100%; font-size: 13px; }
th, td { text-align: left; padding: 5px 8px; border-bottom: 1px solid var(--line); vertical-align: top; }
th { color: var(--muted); font-weight: 600; }
td.num { white-space: nowrap; font-variant-numeric: tabular-nums; }
td.how { color: var(--muted); font-size: 12px; }
tr.sev-error td:first-child { color: var(--err); font-weight: 700; }
tr.sev-warning td:first-child { color: var(--warn); font-weight: 700; }
tr.sev-info td:first-child { color: var(--info); font-weight: 700; }
.charts { display: flex; flex-wrap: wrap; gap: 12px; }
.charts figure { margin: 0; background: #fff; border: 1px solid var(--line); border-radius: 8px; padding: 6px; }
figcaption { font-size: 12px; color: var(--muted); padding: 2px 6px 4px; max-width: 708px; }
svg.chart { display: block; max-width: 100%; height: auto; }
.grid { display: grid; grid-template-columns: repeat(auto-fit, minmax(480px, 1fr)); gap: 12px; }
ul.notes li { margin: 4px 0; }
details summary { cursor: pointer; color: var(--muted); }
footer { margin-top: 40px; color: var(--muted); font-size: 12px; }
"""

CSP = "default-src 'none'; style-src 'unsafe-inline'; img-src data:"


def _checks(plan: Plan) -> str:
    if not plan.checks:
        return '<p class="card"><span class="badges"><span class="b-ok">OK</span></span>No problems found.</p>'
    rows = []
    for c in plan.checks:
        rows.append(f'<tr class="sev-{c.severity}"><td>{SEVERITY_LABEL[c.severity]}</td><td>{escape(c.job or "-")}'
                    f'</td><td class="num">{c.line or "-"}</td><td><b>{escape(c.title)}</b><br>{escape(c.message)}'
                    f'</td><td class="how">{escape(c.advice)}</td></tr>')
    return ('<div class="card"><table id="checks"><thead><tr><th>severity</th><th>job</th><th>line</th>'
            '<th>check</th><th>what to do</th></tr></thead><tbody>' + "".join(rows) + "</tbody></table></div>")


def _section(s: Section) -> str:
    rows = [f for f in s.figures if f.value is not None]
    if not rows:
        return ""
    body = "".join(f'<tr><td>{escape(f.label)}</td><td class="num">{escape(format_value(f.value, f.unit))}</td>'
                   f'<td class="how">{escape(f.formula)}{" — " + escape(f.source) if f.source else ""}</td></tr>'
                   for f in rows)
    notes = "".join(f"<li>{escape(n)}</li>" for n in s.notes)
    return (f'<div class="card section" id="{escape(s.key)}"><h3>{escape(s.title)}</h3><table><tbody>{body}'
            f"</tbody></table>" + (f'<ul class="notes">{notes}</ul>' if notes else "") + "</div>")


def _figure(svg: str, note: str) -> str:
    return f"<figure>{svg}" + (f"<figcaption>{escape(note)}</figcaption>" if note else "") + "</figure>"


def _job(j: JobPlan, checks: list[Check]) -> str:
    hw = j.hardware
    price = f", {format_usd(hw.price_per_hour)}/h ({escape(hw.price_basis)})" if hw.price_per_hour is not None else ""
    out = [f'<section class="job" id="job-{escape(j.name)}"><h2>{escape(j.name)} '
           f'<span class="muted">({escape(j.kind)})</span></h2>',
           f'<p>{escape(j.summary)}.</p><p>Hardware: <b>{escape(hw.label)}</b> ({escape(hw.origin)})'
           + (f", pool <code>{escape(hw.pool)}</code>" if hw.pool else "") + price + "</p>"]
    mine = [c for c in checks if c.job == j.name]
    if mine:
        out.append('<p class="badges">' + "".join(f'<span class="b-{c.severity}">{escape(c.title)}</span>'
                                                   for c in mine) + "</p>")
    if j.charts:
        out.append('<div class="charts">' + "".join(_figure(render_chart(c), c.note) for c in j.charts) + "</div>")
    out.append('<div class="grid">' + "".join(_section(s) for s in j.sections) + "</div>")
    if j.notes:
        out.append('<div class="card"><h3>Notes</h3><ul class="notes">'
                   + "".join(f"<li>{escape(n)}</li>" for n in j.notes) + "</ul></div>")
    if j.warnings:
        out.append('<div class="card"><h3>Warnings</h3><ul class="notes">'
                   + "".join(f"<li>{escape(w)}</li>" for w in j.warnings) + "</ul></div>")
    if j.assumptions:
        out.append('<div class="card"><details><summary>Assumptions ('
                   f'{len(j.assumptions)})</summary><table><tbody>'
                   + "".join(f"<tr><td><code>{escape(a.name)}</code></td><td>{escape(str(a.value))}"
                             f"{' (default)' if a.default else ''}</td><td class=\"how\">{escape(a.why)}</td></tr>"
                             for a in j.assumptions) + "</tbody></table></details></div>")
    out.append("</section>")
    return "\n".join(out)


def render_html(plan: Plan) -> str:
    """The whole plan as one self-contained HTML page."""
    c = plan.summary_counts()  # the request checks by severity and the jobs' warnings (Plan.summary_counts)
    badges = "request checks: " + (
        f'<span class="b-error">{c["error"]} error(s)</span><span class="b-warning">{c["warning"]} warning(s)</span>'
        f'<span class="b-info">{c["info"]} note(s)</span>' if plan.checks else '<span class="b-ok">no problems</span>')
    badges += "; job warnings: " + (f'<span class="b-warning">{c["job_warnings"]} (under each job)</span>'
                                    if c["job_warnings"] else '<span class="b-ok">none</span>')
    totals = "".join(f'<tr><td>{escape(f.label)}</td><td class="num">{escape(format_value(f.value, f.unit))}</td>'
                     f'<td class="how">{escape(f.formula)}</td></tr>' for f in plan.totals.figures
                     if f.value is not None)
    charts = "".join(_figure(render_chart(c), c.note) for c in plan.charts)
    body = [f"<h1>Plan: {escape(plan.title)}</h1>",
            f'<p class="muted">Request <code>{escape(plan.source)}</code>, {len(plan.jobs)} job(s). '
            f"Each number below comes with how it was computed.</p>",
            f'<p class="badges" id="summary">{badges}</p>',
            "<h2>Checks</h2>", _checks(plan),
            "<h2>Totals</h2>", f'<div class="card"><table id="totals"><tbody>{totals}</tbody></table></div>',
            f'<div class="charts">{charts}</div>']
    body += [_job(j, list(plan.checks)) for j in plan.jobs]
    if plan.notes:
        body.append('<h2>General notes</h2><div class="card"><ul class="notes">'
                    + "".join(f"<li>{escape(n)}</li>" for n in plan.notes) + "</ul></div>")
    body.append(f"<footer>llmsizer {escape(__version__)} — self-contained report: no scripts, no network.</footer>")
    return ("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
            f'<meta http-equiv="Content-Security-Policy" content="{CSP}">\n'
            '<meta name="viewport" content="width=device-width, initial-scale=1">\n'
            f"<title>Plan: {escape(plan.title)}</title>\n<style>{CSS}</style>\n</head>\n<body>\n<main>\n"
            + "\n".join(body) + "\n</main>\n</body>\n</html>\n")
