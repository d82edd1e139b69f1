"""``GET /api/v1/models/fits-on`` ("what fits my machine", issue #16): its body is byte for byte what the real CLI
(a subprocess) prints for ``llmsizer models --fits-on DEVICE ... --json``, with the CLI's exit code; bad input is a
400 naming the field, with the CLI's one line."""

from __future__ import annotations

import pytest
from web_api_helpers import run_cli

pytest.importorskip("httpx")
pytest.importorskip("fastapi")

CASES = [
    ({"fits_on": "rtx-4090", "context": "8k"}, ["--fits-on", "rtx-4090", "--context", "8k"]),
    ({"fits_on": "apple-m3-max-36gb", "concurrency": "2", "query": "qwen"},
     ["qwen", "--fits-on", "apple-m3-max-36gb", "--concurrency", "2"]),
    ({"fits_on": "g6.xlarge", "context": "32k", "concurrency": "4"},  # an instance: its device and count
     ["--fits-on", "g6.xlarge", "--context", "32k", "--concurrency", "4"]),
    ({"fits_on": "rtx-3090", "count": "2", "query": "70b"}, ["70b", "--fits-on", "rtx-3090", "--count", "2"]),
]


@pytest.mark.parametrize("params, argv", CASES, ids=[c[0]["fits_on"] for c in CASES])
def test_fits_on_is_the_cli_json(client, params, argv):
    r = client.get("/api/v1/models/fits-on", params=params)
    cli = run_cli("models", *argv, "--json")
    assert cli.returncode in (0, 1), cli.stderr
    assert r.status_code == 200, r.text
    assert r.text == cli.stdout
    assert r.headers["x-llmsizer-exit-code"] == str(cli.returncode)
    # and the same answer as the model list's fits_on parameter
    assert client.get("/api/v1/models", params=params).text == r.text


def test_fits_on_answers_ranked_information_the_page_needs(client):
    data = client.get("/api/v1/models/fits-on", params={"fits_on": "h100-sxm", "context": "8k"}).json()
    meets = [m for m in data["models"] if m["status"] == "meets"]
    assert meets and all(m["weights_format"] and m["tokens_per_second_per_user"] > 0 for m in meets)
    assert any(m["status"] == "rejected" and m["reasons"] for m in data["models"])  # DeepSeek-R1 on one H100


@pytest.mark.parametrize("params, field, cli_argv", [
    ({"fits_on": "no-such-card"}, None, ["--fits-on", "no-such-card"]),
    ({"fits_on": "rtx-4090", "context": "lots"}, "context", ["--fits-on", "rtx-4090", "--context", "lots"]),
    ({"fits_on": "rtx-4090", "count": "two"}, "count", ["--fits-on", "rtx-4090", "--count", "two"]),
])
def test_bad_input_is_the_cli_line(client, params, field, cli_argv):
    r = client.get("/api/v1/models/fits-on", params=params)
    cli = run_cli("models", *cli_argv, "--json")
    assert cli.returncode == 2
    assert r.status_code == 400 and r.headers["content-type"].startswith("application/problem+json")
    detail = r.json()["detail"]
    assert detail in cli.stderr and "Traceback" not in r.text
    if field:
        assert r.json()["field"] == field


@pytest.mark.parametrize("params", [{}, {"fits_on": " "}])
def test_fits_on_is_required(client, params):
    r = client.get("/api/v1/models/fits-on", params=params)
    assert r.status_code == 400 and r.json()["field"] == "fits_on"


def test_a_hardware_file_cannot_be_named(client):
    r = client.get("/api/v1/models/fits-on", params={"fits_on": "rtx-4090", "hardware_file": "/etc/passwd"})
    assert r.status_code == 400 and r.json()["field"] == "hardware_file"
