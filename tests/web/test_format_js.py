"""The web pages' duration formatter (static/js/format.js formatSeconds) says a duration as units.format_seconds
does, so a page and the CLI, the plan and its checks show one run's time in the same words. Run through node (the
pages' own module, imported as the browser imports it); skipped where node is not installed."""

from __future__ import annotations

import json
import random
import shutil
import subprocess
from pathlib import Path

import pytest

from llmsizer.render.markdown import format_value
from llmsizer.units import compared_bytes, format_bytes, format_rate, format_seconds, format_seconds_range, format_usd

FORMAT_JS = Path(__file__).resolve().parents[2] / "src" / "llmsizer" / "web" / "static" / "js" / "format.js"


@pytest.mark.skipif(shutil.which("node") is None, reason="node is not installed")
def test_pages_say_a_duration_as_the_cli_does() -> None:
    rng = random.Random(7)
    edges = [0.0, 0.0004, 0.9994, 1.0, 89.94, 89.96, 90.0, 90.05, 599.0, 599.99, 600.0, 5399.0, 5400.0, 172799.0, 172800.0, 120 * 86400 - 1.0,
             120 * 86400.0, 24 * 730 * 3600 - 1.0, 24 * 730 * 3600.0, 3.2e10]
    values = edges + [10 ** rng.uniform(-3, 10.5) for _ in range(3000)]
    script = (f"import {{ formatSeconds }} from {json.dumps(FORMAT_JS.as_uri())};\n"
              f"console.log(JSON.stringify({json.dumps(values)}.map(formatSeconds)));")
    out = subprocess.run(["node", "--input-type=module", "-e", script], capture_output=True, text=True, timeout=60,
                         check=True).stdout
    said = json.loads(out)
    differ = [(v, js, format_seconds(v)) for v, js in zip(values, said, strict=True) if js != format_seconds(v)]
    assert differ == []


def _node_map(function: str, values: list) -> list:
    script = (f"import {{ {function} }} from {json.dumps(FORMAT_JS.as_uri())};\n"
              f"console.log(JSON.stringify({json.dumps(values)}.map((v) => Array.isArray(v) ? {function}(...v) : {function}(v))));")
    out = subprocess.run(["node", "--input-type=module", "-e", script], capture_output=True, text=True, timeout=60,
                         check=True).stdout
    return json.loads(out)


@pytest.mark.skipif(shutil.which("node") is None, reason="node is not installed")
def test_pages_say_a_rate_as_the_cli_does() -> None:
    """formatRate is units.format_rate: the /fits table, the grid and the compare page write 129.5 where the CLI
    writes 129.5 (before: 130), and a rate below 1 with its significant digits, never 0."""
    rng = random.Random(11)
    edges = [0.0, 0.0996, 0.1, 0.125, 0.8137, 0.995, 0.9996, 1.0, 9.95, 16.14, 28.85, 129.46, 129.5, 999.95, 5017.76]
    values = edges + [10 ** rng.uniform(-4, 6) for _ in range(3000)]
    differ = [(v, js, format_rate(v)) for v, js in zip(values, _node_map("formatRate", values), strict=True)
              if js != format_rate(v)]
    assert differ == []


@pytest.mark.skipif(shutil.which("node") is None, reason="node is not installed")
def test_pages_say_device_hours_and_duration_ranges_as_the_cli_does() -> None:
    rng = random.Random(5)
    counts = [0.0, 0.128, 5.535889, 99.95, 100.0, 3040.2] + [10 ** rng.uniform(-3, 5) for _ in range(2000)]
    assert _node_map("formatFigureCount", counts) == [format_value(v, "count") for v in counts]
    pairs = [[lo, lo * rng.uniform(1, 3)] for lo in (10 ** rng.uniform(-2, 8) for _ in range(2000))]
    assert _node_map("formatSecondsRange", pairs) == [format_seconds_range(lo, hi) for lo, hi in pairs]


@pytest.mark.skipif(shutil.which("node") is None, reason="node is not installed")
def test_pages_say_bytes_and_dollars_as_the_cli_does_ties_included() -> None:
    """formatBytes and formatUsd are units.format_bytes and units.format_usd digit for digit: a value exactly halfway
    between two last digits (1.125 GiB, $0.125, $100.5, $1,234.5) rounds half to even as Python's format does (JS's
    toFixed and Math.round round it up: 1.13 GiB, $0.13, $101, $1,235)."""
    rng = random.Random(13)
    ties = [k * 1024 ** e for e in (1, 2, 3, 4) for k in (1.125, 1.375, 2.625, 10.005, 512.125, 1023.995)]
    ties += [1.125e9, 2.375e6, 0.0, 1023.0, 1024.0, -1.125 * 1024 ** 3]
    values = ties + [10 ** rng.uniform(0, 17) for _ in range(3000)]
    for binary in (True, False):
        pairs = [[v, binary] for v in values]
        assert _node_map("formatBytes", pairs) == [format_bytes(v, binary=binary) for v in values]
    dollars = [0.125, 0.375, 2.625, 99.125, 99.995, 100.5, 101.5, 1234.5, 2500.5, -0.125, -100.5, 0.0]
    dollars += [10 ** rng.uniform(-3, 7) for _ in range(3000)]
    assert _node_map("formatUsd", dollars) == [format_usd(v) for v in dollars]


@pytest.mark.skipif(shutil.which("node") is None, reason="node is not installed")
def test_pages_say_a_need_against_its_bound_as_the_cli_does() -> None:
    """comparedBytes is units.compared_bytes: the calculator's pool words (render/text.py pool_and_need) say a need a
    few bytes from what the pool offers at the CLI's decimals ('79.004 GiB' of '79.000 GiB'), not both '79.00 GiB'."""
    rng = random.Random(13)
    pairs = [[79 * 2**30 + 1, 79 * 2**30], [int(79.004 * 2**30), 79 * 2**30], [500 * 2**20, 79 * 2**30], [5, 7]]
    for _ in range(2000):
        bound = int(10 ** rng.uniform(3, 14))
        pairs.append([max(bound + int(rng.uniform(-1, 1) * 10 ** rng.uniform(0, 9)), 0), bound, rng.random() < 0.5])
    said = _node_map("comparedBytes", [[p[:2], p[2] if len(p) > 2 else True] for p in pairs])
    want = [list(compared_bytes(*p[:2], binary=p[2] if len(p) > 2 else True)) for p in pairs]
    assert [(p, s, w) for p, s, w in zip(pairs, said, want, strict=True) if s != w] == []
