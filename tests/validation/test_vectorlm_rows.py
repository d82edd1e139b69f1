"""VectorLM's reference throughput (validation/public_measurements.csv PM1030-PM1047, docs/reference_throughput.md
@9045f08): Llama-3-8B full and LoRA FSDP on 1-4 x A100-SXM4-80GB in one node, each row read from its quoted table
line, all held out from the Ampere utilisation (fitted on llm-foundry rows only)."""

from __future__ import annotations

import re
import statistics

import pytest

from llmsizer.validation_cases import VECTORLM_IDS, Case, public_rows, speed_case, vectorlm_fields


def _rows() -> dict[str, dict[str, str]]:
    rows = public_rows()
    return {rid: rows[rid] for rid in VECTORLM_IDS}


def test_rows_quote_their_table_cell() -> None:
    rows = _rows()
    assert {r["framework"] for r in rows.values()} == {"VectorLM (HF transformers + PyTorch FSDP1 + PEFT)"}
    for rid, r in rows.items():
        cells = [c.strip() for c in r["quote"].strip().strip("|").split("|")]
        kind, gpus = re.fullmatch(r"\((full_rank|lora)\) NVIDIA A100-SXM4-80GB x(\d)", cells[0]).groups()  # type: ignore[union-attr]
        cell = cells[1 + (2048, 4096, 8192).index(int(r["seq_len"]))]
        assert cell == f"{r['value']} (batch: {r['batch_size']})", rid
        assert gpus == r["num_gpus"] and (kind == "lora") == (r["method"] == "LoRA"), rid


def test_lora_targets_are_peft_defaults_for_llama() -> None:
    """lora-benchmark.yaml gives no target_modules: PEFT's own default for llama applies."""
    constants = pytest.importorskip("peft.utils.constants")
    mapping = constants.TRANSFORMERS_MODELS_TO_LORA_TARGET_MODULES_MAPPING
    assert sorted(mapping["llama"]) == ["q_proj", "v_proj"]
    lora = vectorlm_fields(_rows()["PM1039"])
    assert lora["targets"] == "q,v" and lora["rank"] == 8


def test_held_out_rows() -> None:
    """Measured 2024-05: median |error| 6.6 % over 18 rows, -15.6 % (full, one GPU, 8192) ... +21.6 % (LoRA, 4 GPUs,
    2048)."""
    cases = [speed_case(r) for r in _rows().values()]
    assert all(isinstance(c, Case) and not c.excluded and c.error is not None for c in cases)
    errors = [abs(c.error) for c in cases if isinstance(c, Case) and c.error is not None]
    assert len(errors) == 18 and statistics.median(errors) < 0.12 and max(errors) < 0.3
