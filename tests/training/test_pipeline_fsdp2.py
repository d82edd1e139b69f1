"""FSDP2 inside a pipeline stage (formulas/parallelism.py eqs. PP1, PP2) against real FSDP2 micro-batch steps on the
CPU (#12).

``fsdp_pp_step.py`` wraps a small random-weight Llama as torchtitan does when pipeline parallelism is on
(``reshard_after_forward=False``, bf16 parameters, fp32 reduction) over two gloo ranks and runs every micro-batch's
backward but the last with the settings torch's pipeline stage gives an FSDP stage (no reshard after backward, no
gradient sync). What each rank then holds is read from FSDP2's own parameter objects: every parameter stays
unsharded (its full bf16 all-gather output beside the fp32 shard), and the unsharded gradients accumulate in the
fp32 reduce dtype. The torchtitan 405B PP rows (PM1062-PM1067) moved from -49..-56 % to -13..-25 % with these terms.
"""

from __future__ import annotations

from typing import Any

import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")

from ranks import TINY_LLAMA as LLAMA
from ranks import run_step  # noqa: E402

from llmsizer.estimate.training import estimate_training  # noqa: E402
from llmsizer.formulas.parallelism import (  # noqa: E402
    pipeline_fsdp2_accumulated_grad_bytes,
    pipeline_fsdp2_gathered_bytes,
)
from llmsizer.readers.hf_config import spec_from_config  # noqa: E402


@pytest.fixture(scope="module")
def measured() -> dict[str, Any]:
    return run_step("fsdp_pp_step.py", dict(config=LLAMA, batch=2, seq=128, microbatches=3), 2)


def test_the_stage_stays_gathered(measured: dict[str, Any]) -> None:
    assert measured["all_unsharded"]
    n = measured["elements"]
    # eq. PP1 over fp32 units, all-gathered in bf16 (the timeline's param_dtype conversion: x 2 / 4)
    assert pipeline_fsdp2_gathered_bytes([n * 4], 2) * 2 // 4 == measured["unsharded_param_bytes"]
    assert measured["sharded_param_bytes"] == measured["shard_elements"] * 4  # the fp32 shard, its own storage


def test_unsharded_gradients_accumulate_in_the_reduce_dtype(measured: dict[str, Any]) -> None:
    assert measured["accumulated_grad_dtypes"] == ["torch.float32"]
    assert measured["accumulators_after_the_step"] == 0  # freed by the step's reduce-scatter: none at the forwards
    assert pipeline_fsdp2_accumulated_grad_bytes(measured["elements"], 4) == measured["accumulated_grad_bytes"]


def test_estimate_holds_the_stage_gathered_and_its_unsharded_gradients() -> None:
    spec = spec_from_config(LLAMA, name="llama-tiny")
    common = dict(precision="fsdp-bf16-mixed", micro_batch=1, seq_len=128, gpus=4, pp=2, fsdp="full",
                  grad_accumulation=4)
    est = estimate_training(spec, **common)
    items = {i.name: i for i in est.items}
    assert "pipeline" in items["gathered_params"].formula and "eq. PP2" in items["gradients"].formula
    # FSDP1 under PP keeps the old rule (one unit + its prefetch; sharded gradients)
    old = {i.name: i.bytes for i in estimate_training(spec, **common, fsdp_version=1).items}
    assert items["gathered_params"].bytes > old["gathered_params"]
    assert items["gradients"].bytes == pytest.approx(2 * old["gradients"], rel=1e-3)  # unsharded: not / 2 ranks


def test_estimate_holds_the_stage_boundary_buffers() -> None:
    spec = spec_from_config(LLAMA, name="llama-tiny")
    common = dict(precision="fsdp-bf16-mixed", micro_batch=1, seq_len=128, gpus=4, pp=2, fsdp="full",
                  grad_accumulation=4)
    est = estimate_training(spec, **common)
    items = {i.name: i.bytes for i in est.items}
    # the peak stage here is the last (the loss): 4 activation receive buffers, the one in flight its first layer's
    # input; each 128 tokens x 256 x 2 B
    assert est.details["peak_phase"].endswith("(pipeline stage 1)")
    assert items["pipeline_buffers"] == (4 - 1) * 128 * 256 * 2
    # FSDP1 under PP runs in torch's pipeline stages too (tests/training/test_pipeline_buffers.py)
    assert "pipeline_buffers" in {i.name for i in estimate_training(spec, **common, fsdp_version=1).items}


def test_first_backward_of_a_fully_forwarded_stage() -> None:
    """Stage 0 of 1F1B with micro-batches = pp forwards every micro-batch before its first backward: no fp32
    accumulator exists at its forwards (the previous step's reduce-scatter freed them, measured above) and they
    appear unit by unit in that first backward; by the second backward one micro-batch's checkpointed inputs are
    gone. So no moment holds every accumulator with all m micro-batches' activations."""
    from llmsizer.estimate.inference.common import Acc
    from llmsizer.estimate.training.setup import resolve
    from llmsizer.estimate.training.states import stage_states
    from llmsizer.estimate.training.timeline import stage_timeline
    from llmsizer.specs.training import TrainingWorkload

    spec = spec_from_config(LLAMA, name="llama-tiny")

    def stage0(accumulation: int) -> dict[str, dict[str, int]]:
        w = TrainingWorkload(precision="fsdp-bf16-mixed", micro_batch=1, seq_len=128, gpus=4, pp=2, fsdp="full",
                             grad_checkpointing="full", grad_accumulation=accumulation)
        ctx = resolve(spec, w, Acc())
        return {p.name: p.parts for p in stage_timeline(ctx, stage_states(ctx, 0)).phases}

    two, four = stage0(2), stage0(4)  # 2 micro-batches <= 2 in flight: all forwarded first; 4: not
    full = two["optimizer step"]["gradients"]
    assert "gradients" not in two["forward end"] and four["forward end"]["gradients"] == full
    per_micro_batch = two["forward end"]["activations"] // 2  # one micro-batch's checkpointed layer inputs
    # with 4 micro-batches a forward refills the pipeline after each backward: the second backward holds the other
    # in-flight micro-batch; with 2, it holds none
    for name in (n for n in two if n.startswith("backward layer")):
        assert two[name]["gradients"] == four[name]["gradients"] == full
        assert two[name]["activations"] == four[name]["activations"] - per_micro_batch
