"""The calculator's serving tab offers ``infer --tp`` (the tensor-parallel devices of one replica, dest
``tensor_parallel``) beside its Device, made as its generated Engine settings section makes its rows (web/pages.py
ENGINE_MAIN, ENGINE_COUNTS; "8 x H200" is Device h200 with --tp 8), for the engines that
shard a model with it; the API answers it as ``infer --tp N --json`` does (a separate CLI process, byte for byte),
and refuses a bad degree with the CLI's line, naming the field the body gave.

Before, the serving tab had no control for it: ``--tp`` was reachable through the CLI, the Python API and the API
field only, and the tab's only device count was llama.cpp's --gpus."""

from __future__ import annotations

import pytest
from test_engine_settings_form import _form
from web_api_helpers import cli_error_line, run_cli, run_cli_json, web_line

from llmsizer.specs import ENGINES

pytest.importorskip("httpx")
pytest.importorskip("fastapi")

MODEL = "qwen2.5-0.5b"  # 14 query heads, 2 KV heads: a degree of 2 divides both


def test_the_tp_control_is_shown_for_exactly_the_engines_infer_takes_it_on(client) -> None:
    """The control's engines (data-engines) are the ones whose ``infer --tp 2`` answers (exit 0, the weights
    sharded: less per device than --tp 1); on the others infer refuses it (exit 2, one line)."""
    c = _form(client).controls["tensor_parallel"]
    assert c["infer"] and not c["section"] and c["attrs"]["data-flag"] == "--tp"  # in the main fieldset
    assert c["tag"] == "input" and c["attrs"]["type"] == "text"
    shown = c["engines"].split()
    for engine in ENGINES:
        base = ("infer", MODEL, "--engine", engine, "--memory", "24GiB")
        if engine in shown:
            weights = [next(it["bytes"] for it in run_cli_json(*base, "--tp", tp)["items"] if it["name"] == "weights")
                       for tp in ("1", "2")]
            assert weights[1] < weights[0], (engine, weights)  # sharded over the two devices
        else:
            assert "tensor-parallel" in cli_error_line(*base, "--tp", "2"), engine
    assert "llamacpp" not in shown and len(shown) == len(ENGINES) - 1


# the form's body (text values, as the calculator sends them, with the reverse questions a memory asks) and the
# command the copied CLI line is
BODY = {"model": "llama-3.1-8b", "engine": "vllm", "context": "8k", "memory": "24GiB", "max_context": True,
        "max_concurrency": True}
ARGS = ("infer", "llama-3.1-8b", "--engine", "vllm", "--context", "8k", "--memory", "24GiB", "--max-context",
        "--max-concurrency")


@pytest.mark.parametrize("key", ["tensor_parallel", "tp"])
def test_vllm_tp2_is_infers_answer_byte_for_byte(client, key: str) -> None:
    """vLLM with --tp 2 on 24 GiB per device: the API's body is the CLI's output, and the degree changes it: the
    weights per device halve, so vLLM's pool (the same 0.9 of each device) holds more KV and the workload needs less
    of it; more sequences fit."""
    r = client.post("/api/v1/infer", json={**BODY, key: "2"})
    assert r.status_code == 200, r.text
    cli = run_cli(*ARGS, "--tp", "2", "--json")
    assert cli.returncode == 0, cli.stderr
    assert r.text == cli.stdout
    two, one = r.json(), run_cli_json(*ARGS)
    weights = {n: next(it["bytes"] for it in d["items"] if it["name"] == "weights") for n, d in (("1", one), ("2", two))}
    assert weights["2"] < weights["1"]
    assert two["details"]["workload_bytes"] < one["details"]["workload_bytes"]
    assert two["reverse"]["max_concurrency"] > one["reverse"]["max_concurrency"]


@pytest.mark.parametrize(("key", "value"), [("tensor_parallel", "0"), ("tp", "x"), ("tensor_parallel", "2.5")])
def test_a_bad_degree_is_refused_with_the_clis_line_at_its_field(client, key: str, value: str) -> None:
    r = client.post("/api/v1/infer", json={"model": MODEL, "engine": "vllm", key: value})
    assert r.status_code == 400, r.text
    p = r.json()
    assert p["field"] == key
    assert p["detail"] == web_line(cli_error_line("infer", MODEL, "--engine", "vllm", "--tp", value), p["field"])


@pytest.mark.parametrize("key", ["tensor_parallel", "tp"])
def test_a_degree_the_model_refuses_is_refused_as_infer_refuses_it(client, key: str) -> None:
    """3 does not divide Qwen2.5-0.5B's 14 heads: infer's line (exit 2) on both surfaces, ``field`` the key the body
    used (web/bridge.py field_problem, as tests/web/api/test_web_field_errors.py holds it)."""
    r = client.post("/api/v1/infer", json={"model": MODEL, "engine": "vllm", key: "3"})
    assert r.status_code == 400, r.text
    line = cli_error_line("infer", MODEL, "--engine", "vllm", "--tp", "3")
    assert line.startswith("--tp 3 does not divide the 14 attention heads"), line
    assert r.json()["field"] == key and r.json()["detail"] == web_line(line, r.json()["field"])


def test_llamacpp_refuses_tp_naming_the_tp_field_on_every_surface(client) -> None:
    """llama.cpp splits layers, not tensor-parallel shards: --tp 2 there is refused as the tensor_parallel field's
    error (a FieldError), so the CLI's line names --tp and the API's 400 names the field it was given -- before, a
    plain error whose text named --gpus sent the web's field to the training tab's GPUs control."""
    line = cli_error_line("infer", MODEL, "--engine", "llamacpp", "--memory", "24GiB", "--tp", "2")
    assert line.startswith("--tp applies to") and "--gpus N, one machine's, with --split-mode" in line
    r = client.post("/api/v1/infer", json={"model": MODEL, "engine": "llamacpp", "memory": "24GiB",
                                           "tensor_parallel": "2"})
    assert r.status_code == 400 and r.json()["field"] == "tensor_parallel", r.text
    assert "llama.cpp splits layers" in r.json()["detail"]
