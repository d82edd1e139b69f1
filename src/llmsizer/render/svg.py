"""Charts as inline SVG, written by hand: no plotting library, no fonts or scripts to load, so a report opens
offline and renders the same everywhere. Three kinds, from :class:`~llmsizer.plan.Chart` data: line charts
(memory vs context/concurrency, storage over the run), horizontal bars (cost per option) and horizontal stacked
bars (memory breakdown per job). Renders only: the numbers come from the chart."""

from __future__ import annotations

import math
from xml.sax.saxutils import escape

from ..plan.result import Chart
from .markdown import format_axis

# Tableau 10 (colour-blind friendly ordering as in matplotlib's 'tab10')
PALETTE = ("#1f77b4", "#ff7f0e", "#2ca02c", "#9467bd", "#8c564b", "#e377c2", "#17becf", "#bcbd22", "#7f7f7f",
           "#aec7e8", "#ffbb78", "#98df8a", "#c5b0d5", "#c49c94")
MARKER_COLOR = "#d62728"
FONT = "font-family=\"system-ui, -apple-system, 'Segoe UI', Roboto, Helvetica, Arial, sans-serif\""


def _t(x: float, y: float, text: str, size: int = 11, anchor: str = "start", color: str = "#333",
       weight: str = "normal", extra: str = "") -> str:
    return (f'<text x="{x:.1f}" y="{y:.1f}" font-size="{size}" text-anchor="{anchor}" fill="{color}" '
            f'font-weight="{weight}" {extra}>{escape(text)}</text>')


def nice_ticks(lo: float, hi: float, n: int = 5) -> list[float]:
    """Round tick values covering [lo, hi] (1, 2, 2.5, 5 x 10^k steps)."""
    if hi <= lo:
        hi = lo + 1.0
    raw = (hi - lo) / max(1, n)
    mag = 10 ** math.floor(math.log10(raw))
    step = next(m * mag for m in (1, 2, 2.5, 5, 10) if m * mag >= raw)
    start = math.floor(lo / step) * step
    ticks: list[float] = []
    v = start
    while (not ticks or ticks[-1] < hi - 1e-9) and len(ticks) < 24:  # the last tick covers hi
        ticks.append(round(v, 10))
        v += step
    return ticks


def _byte_ticks(hi: float, unit: str) -> list[float]:
    """Ticks on whole binary (GiB) or decimal (GB) units for byte axes."""
    base = 1024.0 if unit == "B" else 1000.0
    scale = 1.0
    while hi / scale >= base and scale < base**5:
        scale *= base
    return [t * scale for t in nice_ticks(0, hi / scale)]


def _open(chart: Chart, width: int, height: int) -> list[str]:
    cid = escape(chart.id)
    return [f'<svg xmlns="http://www.w3.org/2000/svg" id="chart-{cid}" class="chart chart-{chart.kind}" '
            f'role="img" aria-labelledby="chart-{cid}-title" width="{width}" height="{height}" '
            f'viewBox="0 0 {width} {height}" {FONT}>',
            f'<title id="chart-{cid}-title">{escape(chart.title)}</title>',
            f'<rect x="0" y="0" width="{width}" height="{height}" fill="#ffffff"/>',
            _t(12, 20, chart.title, 13, weight="600", color="#111")]


def _empty(chart: Chart) -> str:
    out = _open(chart, 480, 60)
    out.append(_t(12, 44, "no data to draw", 11, color="#777"))
    return "\n".join(out + ["</svg>"])


