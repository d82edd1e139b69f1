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

from llmsizer.units import format_seconds

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
