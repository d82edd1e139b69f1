"""The web API answers issue #16's bad input with the CLI's own line (a 400) and accepts a prefill-only workload
(output_tokens 0), as the CLI does (tests/cli/test_bad_input_ux7.py). Each test failed before its fix."""

from __future__ import annotations

import pytest
from web_api_helpers import cli_error_line, run_cli, web_line

pytest.importorskip("httpx")
pytest.importorskip("fastapi")

KV_REQUEST = """jobs:
  - name: chat
    kind: inference
    model: {name: llama-3.1-8b}
    engine: vllm
    kv_cache_dtype: q4_0
    traffic:
      concurrency: 4
      context: 2k
"""


def test_model_search_with_no_match_is_a_400_with_the_cli_line(client) -> None:
    line = cli_error_line("models", "zzzz")
    r = client.get("/api/v1/models", params={"query": "zzzz"})
    assert r.status_code == 400 and r.json()["detail"] == line


def test_unknown_weights_and_kv_dtype_are_a_400_naming_the_flag(client) -> None:
    for field, value in (("weights", "fp9"), ("kv_dtype", "fp9")):
        line = cli_error_line("infer", "llama-3.1-8b", f"--{field.replace('_', '-')}", value)
        r = client.post("/api/v1/infer", json={"model": "llama-3.1-8b", field: value})
        assert r.status_code == 400 and r.json()["detail"] == web_line(line, r.json()["field"])
        assert "did you mean 'fp8'" in line


def test_request_check_refuses_the_engines_kv_dtype_as_the_cli_does(client, tmp_path) -> None:
    (tmp_path / "kv.yaml").write_text(KV_REQUEST)
    cli = run_cli("request", "check", "kv.yaml", cwd=tmp_path)
    assert cli.returncode == 2
    lines = [ln.removeprefix("llmsizer: error: ").removesuffix(" (see --help)") for ln in cli.stderr.splitlines()]
    r = client.post("/api/v1/request/check", json={"request": KV_REQUEST, "filename": "kv.yaml"})
    assert r.status_code == 400 and r.json()["errors"] == lines
    assert "engine vllm has no 'q4_0' KV cache" in lines[0]
    assert r.json() == client.post("/api/v1/plan", json={"request": KV_REQUEST, "filename": "kv.yaml"}).json()


def test_output_tokens_zero_is_answered(client) -> None:
    r = client.post("/api/v1/infer", json={"model": "llama-3.1-8b", "context": "2048", "output_tokens": 0})
    assert r.status_code == 200, r.text
    out = next(a["value"] for a in r.json()["assumptions"] if a["name"] == "output_tokens")
    assert out == 0
    r = client.post("/api/v1/fit", json={"model": "llama-3.1-8b", "device": "h100", "output_tokens": "0"})
    assert r.status_code == 200 and r.json()["speed"]["decode"] is None
