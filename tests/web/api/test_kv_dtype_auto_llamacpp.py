"""``--kv-dtype auto`` with llama.cpp: llama.cpp has no 'auto' cache type (common/arg.cpp:304-322 kv_cache_types:
f32, f16, bf16, q8_0, q4_0, q4_1, iq4_nl, q5_0, q5_1), and with none given it caches f16 (common/common.h:589-590
``cache_type_k = GGML_TYPE_F16``, ``cache_type_v = GGML_TYPE_F16``; ggml-org/llama.cpp@0c1e57098). So ``auto`` is that
f16, said in the assumption -- not the model's dtype, vLLM's and SGLang's meaning. The same on every surface: the
Python API, ``infer``, a request file's ``kv_cache_dtype: auto`` read by ``plan``, and the web API.

stabilityai/stablelm-base-alpha-3b is an fp32 checkpoint (config.json torch_dtype float32; GPTNeoX, 16 layers,
hidden_size 4096 = 32 heads x 128), run from fp32 GGUF weights, so the model's dtype (4 B) and llama.cpp's f16 (2 B)
give different caches: 2048 cells x 16 layers x 2 (K, V) x 4096 x 2 B."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from web_api_helpers import run_cli, run_cli_json

from llmsizer import estimate_inference

MODEL = "stablelm-base-alpha-3b"
F16_KV = 2048 * 16 * 2 * 4096 * 2
WHY = ("auto -> fp16: llama.cpp has no 'auto' cache type (common/arg.cpp:304-322 kv_cache_types); its default "
       "-ctk/-ctv, common/common.h:589-590 cache_type_k/v = GGML_TYPE_F16 (ggml-org/llama.cpp@0c1e57098)")
ARGV = ["infer", MODEL, "--engine", "llamacpp", "--weights", "gguf:f32", "--context", "2048", "--output-tokens", "1"]
REQUEST = """version: 1
title: kv auto on llama.cpp
jobs:
  - name: serving
    kind: inference
    model:
      name: stablelm-base-alpha-3b
    engine: llamacpp
    quantization: gguf:f32
    kv_cache_dtype: auto
    traffic:
      concurrency: 1
      context: 2048
      output: 1
    resources:
      device: h100-sxm
      count: 1
"""


def _kv(d: dict) -> tuple[int, dict]:
    """(the KV cache's bytes, the kv_dtype assumption) of an estimate's JSON."""
    return (next(i["bytes"] for i in d["items"] if i["name"] == "kv_cache"),
            next(a for a in d["assumptions"] if a["name"] == "kv_dtype"))


@pytest.fixture(scope="module")
def cli() -> dict:
    return run_cli_json(*ARGV, "--kv-dtype", "auto")


def test_python_api_is_llamacpps_f16() -> None:
    common = dict(engine="llamacpp", weights="gguf:f32", context=2048, output_tokens=1)
    auto = estimate_inference(MODEL, kv_dtype="auto", **common)
    kv, a = _kv(auto.to_dict())
    assert kv == F16_KV == estimate_inference(MODEL, kv_dtype="fp16", **common).item("kv_cache").bytes
    assert 2 * kv == estimate_inference(MODEL, kv_dtype="fp32", **common).item("kv_cache").bytes  # not the model's
    assert a == {"name": "kv_dtype", "value": "fp16", "default": False, "why": WHY}
    assert estimate_inference(MODEL, **common).item("kv_cache").bytes == kv  # what llama.cpp does unasked


def test_cli_is_the_python_answer(cli: dict) -> None:
    assert _kv(cli) == (F16_KV, {"name": "kv_dtype", "value": "fp16", "default": False, "why": WHY})
    text = run_cli(*ARGV, "--kv-dtype", "auto")
    assert text.returncode == 0 and f"kv_dtype=fp16 ({WHY})" in text.stdout, text.stderr


def test_request_file_is_the_cli_answer(tmp_path: Path, cli: dict) -> None:
    p = tmp_path / "request.yaml"
    p.write_text(REQUEST)
    d = run_cli_json("plan", str(p), "--today", "2026-03-02")
    assert _kv(d["jobs"][0]["memory_estimate"]) == _kv(cli)


def test_web_is_the_cli_answer(client, cli: dict) -> None:
    body = {"model": MODEL, "engine": "llamacpp", "weights": "gguf:f32", "context": 2048, "output_tokens": 1,
            "kv_dtype": "auto"}
    r = client.post("/api/v1/infer", json=body)
    assert r.status_code == 200, r.text
    assert r.text == run_cli(*ARGV, "--kv-dtype", "auto", "--json").stdout  # byte for byte the CLI's
    assert _kv(json.loads(r.text)) == _kv(cli)
