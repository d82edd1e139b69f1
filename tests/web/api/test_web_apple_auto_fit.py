"""probe9 #3 on the web API: /fit with auto on a Mac answers what `fit --auto` answers (before: the same 400 as the
CLI's exit 2, "--auto places layers on GPUs; apple-m4-pro-24gb is apple"), byte for byte."""

from __future__ import annotations

import pytest
from web_api_helpers import run_cli

pytest.importorskip("httpx")
pytest.importorskip("fastapi")


def test_fit_auto_on_a_mac_is_the_clis(client) -> None:
    body = {"model": "qwen3-30b-a3b", "device": "apple-m4-pro-24gb", "weights": "q4_k_m", "context": "16k",
            "auto": True}
    r = client.post("/api/v1/fit", json=body)
    cli = run_cli(*"fit qwen3-30b-a3b --device apple-m4-pro-24gb --weights q4_k_m --context 16k --auto --json".split())
    assert cli.returncode == 0, cli.stderr
    assert r.status_code == 200 and r.text == cli.stdout
    assert r.json()["speed"]["tokens_per_second"] > 0
