"""probe20 D3: an Apple chip's training step (PyTorch on MPS) was timed as its GEMMs alone: no memory-bound kernels
(formulas/elementwise_traffic.py eq. (E7)), no optimizer step (formulas/optimizer_step.py), no host time per launched
kernel (formulas/launch_overhead.py), while the stand-in GEMM utilisation it borrows (the uncalibrated rule,
efficiency.TRAINING_UTILIZATION_UNCALIBRATED) was fitted on CUDA rows with those terms timed apart. Truth: Apple's
published bandwidth of the M3 Max's 40-core-GPU bin, 400 GB/s; the E7 bytes are the kernels' traffic, a property of
the model and the run (checked against real CPU passes in tests/formulas), the same on any device; the kernels
launched per micro-step likewise."""

from __future__ import annotations

import pytest

from llmsizer import fit_training
from llmsizer.estimate import efficiency as E

RUN = dict(method="lora", micro_batch=2, seq_len=2048, grad_checkpointing="full")
APPLE_M3_MAX_BANDWIDTH = 400e9  # Apple: M3 Max (16-core CPU, 40-core GPU) memory bandwidth 400 GB/s


def _time(device: str):
    return fit_training("qwen3-8b", device, tokens=50_000_000, **RUN).training_time


def _note(t, name: str):
    return next(a["value"] for a in t["assumptions"] if a["name"] == name)


def test_apple_step_times_the_memory_bound_kernels_at_its_own_bandwidth():
    apple, ada = _time("apple-m3-max-64gb"), _time("rtx-4090")
    s_apple, s_ada = apple["step"], ada["step"]
    per_token = _note(apple, "elementwise_bytes_per_token")
    assert per_token == _note(ada, "elementwise_bytes_per_token")  # the kernels' traffic, not the device's
    tokens = RUN["micro_batch"] * RUN["seq_len"]
    eta = E.MEMORY_BOUND_BANDWIDTH_APPLE.expected
    assert s_apple["elementwise_seconds"] == pytest.approx(tokens * per_token / (APPLE_M3_MAX_BANDWIDTH * eta), rel=1e-3)
    assert s_apple["elementwise_seconds"] > 0 and s_apple["optimizer_seconds"] > 0
    # the same kernels launched per micro-step as on the CUDA card, each with the host's time per op
    assert _note(apple, "kernels_per_micro_step") == _note(ada, "kernels_per_micro_step")
    assert s_apple["launch_seconds"] == pytest.approx(s_ada["launch_seconds"])
    # the step is more than its GEMMs: compute covers the elementwise time (no attention kernel timed apart here)
    assert s_apple["compute_seconds"] > s_apple["elementwise_seconds"]


def test_a_cpu_step_keeps_its_terms_without_a_launch_queue():
    """A CPU runs each op on the host (no device queue to overlap): memory-bound kernels and the optimizer step at its
    RAM's share, no launch term."""
    t = fit_training("qwen2.5-0.5b", "intel-xeon-spr-8ch", memory=64 * 2**30, tokens=1_000_000, **RUN).training_time
    assert t["step"]["elementwise_seconds"] > 0 and t["step"]["optimizer_seconds"] > 0 and t["step"]["launch_seconds"] == 0
