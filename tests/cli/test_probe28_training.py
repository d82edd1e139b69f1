"""probe28's training defects, each through the real CLI with the verdict the framework's own rule gives.

- D1: DeepSpeed's ``PipelineEngine.__init__`` asserts ``zero_optimization_stage() < ZeroStageEnum.gradients``
  ("ZeRO-2 and ZeRO-3 are incompatible with pipeline parallelism", deepspeed/runtime/pipe/engine.py:76-77
  @edaa7221): with pp > 1 a stated ZeRO-2/3 is refused (exit 2, one line) and the stage chosen for memory is 0 or
  1. AutoTP tensor parallelism with ZeRO-3 is supported (deepspeed/runtime/engine.py:666-669): answered.
- D4: FSDP at the default precision (bf16-mixed: torch.autocast's bf16 weight copies held to the backward) tries
  FSDP's own mixed precision (fsdp-bf16-mixed) before leaving full fine-tuning for LoRA.
"""

from __future__ import annotations

import pytest

from cli_capture import run, run_json
from llmsizer.estimate.fit import TRAINING_LADDER, fit_training

MODEL = "llama-3.1-70b"


def _zero(d: dict) -> int:
    return next(int(a["value"]) for a in d["assumptions"] if a["name"] == "zero")


@pytest.mark.parametrize("zero,pp,gpus", [(2, 4, 32), (3, 2, 8)])
def test_deepspeed_zero2_3_with_pipeline_is_refused(zero: int, pp: int, gpus: int) -> None:
    code, out, err = run("train", MODEL, "--zero", str(zero), "--pp", str(pp), "--gpus", str(gpus))
    assert code == 2 and out == ""
    assert len(err.strip().splitlines()) == 1 and "incompatible with pipeline parallelism" in err
    assert "pipe/engine.py:76-77" in err


def test_chosen_stage_under_pipeline_is_at_most_one() -> None:
    argv = ("--pp", "4", "--grad-checkpointing", "full")
    code, d = run_json("train", MODEL, *argv, "--gpus", "32", "--device", "h100")
    assert code in (0, 1)
    stage = _zero(d)
    assert stage in (0, 1)
    # the verdict is that of the stage stated (the one DeepSpeed runs), not of a stage it refuses
    code1, d1 = run_json("train", MODEL, *argv, "--gpus", "32", "--device", "h100", "--zero", str(stage))
    assert code1 == code and d1["details"]["fits"] == d["details"]["fits"]
    code, f = run_json("fit", MODEL, "--train", *argv, "--count", "32", "--device", "h100")
    assert _zero(f) in (0, 1) and f["fits"] == d["details"]["fits"]


def test_zero3_with_tensor_parallelism_is_answered() -> None:
    code, _, err = run("train", MODEL, "--zero", "3", "--tp", "2", "--gpus", "8")
    assert code == 0 and "pipeline" not in err


def test_megatron_distributed_optimizer_with_pipeline_is_answered() -> None:
    # Megatron-Core's distributed optimizer runs beside its own pipeline; the refusal is DeepSpeed's engine's
    code, _, _ = run("train", MODEL, "--precision", "megatron-bf16", "--zero", "2", "--pp", "2", "--gpus", "8")
    assert code == 0


def test_fsdp_ladder_tries_fsdp_mixed_precision_before_lora() -> None:
    args = ("--device", "h100", "--count", "8", "--fsdp", "full", "--seq", "4096")
    code, d = run_json("fit", MODEL, "--train", *args)
    assert code == 1 and d["fits"] is False
    changes = d["fits_at"]["changes"]
    assert changes.get("precision") == "fsdp-bf16-mixed" and "method" not in changes  # full fine-tuning kept
    fields = {"fsdp": "full", "seq_len": 4096}
    assert fit_training(MODEL, "h100", 8, **fields, **changes).fits
    for step in TRAINING_LADDER[:TRAINING_LADDER.index(changes)]:  # the least change: no earlier step fits
        try:
            assert not fit_training(MODEL, "h100", 8, **fields, **step).fits
        except ValueError:  # a step FSDP refuses (DeepSpeed's optimizer-only offload)
            pass
    _, out, _ = run("fit", MODEL, "--train", *args)
    assert "--precision fsdp-bf16-mixed" in out and "--method lora" not in out.split("hint:")[1].splitlines()[0]
