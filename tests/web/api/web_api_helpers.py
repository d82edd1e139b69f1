"""Helpers of the web API tests: the real CLI in a subprocess, to compare the API with."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from cli_capture import run_cli  # the real CLI in a subprocess (re-exported)

ROOT = Path(__file__).resolve().parents[3]
SRC = str(ROOT / "src")
sys.path.insert(0, str(ROOT / "tests" / "readers"))  # readers_helpers: tiny real GGUF / safetensors files


def run_cli_json(*args: str) -> dict:
    """``llmsizer ARGS --json``, which must answer (exit 0), parsed."""
    done = run_cli(*args, "--json")
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def cli_error_line(*args: str) -> str:
    """The one line ``llmsizer ARGS`` refuses bad input with (exit 2, no traceback), without its prefix."""
    done = run_cli(*args)
    assert done.returncode == 2, (args, done.returncode, done.stdout[-300:])
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in done.stderr, done.stderr
    return lines[0].removeprefix("llmsizer: error: ")
