"""The pipeline warning names the schedule the estimate modelled and the micro-batches in flight it counted on the
peak rank: 1F1B's min(pp - rank, m) (formulas/parallelism.py ``inflight_microbatches``, PipeDream-Flush), or under
Interleaved1F1B (virtual_stages > 1) each local stage's own count at the rank's fullest point
(``interleaved_peak_inflight``, checked against a real torch interleaved step in test_pipeline_interleaved_fsdp2.py),
not "min(pp, m) under 1F1B" whatever the schedule."""

from __future__ import annotations

import re

from llmsizer.estimate.training import estimate_training
from llmsizer.formulas.parallelism import inflight_microbatches, interleaved_peak_inflight
from llmsizer.models import load_model

# Llama 3.1 8B over PP 4 (torchtitan's split: 4 layers a stage over 8 interleaved stages), full checkpointing
COMMON = dict(method="full", precision="fsdp-bf16-mixed", fsdp="full", gpus=8, pp=4, micro_batch=1, seq_len=2048,
              grad_checkpointing="full", pipeline_split="torchtitan-9dec370")


def _pipeline_warning(**fields: object) -> tuple[str, int]:
    est = estimate_training(load_model("llama-3.1-8b"), **COMMON, **fields)
    (text,) = [w for w in est.warnings if w.startswith("memory of the most loaded pipeline")]
    rank = re.search(r"rank \((\d+) of 4\)", text)
    assert rank is not None, text
    return text, int(rank.group(1))


def test_1f1b_warning_counts_the_peak_ranks_micro_batches() -> None:
    text, r = _pipeline_warning(grad_accumulation=8, virtual_stages=1)
    assert "Interleaved" not in text
    n = inflight_microbatches(r, 4, 8)
    assert f"under 1F1B it keeps {n} micro-batch" in text, text
    assert f"min({4 - r}, 8)" in text


def test_interleaved_warning_names_the_schedule_and_each_local_stage() -> None:
    text, r = _pipeline_warning(grad_accumulation=4, virtual_stages=2)
    assert "under 1F1B" not in text and "Interleaved1F1B (2 stages a rank)" in text, text
    # the loss runs on the last rank's last local stage: its peak is at one of that stage's backwards
    held = interleaved_peak_inflight(r, 4, 2, 4, (1, 1), 1 if r == 3 else None)
    assert f"holds {sum(held)} micro-batches in flight" in text, text
    assert f"({' + '.join(map(str, held))} on its local stages)" in text, text
    assert sum(held) != min(4, 4)  # what the old text said for every schedule
