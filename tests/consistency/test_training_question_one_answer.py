"""One training question, one answer on every surface (onecheck2 #2, #3, #6, #7).

* One high end: ``fit --train --json``'s ``memory_high_per_device`` and the plan's "training needs per device (high
  end)" are the high end the verdict quotes (``details.verdict_high``: the calibrated high end where it is higher);
  before they were the items' summed ranges' high (8B ZeRO-3 + optimizer offload on 8 x A100: 115.49 GiB in the
  table, 121.21 GiB in the verdict and the warning beside it). The items' high keeps its own name.
* A request can state every workload setting ``train`` takes (ep, sequence_parallel, optimizer_state_dtype,
  optimizer_impl, optimizer_in_backward, adapter_dtype, base_dtype, deepspeed_gather, metric were "unknown key").
* ``estimate_training(device=INSTANCE)`` answers as ``train --device INSTANCE`` (it refused).
* ``train --device D`` with D of no sourced memory is refused as ``fit --train`` refuses it (it answered, exit 0).
"""

from __future__ import annotations

import dataclasses

import pytest

import llmsizer
from cli_capture import run, run_json
from llmsizer.cli.workload_args import TRAINING_FIELDS
from llmsizer.plan import make_plan
from llmsizer.request import parse_request
from llmsizer.request.fields import job_fields
from llmsizer.specs import TrainingWorkload

T16 = """
version: 1
jobs:
  - name: t
    kind: training
    model: {name: llama-3.1-8b}
    resources: {device: a100-sxm-80gb, count: 8}
    method: full
    settings: {zero: 3, offload: optimizer, micro_batch: 2, seq_len: 4096%s}
    dataset: {tokens: 500M tokens}
"""
T16_FLAGS = ("llama-3.1-8b", "--train", "--device", "a100-sxm-80gb", "--count", "8", "--zero", "3", "--offload",
             "optimizer", "--batch", "2", "--seq", "4096", "--tokens", "500M")


def test_one_high_end_on_fit_train_and_the_plan() -> None:
    code, fit = run_json("fit", *T16_FLAGS)
    assert code == 0
    d = fit["memory"]["details"]
    high = d["verdict_high"]
    assert d["verdict_high_basis"] == "calibrated high end"  # the case where the two highs differ
    assert fit["memory_high_per_device"] == high
    items_high = fit["memory"]["totals"]["device"]["high"]
    assert fit["details"]["components_high_per_device"] == items_high < high
    job = make_plan(parse_request(T16 % "", source="t16.yaml"), alternatives=False).jobs[0]
    mem = job.section("memory")
    assert mem.value("need_high") == high
    assert mem.value("need_items_high") == items_high
    label = next(f.label for f in mem.figures if f.key == "need_high")
    assert label == "training needs per device (calibrated high end)"
    # the warning beside it quotes the same number
    code, out, _ = run("fit", *T16_FLAGS)
    assert llmsizer.units.format_bytes(high) in out


REQUEST_ONLY = {"gpus", "gpus_per_node", "network"}  # resources.count / an instance's devices, resources.network


def _request_keys() -> set[str]:
    keys = {"method"}
    for f in job_fields("training"):
        if f.name in ("settings", "peft"):
            keys |= {c.name for c in f.fields}
    return keys


def test_every_training_flag_has_a_request_key() -> None:
    """One list: each workload flag of ``train`` (cli/workload_args.py TRAINING_FIELDS) is a request key."""
    missing = set(TRAINING_FIELDS) - REQUEST_ONLY - _request_keys()
    assert not missing, missing
    names = {f.name for f in dataclasses.fields(TrainingWorkload)}
    assert set(TRAINING_FIELDS) <= names


