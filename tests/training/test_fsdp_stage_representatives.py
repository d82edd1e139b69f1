"""The duration's FSDP payloads beside pipeline parallelism (estimate/duration.py ``fsdp_stage``) ask one stage of
each distinct sequence of layer kinds (estimate/training/compose.py ``stage_representatives``): checked here against
every stage's payloads from states made anew, stage by stage (``stage_states``, ``fsdp_collective_volume``), on
torchtitan's uneven split, an even split with a remainder, interleaved stages, LoRA and a model whose layer kinds vary
(Gemma 3: sliding and global attention)."""

from __future__ import annotations

from typing import Any

import pytest

from llmsizer.estimate.caches import clear_caches
from llmsizer.estimate.duration import fsdp_stage, reduced_grad_bytes
from llmsizer.estimate.inference.common import Acc
from llmsizer.estimate.training.compose import stage_representatives
from llmsizer.estimate.training.gather_units import fsdp_collective_volume
from llmsizer.estimate.training.setup import resolve
from llmsizer.estimate.training.states import stage_states
from llmsizer.formulas.parallelism import pipeline_stage_layers
from llmsizer.models import load_model
from llmsizer.specs import TrainingWorkload

FSDP2 = dict(precision="fsdp-bf16-mixed", fsdp="full", grad_checkpointing="full", micro_batch=1, seq_len=2048,
             grad_accumulation=8)
CASES: list[tuple[str, dict[str, Any]]] = [
    ("qwen2.5-0.5b", dict(FSDP2, method="full", gpus=14, pp=7, pipeline_split="torchtitan")),
    ("qwen2.5-0.5b", dict(FSDP2, method="full", gpus=10, pp=5)),  # 24 = 5+5+5+5+4
    ("qwen2.5-0.5b", dict(FSDP2, method="full", gpus=32, pp=4, tp=2, sequence_parallel=True,
                          pipeline_split="torchtitan-9dec370", virtual_stages=2)),
    ("qwen2.5-0.5b", dict(FSDP2, method="lora", gpus=12, pp=6)),
    ("gemma-3-1b-it", dict(FSDP2, method="full", gpus=12, pp=6, pipeline_split="torchtitan")),
    ("gemma-3-1b-it", dict(FSDP2, method="lora", gpus=26, pp=13)),  # 2 layers a stage, one global in 3
]


@pytest.mark.parametrize(("model", "fields"), CASES)
def test_each_stage_moves_what_its_representative_moves(model: str, fields: dict[str, Any]) -> None:
    clear_caches()
    spec = load_model(model)
    w = TrainingWorkload(**fields)
    ctx = resolve(spec, w, Acc())
    ranges = pipeline_stage_layers(spec.num_layers, w.pp, w.pipeline_split, w.virtual_stages)
    vols = [fsdp_collective_volume(ctx, stage_states(ctx, s)) for s in range(w.pp)]
    reps = stage_representatives(spec, w.pp, w.pipeline_split, w.virtual_stages)
    assert len(set(reps)) < w.pp  # some stage is skipped: the case tests something
    for s, r in enumerate(reps):
        assert r <= s
        assert vols[s] == vols[r]
        assert len(ranges[s]) == len(ranges[r])
    # the stage fsdp_stage picks moves the most of all stages (the first of the most, as a walk over all would)
    totals = [float(v.forward) + float(v.reduced_elements) * reduced_grad_bytes(w) for v in vols]
    best = fsdp_stage(spec, w)
    assert best is not None
    assert best.forward + best.reduced == max(totals)
    assert best.units == len(ranges[totals.index(max(totals))])
