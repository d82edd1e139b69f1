"""Unsloth's recipe against Unsloth's published maximum context lengths (validation/unsloth_max_context.csv:
unslothai/unsloth README @ e3162dc, Llama 3.1 8B Instruct, 4-bit QLoRA on all linear layers, rank 32, batch 1,
sequences padded to the length).

The recipe as llmsizer states it: ``kernels='unsloth'`` (fused LoRA / RMSNorm kernels, formulas/unsloth_kernels.py),
``loss='cut-ce'`` (no [tokens, vocab] tensor), ``grad_checkpointing='full'`` with ``checkpoint_offload`` (layer
inputs in host RAM). A card runs out when its CUDA context plus the caching allocator's *reserved* memory reach its size, so
the comparison is under ``metric='nvidia-smi'`` (estimate/allocator.py: persistent tensors + the dynamic ones x the
calibrated reserved/allocated ratio, fitted on validation/allocator_pairs.csv, none of them Unsloth runs). At this
commit the expected longest sequence is 0.95-1.08 x the published one on the 12-80 GB rows (8 GB: 1.9 x), and every
published length lies inside the range (the ratio's high end to its low end).
"""

from __future__ import annotations

import csv
from pathlib import Path

import pytest

from llmsizer.estimate.training.reverse import max_seq_len
from llmsizer.models import load_model
from llmsizer.units import GiB

with open(Path(__file__).resolve().parents[2] / "validation" / "unsloth_max_context.csv", encoding="utf-8") as _f:
    ROWS = list(csv.DictReader(_f))
QLORA = dict(method="qlora", rank=32, targets="q,k,v,o,gate,up,down", micro_batch=1, grad_checkpointing="full",
             attention="flash")
UNSLOTH = dict(QLORA, loss="cut-ce", checkpoint_offload=True, kernels="unsloth")


def _predict(gb: float, recipe: dict[str, object], metric: str, level: str = "expected") -> int:
    # the README's "GPU VRAM" is the card's memory; no headroom kept
    return max_seq_len(load_model("llama-3.1-8b"), int(gb * GiB), headroom=0.0, level=level, metric=metric, **recipe)


@pytest.mark.parametrize("row", [r for r in ROWS if r["recipe"] == "unsloth"], ids=lambda r: r["id"])
def test_unsloth_max_context(row: dict[str, str]) -> None:
    gb, meas = float(row["gpu_vram_gb"]), int(row["max_context"])
    low, expected, high = (_predict(gb, UNSLOTH, "nvidia-smi", level) for level in ("high", "expected", "low"))
    assert low <= meas <= high, (row["id"], low, meas, high)
    if gb >= 12:  # 8 GB: 1.9 x; the fixed costs there are larger than modelled (a desktop card's display and
        assert abs(expected / meas - 1) <= 0.10, (row["id"], expected, meas)  # driver take part of its 8 GB)
    # live tensors alone (metric allocated) overshoot: the allocator's reserve is what stops the run
    assert _predict(gb, UNSLOTH, "allocated") > 1.3 * meas


def test_each_mechanism_of_the_recipe_lengthens_the_context() -> None:
    at = 80
    meas = {r["recipe"]: int(r["max_context"]) for r in ROWS if float(r["gpu_vram_gb"]) == at}
    plain = _predict(at, QLORA, "allocated")
    full = _predict(at, UNSLOTH, "allocated")
    for one in (dict(checkpoint_offload=True), dict(loss="cut-ce"), dict(kernels="unsloth")):
        # alone, the kernels change nothing while the logits are the peak; each is needed for the full length
        assert plain <= _predict(at, dict(QLORA, **one), "allocated") < full
        without = {k: v for k, v in UNSLOTH.items() if k not in one}
        assert _predict(at, dict(QLORA, **without), "allocated") < full
    # measured: Unsloth 342,733 vs Hugging Face + FA2 28,454 tokens (12.0x)
    assert _predict(at, UNSLOTH, "allocated") / plain >= 8 and meas["unsloth"] / meas["hf-fa2"] > 10


@pytest.mark.parametrize("row", [r for r in ROWS if r["recipe"] == "hf-fa2" and float(r["gpu_vram_gb"]) >= 24],
                         ids=lambda r: r["id"])
def test_hugging_face_fa2_max_context(row: dict[str, str]) -> None:
    # the same runs with Hugging Face + flash attention 2: transformers' loss (fp32 logits), checkpointing with the
    # inputs on the device. +5 % to +25 % on 24-80 GB. Not asserted on 12-16 GB (+56 %, +155 %): a larger fixed
    # cost than modelled, likely PEFT's prepare_model_for_kbit_training, which upcasts the bf16 embeddings and lm_head to
    # fp32 ("cast all non INT8 parameters to fp32", peft/utils/other.py) and which llmsizer does not count yet
    gb, meas = float(row["gpu_vram_gb"]), int(row["max_context"])
    low, expected, high = (_predict(gb, QLORA, "nvidia-smi", level) for level in ("high", "expected", "low"))
    assert low <= meas <= high, (row["id"], low, meas, high)
    assert abs(expected / meas - 1) <= 0.25, (row["id"], expected, meas)
