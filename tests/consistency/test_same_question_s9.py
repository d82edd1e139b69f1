"""One answer, from a new user's probe (session 9): the same question asked through `fit`, a request file, the
Python API and the web API. Each test failed before its fix; expected values come from the surface the question is
answered by (fit's own result) or from the catalog's data files, never from the surface under test.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from cli_capture import run
from llmsizer.estimate.fit import fit


def run_json(*argv: str) -> tuple[int, Any]:
    code, out, err = run(*argv, "--json")
    assert code in (0, 1), err
    return code, json.loads(out)


def service(tmp_path: Path, resources: str, model: str = "qwen2.5-7b", context: int = 4096, concurrency: int = 2) -> Path:
    req = tmp_path / "req.yaml"
    req.write_text(f"version: 1\njobs:\n  - name: chat\n    kind: inference\n    model: {{name: {model}}}\n"
                   f"    traffic:\n      concurrency: {{typical: {concurrency}, peak: {concurrency}}}\n"
                   f"      context: {{typical: {context}, peak: {context}}}\n    resources: {resources}\n")
    return req


# ------------------------------------------------------------------------------ an instance named as a device

@pytest.mark.parametrize("name, holds", [("p5.48xlarge", "8 x h100-sxm"),
                                         ("aws-m7i.4xlarge", "1 x intel-xeon-platinum-8488c")])
def test_a_request_naming_an_instance_as_its_device_is_refused_with_the_field(tmp_path: Path, name: str,
                                                                               holds: str) -> None:
    """`fit --device p5.48xlarge` places the model over the instance's 8 H100s at its on-demand price; the request
    ``resources: {device: p5.48xlarge}`` was planned on ONE bare h100-sxm, unpriced (TTFT 72 ms, 183.6 tokens/s per
    user, "cost unknown"), and ``{device: aws-m7i.4xlarge}`` gave an ERROR check about the instance's CPU having no
    memory size while fit answered 16.09 GB, fits, 3.23 tokens/s. The request reader now says where it belongs."""
    req = service(tmp_path, f"{{device: {name}}}")
    code, _, err = run("plan", str(req))
    assert code == 2
    assert err == (f"llmsizer: error: {req}:9: job 'chat' (inference): resources.device: '{name}' is an instance "
                   f"({holds}), not a device; write it under resources.instance\n")


def test_the_instance_field_plans_what_fit_answers_on_the_instance(tmp_path: Path) -> None:
    from llmsizer.plan import make_plan
    from llmsizer.request import parse_request

    req = service(tmp_path, "{instance: aws-m7i.4xlarge}")
    job = make_plan(parse_request(req.read_text(), source=str(req)), alternatives=False).jobs[0]
    r = fit("qwen2.5-7b", "aws-m7i.4xlarge", context=4096, concurrency=2)
    mem, spd = job.section("memory"), job.section("speed")
    assert mem.value("fits") is r.fits is True and mem.value("need_peak") == r.memory_per_device
    assert r.speed is not None and spd.value("tps_user_peak") == pytest.approx(r.speed.tokens_per_second_per_user,
                                                                               rel=1e-12)


# ------------------------------------------------------------------------------------ a memory without its unit

@pytest.mark.parametrize("cli_argv, call", [
    (["infer", "llama-3.1-8b", "--memory", "24"], lambda: __import__("llmsizer").estimate_inference(
        "llama-3.1-8b", memory=24)),
    (["train", "llama-3.1-8b", "--method", "lora", "--memory", "24"], lambda: __import__("llmsizer").estimate_training(
        "llama-3.1-8b", method="lora", memory=24)),
    (["infer", "llama-3.1-8b", "--memory", "24", "--max-context"], lambda: __import__("llmsizer").max_context(
        "llama-3.1-8b", 24)),
    (["fit", "llama-3.1-8b", "--device", "h100-sxm", "--memory", "24"], lambda: fit("llama-3.1-8b", "h100-sxm",
                                                                                    memory=24)),
])
def test_a_memory_of_24_is_refused_from_python_as_from_the_command_line(cli_argv: list[str], call: Any) -> None:
    """`--memory 24` is refused as a forgotten unit (README: "on every command, the web API and in request files");
    ``memory=24`` in Python was 24 bytes and answered "does not fit" (exit-1 equivalent) instead."""
    from llmsizer.errors import InputError

    code, out, err = run(*cli_argv)
    assert code == 2 and out == "" and "has no unit (a bare number is bytes); did you mean 24GiB?" in err
    with pytest.raises(InputError) as e:
        call()
    assert str(e.value) == ("memory: 24 is out of range; expected an integer in [1,048,576, 2^60] (bytes; under 1 "
                            "MiB is a forgotten unit: 24 GiB is 24 * 2**30)")


# ------------------------------------------------------------------ a missing size named where the user gives it

@pytest.mark.parametrize("model, media, resources, field", [
    ("qwen2.5-vl-7b-instruct", "    media: {images: 2}\n", "{device: rtx-4090}", "media.image_size"),
    ("qwen2.5-7b", "", "{device: intel-xeon-spr-8ch}", "resources.memory"),
])
def test_a_plan_names_the_request_field_that_is_missing(tmp_path: Path, model: str, media: str, resources: str,
                                                        field: str) -> None:
    """The core's message named only the CLI flag ("give --image-size WIDTHxHEIGHT", "give one with --memory"), which
    a request file does not have; it now names the flag, the Python keyword and the request field."""
    req = tmp_path / "req.yaml"
    req.write_text(f"version: 1\njobs:\n  - name: chat\n    kind: inference\n    model: {{name: {model}}}\n{media}"
                   f"    traffic:\n      concurrency: {{typical: 1, peak: 1}}\n      context: {{typical: 4096, peak: 4096}}\n"
                   f"    resources: {resources}\n")
    code, out, err = run("plan", str(req))
    if media:  # a missing image size is bad input on any hardware: refused before fitting (exit 2), as infer does
        assert code == 2 and f"{field} in a request file" in err, err
        return
    assert code == 1  # the memory a device lacks: the plan's error check
    error = next(ln for ln in out.splitlines() if ln.lstrip().startswith("ERROR"))
    assert f"{field} in a request file" in error, error


# ------------------------------------------------------------------------------- "what fits" on unknown memory

def test_what_fits_on_a_device_of_unknown_memory_is_refused_as_fit_refuses_it() -> None:
    """`fit qwen2.5-0.5b --device intel-xeon-spr-8ch` exits 2 (no sourced memory size); `models --fits-on
    intel-xeon-spr-8ch` answered "0 of 66 models fit", every row "no: device memory unknown", exit 0 (the web's
    /models/fits-on a 200 saying the same): an answer nobody could act on."""
    code, out, err = run("fit", "qwen2.5-0.5b", "--device", "intel-xeon-spr-8ch")
    assert code == 2 and out == "" and "has no sourced memory size" in err
    code, out, err = run("models", "--fits-on", "intel-xeon-spr-8ch")
    line = ("intel-xeon-spr-8ch has no sourced memory size, so no model can be said to fit on it; give it with "
            "--memory (e.g. 64GiB; memory= in Python) or in a hardware file (--hardware-file; `llmsizer hardware "
            "detect -o FILE` writes one for this machine)")
    assert (code, out, err) == (2, "", f"llmsizer: error: {line}\n")
    pytest.importorskip("fastapi")
    from fastapi.testclient import TestClient

    from llmsizer.web.app import create_app

    with TestClient(create_app(), raise_server_exceptions=False) as client:
        r = client.get("/api/v1/models/fits-on", params={"fits_on": "intel-xeon-spr-8ch"})
    assert r.status_code == 400 and r.json()["detail"] == line


# ------------------------------------------------------------ a conflicting pool setting, refused by recommend too

@pytest.mark.parametrize("flags, fields, line", [
    (["--engine", "sglang", "--headroom", "0.2"], {"engine": "sglang"},
     "headroom does not apply to engine sglang: its token pool takes mem_fraction_static of the memory; give "
     "mem_fraction_static instead"),
    (["--engine", "vllm", "--headroom", "0.2", "--gpu-memory-utilization", "0.9"],
     {"engine": "vllm", "gpu_memory_utilization": 0.9},
     "give headroom or gpu_memory_utilization, not both: vLLM's pool is 1 - headroom of the memory"),
])
def test_recommend_refuses_a_conflicting_pool_setting_as_fit_does(flags: list[str], fields: dict[str, Any],
                                                                   line: str) -> None:
    """`fit ... --engine sglang --headroom 0.2` exits 2 with the line; `recommend` with the same flags answered "0
    meet the constraints, 163 rejected" (exit 1), 63 of the rejections repeating that line."""
    from llmsizer.errors import InputError
    from llmsizer.recommend import Constraints, recommend_inference

    assert run("fit", "llama-3.1-8b", "--device", "h100-sxm", *flags) == (2, "", f"llmsizer: error: {line}\n")
    assert run("recommend", "llama-3.1-8b", *flags) == (2, "", f"llmsizer: error: {line}\n")
    with pytest.raises(InputError) as e:
        recommend_inference("llama-3.1-8b", constraints=Constraints(headroom=0.2), **fields)
    assert str(e.value) == line


