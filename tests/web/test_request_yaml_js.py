"""The calculator's request YAML (static/js/state.js requestYaml) with settings of the training tab's Advanced section:
the ones a request file takes (request/fields.py, served as /pages/choices.json's request_settings) under
``settings:``, the others as comments naming their flag; the request reader accepts the file and reads the settings
with the values picked (``request check`` and ``load_request``: the independent truth of what a request says). Run
through node (the pages' own module); skipped where node is not installed."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

STATE_JS = Path(__file__).resolve().parents[2] / "src" / "llmsizer" / "web" / "static" / "js" / "state.js"


@pytest.mark.skipif(shutil.which("node") is None, reason="node is not installed")
def test_advanced_settings_in_the_request_yaml(tmp_path: Path) -> None:
    from cli_capture import run_cli
    from llmsizer import load_request
    from llmsizer.request.fields import TRAINING
    from llmsizer.web.pages import CHOICES
    taken = CHOICES["request_settings"]
    assert taken == [f.name for f in next(f for f in TRAINING if f.name == "settings").fields]
    fields = {"method": "lora", "loss": "cut-ce", "compile": True, "zero_grad": "zeros", "optimizer_impl": "for-loop"}
    script = (f"import {{ requestYaml }} from {json.dumps(STATE_JS.as_uri())};\n"
              f"process.stdout.write(requestYaml('train', 'qwen2.5-0.5b', {json.dumps(fields)}, {{}}, {{}}, {{}}, "
              f"{json.dumps(taken)}));")
    text = subprocess.run(["node", "--input-type=module", "-e", script], capture_output=True, text=True, timeout=60,
                          check=True).stdout
    # a request setting since settings.optimizer_impl was added (request/fields.py)
    assert "      optimizer_impl: for-loop\n" in text, text
    assert "not a request setting" not in text, text
    path = tmp_path / "request.yaml"
    path.write_text(text)
    done = run_cli("request", "check", str(path))
    assert done.returncode == 0, done.stdout + done.stderr
    (job,) = load_request(path).jobs
    assert job.workload_fields()["loss"] == "cut-ce" and job.workload_fields()["compile"] is True
    assert job.workload_fields()["zero_grad"] == "zeros"
    assert job.workload_fields()["optimizer_impl"] == "for-loop"
