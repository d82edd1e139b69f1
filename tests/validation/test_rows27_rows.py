"""Rows added from two more published sources (held to their quotes, not to llmsizer's output):

- validation/llamacpp_bench.csv LB01-LB12: llama.cpp llama-bench tables of ggml-org/llama.cpp pull 4766 (January
  2024: RTX 4090 by ggerganov, RTX 3090 'master' column by JohannesGaessler), estimated as the XD rows (a build
  before flash attention in llama-bench and before the int8 MMQ switch), held out;
- validation/public_measurements.csv PM1380-PM1391: lit-gpt's resource table (tutorials/resource-tables.md @
  0cc02afa, lit-gpt 8641822 finetune/lora.py on one A100-SXM4-40GB), LoRA / QLoRA peak max_memory_allocated.

Independent truth here: the published cells (each row's value is in its quoted line) and the published trainable-
parameter column, which the expressed LoRA settings (rank 8 on query and value) must reproduce from the catalog's
shapes."""

from __future__ import annotations

import csv
import re
from pathlib import Path

import pytest

from llmsizer.models import load_model
from llmsizer.validation_cases import (
    BENCH_CURRENT_BUILD_ROWS,
    KNOWN_MISSES,
    LITGPT_8641822_ROWS,
    TRAINING_ROWS,
    llamacpp_bench_cases,
    llamacpp_bench_rows,
    training_cases,
)

ROOT = Path(__file__).resolve().parents[2] / "validation"
LB = [f"LB{i:02d}" for i in range(1, 13)]
LIT = [f"PM{i}" for i in range(1380, 1392)]


def _csv(name: str) -> dict[str, dict[str, str]]:
    with (ROOT / name).open(newline="", encoding="utf-8") as f:
        return {r["id"]: r for r in csv.DictReader(f)}


def test_lb_rows_quote_their_values_and_tests() -> None:
    rows = _csv("llamacpp_bench.csv")
    for rid in LB:
        r = rows[rid]
        q = r["quote"]
        assert f"{float(r['value']):.2f}" in q, rid
        test = r["test"]  # the quote prints 'pp 512' (ggerganov's build) or 'pp512' (compare-llama-bench)
        assert re.search(rf"{test[:2]} ?{test[2:]}\b", q), rid
        kind = {"gguf:f16": "F16", "gguf:q8_0": "Q8_0", "gguf:q4_0": "Q4_0", "gguf:q4_1": "Q4_1",
                "gguf:q3_k_s": "Q3_K_S"}[r["weights"]]
        assert f"llama 7B {kind} " in q, rid
        assert ("RTX 3090" in q) == (r["device"] == "rtx-3090"), rid
        assert r["role"] == "held-out" and "pull 4766" in r["source"], rid


def test_lb_rows_are_estimated_as_the_2024_builds() -> None:
    assert not any(rid.startswith(BENCH_CURRENT_BUILD_ROWS) for rid in LB)
    cases = {c.id: c for c in llamacpp_bench_cases() if c.id in LB}
    assert set(cases) == set(LB)
    assert all(c.excluded == "" for c in cases.values())
    assert not set(LB) & set(KNOWN_MISSES)
    assert {r.id for r in llamacpp_bench_rows() if r.id.startswith("LB")} == set(LB)


def test_lit_rows_quote_their_values() -> None:
    rows = _csv("public_measurements.csv")
    for rid in LIT:
        r = rows[rid]
        cells = [c.strip() for c in r["quote"].strip("|").split("|")]
        assert cells[5] == f"{r['value']} GB", rid
        assert int(cells[3]) == int(r["batch_size"]) == TRAINING_ROWS[rid][1]["micro_batch"], rid
        assert ("bnb.nf4" in cells[2]) == (r["method"] == "QLoRA") == (TRAINING_ROWS[rid][1]["method"] == "qlora")
        if "bnb.nf4" in cells[2]:
            assert TRAINING_ROWS[rid][1]["nf4_format"] == cells[2][4:], rid


@pytest.mark.parametrize("rid", LIT)
def test_lit_rows_lora_settings_give_the_published_trainable_parameters(rid: str) -> None:
    """The table's 'Trainable parameters' column against rank 8 on query and value from the catalog's shapes:
    per layer r x (d_in + d_out) for each of the two adapted projections."""
    rows = _csv("public_measurements.csv")
    model, fields, _, specified, what = TRAINING_ROWS[rid]
    assert specified and what == "peak" and rid in LITGPT_8641822_ROWS
    assert fields["rank"] == 8 and fields["targets"] == "q,v" and fields["grad_checkpointing"] == "none"
    spec = load_model(model)
    q_out, kv_out = spec.num_heads * spec.head_dim, spec.num_kv_heads * spec.head_dim
    per_layer = 8 * (spec.hidden_size + q_out) + 8 * (spec.hidden_size + kv_out)
    published = int([c.strip() for c in rows[rid]["quote"].strip("|").split("|")][4].replace(",", ""))
    assert spec.num_layers * per_layer == published
    seq = {"stablelm-base-alpha-3b": 1034, "llama-2-7b-hf": 1304, "llama-2-13b-hf": 1304}[model]
    assert fields["seq_len"] == seq and fields["grad_accumulation"] == 128 // fields["micro_batch"]


def test_lit_rows_are_summarised() -> None:
    cases = {c.id: c for c in training_cases()[0] if c.id in LIT}
    assert set(cases) == set(LIT)
    assert all(c.excluded == "" and c.within is not None for c in cases.values())
