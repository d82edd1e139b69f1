"""``tf32`` (specs/training.py; estimate/device.py fp32_matmul_peak) reaches the one duration the same way from the
CLI and the web API (the calculator's TF32 checkbox), and a value that is not a boolean is one line (exit 2 from the
Python API, a 4xx on the web)."""

from __future__ import annotations

import pytest
from web_api_helpers import run_cli_json

from llmsizer.errors import InputError
from llmsizer.estimate.training import estimate_training

pytest.importorskip("httpx")
pytest.importorskip("fastapi")

RUN = {"method": "full", "precision": "fp32", "micro_batch": 1, "seq_len": 2048, "device": "a100-sxm-80gb",
       "tokens": "10M"}
FLAGS = ["--method", "full", "--precision", "fp32", "--batch", "1", "--seq", "2048", "--device", "a100-sxm-80gb",
         "--tokens", "10M"]
A100_TF32 = 156e12  # NVIDIA A100 datasheet: Peak TF32 Tensor Core 156 TF (dense)


def test_tf32_through_cli_and_web(client) -> None:
    cli = run_cli_json("train", "qwen2.5-0.5b", *FLAGS, "--tf32")
    web = client.post("/api/v1/train", json={"model": "qwen2.5-0.5b", **RUN, "tf32": True})
    assert web.status_code == 200, web.text
    assert cli["duration"]["peak_flops"] == web.json()["duration"]["peak_flops"] == A100_TF32
    assert cli["duration"]["seconds"] == web.json()["duration"]["seconds"]
    off = client.post("/api/v1/train", json={"model": "qwen2.5-0.5b", **RUN})
    assert off.status_code == 200 and off.json()["duration"]["peak_key"] == "fp32"


def test_a_tf32_that_is_not_a_boolean_is_refused(client) -> None:
    web = client.post("/api/v1/train", json={"model": "qwen2.5-0.5b", **RUN, "tf32": "yes"})
    assert 400 <= web.status_code < 500 and "tf32" in web.text
    with pytest.raises(InputError, match="tf32 must be true or false"):
        estimate_training("qwen2.5-0.5b", tf32="yes")
