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


@pytest.mark.skipif(shutil.which("node") is None, reason="node is not installed")
def test_open_value_settings_in_the_request_yaml(tmp_path: Path) -> None:
    """The Advanced section's text boxes (train's open-value flags) as the form holds them, text: a request file's
    setting under ``settings:``, its parameter-efficient ones (request/fields.py peft: targets, modules_to_save,
    alpha) under ``peft:``, read back by the request reader with the value typed. Before, --targets and
    --modules-to-save were written as comments, "not a request setting", though a request file's peft takes them."""
    from cli_capture import run_cli
    from llmsizer import load_request
    from llmsizer.web.pages import CHOICES
    taken, peft = CHOICES["request_settings"], CHOICES["request_peft"]
    assert {"targets", "modules_to_save", "alpha", "rank"} <= set(peft)
    fields = {"method": "lora", "gpus": "2", "fsdp": "full", "modules_to_save": "embed,lm_head", "targets": "q,v",
              "context_parallel": "2", "loss_chunks": "8", "fsdp_version": "2", "checkpoint_every": "2",
              "grad_checkpointing": "full", "alpha": "64", "rank": "8"}
    script = (f"import {{ requestYaml }} from {json.dumps(STATE_JS.as_uri())};\n"
              f"process.stdout.write(requestYaml('train', 'qwen2.5-0.5b', {json.dumps(fields)}, {{}}, {{}}, {{}}, "
              f"{json.dumps(taken)}, undefined, {json.dumps(peft)}));")
    text = subprocess.run(["node", "--input-type=module", "-e", script], capture_output=True, text=True, timeout=60,
                          check=True).stdout
    path = tmp_path / "request.yaml"
    path.write_text(text)
    done = run_cli("request", "check", str(path))
    assert done.returncode == 0, done.stdout + done.stderr + text
    (job,) = load_request(path).jobs
    got = job.workload_fields()
    want = {"modules_to_save": ("embed", "lm_head"), "targets": ("q", "v"), "context_parallel": 2, "loss_chunks": 8,
            "fsdp_version": 2, "checkpoint_every": 2, "rank": 8}
    assert {n: got[n] for n in want} == want, text
    assert job.peft.alpha == 64  # recorded (no memory effect: not a workload field)
    assert "not a request setting" not in text, text
