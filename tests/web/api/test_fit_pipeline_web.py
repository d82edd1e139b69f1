"""fitpp (probe32 D2): the web's fit answers as `fit` does where only a pipeline layout fits: Qwen3.5-122B-A10B FP8 on
2 x H100, vLLM, 32k x 8 fits at TP 1 x PP 2 (fit's own layout search, estimate/fit.py with_pipeline_layouts), and
the body is the CLI's JSON; `--pp 1` (tensor parallelism only) is the same 'does not fit' on both."""

from __future__ import annotations

import json

from cli_capture import run_json
from llmsizer import fit

BODY = {"model": "qwen3.5-122b-a10b", "device": "h100-sxm", "count": 2, "engine": "vllm", "context": "32k",
        "concurrency": 8, "weights": "fp8"}
ARGV = ("fit", "qwen3.5-122b-a10b", "--device", "h100-sxm", "--count", "2", "--engine", "vllm", "--context", "32k",
        "--concurrency", "8", "--weights", "fp8", "--json")


def test_web_fit_takes_the_pipeline_layout(client) -> None:
    want = fit("qwen3.5-122b-a10b", "h100-sxm", 2, engine="vllm", context=32768, concurrency=8, weights="fp8",
               pipeline_parallel=2)  # the test's own layout, asked by hand
    r = client.post("/api/v1/fit", json=BODY)
    assert r.status_code == 200
    d = r.json()
    assert d["fits"] and (d["tensor_parallel"], d["pipeline_parallel"]) == (1, 2)
    assert d["memory_per_device"] == want.memory_per_device
    assert d["tokens_per_second_total"] == want.tokens_per_second_total
    code, cli = run_json(*ARGV)
    assert code == 0 and json.loads(json.dumps(cli)) == d


def test_web_pp1_does_not_fit_as_the_cli(client) -> None:
    r = client.post("/api/v1/fit", json={**BODY, "pp": 1})
    code, cli = run_json(*ARGV, "--pp", "1")
    assert code == 1 and not cli["fits"] and cli["tensor_parallel"] == 2
    assert r.json() == cli
