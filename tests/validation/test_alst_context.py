"""Arctic Long Sequence Training's single-H100 recipes against the lengths they ran at (validation/alst_max_context.csv:
snowflakedb/ArcticTraining projects/sequence-parallelism/run-h100-sp1-llama-8b{,-baseline}.yml @5885b9f8; Bekman et
al. 2025, arXiv 2506.13996: "ALST supports training Meta's Llama 8B model with 500K sequence length on a single H100
GPU").

The recipes as llmsizer states them (validation_cases.MAX_CONTEXT_RECIPES, the one home validate reads): DeepSpeed
ZeRO-3 with the parameters and the optimizer offloaded, every layer checkpointed, flash-attn 2; ALST adds the
checkpointed inputs in host RAM (``checkpoint_offload``), TiledMLP (``tiled_mlp``, formulas/training_activations.py
eqs. TM1/TM2, measured on DeepSpeed's own TiledMLP in tests/formulas/test_tiled_mlp.py) and the recipe's model type
'liger' (ArcticTraining model/liger_factory.py L41-50: Liger's RMSNorm, RoPE and fused linear cross-entropy, its
SwiGLU off under TiledMLP): ``kernels='liger'``, ``loss='liger-flce'``. Sized as the Unsloth rows are (metric
nvidia-smi, no headroom), with the fixed-shape reserve (rows packed to max_length, expandable segments).

AT01 is a lower bound (csv column ``bound``): 555K stopped on a Triton illegal memory access, which is Liger's RMSNorm
/ RoPE int32 row offsets overflowing (555,000 x 4096 > 2^31; 500,000 x 4096 < 2^31; fixed in Liger-Kernel v0.6.1,
b27b4c5f, 2025-07-21, after the recipe), not memory. At this commit: ALST 660,927 expected (range 356,180 - 665,228:
holds 500K); with Liger stated as cut-ce and transformers' RMSNorm it was 522,480; Liger's RMSNorm keeps X as it comes
plus an fp32 1/rms instead of an fp32 copy and the normalised tensor (eq. LG1): 15.3 GiB less per layer at 500K.
Baseline 39,083 (+8.6 %) of 36K ('close to oom').

AT03 / AT04: the paper's 3.7M on 8 H100s and 15M on 32 (abstract; recipes run-h100-sp{8,32}-llama-8b.yml: Ulysses
over every rank, ZeRO-3 with only the optimizer offloaded), as ``cp_kind='ulysses'`` (formulas/context_parallel.py
eqs. U0-U3): 4,568,352 expected (+23.5 %, range 2,466,432 - 4,598,784) and 15,801,792 (+5.3 %, range 8,519,552 -
15,905,024).
"""

from __future__ import annotations

import csv
from pathlib import Path

import pytest

from llmsizer.estimate.training.reverse import max_seq_len
from llmsizer.models import load_model
from llmsizer.units import GiB
from llmsizer.validation_cases import MAX_CONTEXT_RECIPES, max_context_cases

with open(Path(__file__).resolve().parents[2] / "validation" / "alst_max_context.csv", encoding="utf-8") as _f:
    ROWS = {r["id"]: r for r in csv.DictReader(_f)}


def _predict(recipe: dict[str, object], level: str = "expected", gpus: int = 1) -> int:
    cp = dict(gpus=gpus, context_parallel=gpus) if gpus > 1 else {}
    return max_seq_len(load_model("llama-3.1-8b"), int(79.65 * GiB), headroom=0.0, level=level, metric="nvidia-smi",
                       **cp, **recipe)


@pytest.mark.parametrize("rid", sorted(ROWS))
def test_alst_rows(rid: str) -> None:
    row = ROWS[rid]
    meas = int(row["max_context"])
    recipe, gpus = MAX_CONTEXT_RECIPES[row["recipe"]], int(row["gpus"])
    low, expected, high = (_predict(recipe, level, gpus) for level in ("high", "expected", "low"))
    assert low <= meas <= high, (rid, low, meas, high)
    if row["bound"] == "lower":  # the length ran; what stopped the next one was not memory
        assert expected >= meas, (rid, expected, meas)
    else:  # AT02 +8.6 %, AT03 +23.5 %, AT04 +5.3 %: within the kind's +-25 %
        assert abs(expected / meas - 1) <= 0.25, (rid, expected, meas)


def test_tiled_mlp_is_what_reaches_500k() -> None:
    alst = MAX_CONTEXT_RECIPES["alst"]
    without = {k: v for k, v in alst.items() if k != "tiled_mlp"}
    assert _predict(without) < int(ROWS["AT01"]["max_context"])  # the MLP's [t, I] tensors stop it short of 500K
    # measured: 500K against the baseline's 36K (13.9x)
    assert _predict(alst) / _predict(MAX_CONTEXT_RECIPES["alst-baseline"]) > 10


def test_validate_reports_the_rows_as_predicted() -> None:
    cases = {c.id: c for c in max_context_cases() if c.id in ROWS}
    assert sorted(cases) == sorted(ROWS)
    for rid, row in ROWS.items():
        c, recipe, gpus = cases[rid], MAX_CONTEXT_RECIPES[row["recipe"]], int(row["gpus"])
        assert c.predicted == _predict(recipe, gpus=gpus) and c.measured == int(row["max_context"])
        assert (c.error is None) == (row["bound"] == "lower")  # a lower bound stays out of the error summary
        assert c.span == (_predict(recipe, "high", gpus), _predict(recipe, "low", gpus))
