"""An encoder-decoder (T5 / mT5) on the web API: served on transformers, the body is the CLI's --json byte for
byte; what is not modelled (vLLM, training outside the measured setting) is one problem, HTTP 400, whose detail is
the CLI's one line (estimate/model_warnings.py ``refuse_serving``, ``refuse_unmodelled``;
tests/estimate/test_encoder_decoder_refused.py for the CLI)."""

from __future__ import annotations

import pytest
from web_api_helpers import cli_error_line, run_cli

pytest.importorskip("httpx")
pytest.importorskip("fastapi")


@pytest.mark.parametrize(("route", "body", "argv"), [
    ("/api/v1/infer", {"model": "t0_3b", "engine": "transformers"}, ["infer", "t0_3b", "--engine", "transformers"]),
    ("/api/v1/fit", {"model": "t0_3b", "device": "a100"}, ["fit", "t0_3b", "--device", "a100"]),
])
def test_encoder_decoder_served_on_transformers_is_the_cli_answer(client, route, body, argv):
    r = client.post(route, json=body)
    assert r.status_code == 200, r.text
    assert r.text == run_cli(*argv, "--json").stdout


@pytest.mark.parametrize(("route", "body", "argv"), [
    ("/api/v1/infer", {"model": "t0_3b", "engine": "vllm"}, ["infer", "t0_3b", "--engine", "vllm"]),
    ("/api/v1/train", {"model": "mt0-xxl", "method": "lora"}, ["train", "mt0-xxl", "--method", "lora"]),
])
def test_what_is_not_modelled_is_a_400_problem_naming_why(client, route, body, argv):
    r = client.post(route, json=body)
    assert r.status_code == 400
    p = r.json()
    assert "encoder-decoder" in p["detail"] and "bigscience/" in p["detail"] and "Traceback" not in r.text
    # the CLI's line (API.md "Errors": one rule for every error)
    assert p["detail"] == cli_error_line(*argv)
