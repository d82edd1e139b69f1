"""``offload optimizer`` is DeepSpeed's ZeRO-Offload, which runs at ZeRO stage 1, 2 or 3 only.

DeepSpeed's own rule: ``DeepSpeedZeroOffloadOptimizerConfig`` "Valid with stage 1, 2, and 3"
(deepspeed/runtime/zero/offload_config.py @edaa7221 line 56). At stage 0 no ZeRO optimizer moves the states: the engine
still builds DeepSpeedCPUAdam (runtime/engine.py lines 2108-2110) and its step asserts "CPUAdam param is on ... and must
be 'cpu'" (ops/adam/cpu_adam.py lines 232-234). Before, llmsizer sized such a run (zero 0, no FSDP) with the optimizer,
master weights and gradients in host RAM, exit 0. Where the stage is chosen by the memory it is searched from ZeRO-1.
"""

from __future__ import annotations

import pytest

from cli_capture import run_cli
from llmsizer import estimate_training
from llmsizer.errors import FieldError

# DeepSpeed's config docstring, the stages it names
DEEPSPEED_OFFLOAD_STAGES = (1, 2, 3)


@pytest.mark.parametrize("stage", [0, 1, 2, 3])
def test_offload_optimizer_runs_at_deepspeeds_stages_only(stage: int):
    fields = dict(offload="optimizer", zero=stage, gpus=2)
    if stage in DEEPSPEED_OFFLOAD_STAGES:
        est = estimate_training("llama-3.2-1b", **fields)
        assert next(i for i in est.items if i.name == "host_optimizer_states").bytes > 0
        return
    with pytest.raises(FieldError) as e:
        estimate_training("llama-3.2-1b", **fields)
    assert e.value.field == "offload" and "zero" in e.value.fields and "ZeRO stage 1, 2 or 3" in str(e.value)


def test_offload_optimizer_under_fsdp_is_refused_as_fsdps_own():
    # FSDP offloads parameters, gradients and states together: not ZeRO's refusal, FSDP's (probe25 D5)
    with pytest.raises(FieldError) as e:
        estimate_training("llama-3.2-1b", offload="optimizer", fsdp="full", gpus=2)
    assert e.value.field == "offload" and "fsdp" in e.value.fields and "offload params" in str(e.value)


@pytest.mark.parametrize("gpus", [1, 2])
def test_a_chosen_stage_starts_at_zero_one(gpus: int):
    # was ZeRO 0 (the least-sharded stage that fits) with its states in host RAM, a run DeepSpeed refuses
    est = estimate_training("llama-3.2-1b", offload="optimizer", gpus=gpus, device="h100-sxm")
    zero = next(a for a in est.assumptions if a.name == "zero")
    assert zero.value in DEEPSPEED_OFFLOAD_STAGES and "least-sharded" in zero.why, zero


@pytest.mark.parametrize("argv", [
    ["train", "llama-3.2-1b", "--offload", "optimizer"],
    ["train", "llama-3.2-1b", "--offload", "optimizer", "--device", "h100-sxm", "--zero", "0"],
    ["fit", "llama-3.2-1b", "--train", "--offload", "optimizer", "--device", "h100-sxm", "--count", "2", "--zero", "0"],
])
def test_cli_refuses_stage_zero_in_one_line_with_the_flags(argv: list[str]):
    r = run_cli(*argv)
    assert r.returncode == 2 and r.stdout == "" and r.stderr.count("\n") == 1, (r.returncode, r.stderr)
    assert "--offload optimizer" in r.stderr and "--zero 1, 2 or 3" in r.stderr and "DeepSpeed" in r.stderr
