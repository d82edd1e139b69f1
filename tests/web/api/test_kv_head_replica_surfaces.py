"""The per-GPU weights of vLLM's replicated KV heads and GLM-4.5's fp32 router (tests/formulas/
test_kv_head_replica_weights.py) are one number from the Python API, the CLI's --json and the web API."""

from __future__ import annotations

import pytest
from web_api_helpers import run_cli_json

from llmsizer import estimate_inference

pytest.importorskip("httpx")
pytest.importorskip("fastapi")


@pytest.mark.parametrize(("model", "tp"), [("qwen3-next-80b-a3b-thinking", 8), ("glm-4.5-air", 16)])
def test_cli_python_and_web_give_the_same_weights(client, model: str, tp: int) -> None:
    api = estimate_inference(model, engine="vllm", tensor_parallel=tp, context=4096).item("weights")
    cli = run_cli_json("infer", model, "--engine", "vllm", "--tensor-parallel", str(tp), "--context", "4096")
    web = client.post("/api/v1/infer", json={"model": model, "engine": "vllm", "tensor_parallel": tp,
                                             "context": 4096})
    assert web.status_code == 200, web.text
    for d in (cli, web.json()):
        assert next(i["bytes"] for i in d["items"] if i["name"] == "weights") == api.bytes
