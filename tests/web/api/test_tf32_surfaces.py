"""``tf32`` (specs/training.py; estimate/device.py fp32_matmul_peak) reaches the one duration the same way from the
CLI and the web API (the calculator's TF32 checkbox), and a value that is not a boolean is one line (exit 2 from the
Python API, a 4xx on the web)."""

from __future__ import annotations

import pytest
from web_api_helpers import ROOT, cli_error_line, run_cli_json

from llmsizer.errors import InputError
from llmsizer.estimate.training import estimate_training

pytest.importorskip("httpx")
pytest.importorskip("fastapi")

RUN = {"method": "full", "precision": "fp32", "micro_batch": 1, "seq_len": 2048, "device": "a100-sxm-80gb",
       "tokens": "10M"}
FLAGS = ["--method", "full", "--precision", "fp32", "--batch", "1", "--seq", "2048", "--device", "a100-sxm-80gb",
         "--tokens", "10M"]
A100_TF32 = 156e12  # NVIDIA A100 datasheet: Peak TF32 Tensor Core 156 TF (dense)


def test_tf32_through_cli_and_web(client) -> None:
    cli = run_cli_json("train", "qwen2.5-0.5b", *FLAGS, "--tf32")
    web = client.post("/api/v1/train", json={"model": "qwen2.5-0.5b", **RUN, "tf32": True})
    assert web.status_code == 200, web.text
    assert cli["duration"]["peak_flops"] == web.json()["duration"]["peak_flops"] == A100_TF32
    assert cli["duration"]["seconds"] == web.json()["duration"]["seconds"]
    off = client.post("/api/v1/train", json={"model": "qwen2.5-0.5b", **RUN})
    assert off.status_code == 200 and off.json()["duration"]["peak_key"] == "fp32"


@pytest.mark.parametrize(("value", "yaml"), [("yes", '"yes"'), (1, "1")])
def test_a_tf32_that_is_not_a_boolean_is_one_message(client, tmp_path, value, yaml) -> None:
    """The web, a request file (``llmsizer plan``: the CLI's line; --tf32 itself takes no value) and the Python API
    refuse a tf32 that is not a boolean with the same message after the name of the field (inputs.not_true_or_false):
    the web names ``field 'tf32'``, the request file its path ``settings.tf32``, Python ``tf32``. Before, they were
    worded three ways ("true or false expected (an on/off option), got 'yes'", "must be true or false, got 'yes'",
    "tf32 must be true or false, got 'yes'")."""
    import sys
    sys.path.insert(0, str(ROOT / "tests" / "request"))
    from helpers import job_yaml

    req = tmp_path / "req.yaml"
    req.write_text(job_yaml("training", f"settings: {{tf32: {yaml}}}"), "utf-8")
    line = cli_error_line("plan", str(req))
    assert line.endswith(": settings.tf32: must be true or false, got " + repr(value)), line
    said = line.rsplit(": settings.tf32: ", 1)[1]
    web = client.post("/api/v1/train", json={"model": "qwen2.5-0.5b", **RUN, "tf32": value})
    assert web.status_code == 400 and web.json()["field"] == "tf32"
    assert web.json()["detail"] == f"field 'tf32': {said}"
    with pytest.raises(InputError) as e:
        estimate_training("qwen2.5-0.5b", tf32=value)
    assert str(e.value) == f"tf32: {said}"
