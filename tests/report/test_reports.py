"""Markdown and HTML reports: complete, self-contained, well-formed; SVG charts put the numbers where they belong."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from html.parser import HTMLParser

import pytest

from llmsizer.plan.result import Chart, Series
from llmsizer.render.html import render_html
from llmsizer.render.markdown import format_value, render_markdown
from llmsizer.render.svg import MARKER_COLOR, PALETTE, bar_chart, line_chart, nice_ticks, stacked_bar_chart

VOID = {"meta", "br", "img", "input", "link", "hr", "col", "source"}
SVG_NS = "http://www.w3.org/2000/svg"


class Balance(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.stack: list[str] = []
        self.errors: list[str] = []

    def handle_starttag(self, tag, attrs):
        if tag not in VOID:
            self.stack.append(tag)

    def handle_startendtag(self, tag, attrs):
        pass

    def handle_endtag(self, tag):
        if not self.stack or self.stack[-1] != tag:
            self.errors.append(f"unexpected </{tag}> (open: {self.stack[-3:]})")
        else:
            self.stack.pop()


def test_markdown_report(plans):
    md = render_markdown(plans["lora-finetune-and-chat"])
    assert md.startswith("# Plan: Support assistant: LoRA fine-tune and chat service\n")
    for heading in ("## Checks", "## Totals", "## ticket-lora (training)", "## support-chat (inference)",
                    "### Memory per device", "### Storage", "### Network", "### Duration", "### Cost",
                    "### Charts (as tables)", "### Notes"):
        assert heading in md, heading
    assert "| one checkpoint | 503.32 MB |" in md  # 41.94M adapter params x 12 B, decimal: a disk size
    assert "| training needs per device (expected) | 44.06 GiB |" in md  # memory: binary
    assert "**Memory per device by job**" in md


def test_markdown_tables_are_rectangular(plans):
    """Every row of a Markdown table has the same number of cells (pipes in values are escaped)."""
    for plan in plans.values():
        tables: list[list[str]] = [[]]
        for ln in render_markdown(plan).splitlines():
            if ln.startswith("|"):
                tables[-1].append(ln)
            elif tables[-1]:
                tables.append([])
        for t in tables:
            if t:
                assert len({ln.replace("\\|", "").count("|") for ln in t}) == 1, t[:2]


@pytest.mark.parametrize("name", ["lora-finetune-and-chat", "pretraining-multinode", "cpu-internal-tool"])
def test_html_is_self_contained_and_well_formed(plans, name):
    plan = plans[name]
    html = render_html(plan)
    assert html.startswith("<!DOCTYPE html>")
    assert "Content-Security-Policy\" content=\"default-src 'none'" in html
    for pattern in (r"<script", r"<link", r"\bsrc\s*=", r"\bhref\s*=", r"url\(", r"@import"):
        assert not re.search(pattern, html, re.IGNORECASE), pattern
    assert set(re.findall(r"https?://[^\s\"'<>]+", html)) <= {SVG_NS}
    b = Balance()
    b.feed(html)
    assert b.errors == [] and b.stack == []
    svgs = re.findall(r"<svg .*?</svg>", html, re.DOTALL)
    for svg in svgs:
        ET.fromstring(svg)  # each chart is well-formed XML
    ids = {c.id for c in plan.charts} | {c.id for j in plan.jobs for c in j.charts}
    assert {re.search(r'id="chart-([^"]+)"', s).group(1) for s in svgs} == ids
    assert len(svgs) == len(ids) >= 3


def test_html_shows_checks_with_their_lines():
    from llmsizer.plan import make_plan
    from llmsizer.request import parse_request
    req = parse_request("jobs:\n  - {name: ft, kind: training, model: {name: qwen2.5-0.5b}, method: lora,\n"
                        "     dataset: {tokens: 1M tokens}, resources: {device: l4}}\n", source="r.yaml")
    html = render_html(make_plan(req, alternatives=False))
    assert '<tr class="sev-error"><td>ERROR</td><td>ft</td><td class="num">2</td><td><b>No hand-over' in html


def test_format_value_units():
    assert format_value(80 * 2**30, "B") == "80.00 GiB"
    assert format_value(2 * 10**12, "B_disk") == "2.00 TB"
    assert format_value(1.25e9, "B/s") == "1.25 GB/s (10 Gb/s)"
    assert format_value(5400, "s") == "1.5 h"
    assert format_value(3 * 86400, "s") == "3.0 days"
    assert format_value(1234.5, "USD") == "$1,234"
    assert format_value(6.88, "USD/h") == "$6.88/h"
    assert format_value(0.25, "share") == "25.0%"
    assert format_value(None, "B") == "-" and format_value(True, "bool") == "yes"


# ------------------------------------------------------------------------------------------------ SVG

def _svg(s: str) -> ET.Element:
    return ET.fromstring(s)


def test_nice_ticks():
    assert nice_ticks(0, 100) == [0, 20, 40, 60, 80, 100]
    assert nice_ticks(0, 7.3, 5) == [0, 2, 4, 6, 8]
    assert nice_ticks(0, 0) == [0, 0.2, 0.4, 0.6, 0.8, 1.0]


def test_line_chart_geometry():
    c = Chart("t", "test", "lines", "x", "y", "count", (Series("s", ((0.0, 0.0), (10.0, 10.0))),),
              markers=(("limit", 5.0),))
    root = _svg(line_chart(c, width=400, height=300))
    poly = root.find(f"{{{SVG_NS}}}polyline")
    (x0, y0), (x1, y1) = [tuple(map(float, p.split(","))) for p in poly.get("points").split()]
    left, top, right, bottom = 70, 36, 126, 46 + 16  # one legend row below the plot
    pw, ph = 400 - left - right, 300 + 16 - top - bottom
    y_hi = 12.5  # ticks 0, 2.5, .., 12.5 cover the top 10 x 1.08 = 10.8
    assert (x0, y0) == (left, top + ph)                       # (0, 0) at the bottom left
    assert x1 == pytest.approx(left + pw)
    assert y1 == pytest.approx(top + ph - 10 / y_hi * ph, abs=0.1)
    marker = root.find(f"{{{SVG_NS}}}line[@class='marker']")
    assert float(marker.get("y1")) == pytest.approx(top + ph - 5 / y_hi * ph, abs=0.1)
    assert marker.get("stroke") == MARKER_COLOR


def test_line_chart_uses_a_log_axis_for_context_lengths():
    pts = tuple((float(2**k), float(k)) for k in range(9, 15))  # 512 .. 16384 tokens
    c = Chart("ctx", "t", "lines", "context", "y", "count", (Series("s", pts),), "tokens")
    root = _svg(line_chart(c))
    xs = [float(p.split(",")[0]) for p in root.find(f"{{{SVG_NS}}}polyline").get("points").split()]
    gaps = {round(b - a, 1) for a, b in zip(xs, xs[1:], strict=False)}
    assert len(gaps) == 1  # powers of two evenly spaced
    labels = [t.text for t in root.iter(f"{{{SVG_NS}}}text")]
    assert "8k" in labels and "512" in labels


def test_bars_are_proportional():
    c = Chart("b", "cost", "bars", "option", "USD", "USD", (Series("c", ((0.0, 100.0), (1.0, 50.0))),),
              categories=("request: a", "b"))
    root = _svg(bar_chart(c))
    w = [float(r.get("width")) for r in root.iter(f"{{{SVG_NS}}}rect") if r.get("class") == "bar"]
    assert w[0] == pytest.approx(2 * w[1])
    fills = [r.get("fill") for r in root.iter(f"{{{SVG_NS}}}rect") if r.get("class") == "bar"]
    assert fills == [PALETTE[0], PALETTE[9]]  # the request's own option stands out


def test_stacked_bars_add_up():
    c = Chart("m", "mem", "stacked-bars", "job", "memory", "B",
              (Series("weights", ((0.0, 30.0), (1.0, 10.0))), Series("kv", ((0.0, 10.0), (1.0, 30.0)))),
              categories=("a", "b"), limits=((0, 50.0),))
    root = _svg(stacked_bar_chart(c))
    segs = [r for r in root.iter(f"{{{SVG_NS}}}rect") if r.get("class") == "segment"]
    assert len(segs) == 4
    width = {(s.get("y"), s.get("fill")): float(s.get("width")) for s in segs}
    rows = sorted({y for y, _ in width})
    totals = [sum(v for (y, _), v in width.items() if y == r) for r in rows]
    assert totals[0] == pytest.approx(totals[1])  # 30 + 10 = 10 + 30
    assert len([x for x in root.iter(f"{{{SVG_NS}}}line") if x.get("class") == "limit"]) == 1


def test_empty_chart_says_so():
    c = Chart("e", "empty", "lines", "x", "y", "B", ())
    assert "no data to draw" in line_chart(c)
