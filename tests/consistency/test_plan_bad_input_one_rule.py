"""A job's input that the estimate refuses on any hardware is bad input in every request surface, as in `infer` /
`train`: exit 2 with the same line, at the job's place (plan/inference.py ``refuse_bad_input``: the job's workload
sized with no device, as `infer` without --device sizes it; training: the estimate raises it through the plan).
What only the hardware refuses stays the plan's error check 'Cannot be fitted' (exit 1).

Independent truth: `infer` / `train` of the same model and flags through the real CLI (their exit 2 and line).
Before the rule, an engine given a format it runs on no device (llama.cpp given AWQ) was the plan's error check
'Cannot be fitted' (exit 1) and `capacity check`'s DOES NOT FIT; images on a text-only model were split out alone.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from cli_capture import run

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
INVENTORY = EXAMPLES / "provider" / "inventory.yaml"
SURFACES = (("plan",), ("request", "check"), ("capacity", "check"))

INFERENCE = """version: 1
jobs:
  - name: chat
    kind: inference
    model: {{name: {model}}}
{extra}    traffic:
      concurrency: {{typical: 1, peak: 2}}
      context: {{typical: 4096, peak: 4096}}
    resources: {{device: {device}, count: 1}}
"""
TRAINING = """version: 1
jobs:
  - name: tune
    kind: training
    model: {{name: {model}}}
    method: lora
    peft: {{rank: 16}}
    settings: {{micro_batch: 1, seq_len: 2048{settings}}}
    dataset: {{tokens: 10M tokens}}
    resources: {{device: h100-sxm, count: {count}}}
"""


def _surfaces(tmp_path: Path, text: str) -> list[tuple[int, str, str]]:
    req = tmp_path / "request.yaml"
    req.write_text(text)
    return [run(*cmd, str(req), *(("--inventory", str(INVENTORY)) if cmd[0] == "capacity" else ()))
            for cmd in SURFACES]


@pytest.mark.parametrize("infer_args, extra", [
    # a format the engine runs on no device
    (("--engine", "llamacpp", "--weights", "awq"), "    engine: llamacpp\n    quantization: awq\n"),
    # images on a text-only model (the split this rule generalises)
    (("--engine", "llamacpp", "--weights", "q4_k_m", "--images", "2"),
     "    engine: llamacpp\n    quantization: q4_k_m\n    media:\n      images: 2\n"),
])
def test_an_inference_refusal_on_any_hardware_is_bad_input(tmp_path: Path, infer_args: tuple[str, ...],
                                                          extra: str) -> None:
    model = "qwen2.5-1.5b-instruct"
    code, _, err = run("infer", model, *infer_args)
    assert code == 2, err
    line = err.strip().split(": error: ", 1)[1]
    for device in ("h100-sxm", "intel-xeon-spr-8ch"):
        for cmd, (code, out, err2) in zip(SURFACES, _surfaces(tmp_path, INFERENCE.format(
                model=model, extra=extra, device=device)), strict=True):
            assert code == 2 and line in err2 and "job 'chat'" in err2 and not out, (cmd, device, err2, out[-500:])


@pytest.mark.parametrize("model, train_args, settings, count", [
    # a LoRA on a model none of whose modules the targets name
    ("mamba-codestral-7b-v0.1", ("--method", "lora"), "", 1),
    # tensor parallelism that does not divide the heads
    ("qwen2.5-1.5b-instruct", ("--method", "lora", "--tp", "5", "--gpus", "5"), ", tp: 5", 5),
])
def test_a_training_refusal_on_any_hardware_is_bad_input(tmp_path: Path, model: str, train_args: tuple[str, ...],
                                                        settings: str, count: int) -> None:
    code, _, err = run("train", model, *train_args)
    assert code == 2, err
    # the request file's own key where the CLI names its flag ('--tp 5' -> 'tp 5': the file says 'tp: 5')
    line = re.sub(r"--([a-z][a-z-]*)", lambda m: m.group(1).replace("-", "_"), err.strip().split(": error: ", 1)[1])
    for cmd, (code, out, err2) in zip(SURFACES, _surfaces(tmp_path, TRAINING.format(
            model=model, settings=settings, count=count)), strict=True):
        assert code == 2 and line in err2 and "job 'tune'" in err2 and not out, (cmd, err2, out[-500:])


@pytest.mark.parametrize("extra, device, infer_args", [
    ("    engine: sglang\n", "intel-xeon-spr-8ch", ("--engine", "sglang")),  # SGLang models GPU serving
    ("    engine: vllm\n    quantization: fp8\n", "v100-sxm2-32gb", ("--engine", "vllm", "--weights", "fp8")),
])
def test_a_refusal_of_the_hardware_stays_the_plans_error_check(tmp_path: Path, extra: str, device: str,
                                                              infer_args: tuple[str, ...]) -> None:
    model = "qwen2.5-1.5b-instruct"
    assert run("infer", model, *infer_args)[0] == 0  # fine with no device named
    assert run("infer", model, *infer_args, "--device", device)[0] == 2  # refused on this one
    code, out, err = _surfaces(tmp_path, INFERENCE.format(model=model, extra=extra, device=device))[0]
    assert code == 1 and "Cannot be fitted" in out, (err, out[-800:])
