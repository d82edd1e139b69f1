"""llama.cpp's --image-min-tokens / --image-max-tokens at every face: infer, fit, recommend, a request file's
engine_settings and the web API carry the same tokens per image, and bad values are one line, exit 2.

The counts are derived by hand from mtmd's clamp (tools/mtmd/clip-model.h L192-196, mtmd-image.cpp L122-157 @
0c1e5709) in tests/formulas/test_vision_token_bounds_llamacpp.py: 4000x3000 on Qwen2.5-VL with --image-max-tokens
1024 is 36 x 27 + 2 = 974 tokens (8..4096, llama.cpp's own bounds: 73 x 55 + 2 = 4017)."""

from __future__ import annotations

import json

import pytest

from cli_capture import run, run_cli
from llmsizer import estimate_inference

MODEL, SIZE = "qwen2.5-vl-7b-instruct", "4000x3000"
BOUNDED, DEFAULT = 974, 4017
IMAGE = ("--images", "1", "--image-size", SIZE)


def _assumed(data: dict) -> dict[str, tuple[object, bool]]:
    return {a["name"]: (a["value"], a["default"]) for a in data["assumptions"]}


def test_infer_names_the_bounds_and_sizes_kv_by_them():
    code, out, err = run("infer", MODEL, *IMAGE, "--engine", "llamacpp", "--weights", "q4_k_m",
                         "--image-max-tokens", "1024", "--json")
    assert code == 0, err
    data = json.loads(out)
    assert data["details"]["media_tokens"] == BOUNDED
    seen = _assumed(data)
    assert seen["image_max_tokens"] == (1024, False) and seen["image_min_tokens"] == (8, True)
    # the KV cache holds the text context + the bounded image, as a text-only request of that length
    est = estimate_inference(MODEL, images=1, image_size=(4000, 3000), engine="llamacpp", weights="q4_k_m",
                             context=4096, image_max_tokens=1024)
    text = estimate_inference(MODEL, engine="llamacpp", weights="q4_k_m", context=4096 + BOUNDED)
    assert est.item("kv_cache").bytes == text.item("kv_cache").bytes
    # without the flag: llama.cpp's own 8..4096
    code, out, _ = run("infer", MODEL, *IMAGE, "--engine", "llamacpp", "--weights", "q4_k_m", "--json")
    assert json.loads(out)["details"]["media_tokens"] == DEFAULT


def test_fit_recommend_and_plan_say_the_same_count(tmp_path):
    code, out, err = run("fit", MODEL, "--device", "rtx-4090", *IMAGE, "--image-max-tokens", "1024", "--json")
    assert code in (0, 1), err
    seen = _assumed(json.loads(out))
    assert seen["media_tokens"] == (BOUNDED, False) and seen["image_max_tokens"] == (1024, False)
    assert json.loads(out)["engine"] == "llamacpp"  # implied: the one engine that reads the flag
    code, out, err = run("recommend", MODEL, *IMAGE, "--image-max-tokens", "1024", "--json")
    assert code in (0, 1), err
    assert _assumed(json.loads(out))["media_tokens"] == (BOUNDED, False)
    req = tmp_path / "req.yaml"
    req.write_text("version: 1\njobs:\n  - name: vl\n    kind: inference\n    model: {name: " + MODEL + "}\n"
                   "    engine: llamacpp\n    quantization: q4_k_m\n    media: {images: 1, image_size: " + SIZE + "}\n"
                   "    engine_settings: {image_max_tokens: 1024}\n"
                   "    traffic: {concurrency: {typical: 1}, context: {typical: 4096}}\n    resources: {device: l40s}\n")
    code, out, err = run("plan", str(req), "--no-alternatives")
    assert code in (0, 1), err
    assert f"(4,096 text + 1 x {BOUNDED} image tokens = {4096 + BOUNDED:,} tokens)" in out
    # on another engine the request's line is refused, as the CLI refuses the flag
    req.write_text(req.read_text().replace("engine: llamacpp", "engine: vllm").replace("q4_k_m", "bf16"))
    code, out, err = run("plan", str(req), "--no-alternatives")
    assert code == 2 and "engine_settings.image_max_tokens" in err and "llamacpp" in err, (code, err)


@pytest.mark.parametrize(("argv", "words"), [
    (("--image-min-tokens", "0"), ("--image-min-tokens", "out of range")),
    (("--image-max-tokens", "0"), ("--image-max-tokens", "out of range")),
    (("--image-min-tokens", "2048", "--image-max-tokens", "1024"), ("--image-min-tokens", "above", "--image-max-tokens")),
    # one bound past the model's other (8..4096): llama.cpp's load refuses it (clip.cpp L2057-2059)
    (("--image-min-tokens", "8192"), ("--image-min-tokens 8192", "4096", "--image-max-tokens")),
    (("--image-max-tokens", "1024", "--engine", "vllm"), ("--image-max-tokens", "llamacpp", "vllm")),
    (("--image-max-tokens", "1024", "--engine", "sglang"), ("--image-max-tokens", "llamacpp", "sglang")),
])
def test_bad_values_are_one_line_exit_2(argv, words):
    code, out, err = run("infer", MODEL, *IMAGE, *(() if "--engine" in argv else ("--engine", "llamacpp")), *argv)
    assert (code, out) == (2, "") and err.count("\n") == 1 and "Traceback" not in err, err
    assert all(w in err for w in words), err


def test_models_that_do_not_read_them_and_no_media_are_refused():
    """Gemma 3 (one 896x896 image) and Llama 4 (tiles) never call set_limit_image_tokens (clip.cpp L1634-1642,
    L1788-1794): the flags are not read there, so refused, not ignored; without images nothing is bounded."""
    for argv in (("gemma-3-4b-it", "--images", "1"), (MODEL,)):
        code, out, err = run("infer", *argv, "--engine", "llamacpp", "--image-max-tokens", "256")
        assert (code, out) == (2, "") and err.count("\n") == 1 and "--image-max-tokens" in err, err
    r = run_cli("infer", "gemma-3-4b-it", "--images", "1", "--engine", "llamacpp", "--image-max-tokens", "256")
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and "not read for model" in r.stderr, r.stderr


def test_the_web_api_carries_the_same_number():
    pytest.importorskip("fastapi")
    from fastapi.testclient import TestClient

    from llmsizer.web.app import create_app

    body = {"model": MODEL, "images": 1, "image_size": SIZE, "engine": "llamacpp", "weights": "q4_k_m"}
    with TestClient(create_app(), raise_server_exceptions=False) as client:
        r = client.post("/api/v1/infer", json={**body, "image_max_tokens": 1024})
        assert r.status_code == 200, r.text
        assert r.json()["details"]["media_tokens"] == BOUNDED
        r = client.post("/api/v1/infer", json={**body, "image_min_tokens": 2048, "image_max_tokens": 1024})
        assert r.status_code == 400 and "above" in r.json()["detail"], r.text
        r = client.post("/api/v1/infer", json={**body, "engine": "vllm", "weights": "bf16", "image_max_tokens": 1024})
        assert r.status_code == 400 and "llamacpp" in r.json()["detail"], r.text
