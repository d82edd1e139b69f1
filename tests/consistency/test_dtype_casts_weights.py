"""One answer for "serve this bf16 checkpoint in fp32" (probe finding): a request's ``precision: fp32`` served the
weights in fp32 (31.72 GiB for Qwen2.5-7B on transformers), while ``infer/fit --dtype fp32``, the web's ``dtype`` and
``estimate_inference(dtype="fp32")`` kept them in the checkpoint's bf16 beside fp32 activations (17.54 GiB), a model
no engine runs: transformers' ``from_pretrained(dtype=...)``, vLLM's and SGLang's ``--dtype`` load the unquantized
weights in that dtype. The truth is the published parameter count at 4 bytes each, and the other surface's answer."""

from __future__ import annotations

from pathlib import Path

import pytest

from cli_capture import run_json

# Qwen/Qwen2.5-7B: 7,615,616,512 parameters (model.safetensors.index.json total_size 15,231,233,024 B / 2, bf16)
QWEN25_7B_PARAMS = 7_615_616_512

REQUEST = """version: 1
title: fp32 serving
team: probe
contact: a@example.com
jobs:
  - name: fp32
    kind: inference
    model: {name: qwen2.5-7b}
    engine: transformers
    precision: fp32
    quantization: none
    traffic:
      concurrency: {typical: 2, peak: 2}
      context: {typical: 4k, peak: 4k}
      output: {typical: 256, peak: 256}
    service: {ongoing: true}
    resources: {device: a100-sxm-80gb, count: 1}
"""


def _weights(est: dict) -> int:
    return next(i["bytes"] for i in est["items"] if i["name"] == "weights")


def test_a_given_dtype_loads_the_unquantized_weights_in_it_on_every_surface(tmp_path: Path) -> None:
    argv = ("qwen2.5-7b", "--engine", "transformers", "--dtype", "fp32", "--context", "4k", "--concurrency", "2",
            "--output-tokens", "256")
    _, est = run_json("infer", *argv)
    assert _weights(est) >= 4 * QWEN25_7B_PARAMS  # fp32: 4 B per parameter, not bf16's 2
    _, fit = run_json("fit", *argv, "--device", "a100-sxm-80gb")
    assert fit["weights_format"] == "fp32" and _weights(fit["memory"]) == _weights(est)
    req = tmp_path / "fp32.yaml"
    req.write_text(REQUEST)
    _, plan = run_json("plan", str(req))
    job = plan["jobs"][0]
    assert job["facts"]["weights_format"] == "fp32"
    assert job["memory_estimate"]["totals"]["device"]["bytes"] == fit["memory_per_device"]
    # the TTFT fit states (transformers prefills the 2 prompts together: SpeedEstimate.batch_prefill)
    assert job["facts"]["ttft_peak"] == fit["speed"]["ttft_seconds"]
    import llmsizer
    py = llmsizer.estimate_inference("qwen2.5-7b", engine="transformers", dtype="fp32", context=4096, concurrency=2,
                                     output_tokens=256)
    assert py.item("weights").bytes == _weights(est)


@pytest.mark.parametrize("engine", ["vllm", "sglang"])
def test_vllm_and_sglang_cast_too_and_a_default_dtype_keeps_the_checkpoints(engine: str) -> None:
    """fp16 of a bf16 checkpoint: the same bytes, named fp16 (vLLM's --dtype half); no dtype given: the stored bf16."""
    _, cast = run_json("infer", "qwen2.5-7b", "--engine", engine, "--memory", "40GiB", "--dtype", "fp32")
    _, kept = run_json("infer", "qwen2.5-7b", "--engine", engine, "--memory", "40GiB")
    w = {a["name"]: a["value"] for a in cast["assumptions"]}
    assert w["weights"] == "fp32" and _weights(cast) >= 4 * QWEN25_7B_PARAMS
    assert {a["name"]: a["value"] for a in kept["assumptions"]}["weights"] == "bf16"
    assert 2 * QWEN25_7B_PARAMS <= _weights(kept) < 4 * QWEN25_7B_PARAMS


def test_llamacpp_runs_the_gguf_whatever_the_dtype() -> None:
    _, a = run_json("infer", "qwen2.5-7b", "--engine", "llamacpp", "--dtype", "fp32")
    _, b = run_json("infer", "qwen2.5-7b", "--engine", "llamacpp")
    assert _weights(a) == _weights(b)


@pytest.mark.parametrize("engine", ["transformers", "vllm"])
def test_a_named_unquantized_format_beside_a_dtype_is_loaded_in_the_dtype(engine: str) -> None:
    """Review finding: ``--weights bf16 --dtype fp32`` kept 2 B per parameter beside fp32 activations, and fit's
    "fits at bf16" hint for ``--dtype fp32`` pointed at that mix. vLLM's --dtype float32 and transformers'
    from_pretrained(dtype=torch.float32) load the bf16 checkpoint in fp32: 4 B per parameter, as with no --weights."""
    _, named = run_json("infer", "qwen2.5-7b", "--engine", engine, "--memory", "40GiB", "--weights", "bf16",
                        "--dtype", "fp32")
    _, stored = run_json("infer", "qwen2.5-7b", "--engine", engine, "--memory", "40GiB", "--dtype", "fp32")
    assert _weights(named) >= 4 * QWEN25_7B_PARAMS and _weights(named) == _weights(stored)
    weights = next(a for a in named["assumptions"] if a["name"] == "weights")
    assert weights["value"] == "fp32" and weights["default"] is False
    _, hint = run_json("fit", "qwen2.5-7b", "--engine", engine, "--device", "l4", "--dtype", "fp32")
    assert hint["fits_at"] is None or hint["fits_at"]["weights"] not in ("bf16", "fp16")  # no rung the dtype undoes


def test_a_plan_with_no_hardware_fits_on_the_hardware_it_picks_for_a_precision(tmp_path: Path) -> None:
    """Review finding: the plan's hardware search ran at the checkpoint's bf16 while the plan then sized the job at
    its ``precision: fp32`` on that hardware, and failed its own pick ("Peak load does not fit: 1 x t4"). The search
    and the plan read the same dtype, so the pick fits."""
    req = tmp_path / "fp32-nohw.yaml"
    req.write_text(REQUEST.replace("qwen2.5-7b", "qwen2.5-3b").replace("engine: transformers", "engine: vllm")
                   .replace("    quantization: none\n", "").replace("    resources: {device: a100-sxm-80gb, count: 1}\n",
                                                                        ""))
    code, plan = run_json("plan", str(req))
    job = plan["jobs"][0]
    assert code == 0, [c for c in job.get("checks", []) if c.get("level") == "error"]
