"""A request rate is one input on every surface: the web's plan of a request file that states its load as
traffic.requests_per_second has the facts `llmsizer plan --json` gives for the same file, and those are `fit
--request-rate`'s (the web's /fit with request_rate); a rate past the server's capacity is the same one line on the
web's plan (4xx) as on the CLI's (exit 2), and on the CLI's fit after the field's name."""

from __future__ import annotations

import json

import pytest
from web_api_helpers import cli_error_line, run_cli

pytest.importorskip("httpx")
pytest.importorskip("fastapi")

REQUEST = ("version: 1\ntitle: rate\njobs:\n- name: j\n  kind: inference\n  model: {{name: qwen3-0.6b}}\n"
           "  engine: vllm\n  engine_version: 0.19.0\n  resources: {{device: h100-sxm, count: 1}}\n"
           "  traffic:\n    requests_per_second: {{peak: {rate}}}\n"
           "    context: {{typical: 640, peak: 640}}\n    output: {{typical: 128, peak: 128}}\n")
FIT = {"model": "qwen3-0.6b", "device": "h100-sxm", "engine": "vllm", "engine_version": "0.19.0", "context": "640",
       "output_tokens": "128"}


def test_plan_facts_are_the_clis_and_fits(client, tmp_path) -> None:
    text = REQUEST.format(rate=16)
    path = tmp_path / "r.yaml"
    path.write_text(text)
    web = client.post("/api/v1/plan", json={"request": text, "today": "2026-03-02", "filename": "r.yaml"})
    assert web.status_code == 200, web.text
    cli = run_cli("plan", "r.yaml", "--today", "2026-03-02", "--json", cwd=tmp_path)
    assert cli.returncode in (0, 1), cli.stderr
    facts = web.json()["jobs"][0]["facts"]
    assert facts == json.loads(cli.stdout)["jobs"][0]["facts"]
    fit = client.post("/api/v1/fit", json={**FIT, "request_rate": "16"}).json()
    assert facts["ttft_peak"] == fit["speed"]["ttft_seconds"]
    assert facts["tps_user_peak"] == fit["speed"]["tokens_per_second_per_user"]
    assert facts["memory_per_device"] == fit["memory_per_device"]


def test_the_refusal_is_one_line_everywhere(client, tmp_path) -> None:
    text = REQUEST.format(rate=1000)
    path = tmp_path / "bad.yaml"
    path.write_text(text)
    web = client.post("/api/v1/plan", json={"request": text, "filename": "bad.yaml"})
    assert 400 <= web.status_code < 500
    cli = run_cli("plan", "bad.yaml", cwd=tmp_path)
    assert cli.returncode == 2 and cli.stderr.count("\n") == 1, cli.stderr
    line = cli.stderr.strip().removeprefix("llmsizer: error: ")
    assert line in web.json()["detail"] or line in web.text
    assert line.startswith("bad.yaml:11: job 'j' (inference): traffic.requests_per_second.peak: request rate 1000/s")
    fit_line = cli_error_line("fit", "qwen3-0.6b", "--device", "h100-sxm", "--engine", "vllm", "--engine-version",
                              "0.19.0", "--context", "640", "--output-tokens", "128", "--request-rate", "1000")
    assert fit_line.removeprefix("--request-rate: ") == line.split("traffic.requests_per_second.peak: ", 1)[1]
    assert client.post("/api/v1/fit", json={**FIT, "request_rate": "1000"}).status_code == 400
