"""A flag's value that starts with "-" and a digit ("-ts -1,2") reaches the flag's own check: one line naming the
flag and the bad element, exit 2, instead of argparse's "expected one argument" (Python 3.11 reads only "-1" and
"-1.5" as values). The same on the web API, which parses with the CLI's parser."""

from __future__ import annotations

import pytest

from cli_capture import run_cli

SPLIT = ["infer", "llama-3.1-8b", "--engine", "llamacpp", "--gpus", "2"]


@pytest.mark.parametrize("args, said", [
    ([*SPLIT, "-ts", "-1,2"], "argument --tensor-split/-ts: -1 is out of range"),
    ([*SPLIT, "--tensor-split", "-.5,2"], "argument --tensor-split/-ts: -.5 is out of range"),
    ([*SPLIT, "-ts", "3,-1"], "argument --tensor-split/-ts: -1 is out of range"),
    (["fit", "qwen2.5-7b", "--device", "rtx-4090", "--engine", "llamacpp", "--auto", "--count", "2",
      "--free", "-1GiB,2GiB"], "argument --free: -1GiB is out of range; expected an integer in [1, 2^60]"),
    # a negative number is read and refused by its range, in the words written (it was "cannot read")
    (["infer", "llama-3.1-8b", "--context", "-8k"], "argument --context: -8k is out of range; expected an integer in "
                                                    "[1, 2,147,483,648]"),
    (["train", "llama-3.1-8b", "--tokens", "-1"], "argument --tokens: -1 is out of range; expected an integer in [1, "),
    (["fit", "llama-3.1-8b", "--device", "h100", "--memory", "-80GiB"], "argument --memory: -80GiB is out of range"),
])
def test_a_value_starting_with_minus_is_checked_by_its_flag(args: list[str], said: str) -> None:
    r = run_cli(*args)
    assert r.returncode == 2 and r.stdout == "" and r.stderr.count("\n") == 1, r.stderr
    assert said in r.stderr and "expected one argument" not in r.stderr, r.stderr


def test_an_option_after_a_flag_is_still_a_missing_value() -> None:
    r = run_cli("infer", "llama-3.1-8b", "--engine", "--json")
    assert r.returncode == 2 and "argument --engine: expected one argument" in r.stderr


def test_the_web_api_says_the_same() -> None:
    from fastapi.testclient import TestClient

    from llmsizer.web.app import create_app

    r = TestClient(create_app()).post("/api/v1/infer", json={"model": "llama-3.1-8b", "engine": "llamacpp",
                                                             "gpus": 2, "tensor_split": "-1,2"})
    assert r.status_code == 400 and "-1 is out of range" in r.json()["detail"], r.text
