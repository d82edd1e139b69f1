"""--kv-unified / --no-kv-unified through the real entry point: llama.cpp only (refused elsewhere, one line, exit 2),
stated as a default or as given, printed as -kvu by the auto-fit, and read from a request file's engine_settings section
with the same answer as infer."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from cli_capture import run_cli

ROOT = Path(__file__).resolve().parents[2]
GEMMA = ["gemma-3-4b-it", "--engine", "llamacpp", "--weights", "q4_0", "--context", "8k", "--concurrency", "4"]


def one_line_error(r: subprocess.CompletedProcess) -> str:
    assert r.returncode == 2, (r.returncode, r.stderr)
    assert r.stderr.count("\n") == 1 and "Traceback" not in r.stderr and r.stdout == "", r.stderr
    return r.stderr


def _assumption(data: dict, name: str) -> dict:
    return next(a for a in data["assumptions"] if a["name"] == name)


@pytest.mark.parametrize("args", [
    ["infer", "gemma-3-4b-it", "--engine", "vllm", "--kv-unified"],
    ["infer", "gemma-3-4b-it", "--engine", "sglang", "--no-kv-unified"],
    ["fit", "gemma-3-4b-it", "--device", "h100-sxm", "--engine", "vllm", "--kv-unified"],
    # (no engine named: llama.cpp's setting implies llama.cpp, tests/cli/test_implied_engine.py)
    ["recommend", "gemma-3-4b-it", "--engine", "vllm", "--kv-unified"],
])
def test_other_engines_refuse_it(args: list[str]) -> None:
    # the flag, not the Python name (errors.FieldError rendered by the CLI, probe4b finding 3)
    assert "--kv-unified applies to engine llamacpp" in one_line_error(run_cli(*args))


def test_training_refuses_it() -> None:
    assert "--train" in one_line_error(run_cli("recommend", "llama-3.1-8b", "--train", "--tokens", "1B",
                                               "--kv-unified"))


def test_default_and_given_are_stated() -> None:
    default, split, uni = (json.loads(run_cli("infer", *GEMMA, *extra, "--json").stdout)
                           for extra in ([], ["--no-kv-unified"], ["--kv-unified"]))
    a = _assumption(default, "kv_unified")
    assert a["value"] is False and a["default"] is True and "server.cpp:156-161" in a["why"]
    b = _assumption(split, "kv_unified")
    assert b["value"] is False and b["default"] is False  # given, though equal to the default
    c = _assumption(uni, "kv_unified")
    assert c["value"] is True and c["default"] is False
    kv = {name: next(i for i in d["items"] if i["name"] == "kv_cache")["bytes"]
          for name, d in (("default", default), ("split", split), ("uni", uni))}
    cell = 2 * 4 * 256 * 2  # Gemma 3 4B: 4 KV heads x 256, f16 K and V
    assert kv["default"] == kv["split"] == (5 * 4 * 8192 + 29 * 4 * 1536) * cell
    assert kv["uni"] == (5 * 32768 + 29 * 4608) * cell
    text = run_cli("infer", *GEMMA).stdout
    assert "kv_unified=False (default)" in text


def test_auto_fit_prints_kvu() -> None:
    base = ["fit", "gemma-3-4b-it", "--device", "rtx-4090", "--weights", "q4_0", "--concurrency", "4", "--auto",
            "--json"]
    split = json.loads(run_cli(*base).stdout)
    uni = json.loads(run_cli(*base, "--kv-unified").stdout)
    assert "-kvu" not in split["flags"] and "-np 4" in split["command"]
    assert "-np 4 -kvu" in uni["command"]


REQUEST = """\
version: 1
title: chat
team: t
contact: t@example.com
jobs:
  - name: chat
    kind: inference
    model: {{name: gemma-3-4b-it}}
    engine: {engine}
    quantization: q4_0
    engine_settings: {{kv_unified: true}}
    resources: {{device: rtx-4090, count: 1}}
    traffic: {{concurrency: {{typical: 4, peak: 4}}, context: {{typical: 8k, peak: 8k}}}}
"""


def test_request_engine_settings_kv_unified(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text(REQUEST.format(engine="vllm"))
    r = run_cli("request", "check", str(bad))
    assert r.returncode != 0 and "engine_settings.kv_unified: applies to engine llamacpp, not vllm" in r.stderr
    good = tmp_path / "good.yaml"
    good.write_text(REQUEST.format(engine="llamacpp"))
    assert run_cli("request", "check", str(good)).returncode == 0
    plan = json.loads(run_cli("plan", str(good), "--json").stdout)
    (job,) = plan["jobs"]
    kv_plan = next(i for i in job["memory_estimate"]["items"] if i["name"] == "kv_cache")["bytes"]
    infer = json.loads(run_cli("infer", *GEMMA, "--kv-unified", "--json").stdout)
    assert kv_plan == next(i for i in infer["items"] if i["name"] == "kv_cache")["bytes"]
    assert _assumption(job["memory_estimate"], "kv_unified")["value"] is True
