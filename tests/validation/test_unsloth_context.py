"""Unsloth's recipe against Unsloth's published maximum context lengths (validation/unsloth_max_context.csv:
unslothai/unsloth README @ e3162dc, Llama 3.1 8B Instruct, 4-bit QLoRA on all linear layers, rank 32, batch 1,
sequences padded to the length).

The recipe as llmsizer states it: ``kernels='unsloth'`` (fused LoRA / RMSNorm kernels, formulas/unsloth_kernels.py),
``loss='cut-ce'`` (no [tokens, vocab] tensor), ``grad_checkpointing='full'`` with ``checkpoint_offload`` (layer
inputs in host RAM). A card runs out when its CUDA context plus the caching allocator's *reserved* memory reach its size, so
the comparison is under ``metric='nvidia-smi'`` (estimate/allocator.py: persistent tensors + the dynamic ones x the
calibrated reserved/allocated ratio, fitted on validation/allocator_pairs.csv, none of them Unsloth runs). At this
commit the expected longest sequence is 0.95-1.02 x the published one on the 12-80 GB rows (8 GB: 1.52 x: 2,972 tokens
fit in 7.65 GiB, 0.35 GiB less than the card), and every published length lies inside the range (the ratio's high end
to its low end). Unsloth's own prepare_model_for_kbit_training casts only the LoRA weights to fp32 (unsloth/models/
_utils.py lines 516-531 @e3162dc): the embedding, norms and lm_head stay bf16 (``kernels='unsloth'``'s base_dtype).
"""

from __future__ import annotations

import csv
from pathlib import Path

import pytest

from llmsizer.estimate.training.reverse import max_seq_len
from llmsizer.models import load_model
from llmsizer.units import GiB
from llmsizer.validation_cases import MAX_CONTEXT_RECIPES, max_context_cases

with open(Path(__file__).resolve().parents[2] / "validation" / "unsloth_max_context.csv", encoding="utf-8") as _f:
    ROWS = list(csv.DictReader(_f))
QLORA, UNSLOTH = MAX_CONTEXT_RECIPES["hf-fa2"], MAX_CONTEXT_RECIPES["unsloth"]  # the recipes' one home: validate's


def _predict(gb: float, recipe: dict[str, object], metric: str, level: str = "expected") -> int:
    # the README's "GPU VRAM" is the card's memory; no headroom kept
    return max_seq_len(load_model("llama-3.1-8b"), int(gb * GiB), headroom=0.0, level=level, metric=metric, **recipe)


@pytest.mark.parametrize("row", [r for r in ROWS if r["recipe"] == "unsloth"], ids=lambda r: r["id"])
def test_unsloth_max_context(row: dict[str, str]) -> None:
    gb, meas = float(row["gpu_vram_gb"]), int(row["max_context"])
    low, expected, high = (_predict(gb, UNSLOTH, "nvidia-smi", level) for level in ("high", "expected", "low"))
    assert low <= meas <= high, (row["id"], low, meas, high)
    if gb >= 12:  # 8 GB: 1.52 x; 0.35 GiB of the card is taken by something not modelled (not established: a
        assert abs(expected / meas - 1) <= 0.10, (row["id"], expected, meas)  # desktop card's display, its driver)
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


@pytest.mark.parametrize("row", [r for r in ROWS if r["recipe"] == "hf-fa2"], ids=lambda r: r["id"])
def test_hugging_face_fa2_max_context(row: dict[str, str]) -> None:
    # the same runs with Hugging Face + flash attention 2: transformers' loss (fp32 logits), checkpointing with the
    # inputs on the device, and PEFT's prepare_model_for_kbit_training (the qlora default without a framework
    # profile, estimate/training/setup.py qlora_unquantized_dtype): the embedding, norms and lm_head cast to fp32
    # (2.0 GiB more on Llama 3.1 8B), the residual stream fp32 and autocast's bf16 copy of the fp32 lm_head kept for
    # the backward (1.0 GiB; tests/training/test_kbit_prep_upcast.py). Expected -16 % (12 GB) .. -13 % (80 GB);
    # before that cast was counted +4 % (80 GB) .. +143 % (12 GB), and 12-16 GB were not asserted
    gb, meas = float(row["gpu_vram_gb"]), int(row["max_context"])
    low, expected, high = (_predict(gb, QLORA, "nvidia-smi", level) for level in ("high", "expected", "low"))
    assert low <= meas <= high, (row["id"], low, meas, high)
    assert abs(expected / meas - 1) <= 0.25, (row["id"], expected, meas)


def test_validate_reports_every_row_as_the_tests_predict_it() -> None:
    """`llmsizer validate` lists each row under its own kind with the length these tests predict and the range."""
    cases = {c.id: c for c in max_context_cases() if c.id.startswith("UC")}  # (AS: test_alst_context.py)
    assert sorted(cases) == sorted(r["id"] for r in ROWS)
    for r in ROWS:
        c, gb = cases[r["id"]], float(r["gpu_vram_gb"])
        recipe = MAX_CONTEXT_RECIPES[r["recipe"]]
        assert c.predicted == _predict(gb, recipe, "nvidia-smi") and c.measured == int(r["max_context"])
        assert c.span == (_predict(gb, recipe, "nvidia-smi", "high"), _predict(gb, recipe, "nvidia-smi", "low"))
        # the card's memory the row is sized with (its GB as GiB, _predict) is named in the note validate prints
        # (review23a D10)
        assert f"card memory taken as {r['gpu_vram_gb']} GiB (the README's '{r['gpu_vram_gb']} GB')" in c.note
