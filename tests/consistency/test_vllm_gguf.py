"""vLLM and SGLang keep a GGUF checkpoint quantized (their GGUF quantization method, quantization/gguf.py): a GGUF
format on them counts the GGUF bytes, the same bytes llama.cpp's estimate counts for that file type, on every
surface (fit, infer, recommend, the Python API, the web API); a GGUF type their method lacks (MXFP4) is refused in
one line. Before, vLLM + q4_k_m said "FITS [vllm, bf16]" (16.06 GB of bf16 weights for Llama-3.1-8B) with a warning
citing transformers' docs."""

from __future__ import annotations

import json
from typing import Any

import pytest

from cli_capture import run
from llmsizer import estimate_inference, fit
from llmsizer.estimate.formats import GGUF_ENGINES
from llmsizer.formulas.weight_formats import weight_bytes
from llmsizer.models import load_model

MODEL, DEVICE = "llama-3.1-8b", "h100-sxm"




def run_json(*argv: str) -> Any:
    code, out, err = run(*argv, "--json")
    assert code in (0, 1), err
    return json.loads(out)


def weights_item(est: Any, name: str = "weights") -> int:
    return next((i.bytes for i in est.items if i.name == name), 0)


@pytest.mark.parametrize("engine", ["vllm", "sglang"])
@pytest.mark.parametrize("fmt", ["q4_k_m", "q8_0", "iq4_xs"])
def test_the_engine_counts_the_gguf_bytes_llamacpp_counts(engine: str, fmt: str) -> None:
    gguf = weight_bytes(load_model(MODEL), "gguf:" + fmt, 128, 2).total  # the format's bytes, no engine in it
    bf16 = weight_bytes(load_model(MODEL), "bf16", 128, 2).total
    served = estimate_inference(MODEL, engine=engine, weights=fmt, device=DEVICE)
    local = estimate_inference(MODEL, engine="llamacpp", weights=fmt, device=DEVICE)
    # llama.cpp keeps the token embeddings in host memory (weights_host); vLLM/SGLang hold every tensor on the GPU
    assert weights_item(served) == weights_item(local) + weights_item(local, "weights_host") == gguf < bf16 / 1.8
    assert served.details["weights_format"] == "gguf:" + fmt
    assert not any("dequantiz" in w for w in served.warnings)
    r = fit(MODEL, DEVICE, engine=engine, weights=fmt)
    assert r.weights_format == "gguf:" + fmt and r.fits
    assert weights_item(r.estimate) == gguf


def test_transformers_still_dequantizes_gguf_to_bf16() -> None:
    est = estimate_inference(MODEL, engine="transformers", weights="q4_k_m", device=DEVICE)
    assert weights_item(est) == weight_bytes(load_model(MODEL), "bf16", 128, 2).total
    assert any("dequantizes GGUF" in w for w in est.warnings)


def test_fit_infer_recommend_and_python_agree_for_vllm_q4_k_m() -> None:
    gguf = weight_bytes(load_model(MODEL), "gguf:q4_k_m", 128, 2).total
    f = run_json("fit", MODEL, "--device", DEVICE, "--engine", "vllm", "--weights", "q4_k_m")
    i = run_json("infer", MODEL, "--device", DEVICE, "--engine", "vllm", "--weights", "q4_k_m")
    assert f["weights_format"] == "gguf:q4_k_m" and f["engine"] == "vllm"
    assert next(x["bytes"] for x in f["memory"]["items"] if x["name"] == "weights") == gguf
    assert next(x["bytes"] for x in i["items"] if x["name"] == "weights") == gguf
    r = fit(MODEL, DEVICE, engine="vllm", weights="q4_k_m")
    assert f["memory_per_device"] == r.memory_per_device
    assert r.speed is not None and f["speed"]["tokens_per_second_per_user"] == r.speed.tokens_per_second_per_user
    rec = run_json("recommend", MODEL, "--engine", "vllm", "--weights", "q4_k_m", "--provider", "aws")
    chosen = rec["options"][0]
    assert chosen["status"] == "chosen" and chosen["weights_format"] == "gguf:q4_k_m" and chosen["engine"] == "vllm"
    f2 = run_json("fit", MODEL, "--device", chosen["target"], "--engine", "vllm", "--weights", "q4_k_m")
    assert chosen["memory_per_device"] == f2["memory_per_device"]
    assert chosen["tokens_per_second_per_user"] == f2["speed"]["tokens_per_second_per_user"]


