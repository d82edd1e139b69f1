"""FSDP2 stages under torch's ScheduleInterleaved1F1B (formulas/parallelism.py ``interleaved_backward_states``, read
by the training timeline for several stages a rank) against a real interleaved step (``pp_interleaved_step.py``:
4 gloo ranks, PP 2 x FSDP 2, two stages a pp rank, torchtitan's FSDP2 wrapping under PP): at every backward, which
local stage runs, the micro-batches each local stage holds forwarded, and which local stages hold unsharded
gradients. A stage's gradients appear in its first backward and are gone after its last (its REDUCE_GRAD), so the
rank never holds every stage's at once: the estimate's peak under interleaving counts one stage's accumulators where
1F1B counts the whole rank's."""

from __future__ import annotations

from typing import Any

import pytest

pytest.importorskip("torch")

from ranks import run_step  # noqa: E402

from llmsizer.estimate.inference.common import Acc  # noqa: E402
from llmsizer.estimate.training import estimate_training  # noqa: E402
from llmsizer.estimate.training.setup import resolve  # noqa: E402
from llmsizer.estimate.training.states import stage_states  # noqa: E402
from llmsizer.estimate.training.timeline import stage_timeline  # noqa: E402
from llmsizer.formulas.parallelism import (  # noqa: E402
    inflight_microbatches,
    interleaved_backward_states,
    interleaved_peak_inflight,
)
from llmsizer.models import load_model  # noqa: E402
from llmsizer.specs import TrainingWorkload  # noqa: E402

CASE = dict(pp=2, virtual=2, microbatches=4, width=32, blocks=2, batch=8, seq=4)


@pytest.fixture(scope="module")
def measured() -> dict[str, Any]:
    return run_step("pp_interleaved_step.py", CASE, 4)


def test_each_backward_sees_the_stages_the_schedule_says(measured: dict[str, Any]) -> None:
    pp, v, m = CASE["pp"], CASE["virtual"], CASE["microbatches"]
    for r in measured["ranks"]:
        want = list(interleaved_backward_states(r["pp_rank"], pp, v, m))
        got = []
        for b in r["backwards"]:
            c = b["stage"]
            held = tuple(h - (k == c) for k, h in enumerate(b["held"]))  # the running one is still in its cache
            others = tuple(k != c and g > 0 for k, g in enumerate(b["grad_bytes"]))
            got.append((c, b["grad_bytes"][c] == 0, held, others))
        assert got == want, r["pp_rank"]
        # every live stage holds its whole unsharded fp32 gradients (eq. PP2), not a shard
        stage_elements = CASE["blocks"] * (2 * 2 * CASE["width"] ** 2 + 3 * CASE["width"])
        assert {g for b in r["backwards"] for g in b["grad_bytes"]} == {0, stage_elements * 4}


def test_saved_activations_follow_each_local_stage(measured: dict[str, Any]) -> None:
    """The activations autograd keeps saved on each local stage at every backward are its forward cache's
    micro-batches' (the one about to be backwarded included), and the rank's most is what the schedule walk gives
    (``interleaved_peak_inflight``), not 1F1B's min(pp - r, m) micro-batches on every layer of the rank: rank 0 holds
    5 stage-micro-batches (3 + 2) where 1F1B counts 2 x 2, rank 1 holds 3 where it counts 1 x 2."""
    pp, v, m = CASE["pp"], CASE["virtual"], CASE["microbatches"]
    # a micro-batch's on one stage, from the model's definition: each block saves its bf16 input [b, s, w] for
    # ``up`` and the relu output [b, s, 2 w] (relu's result, ``down``'s input: one tensor), b = batch / m
    tokens = CASE["batch"] // m * CASE["seq"]
    per_mb = CASE["blocks"] * tokens * 3 * CASE["width"] * 2
    for r in measured["ranks"]:
        idle = r["idle_saved_bytes"]
        live = [[s - i for s, i in zip(b["saved_bytes"], idle, strict=True)] for b in r["backwards"]]
        assert live == [[h * per_mb for h in b["held"]] for b in r["backwards"]], r["pp_rank"]
        held = interleaved_peak_inflight(r["pp_rank"], pp, v, m, (per_mb,) * v)
        peak = max(map(sum, live))
        assert peak == sum(held) * per_mb, r["pp_rank"]
        assert peak > inflight_microbatches(r["pp_rank"], pp, m) * v * per_mb, r["pp_rank"]  # the 1F1B count


def test_interleaved_timeline_counts_each_local_stage_in_flight() -> None:
    """Llama 3.1 8B over PP 4 x 2 interleaved stages (4 layers each under torchtitan's split), full checkpointing:
    each layer keeps its input [t, h] between its forward and its backward (bf16 under FSDP2's bf16 parameters, fp32
    under autocast over fp32 weights), so the last rank's activations at its forward end are sum over its local
    stages of (their in-flight micro-batches x 4 layers x t h B): its first local stage forwards a whole round (4
    micro-batches) before its first backward, where 1F1B would count one micro-batch on all 8 layers. Without FSDP
    (DDP) as with FSDP2 inside the stages."""
    spec = load_model("llama-3.1-8b")
    t, h = 2048, 4096
    for fsdp, residual in (("full", 2), (None, 4)):
        layer = t * h * residual
        w = TrainingWorkload(method="full", precision="bf16-mixed" if fsdp is None else "fsdp-bf16-mixed", fsdp=fsdp,
                             gpus=8, pp=4, micro_batch=1, seq_len=t, grad_accumulation=4, grad_checkpointing="full",
                             pipeline_split="torchtitan-9dec370", virtual_stages=2)
        ctx = resolve(spec, w, Acc())
        last = stage_timeline(ctx, stage_states(ctx, 3))
        fwd = next(p for p in last.phases if p.name == "forward end")
        held = interleaved_peak_inflight(3, 4, 2, 4, (4 * layer, 4 * layer), 1)
        assert held == (4, 1)  # stage 3 holds a whole round, stage 7 (the loss) its one micro-batch
        assert fwd.parts["activations"] == sum(held) * 4 * layer, fsdp
        assert fwd.parts["activations"] > inflight_microbatches(3, 4, 4) * 8 * layer


def test_interleaved_peak_holds_one_stage_accumulators() -> None:
    """Llama 3.1 8B, PP 4 x FSDP 2 under torchtitan's split (8 layers a rank; 4 a stage over 8 interleaved
    stages): under 1F1B the peak holds all 8 of the rank's layers' fp32 accumulators, interleaved one stage's (the
    other stage's come after its reduce-scatter or are gone before)."""
    spec = load_model("llama-3.1-8b")
    common = dict(method="full", precision="fsdp-bf16-mixed", fsdp="full", gpus=8, pp=4, micro_batch=1,
                  seq_len=2048, grad_accumulation=4, grad_checkpointing="full", pipeline_split="torchtitan-9dec370")
    one = estimate_training(spec, **common, virtual_stages=1)
    two = estimate_training(spec, **common, virtual_stages=2)
    layer_fp32 = 218_112_000 * 4  # one Llama 3.1 8B decoder layer's elements, fp32
    assert one.details["peak_parts"]["gradients"] >= 8 * layer_fp32
    # one stage's 4 layers and, on the first or last rank, the embedding's or the lm_head's [128256, 4096] (and the
    # final norm's 4096)
    assert two.details["peak_parts"]["gradients"] <= 4 * layer_fp32 + (128256 + 1) * 4096 * 4
    assert two.total("device")[1] < one.total("device")[1]
