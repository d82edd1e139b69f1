"""vLLM --async-scheduling over the web API: the field async_scheduling reaches fit as the CLI flag does (the same
answer as `llmsizer fit ... --async-scheduling --json`), and its refusals are the CLI's line with a 400
(tests/estimate/test_vllm_async_scheduling.py holds vLLM's own rules)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

BASE = {"model": "qwen3-0.6b", "device": "h100-sxm", "engine": "vllm", "engine_version": "0.11.0"}
FLAGS = ("qwen3-0.6b", "--device", "h100-sxm", "--engine", "vllm", "--engine-version", "0.11.0")


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "llmsizer.cli.main", *args], capture_output=True, text=True,
                          timeout=120)


def test_web_fit_equals_cli(client) -> None:
    r = client.post("/api/v1/fit", json={**BASE, "async_scheduling": True})
    assert r.status_code == 200, r.text[:300]
    cli = json.loads(_cli("fit", *FLAGS, "--async-scheduling", "--json").stdout)
    assert r.json()["speed"]["single_stream_tokens_per_second"] == cli["speed"]["single_stream_tokens_per_second"]
    plain = client.post("/api/v1/fit", json=BASE).json()  # the flag never slows a step (engines.VLLM_ASYNC_OPT_IN)
    assert plain["speed"]["single_stream_tokens_per_second"] <= r.json()["speed"]["single_stream_tokens_per_second"]
    names = {a["name"]: a["why"] for a in r.json()["speed"]["assumptions"]}
    assert "with --async-scheduling" in names["vllm_host_seconds_per_step"]


@pytest.mark.parametrize(("fields", "flags"), [({"engine_version": "0.9.2"}, ("--engine-version", "0.9.2")),
                                               ({"engine": "sglang", "engine_version": None}, ())])
def test_refusals_are_the_cli_line(client, fields: dict[str, object], flags: tuple[str, ...]) -> None:
    body = {k: v for k, v in {**BASE, **fields, "async_scheduling": True}.items() if v is not None}
    r = client.post("/api/v1/fit", json=body)
    assert r.status_code == 400
    argv = ["fit", "qwen3-0.6b", "--device", "h100-sxm", "--engine", str(body["engine"]), *flags, "--async-scheduling"]
    if "engine_version" in body and not flags:
        argv += ["--engine-version", str(body["engine_version"])]
    cli = _cli(*argv)
    assert cli.returncode == 2 and r.json()["detail"] == cli.stderr.strip().removeprefix("llmsizer: error: ")
