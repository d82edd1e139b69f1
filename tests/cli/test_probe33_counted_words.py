"""probe33 D10: a count of one is said in the singular ("1 model", "1 of 1 model fits", "peak 1 request"), and a
whole number written in exponent form is echoed as the integer it is (`--concurrency 1e9` -> 1000000000)."""

from __future__ import annotations

import pytest

from cli.cli_run import run


def test_a_whole_number_is_echoed_as_an_integer(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(["infer", "llama-3.1-8b", "--device", "h100", "--concurrency", "1e9"], capsys)
    assert code == 2 and "1000000000 is out of range" in err and "e+" not in err


def test_one_model_is_singular(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(["models", "llama-3.1-8b"], capsys)
    assert code == 0 and out.rstrip().endswith("\n1 model")
    code, out, _ = run(["models", "llama-3.1-8b", "--fits-on", "h100"], capsys)
    assert code == 0 and "1 of 1 model fits" in out and "1 models" not in out


def test_peak_one_request_is_singular() -> None:
    from llmsizer.plan import make_plan
    from llmsizer.request import parse_request
    text = ("version: 1\njobs:\n  - name: chat\n    kind: inference\n    model: {name: llama-3.1-8b}\n"
            "    resources: {device: h100, count: 1}\n"
            "    traffic: {concurrency: {typical: 1, peak: 1}, context: {typical: 2k, peak: 2k}}\n")
    job = make_plan(parse_request(text, source="t.yaml"), alternatives=False).jobs[0]
    assert "peak 1 request x" in job.summary and "1 requests" not in job.summary
