"""``loss='fused-xentropy'`` and ``layernorm='low-precision'`` (specs/training.py; formulas/training_activations.py
eqs. X1 and N4) reach the one estimate the same way from the CLI, the Python API and the web API, are recorded as
assumptions, and a bad value is one line (exit 2, a 4xx on the web)."""

from __future__ import annotations

import pytest
from web_api_helpers import run_cli, run_cli_json

from llmsizer.estimate.training import estimate_training

pytest.importorskip("httpx")
pytest.importorskip("fastapi")

MODEL = "stablelm-base-alpha-3b"  # GPT-NeoX: LayerNorm
RUN = {"precision": "bf16-mixed", "micro_batch": 4, "seq_len": 1024, "loss": "fused-xentropy",
       "layernorm": "low-precision"}
FLAGS = ["--precision", "bf16-mixed", "--batch", "4", "--seq", "1024", "--loss", "fused-xentropy",
         "--layernorm", "low-precision"]


def _device(d: dict) -> int:
    return int(d["totals"]["device"]["bytes"])


def test_the_settings_through_cli_api_and_web(client) -> None:
    api = estimate_training(MODEL, **RUN).to_dict()
    cli = run_cli_json("train", MODEL, *FLAGS)
    web = client.post("/api/v1/train", json={"model": MODEL, **RUN})
    assert web.status_code == 200, web.text
    assert _device(api) == _device(cli) == _device(web.json())
    named = {a["name"]: a for a in api["assumptions"]}
    assert named["loss"]["value"] == "fused-xentropy" and not named["loss"]["default"]
    assert named["layernorm"]["value"] == "low-precision" and not named["layernorm"]["default"]
    plain = estimate_training(MODEL, precision="bf16-mixed", micro_batch=4, seq_len=1024).to_dict()
    assert {a["name"]: a for a in plain["assumptions"]}["layernorm"]["default"]
    assert _device(api) < _device(plain)


def test_bad_values_are_one_line(client) -> None:
    for flag, value in (("--layernorm", "fp16"), ("--loss", "xentropy")):
        done = run_cli("train", MODEL, flag, value)
        assert done.returncode == 2 and len(done.stderr.strip().splitlines()) == 1 and flag in done.stderr
    web = client.post("/api/v1/train", json={"model": MODEL, "layernorm": "fp16"})
    assert 400 <= web.status_code < 500 and "fp16" in web.text
    with pytest.raises(Exception, match="unknown layernorm 'fp16'"):
        estimate_training(MODEL, layernorm="fp16")
