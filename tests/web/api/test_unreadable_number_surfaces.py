"""A number written as a word (``zero: yes``) and a count out of range (``micro_batch: -2``) get one message on every
surface: the CLI (``--zero yes``: exit 2), a request file (exit 2), the web API (a 400 naming the field) and the
Python API (``InputError``). Before, ``yes`` for the ZeRO stage was worded three ways -- the CLI gave the range, the
request reader "write e.g. '8', '40k', '1.5M'", Python "write e.g. '8192', '32k', '7B'" (suffix examples for a field
whose largest value is 3) -- and a request file's out-of-range ``micro_batch`` named its own reason ("a count; 2^20
...") where the CLI's ``--micro-batch`` said "devices, nodes, batch or steps".

The one home is ``numbers.unreadable`` (and the one ``COUNT`` range). The truth the message is held to: DeepSpeed's
stages are 0, 1, 2 and 3 (deepspeed/runtime/zero/config.py ``ZeroStageEnum``), and the value named is the one the user
wrote."""

from __future__ import annotations

import sys

import pytest
from web_api_helpers import ROOT, cli_error_line, web_line

import llmsizer
from llmsizer.errors import InputError

pytest.importorskip("httpx")
pytest.importorskip("fastapi")

sys.path.insert(0, str(ROOT / "tests" / "request"))
from helpers import job_yaml  # noqa: E402


def _request_tail(tmp_path, settings: str, field: str) -> str:
    path = tmp_path / "req.yaml"
    path.write_text(job_yaml("training", f"settings: {{{settings}}}"), "utf-8")
    line = cli_error_line("request", "check", str(path))  # exit 2, one line, no traceback
    return line.split(f": settings.{field}: ", 1)[1]


def _cli_line(flag: str, value: str) -> str:
    """The CLI's line after "llmsizer: error: " (the web answers it as its detail, test_web_api_same_as_cli.py)."""
    return cli_error_line("train", "qwen2.5-0.5b", flag, value).removeprefix("llmsizer: error: ")


def _cli_tail(flag: str, value: str) -> str:
    line = _cli_line(flag, value)
    return line.split(f"{flag}: ", 1)[1].removesuffix(" (see --help)")


def test_a_word_for_the_zero_stage_is_one_message_on_every_surface(client, tmp_path) -> None:
    said = _cli_tail("--zero", "yes")
    assert said.startswith("cannot read 'yes' as a number") and "[0, 3]" in said, said  # the value and DeepSpeed's stages
    assert "40k" not in said and "7B" not in said  # no suffix examples for a field whose largest value is 3
    assert _request_tail(tmp_path, "zero: 'yes'", "zero") == said
    with pytest.raises(InputError) as e:
        llmsizer.estimate_training("qwen2.5-0.5b", zero="yes")
    assert str(e.value) == f"zero: {said}"
    r = client.post("/api/v1/train", json={"model": "qwen2.5-0.5b", "zero": "yes"})
    assert r.status_code == 400 and r.json()["field"] == "zero", r.text
    assert r.json()["detail"] == web_line(_cli_line("--zero", "yes"), r.json()["field"]), r.text


def test_an_out_of_range_micro_batch_names_one_reason_on_every_surface(client, tmp_path) -> None:
    said = _cli_tail("--micro-batch", "-2")
    assert said.startswith("-2 is out of range; expected an integer in [1, "), said
    assert _request_tail(tmp_path, "micro_batch: -2", "micro_batch") == said
    with pytest.raises(InputError) as e:
        llmsizer.estimate_training("qwen2.5-0.5b", micro_batch=-2)
    assert str(e.value) == f"micro_batch: {said}"
    r = client.post("/api/v1/train", json={"model": "qwen2.5-0.5b", "micro_batch": -2})
    assert r.status_code == 400 and r.json()["field"] == "micro_batch", r.text
    assert r.json()["detail"] == web_line(_cli_line("--micro-batch", "-2"), r.json()["field"]), r.text


def test_a_count_that_takes_suffixes_says_so_and_reads_them(tmp_path) -> None:
    """Where the parser reads '40k' (a request file's counts, Python's), the message says so -- and it is true: the
    same field written '4k' is read as 4,000 (a test that the hint cannot be a promise the parser breaks)."""
    said = _request_tail(tmp_path, "micro_batch: lots", "micro_batch")
    assert said.startswith("cannot read 'lots' as a number; expected an integer in [1, ") and "'40k' = 40,000" in said
    path = tmp_path / "ok.yaml"
    path.write_text(job_yaml("training", "settings: {micro_batch: 4k}"), "utf-8")
    from llmsizer.request import load_request
    job = load_request(path).jobs[0]
    assert job.settings.micro_batch == 4000
