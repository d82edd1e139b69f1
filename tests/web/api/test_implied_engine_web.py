"""The web API takes the engine a setting implies as the CLI does (specs/workload.py ``implied_engine``): the
serving tab leaves the engine to the device ("by device": no ``engine`` sent) and sends every engine setting it shows
then (calculator.js offerEngineSettings), so a llama.cpp setting with no engine is answered on llama.cpp, byte for
byte the CLI's body; settings of two engines are the CLI's one line, naming both fields."""

from __future__ import annotations

import json

import pytest
from web_api_helpers import cli_error_line, run_cli

pytest.importorskip("httpx")
pytest.importorskip("fastapi")


def test_a_llamacpp_setting_without_an_engine_is_the_clis_answer(client) -> None:
    body = {"model": "qwen3-30b-a3b", "device": "rtx-4090", "count": "2", "tensor_split": "3,1"}
    r = client.post("/api/v1/fit", json=body)
    cli = run_cli("fit", "qwen3-30b-a3b", "--device", "rtx-4090", "--count", "2", "--tensor-split", "3,1", "--json")
    assert cli.returncode in (0, 1), cli.stderr
    assert r.status_code == 200 and r.text == cli.stdout
    (eng,) = [a for a in json.loads(r.text)["assumptions"] if a["name"] == "engine"]
    assert eng["value"] == "llamacpp" and eng["why"].startswith("implied by tensor_split")


def test_settings_of_two_engines_name_both_fields(client) -> None:
    body = {"model": "llama-3.1-8b", "device": "h100-sxm", "n_gpu_layers": "20", "gpu_memory_utilization": "0.8"}
    r = client.post("/api/v1/infer", json=body)
    line = cli_error_line("infer", "llama-3.1-8b", "--device", "h100-sxm", "--n-gpu-layers", "20",
                          "--gpu-memory-utilization", "0.8")
    assert r.status_code == 400, r.text
    assert "no engine reads both" in line
    assert r.json()["detail"] == line  # the CLI's line (API.md "Errors"; task webwords)
