"""The provider's utilisation as charts and a self-contained HTML page: devices held over time per device type
(inline SVG, from :mod:`llmsizer.render.svg`) and the reservations table. Same rules as the plan report
(:mod:`llmsizer.render.html`): one file, inline CSS, no scripts, nothing fetched (a Content-Security-Policy of
``default-src 'none'`` enforces it). Renders only."""

from __future__ import annotations

import datetime as _dt
from collections.abc import Sequence
from html import escape
from typing import Any

from .inventory import Inventory
from .placement import ONGOING_END, SERVICE_HORIZON, Booking

TIMELINE_POINTS = 40


def timeline(inv: Inventory, bookings: Sequence[Booking], points: int = TIMELINE_POINTS
             ) -> tuple[list[_dt.datetime], dict[str, list[float]]]:
    """Share of each device type's devices held, at ``points`` moments spanning the bookings."""
    items = [i for b in bookings for i in b.items if i.resource.startswith("node:")]
    if not items:
        return [], {}
    lo = min(i.start for i in items)
    finite = [i.end for i in items if i.end < ONGOING_END]  # an ongoing service's holds have no end: not the span
    hi = max(finite, default=lo + _dt.timedelta(seconds=SERVICE_HORIZON))
    step = (hi - lo) / max(1, points - 1)
    times = [lo + step * k for k in range(points)]
    node_dev = {f"node:{n.id}": n.device for n in inv.nodes}
    total: dict[str, int] = {}
    for n in inv.nodes:
        total[n.device] = total.get(n.device, 0) + n.devices
    series: dict[str, list[float]] = {d: [] for d in total}
    for t in times:
        held = {d: 0.0 for d in total}
        for i in items:
            if i.start <= t < i.end and i.resource in node_dev:
                held[node_dev[i.resource]] += i.amount
        for d in total:
            series[d].append(held[d] / total[d] if total[d] else 0.0)
    return times, series


def timeline_chart(times: Sequence[_dt.datetime], series: dict[str, list[float]], *, device: str | None = None
                   ) -> Any:
    """A line chart (:class:`~llmsizer.plan.result.Chart`) of the timeline: every device type, or one."""
    from ..plan.result import Chart, Series
    t0 = times[0] if times else _dt.datetime(2000, 1, 1)
    chosen = {d: v for d, v in series.items() if device is None or d == device}
    title = "Devices held over time" + (f": {device}" if device else "")
    cid = "capacity-timeline" + (f"-{device}" if device else "")
    note = f"from {t0:%Y-%m-%d %H:%M} UTC" if times else ""
    return Chart(cid, title, "lines", "days from first booking", "share of devices", "share", tuple(
        Series(d, tuple(((t - t0).total_seconds() / 86400, v) for t, v in zip(times, vals, strict=True)))
        for d, vals in chosen.items()), markers=(("capacity", 1.0),), note=note)


def timeline_svg(inv: Inventory, bookings: Sequence[Booking]) -> str:
    from ..render.svg import line_chart
    times, series = timeline(inv, bookings)
    return line_chart(timeline_chart(times, series))


def _inline(svg: str) -> str:
    """Inline SVG in HTML needs no namespace declaration: drop it, so the page names no URL at all."""
    return svg.replace(' xmlns="http://www.w3.org/2000/svg"', "", 1)


def _fmt(t: Any) -> str:
    if isinstance(t, _dt.datetime):
        return "until released" if t >= ONGOING_END else f"{t:%Y-%m-%d %H:%M}"
    return str(t)


def render_capacity_html(inv: Inventory, bookings: Sequence[Booking], reservations: Sequence[dict[str, Any]],
                         *, title: str = "", generated: _dt.datetime | None = None) -> str:
    """The utilisation timeline (one chart per device type) and the reservations as one HTML page: each row with the
    plan's numbers it was booked for (``figures_text``) and the maintenance its job agreed to (``agreement_text``),
    the words of the records the text and ``--json`` answers carry (store.with_figures)."""
    from .._version import __version__
    from ..render.html import CSP, CSS
    from ..render.svg import line_chart
    times, series = timeline(inv, bookings)
    held = {b.id: b for b in bookings}
    figures = []
    for dev, vals in series.items():
        chart = timeline_chart(times, series, device=dev)
        caption = f"{dev}: peak {max(vals):.0%} of {sum(n.devices for n in inv.nodes if n.device == dev)} " \
                  f"device(s); {chart.note}"
        figures.append(f"<figure>{_inline(line_chart(chart))}<figcaption>{escape(caption)}</figcaption></figure>")
    charts = f'<div class="charts">{"".join(figures)}</div>' if figures else \
        '<p class="card muted">No devices are held by any active reservation.</p>'
    rows = []
    for r in reservations:
        b = held.get(r["id"])
        nodes = sorted({i.resource.split(":", 1)[1] for i in b.items if i.resource.startswith("node:")}) if b else []
        devices = sum(i.amount for i in b.items if i.resource.startswith("node:")) if b else 0
        rows.append(f'<tr class="state-{escape(str(r["state"]))}"><td><code>{escape(str(r["id"]))}</code></td>'
                    f'<td>{escape(str(r["state"]))}</td><td>{escape(str(r["job"]))}</td>'
                    f'<td>{escape(str(r["kind"]))}</td><td class="num">{escape(_fmt(r["start"]))}</td>'
                    f'<td class="num">{escape(_fmt(r["end"]))}</td><td class="num">{devices:g}</td>'
                    f'<td>{escape(", ".join(nodes) or "-")}</td>'
                    f'<td class="plan">{escape(r.get("figures_text") or "-")}</td>'
                    f'<td class="how">{escape(str(r.get("agreement_text") or ""))}</td>'
                    f'<td class="how">{escape(str(r.get("note") or ""))}</td></tr>')
    table = ('<div class="card"><table id="bookings"><thead><tr><th>id</th><th>state</th><th>job</th><th>kind</th>'
             "<th>start (UTC)</th><th>end (UTC)</th><th>devices</th><th>nodes</th><th>plan</th>"
             "<th>maintenance</th><th>note</th></tr></thead><tbody>"
             + "".join(rows) + "</tbody></table></div>") if rows else '<p class="card muted">No reservations.</p>'
    name = title or "Capacity"
    active = sum(1 for r in reservations if r["state"] != "released")
    when = f", generated {generated:%Y-%m-%d %H:%M} UTC" if generated else ""
    body = [f"<h1>{escape(name)}</h1>",
            f'<p class="muted">{len(reservations)} reservation(s), {active} active{escape(when)}. '
            "Share of each device type's devices held by tentative and confirmed reservations.</p>",
            "<h2>Devices held over time</h2>", charts,
            "<h2>Bookings</h2>", table,
            f"<footer>llmsizer {escape(__version__)} — self-contained report: no scripts, no network.</footer>"]
    return ("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
            f'<meta http-equiv="Content-Security-Policy" content="{CSP}">\n'
            '<meta name="viewport" content="width=device-width, initial-scale=1">\n'
            f"<title>{escape(name)}</title>\n<style>{CSS}</style>\n</head>\n<body>\n<main>\n"
            + "\n".join(body) + "\n</main>\n</body>\n</html>\n")
