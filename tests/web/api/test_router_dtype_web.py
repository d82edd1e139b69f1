"""The web API gives the CLI's device-dependent router weights (tests/consistency/test_router_dtype_one_capability.py):
vLLM's Nemotron-H router in fp32 on an A100, bf16 on an H100 (vllm 0.19.1 gate_linear.py:45-55), the A100 answer
23 x 128 x 2688 x 2 = 15,826,944 B more per rank (config.json: 23 'E' layers, 128 experts, hidden 2688), in /infer,
/fit (memory and speed), /recommend's one-card option, /models/fits-on's row and /plan's service."""

from __future__ import annotations

from typing import Any

import pytest

from cli_capture import run_json
from router_dtype_case import MODEL, ONE_CARD, REQUEST

pytest.importorskip("httpx")
pytest.importorskip("fastapi")

ROUTER_FP32_EXTRA = 23 * 128 * 2688 * (4 - 2)


def _ok(r: Any) -> Any:
    assert r.status_code == 200, r.text
    return r.json()


def _weights(d: dict[str, Any]) -> int:
    return next(int(i["bytes"]) for i in d["items"] if i["name"] == "weights")


def test_web_answers_are_the_clis_on_each_device(client) -> None:
    got: dict[str, int] = {}
    for device, target in ONE_CARD.items():
        body = {"model": MODEL, "engine": "vllm", "device": device}
        web_infer = _ok(client.post("/api/v1/infer", json=body))
        code, cli_infer = run_json("infer", MODEL, "--engine", "vllm", "--device", device)
        assert code == 0
        got[device] = w = _weights(cli_infer)
        assert _weights(web_infer) == w
        web_fit = _ok(client.post("/api/v1/fit", json=body))
        assert web_fit["memory"]["details"]["weights_bytes"] == w
        assert web_fit["speed"]["details"]["weights_bytes_per_device"] == w
        code, cli_fit = run_json("fit", MODEL, "--engine", "vllm", "--device", device)
        assert code == 0 and web_fit["memory_per_device"] == cli_fit["memory_per_device"]
        assert web_fit["speed"]["tokens_per_second_per_user"] == cli_fit["speed"]["tokens_per_second_per_user"]
        rec = _ok(client.post("/api/v1/recommend", json={"model": MODEL, "engine": "vllm", "top": 200}))
        opt = next(o for o in rec["options"] if o["target"] == target)
        on_target = _ok(client.post("/api/v1/fit", json={**body, "device": target, "weights": "bf16"}))
        assert on_target["memory"]["details"]["weights_bytes"] == w
        assert opt["memory_per_device"] == on_target["memory_per_device"]
        assert opt["tokens_per_second_per_user"] == on_target["speed"]["tokens_per_second_per_user"]
        fits = _ok(client.get("/api/v1/models/fits-on", params={"fits_on": device, "query": MODEL,
                                                                "engine": "vllm"}))
        row = fits["models"][0]
        assert (row["tensor_parallel"], row["weights_format"]) == (1, "bf16")
        assert row["tokens_per_second_per_user"] == cli_fit["speed"]["tokens_per_second_per_user"]
        plan = _ok(client.post("/api/v1/plan", json={"request": REQUEST.format(model=MODEL, device=device)}))
        job = plan["jobs"][0]
        assert job["memory_estimate"]["details"]["weights_bytes"] == w
        assert job["speed_estimate"]["details"]["weights_bytes_per_device"] == w
    assert got["a100-sxm-80gb"] - got["h100-sxm"] == ROUTER_FP32_EXTRA == 15_826_944
