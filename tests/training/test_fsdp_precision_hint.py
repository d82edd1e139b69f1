"""A full FSDP run under the default precision (bf16-mixed: torch.autocast's bf16 copies of the fp32 weights held
to the backward) that does not fit names FSDP's own mixed precision and what it needs, by the one estimator.

New-user probe: Llama-3.1-70B, full, FSDP full over 16 H100s held 129 GiB of autocast weight copies per device
and said nothing of fsdp-bf16-mixed (FSDP2 MixedPrecisionPolicy(param_dtype=bf16), as torchtitan and torchtune
train), which holds none. The number in the warning is the estimate's own for that precision (every other field
as given); the memory it stands for is tested against real FSDP2 runs in tests/training/test_fsdp_gather_units.py
and the torchtitan validation rows. The default precision stays bf16-mixed."""

from __future__ import annotations

import re

from cli_capture import run_cli
from llmsizer import estimate_training
from llmsizer.estimate.training.compose import FSDP_MIXED_PRECISION
from llmsizer.units import format_bytes

RUN = dict(method="full", fsdp="full", gpus=16, device="h100")


def _hint(est) -> list[str]:
    return [w for w in est.warnings if w.startswith(FSDP_MIXED_PRECISION + ":")]


def test_a_run_that_does_not_fit_names_fsdp_mixed_precision_with_its_own_estimate():
    est = estimate_training("llama-3.1-70b", **RUN)
    alt = estimate_training("llama-3.1-70b", precision="fsdp-bf16-mixed", **RUN)
    assert not est.details["fits"] and est.item("autocast_weight_copies").bytes > 100 * 2**30
    assert next(a.value for a in est.assumptions if a.name == "precision") == "bf16-mixed"  # the default kept
    assert not any(i.name == "autocast_weight_copies" and i.bytes for i in alt.items)
    (hint,) = _hint(est)
    need = alt.total("device")[1]
    assert "with --precision fsdp-bf16-mixed" in hint and f"it needs {format_bytes(need)} per device" in hint, hint
    assert format_bytes(est.item("autocast_weight_copies").bytes) in hint
    assert hint.endswith("which fits" if alt.details["fits"] else "still over the budget")
    assert need < est.total("device")[1]
    done = run_cli("train", "llama-3.1-70b", "--method", "full", "--fsdp", "full", "--gpus", "16", "--device", "h100")
    assert re.search(rf"warning: {FSDP_MIXED_PRECISION}: .* it needs {re.escape(format_bytes(need))} per device",
                     done.stdout + done.stderr)


def test_no_hint_where_it_would_not_help():
    assert not _hint(estimate_training("llama-3.1-70b", precision="fsdp-bf16-mixed", **RUN))  # already chosen
    assert not _hint(estimate_training("llama-3.1-70b", method="full", gpus=16, device="h100", zero=3))  # no FSDP
    fits = estimate_training("qwen2.5-0.5b", **RUN)
    assert fits.details["fits"] and not _hint(fits)
    assert not _hint(estimate_training("llama-3.1-70b", method="full", fsdp="full", gpus=16))  # no memory to judge
