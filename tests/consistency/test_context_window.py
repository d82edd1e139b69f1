"""A context past the model's window: vLLM and SGLang refuse to start, llama.cpp and transformers only warn; every
surface says so the same way (issue #16).

What the engines do (read in their released code; estimate/context_window.py cites the lines):
- vLLM 0.19.1 vllm/config/model.py ``_get_and_verify_max_len``: the derived max_model_len is the config's
  max_position_embeddings (the smallest of its length keys), times the rope_scaling factor for rope types other than
  su / longrope / llama3 (yarn: original_max_position_embeddings x factor), not for Gemma 3; a larger max_model_len
  raises ValueError unless VLLM_ALLOW_LONG_MAX_MODEL_LEN=1.
- SGLang 0.5.23 srt/configs/model_config.py ``_derive_context_length`` over srt/utils/hf_transformers/common.py
  ``get_context_length``: max_position_embeddings x factor, the factor 1 when the rope_scaling names
  original_max_position_embeddings or rope_type llama3; a larger context_length raises ValueError unless
  SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN=1.
- llama.cpp src/llama-context.cpp: "n_ctx_seq > n_ctx_train -- possible training context overflow", a warning.

Before: `fit llama-3.1-8b --engine vllm --device h200 --context 262144` said FITS ("KV pool holds 3 sequences of
262144 tokens") with only a warning. The limits below are read from the catalog's verbatim config.json copies
(src/llmsizer/catalog/data/models/*.json, each citing its published source) with the engines' rules applied here by
hand, not from llmsizer's answers.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from cli.cli_run import answer, run
from llmsizer import estimate_inference, fit
from llmsizer.errors import InputError
from llmsizer.estimate.inference.reverse import max_context
from llmsizer.plan import make_plan
from llmsizer.readers.hf_config import spec_from_config
from llmsizer.request import parse_request

MODELS = Path(__file__).resolve().parents[2] / "src" / "llmsizer" / "catalog" / "data" / "models"


def _config(name: str) -> dict[str, Any]:
    return dict(json.loads((MODELS / f"{name}.json").read_text())["config"])


LLAMA = _config("llama-3.1-8b")  # meta-llama/Llama-3.1-8B config.json
# rope_type llama3: neither vLLM (model.py: `rope_type not in ("su", "longrope", "llama3")`) nor SGLang
# (common.py: `rope_type == "llama3"` -> factor 1) multiplies the factor in; the window is max_position_embeddings
assert LLAMA["rope_scaling"]["rope_type"] == "llama3"
LIMIT = LLAMA["max_position_embeddings"]
FLAGS = ["llama-3.1-8b", "--device", "h200"]
OVERRIDES = {"vllm": "VLLM_ALLOW_LONG_MAX_MODEL_LEN=1", "sglang": "SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN=1"}


@pytest.mark.parametrize("engine", ["vllm", "sglang"])
def test_the_window_is_served_one_token_more_is_refused(engine: str, capsys: pytest.CaptureFixture[str]) -> None:
    code, ok = answer(["fit", *FLAGS, "--engine", engine, "--context", str(LIMIT)], capsys)
    assert code == 0 and ok["fits"] is True
    assert not any("window" in w for w in ok["warnings"])
    code, out = answer(["fit", *FLAGS, "--engine", engine, "--context", str(LIMIT + 1)], capsys)
    assert code == 1 and out["fits"] is False
    reason = out["reasons"][0]
    assert "will not start" in reason and f"{LIMIT:,}" in reason and OVERRIDES[engine] in reason
    refusal = [w for w in out["warnings"] if "will not start" in w]
    assert len(refusal) == 1 and "--allow-long-context" in refusal[0]
    # the memory alone would hold it: the refusal is the engine's, not the memory's
    assert int(out["memory"]["details"]["max_concurrency_at_context"]) >= 1


@pytest.mark.parametrize("engine", ["vllm", "sglang"])
def test_the_override_sizes_it_with_a_warning(engine: str, capsys: pytest.CaptureFixture[str]) -> None:
    code, out = answer(["fit", *FLAGS, "--engine", engine, "--context", str(2 * LIMIT), "--allow-long-context"],
                       capsys)
    assert code == 0 and out["fits"] is True
    assert any(OVERRIDES[engine] in w and "exceeds the model's window" in w for w in out["warnings"])
    assert any(a["name"] == "allow_long_context" and a["value"] is True
               for a in out["memory"]["assumptions"])


@pytest.mark.parametrize("engine", ["llamacpp", "transformers"])
def test_the_other_engines_only_warn(engine: str, capsys: pytest.CaptureFixture[str]) -> None:
    code, out = answer(["fit", *FLAGS, "--engine", engine, "--context", str(LIMIT + 1)], capsys)
    assert code == 0 and out["fits"] is True
    assert any(f"exceeds the model's max_position_embeddings {LIMIT}" in w for w in out["warnings"])
    assert "engine_refusal" not in out["memory"]["details"]


def test_infer_carries_the_refusal_with_and_without_memory(capsys: pytest.CaptureFixture[str]) -> None:
    code, out = answer(["infer", "llama-3.1-8b", "--engine", "vllm", "--context", str(LIMIT + 1)], capsys)
    assert code == 1 and "fits" not in out["details"]  # no memory: no verdict, but the engine will not start
    assert OVERRIDES["vllm"] in out["details"]["engine_refusal"]
    code, out = answer(["infer", *FLAGS, "--engine", "vllm", "--context", str(LIMIT + 1)], capsys)
    assert code == 1 and out["details"]["fits"] is False
    code, _ = answer(["infer", "llama-3.1-8b", "--engine", "vllm", "--context", str(LIMIT)], capsys)
    assert code == 0


def test_python_api_says_the_same() -> None:
    est = estimate_inference("llama-3.1-8b", engine="vllm", context=LIMIT + 1, device="h200")
    assert est.details["fits"] is False and OVERRIDES["vllm"] in est.details["engine_refusal"]
    assert est.details["context_window"]["tokens"] == LIMIT
    assert fit("llama-3.1-8b", "h200", engine="vllm", context=LIMIT + 1, speed=False).fits is False
    assert fit("llama-3.1-8b", "h200", engine="vllm", context=LIMIT + 1, speed=False,
               allow_long_context=True).fits is True
    with pytest.raises(InputError, match="allow_long_context: must be true or false"):
        estimate_inference("llama-3.1-8b", engine="vllm", allow_long_context="yes")


def test_max_context_stops_at_the_window(capsys: pytest.CaptureFixture[str]) -> None:
    """An H200 holds more than LIMIT tokens of Llama-3.1-8B's KV (the override shows it): vLLM's largest context is
    still the window, and the note says why."""
    assert max_context("llama-3.1-8b", engine="vllm", device="h200") == LIMIT
    assert max_context("llama-3.1-8b", engine="vllm", device="h200", allow_long_context=True) > LIMIT
    code, out = answer(["infer", *FLAGS, "--engine", "vllm", "--max-context"], capsys)
    assert out["reverse"]["max_context"] == LIMIT
    assert any("the model's window" in n and OVERRIDES["vllm"] in n for n in out["reverse_notes"])


def test_recommend_and_fits_on_do_not_list_it_on_vllm(capsys: pytest.CaptureFixture[str]) -> None:
    code, out = answer(["models", "llama-3.1-8b", "--fits-on", "h200", "--engine", "vllm", "--context",
                        str(LIMIT + 1)], capsys)
    assert code == 1
    (m,) = out["models"]
    assert m["status"] != "meets" and any("will not start" in r for r in m["reasons"])
    code, out = answer(["models", "llama-3.1-8b", "--fits-on", "h200", "--engine", "vllm", "--context",
                        str(LIMIT + 1), "--allow-long-context"], capsys)
    assert code == 0 and out["models"][0]["status"] == "meets"
    argv = ["recommend", "llama-3.1-8b", "--engine", "vllm", "--context", str(LIMIT + 1), "--top", "500"]
    code, out = answer(argv, capsys)
    assert code == 1 and out["options"] == []
    # an 80 GB A100 holds the weights and one such sequence's KV (what the override's answer shows)
    a100 = [r for r in out["rejected"] if r["device"] == "a100-sxm-80gb" and r["count"] == 1]
    assert a100 and all(any("will not start" in why for why in r["reasons"]) for r in a100)
    code, out = answer([*argv, "--allow-long-context"], capsys)
    assert code == 0 and any(o["device"] == "a100-sxm-80gb" and o["count"] == 1 for o in out["options"])


REQUEST = f"""jobs:
  - name: chat
    kind: inference
    model: {{name: llama-3.1-8b}}
    engine: vllm
    quantization: none
    traffic:
      context: {LIMIT + 1}
      concurrency: 1
    resources:
      device: h200
      count: 1
