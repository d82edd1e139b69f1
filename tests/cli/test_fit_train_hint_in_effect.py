"""A ``fit --train`` hint never names a setting the run already has (probe25 C2): QLoRA checkpoints every decoder
layer by default (peft prepare_model_for_kbit_training(use_gradient_checkpointing=True), specs/training.py
default_grad_checkpointing), so its 70B on 2 x RTX 4090 under FSDP is told ``--offload params`` alone, not
``--grad-checkpointing full --offload params``; a LoRA run (default: no checkpointing) is still told to turn it on."""

from __future__ import annotations

from cli_capture import run, run_json
from llmsizer.estimate.fit import fit_training

MODEL = "llama-3.1-70b"


def test_qlora_hint_leaves_out_its_default_checkpointing() -> None:
    code, d = run_json("fit", MODEL, "--train", "--method", "qlora", "--device", "rtx-4090", "--count", "2",
                       "--fsdp", "full")
    assert code == 1 and d["fits"] is False
    at = d["fits_at"]
    assert at is not None and at["changes"] == {"offload": "params"}
    code, out, _ = run("fit", MODEL, "--train", "--method", "qlora", "--device", "rtx-4090", "--count", "2",
                       "--fsdp", "full")
    hint = next(line for line in out.splitlines() if line.startswith("hint:"))
    assert "(rerun with --offload params)" in hint and "--grad-checkpointing" not in hint
    # the run the hint names fits, and its checkpointing is the 'full' that was left out
    r = fit_training(MODEL, "rtx-4090", 2, method="qlora", fsdp="full", offload="params")
    assert r.fits and dict((a.name, a.value) for a in r.estimate.assumptions)["grad_checkpointing"] == "full"


def test_lora_hint_still_names_checkpointing() -> None:
    code, d = run_json("fit", "llama-3.3-70b-instruct", "--train", "--method", "lora", "--device", "a100-sxm-80gb",
                       "--count", "2")
    assert code == 1 and d["fits_at"]["changes"] == {"grad_checkpointing": "full", "offload": "params"}
