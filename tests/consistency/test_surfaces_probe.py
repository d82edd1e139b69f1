"""One answer across surfaces, from a new user's probe (session 8): the same question asked through the CLI, the
Python API, the web API and a request file gets the same numbers. Each test below failed before its fix; the
expected values are the catalog's sourced prices (the data files, read here as JSON) and fit's own verdict, never
the surface under test's output.
"""

from __future__ import annotations

import inspect
import json
from pathlib import Path

import pytest

from cli_capture import run, run_json
from llmsizer.catalog.hardware import builtin_catalog
from llmsizer.errors import InputError
from llmsizer.estimate import device as device_rules
from llmsizer.estimate.fit import fit, fit_training
from llmsizer.models import load_model

ROOT = Path(__file__).resolve().parents[2]
AWS = ROOT / "src" / "llmsizer" / "catalog" / "data" / "hardware" / "instances_aws.json"


def aws_price(instance: str) -> float:
    """The on-demand price of an AWS instance as its catalog row states it (USD/h, with its source)."""
    rows = json.loads(AWS.read_text())["instances"]
    row = next(r for r in rows if r["id"] == instance)
    assert row["price"]["unit"] == "USD/h" and row["price"]["source"]
    return float(row["price"]["value"])


# ------------------------------------------------------------------------------------------- the default engine

@pytest.mark.parametrize("rule", ["engine_rule", "default_engine", "engine_assumption"])
def test_the_engine_rule_cannot_be_called_without_the_model(rule: str) -> None:
    """Before, ``spec`` defaulted to None: a caller that left it out skipped the fallback to llama.cpp when the
    device's engine refuses the checkpoint's format (gpt-oss MXFP4 on a T4: vLLM, which cannot run it)."""
    params = inspect.signature(getattr(device_rules, rule)).parameters
    assert all(p.default is inspect.Parameter.empty for p in params.values()), rule
    assert not hasattr(device_rules, "device_engine_rule")  # the rule without the fallback is private


def test_the_engine_rule_falls_back_for_the_checkpoint_it_is_given() -> None:
    t4 = builtin_catalog().devices["t4"]
    spec = load_model("gpt-oss-20b")
    # T4 is Turing (compute capability 7.5); vLLM gates MXFP4 at 8.0 (estimate/formats.py engine_refuses)
    assert device_rules.engine_rule(t4, 1, None, spec, {})[0] == "llamacpp"
    assert device_rules.engine_rule(t4, 1, None, None, {})[0] == "vllm"  # no model: nothing refused


# ------------------------------------------------------------------------------------------------ serving cost

def test_python_fit_prices_serving_as_fit_json_does() -> None:
    """Before, the serving cost was computed in cli/fit_cmd.py: ``fit(...)`` in Python (and its to_dict) had none."""
    r = fit("deepseek-v2-lite", "aws-m7i.4xlarge", weights="q4_k_m")
    code, data = run_json("fit", "deepseek-v2-lite", "--device", "aws-m7i.4xlarge", "--weights", "q4_k_m")
    assert code == 0
    assert r.cost == data["cost"] == r.to_dict()["cost"]
    price = aws_price("aws-m7i.4xlarge")
    assert r.cost["price_per_hour"] == price
    tps = r.tokens_per_second_total
    assert tps and r.cost["per_million_tokens"] == pytest.approx(price / (tps * 3600) * 1e6, rel=1e-12)
    assert "cost: $0.81/h" in str(r)  # the Python object prints what the command prints


# ---------------------------------------------------------------------------------------- recommend's rejection

def test_recommend_rejects_with_fits_verdict() -> None:
    """Before, a rejected option compared vLLM's reservation (72.17 GiB) with 0.9 x the card (71.68 GiB):
    'needs 72.17 GiB per device, budget 71.68 GiB', while fit said the KV pool admits 6 of 16 sequences and
    showed a budget of 79.65 GiB."""
    wl = ["--weights", "fp8", "--context", "32k", "--concurrency", "16"]
    _, rec = run_json("recommend", "llama-3.3-70b-instruct", *wl, "--top", "1000", "--provider", "gcp")
    opt = next(o for o in rec["rejected"] if o["target"] == "gcp-a3-highgpu-2g")
    r = fit("llama-3.3-70b-instruct", "gcp-a3-highgpu-2g", weights="fp8", context=32768, concurrency=16, speed=False)
    assert not r.fits and "16 requested" in r.reasons[0]
    assert r.reasons[0] in opt["reasons"][0]
    assert opt["memory_per_device"] == r.memory_per_device
    assert opt["budget_per_device"] == r.budget_per_device


def test_recommend_rejection_by_weights_alone_says_so() -> None:
    """A candidate whose weights alone exceed its budget is not sized further; the reason says it is the weights."""
    _, rec = run_json("recommend", "llama-3.3-70b-instruct", "--weights", "fp8", "--top", "1000", "--provider", "aws")
    opt = next(o for o in rec["rejected"] if o["target"] == "aws-g6.xlarge")  # one L4
    assert "the weights alone at the smallest format tried (fp8)" in opt["reasons"][0]


