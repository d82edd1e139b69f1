"""`train --device`: a micro-step whose kernel launches outlast the device's work says so (formulas/
launch_overhead.py eq. K1), through the real entry point; the JSON carries the same step (one answer)."""

from __future__ import annotations

import pytest
from cli_run import answer, run

SMALL = ["train", "qwen2.5-0.5b", "--method", "lora", "--micro-batch", "1", "--device", "h100-sxm", "--tokens", "1e7"]


def test_a_short_micro_step_is_host_bound_and_a_long_one_is_not(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run([*SMALL, "--seq-len", "256"], capsys)
    assert code == 0 and "host-bound" in out
    code, out, _ = run([*SMALL, "--seq-len", "8192", "--grad-checkpointing", "full"], capsys)
    assert code == 0 and "host-bound" not in out
    _, est = answer([*SMALL, "--seq-len", "256"], capsys)
    step = est["duration"]["step"]
    assert step["launch_seconds"] == pytest.approx(step["compute_seconds"]) and step["launch_seconds"] > 0
