"""The web API takes TransformerEngine's MXFP8 recipe as the CLI does (float8_recipe 'transformer-engine-mxfp8',
formulas/float8_training.py eqs. T1m, F3m): the same answer on a B200, the CLI's one line as a 4xx on an H100."""

from __future__ import annotations

import pytest
from web_api_helpers import cli_error_line, run_cli_json

pytest.importorskip("httpx")
pytest.importorskip("fastapi")

BODY = {"model": "llama-3.1-8b", "precision": "megatron-bf16", "zero": 1, "gpus": 8, "float8": True,
        "float8_recipe": "transformer-engine-mxfp8"}
ARGV = ("train", "llama-3.1-8b", "--precision", "megatron-bf16", "--zero", "1", "--gpus", "8", "--float8",
        "--float8-recipe", "transformer-engine-mxfp8")


def test_b200_answer_is_the_clis(client):
    r = client.post("/api/v1/train", json={**BODY, "device": "b200"})
    assert r.status_code == 200, r.text[:300]
    cli = run_cli_json(*ARGV, "--device", "b200")
    assert r.json()["totals"] == cli["totals"]
    held = next(i for i in r.json()["items"] if i["name"] == "fp8_weight_copies")
    assert held["bytes"] > 0


def test_h100_refusal_is_the_clis_line(client):
    r = client.post("/api/v1/train", json={**BODY, "device": "h100-sxm"})
    assert 400 <= r.status_code < 500
    detail = r.json()["detail"]
    assert detail == cli_error_line(*ARGV, "--device", "h100-sxm")
    assert "datacenter Blackwell only" in detail
