"""A request rate is one input on every surface: the web's plan of a request file that states its load as
traffic.requests_per_second has the facts `llmsizer plan --json` gives for the same file, and those are `fit
--request-rate`'s (the web's /fit with request_rate); a rate past the server's capacity is an answer on every
surface: the plan's error check (exit 1, the web 200) in the words of fit's reason (fit: does not fit)."""

from __future__ import annotations

import json

import pytest
from web_api_helpers import run_cli

pytest.importorskip("httpx")
pytest.importorskip("fastapi")


@pytest.fixture(scope="module")
def client():
    """The API with a longer time limit than the server's 30 s default: these tests compare answers, not the limit
    (test_web_api_endpoints.py tests the 503); a rate search past capacity takes ~15 s of CPU, near 30 s of wall
    time on a loaded 2-core machine."""
    from fastapi.testclient import TestClient

    from llmsizer.web.app import create_app
    with TestClient(create_app(time_limit=300.0), raise_server_exceptions=False) as c:
        yield c

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


def test_a_rate_past_the_capacity_is_the_same_answer_everywhere(client, tmp_path) -> None:
    """1000/s on one H100 is past the server's capacity: the plan is made with an error check (CLI exit 1, the web
    200), in fit's own words (fit: does not fit, exit 1)."""
    text = REQUEST.format(rate=1000)
    path = tmp_path / "bad.yaml"
    path.write_text(text)
    web = client.post("/api/v1/plan", json={"request": text, "today": "2026-03-02", "filename": "bad.yaml"})
    assert web.status_code == 200, web.text
    cli = run_cli("plan", "bad.yaml", "--today", "2026-03-02", "--json", cwd=tmp_path)
    assert cli.returncode == 1, cli.stderr
    (error,) = [c for c in json.loads(cli.stdout)["checks"] if c["severity"] == "error"]
    assert error in web.json()["checks"]
    assert "does not carry the rate: at 1000 requests/s" in error["message"]
    fit = client.post("/api/v1/fit", json={**FIT, "request_rate": "1000"})
    assert fit.status_code == 200 and fit.json()["fits"] is False
    assert error["message"].split(": ", 1)[1] == fit.json()["reasons"][0]
