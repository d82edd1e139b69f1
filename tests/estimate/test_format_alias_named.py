"""A weight format given by an alias ('int4', which could as well mean AWQ, nf4 or a GGUF type) is never resolved
silently (issues #12/#16): the ``weights`` assumption names the alias and what it resolved to, in the text, the JSON
(and so the web, whose body is the CLI's JSON), the Python API, recommend and a request file's plan."""

from __future__ import annotations

import json

import pytest
from tests.cli_capture import run

import llmsizer
from llmsizer.formulas.weight_formats import FORMAT_ALIASES, format_alias
from llmsizer.plan import make_plan
from llmsizer.request import parse_request


def _weights(assumptions: list[dict]) -> dict:
    return next(a for a in assumptions if a["name"] == "weights")


def test_infer_text_and_json_name_the_alias():
    code, out, _ = run("infer", "llama-3.1-8b", "--weights", "int4")
    assert code == 0
    assert "weights=gptq-int4 (alias 'int4' -> gptq-int4" in out
    code, out, _ = run("infer", "llama-3.1-8b", "--weights", "int4", "--json")
    w = _weights(json.loads(out)["assumptions"])
    assert w["value"] == "gptq-int4" and w["default"] is False and w["why"].startswith("alias 'int4' -> gptq-int4")


def test_a_format_named_as_itself_is_no_alias():
    code, out, _ = run("infer", "llama-3.1-8b", "--weights", "GPTQ-INT4")
    assert code == 0 and "weights=gptq-int4;" in out and "alias" not in out
    assert format_alias("Q4_K_M") is None and format_alias("gguf-q4_k_m") is None


@pytest.mark.parametrize("alias", sorted(FORMAT_ALIASES))
def test_every_alias_is_named_in_the_python_api(alias):
    engine = "transformers" if FORMAT_ALIASES[alias] in ("nf4", "nf4-dq", "llm.int8") else None
    est = llmsizer.estimate_inference("qwen2.5-0.5b", weights=alias, engine=engine)
    w = next(a for a in est.assumptions if a.name == "weights")
    assert w.value == FORMAT_ALIASES[alias]
    assert w.mark.startswith(f" (alias {alias!r} -> {FORMAT_ALIASES[alias]}")


def test_fit_and_recommend_name_the_alias():
    code, out, _ = run("fit", "llama-3.1-8b", "--weights", "int4", "--device", "rtx-4090")
    assert code == 0 and "weights=gptq-int4 (alias 'int4' -> gptq-int4" in out
    code, out, _ = run("recommend", "llama-3.1-8b", "--weights", "int4", "--json")
    assert code == 0
    assert _weights(json.loads(out)["assumptions"])["why"].startswith("alias 'int4' -> gptq-int4")


def test_a_request_file_alias_is_named_in_its_plan():
    text = ("jobs:\n  - name: chat\n    kind: inference\n    model: {name: llama-3.1-8b}\n    quantization: int4\n"
            "    traffic: {concurrency: 4}\n    resources: {device: l4, count: 1}\n")
    plan = make_plan(parse_request(text, source="t.yaml"))
    job = plan.jobs[0].to_dict()
    assert "gptq-int4" in json.dumps(job)
    assert _weights(job["assumptions"])["why"].startswith("alias 'int4' -> gptq-int4")