# ------------------------------------------------------------------------------------------- training duration

def test_train_on_several_devices_is_timed_at_the_zero_stage_it_chose() -> None:
    """Before, `train --device h100-sxm --gpus 8 --tokens 1B` sized memory at the ZeRO stage it chose (1) but timed
    the run as DDP (6.43 h); `fit --train`, `recommend --train` and the plan said 6.51 h."""
    wl = ["--method", "full", "--batch", "2", "--seq", "4096", "--grad-checkpointing", "full", "--tokens", "1B"]
    _, tr = run_json("train", "llama-3.1-8b", "--device", "h100-sxm", "--gpus", "8", *wl)
    _, ft = run_json("fit", "llama-3.1-8b", "--train", "--device", "h100-sxm", "--count", "8", *wl)
    zero = {a["name"]: a["value"] for a in tr["assumptions"]}["zero"]
    assert zero == 1
    assert tr["duration"]["seconds"] == ft["training_time"]["seconds"]
    py = fit_training("llama-3.1-8b", "h100-sxm", 8, tokens=1e9, method="full", micro_batch=2, seq_len=4096,
                      grad_checkpointing="full")
    assert py.training_time is not None and py.training_time["seconds"] == tr["duration"]["seconds"]


def test_train_on_an_instance_prices_the_run_as_fit_train() -> None:
    """Before, `train --device aws-p4d.24xlarge --tokens 100M` gave 0.899 h and no price; fit --train 0.884 h, $19.42."""
    wl = ["--method", "lora", "--batch", "1", "--seq", "4096", "--grad-checkpointing", "full", "--tokens", "100M"]
    _, tr = run_json("train", "qwen3-30b-a3b", "--device", "aws-p4d.24xlarge", *wl)
    _, ft = run_json("fit", "qwen3-30b-a3b", "--train", "--device", "aws-p4d.24xlarge", *wl)
    price = aws_price("aws-p4d.24xlarge")
    assert tr["duration"]["price_per_hour"] == ft["training_time"]["price_per_hour"] == price
    assert tr["duration"]["seconds"] == ft["training_time"]["seconds"]
    assert tr["duration"]["cost"] == pytest.approx(price * tr["duration"]["seconds"] / 3600, rel=1e-12)
    assert tr["duration"]["cost"] == ft["training_time"]["cost"]


# ----------------------------------------------------------------------------------------- unknown device memory

def test_plan_training_on_a_device_of_unknown_memory_does_not_say_it_does_not_fit(tmp_path: Path) -> None:
    """Before, the plan's facts said fits: false (its memory section and `train --device` said unknown)."""
    req = tmp_path / "r.yaml"
    req.write_text("version: 1\ntitle: cpu\njobs:\n- name: t\n  kind: training\n  model: {name: qwen2.5-0.5b}\n"
                   "  method: full\n  resources: {device: intel-xeon-spr-8ch, count: 1}\n"
                   "  settings: {micro_batch: 1, seq_len: 1024, epochs: 1}\n  dataset: {tokens: 1M tokens}\n")
    assert builtin_catalog().devices["intel-xeon-spr-8ch"].memory_bytes is None  # the premise: no memory size
    _, plan = run_json("plan", str(req))
    code, _, err = run("train", "qwen2.5-0.5b", "--device", "intel-xeon-spr-8ch", "--method", "full", "--batch", "1",
                       "--seq", "1024")
    assert code == 2 and "no sourced memory size" in err  # train refuses it as fit --train does (trainplan)
    assert plan["jobs"][0]["facts"]["fits"] is None


# ------------------------------------------------------------------------------------- the engine default in words

def test_the_request_files_engine_default_states_the_rule_plan_applies(tmp_path: Path) -> None:
    """Before, the request field said 'default: vllm on data-center GPUs, llamacpp elsewhere', while the plan (the
    one rule, estimate/device.py engine_rule) serves AWQ weights on one consumer card with vLLM."""
    from llmsizer.request.fields import INFERENCE
    from llmsizer.specs.workload import ENGINE_RULE_TEXT

    engine = next(f for f in INFERENCE if f.name == "engine")
    assert ENGINE_RULE_TEXT in engine.doc
    req = tmp_path / "r.yaml"
    req.write_text("version: 1\ntitle: awq\njobs:\n- name: s\n  kind: inference\n  model: {name: qwen2.5-7b}\n"
                   "  quantization: awq-int4\n  resources: {device: rtx-4090, count: 1}\n"
                   "  traffic: {concurrency: {typical: 1, peak: 1}, context: {typical: 4096, peak: 4096}}\n")
    _, plan = run_json("plan", str(req))
    assert plan["jobs"][0]["hardware"]["engine"] == "vllm"


# ------------------------------------------------------------------------------- a plan with no hardware to fit on

