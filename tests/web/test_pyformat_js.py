"""static/js/pyformat.js writes a number as Python's format specs do ("{:.1f}", "{:,.0f}", "{:.3g}", "{:g}",
"{:.1%}"), ties rounded half to even on the exact binary value as Python rounds them, so the pages' text of a CLI
line (static/js/estimate_text.js) is the CLI's digit for digit. Run through node; skipped where node is absent."""

from __future__ import annotations

import json
import random
import shutil
import subprocess
from pathlib import Path

import pytest

JS = Path(__file__).resolve().parents[2] / "src" / "llmsizer" / "web" / "static" / "js" / "pyformat.js"


@pytest.mark.skipif(shutil.which("node") is None, reason="node is not installed")
def test_pyformat_writes_numbers_as_python_does() -> None:
    rng = random.Random(3)
    ties = [0.125, 0.375, 2.5, 3.5, 129.25, 999.5, 998.5, 0.0625, 1.5e-5, 9.995, 99950.0, 0.00012345,
            1.125, 2.625, 100.5, 1234.5, 2500.5, 1234567.125, -0.125, -100.5]
    values = ties + [rng.choice([1, -1]) * 10 ** rng.uniform(-7, 24) for _ in range(3000)] + [0.0, 1.0, 100.0]
    cases = [("pyFixed", [v, p], f"{{:.{p}f}}") for v in values for p in (0, 1, 3)]
    cases += [("pyGrouped", [v, p], f"{{:,.{p}f}}") for v in values for p in (0, 1, 2)]
    cases += [("pyGeneral", [v, p], f"{{:.{p}g}}") for v in values for p in (3, 6)]
    cases += [("pyPercent", [v, p], f"{{:.{p}%}}") for v in values if abs(v) < 1e6 for p in (0, 1)]
    script = (f"import * as F from {json.dumps(JS.as_uri())};\n"
              "let s = ''; process.stdin.on('data', (c) => { s += c; });\n"
              "process.stdin.on('end', () => console.log(JSON.stringify(JSON.parse(s).map(([f, a]) => F[f](...a)))));")
    out = subprocess.run(["node", "--input-type=module", "-e", script], input=json.dumps([[f, a] for f, a, _ in cases]),
                         capture_output=True, text=True, timeout=120, check=True).stdout
    said = json.loads(out)
    differ = [(f, a, js, spec.format(a[0])) for (f, a, spec), js in zip(cases, said, strict=True)
              if js != spec.format(a[0])]
    assert differ[:10] == []