def test_vllm_gguf_decodes_at_the_engines_rate_not_llamacpps() -> None:
    """The bytes are the GGUF ones; the kernels are vLLM's step (no llama.cpp per-layer overhead or SM cap)."""
    r = fit(MODEL, DEVICE, engine="vllm", weights="q4_k_m")
    assert r.speed is not None and r.speed.weights_format == "gguf:q4_k_m"
    names = {a.name: a.value for a in r.speed.assumptions}
    assert names["kernel_format"] == "bf16" and "llamacpp_sm_stream_limit" not in names
    assert "decode_overhead_per_layer_seconds" not in names
    assert r.speed.details["weights_bytes"] == weight_bytes(load_model(MODEL), "gguf:q4_k_m", 128, 2).total


@pytest.mark.parametrize("engine, name", [("vllm", "vLLM"), ("sglang", "SGLang")])
def test_a_gguf_type_the_engine_lacks_is_refused_in_one_line(engine: str, name: str) -> None:
    code, out, err = run("fit", "gpt-oss-20b", "--device", DEVICE, "--engine", engine, "--weights", "mxfp4_moe")
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and err.startswith(
        f"llmsizer: error: {name} does not load GGUF type MXFP4 (gguf:mxfp4_moe): its GGUF kernels run ")
    code2, _, err2 = run("infer", "gpt-oss-20b", "--device", DEVICE, "--engine", engine, "--weights", "mxfp4_moe")
    assert code2 == 2 and err2 == err
    # llama.cpp runs the same file type
    assert run("fit", "gpt-oss-20b", "--device", DEVICE, "--engine", "llamacpp", "--weights", "mxfp4_moe")[0] == 0


def test_the_engines_gguf_types_are_ggml_types() -> None:
    """Every type listed is a GGMLQuantizationType of the gguf package (the names vLLM's gguf.py imports)."""
    gguf = pytest.importorskip("gguf")
    names = {t.name for t in gguf.GGMLQuantizationType}
    for _name, types in GGUF_ENGINES.values():
        assert types <= names and "MXFP4" in names and "MXFP4" not in types


def test_the_web_api_gives_the_cli_answer_and_refusal() -> None:
    pytest.importorskip("fastapi")
    pytest.importorskip("httpx")
    from fastapi.testclient import TestClient

    from llmsizer.web.app import create_app

    with TestClient(create_app(), raise_server_exceptions=False) as client:
        r = client.post("/api/v1/fit", json={"model": MODEL, "device": DEVICE, "engine": "vllm",
                                             "weights": "q4_k_m"})
        assert r.status_code == 200, r.text
        code, out, _ = run("fit", MODEL, "--device", DEVICE, "--engine", "vllm", "--weights", "q4_k_m", "--json")
        assert code == 0 and r.json() == json.loads(out)
        bad = client.post("/api/v1/fit", json={"model": "gpt-oss-20b", "device": DEVICE, "engine": "vllm",
                                               "weights": "mxfp4_moe"})
        _, _, err = run("fit", "gpt-oss-20b", "--device", DEVICE, "--engine", "vllm", "--weights", "mxfp4_moe")
        # the same line (API.md "Errors": the web's detail is the CLI's line, flags and all)
        line = err.removeprefix("llmsizer: error: ").strip()
        assert "other --weights or another --engine" in line
        assert bad.status_code == 400 and bad.json()["detail"] == line
