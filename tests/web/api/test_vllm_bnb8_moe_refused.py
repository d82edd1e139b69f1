"""vLLM does not load an MoE model in bitsandbytes llm.int8 (issues #12/#16): a FusedMoE layer gets
BitsAndBytesMoEMethod, whose ``_create_weights_8bit`` raises NotImplementedError (vllm
model_executor/layers/quantization/bitsandbytes.py @ 01f5395f L591-600). Before, llmsizer answered it (exit 0, and
vLLM was even the default engine for llm.int8 on a GPU). Now every surface refuses it as llmsizer refuses other
formats an engine does not load (exit 2, one line; the web's 400 carries the same line; a plan's job bad input), and
with no engine named the engine rule picks transformers, which loads it. A dense model in llm.int8 still runs on
vLLM (BitsAndBytesLinearMethod has an 8-bit path)."""

from __future__ import annotations

import json

import pytest
from web_api_helpers import cli_error_line, run_cli

import llmsizer
from llmsizer.errors import InputError
from llmsizer.plan import make_plan
from llmsizer.request import parse_request

pytest.importorskip("httpx")
pytest.importorskip("fastapi")

MOE = "qwen3-30b-a3b"  # Qwen3MoeForCausalLM: its experts are a FusedMoE on vLLM


@pytest.mark.parametrize("route", ["infer", "fit"])
def test_every_surface_refuses_vllm_llm_int8_on_an_moe_model(route, client) -> None:
    args = (MOE, "--engine", "vllm", "--weights", "llm.int8", *(("--device", "h100-sxm") if route == "fit" else ()))
    line = cli_error_line(route, *args)
    assert "vLLM does not load the MoE model" in line and "llm.int8" in line and "_create_weights_8bit" in line
    body = {"model": MOE, "engine": "vllm", "weights": "llm.int8", **({"device": "h100-sxm"} if route == "fit" else {})}
    # the CLI and the web name the flags, Python the fields (errors.FieldError): the rest is the same
    assert line.endswith("; give other --weights or another --engine")
    named = line.replace("--weights", "weights").replace("--engine", "engine")
    r = client.post(f"/api/v1/{route}", json=body)
    assert r.status_code == 400 and r.json()["detail"] == line and r.json()["field"] == "weights"
    with pytest.raises(InputError) as e:
        llmsizer.estimate_inference(MOE, engine="vllm", weights="llm.int8")
    assert str(e.value) == named


def test_recommend_refuses_the_stated_engine_and_never_proposes_it() -> None:
    assert "vLLM does not load the MoE model" in cli_error_line("recommend", MOE, "--engine", "vllm", "--weights",
                                                                "llm.int8")
    done = run_cli("recommend", MOE, "--weights", "llm.int8", "--json")
    assert done.returncode == 0, done.stderr
    rec = json.loads(done.stdout)
    engines = {o["engine"] for o in rec["options"] if o["weights_format"] == "llm.int8"}
    assert engines and "vllm" not in engines


def test_no_engine_named_runs_it_on_transformers() -> None:
    est = llmsizer.estimate_inference(MOE, weights="llm.int8")
    engine = next(a for a in est.assumptions if a.name == "engine")
    assert engine.value == "transformers" and "vLLM does not load" in engine.why


def test_a_dense_model_in_llm_int8_still_runs_on_vllm() -> None:
    est = llmsizer.estimate_inference("llama-3.1-8b", engine="vllm", weights="llm.int8")
    assert est.total()[0] > 0 and next(a for a in est.assumptions if a.name == "engine").value == "vllm"


def test_a_request_file_job_is_an_error() -> None:
    text = (f"jobs:\n  - name: chat\n    kind: inference\n    model: {{name: {MOE}}}\n    quantization: llm.int8\n"
            "    engine: vllm\n    traffic: {concurrency: 4}\n    resources: {device: h100-sxm, count: 1}\n")
    # refused on any hardware: bad input before fitting, at the job's place (plan/inference.py refuse_bad_input);
    # it was the plan's error check 'Cannot be fitted'
    with pytest.raises(InputError, match=r"t\.yaml:2: job 'chat' \(inference\): .*vLLM does not load the MoE model"):
        make_plan(parse_request(text, source="t.yaml"))