@pytest.mark.parametrize("flags", [
    ["--engine", "vllm", "--kv-dtype", "q8_0"],  # a KV dtype vLLM cannot store: 160 rejections before
    ["--engine", "llamacpp", "--weights", "awq-int4"],  # a format llama.cpp does not run: 160 rejections before
])
def test_recommend_refuses_an_engine_setting_the_engine_never_takes_as_fit_does(flags: list[str]) -> None:
    code, out, fit_err = run("fit", "llama-3.1-8b", "--device", "h100-sxm", *flags)
    assert code == 2 and out == "" and fit_err.count("\n") == 1
    assert run("recommend", "llama-3.1-8b", *flags) == (2, "", fit_err)


def test_a_plan_with_no_hardware_says_why_the_search_could_not_run(tmp_path: Path) -> None:
    """A service on llama.cpp pinned to AWQ weights, with no resources: recommend now refuses the pair up front (as
    fit does), and the plan's ERROR says so, where it said "no catalog option fits the peak load and latency
    limits" (every option had been rejected for the same pair). The pair is refused on any hardware, so the plan
    now refuses it before searching, as `infer` does (exit 2, infer's line at the job's place: plan/inference.py
    refuse_bad_input, tests/consistency/test_plan_bad_input_one_rule.py); it was this ERROR, exit 1."""
    req = tmp_path / "req.yaml"
    req.write_text("version: 1\njobs:\n  - name: x\n    kind: inference\n    model: {name: llama-3.1-8b}\n"
                   "    engine: llamacpp\n    quantization: awq-int4\n"
                   "    traffic: {concurrency: {typical: 1, peak: 2}, context: {typical: 1k, peak: 2k}}\n")
    code, out, err = run("plan", str(req))
    assert code == 2 and not out
    assert (f"{req}:3: job 'x' (inference): engine llamacpp runs GGUF formats (e.g. q4_k_m, q8_0), not 'awq-int4'"
            in err), err
