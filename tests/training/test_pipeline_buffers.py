"""torch's pipeline stages at their boundary (formulas/parallelism.py eq. PP3) against real steps of
torch.distributed.pipelining on the CPU (#12): ``pp_buffers_step.py`` runs ``Schedule1F1B`` over three gloo ranks
and ``ScheduleInterleaved1F1B`` (two stages a rank) over two, with no FSDP and no data parallelism, and reads, at
every backward, each stage's gradient and activation receive buffers and the stage outputs its forward cache holds.
Every run of torch's pipelining keeps them, with or without FSDP (``timeline.torch_pipelining``), and under
interleaving each of the rank's stages keeps its own, as the chain's first, middle or last stage."""

from __future__ import annotations

from typing import Any

import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")

from ranks import TINY_LLAMA as LLAMA  # noqa: E402
from ranks import run_step  # noqa: E402

from llmsizer.estimate.training import estimate_training  # noqa: E402
from llmsizer.formulas.parallelism import (  # noqa: E402
    pipeline_rank_boundary_bytes,
    pipeline_stage_boundary_bytes,
)
from llmsizer.readers.hf_config import spec_from_config  # noqa: E402

ONE = dict(width=32, microbatches=6, batch=12, seq=8, blocks=2)  # Schedule1F1B, 3 ranks
INTERLEAVED = dict(width=32, microbatches=4, batch=8, seq=8, blocks=2, virtual=2)  # 2 ranks x 2 stages


@pytest.fixture(scope="module")
def one() -> dict[str, Any]:
    return run_step("pp_buffers_step.py", ONE, 3)


@pytest.fixture(scope="module")
def interleaved() -> dict[str, Any]:
    return run_step("pp_buffers_step.py", INTERLEAVED, 2)


def _stage_bytes(s: dict[str, int], chain: int, b: int) -> int:
    """What eq. PP3 counts of one measured stage: its receive buffers and (but on the chain's last stage, whose
    output is the loss's input) its cached stage outputs, less the in-flight micro-batches' activation receive
    buffers (the first layer's input: counted with the activations)."""
    out = s["grad_recv_bytes"] + s["act_recv_bytes"]
    if s["index"] < chain - 1:
        out += s["fwd_cache_output_bytes"]
    if s["index"] > 0:
        out -= s["fwd_cache_outputs"] * b
    return out


def _check(measured: dict[str, Any], case: dict[str, Any]) -> list[int]:
    """Eq. PP3 at every backward of every rank, and its largest sum a rank (the estimate's) against the measured;
    returns each rank's largest, in boundary tensors."""
    ranks = measured["ranks"]
    pp, v, m = len(ranks), case.get("virtual", 1), case["microbatches"]
    chain = pp * v
    largest = []
    for r, seen in enumerate(ranks):
        b = seen["boundary_bytes"]
        sums = []
        for moment in seen["backwards"]:
            for s in moment["stages"]:
                g = s["index"]
                # one buffer a micro-batch: gradients on all but the chain's last, activations on all but its first
                assert s["grad_recv_buffers"] == (m if g < chain - 1 else 0)
                assert s["act_recv_buffers"] == (m if g > 0 else 0)
                assert pipeline_stage_boundary_bytes(g, chain, m, s["fwd_cache_outputs"], b) == _stage_bytes(
                    s, chain, b)
            sums.append(sum(_stage_bytes(s, chain, b) for s in moment["stages"]))
        assert len(sums) == v * m
        assert pipeline_rank_boundary_bytes(r, pp, v, m, b) == max(sums), r
        largest.append(max(sums) // b)
    return largest


def test_1f1b_stage_buffers_match_torch_pipelining(one: dict[str, Any]) -> None:
    """Schedule1F1B, 3 stages, 6 micro-batches: stage k holds min(3 - k, 6) outputs at its first backward."""
    ranks = one["ranks"]
    for k, seen in enumerate(ranks):
        assert seen["backwards"][0]["stages"][0]["fwd_cache_outputs"] == min(len(ranks) - k, ONE["microbatches"])
    assert _check(one, ONE) == [6 + 3, 2 * 6, 6 - 1]


def test_interleaved_stages_keep_their_own_buffers(interleaved: dict[str, Any]) -> None:
    """ScheduleInterleaved1F1B, PP 2 x 2 stages, 4 micro-batches: rank 0 holds the chain's first stage and a middle
    one, rank 1 a middle one and the last; each keeps its own receive buffers (what one stage a rank would count:
    rank 0 4 + 2, rank 1 4 - 1)."""
    m = INTERLEAVED["microbatches"]
    assert _check(interleaved, INTERLEAVED) == [m + m + 2 * m, 2 * m + m]


def _estimate_buffers(**fields: Any) -> tuple[int, int]:
    """(the peak stage, its pipeline_buffers) of the tiny Llama, one 128-token sequence a micro-batch."""
    est = estimate_training(spec_from_config(LLAMA, name="llama-tiny"), micro_batch=1, seq_len=128, **fields)
    stage = int(est.details["peak_phase"].rsplit("stage ", 1)[1].rstrip(")"))
    assert "optimizer step" not in est.details["peak_phase"]
    return stage, est.details["peak_parts"].get("pipeline_buffers", 0)


RESIDUAL = 128 * 256 * 2  # one micro-batch's [1, 128, 256] bf16 residual stream


def test_estimate_counts_them_without_fsdp(one: dict[str, Any]) -> None:
    """torchtitan's PP with no data parallelism (its own split, pure bf16): the peak stage's pipeline_buffers are
    the measured run's boundary tensors of that stage (same pp and micro-batches), each a residual stream."""
    stage, buffers = _estimate_buffers(precision="bf16", gpus=3, pp=3, grad_accumulation=6,
                                       pipeline_split="torchtitan")
    assert buffers == _check(one, ONE)[stage] * RESIDUAL


def test_estimate_counts_each_interleaved_stage(interleaved: dict[str, Any]) -> None:
    stage, buffers = _estimate_buffers(precision="bf16", gpus=2, pp=2, virtual_stages=2, grad_accumulation=4,
                                       pipeline_split="torchtitan-9dec370")
    assert buffers == _check(interleaved, INTERLEAVED)[stage] * RESIDUAL


def test_which_runs_are_torch_pipelining() -> None:
    """FSDP1 under PP runs in torch's pipeline stages too (its PP1/PP2 are FSDP2's only); the even split without
    FSDP is Megatron-LM's or DeepSpeed's pipeline engine: no torch stage buffers."""
    common = dict(precision="fsdp-bf16-mixed", gpus=4, pp=2, grad_accumulation=4, fsdp="full")
    for version in (2, 1):  # both peak stages hold eq. PP3's count (checked against torch above), bf16 streams
        stage, buffers = _estimate_buffers(**common, fsdp_version=version)
        assert buffers == pipeline_rank_boundary_bytes(stage, 2, 1, 4, RESIDUAL) > 0
    assert _estimate_buffers(precision="bf16", gpus=4, pp=2, grad_accumulation=4)[1] == 0
    assert _estimate_buffers(precision="bf16", gpus=4, pp=2, grad_accumulation=4, zero=1)[1] == 0
    # torchtitan's split with DDP over the other ranks, or with the optimizer offloaded: torch's stages still
    assert _estimate_buffers(precision="bf16", gpus=4, pp=2, grad_accumulation=4, pipeline_split="torchtitan")[1] > 0
    assert _estimate_buffers(**common, offload="params")[1] > 0
