"""The HTML report opens in headless Chromium (Debian's ``chromium``) without console messages and shows its charts.

Console messages come from Chromium's log (``--enable-logging=stderr --v=0``: every console call, uncaught error
and Content-Security-Policy violation appears as an ``INFO:CONSOLE`` line); the report runs no script, so any such
line is a failure. The negative controls show that a script error and a blocked external load are caught. The
screenshot must be a non-blank PNG of the window size in which the chart colours appear; ``--dump-dom`` shows every
chart's ``<svg>`` in the rendered page.

CI needs ``apt-get install -y chromium`` (Debian bookworm package); without /usr/bin/chromium the test is skipped.
"""

from __future__ import annotations

import os
import re
import struct
import subprocess
import tempfile
import zlib
from collections import Counter
from pathlib import Path

import pytest

from llmsizer.render.html import CSP, render_html
from llmsizer.render.svg import MARKER_COLOR, PALETTE

CHROMIUM = Path(os.environ.get("LLMSIZER_CHROMIUM", "/usr/bin/chromium"))
pytestmark = pytest.mark.skipif(not CHROMIUM.exists(), reason=(
    f"{CHROMIUM} is absent: install Debian's chromium (apt-get install -y chromium) to run the browser test"))

WIDTH, HEIGHT = 1280, 3200  # CSS pixels; captured at device scale 0.5 (640 x 1600 PNG) to keep decoding quick
SCALE = 0.5
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync", "--hide-scrollbars",
         "--enable-logging=stderr", "--v=0"]


def chromium(page: Path, *extra: str) -> subprocess.CompletedProcess:
    with tempfile.TemporaryDirectory(prefix="chromium-profile-") as profile:
        return subprocess.run([str(CHROMIUM), *FLAGS, f"--user-data-dir={profile}", *extra, page.as_uri()],
                              capture_output=True, text=True, timeout=180)


def console_lines(stderr: str) -> list[str]:
    return [ln for ln in stderr.splitlines() if ":CONSOLE" in ln or "Uncaught" in ln]


def read_png(path: Path) -> tuple[int, int, list[bytes], int]:
    """Width, height, rows of raw pixels and bytes per pixel of an 8-bit RGB/RGBA non-interlaced PNG."""
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    pos, idat, ihdr = 8, b"", b""
    while pos < len(data):
        n = struct.unpack(">I", data[pos:pos + 4])[0]
        kind, body = data[pos + 4:pos + 8], data[pos + 8:pos + 8 + n]
        if kind == b"IHDR":
            ihdr = body
        elif kind == b"IDAT":
            idat += body
        pos += 12 + n
    w, h, depth, ctype, _, _, interlace = struct.unpack(">IIBBBBB", ihdr)
    assert depth == 8 and ctype in (2, 6) and interlace == 0
    bpp = 3 if ctype == 2 else 4
    raw = zlib.decompress(idat)
    stride = w * bpp
    rows, prev, i = [], bytearray(stride), 0
    for _ in range(h):
        f = raw[i]
        line = bytearray(raw[i + 1:i + 1 + stride])
        i += 1 + stride
        for x in range(stride):
            a = line[x - bpp] if x >= bpp else 0
            b = prev[x]
            c = prev[x - bpp] if x >= bpp else 0
            if f == 1:
                line[x] = (line[x] + a) & 255
            elif f == 2:
                line[x] = (line[x] + b) & 255
            elif f == 3:
                line[x] = (line[x] + (a + b) // 2) & 255
            elif f == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[x] = (line[x] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
        rows.append(bytes(line))
        prev = line
    return w, h, rows, bpp


def colour_counts(rows: list[bytes], bpp: int, step: int = 1) -> Counter:
    counts: Counter = Counter()
    for row in rows[::step]:
        for x in range(0, len(row), bpp * step):
            counts[row[x:x + 3]] += 1
    return counts


def near(counts: Counter, hex_colour: str, tolerance: int = 40) -> int:
    """Pixels within ``tolerance`` of a colour on every channel (thin lines are anti-aliased when scaled)."""
    target = bytes.fromhex(hex_colour.lstrip("#"))
    return sum(n for c, n in counts.items() if all(abs(a - b) <= tolerance for a, b in zip(c, target, strict=True)))


@pytest.fixture(scope="module")
def rendered(plans, tmp_path_factory):
    out = {}
    for name, plan in plans.items():
        folder = tmp_path_factory.mktemp(name)
        page = folder / "report.html"
        page.write_text(render_html(plan), "utf-8")
        shot = folder / "shot.png"
        run = chromium(page, f"--screenshot={shot}", f"--window-size={WIDTH},{HEIGHT}",
                       f"--force-device-scale-factor={SCALE}")
        dom = chromium(page, "--dump-dom")
        out[name] = (plan, run, shot, dom)
    return out


@pytest.mark.parametrize("name", ["lora-finetune-and-chat", "pretraining-multinode", "cpu-internal-tool"])
def test_report_opens_without_console_messages(rendered, name):
    _, run, shot, _ = rendered[name]
    assert shot.exists(), run.stderr[-2000:]
    assert console_lines(run.stderr) == []


@pytest.mark.parametrize("name", ["lora-finetune-and-chat", "pretraining-multinode", "cpu-internal-tool"])
def test_screenshot_shows_the_charts(rendered, name):
    plan, _, shot, dom = rendered[name]
    w, h, rows, bpp = read_png(shot)
    assert (w, h) == (int(WIDTH * SCALE), int(HEIGHT * SCALE))
    counts = colour_counts(rows, bpp)
    total = sum(counts.values())
    background = counts.most_common(1)[0][1]
    assert len(counts) > 200, "a blank or flat page"
    assert background / total < 0.95, "almost nothing drawn"
    assert near(counts, PALETTE[0]) > 50, "no chart series drawn in the first palette colour"
    assert near(counts, MARKER_COLOR) > 10, "no budget/capacity marker drawn"
    ids = {c.id for c in plan.charts} | {c.id for j in plan.jobs for c in j.charts}
    shown = set(re.findall(r'<svg [^>]*id="chart-([^"]+)"', dom.stdout))
    assert shown == ids
    assert "Plan: " in dom.stdout and "Memory per device by job" in dom.stdout


def test_negative_controls_are_caught(tmp_path):
    """A script error and an external load blocked by the report's CSP both show up as console lines."""
    bad = tmp_path / "bad.html"
    bad.write_text('<!DOCTYPE html><html><head><meta charset="utf-8">'
                   f'<meta http-equiv="Content-Security-Policy" content="{CSP}"></head><body><p>x</p>'
                   '<img src="http://127.0.0.1:9/missing.png"><script>undefinedFunction();</script></body></html>')
    run = chromium(bad, f"--screenshot={tmp_path / 'bad.png'}", "--window-size=400,300")
    lines = console_lines(run.stderr)
    assert any("violates the following Content Security Policy" in ln for ln in lines), run.stderr[-2000:]
    assert any("script-src" in ln or "Uncaught" in ln for ln in lines), lines
