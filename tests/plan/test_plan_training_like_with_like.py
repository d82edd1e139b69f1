"""probe3 #3: a training plan's comparison with serving.

`plan` of a 70B full fine-tune, ZeRO-3 over 16 H100s, said "80.43 GiB per device ... 0.60x the inference
estimate (134.50 GiB)" and "serving it needs about 134.50 GiB per device against 80.43 GiB to train it": training's
number is per device with the weights split 16 ways, serving's is one device holding them all. `train` for the same
run said nothing of it. Now neither compares where the weights are sharded (estimate/training/levers.py
inference_comparable); a run whose devices hold all the weights still gets the ratio, the same on both surfaces."""

from __future__ import annotations

import re

import yaml

from cli_capture import run
from llmsizer.plan import plan_file

FT70 = {"name": "ft70", "kind": "training", "model": {"name": "llama-3.1-70b-instruct"},
        "resources": {"instance": "aws-p5.48xlarge", "count": 16, "nodes": 2}, "method": "full",
        "settings": {"zero": 3, "micro_batch": 1, "seq_len": "4k", "grad_checkpointing": "full", "epochs": 1},
        "dataset": {"tokens": "1B tokens"}}
LORA = {"name": "lora", "kind": "training", "model": {"name": "llama-3.1-8b"},
        "resources": {"device": "rtx-4090", "count": 1}, "method": "lora",
        "settings": {"micro_batch": 2, "seq_len": "2k", "grad_checkpointing": "full", "epochs": 1},
        "dataset": {"tokens": "50M tokens"}}


def _advice(out: str, title: str) -> str:
    lines = out.splitlines()
    i = next(k for k, ln in enumerate(lines) if title in ln)
    return lines[i + 1].strip()


def _plan(tmp_path, job):
    path = tmp_path / "req.yaml"
    path.write_text(yaml.safe_dump({"version": 1, "title": "t", "jobs": [job]}))
    code, out, _ = run("plan", str(path))
    return code, out, plan_file(path).job(job["name"])


def test_sharded_weights_are_not_compared_with_one_device_serving(tmp_path) -> None:
    _, out, job = _plan(tmp_path, FT70)
    assert job.section("memory").value("inference_need") is None
    assert "the inference estimate" not in out and "serving it needs" not in out, out
    assert "Is training needed?" in out  # the advice stays, without the two unlike numbers
    _, train_out, _ = run("train", "llama-3.1-70b-instruct", "--device", "h100-sxm", "--gpus", "16", "--zero", "3",
                          "--batch", "1", "--seq", "4096", "--grad-checkpointing", "full")
    assert "sized with inference numbers" not in train_out  # the same on train


def test_whole_weights_per_device_compare_the_same_on_plan_and_train(tmp_path) -> None:
    _, out, job = _plan(tmp_path, LORA)
    mem = job.section("memory")
    ratio = re.search(r"; ([\d.]+)x the inference estimate \(([^)]+)\)", out)
    _, train_out, _ = run("train", "llama-3.1-8b", "--device", "rtx-4090", "--method", "lora", "--batch", "2",
                          "--seq", "2048", "--grad-checkpointing", "full")
    said = re.search(r"this would be ([^;]+); training needs [^(]+\(([\d.]+)x\)", train_out)
    assert ratio and said and mem.value("inference_need") is not None, (out, train_out)
    assert ratio.group(2) == said.group(1) and ratio.group(1) == said.group(2)


def test_advice_names_only_the_levers_not_pulled(tmp_path) -> None:
    """probe3 #5: the advice listed levers the job had already pulled -- a LoRA run told "a parameter-efficient
    method (lora, qlora)", a ZeRO-3 run with full checkpointing told to shard and checkpoint; it now names only the
    others (estimate/training/levers.py memory_levers)."""
    code, out, _ = _plan(tmp_path, FT70)  # full, ZeRO-3, full checkpointing, micro-batch 1
    advice = _advice(out, "Training does not fit the requested devices")
    assert code == 1 and advice.startswith("-> ask for devices with more memory, more devices"), advice
    assert "settings.zero" not in advice and "checkpointing" not in advice and "micro-batch" not in advice
    assert "method: lora or qlora" in advice
    code, out, _ = _plan(tmp_path, LORA)  # lora, full checkpointing, micro-batch 2, one device
    advice = _advice(out, "Training sized with inference numbers")
    assert code == 1 and "qlora" in advice and "lora, qlora" not in advice and "method: lora" not in advice, advice
    assert "checkpointing" not in advice and "settings.zero: 3" in advice and "micro-batch" in advice
