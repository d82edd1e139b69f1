"""A hardware file's GPU without ``form_factor``: its form factor is unknown (catalog/hardware.py), not "datacenter".

Before, a missing form_factor read as "datacenter", so the default-engine rule (estimate/device.py ``engine_rule``)
sized vLLM for any card a user described, a desktop card included. Now the rule chooses by what is known (the kind,
the count, the weight format) and, for one such GPU with nothing else to go by, takes transformers as for a GPU known
only by its kind, saying in the engine assumption that the form factor was not given. `infer`, `fit`, `plan` and the
Python API say the same; with the form factor given, the rule's own statement (vLLM on data-centre cards, llama.cpp on
one consumer card) applies."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from cli_run import answer, totals

import llmsizer
from llmsizer.catalog.hardware import load_catalog

MODEL = "llama-3.2-1b"


def hardware_file(tmp_path: Path, form_factor: str | None) -> Path:
    dev = {"id": "my-gpu", "name": "My GPU", "kind": "gpu", "memory": "24GiB", "memory_bandwidth": "1000 GB/s",
           "flops": {"bf16": "165 TFLOP/s"}}
    if form_factor is not None:
        dev["form_factor"] = form_factor
    path = tmp_path / "hw.json"
    path.write_text(json.dumps({"devices": [dev]}))
    return path


def engine_of(d: dict) -> dict:
    return next(a for a in d["assumptions"] if a["name"] == "engine")


@pytest.mark.parametrize(("form_factor", "engine"), [(None, "transformers"), ("datacenter", "vllm"),
                                                      ("desktop", "llamacpp")])
def test_every_surface_picks_the_engine_by_what_the_file_says(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                               form_factor: str | None, engine: str) -> None:
    hw = str(hardware_file(tmp_path, form_factor))
    _, inf = answer(["infer", MODEL, "--device", "my-gpu", "--hardware-file", hw], capsys)
    _, fit = answer(["fit", MODEL, "--device", "my-gpu", "--hardware-file", hw], capsys)
    assert engine_of(inf)["value"] == fit["engine"] == engine
    assert engine_of(inf) == engine_of(fit)
    assert totals(inf) == totals(fit["memory"])
    dev = load_catalog([hw]).device("my-gpu")
    assert dev.form_factor == (form_factor or "unknown")
    est = llmsizer.estimate_inference(MODEL, device=dev)
    assert json.loads(json.dumps(est.to_dict(), default=str))["totals"] == inf["totals"]
    if form_factor is None:
        assert "form factor is not given" in engine_of(inf)["why"] and engine_of(inf)["default"]


def test_the_plan_on_such_a_device_takes_the_same_engine(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    hw = str(hardware_file(tmp_path, None))
    req = tmp_path / "r.yaml"
    req.write_text("jobs:\n  - name: chat\n    kind: inference\n    model: {name: llama-3.2-1b}\n    traffic:\n"
                   "      context: 4096\n      concurrency: 1\n    resources:\n      device: my-gpu\n")
    _, plan = answer(["plan", str(req), "--hardware-file", hw], capsys)
    _, fit = answer(["fit", MODEL, "--device", "my-gpu", "--hardware-file", hw, "--context", "4096",
                     "--output-tokens", "256"], capsys)
    (job,) = plan["jobs"]
    assert job["hardware"]["engine"] == fit["engine"] == "transformers"


def test_several_such_gpus_still_run_vllm(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    hw = str(hardware_file(tmp_path, None))
    _, fit = answer(["fit", "llama-3.1-70b-instruct", "--device", "my-gpu", "--count", "4", "--hardware-file", hw],
                    capsys)
    assert fit["engine"] == "vllm"
