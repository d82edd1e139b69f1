"""The training-memory figures of PEFT's accelerate guides (validation/public_measurements.csv PM1420-PM1423:
Llama-2-70B through examples/sft/train.py, LoRA under DeepSpeed ZeRO-3 on 8 x H100, QLoRA under ZeRO-3 and FSDP on two
GPUs), held to their quoted sentences and to the launch scripts' settings, not to llmsizer's output."""

from __future__ import annotations

import csv
import re
from pathlib import Path

import pytest

from llmsizer.errors import InputError
from llmsizer.estimate.training import estimate_training
from llmsizer.models import load_model
from llmsizer.validation_cases import (
    ASSUMED,
    TRAINING_NOT_EXPRESSED_ROWS,
    TRAINING_ROWS,
    training_cases,
)

DATA = Path(__file__).resolve().parents[2] / "validation" / "public_measurements.csv"
ROWS = ["PM1420", "PM1421", "PM1422", "PM1423"]


def _rows() -> dict[str, dict[str, str]]:
    with DATA.open(newline="", encoding="utf-8") as f:
        return {r["id"]: r for r in csv.DictReader(f) if r["id"] in ROWS}


def test_values_are_in_their_quotes() -> None:
    rows = _rows()
    assert set(rows) == set(ROWS)
    assert re.search(r"memory consumed per GPU is 64 GB \(80%\)", rows["PM1420"]["quote"])
    assert "memory consumed per GPU is **36.6 GB**" in rows["PM1421"]["quote"]
    assert "memory consumed per GPU is **19.6 GB**" in rows["PM1422"]["quote"]
    assert "the GPU memory usage is  **35.6 GB/ GPU**" in rows["PM1423"]["quote"]
    for r in rows.values():
        assert f"{r['value']} GB" in r["quote"] and r["kind"] == "train_memory" and r["unit"] == "GB"


@pytest.mark.parametrize("rid", ["PM1420", "PM1421"])
def test_expressed_rows_take_the_scripts_settings(rid: str) -> None:
    r = _rows()[rid]
    _, f, _, specified, what = TRAINING_ROWS[rid]
    assert not specified and what == "peak"
    assert f["gpus"] == int(r["num_gpus"]) and f["zero"] == 3 and f["seq_len"] == 2048
    assert f["micro_batch"] == int(r["batch_size"].split()[0])
    assert f["grad_accumulation"] == int(re.search(r"accumulation (\d+)", r["batch_size"]).group(1))
    assert f["rank"] == 8 and f["targets"] == "all-linear"
    assert (f["method"] == "qlora") == (r["method"] == "QLoRA")
    assert (f.get("checkpoint_impl") == "reentrant") == ("use_reentrant True" in r["grad_checkpointing"])


def test_fsdp_rows_are_not_expressed_and_why() -> None:
    """Accelerate's FSDP of 2024-03 is FSDP1; the estimate refuses FSDP1 over a quantized base."""
    for rid in ("PM1422", "PM1423"):
        assert rid not in TRAINING_ROWS and "FSDP1" in TRAINING_NOT_EXPRESSED_ROWS[rid]
    with pytest.raises(InputError, match="FSDP1 QLoRA"):
        estimate_training(load_model("llama-2-70b-hf"), method="qlora", gpus=2, fsdp="full", fsdp_version=1)
    missing = {m.id for m in training_cases()[1]}
    assert {"PM1422", "PM1423"} <= missing


def test_expressed_rows_are_reported_with_settings_assumed() -> None:
    cases = {c.id: c for c in training_cases()[0] if c.id in ROWS}
    assert set(cases) == {"PM1420", "PM1421"}
    assert all(c.excluded == ASSUMED for c in cases.values())
