"""engine_version over the web API: /fit, /recommend and /plan (a request file's ``engine_version`` key) give the
Python API's speed for the same stated vLLM release, /fit byte for byte the CLI's answer; a bad version is a 400 whose
detail is the CLI's one line; /infer records it as the CLI does."""

from __future__ import annotations

import json

import pytest
from web_api_helpers import run_cli

from llmsizer import fit
from llmsizer.estimate import efficiency as E

pytest.importorskip("httpx")
pytest.importorskip("fastapi")

MODEL, DEVICE, VERSION = "qwen3-0.6b", "h100-sxm", "0.5"
BODY = {"model": MODEL, "engine": "vllm", "context": "640", "output_tokens": "128", "concurrency": 4}
FLAGS = ["--engine", "vllm", "--context", "640", "--output-tokens", "128", "--concurrency", "4"]
REQUEST = """jobs:
  - name: chat
    kind: inference
    model: {name: qwen3-0.6b}
    engine: vllm
    engine_version: "0.5"
    quantization: none
    traffic:
      context: 640
      output: 128
      concurrency: 4
    resources:
      device: h100-sxm
      count: 1
"""


@pytest.fixture(scope="module")
def total() -> float:
    """Output tokens/s in total of the Python API at VERSION (V0: the measured host step added to each step)."""
    r = fit(MODEL, DEVICE, engine="vllm", engine_version=VERSION, context=640, output_tokens=128, concurrency=4)
    assert r.speed is not None and r.speed.decode is not None and r.tokens_per_second_total is not None
    assert not r.speed.decode.host_seconds  # serial: V0's host step is in the step, not overlapped with it
    assert r.speed.decode.overhead_seconds == E.VLLM_V0_STEP_SECONDS.expected  # no per-layer term on a GPU
    return r.tokens_per_second_total


def test_fit_is_the_cli_and_the_python_answer(client, total: float) -> None:
    r = client.post("/api/v1/fit", json=dict(BODY, device=DEVICE, engine_version=VERSION))
    assert r.status_code == 200, r.text
    assert r.json()["tokens_per_second_total"] == total
    cli = run_cli("fit", MODEL, "--device", DEVICE, *FLAGS, "--engine-version", VERSION, "--json")
    assert r.text == cli.stdout
    now = client.post("/api/v1/fit", json=dict(BODY, device=DEVICE)).json()
    assert now["tokens_per_second_total"] != total


def test_recommend_and_plan_give_the_same_number(client, total: float) -> None:
    r = client.post("/api/v1/recommend", json=dict(BODY, engine_version=VERSION, top=100))
    assert r.status_code == 200, r.text
    o = next(o for o in r.json()["options"] if o["device"] == DEVICE and o["count"] == 1
             and o["weights_format"] == "bf16")
    assert o["tokens_per_second"] == total
    p = client.post("/api/v1/plan", json={"request": REQUEST, "today": "2026-03-02"})
    assert p.status_code == 200, p.text
    sec = next(s for s in p.json()["jobs"][0]["sections"] if s["key"] == "speed")
    figures = {f["key"]: f["value"] for f in sec["figures"]}
    assert figures["tps_total_typical"] == total
    assert figures["engine_host_seconds_per_step"] == E.VLLM_V0_STEP_SECONDS.expected


def test_infer_records_it(client) -> None:
    r = client.post("/api/v1/infer", json=dict(BODY, engine_version=VERSION))
    assert r.status_code == 200, r.text
    assert r.text == run_cli("infer", MODEL, *FLAGS, "--engine-version", VERSION, "--json").stdout
    assert any(a["name"] == "engine_version" and a["value"] == VERSION for a in json.loads(r.text)["assumptions"])


@pytest.mark.parametrize(("route", "argv", "extra"), [
    ("fit", ["fit", MODEL, "--device", DEVICE], {"device": DEVICE}),
    ("infer", ["infer", MODEL], {}),
    ("recommend", ["recommend", MODEL], {}),
])
def test_a_bad_version_is_a_400_with_the_cli_line(client, route: str, argv: list[str], extra: dict) -> None:
    cli = run_cli(*argv, *FLAGS, "--engine-version", "latest")
    assert cli.returncode == 2
    r = client.post(f"/api/v1/{route}", json=dict(BODY, **extra, engine_version="latest"))
    assert r.status_code == 400, r.text
    assert "llmsizer: error: " + r.json()["detail"] == cli.stderr.strip().removesuffix(" (see --help)")
    assert r.json()["detail"] == "engine_version must look like 0.19 or 0.19.1, got 'latest'"


def test_a_number_is_refused_not_read_as_another_release(client) -> None:
    """JSON's 0.10 arrives as the number 0.1 (vLLM 0.1, another rule): the release must be text."""
    r = client.post("/api/v1/fit", json=dict(BODY, device=DEVICE, engine_version=0.10))
    assert r.status_code == 400 and "give the release as text" in r.json()["detail"], r.text
    assert "\n" not in r.json()["detail"]
