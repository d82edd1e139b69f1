"""A request file carries llama.cpp's -ngl and -ub (engine_settings.n_gpu_layers / n_ubatch), so the flags
`fit --auto` prints can be planned (probe9 #6): the plan of 70B q4_k_m on 2 x RTX 4090 at 32k with -ngl 73 -ts 37,36
gives fit's memory and speed for the same flags, and a bad value is refused in the CLI flag's words."""

from __future__ import annotations

import pytest

from cli.cli_run import answer
from llmsizer.plan import make_plan
from llmsizer.request import RequestError, parse_request

REQUEST = """version: 1
title: p
jobs:
- name: chat
  kind: inference
  model: {name: llama-3.3-70b-instruct}
  quantization: q4_k_m
  engine: llamacpp
  traffic:
    concurrency: {typical: 1, peak: 1}
    context: {typical: 32768, peak: 32768}
  engine_settings: {n_gpu_layers: NGL, tensor_split: [37, 36]}
  resources: {device: rtx-4090, count: 2}
"""


def test_plan_with_ngl_is_fit_with_ngl(capsys: pytest.CaptureFixture[str]) -> None:
    plan = make_plan(parse_request(REQUEST.replace("NGL", "73"), source="r.yaml"), alternatives=False)
    fit = answer(["fit", "llama-3.3-70b-instruct", "--engine", "llamacpp", "--device", "rtx-4090", "--count", "2",
                  "--weights", "q4_k_m", "--context", "32768", "-ngl", "73", "-ts", "37,36"], capsys)[1]
    job = plan.jobs[0].to_dict()
    est = job["memory_estimate"]
    assert est["details"]["split"]["n_gpu_layers"] == 73
    assert [d["total"] for d in est["details"]["split"]["devices"]] == \
        [d["total"] for d in fit["memory"]["details"]["split"]["devices"]]
    assert est["totals"] == fit["memory"]["totals"]
    assert job["facts"]["memory_per_device"] == fit["memory_per_device"]
    for key in ("ttft_seconds", "prefill_tokens_per_second", "decode_tokens_per_second"):  # (no decode: no host CPU)
        assert job["speed_estimate"][key] == fit["speed"][key]
    assert job["speed_estimate"]["ttft_seconds"] > 0


@pytest.mark.parametrize("value", ["-1", "10001"])
def test_bad_ngl_in_the_flag_words(value: str) -> None:
    with pytest.raises(RequestError) as exc:
        parse_request(REQUEST.replace("NGL", value), source="r.yaml")
    assert f"engine_settings.n_gpu_layers: {value} is out of range; expected an integer in [0, 10,000] (layers " \
           "offloaded to the GPU; 0 = none)" in exc.value.errors[0]


def test_plan_with_ubatch_is_fit_with_ubatch(capsys: pytest.CaptureFixture[str]) -> None:
    """engine_settings.n_ubatch is `fit --ubatch`: the compute buffers (one ubatch's f32 graph) match."""
    text = REQUEST.replace("n_gpu_layers: NGL,", "n_ubatch: 2048,")
    job = make_plan(parse_request(text, source="r.yaml"), alternatives=False).jobs[0].to_dict()
    fit = answer(["fit", "llama-3.3-70b-instruct", "--engine", "llamacpp", "--device", "rtx-4090", "--count", "2",
                  "--weights", "q4_k_m", "--context", "32768", "--ubatch", "2048", "-ts", "37,36"], capsys)[1]
    est = job["memory_estimate"]
    assert est["details"]["n_ubatch"] == 2048
    assert est["totals"] == fit["memory"]["totals"]
