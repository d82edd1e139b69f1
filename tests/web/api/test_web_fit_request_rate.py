"""fit at a request rate (formulas/serving_queue.py eq. Q10) is one field on every surface: the CLI's
``--request-rate``, the web API's ``request_rate`` (the same body byte for byte and the same exit code), the Python
``fit(request_rate=)``; malformed rates and contradictions are refused with one line naming the field, exit 2; a rate
at or above the server's capacity is an answer: does not fit, exit 1 (the web: 200, the same body)."""

from __future__ import annotations

import math

import pytest
from web_api_helpers import run_cli

from llmsizer.estimate.fit import fit

pytest.importorskip("httpx")
pytest.importorskip("fastapi")

BODY = {"model": "qwen3-0.6b", "device": "h100-sxm", "engine": "vllm", "engine_version": "0.19.0", "context": "640",
        "output_tokens": "128"}
ARGV = ("fit qwen3-0.6b --device h100-sxm --engine vllm --engine-version 0.19.0 --context 640 "
        "--output-tokens 128").split()  # BODY's


def test_the_web_answer_is_the_clis(client) -> None:
    r = client.post("/api/v1/fit", json={**BODY, "request_rate": "16"})
    cli = run_cli(*ARGV, "--request-rate", "16", "--json")
    assert cli.returncode == 0, cli.stderr
    assert r.status_code == 200 and r.text == cli.stdout
    assert '"request_rate": 16.0' in cli.stdout


def test_the_concurrency_is_derived() -> None:
    """The requests in flight are the rate's (Little's law), the memory and the decode step at their ceiling."""
    r = fit("qwen3-0.6b", "h100-sxm", engine="vllm", engine_version="0.19.0", context=640, output_tokens=128,
            request_rate=16)
    load = r.speed.load
    assert r.details["concurrency"] == math.ceil(load["in_flight"]) == r.speed.concurrency
    assert load["requests_per_second"] == 16
    said = {a.name: a for a in r.all_assumptions}
    assert said["concurrency"].mark == " (derived)"


@pytest.mark.parametrize("extra, line", [
    (("--request-rate", "16", "--concurrency", "4"), "give --request-rate or --concurrency, not both"),
    (("--request-rate", "0"), "argument --request-rate: 0 is out of range"),
    (("--request-rate", "2", "--engine", "transformers"), "needs an engine that batches continuously"),
])
def test_refusals_are_one_line_exit_2(extra, line) -> None:
    # (transformers: ARGV without its vLLM engine and release)
    argv = ARGV[:4] + ARGV[8:] if "--engine" in extra else ARGV
    cli = run_cli(*argv, *extra)
    assert cli.returncode == 2
    assert line in cli.stderr and cli.stderr.count("\n") == 1


def test_a_rate_past_the_capacity_does_not_fit_exit_1(client) -> None:
    """50/s against the API server's 1 / H (eq. Q10a): the hardware does not carry it, an answer like a memory that
    does not fit (exit 1, the report on stdout), the same JSON on the web (200, fits false, the capacity named)."""
    cli = run_cli(*ARGV, "--request-rate", "50", "--json")
    assert cli.returncode == 1, cli.stderr
    r = client.post("/api/v1/fit", json={**BODY, "request_rate": "50"})
    assert r.status_code == 200 and r.text == cli.stdout
    body = r.json()
    assert body["fits"] is False and body["speed"] is None
    assert body["reasons"][0].startswith("does not carry the rate: at 50 requests/s this deployment (TP 1 x 1 replica)")
    assert f"carries at most about {body['details']['rate_capacity']:.3g} requests/s" in body["reasons"][0]
    text = run_cli(*ARGV, "--request-rate", "50")
    assert text.returncode == 1 and "DOES NOT FIT" in text.stdout and "lower the rate, add replicas" in text.stdout
