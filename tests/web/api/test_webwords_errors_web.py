"""The web's errors (task `webwords`): one rule for every 400, whatever raised it (argparse, a value's reader, a
FieldError, an error found after parsing): ``detail`` is exactly the CLI's line for the same input, options named
as the CLI names them (but argparse's where-prefix "argument --context: ", which the web writes "field 'context': ",
probe24 C4), and ``field`` is the body's key for the input at fault (API.md "Errors"). Before, a
FieldError's flag was written as the body's key (``n_gpu_layers applies ...``) while every other error kept the
CLI's flags (``--tp 2 does not divide``, ``give it with --memory``, ``argument --context:``): two rules at once.
The request endpoints answer every error of the file with ``errors``, one line or several."""

from __future__ import annotations

import pytest
from web_api_helpers import cli_error_line, web_line

pytest.importorskip("httpx")
pytest.importorskip("fastapi")

M = "llama-3.1-8b"
CASES = [  # (route, body beside the model, the field at fault, the same input on the command line)
    # FieldErrors of the estimate
    ("infer", {"device": "cpu", "n_gpu_layers": 5}, "n_gpu_layers", ("--device", "cpu", "--n-gpu-layers", "5")),
    ("fit", {"device": "h100", "count": 3, "tp": 2}, "tp", ("--device", "h100", "--count", "3", "--tp", "2")),
    ("fit", {"device": "h100", "count": 3, "tensor_parallel": 2}, "tensor_parallel",
     ("--device", "h100", "--count", "3", "--tp", "2")),
    ("infer", {"max_num_seqs": 8}, "max_num_seqs", ("--max-num-seqs", "8")),
    ("infer", {"device": "cpu", "max_num_seqs": 8}, "max_num_seqs", ("--device", "cpu", "--max-num-seqs", "8")),
    # made FieldErrors here (they named Python's fields on the CLI)
    ("fit", {"device": "rtx-4090", "count": 2, "tensor_split": "1,1,1"}, "tensor_split",
     ("--device", "rtx-4090", "--count", "2", "--tensor-split", "1,1,1")),
    ("train", {"gpus": 8, "tp": 3}, "gpus", ("--gpus", "8", "--tp", "3")),
    ("train", {"gpus": 8, "tensor_parallel": 3}, "gpus", ("--gpus", "8", "--tp", "3")),
    # argparse and the value readers: their words, "argument --context:" included
    ("infer", {"context": "x"}, "context", ("--context=x",)),
    ("recommend", {"max_cost": "$5/h"}, "max_cost", ("--max-cost=$5/h",)),
    # a hint naming options to give instead
    ("infer", {"rank": 8}, "rank", ("--rank", "8")),
]


@pytest.mark.parametrize(("route", "body", "field", "argv"), CASES,
                         ids=[f"{c[0]}-{'-'.join(c[1])}" for c in CASES])
def test_every_web_error_is_the_clis_line(client, route, body, field, argv) -> None:
    r = client.post(f"/api/v1/{route}", json={"model": M, **body})
    assert r.status_code == 400, r.text
    problem = r.json()
    assert problem["field"] == field, problem
    assert problem["detail"] == web_line(cli_error_line(route, M, *argv), field), problem  # the where-prefix names the field


def test_a_training_hint_keeps_the_clis_options(client) -> None:
    """`fit --train --lora 8`: "did you mean '--method lora --rank N'", the CLI's spelling, on the web too."""
    r = client.post("/api/v1/fit", json={"model": M, "device": "h100-sxm", "train": True, "lora": 8})
    line = cli_error_line("fit", M, "--device", "h100-sxm", "--train", "--lora", "8")
    assert r.status_code == 400 and r.json()["field"] == "lora" and r.json()["detail"] == line, r.json()
    assert "did you mean '--method lora --rank N'?" in line, line


REQUEST = """jobs:
  - name: chat
    kind: inference
    model: {name: llama-3.1-8b}
    resources: {device: h100, count: 3}
    tensor_parallel: 2
    traffic:
      concurrency: 4
      context: 2k
"""


@pytest.mark.parametrize("path", ["/api/v1/plan", "/api/v1/request/check"])
def test_a_one_line_request_error_found_while_planning_has_errors(client, tmp_path, path) -> None:
    """count 3, tensor_parallel 2: found once planned, one line; the 400 has ``errors`` as a reader's error has,
    and its line is the CLI's for the same file."""
    f = tmp_path / "r.yaml"
    f.write_text(REQUEST)
    line = cli_error_line("request", "check", str(f))
    r = client.post(path, json={"request": REQUEST, "filename": "r.yaml"})
    assert r.status_code == 400, r.text
    p = r.json()
    assert p["field"] == "request" and p["errors"] == [p["detail"]], p
    assert "r.yaml" + line.removeprefix(str(f)) == p["detail"], (p, line)
    assert "tensor_parallel 2 does not divide the 3 devices" in line


@pytest.mark.parametrize("path", ["/api/v1/plan", "/api/v1/request/check"])
def test_max_num_seqs_without_engine_on_h100_is_a_valid_request(client, path) -> None:
    """The CLI's rule in a request (before: refused, 'not the default engine; set engine')."""
    text = REQUEST.replace("count: 3}", "count: 1}").replace("    tensor_parallel: 2\n",
                                                              "    engine_settings: {max_num_seqs: 8}\n")
    r = client.post(path, json={"request": text, "filename": "r.yaml"})
    assert r.status_code == 200, r.text
