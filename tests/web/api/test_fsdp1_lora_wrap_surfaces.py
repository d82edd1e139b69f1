"""``fsdp1_lora_wrap`` (specs/training.py; formulas/fsdp_flat_param.py eqs. W1, W2) reaches the one estimate the same
way from the CLI, the Python API and the web API, is recorded as an assumption under FSDP1 LoRA, and a bad value or a
wrap without FSDP1 LoRA is one line (exit 2, a 4xx on the web)."""

from __future__ import annotations

import pytest
from web_api_helpers import run_cli, run_cli_json

from llmsizer.estimate.training import estimate_training

pytest.importorskip("httpx")
pytest.importorskip("fastapi")

LORA = {"method": "lora", "gpus": 2, "fsdp": "full", "fsdp_version": 1, "precision": "bf16", "micro_batch": 2,
        "seq_len": 2048}
FLAGS = ["--method", "lora", "--gpus", "2", "--fsdp", "full", "--fsdp-version", "1", "--precision", "bf16",
         "--batch", "2", "--seq", "2048"]


def _item(d: dict, name: str) -> int:
    return int(next(i for i in d["items"] if i["name"] == name)["bytes"])


def test_fsdp1_lora_wrap_through_cli_api_and_web(client) -> None:
    api = estimate_training("llama-3.1-8b", **LORA, fsdp1_lora_wrap="with-layers").to_dict()
    cli = run_cli_json("train", "llama-3.1-8b", *FLAGS, "--fsdp1-lora-wrap", "with-layers")
    web = client.post("/api/v1/train", json={"model": "llama-3.1-8b", **LORA, "fsdp1_lora_wrap": "with-layers"})
    assert web.status_code == 200, web.text
    for name in ("gathered_params", "gradients"):
        assert _item(api, name) == _item(cli, name) == _item(web.json(), name)
    apart = estimate_training("llama-3.1-8b", **LORA).to_dict()
    assert apart["details"]["model_states"]["gradients"] * 100 < api["details"]["model_states"]["gradients"]
    wrap = {a["name"]: a for a in api["assumptions"]}["fsdp1_lora_wrap"]
    assert wrap["value"] == "with-layers" and not wrap["default"]
    assert {a["name"]: a for a in apart["assumptions"]}["fsdp1_lora_wrap"]["default"]


def test_bad_fsdp1_lora_wrap_is_one_line(client) -> None:
    done = run_cli("train", "llama-3.1-8b", *FLAGS, "--fsdp1-lora-wrap", "units")
    assert done.returncode == 2 and len(done.stderr.strip().splitlines()) == 1 and "fsdp1-lora-wrap" in done.stderr
    done = run_cli("train", "llama-3.1-8b", "--gpus", "2", "--fsdp", "full", "--fsdp1-lora-wrap", "with-layers")
    assert done.returncode == 2 and len(done.stderr.strip().splitlines()) == 1 and "fsdp1_lora_wrap" in done.stderr
    web = client.post("/api/v1/train", json={"model": "llama-3.1-8b", "fsdp1_lora_wrap": "units"})
    assert 400 <= web.status_code < 500 and "units" in web.text