def test_a_service_with_no_hardware_is_sized_on_the_engine_infer_chooses(tmp_path: Path) -> None:
    """Before, a plan whose service found no hardware sized it on vLLM ('job.engine or "vllm"', 17.67 GiB) while
    `infer` with no device uses the one rule's engine for a GPU known only by its kind, transformers (16.34 GiB)."""
    req = tmp_path / "r.yaml"
    req.write_text("version: 1\ntitle: none\njobs:\n- name: s\n  kind: inference\n  model: {name: llama-3.1-8b}\n"
                   "  traffic: {concurrency: {typical: 1, peak: 1}, context: {typical: 4096, peak: 4096}}\n"
                   "  latency: {ttft: 1 ms}\n")  # no catalog option meets 1 ms: no hardware
    _, plan = run_json("plan", str(req))
    job = plan["jobs"][0]
    assert job["hardware"]["origin"] == "none"
    _, infer = run_json("infer", "llama-3.1-8b", "--context", "4096")
    engine = next(a for a in infer["assumptions"] if a["name"] == "engine")
    assert engine["default"] and engine["value"] == "transformers"
    assert f", {engine['value']}) on no hardware" in job["summary"]
    assert job["facts"]["memory_need"] == infer["totals"]["device"]["bytes"]


def test_recommend_does_not_reject_by_a_share_smaller_than_the_one_given() -> None:
    """Before, recommend dropped every rung whose weights exceeded 0.9 x the card before asking fit, so with
    --gpu-memory-utilization 0.99 it rejected Llama-3.1-70B AWQ (37.04 GiB) on one A100-40GB that fit says fits."""
    wl = ["--weights", "awq-int4", "--engine", "vllm", "--gpu-memory-utilization", "0.99", "--context", "512"]
    code, fdata = run_json("fit", "llama-3.1-70b-instruct", "--device", "gcp-a2-highgpu-1g", *wl)
    assert code == 0 and fdata["fits"]
    _, rec = run_json("recommend", "llama-3.1-70b-instruct", *wl, "--provider", "gcp", "--top", "100")
    opt = next(o for o in rec["options"] if o["target"] == "gcp-a2-highgpu-1g")
    assert opt["status"] in ("chosen", "meets")
    assert opt["memory_per_device"] == fdata["memory_per_device"]


# ---------------------------------------------------------------------------------------- device memory in words

@pytest.mark.parametrize("name", ["apple-m3-max-64gb", "aws-m7i.4xlarge", "h100-sxm"])
def test_hardware_show_states_the_memory_fit_budgets_from(name: str) -> None:
    """Before, `hardware show apple-m3-max-64gb` said 64.00 GiB and nothing more, while every estimate on it starts
    from 48.00 GiB (Metal's working set); a CPU instance's entry did not say its RAM is the workload's memory."""
    from llmsizer.estimate.verdict import DEFAULT_HEADROOM, memory_budget

    _, show = run_json("hardware", "show", name)
    usable = show["usable_memory"]["bytes"]
    r = fit("qwen2.5-0.5b", name, engine="llamacpp", weights="q4_k_m", speed=False)
    # llama.cpp on a GPU keeps its own --fit-target, 1024 MiB per device (llama.cpp common/common.h:483 at
    # ggml-org/llama.cpp@0c1e57098); on a CPU's RAM the headroom
    gpu = name != "aws-m7i.4xlarge"
    assert r.budget_per_device == (usable - 1024 * 2**20 if gpu else memory_budget(usable, DEFAULT_HEADROOM))
    if name == "apple-m3-max-64gb":
        assert usable == int(64 * 2**30 * 0.75)  # vendor 64 GB read as GiB x the working-set share
    if name == "aws-m7i.4xlarge":
        assert usable == 64 * 2**30  # the instance's RAM (catalog: 64 GiB)


# --------------------------------------------------------------------------------------------- reverse questions

@pytest.mark.parametrize("device,flag,kw", [("rtx-4090", "--max-context", {}),
                                            ("apple-m3-max-64gb", "--max-concurrency", {"context": 8192})])
def test_python_reverse_questions_take_a_device_as_infer_does(device: str, flag: str, kw: dict) -> None:
    """Before, `infer --device rtx-4090 --max-context` answered 142,592 tokens while the Python API had no way to ask
    it (max_context needed a memory in bytes; the device's memory, Apple's working-set share, had to be re-derived)."""
    from llmsizer.estimate.inference.reverse import max_concurrency, max_context

    extra = ["--context", "8192"] if kw else []
    code, data = run_json("infer", "qwen2.5-7b", "--device", device, flag, *extra)
    key = flag[2:].replace("-", "_")
    ask = max_context if key == "max_context" else max_concurrency
    assert data["reverse"][key] > 0
    assert ask("qwen2.5-7b", device=device, **kw) == data["reverse"][key]
    with pytest.raises(InputError, match="memory budget is needed"):
        ask("qwen2.5-7b", **kw)
