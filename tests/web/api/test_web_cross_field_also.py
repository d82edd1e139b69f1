"""probe28 N1: a cross-field error names every field it is about (errors.FieldError ``also``); the web's problem
answer carries them as ``also`` beside ``field``, each as the body's own key, so the page marks each one. The
message is the CLI's line for the same input (a separate ``llmsizer`` process)."""

from __future__ import annotations

import subprocess
import sys

import pytest


def _cli_line(*args: str) -> str:
    r = subprocess.run([sys.executable, "-m", "llmsizer.cli.main", *args], capture_output=True, text=True,
                       timeout=60)
    assert r.returncode == 2, r.stderr
    return r.stderr.strip().removeprefix("llmsizer: error: ")


@pytest.mark.parametrize(("body", "flags", "also"), [
    ({"pp": 3}, ("--pp", "3"), ["tp", "pp", "context_parallel"]),
    ({"context_parallel": 3}, ("--context-parallel", "3"), ["tp", "pp", "context_parallel"]),
    ({"tensor_parallel": 3}, ("--tensor-parallel", "3"), ["tensor_parallel", "pp", "context_parallel"]),
])
def test_a_cross_field_error_names_every_field(client, body: dict[str, int], flags: tuple[str, ...],
                                               also: list[str]) -> None:
    r = client.post("/api/v1/train", json={"model": "llama-3.1-8b", "gpus": 8, **body})
    assert r.status_code == 400
    p = r.json()
    assert p["detail"] == _cli_line("train", "llama-3.1-8b", "--gpus", "8", *flags)
    assert p["field"] == "gpus" and p["also"] == also  # the body's key where it gave one (tensor_parallel)


def test_a_one_field_error_has_no_also(client) -> None:
    r = client.post("/api/v1/infer", json={"model": "llama-3.1-8b", "context": -5})
    assert r.status_code == 400 and "also" not in r.json()
