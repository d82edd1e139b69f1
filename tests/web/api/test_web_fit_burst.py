"""A burst larger than the engine admits (review17 D2): fit, the web API, the Python API and plan give the same
figure (estimate/fit.py ``burst_figure``: formulas/serving_queue.py eq. Q14, the figure validation's burst rows are
judged by, tests/validation/test_serving_load_rows.py). The memory verdict is unchanged: vLLM's pool holds 60 of
the 500 sequences of 4096 tokens, so it does not fit (exit 1); the burst figure is said beside it."""

from __future__ import annotations

import json

import pytest
from web_api_helpers import run_cli

from cli_capture import run
from llmsizer.estimate.fit import burst_warning, fit
from request.helpers import job_yaml

pytest.importorskip("httpx")
pytest.importorskip("fastapi")

BODY = {"model": "qwen3-14b", "device": "h100-sxm", "engine": "vllm", "weights": "bf16", "context": "4096",
        "concurrency": "500"}
ARGV = "fit qwen3-14b --device h100-sxm --engine vllm --weights bf16 --context 4096 --concurrency 500".split()


def _python() -> dict:
    r = fit("qwen3-14b", "h100-sxm", engine="vllm", weights="bf16", context=4096, concurrency=500)
    assert not r.fits
    return r.details["burst"]


def test_cli_json_and_web_carry_the_burst(client) -> None:
    b = _python()
    assert (b["requests"], b["admitted"]) == (500, 60)
    cli = run_cli(*ARGV, "--json")
    assert cli.returncode == 1, cli.stderr
    said = json.loads(cli.stdout)
    assert said["details"]["burst"] == b and said["fits"] is False
    assert burst_warning(b, 1) in said["warnings"]
    w = client.post("/api/v1/fit", json=BODY)
    assert w.status_code == 200 and w.text == cli.stdout


def test_cli_text_prints_the_same_numbers() -> None:
    b = _python()
    cli = run_cli(*ARGV)
    assert cli.returncode == 1
    line = next(x for x in cli.stdout.splitlines() if x.startswith("burst: "))
    for figure in (f"{b['ttft_seconds']:.2f} s expected", f"{b['ttft_upper_seconds']:.2f} s at most",
                   f"{b['requests_per_second']:.3g} requests/s", "60 admitted", "440 wait"):
        assert figure in line
    assert f"warning: {burst_warning(b, 1)}" in cli.stdout


def test_plan_says_the_burst(tmp_path) -> None:
    req = tmp_path / "req.yaml"
    req.write_text(job_yaml("inference", """
model: {name: qwen3-14b}
precision: bf16
engine: vllm
traffic:
  concurrency: {typical: 500, peak: 500}
  context: {typical: 4096, peak: 4096}
  output: {typical: 256, peak: 256}
resources: {device: h100-sxm, count: 1}
"""), encoding="utf-8")
    _, out, _ = run("plan", str(req), "--json")
    assert burst_warning(_python(), 1) in json.loads(out)["jobs"][0]["warnings"]
