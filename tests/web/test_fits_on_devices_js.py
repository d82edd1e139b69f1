"""The "what fits my machine" page names the hardware as ``models --fits-on``'s header does (static/js/format.js
``fitsOnDevices`` and cli/model_cmds.py ``_devices_text``, both over the answer's hardware, device, count and
devices_per_instance), so two whole instances read '16 x h100-sxm (aws-p5.48xlarge, 2 instances)' on both. Run
through node (the pages' own module); skipped where node is not installed."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from llmsizer.cli.model_cmds import _devices_text

FORMAT_JS = Path(__file__).resolve().parents[2] / "src" / "llmsizer" / "web" / "static" / "js" / "format.js"
ANSWERS = [{"hardware": "rtx-4090", "device": "rtx-4090", "count": 1},
           {"hardware": "h100-sxm", "device": "h100-sxm", "count": 4},
           {"hardware": "aws-p5.48xlarge", "device": "h100-sxm", "count": 8, "devices_per_instance": 8},
           {"hardware": "aws-p5.48xlarge", "device": "h100-sxm", "count": 16, "devices_per_instance": 8},
           {"hardware": "g6.xlarge", "device": "l4", "count": 3, "devices_per_instance": 1}]


@pytest.mark.skipif(shutil.which("node") is None, reason="node is not installed")
def test_page_names_the_devices_as_the_cli_header() -> None:
    script = (f"import {{ fitsOnDevices }} from {json.dumps(FORMAT_JS.as_uri())};\n"
              f"console.log(JSON.stringify({json.dumps(ANSWERS)}.map(fitsOnDevices)));")
    out = subprocess.run(["node", "--input-type=module", "-e", script], capture_output=True, text=True, timeout=60,
                         check=True).stdout
    assert json.loads(out) == [_devices_text(a) for a in ANSWERS]
    assert _devices_text(ANSWERS[3]) == "16 x h100-sxm (aws-p5.48xlarge, 2 instances)"
