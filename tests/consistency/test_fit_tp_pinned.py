"""`fit --tp N` pins the tensor-parallel degree of each serving replica, as the Python API's
``fit(..., tensor_parallel=N)`` and the web API's ``tp`` do (the session-16 probe: the CLI refused --tp for serving,
"--tp applies to --train", while Python answered). The layout the pin gives is checked against the model's own
shape: Llama 3.1 70B has 8 KV heads, so TP 2 on 4 GPUs runs 2 replicas, each holding half the weights."""

from __future__ import annotations

import json

import pytest

from cli_capture import run, run_json
from llmsizer import fit

MODEL, DEVICE, COUNT = "llama-3.1-70b", "h100-sxm", 4


def test_cli_python_and_web_pin_the_same_layout() -> None:
    code, cli = run_json("fit", MODEL, "--device", DEVICE, "--count", str(COUNT), "--tp", "2")
    py = json.loads(json.dumps(fit(MODEL, DEVICE, COUNT, tensor_parallel=2).to_dict()))
    assert (cli["tensor_parallel"], cli["replicas"]) == (py["tensor_parallel"], py["replicas"]) == (2, 2)
    assert cli["memory_per_device"] == py["memory_per_device"]
    assert code == (0 if cli["fits"] else 1)
    # half of the 70.55 B bf16 weights per device (the unsharded norms aside), not the quarter TP 4 would hold
    weights = next(i for i in cli["memory"]["items"] if i["name"] == "weights")["bytes"]
    assert 0.49 * 70.55e9 * 2 < weights < 0.52 * 70.55e9 * 2
    pytest.importorskip("httpx")
    pytest.importorskip("fastapi")
    from fastapi.testclient import TestClient

    from llmsizer.web.app import create_app

    with TestClient(create_app(), raise_server_exceptions=False) as client:
        web = client.post("/api/v1/fit", json={"model": MODEL, "device": DEVICE, "count": COUNT, "tp": 2}).json()
    assert (web["tensor_parallel"], web["replicas"], web["memory_per_device"]) == (
        cli["tensor_parallel"], cli["replicas"], cli["memory_per_device"])


@pytest.mark.parametrize("argv, words", [
    (["--count", "4", "--tp", "3"], "does not divide the 4 devices"),
    (["--count", "2", "--tp", "2", "--auto", "--engine", "llamacpp"], "not to llama.cpp's --auto"),
])
def test_a_pin_fit_cannot_take_is_one_line_exit_2(argv: list[str], words: str) -> None:
    code, out, err = run("fit", "llama-3.1-8b", "--device", DEVICE, *argv)
    assert code == 2 and words in err and len(err.strip().splitlines()) == 1, err
