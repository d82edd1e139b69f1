"""One default engine when the first choice refuses the checkpoint's format (#16 probe): gpt-oss-20b ships MXFP4,
which vLLM will not load below compute capability 8.0 (vllm quantization/mxfp4.py Mxfp4Config.get_min_capability
80, gated in vllm/config/vllm.py; a T4 is Turing, 7.5, CUDA C Programming Guide "Compute Capabilities"). Before,
`infer gpt-oss-20b --device t4` picked vLLM by the device rule and was then refused (exit 2) while `recommend`
answered vLLM with AWQ for the same card. The one rule (estimate/device.py engine_rule) now falls back to llama.cpp,
which runs the checkpoint as its MXFP4_MOE GGUF, and says why; `infer`, `fit`, `recommend`, `models --fits-on`, the
Python API and the web API give that one engine and one total."""

from __future__ import annotations

import json

import pytest
from web_api_helpers import run_cli
from web_api_helpers import run_cli_json as _cli

import llmsizer

pytest.importorskip("httpx")
pytest.importorskip("fastapi")

MODEL, DEVICE, INSTANCE = "gpt-oss-20b", "t4", "azure-standard_nc4as_t4_v3"


def _engine(est: dict) -> dict:
    return next(a for a in est["assumptions"] if a["name"] == "engine")


def _totals(est: dict) -> dict[str, int]:
    return {where: int(t["bytes"]) for where, t in est["totals"].items()}


def _option(rec: dict) -> tuple[str, str]:
    o = next(o for o in rec["options"] if o["target"] == INSTANCE)
    return o["engine"], o["weights_format"]


def test_every_face_falls_back_to_llamacpp_on_a_t4(client) -> None:
    infer = _cli("infer", MODEL, "--device", DEVICE)
    fit = _cli("fit", MODEL, "--device", DEVICE)
    why = _engine(infer)
    assert why["value"] == "llamacpp" and why["default"]
    assert "vLLM refuses mxfp4 on t4" in why["why"] and "compute capability 7.5" in why["why"]
    assert why == _engine(fit) and fit["engine"] == "llamacpp"
    assert _totals(infer) == _totals(fit["memory"])
    assert infer["details"]["weights_format"] == fit["weights_format"] == "gguf:mxfp4_moe"

    py_inf = llmsizer.estimate_inference(MODEL, device=DEVICE).to_dict()
    py_fit = llmsizer.fit(MODEL, DEVICE)
    assert json.loads(json.dumps(py_inf, default=str)) == infer
    assert py_fit.engine == "llamacpp"

    web_inf = client.post("/api/v1/infer", json={"model": MODEL, "device": DEVICE}).json()
    web_fit = client.post("/api/v1/fit", json={"model": MODEL, "device": DEVICE}).json()
    assert web_inf == infer and _totals(web_fit["memory"]) == _totals(infer)

    rec = _option(_cli("recommend", MODEL))
    assert rec == _option(client.post("/api/v1/recommend", json={"model": MODEL}).json())
    assert rec == next((o.engine, o.weights_format) for o in llmsizer.recommend_inference(MODEL).options
                       if o.target == INSTANCE) == ("llamacpp", "gguf:mxfp4_moe")
    fits_on = next(m for m in _cli("models", "--fits-on", DEVICE)["models"] if m["id"].endswith("/" + MODEL))
    assert (fits_on["engine"], fits_on["weights_format"]) == ("llamacpp", "gguf:mxfp4_moe")


def test_vllm_is_kept_where_it_runs_the_format_and_refused_when_named() -> None:
    """An L4 (Ada, 8.9) passes vLLM's MXFP4 gate: the device rule's vLLM stays. Naming vLLM on the T4 is still
    refused in one line (exit 2): the fallback is the default's, never a silent change of a given engine."""
    l4 = _cli("infer", MODEL, "--device", "l4")
    assert _engine(l4)["value"] == "vllm" and "refuses" not in _engine(l4)["why"]
    done = run_cli("infer", MODEL, "--device", DEVICE, "--engine", "vllm")
    assert done.returncode == 2 and "vLLM refuses mxfp4 on t4" in done.stderr
