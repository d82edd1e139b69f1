"""A plan's training alternatives are ``recommend --train`` with the request's own settings, its layout included (as a
serving job's pinned tensor_parallel): a ``zero``, ``fsdp``, ``tp``... the request states is kept in the search, one it
leaves out is chosen per option as ``fit --train`` chooses it, and each option names the layout it is for.

Before (onecheck2 #1), the plan dropped the layout (``without_layout``): a ZeRO-2 request (8B full, 8 x H100) was
offered 8 x A100-40GB (aws-p4d.24xlarge) at $269 "meeting" at 32.25 GiB per device, which is ZeRO-3's memory, while
``fit --train --zero 2`` on that instance says it does not fit, and the basis said "without sharding". The loss under
tensor parallelism's vocabulary shards (``ce-loss-parallel``) is kept with its tp: recommend rejects the options whose
devices cannot take tp 8 and ranks the rest (it refused the whole search before: "gpus (1) must be a multiple of tp")."""

from __future__ import annotations

import pytest

from cli_capture import run_json
from llmsizer.estimate.fit import fit_training, zero_chosen
from llmsizer.plan import make_plan
from llmsizer.request import parse_request

REQUEST = """
version: 1
jobs:
  - name: tp-train
    kind: training
    model: {name: llama-3.1-8b}
    method: full
    settings: {precision: bf16-mixed, micro_batch: 1, seq_len: 4k, grad_checkpointing: full, tp: 8,
               loss: ce-loss-parallel, train_tokens: 1B tokens}
    dataset: {tokens: 1B tokens}
    resources: {device: h100-sxm, count: 8}
"""

ZERO2 = """
version: 1
jobs:
  - name: t
    kind: training
    model: {name: llama-3.1-8b}
    resources: {instance: aws-p5.48xlarge, count: 8}
    method: full
    settings: {%s micro_batch: 2, seq_len: 4096, grad_checkpointing: full, epochs: 1}
    dataset: {tokens: 1B tokens, size: 10 GB}
"""
FLAGS = ("--batch", "2", "--seq", "4096", "--grad-checkpointing", "full", "--tokens", "1B")


def test_a_tp_only_loss_keeps_its_tp_in_the_alternatives() -> None:
    job = make_plan(parse_request(REQUEST, source="tp.yaml")).job("tp-train")
    assert not [w for w in job.warnings if "no alternatives searched" in w], job.warnings
    assert job.options  # recommend --train ranked other hardware
    for o in job.options:
        assert "TP 8 (stated)" in o["layout"] and "TP 8" in o["basis"], o


def _devices(option: dict) -> str:
    """An option's device count, as its hardware line says it ("16 x a100-sxm-40gb (aws-p4d.24xlarge, 2 instances)")."""
    return option["hardware"].split(" x ", 1)[0]


def test_the_requests_zero_stage_is_kept_in_every_option() -> None:
    job = make_plan(parse_request(ZERO2 % "zero: 2,", source="t1.yaml")).jobs[0]
    code, rec = run_json("recommend", "llama-3.1-8b", "--train", "--zero", "2", *FLAGS)
    assert code == 0
    assert job.options
    # recommend --train with the same flags: the same options, costs and times
    assert [(o["target"], o["run_cost"], o["training_seconds"]) for o in job.options] == \
        [(o["target"], o["run_cost"], o["training_seconds"]) for o in rec["options"][:len(job.options)]]
    for o in job.options:
        assert o["layout"] == "ZeRO-2 (stated)" and "ZeRO-2" in o["basis"], o
        code, fit = run_json("fit", "llama-3.1-8b", "--train", "--device", o["target"], "--count", _devices(o),
                             "--zero", "2", *FLAGS)
        assert code == 0 and fit["fits"], (o["target"], fit["reasons"])  # fit --train --zero 2 agrees: it fits
        assert fit["training_time"]["cost"] == pytest.approx(o["run_cost"]), o["target"]
    # the instance that holds the run only with ZeRO-3 (one 8 x A100-40GB) is not offered to a ZeRO-2 run as one
    # instance; recommend may offer it on more instances, where ZeRO-2's shards fit (recommend.py _grow_stated)
    code, p4d = run_json("fit", "llama-3.1-8b", "--train", "--device", "aws-p4d.24xlarge", "--zero", "2", *FLAGS)
    assert code == 1 and not p4d["fits"]
    assert all(int(_devices(o)) > 8 for o in job.options if o["target"] == "aws-p4d.24xlarge")


def test_an_unstated_stage_is_chosen_per_option_and_named() -> None:
    job = make_plan(parse_request(ZERO2 % "", source="t1b.yaml")).jobs[0]
    assert job.options
    for o in job.options:
        fr = fit_training("llama-3.1-8b", o["target"], micro_batch=2, seq_len=4096, grad_checkpointing="full",
                          fits_at=False)
        assert fr.estimate is not None
        taken = zero_chosen(fr.estimate)
        stage = int(taken.value) if taken is not None else 0
        word = f"ZeRO-{stage}" if stage else "DDP (ZeRO-0"
        assert o["layout"].startswith(word) and word in o["basis"], (o["target"], o["layout"], stage)
        assert "without sharding (recommend)" not in o["basis"]
