"""probe21 C3: a bf16 run's duration and MFU named "the fp16 peak" on an RTX 4090, whose catalog entry lists only an
fp16 tensor rate (Device.peak_flops lets bf16 and fp16 stand in for each other). The number was right; the words
now name the dtype the GEMMs run in and the rate taken for it: "bf16 peak, the listed fp16 rate", on the train
text, the plan's MFU line and in Python (Duration.peak_name); a device that lists the dtype keeps "bf16 peak"."""

from __future__ import annotations

from pathlib import Path

from cli_capture import run
from llmsizer.catalog.hardware import builtin_catalog
from llmsizer.estimate.duration import training_duration_for
from llmsizer.models import load_model

TRAIN = ("train", "llama-3.1-8b", "--method", "lora", "--batch", "4", "--seq", "4096", "--grad-checkpointing", "full",
         "--tokens", "100M")


def test_the_premise_the_4090_lists_no_bf16_rate() -> None:
    cat = builtin_catalog().devices
    assert "bf16" not in cat["rtx-4090"].flops and "fp16" in cat["rtx-4090"].flops
    assert "bf16" in cat["h100-sxm"].flops


def test_train_text_names_the_precision_and_the_rate_taken() -> None:
    code, out, _ = run(*TRAIN, "--device", "rtx-4090")
    assert code in (0, 1)
    (line,) = [ln for ln in out.splitlines() if ln.startswith("duration:")]
    assert "FLOP/s (bf16 peak, the listed fp16 rate) on the GEMMs" in line
    assert line.endswith("over the wall clock at the bf16 peak, the listed fp16 rate)") and "fp16 peak" not in line
    code, out, _ = run(*TRAIN, "--device", "h100-sxm")
    (line,) = [ln for ln in out.splitlines() if ln.startswith("duration:")]
    assert "FLOP/s (bf16 peak) on the GEMMs" in line and line.endswith("at the bf16 peak)")


def test_python_and_the_plan_say_the_same(tmp_path: Path) -> None:
    d = training_duration_for(load_model("llama-3.1-8b"), builtin_catalog().devices["rtx-4090"], 1, 1e8,
                              {"method": "lora", "micro_batch": 4, "seq_len": 4096, "grad_checkpointing": "full"})
    assert (d.gemm_dtype, d.peak_key, d.peak_name) == ("bf16", "fp16", "bf16 peak, the listed fp16 rate")
    fp16 = training_duration_for(load_model("llama-3.1-8b"), builtin_catalog().devices["h100-sxm"], 1, 1e8,
                                 {"method": "lora", "precision": "fp16-mixed"})
    assert fp16.peak_name == "fp16 peak, the listed bf16 rate"  # fp16 GEMMs, timed at the rate the catalog lists
    req = tmp_path / "r.yaml"
    req.write_text("version: 1\ntitle: t\njobs:\n  - name: ft\n    kind: training\n    model: {name: llama-3.1-8b}\n"
                   "    method: lora\n    purpose: style\n    baseline_tried: true\n"
                   "    settings: {micro_batch: 4, seq_len: 4096, grad_checkpointing: full}\n"
                   "    dataset: {tokens: 100M tokens, sensitivity: internal}\n"
                   "    resources: {device: rtx-4090, count: 1}\n")
    code, _, _ = run("plan", str(req), "-o", str(tmp_path / "r.md"))
    assert "over the wall clock at the bf16 peak, the listed fp16 rate" in (tmp_path / "r.md").read_text()
