"""Error lines the CLI and the web API word the same (probe13 D8, D10): an unknown model's name echoed cut, a
llama.cpp --tensor-split error named by its flag, and a request with several errors answered first with the
CLI's first line."""

from __future__ import annotations

import pytest
from web_api_helpers import cli_error_line, run_cli, web_line

from llmsizer.inputs import SHOWN_MODEL_NAME


@pytest.mark.parametrize("name", ["a/" * 1000, "x" * 3000])
def test_a_long_unknown_model_name_is_cut_in_the_error(client, name) -> None:
    line = cli_error_line("infer", name)
    # before: the 2,000-character name echoed whole (a 2,069-byte line)
    assert line.startswith("unknown model ") and "..." in line and len(line) < SHOWN_MODEL_NAME + 120
    r = client.post("/api/v1/infer", json={"model": name})
    assert r.status_code == 400 and r.json()["detail"] == web_line(line, r.json()["field"])


def test_a_short_unknown_model_name_is_shown_whole(client) -> None:
    name = "meta-llama/Llama-9.9-123B-Instruct-nonexistent-variant"  # a Hub id of ordinary length
    line = cli_error_line("infer", name)
    assert line.startswith(f"unknown model {name!r}")


def test_tensor_split_error_names_the_flag(client) -> None:
    line = cli_error_line("infer", "llama-3.1-8b", "--tensor-split", "0")
    # before: "tensor_split: expected ..." (the Python name, not the flag the user typed)
    assert line.startswith("--tensor-split: expected non-negative proportions"), line
    r = client.post("/api/v1/infer", json={"model": "llama-3.1-8b", "tensor_split": "0"})
    assert r.status_code == 400 and r.json()["detail"] == web_line(line, r.json()["field"])


MANY_ERRORS = """\
extra_key: 1
version: 1
jobs:
  - 5
  - name: chat
    kind: inference
    model: llama-3.1-8b
    traffic: {concurency: 4}
"""


@pytest.mark.parametrize("path", ["/api/v1/plan", "/api/v1/request/check"])
def test_several_errors_first_line_is_the_clis(client, tmp_path, path) -> None:
    (tmp_path / "many.yaml").write_text(MANY_ERRORS)
    cli = run_cli("plan", "many.yaml", cwd=tmp_path)
    lines = [ln.removeprefix("llmsizer: error: ").removesuffix(" (see --help)") for ln in cli.stderr.splitlines()]
    assert cli.returncode == 2 and len(lines) >= 3, cli.stderr
    r = client.post(path, json={"request": MANY_ERRORS, "filename": "many.yaml"})
    assert r.status_code == 400
    assert r.json()["detail"] == lines[0] and r.json()["errors"] == lines