@pytest.mark.parametrize(("model", "settings", "flags", "changes"), [
    ("qwen3-30b-a3b", "fsdp: full, ep: 8", ("--fsdp", "full", "--ep", "8"), True),
    ("llama-3.1-8b", "optimizer_state_dtype: bf16, optimizer_impl: for-loop, metric: reserved",
     ("--optimizer-state-dtype", "bf16", "--optimizer-impl", "for-loop", "--metric", "reserved"), True),
    ("llama-3.1-8b", "optimizer_in_backward: true", ("--optimizer-in-backward",), True),
    ("llama-3.1-8b", "tp: 4, sequence_parallel: true", ("--tp", "4", "--sequence-parallel"), True),
    # accepted and the same answer as the flag (its buffer is not at this run's peak)
    ("llama-3.1-8b", "zero: 3, deepspeed_gather: pre-0.9", ("--zero", "3", "--deepspeed-gather", "pre-0.9"), False),
])
def test_a_request_states_what_train_takes(model: str, settings: str, flags: tuple[str, ...], changes: bool) -> None:
    text = f"""
version: 1
jobs:
  - name: t
    kind: training
    model: {{name: {model}}}
    resources: {{device: h100-sxm, count: 8}}
    method: full
    settings: {{micro_batch: 2, seq_len: 4096, grad_checkpointing: full, {settings}}}
    dataset: {{tokens: 1B tokens}}
"""
    job = make_plan(parse_request(text, source="t.yaml"), alternatives=False).jobs[0]
    base = ("fit", model, "--train", "--device", "h100-sxm", "--count", "8", "--batch", "2", "--seq", "4096",
            "--grad-checkpointing", "full")
    _, fit = run_json(*base, *flags)
    assert job.facts["memory_per_device"] == fit["memory_per_device"]
    if changes:  # the setting changes the answer: the request could not ask this question before
        kept = tuple(f for f in flags if f in ("--tp", "4", "--fsdp", "full"))
        _, without = run_json(*base, *kept)
        assert fit["memory_per_device"] != without["memory_per_device"]


def test_peft_dtypes_reach_the_plan() -> None:
    text = """
version: 1
jobs:
  - name: t
    kind: training
    model: {name: llama-3.1-8b}
    resources: {device: h100-sxm, count: 1}
    method: lora
    peft: {rank: 16, adapter_dtype: bf16, base_dtype: fp32}
    settings: {micro_batch: 2, seq_len: 4096}
    dataset: {tokens: 1B tokens}
"""
    job = make_plan(parse_request(text, source="t.yaml"), alternatives=False).jobs[0]
    code, fit = run_json("fit", "llama-3.1-8b", "--train", "--device", "h100-sxm", "--method", "lora", "--rank", "16",
                         "--adapter-dtype", "bf16", "--base-dtype", "fp32", "--batch", "2", "--seq", "4096")
    assert job.facts["memory_per_device"] == fit["memory_per_device"]


def test_estimate_training_takes_an_instance_as_train_does() -> None:
    est = llmsizer.estimate_training("llama-3.1-8b", device="aws-p5.48xlarge", gpus=8, zero=2, micro_batch=2,
                                     seq_len=4096, grad_checkpointing="full")
    code, train = run_json("train", "llama-3.1-8b", "--device", "aws-p5.48xlarge", "--gpus", "8", "--zero", "2",
                           "--batch", "2", "--seq", "4096", "--grad-checkpointing", "full")
    assert code == 0
    assert est.total("device")[1] == train["totals"]["device"]["bytes"]
    assert est.details["fits"] == train["details"]["fits"]


def test_train_refuses_a_device_of_unknown_memory_as_fit_does() -> None:
    args = ("llama-3.2-1b", "--device", "amd-epyc-9654", "--tokens", "1M")
    code_t, _, err_t = run("train", *args)
    code_f, _, err_f = run("fit", "--train", *args)
    assert code_t == code_f == 2
    assert err_t == err_f and "no sourced memory size" in err_t
    with pytest.raises(llmsizer.InputError, match="no sourced memory size"):
        llmsizer.estimate_training("llama-3.2-1b", device="amd-epyc-9654")
    code, _, _ = run("train", "llama-3.2-1b", "--device", "cpu", "--tokens", "1M")  # known only by its kind
    assert code == 0


def test_the_plan_states_the_mfu_fit_train_states() -> None:
    """probe19 D6: the plan's duration (text, HTML, JSON) gave the wall clock but not the MFU that `train`, `fit
    --train` and the web state for the same run. Truth for the figure itself: MFU = tokens x model FLOPs per token /
    (seconds x devices x peak), computed here from the fit's own seconds and the A100's sourced bf16 peak."""
    code, fit = run_json("fit", *T16_FLAGS)
    assert code == 0
    t = fit["training_time"]
    job = make_plan(parse_request(T16 % "", source="t16.yaml"), alternatives=False).jobs[0]
    dur = job.section("duration")
    assert dur.value("seconds") == t["seconds"] and dur.value("mfu") == t["mfu"]
    a100_bf16 = 312e12  # NVIDIA A100 datasheet, dense BF16 tensor
    assert t["mfu"] == pytest.approx(500e6 * t["model_flops_per_token"] / (t["seconds"] * 8 * a100_bf16), rel=1e-6)
    from llmsizer.render.plan_text import render_plan_text  # the text renders the same figure
    assert f"MFU {t['mfu']:.1%}" in render_plan_text(make_plan(parse_request(T16 % "", source="t16.yaml"),
                                                               alternatives=False))
