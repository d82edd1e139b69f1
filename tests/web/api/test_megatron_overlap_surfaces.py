"""Megatron's ``overlap_grad_reduce`` / ``overlap_param_gather`` (specs/training.py; formulas/training_time.py eq.
(7g)) give one duration from the CLI, the web API (the training tab's advanced boxes, generated from the flags) and
Python, and outside Megatron-Core's DDP the same one-line refusal on each."""

from __future__ import annotations

import pytest
from web_api_helpers import cli_error_line, run_cli_json

from llmsizer.catalog.hardware import builtin_catalog
from llmsizer.catalog.models import find
from llmsizer.estimate.duration import training_duration_for

pytest.importorskip("httpx")
pytest.importorskip("fastapi")

RUN = {"method": "full", "precision": "megatron-bf16", "zero": 1, "gpus": 8, "batch": 1, "seq": 4096,
       "grad_accumulation": 4, "grad_checkpointing": "full", "device": "h100-sxm", "tokens": "1B"}
FLAGS = ["--method", "full", "--precision", "megatron-bf16", "--zero", "1", "--gpus", "8", "--batch", "1", "--seq",
         "4096", "--grad-accumulation", "4", "--grad-checkpointing", "full", "--device", "h100-sxm", "--tokens", "1B"]


def test_overlap_through_cli_web_and_python(client) -> None:
    cli = run_cli_json("train", "llama-3.1-8b", *FLAGS, "--overlap-grad-reduce", "--overlap-param-gather")
    web = client.post("/api/v1/train", json={"model": "llama-3.1-8b", **RUN, "overlap_grad_reduce": True,
                                             "overlap_param_gather": True})
    assert web.status_code == 200, web.text
    py = training_duration_for(find("llama-3.1-8b").spec(), builtin_catalog().devices["h100-sxm"], 8, 1e9,
                               {"method": "full", "precision": "megatron-bf16", "zero": 1, "micro_batch": 1,
                                "seq_len": 4096, "grad_accumulation": 4, "grad_checkpointing": "full",
                                "overlap_grad_reduce": True,
                                "overlap_param_gather": True})
    assert cli["duration"]["seconds"] == web.json()["duration"]["seconds"] == pytest.approx(py.seconds, rel=1e-12)
    off = client.post("/api/v1/train", json={"model": "llama-3.1-8b", **RUN})
    assert off.status_code == 200 and off.json()["duration"]["seconds"] > cli["duration"]["seconds"]


def test_refused_outside_megatron_on_cli_and_web(client) -> None:
    flags = ["--precision", "bf16-mixed", "--gpus", "8", "--overlap-grad-reduce"]
    line = cli_error_line("train", "llama-3.1-8b", *flags)
    assert "--overlap-grad-reduce is a Megatron-Core DDP option" in line
    web = client.post("/api/v1/train", json={"model": "llama-3.1-8b", "precision": "bf16-mixed", "gpus": 8,
                                             "overlap_grad_reduce": True})
    assert web.status_code == 400 and web.json()["field"] == "overlap_grad_reduce"
    assert "is a Megatron-Core DDP option" in web.json()["detail"]
