"""torch FSDP has no optimizer-states-only offload (probe25 D5).

FSDP2's CPUOffloadPolicy "offloads parameters, gradients, and optimizer states to CPU" (torch 2.13.0
distributed/fsdp/_fully_shard/_fsdp_api.py lines 183-189); FSDP1's CPUOffload(offload_params=True) the same. So
``--fsdp ... --offload optimizer`` (DeepSpeed's offload_optimizer) is refused, naming --offload params, and fit's
hint never names it."""

from __future__ import annotations

import subprocess
import sys

import pytest

from llmsizer import estimate_training
from llmsizer.errors import FieldError

CLI = [sys.executable, "-m", "llmsizer"]


@pytest.mark.parametrize("fsdp", ["full", "hybrid", "grad_op"])
def test_fsdp_with_optimizer_offload_is_refused(fsdp: str) -> None:
    with pytest.raises(FieldError) as e:
        estimate_training("llama-3.2-1b", method="full", gpus=8, fsdp=fsdp, offload="optimizer")
    assert e.value.field == "offload" and "offload params" in str(e.value)


def test_cli_refuses_in_one_line_exit_2() -> None:
    r = subprocess.run([*CLI, "train", "llama-3.2-1b", "--method", "full", "--gpus", "8", "--fsdp", "full",
                        "--offload", "optimizer", "--device", "h100-sxm"], capture_output=True, text=True)
    assert r.returncode == 2 and r.stdout == ""
    assert len(r.stderr.strip().splitlines()) == 1 and "--offload params" in r.stderr


def test_fit_hint_under_fsdp_never_names_optimizer_offload() -> None:
    # probe25's case: 70B full under FSDP2 on 16 H100s does not fit; the hint named --offload optimizer before
    r = subprocess.run([*CLI, "fit", "llama-3.1-70b", "--train", "--method", "full", "--gpus", "16", "--fsdp", "full",
                        "--grad-checkpointing", "full", "--batch", "1", "--seq", "4096", "--device", "h100-sxm",
                        "--count", "16", "--precision", "fsdp-bf16-mixed"], capture_output=True, text=True)
    assert r.returncode == 1 and not r.stderr, r.stderr  # fit's "does not fit" status
    hint = [ln for ln in r.stdout.splitlines() if ln.startswith("hint:")]
    assert hint and "--offload optimizer" not in r.stdout and "--offload params" in hint[0]
