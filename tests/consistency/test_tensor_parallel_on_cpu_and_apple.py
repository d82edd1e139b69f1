"""A CPU or an Apple chip runs no tensor parallelism (estimate/device.py ``one_replica_per_device``: several of them
serve as replicas, one model each). ``fit`` refused ``--tp 2`` there while ``infer``, the web API and
``estimate_inference`` answered it with per-device memory halved (exit 0); now every surface refuses it as the
tensor_parallel field's error, with one line."""

from __future__ import annotations

import pytest

import llmsizer
from cli_capture import run
from llmsizer.errors import FieldError

DEVICES = ("apple-m3-max-36gb", "aws-m7i.4xlarge", "cpu")


@pytest.mark.parametrize("device", DEVICES)
def test_infer_and_fit_refuse_tp_on_a_cpu_or_apple_chip(device: str) -> None:
    lines = []
    for cmd in (("infer", "qwen2.5-7b", "--engine", "transformers"), ("fit", "qwen2.5-7b", "--engine", "transformers")):
        code, out, err = run(*cmd, "--device", device, "--tp", "2")
        assert code == 2 and out == "", (cmd, out)
        line, = err.strip().splitlines()
        assert line.startswith("llmsizer: error: --tp 2: ") and "runs no tensor parallelism" in line
        lines.append(line)
    assert lines[0] == lines[1]  # the same line from infer and fit
    with pytest.raises(FieldError) as e:
        llmsizer.estimate_inference("qwen2.5-7b", engine="transformers", tensor_parallel=2, device=device)
    assert e.value.field == "tensor_parallel"


def test_a_gpu_still_takes_it() -> None:
    code, out, _ = run("infer", "qwen2.5-7b", "--engine", "transformers", "--device", "h100-sxm", "--tp", "2")
    assert code == 0 and "for each of 2 tensor-parallel devices" in out


def test_the_web_api_answers_the_same_line(tmp_path) -> None:
    pytest.importorskip("fastapi")
    from fastapi.testclient import TestClient

    from llmsizer.web.app import create_app

    r = TestClient(create_app()).post("/api/v1/infer", json={"model": "qwen2.5-7b", "engine": "transformers",
                                                              "device": "apple-m3-max-36gb", "tensor_parallel": "2"})
    assert r.status_code == 400 and r.json()["field"] == "tensor_parallel"
    assert "runs no tensor parallelism" in r.json()["detail"]


def test_fit_names_the_tp_flag_when_it_does_not_divide_the_count() -> None:
    code, _, err = run("fit", "qwen2.5-7b", "--device", "h100-sxm", "--count", "2", "--tp", "4")
    assert code == 2 and err.startswith("llmsizer: error: --tp 4 does not divide the 2 devices")


@pytest.mark.parametrize("device", ["apple-m2-ultra-192gb", "intel-xeon-platinum-8488c"])
def test_estimate_speed_refuses_it_too(device: str) -> None:
    """The public speed function answered tp=2 on an Apple chip (84.4 tokens/s) and a CPU: the same rule."""
    from llmsizer.catalog.hardware import find_hardware
    from llmsizer.catalog.models import find
    from llmsizer.estimate.speed import estimate_speed

    with pytest.raises(FieldError) as e:
        estimate_speed(find("qwen2.5-7b").spec(), find_hardware(device), 2, tensor_parallel=2)
    assert e.value.field == "tensor_parallel"
