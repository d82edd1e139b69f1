"""`--memory 80Gb` was read as 10 GB (bits) silently: a size in bits is refused in one line, exit 2, naming what it
was read as (80 x 10^9 / 8 bytes) and the likely intents, on the command line and in a request file."""

from __future__ import annotations

from pathlib import Path

from cli_capture import run

SAID = "80Gb is 10.00 GB (bits); did you mean 80GB or 80GiB?"


def test_the_memory_flag_refuses_bits() -> None:
    code, out, err = run("fit", "qwen3-8b", "--memory", "80Gb")
    assert (code, out) == (2, "")
    assert err == f"llmsizer: error: argument --memory: {SAID} (see --help)\n"


def test_a_request_file_refuses_bits_at_its_line(tmp_path: Path) -> None:
    p = tmp_path / "r.yaml"
    p.write_text("version: 1\njobs:\n  - name: chat\n    kind: inference\n    model: {name: qwen3-8b}\n"
                 "    traffic: {concurrency: 4, context: 4k}\n    resources: {device: h100, count: 1, memory: 80Gb}\n")
    code, out, err = run("plan", str(p))
    assert (code, out) == (2, "")
    assert err.count("\n") == 1 and err.startswith(f"llmsizer: error: {p}:7: ") and err.endswith(f": {SAID}\n"), err


def test_the_web_api_refuses_bits_with_the_same_message() -> None:
    import pytest
    pytest.importorskip("fastapi")
    pytest.importorskip("httpx")
    from fastapi.testclient import TestClient

    from llmsizer.web.app import create_app

    with TestClient(create_app(), raise_server_exceptions=False) as client:
        r = client.post("/api/v1/fit", json={"model": "qwen3-8b", "memory": "80Gb"})
    # the CLI's reason, the field named as the request gave it (web/problems.py web_detail); no --help on the web
    assert r.status_code == 400 and r.json()["detail"] == f"field 'memory': {SAID}"
