"""fit's "does not fit; fits at X" hint (FitResult.fits_at) is one rule on every surface. Before: only `fit`'s CLI
computed it (cli/fit_cmd.py), so Python's FitResult, `fit --auto` and `fit --train` had none, and on vLLM's ladder
it was null where a llama.cpp format fits. The truth each hint is checked against is the fit itself, run at every
rung or setting the hint passes over and at the one it names."""

from __future__ import annotations

import llmsizer
from cli_capture import run, run_json
from llmsizer.estimate.formats import format_ladder
from llmsizer.estimate.llamacpp_fit import fit_llamacpp
from llmsizer.models import load_model
from llmsizer.plan import make_plan
from llmsizer.request import parse_request

QWEN = ["qwen3-30b-a3b", "--device", "rtx-4090", "--context", "32k"]


def test_python_fit_carries_the_cli_hint() -> None:
    r = llmsizer.fit("qwen3-30b-a3b", "rtx-4090", context=32768)
    _, cli = run_json("fit", *QWEN)
    assert r.fits is False and r.fits_at is not None and r.fits_at == cli["fits_at"]
    assert r.to_dict()["fits_at"] == r.fits_at and "hint: it fits at --weights q4_k_m" in str(r)
    assert llmsizer.fit("qwen3-30b-a3b", "rtx-4090", context=32768, weights="bf16").fits_at is None  # as asked


VLLM_70B = ["llama-3.1-70b-instruct", "--device", "rtx-3090", "--count", "2", "--context", "32k"]


def test_no_vllm_rung_fits_so_the_hint_names_llamacpp_and_its_format() -> None:
    code, data = run_json("fit", *VLLM_70B, "--engine", "vllm")
    at = data["fits_at"]
    assert code == 1 and at is not None and at["same_engine"] is False and at["engine"] == "llamacpp"
    assert at["none_on"]["engine"] == "vllm"
    spec = load_model("llama-3.1-70b-instruct")
    for fmt in format_ladder(spec, "vllm", None, fp8=False):  # RTX 3090: no FP8 kernels; every vLLM rung fails
        assert run_json("fit", *VLLM_70B, "--engine", "vllm", "--weights", fmt)[1]["fits"] is False
    ladder = format_ladder(spec, "llamacpp", None, fp8=False)
    verdicts = [run_json("fit", *VLLM_70B, "--engine", "llamacpp", "--weights", f)[1]["fits"] for f in ladder]
    assert at["weights"] == ladder[verdicts.index(True)]
    _, out, _ = run("fit", *VLLM_70B, "--engine", "vllm")
    fmt = at["weights"].removeprefix("gguf:")
    assert (f"hint: no format on vllm's ladder fits; it fits on llamacpp at --weights {fmt}" in out
            and f"rerun with --engine llamacpp --weights {fmt}" in out)


def test_a_vllm_rung_that_fits_is_named_before_any_other_engine() -> None:
    argv = ["qwen2.5-32b-instruct", "--device", "rtx-4090", "--engine", "vllm"]
    _, data = run_json("fit", *argv)
    at = data["fits_at"]
    assert at["same_engine"] is True and at["engine"] == "vllm"
    assert run_json("fit", *argv, "--weights", at["weights"])[1]["fits"] is True


def test_fit_auto_names_the_format_whose_auto_fit_fits() -> None:
    argv = [*QWEN, "--engine", "llamacpp", "--host-memory", "16GiB", "--auto"]
    code, data = run_json("fit", *argv)
    at = data["fits_at"]
    assert code == 1 and at is not None and at["engine"] == "llamacpp"
    ladder = format_ladder(load_model("qwen3-30b-a3b"), "llamacpp", None)
    verdicts = [run_json("fit", *argv, "--weights", f)[1]["fits"] for f in ladder]
    assert at["weights"] == ladder[verdicts.index(True)]
    _, asked = run_json("fit", *argv, "--weights", at["weights"])
    assert asked["flags"] == at["flags"] and asked["fits_at"] is None
    _, out, _ = run("fit", *argv)
    assert f"hint: it fits at --weights {at['weights'].removeprefix('gguf:')}" in out
    py = fit_llamacpp("qwen3-30b-a3b", [24 * 2**30 - 2**20 * 10], context=32768, host_memory="16GiB")
    assert (py.fits, py.fits_at is not None) == (False, True)


TRAIN = ["llama-3.1-8b", "--device", "a100-sxm-80gb", "--train", "--seq", "4096", "--batch", "4"]


def test_fit_train_names_the_least_change_that_fits() -> None:
    code, data = run_json("fit", *TRAIN)
    at = data["fits_at"]
    # the same full training with checkpointing and its optimizer states in host RAM (ZeRO-Offload, probe6 defect 5)
    assert code == 1 and at["changes"] == {"grad_checkpointing": "full", "offload": "optimizer"}
    assert run_json("fit", *TRAIN, "--grad-checkpointing", "full")[1]["fits"] is False  # the first step fails
    _, off = run_json("fit", *TRAIN, "--grad-checkpointing", "full", "--offload", "optimizer")
    assert off["fits"] is True and off["memory_per_device"] == at["memory_per_device"]
    # offload stated none: the step after the offload steps, LoRA
    _, data = run_json("fit", *TRAIN, "--offload", "none")
    assert data["fits_at"]["changes"] == {"method": "lora", "grad_checkpointing": "full"}
    _, lora = run_json("fit", *TRAIN, "--method", "lora", "--grad-checkpointing", "full")
    assert lora["fits"] is True and lora["memory_per_device"] == data["fits_at"]["memory_per_device"]
    # a setting the user gave is kept: LoRA asked, only the checkpointing is changed
    _, data = run_json("fit", *TRAIN, "--method", "lora")
    assert data["fits_at"]["changes"] == {"grad_checkpointing": "full"}
    _, out, _ = run("fit", *TRAIN)
    assert "hint: it fits with --grad-checkpointing full --offload optimizer" in out
    py = llmsizer.fit_training("llama-3.1-8b", "a100-sxm-80gb", seq_len=4096, micro_batch=4)
    assert py.fits_at == at


def test_the_plan_says_the_hint() -> None:
    serving = ("version: 1\njobs:\n  - name: chat70\n    kind: inference\n    model: {name: llama-3.1-70b-instruct}\n"
               "    engine: vllm\n    resources: {device: rtx-3090, count: 2}\n    traffic:\n"
               "      concurrency: {typical: 1, peak: 1}\n      context: {typical: 32k, peak: 32k}\n"
               "      output: {typical: 500, peak: 500}\n    service: {duration: 3 months}\n")
    job = make_plan(parse_request(serving, source="t.yaml"), alternatives=False).jobs[0]
    at = job.facts["fits_at"]
    assert at["engine"] == "llamacpp" and at["same_engine"] is False
    assert any(a.startswith("hint: no format on vllm's ladder fits") for a in job.notes)
    training = ("version: 1\njobs:\n  - name: ft\n    kind: training\n    method: lora\n"
                "    model: {name: llama-3.1-8b}\n    resources: {device: a100-sxm-80gb, count: 1}\n"
                "    dataset: {tokens: 100M}\n    settings: {seq_len: 4096, micro_batch: 4}\n")
    job = make_plan(parse_request(training, source="t.yaml"), alternatives=False).jobs[0]
    assert job.facts["fits_at"]["changes"] == {"grad_checkpointing": "full"}
    _, data = run_json("fit", *TRAIN, "--method", "lora", "--grad-checkpointing", "full")
    assert data["fits"] is True and data["memory_per_device"] == job.facts["fits_at"]["memory_per_device"]
