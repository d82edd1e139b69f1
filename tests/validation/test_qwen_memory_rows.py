"""The memory cells of the Qwen README 'Profiling of Memory and Speed' table (validation/public_measurements.csv
PM1400-PM1417: Qwen-7B LoRA, LoRA (emb) and Q-LoRA on one A100-SXM4-80G at 256-8192 tokens), held to their quotes
and to the speed rows that quote the same cells (PM0720-PM0731), not to llmsizer's output.

Independent truth here: each quoted '<memory>G / <speed>s/it' cell, the column it sits in (the sequence length), the
method named in the quote (which fixes the recipe: finetune.py @ e6f2a7a lines 323-326 give a chat model's LoRA no
modules_to_save and a base model's 'wte' + 'lm_head'; finetune_qlora_single_gpu.sh runs DeepSpeed ZeRO-2), and the
speed rows PM0720-PM0731, whose quotes carry the same cells."""

from __future__ import annotations

import csv
import re
from pathlib import Path

import pytest

from llmsizer.validation_cases import (
    ASSUMED,
    QWEN_MEMORY_ROWS,
    QWEN_QLORA_ROWS,
    QWEN_SPEED_ROWS,
    TRAINING_ROWS,
    training_cases,
)

DATA = Path(__file__).resolve().parents[2] / "validation" / "public_measurements.csv"
ROWS = [f"PM{i}" for i in range(1400, 1418)]
CELL = re.compile(r'7B \| (LoRA|LoRA \(emb\)|Q-LoRA) \| 1 \| 1 \| seq (\d+): <td align="center">([\d.]+)G / ([\d.]+)s/it</td>$')


def _rows() -> dict[str, dict[str, str]]:
    with DATA.open(newline="", encoding="utf-8") as f:
        return {r["id"]: r for r in csv.DictReader(f)}


def test_the_rows_are_the_table_cells() -> None:
    rows = _rows()
    assert set(QWEN_MEMORY_ROWS) == set(ROWS)
    seen = set()
    for rid in ROWS:
        r = rows[rid]
        m = CELL.match(r["quote"])
        assert m, (rid, r["quote"])
        method, seq, mem, _ = m.groups()
        assert r["kind"] == "train_memory" and r["method"] == method, rid
        assert r["value"] == mem and r["unit"] == "GB", rid
        assert int(r["seq_len"]) == int(seq), rid
        assert "e6f2a7a" in r["source"] and "statistic not named" in r["metric"], rid
        seen.add((method, int(seq)))
    assert seen == {(m, 256 * 2 ** i) for m in ("LoRA", "LoRA (emb)", "Q-LoRA") for i in range(6)}


@pytest.mark.parametrize("rid", ROWS)
def test_each_row_takes_the_recipe_its_method_names(rid: str) -> None:
    r = _rows()[rid]
    model, fields, _, specified, what = TRAINING_ROWS[rid]
    assert not specified and what == "peak"  # no memory statistic named: reported, out of the summary
    assert fields["seq_len"] == int(r["seq_len"]) and fields["micro_batch"] == 1 and fields["grad_accumulation"] == 8
    assert fields["rank"] == 64 and fields["targets"] == "all-linear" and fields["grad_checkpointing"] == "full"
    if r["method"] == "Q-LoRA":
        assert model == "Qwen-7B-Chat-Int4" and fields["method"] == "qlora"
        assert fields["zero"] == 2 and fields["optimizer"] == "adamw"  # ds_config_zero2.json's AdamW, not paged
    else:
        assert model == "Qwen-7B" and fields["method"] == "lora" and "zero" not in fields
        # HF Trainer's default 'adamw_torch' (transformers 4.32.0, Qwen's pin) = torch.optim.AdamW with no fused or
        # foreach key, which PyTorch 2.0 runs foreach on CUDA
        assert fields["optimizer_impl"] == "foreach"
        assert bool(fields.get("modules_to_save")) == (r["method"] == "LoRA (emb)")


def test_the_speed_rows_quote_the_same_cells() -> None:
    """PM0720-PM0731 quote the whole 'memory / speed' cell: the memory half is the new row's value."""
    rows = _rows()
    twins = {("LoRA", seq): rid for rid, seq in QWEN_SPEED_ROWS.items()}
    twins.update({("Q-LoRA", seq): rid for rid, seq in QWEN_QLORA_ROWS.items()})
    checked = 0
    for rid in ROWS:
        r = rows[rid]
        twin = twins.get((r["method"], int(r["seq_len"])))
        if twin is None:
            continue
        assert f">{r['value']}G / " in rows[twin]["quote"], (rid, twin)
        checked += 1
    assert checked == 12


def test_the_rows_are_reported_with_their_settings_assumed() -> None:
    cases = {c.id: c for c in training_cases()[0] if c.id in ROWS}
    assert set(cases) == set(ROWS)
    for c in cases.values():
        assert c.excluded == ASSUMED and c.within is None and c.predicted and c.predicted > 0
