"""The training plan's estimate carries its device's named notes (estimate/device.py ``named_device_notes``), as
`fit --train` gives them for the same device: one path (estimate/fit.py ``training_on_device``). Before, the plan
built its estimate without them, so a hardware file's GPU of unknown vendor got the ``gpu_runtime=cuda`` stand-in
assumption in `fit --train` and `train` but not in the plan (issue #12/#16)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cli_capture import run
from llmsizer.plan import make_plan
from llmsizer.request import parse_request

MODEL = "qwen2.5-0.5b"
GPU = {"kind": "gpu", "form_factor": "datacenter", "memory": "64GiB", "memory_bandwidth": "2000 GB/s",
       "flops": {"bf16": "400 TFLOP/s"}, "tdp": "500 W"}
HARDWARE = {"devices": [{"id": "acme-x1", "name": "Acme X1", "vendor": "Acme", **GPU}]}
NAMED = ("device", "gpu_runtime")  # the device's named notes (named_device_notes)


@pytest.mark.parametrize("device", ["acme-x1", "h100-sxm"])
def test_the_plans_training_assumptions_name_the_device_as_fit_train_does(device: str, tmp_path: Path) -> None:
    hw = tmp_path / "hw.json"
    hw.write_text(json.dumps(HARDWARE), "utf-8")
    request = (f"version: 1\njobs:\n  - name: ft\n    kind: training\n    model: {{name: {MODEL}}}\n    method: lora\n"
               "    settings: {micro_batch: 1, seq_len: 2048}\n    dataset: {tokens: 10M tokens}\n"
               f"    handover: {{model_destination: s3://bucket/ft}}\n    resources: {{device: {device}}}\n")
    plan = make_plan(parse_request(request, source="t.yaml", hardware_files=[hw]), hardware_files=[hw],
                     alternatives=False)
    (job,) = plan.jobs
    code, out, _ = run("fit", MODEL, "--train", "--method", "lora", "--seq", "2048", "--device", device,
                       "--hardware-file", str(hw), "--json")
    fitted = json.loads(out)
    fit_notes = {(a["name"], json.dumps(a["value"]), a["why"]) for a in fitted["memory"]["assumptions"]
                 if a["name"] in NAMED}
    plan_notes = {(a.name, json.dumps(a.value), a.why) for a in job.assumptions if a.name in NAMED}
    assert ("device", json.dumps(device)) in {n[:2] for n in fit_notes}
    assert plan_notes == fit_notes
    stand_in = {n for n in fit_notes if n[0] == "gpu_runtime"}
    assert bool(stand_in) == (device == "acme-x1")
    assert job.section("memory").value("fits") is fitted["fits"] and code == 0
