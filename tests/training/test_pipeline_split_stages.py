"""Every pipeline stage can be the most loaded one: the training estimate evaluates the first stage, the last and the
first middle stage of each distinct sequence of layer kinds (estimate/training/compose.py ``stages_to_evaluate``).
Checked here against every stage evaluated one by one (the same per-stage states and timeline), on splits where a
middle stage holds the most layers (torchtitan's, the 405B rows' 15 / 16 x 6 / 15), even splits with a remainder,
a model whose layer kinds vary (Gemma 3: sliding and global attention; Jamba: attention, Mamba, MoE) and FSDP2 inside
the stages; and the torchtitan split's choice of stage on the 405B rows' settings."""

from __future__ import annotations

from typing import Any

import pytest

from llmsizer import validation_cases as V
from llmsizer.catalog.models import find
from llmsizer.errors import InputError
from llmsizer.estimate.framework import with_framework
from llmsizer.estimate.inference.common import Acc
from llmsizer.estimate.training import estimate_training
from llmsizer.estimate.training.setup import resolve
from llmsizer.estimate.training.states import stage_states
from llmsizer.estimate.training.timeline import stage_timeline
from llmsizer.models import load_model
from llmsizer.specs import TrainingWorkload

FSDP2_TP = dict(method="full", precision="fsdp-bf16-mixed", fsdp="full", grad_checkpointing="full", tp=2,
                sequence_parallel=True)
CASES: list[tuple[str, dict[str, Any]]] = [
    ("qwen2.5-0.5b", dict(gpus=5, pp=5, micro_batch=1, seq_len=2048, grad_accumulation=8)),  # 24 = 5+5+5+5+4
    ("qwen2.5-0.5b", dict(gpus=5, pp=5, micro_batch=1, seq_len=2048, grad_accumulation=8,
                          pipeline_split="torchtitan-9dec370")),  # 4 / 5 x 3 / 5
    ("qwen2.5-0.5b", dict(gpus=7, pp=7, micro_batch=2, seq_len=1024, grad_accumulation=4, pipeline_split="torchtitan")),
    ("qwen2.5-0.5b", dict(FSDP2_TP, gpus=16, pp=4, micro_batch=1, seq_len=4096, grad_accumulation=4,
                          pipeline_split="torchtitan-9dec370", virtual_stages=2)),
    ("gemma-3-1b-it", dict(gpus=4, pp=4, micro_batch=1, seq_len=4096, grad_accumulation=4)),  # 26 layers, 5:1 pattern
    ("gemma-3-1b-it", dict(gpus=6, pp=6, micro_batch=1, seq_len=4096, grad_accumulation=6,
                           pipeline_split="torchtitan")),
    # 6 / 7 / 7 / 6 / 6 layers, every stage 2 micro-batches in flight: stage 1 peaks (7 layers, no embedding);
    # sharded by FSDP2 inside the stages, as torchtitan runs its pipeline (DeepSpeed's pipeline refuses ZeRO-3:
    # deepspeed/runtime/pipe/engine.py:76-77)
    ("llama-3.1-8b", dict(gpus=40, pp=5, fsdp="full", precision="fsdp-bf16-mixed", micro_batch=2, seq_len=8192,
                          grad_accumulation=2, pipeline_split="torchtitan-9dec370")),
    ("llama-3.1-8b", dict(gpus=40, pp=5, fsdp="full", precision="fsdp-bf16-mixed", micro_batch=2, seq_len=8192,
                          grad_accumulation=2)),
    ("jamba-1.5-mini", dict(gpus=32, pp=8, micro_batch=1, seq_len=2048, grad_accumulation=8, zero=1)),
]


def _every_stage_peak(spec: Any, w: TrainingWorkload) -> tuple[int, int]:
    ctx = resolve(spec, w, Acc())
    peaks = [stage_timeline(ctx, stage_states(ctx, s)).peak.total for s in range(w.pp)]
    return max(peaks), peaks.index(max(peaks))


@pytest.mark.parametrize(("model", "fields"), CASES)
def test_the_evaluated_stages_find_the_highest_of_all(model: str, fields: dict[str, Any]) -> None:
    spec = load_model(model)
    w = TrainingWorkload(**fields)
    est = estimate_training(spec, w)
    peak, _ = _every_stage_peak(spec, w)
    assert est.details["tensor_peak_bytes"] == peak


def test_torchtitan_split_peaks_on_a_middle_stage_of_the_405b_rows() -> None:
    """PM1062's settings (Llama 3.1 405B, PP 8 x TP 8, 8 micro-batches of 4 x 8192): stage 0 holds 15 layers under
    torchtitan 9dec370's split, stages 1-6 hold 16; stage 1 (16 layers, 7 micro-batches in flight) is the peak."""
    model, fields, *_ = V.TRAINING_ROWS["PM1062"]
    spec, w = with_framework(find(model).spec(), TrainingWorkload(**dict(fields, metric=None, batch_shapes="variable",
                                                                         framework="torchtitan")))
    peak, stage = _every_stage_peak(spec, w)
    assert stage == 1
    est = estimate_training(spec, w)
    assert est.details["tensor_peak_bytes"] == peak
    assert est.details["peak_phase"].endswith("(pipeline stage 1)")


def test_pipeline_split_needs_pipeline_parallelism() -> None:
    with pytest.raises(InputError, match="give pp > 1"):
        TrainingWorkload(pipeline_split="torchtitan")
