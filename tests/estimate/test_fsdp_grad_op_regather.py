"""SHARD_GRAD_OP keeps each unit gathered from its forward to its backward (torch FSDP2
``fully_shard(reshard_after_forward=False)``; FSDP1 ``ShardingStrategy.SHARD_GRAD_OP``), so a step re-gathers no
parameters in the backward, with or without tensor parallelism beside it. The step time's stated payload said 0 B
without TP and the full re-gather (13.05 GB for Qwen2.5-7B) with ``--tp 2``, though neither was timed."""

from __future__ import annotations

import pytest

from cli.cli_run import answer

BASE = ["train", "qwen2.5-7b", "--gpus", "8", "--device", "h100-sxm", "--tokens", "1B"]


def _stated(out: dict, name: str) -> int:
    return next(a["value"] for a in out["duration"]["assumptions"] if a["name"] == name)


@pytest.mark.parametrize("tp", [[], ["--tp", "2"]])
def test_no_backward_regather_under_shard_grad_op(tp: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    code, grad_op = answer([*BASE, "--fsdp", "grad_op", *tp], capsys)
    assert code == 0 and _stated(grad_op, "fsdp_all_gather_backward_bytes") == 0
    assert _stated(grad_op, "fsdp_all_gather_forward_bytes") > 0
    code, full = answer([*BASE, "--fsdp", "full", *tp], capsys)  # FULL_SHARD re-gathers what it resharded
    assert code == 0 and _stated(full, "fsdp_all_gather_backward_bytes") > 0