def line_chart(chart: Chart, width: int = 536, height: int = 300) -> str:
    pts = [p for s in chart.series for p in s.points]
    if not pts:
        return _empty(chart)
    legend_rows = math.ceil(len(chart.series) / 2)
    height += 16 * legend_rows
    left, right, top, bottom = 70, 126, 36, 46 + 16 * legend_rows
    pw, ph = width - left - right, height - top - bottom
    xs = sorted({p[0] for p in pts})
    log_x = xs[0] > 0 and xs[-1] / xs[0] >= 8 and chart.x_unit in ("tokens", "requests")
    y_hi = max([p[1] for p in pts] + [m[1] for m in chart.markers] + [1.0]) * 1.08
    yticks = _byte_ticks(y_hi, chart.y_unit) if chart.y_unit in ("B", "B_disk") else nice_ticks(0, y_hi)
    y_hi = max(y_hi, yticks[-1])

    def sx(x: float) -> float:
        if log_x:
            a, b = math.log2(xs[0]), math.log2(xs[-1])
            return left + (math.log2(x) - a) / (b - a or 1) * pw
        a, b = xs[0], xs[-1]
        return left + (x - a) / ((b - a) or 1) * pw

    def sy(y: float) -> float:
        return top + ph - y / y_hi * ph

    out = _open(chart, width, height)
    for t in yticks:
        y = sy(t)
        out.append(f'<line x1="{left}" y1="{y:.1f}" x2="{left + pw}" y2="{y:.1f}" stroke="#e6e6e6"/>')
        out.append(_t(left - 6, y + 4, format_axis(t, chart.y_unit), 10, "end", "#555"))
    xticks = xs if (log_x or len(xs) <= 10) else nice_ticks(xs[0], xs[-1], 6)
    for t in xticks:
        if xs[0] <= t <= xs[-1]:
            x = sx(t)
            out.append(f'<line x1="{x:.1f}" y1="{top + ph}" x2="{x:.1f}" y2="{top + ph + 4}" stroke="#888"/>')
            out.append(_t(x, top + ph + 16, format_axis(t, chart.x_unit), 10, "middle", "#555"))
    out.append(f'<rect x="{left}" y="{top}" width="{pw}" height="{ph}" fill="none" stroke="#bbb"/>')
    out.append(_t(left + pw / 2, top + ph + 32, chart.x_label, 11, "middle", "#333"))
    out.append(_t(14, top + ph / 2, chart.y_label, 11, "middle", "#333",
                  extra=f'transform="rotate(-90 14 {top + ph / 2:.1f})"'))
    for label, y in chart.markers:
        yy = sy(y)
        out.append(f'<line class="marker" x1="{left}" y1="{yy:.1f}" x2="{left + pw}" y2="{yy:.1f}" '
                   f'stroke="{MARKER_COLOR}" stroke-width="1.5" stroke-dasharray="6 4"/>')
        out.append(_t(left + pw + 6, yy - 3, _short(label, 20), 10, color=MARKER_COLOR))
        out.append(_t(left + pw + 6, yy + 10, format_axis(y, chart.y_unit), 10, color=MARKER_COLOR))
    for i, s in enumerate(chart.series):
        color = PALETTE[i % len(PALETTE)]
        path = " ".join(f"{sx(x):.1f},{sy(y):.1f}" for x, y in s.points)
        out.append(f'<polyline class="series" points="{path}" fill="none" stroke="{color}" stroke-width="2.2"/>')
        for x, y in s.points:
            out.append(f'<circle cx="{sx(x):.1f}" cy="{sy(y):.1f}" r="3" fill="{color}"/>')
        lx = left + (i % 2) * (pw + right) / 2
        ly = top + ph + 48 + 16 * (i // 2)
        out.append(f'<rect x="{lx:.1f}" y="{ly - 9}" width="12" height="12" fill="{color}"/>')
        out.append(_t(lx + 16, ly + 1, _short(s.name, 34), 10))
    return "\n".join(out + ["</svg>"])


def _short(label: str, n: int = 40) -> str:
    return label if len(label) <= n else label[: n - 1] + "…"


def bar_chart(chart: Chart, width: int = 536) -> str:
    if not chart.series or not chart.series[0].points:
        return _empty(chart)
    vals = {int(i): v for i, v in chart.series[0].points}
    n = len(chart.categories)
    left, right, top, row = 210, 64, 36, 26
    height = top + n * row + 34
    pw = width - left - right
    hi = max(list(vals.values()) + [1.0])
    ticks = nice_ticks(0, hi, 4)
    hi = max(hi, ticks[-1])
    out = _open(chart, width, height)
    for t in ticks:
        x = left + t / hi * pw
        out.append(f'<line x1="{x:.1f}" y1="{top}" x2="{x:.1f}" y2="{top + n * row}" stroke="#e6e6e6"/>')
        out.append(_t(x, top + n * row + 14, format_axis(t, chart.y_unit), 10, "middle", "#555"))
    for i, cat in enumerate(chart.categories):
        v = vals.get(i, 0.0)
        y = top + i * row
        color = PALETTE[0] if cat.startswith("request") else PALETTE[9]
        out.append(_t(left - 8, y + row / 2 + 4, _short(cat, 34), 10, "end"))
        out.append(f'<rect class="bar" x="{left}" y="{y + 4}" width="{max(1.0, v / hi * pw):.1f}" '
                   f'height="{row - 8}" fill="{color}"/>')
        out.append(_t(left + v / hi * pw + 5, y + row / 2 + 4, format_axis(v, chart.y_unit), 10, color="#222"))
    out.append(_t(left + pw / 2, height - 6, chart.y_label, 11, "middle"))
    return "\n".join(out + ["</svg>"])


def stacked_bar_chart(chart: Chart, width: int = 720) -> str:
    n = len(chart.categories)
    if not n or not chart.series:
        return _empty(chart)
    totals = [sum(v for s in chart.series for i, v in s.points if int(i) == k) for k in range(n)]
    hi = max(totals + [v for _, v in chart.limits] + [1.0]) * 1.05
    ticks = _byte_ticks(hi, chart.y_unit) if chart.y_unit in ("B", "B_disk") else nice_ticks(0, hi, 5)
    hi = max(hi, ticks[-1])
    left, right, top, row = 190, 40, 36, 34
    legend_rows = math.ceil(len(chart.series) / 4)
    height = top + n * row + 30 + legend_rows * 18 + 10
    pw = width - left - right
    out = _open(chart, width, height)
    for t in ticks:
        x = left + t / hi * pw
        out.append(f'<line x1="{x:.1f}" y1="{top}" x2="{x:.1f}" y2="{top + n * row}" stroke="#e6e6e6"/>')
        out.append(_t(x, top + n * row + 14, format_axis(t, chart.y_unit), 10, "middle", "#555"))
    for k, cat in enumerate(chart.categories):
        y = top + k * row
        out.append(_t(left - 8, y + row / 2 + 4, _short(cat, 30), 10, "end"))
        x0 = float(left)
        for si, s in enumerate(chart.series):
            v = next((val for i, val in s.points if int(i) == k), 0.0)
            if v <= 0:
                continue
            w = v / hi * pw
            out.append(f'<rect class="segment" x="{x0:.1f}" y="{y + 6}" width="{max(w, 0.5):.1f}" height="{row - 12}" '
                       f'fill="{PALETTE[si % len(PALETTE)]}"><title>{escape(s.name)}: '
                       f'{escape(format_axis(v, chart.y_unit))}</title></rect>')
            x0 += w
        out.append(_t(x0 + 4, y + row / 2 + 4, format_axis(totals[k], chart.y_unit), 10, color="#222"))
    for k, v in chart.limits:
        x = left + v / hi * pw
        y = top + int(k) * row
        out.append(f'<line class="limit" x1="{x:.1f}" y1="{y + 2}" x2="{x:.1f}" y2="{y + row - 2}" '
                   f'stroke="{MARKER_COLOR}" stroke-width="2.5"/>')
    ly = top + n * row + 30
    for si, s in enumerate(chart.series):
        lx = left + (si % 4) * (pw / 4)
        yy = ly + (si // 4) * 18
        out.append(f'<rect x="{lx:.1f}" y="{yy - 9}" width="11" height="11" fill="{PALETTE[si % len(PALETTE)]}"/>')
        out.append(_t(lx + 15, yy + 1, _short(s.name, 22), 10))
    if chart.limits:
        out.append(f'<line x1="{left - 150}" y1="{ly - 8}" x2="{left - 150}" y2="{ly + 2}" stroke="{MARKER_COLOR}" '
                   'stroke-width="2.5"/>')
        out.append(_t(left - 144, ly + 1, "device budget", 10, color=MARKER_COLOR))
    return "\n".join(out + ["</svg>"])


def render_chart(chart: Chart) -> str:
    """The SVG of one chart (by its kind)."""
    if chart.kind == "lines":
        return line_chart(chart)
    if chart.kind == "bars":
        return bar_chart(chart)
    if chart.kind == "stacked-bars":
        return stacked_bar_chart(chart)
    raise ValueError(f"unknown chart kind {chart.kind}")