"""


def test_plan_refuses_and_the_request_field_overrides() -> None:
    plan = make_plan(parse_request(REQUEST))
    job = plan.jobs[0]
    assert job.facts["fits"] is False
    assert any("will not start" in c.message for c in plan.checks if c.severity == "error")
    allowed = REQUEST.replace("    engine: vllm\n", "    engine: vllm\n    engine_settings: {allow_long_context: true}\n")
    assert make_plan(parse_request(allowed)).jobs[0].facts["fits"] is True
    with pytest.raises(InputError, match="engine_settings.allow_long_context: applies to engine vllm or sglang"):
        parse_request(allowed.replace("engine: vllm", "engine: llamacpp"))


# The rope rules, on real configs with the scaling their publishers document: Qwen3's model card ("Processing Long
# Texts": rope_scaling {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 32768}) on the
# catalog's Qwen3-8B config.json, and Llama 2 with linear scaling (transformers' LlamaConfig docs: {"type": "linear",
# "factor": 2.0}).
QWEN_YARN = {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 32768}
LLAMA2_LINEAR = {"type": "linear", "factor": 2.0}


def _windows(config: dict[str, Any], name: str) -> dict[str, int]:
    """vLLM's and SGLang's windows by the engines' rules, from the config's own numbers."""
    rope, mpe = config["rope_scaling"], config["max_position_embeddings"]
    kind = rope.get("rope_type", rope.get("type"))
    vllm = mpe if kind in ("su", "longrope", "llama3") else (
        rope["original_max_position_embeddings"] if kind == "yarn" else mpe) * rope["factor"]
    sglang = mpe * (1 if "original_max_position_embeddings" in rope or kind == "llama3" else rope["factor"])
    return {"vllm": int(vllm), "sglang": int(sglang)}


@pytest.mark.parametrize(("name", "rope"), [("qwen3-8b", QWEN_YARN), ("llama-2-7b-hf", LLAMA2_LINEAR)])
def test_rope_scaling_moves_the_window_as_each_engine_reads_it(name: str, rope: dict[str, Any]) -> None:
    config = dict(_config(name), rope_scaling=rope)
    windows = _windows(config, name)
    if name == "qwen3-8b":  # the two engines differ: vLLM scales yarn's original length, SGLang keeps the config's
        assert windows == {"vllm": 131072, "sglang": config["max_position_embeddings"]}
    spec = spec_from_config(config, name=name)
    for engine, window in windows.items():
        for context, refused in ((window, False), (window + 1, True)):
            est = estimate_inference(spec, engine=engine, context=context, output_tokens=16)
            assert ("engine_refusal" in est.details) is refused, (engine, context)
            assert est.details["context_window"]["tokens"] == window


def test_gemma3_is_not_scaled_again() -> None:
    """Gemma 3's config states a linear factor 8 beside a window already scaled (Gemma3TextConfig's default
    max_position_embeddings, 131072): vLLM skips gemma3 model types, SGLang reads transformers v5's per-layer-type
    nesting, whose top level has no factor."""
    config = _config("gemma-3-4b-it")
    assert config["text_config"]["rope_scaling"] == {"factor": 8.0, "rope_type": "linear"}
    for engine in ("vllm", "sglang"):
        est = estimate_inference("gemma-3-4b-it", engine=engine, context=131072 + 1, output_tokens=16)
        assert est.details["context_window"]["tokens"] == 131072
        assert "engine_refusal" in est.details


def test_web_answers_as_the_cli(capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("fastapi")
    pytest.importorskip("httpx")
    from fastapi.testclient import TestClient

    from llmsizer.web.app import create_app
    with TestClient(create_app(), raise_server_exceptions=False) as client:
        for extra, flags in (({}, []), ({"allow_long_context": True}, ["--allow-long-context"])):
            body = {"model": "llama-3.1-8b", "device": "h200", "engine": "vllm", "context": str(LIMIT + 1), **extra}
            r = client.post("/api/v1/fit", json=body)
            assert r.status_code == 200, r.text
            code, out, _ = run(["fit", *FLAGS, "--engine", "vllm", "--context", str(LIMIT + 1), *flags, "--json"],
                               capsys)
            assert r.text == out and json.loads(out)["fits"] is bool(extra)


@pytest.mark.parametrize("engine", ["llamacpp", "transformers"])
def test_the_override_is_refused_where_no_engine_reads_it(engine: str, capsys: pytest.CaptureFixture[str]) -> None:
    """The override belongs to vLLM and SGLang (specs/workload.py ENGINE_SETTINGS): on another engine it is refused on
    every surface, as the request file refuses it, not ignored on the CLI and Python (the CLI answered exit 0)."""
    code, _, err = run(["infer", "llama-3.1-8b", "--engine", engine, "--allow-long-context"], capsys)
    assert code == 2 and err.strip() == f"llmsizer: error: --allow-long-context applies to engine vllm or sglang, not {engine}"
    with pytest.raises(InputError, match=f"allow_long_context applies to engine vllm or sglang, not {engine}"):
        estimate_inference("llama-3.1-8b", engine=engine, allow_long_context=True)
    estimate_inference("llama-3.1-8b", engine=engine, allow_long_context=False)  # unset: nothing to refuse
    code, _, err = run(["recommend", "llama-3.1-8b", "--allow-long-context"], capsys)  # no engine: which one?
    assert code == 2 and "--allow-long-context is a vLLM or SGLang setting, and candidates may each run a different one by default: give --engine vllm or --engine sglang" in err
    with pytest.raises(InputError, match="engine_settings.allow_long_context: applies to engine vllm or sglang"):
        parse_request(REQUEST.replace("    engine: vllm\n", f"    engine: {engine}\n    engine_settings: "
                                      "{allow_long_context: true}\n"))


def test_max_concurrency_names_the_refusal_not_memory(capsys: pytest.CaptureFixture[str]) -> None:
    """Past the window, no concurrency runs on vLLM whatever the memory: the reverse answer's note says why (it read
    "one sequence does not" fit, a memory reason, on 80 GiB where the memory alone holds 2)."""
    flags = ["infer", "llama-3.1-8b", "--engine", "vllm", "--context", str(LIMIT + 1), "--max-concurrency",
             "--memory", "80GiB"]
    code, out = answer(flags, capsys)
    assert code == 1 and out["reverse"]["max_concurrency"] == 0
    assert any("whatever the memory: vLLM will not start" in n for n in out["reverse_notes"])
    code, allowed = answer([*flags, "--allow-long-context"], capsys)
    assert code == 0 and allowed["reverse"]["max_concurrency"] >= 1
    assert not any("will not start" in n for n in allowed["reverse_notes"])
