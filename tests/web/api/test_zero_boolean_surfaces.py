"""``zero`` (the DeepSpeed ZeRO stage) given as a boolean is refused with one message on every surface: a request
file (``llmsizer request check`` / ``plan``, YAML or JSON: exit 2), the web API (``/api/v1/train``, ``/fit`` with
``train``, and the request routes: a 400 naming the field) and the Python API (``InputError``). Before, it was worded
three ways: "must be a whole number, got 'true'" (the request reader, quoting the boolean as text), "a value expected
(e.g. what --zero takes on the command line), got true; true/false are for on/off options" (the web) and "expected an
integer in [0, 3] (...), got True" (Python); and the web took ``"zero": false`` as "not given" and answered.

The one home is ``numbers.not_a_boolean`` (through ``check_number``), with the range of the CLI's ``--zero``
(``numbers.ZERO_STAGE``). The truth the message is held to: DeepSpeed's stages are 0, 1, 2 and 3
(deepspeed/runtime/zero/config.py ``ZeroStageEnum``: disabled = 0, optimizer_states = 1, gradients = 2, weights = 3),
and the value named is the one the user wrote."""

from __future__ import annotations

import json
import sys

import pytest
from web_api_helpers import ROOT, cli_error_line

import llmsizer
from cli_capture import run_cli
from llmsizer.errors import InputError
from llmsizer.specs.training import TrainingWorkload

pytest.importorskip("httpx")
pytest.importorskip("fastapi")

sys.path.insert(0, str(ROOT / "tests" / "request"))
from helpers import job_yaml  # noqa: E402

DEEPSPEED_STAGES = "[0, 3]"  # ZeroStageEnum's members, 0..3


def _request_line(tmp_path, value: bool, suffix: str, command: str) -> str:
    text = job_yaml("training", f"settings: {{zero: {str(value).lower()}}}")
    path = tmp_path / f"req{suffix}"
    if suffix == ".json":
        import yaml
        path.write_text(json.dumps(yaml.safe_load(text)), "utf-8")
    else:
        path.write_text(text, "utf-8")
    line = cli_error_line(*command.split(), str(path))  # exit 2, one line, no traceback
    assert line.startswith(f"{path}:"), line
    return line


@pytest.mark.parametrize("value", [True, False])
def test_a_boolean_zero_is_one_message_on_every_surface(client, tmp_path, value: bool) -> None:
    spelled = "true" if value else "false"
    # the request file through the real CLI, YAML and JSON, both commands that read it
    lines = [_request_line(tmp_path, value, suffix, command)
             for suffix in (".yaml", ".json") for command in ("request check", "plan")]
    tails = {line.split(": settings.zero: ", 1)[1] for line in lines}
    assert len(tails) == 1, lines
    said = tails.pop()
    # what it says, against DeepSpeed's stages and the value as written (not against our own output)
    assert DEEPSPEED_STAGES in said and said.endswith(f"got the boolean {spelled}"), said
    assert "job 'ft' (training)" in lines[0]

    # the web: /train, /fit with train, and the request file's routes
    body = {"model": "qwen2.5-0.5b", "method": "full", "zero": value}
    for route, extra in (("/api/v1/train", {}), ("/api/v1/fit", {"device": "h100-sxm", "train": True})):
        r = client.post(route, json={**body, **extra})
        assert r.status_code == 400, (route, r.text)
        assert r.json()["detail"] == f"field 'zero': {said}" and r.json()["field"] == "zero", r.text
    text = job_yaml("training", f"settings: {{zero: {spelled}}}")
    for route in ("/api/v1/request/check", "/api/v1/plan"):
        r = client.post(route, json={"request": text})
        assert r.status_code == 400, (route, r.text)
        assert r.json()["detail"].endswith(f": settings.zero: {said}") and r.json()["field"] == "request", r.text

    # the Python API: the estimator, fit and the workload itself
    for call in (lambda: llmsizer.estimate_training("qwen2.5-0.5b", zero=value),
                 lambda: TrainingWorkload(zero=value)):
        with pytest.raises(InputError) as e:
            call()
        assert str(e.value) == f"zero: {said}"


def test_a_stage_in_range_still_answers_everywhere(client, tmp_path) -> None:
    """The refusal is of the boolean, not of the field: zero 0 and 2 answer on the three surfaces (a test that the
    message above cannot pass by refusing everything)."""
    for value in (0, 2):
        path = tmp_path / f"ok{value}.yaml"
        path.write_text(job_yaml("training", f"settings: {{zero: {value}}}"), "utf-8")
        assert run_cli("request", "check", str(path)).returncode == 0
        r = client.post("/api/v1/train", json={"model": "qwen2.5-0.5b", "zero": value, "gpus": 2})
        assert r.status_code == 200, r.text
        py = llmsizer.estimate_training("qwen2.5-0.5b", zero=value, gpus=2)
        assert py.to_dict()["totals"]["device"]["bytes"] == r.json()["totals"]["device"]["bytes"]


@pytest.mark.parametrize("value", [True, False])
def test_a_boolean_micro_batch_is_the_webs_line_in_python(client, value: bool) -> None:
    """The run's counts (specs/training.py ``_COUNTS``) had a wording of their own for a boolean ("micro_batch must be
    a positive integer, got True"); they now reach the same one line as zero (numbers.not_a_boolean) with the CLI's
    --batch range. (A request file's micro_batch still names its own reason for the same bounds: noted, not done.)"""
    r = client.post("/api/v1/train", json={"model": "qwen2.5-0.5b", "micro_batch": value})
    assert r.status_code == 400 and r.json()["field"] == "micro_batch", r.text
    said = r.json()["detail"].removeprefix("field 'micro_batch': ")
    assert said.endswith(f"got the boolean {str(value).lower()}") and "[1, " in said, said
    with pytest.raises(InputError) as e:
        llmsizer.estimate_training("qwen2.5-0.5b", micro_batch=value)
    assert str(e.value) == f"micro_batch: {said}"
