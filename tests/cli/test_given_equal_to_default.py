"""A value the user gives is "given" even when it equals the default: `train llama-3.1-8b --batch 1` must not label
the batch "(default)" (it was compared with the default value). Through the real entry point (text and --json) and
the Python API; the same for the inference flags with a non-None default (attention, group size)."""

from __future__ import annotations

import dataclasses
import json
import subprocess
from pathlib import Path

import pytest

from cli_capture import run_cli

ROOT = Path(__file__).resolve().parents[2]


def run(*args: str) -> subprocess.CompletedProcess:
    r = run_cli(*args)
    assert r.returncode == 0, r.stderr
    return r


def flags(args: list[str]) -> dict[str, bool]:
    data = json.loads(run(*args, "--json").stdout)
    return {a["name"]: a["default"] for a in data["assumptions"]}


@pytest.mark.parametrize(("given", "name", "text"), [
    (["--batch", "1"], "micro_batch", "micro_batch=1"),
    (["--seq", "2048"], "seq_len", "seq_len=2048"),
    (["--method", "full", "--grad-accumulation", "1"], "method", "method=full"),
    (["--grad-checkpointing", "none"], "grad_checkpointing", "grad_checkpointing=none"),
])
def test_training_value_equal_to_default_is_given(given: list[str], name: str, text: str) -> None:
    base = ["train", "llama-3.1-8b"]
    assert flags([*base, *given])[name] is False
    assert flags(base)[name] is True
    line = next(x for x in run(*base, *given).stdout.splitlines() if x.startswith("assumptions:"))
    assert f"{text};" in line and f"{text} (default)" not in line
    line = next(x for x in run(*base).stdout.splitlines() if x.startswith("assumptions:"))
    assert f"{text} (default)" in line


def test_lora_rank_equal_to_default_is_given() -> None:
    base = ["train", "llama-3.1-8b", "--method", "lora"]
    assert flags([*base, "--rank", "16"])["lora"] is False
    assert flags(base)["lora"] is True


@pytest.mark.parametrize(("args", "name"), [
    (["infer", "llama-3.1-8b", "--attention", "sdpa"], "attention"),
    (["infer", "llama-3.1-8b", "--weights", "awq-int4", "--group-size", "128"], "group_size"),
])
def test_inference_value_equal_to_default_is_given(args: list[str], name: str) -> None:
    assert flags(args)[name] is False
    default_args = [a for a in args if a not in ("--attention", "sdpa", "--group-size", "128")]
    assert flags(default_args)[name] is True


def test_python_api_records_what_was_passed() -> None:
    from llmsizer import estimate_training
    from llmsizer.specs import InferenceWorkload, TrainingWorkload

    est = {a.name: a.default for a in estimate_training("qwen2.5-0.5b", micro_batch=1).assumptions}
    assert est["micro_batch"] is False and est["seq_len"] is True
    w = TrainingWorkload(micro_batch=1)
    assert w.given == frozenset({"micro_batch"})
    assert TrainingWorkload("full").given == frozenset({"method"})  # positional too
    assert TrainingWorkload(optimizer=None).given == frozenset()  # None says "not given"
    # a copy keeps the original's record: a field a tool changes is not the user's
    assert dataclasses.replace(w, seq_len=4096).given == frozenset({"micro_batch"})
    assert InferenceWorkload(attention="sdpa").given == frozenset({"attention"})


def assumed(args: list[str]) -> dict[str, tuple[object, bool]]:
    data = json.loads(run(*args, "--json").stdout)
    return {a["name"]: (a["value"], a["default"]) for a in data["assumptions"]}


@pytest.mark.parametrize("engine", ["vllm", "transformers", "sglang"])
def test_infer_names_the_given_concurrency_and_tensor_parallel_degree(engine: str) -> None:
    """Every input the answer used is in its assumptions, a given one marked given: before, `infer --concurrency 8
    --tp 2` listed neither (only the defaults were named), so the answer did not say what it was sized for."""
    got = assumed(["infer", "llama-3.1-8b", "--engine", engine, "--concurrency", "8", "--tp", "2",
                   "--context", "8192"])
    assert got["concurrency"] == (8, False) and got["tensor_parallel"] == (2, False), got
    assert got["context"] == (8192, False), got
    got = assumed(["infer", "llama-3.1-8b", "--engine", engine, "--concurrency", "1", "--tp", "1"])
    assert got["concurrency"] == (1, False) and got["tensor_parallel"] == (1, False), got  # given, = the default
    got = assumed(["infer", "llama-3.1-8b", "--engine", engine])
    assert got["concurrency"] == (1, True) and got["context"] == (4096, True) and "tensor_parallel" not in got, got


def test_fit_names_the_given_concurrency_not_one_replicas_share() -> None:
    """fit over 2 devices at TP 1 runs 2 replicas, each estimated at half the load; the answer's assumption is the
    concurrency the user gave (8), not a replica's (4)."""
    import llmsizer
    r = llmsizer.fit("llama-3.1-8b", "h100-sxm", 2, concurrency=8, context="8k", tensor_parallel=1)
    named = {a.name: (a.value, a.default) for a in r.all_assumptions}
    assert named["concurrency"] == (8, False) and named["context"] == (8192, False), named
    assert r.estimate is not None and r.estimate.details["concurrency"] == 4  # one replica's share (the estimate's)
