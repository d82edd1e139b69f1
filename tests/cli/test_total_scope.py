"""The device total says what it covers: one device's bytes ("per device": one GPU, or each shard of a tensor-parallel
server) or a sum over GPUs ("all N devices": a llama.cpp split, whose device rows add up every GPU's part). The same
label in the table, the notebook HTML, ``--json``'s ``totals.device.scope`` and the web API. The sum is checked
against the per-GPU placement llama.cpp's split prints (each GPU's own total), the per-device figure against the
model's bf16 weights halved by tensor parallelism."""

from __future__ import annotations

import json

from cli_capture import run_cli

SPLIT = ["infer", "llama-3.1-8b", "--engine", "llama.cpp", "--gpus", "2"]
TP = ["infer", "llama-3.1-8b", "--engine", "vllm", "--tensor-parallel", "2", "--memory", "80GiB"]


def _total_row(text: str) -> str:
    return next(ln for ln in text.splitlines() if ln.startswith("TOTAL") and "  device  " in ln)


def test_a_llamacpp_split_total_is_labelled_the_sum_over_its_gpus() -> None:
    r = run_cli(*SPLIT, "--json")
    assert r.returncode == 0, r.stderr
    d = json.loads(r.stdout)
    gpus = [g for g in d["details"]["split"]["devices"] if g["device"] != "host"]
    assert len(gpus) == 2
    assert d["totals"]["device"]["bytes"] == sum(g["total"] for g in gpus)  # a sum, not one GPU's
    assert d["totals"]["device"]["scope"] == "all 2 devices" and d["totals"]["host"]["scope"] == "host"
    text = run_cli(*SPLIT).stdout
    assert _total_row(text).startswith("TOTAL all 2 devices ")
    assert "TOTAL device" not in text


def test_a_tensor_parallel_total_is_labelled_per_device() -> None:
    d = json.loads(run_cli(*TP, "--json").stdout)
    # each of the 2 shards holds half of the 8.03B bf16 weights (+ unsplit norms): one device's bytes
    weights = next(i for i in d["items"] if i["name"] == "weights")["bytes"]
    assert abs(weights - d["details"]["params_total"] * 2 / 2) / weights < 0.01
    assert d["totals"]["device"]["scope"] == "per device"
    assert _total_row(run_cli(*TP).stdout).startswith("TOTAL per device ")


def test_the_python_api_notebook_and_web_api_use_the_same_label() -> None:
    import llmsizer
    from llmsizer.render.notebook import estimate_html

    est = llmsizer.estimate_inference("llama-3.1-8b", engine="llamacpp", gpus=2)
    assert "TOTAL all 2 devices" in str(est) and "TOTAL all 2 devices" in estimate_html(est)
    assert est.total_label("device") == "all 2 devices"
    from fastapi.testclient import TestClient

    from llmsizer.web.app import create_app

    body = TestClient(create_app()).post("/api/v1/infer", json={"model": "llama-3.1-8b", "engine": "llama.cpp",
                                                                 "gpus": 2}).json()
    assert body["totals"]["device"]["scope"] == "all 2 devices"
