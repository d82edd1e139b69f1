"""A memory size with no unit below 1 MiB ("--memory 24": 24 bytes) is a forgotten unit: every command, the web API
and request files refuse it with the same one line, exit 2 / HTTP 400, and name the likely reading (24GiB). A bare
number of 1 MiB or more stays bytes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cli_capture import run_cli

SAID = "'24' has no unit (a bare number is bytes); did you mean 24GiB?"


@pytest.mark.parametrize("args, flag", [
    (["infer", "llama-3.1-8b", "--memory", "24"], "--memory"),
    (["train", "llama-3.1-8b", "--memory", "24"], "--memory"),
    (["fit", "llama-3.1-8b", "--device", "rtx-4090", "--memory", "24"], "--memory"),
    (["fit", "qwen2.5-7b", "--device", "rtx-4090", "--engine", "llamacpp", "--auto", "--free", "22GiB,24",
      "--count", "2"], "--free"),
    (["fit", "qwen2.5-7b", "--device", "rtx-4090", "--engine", "llamacpp", "--host-memory", "24"], "--host-memory"),
])
def test_every_command_refuses_a_unitless_memory_below_1_mib(args: list[str], flag: str) -> None:
    r = run_cli(*args)
    assert r.returncode == 2 and r.stdout == "" and r.stderr.count("\n") == 1, (r.returncode, r.stderr)
    assert f"argument {flag}: " in r.stderr and SAID in r.stderr and "Traceback" not in r.stderr


def test_a_unitless_size_of_1_mib_or_more_is_bytes() -> None:
    r = run_cli("infer", "llama-3.1-8b", "--memory", "25769803776", "--json")  # 24 GiB written in bytes
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["details"]["device_memory"] == 24 * 2**30


def test_the_web_api_says_the_same() -> None:
    from fastapi.testclient import TestClient

    from llmsizer.web.app import create_app

    c = TestClient(create_app())
    for memory in ("24", 24):
        r = c.post("/api/v1/infer", json={"model": "llama-3.1-8b", "memory": memory})
        assert r.status_code == 400 and SAID in r.json()["detail"], r.text


REQUEST = """version: 1
team: Chat team
jobs:
  - name: chat
    kind: inference
    model: {name: qwen2.5-0.5b}
    engine: vllm
    traffic: {concurrency: {typical: 2}, context: {typical: 2k}}
    service: {duration: 7 days}
    resources: {device: l40, count: 1, memory: MEMORY}
"""


@pytest.mark.parametrize("memory", ["24", '"24"'])
def test_a_request_file_says_the_same_with_its_line(tmp_path: Path, memory: str) -> None:
    req = tmp_path / "req.yaml"
    req.write_text(REQUEST.replace("MEMORY", memory))
    r = run_cli("plan", str(req), "-o", str(tmp_path / "r.md"))
    assert r.returncode == 2 and r.stderr.count("\n") == 1, r.stderr
    assert f"{req}:10: job 'chat' (inference): resources.memory: {SAID}" in r.stderr
    assert not (tmp_path / "r.md").exists()
