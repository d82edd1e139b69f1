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


# Llama-3.1-8B's config.json (meta-llama/Llama-3.1-8B): hidden 4096, 32 layers, intermediate 14336, 32 heads of 128,
# 8 K/V heads. One decoder block: q, o 4096 x 4096; k, v 4096 x 1024; gate, up, down 4096 x 14336; two RMSNorms.
LLAMA31_8B_BLOCK = 2 * 4096 * 4096 + 2 * 4096 * 1024 + 3 * 4096 * 14336 + 2 * 4096
LLAMA31_8B_LAYERS = 32
FLOAT8 = ["train", "llama-3.1-8b", "--gpus", "8", "--device", "h100-sxm", "--tokens", "1B", "--float8", "--compile"]


@pytest.mark.parametrize("micro_batch, exposed", [(1, True), (2, False)])
def test_grad_op_is_faster_than_fsdp1_full_shard_by_the_backward_all_gather(
        micro_batch: int, exposed: bool, capsys: pytest.CaptureFixture[str]) -> None:
    """FULL_SHARD reshards each unit after its forward and all-gathers it again before its backward; SHARD_GRAD_OP
    does not reshard after the forward, so it skips that backward all-gather (torch 2.13 torch/distributed/fsdp/api.py
    lines 35-49, ShardingStrategy). Llama-3.1-8B float8 + compile on 8 H100 (FSDP1, fp32 parameters gathered): the
    full shard's backward all-gather is every decoder block (torch's default wrap keeps the root unit, embedding and
    output, gathered), 32 x 218.1M params x 4 B = 27.92 GB, timed as a ring all-gather, (n - 1) / n of the payload
    at the bus bandwidth (nccl-tests doc/PERFORMANCE.md: all-gather busbw = algbw x (n - 1) / n). grad_op's step is
    shorter by what of it compute did not hide (micro-batch 1: 69,944 -> 72,909 tokens/s); where compute hides both
    (micro-batch 2) the two run alike: the right direction, by that mechanism only."""
    mb = ["--micro-batch", str(micro_batch)]
    code, full = answer([*FLOAT8, *mb, "--fsdp", "full", "--fsdp-version", "1"], capsys)
    assert code == 0
    code, grad_op = answer([*FLOAT8, *mb, "--fsdp", "grad_op"], capsys)
    assert code == 0
    regather = LLAMA31_8B_LAYERS * LLAMA31_8B_BLOCK * 4
    assert _stated(full, "fsdp_all_gather_backward_bytes") == regather == 27_918_336_000
    assert _stated(grad_op, "fsdp_all_gather_backward_bytes") == 0
    for name in ("fsdp_all_gather_forward_bytes", "fsdp_reduce_scatter_bytes"):  # the rest of the traffic alike
        assert _stated(full, name) == _stated(grad_op, name)
    fs, gs = full["duration"]["step"], grad_op["duration"]["step"]
    assert fs["compute_seconds"] == gs["compute_seconds"] and fs["bus_bandwidth"] == gs["bus_bandwidth"]
    n = 8
    assert fs["comm_seconds"] - gs["comm_seconds"] == pytest.approx(regather * (n - 1) / n / fs["bus_bandwidth"],
                                                                    rel=1e-9)
    tps_full, tps_grad_op = full["duration"]["tokens_per_second"], grad_op["duration"]["tokens_per_second"]
    if exposed:
        assert fs["exposed_comm_seconds"] > gs["exposed_comm_seconds"] > 0
        assert tps_grad_op > tps_full
        assert fs["step_seconds"] - gs["step_seconds"] == pytest.approx(
            fs["exposed_comm_seconds"] - gs["exposed_comm_seconds"], rel=1e-9)
    else:
        assert tps_grad_op == pytest.approx(tps_full, rel=1e-12)
