"""llama.cpp's --kv-unified / --no-kv-unified over the web API: the body's true / false are the CLI's two flags
(false is said, not left out), the answer is byte for byte the CLI's, and another engine is a 400 with its line."""

from __future__ import annotations

import json

import pytest
from web_api_helpers import run_cli

pytest.importorskip("httpx")
pytest.importorskip("fastapi")

BODY = {"model": "gemma-3-4b-it", "engine": "llamacpp", "weights": "q4_0", "context": "8k", "concurrency": 4}
ARGV = ["infer", "gemma-3-4b-it", "--engine", "llamacpp", "--weights", "q4_0", "--context", "8k",
        "--concurrency", "4"]


@pytest.mark.parametrize("value, flag", [(True, "--kv-unified"), (False, "--no-kv-unified")])
def test_true_and_false_are_the_cli_flags(client, value: bool, flag: str) -> None:
    r = client.post("/api/v1/infer", json=dict(BODY, kv_unified=value))
    cli = run_cli(*ARGV, flag, "--json")
    assert r.status_code == 200, r.text
    assert r.text == cli.stdout
    a = next(a for a in json.loads(r.text)["assumptions"] if a["name"] == "kv_unified")
    assert a["value"] is value and a["default"] is False  # given, also when false


def test_another_engine_is_a_400_with_the_cli_line(client) -> None:
    cli = run_cli("infer", "gemma-3-4b-it", "--engine", "vllm", "--kv-unified")
    assert cli.returncode == 2
    r = client.post("/api/v1/infer", json={"model": "gemma-3-4b-it", "engine": "vllm", "kv_unified": True})
    assert r.status_code == 400
    # the CLI's line (API.md "Errors"), the field the body's key
    assert cli.stderr.startswith("llmsizer: error: --kv-unified applies")
    assert "llmsizer: error: " + r.json()["detail"] == cli.stderr.strip().removesuffix(" (see --help)")
    assert r.json()["field"] == "kv_unified"


def test_openapi_states_a_boolean(client) -> None:
    spec = client.get("/api/v1/openapi.json").json()
    text = json.dumps(spec)
    assert '"kv_unified": {"type": "boolean"' in text and "no_kv_unified" not in text
