"""epweb: the web API's serving data parallelism and expert parallelism are the CLI's: a body with ``data_parallel``
(or ``dp``, --dp/--data-parallel) and ``enable_expert_parallel`` (or ``expert_parallel``,
--enable-expert-parallel/--expert-parallel) answers POST
/api/v1/infer and /api/v1/fit with the JSON ``infer`` / ``fit`` print for the same flags (a separate CLI process),
MiniMax-M2.7 fp8-block on H100 with vLLM, DP 8 x EP 8 (its routed experts 256 / 8 = 32 per device, eq. EP2 of
formulas/serving_expert_parallel.py); the refusals (expert parallelism on a dense model, --dp on llama.cpp) are the
CLI's one line, a 400 naming the field."""

from __future__ import annotations

import json

import pytest
from web_api_helpers import cli_error_line, web_line

from cli_capture import run_json

MODEL = "minimax-m2.7"
BODY = {"model": MODEL, "device": "h100", "engine": "vllm", "tp": 1, "concurrency": 64, "context": "4k"}
ARGV = ("--device", "h100", "--engine", "vllm", "--tp", "1", "--concurrency", "64", "--context", "4k")


@pytest.mark.parametrize("dp_key", ["data_parallel", "dp"])
def test_web_infer_dp8_ep_is_the_clis(client, dp_key: str) -> None:
    r = client.post("/api/v1/infer", json={**BODY, dp_key: 8, "enable_expert_parallel": True})
    assert r.status_code == 200, r.text
    code, cli = run_json("infer", MODEL, *ARGV, "--dp", "8", "--enable-expert-parallel", "--json")
    assert code == 0 and json.loads(json.dumps(cli)) == r.json()
    # the premise: DP 8 x EP 8 changes the answer (each device holds 32 of the 256 experts, not a TP-1 whole model)
    whole = client.post("/api/v1/infer", json=BODY).json()
    assert r.json()["totals"]["device"]["bytes"] < whole["totals"]["device"]["bytes"]
    said = {a["name"]: a for a in r.json()["assumptions"]}
    assert "data_parallel" in said and "expert_parallel" in said, sorted(said)


@pytest.mark.parametrize("ep_key", ["enable_expert_parallel", "expert_parallel"])
def test_web_fit_dp8_ep_is_the_clis(client, ep_key: str) -> None:
    # ``expert_parallel``, the name a request file and the answer give it, is an alias of the CLI's flag
    # (--enable-expert-parallel / --expert-parallel), as ``dp`` is of ``data_parallel``: the same answer
    r = client.post("/api/v1/fit", json={**BODY, "count": 8, "data_parallel": 8, ep_key: True})
    assert r.status_code == 200, r.text
    code, cli = run_json("fit", MODEL, "--count", "8", *ARGV, "--dp", "8", "--enable-expert-parallel", "--json")
    assert code == 0 and json.loads(json.dumps(cli)) == r.json()
    assert r.json()["data_parallel"] == 8 and r.json()["expert_parallel"] is True


def test_web_expert_parallel_both_spellings_refused(client) -> None:
    # the two names of one option given together: one 400 naming both, as ``dp`` with ``data_parallel``
    r = client.post("/api/v1/fit", json={**BODY, "count": 8, "dp": 8, "enable_expert_parallel": True,
                                         "expert_parallel": True})
    assert r.status_code == 400, r.text
    assert "--enable-expert-parallel/--expert-parallel" in r.json()["detail"], r.json()


@pytest.mark.parametrize(("body", "argv", "field"), [
    ({"model": "qwen2.5-0.5b", "device": "h100", "engine": "vllm", "enable_expert_parallel": True},
     ("infer", "qwen2.5-0.5b", "--device", "h100", "--engine", "vllm", "--enable-expert-parallel"),
     "enable_expert_parallel"),
    ({"model": "qwen2.5-0.5b", "device": "h100", "engine": "vllm", "expert_parallel": True},
     ("infer", "qwen2.5-0.5b", "--device", "h100", "--engine", "vllm", "--expert-parallel"), "expert_parallel"),
    ({"model": "qwen2.5-0.5b", "device": "h100", "engine": "llamacpp", "data_parallel": 2},
     ("infer", "qwen2.5-0.5b", "--device", "h100", "--engine", "llamacpp", "--dp", "2"), "data_parallel"),
])
def test_web_refusals_are_the_clis_line(client, body: dict, argv: tuple[str, ...], field: str) -> None:
    r = client.post("/api/v1/infer", json=body)
    assert r.status_code == 400, r.text
    line = cli_error_line(*argv)
    assert r.json()["detail"] == web_line(line, field), (r.json(), line)
    assert r.json()["field"] == field  # the body's own key (the calculator marks that control)
