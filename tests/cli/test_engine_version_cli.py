"""`fit --engine-version` through the real entry point: the release's host-work rule (estimate/engines.py
step_host) shows in the assumptions and moves the decode step; bad input is one line, exit 2."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cli_capture import run_cli
from llmsizer.estimate import efficiency as E

ROOT = Path(__file__).resolve().parents[2]
FIT = ["fit", "qwen3-0.6b", "--device", "h100-sxm", "--engine", "vllm", "--context", "640", "--output-tokens", "128"]


def _speed(*extra: str) -> dict:
    r = run_cli(*FIT, *extra, "--json")
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)["speed"]


def test_the_release_picks_the_rule_and_says_so() -> None:
    """Default (current release): the V1 host step bounds a 0.6B model's step on an H100; 0.13 (synchronous
    scheduling, not established): the device step, named and warned, streamed at Hopper's SM limit for that release;
    0.5 (V0): the device step plus V0's, as 0.6 (V0 with asynchronous output) with its own serial step."""
    now, sync, v0 = _speed(), _speed("--engine-version", "0.13"), _speed("--engine-version", "0.5")
    v06 = _speed("--engine-version", "0.6")
    host = next(a for a in now["assumptions"] if a["name"] == "vllm_host_seconds_per_step")
    assert host["value"] == E.VLLM_V1_HOST_STEP_SECONDS.expected
    assert now["decode"]["seconds"] == pytest.approx(E.VLLM_V1_HOST_STEP_SECONDS.expected)
    assert now["decode"]["bound"] == "host"
    assert any("not established" in w for w in sync["warnings"])
    assert sync["decode"]["seconds"] < 1e-3
    assert any(a["name"] == "serving_sm_stream_limit" for a in sync["assumptions"])
    assert v0["decode"]["seconds"] - E.VLLM_V0_STEP_SECONDS.expected == pytest.approx(
        v06["decode"]["seconds"] - E.VLLM_V06_STEP_SECONDS.expected)


@pytest.mark.parametrize(("extra", "says"), [
    (["--engine-version", "latest"], "engine_version must look like"),
    (["--engine-version", "0.5e3"], "engine_version must look like"),  # was read as 0.53
    (["--engine-version", "0.13", "--train"], "--engine-version applies to serving"),
])
def test_bad_input_is_one_line_exit_2(extra: list[str], says: str) -> None:
    r = run_cli(*(FIT if "--train" not in extra else FIT[:4]), *extra)
    assert r.returncode == 2 and r.stdout == "" and "Traceback" not in r.stderr, r.stderr
    assert r.stderr.count("\n") == 1 and says in r.stderr, r.stderr


def test_an_engine_without_releases_is_refused() -> None:
    r = run_cli("fit", "qwen3-0.6b", "--device", "rtx-4090", "--engine", "llamacpp", "--engine-version", "0.19")
    assert r.returncode == 2 and "--engine-version applies to engine vllm or sglang, not llamacpp" in r.stderr and r.stderr.count("\n") == 1, r.stderr
    r = run_cli("fit", "qwen3-0.6b", "--device", "rtx-4090", "--engine", "llamacpp", "--auto", "--engine-version", "0.19")
    assert r.returncode == 2 and "--engine-version" in r.stderr and r.stderr.count("\n") == 1, r.stderr
