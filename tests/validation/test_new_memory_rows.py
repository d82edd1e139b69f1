"""The training-memory rows added from torchtitan's benchmark files (PM1060-PM1069) and litgpt's config hub table
(PM1100-PM1145): every row is accounted for, the memory twins take their speed twins' settings, and the reasons
given for the rows that are not expressed hold against the models' real parameter counts."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest

from llmsizer.formulas.params import count_params
from llmsizer.models import load_model
from llmsizer.validation_cases import (
    TORCHTITAN_MODEL_PARALLEL,
    TRAINING_NOT_EXPRESSED_ROWS,
    TRAINING_ROWS,
    training_cases,
)

DATA = Path(__file__).resolve().parents[2] / "validation" / "public_measurements.csv"


def _rows(prefix: str) -> dict[str, dict[str, str]]:
    with DATA.open(newline="", encoding="utf-8") as f:
        return {r["id"]: r for r in csv.DictReader(f) if r["kind"] == "train_memory" and r["framework"] == prefix}


def test_every_new_row_is_expressed_or_says_why() -> None:
    rows = {**_rows("torchtitan"), **_rows("litgpt")}
    new = [rid for rid in rows if "PM1060" <= rid < "PM1300"]
    assert len(new) == 10 + 46
    for rid in new:
        assert (rid in TRAINING_ROWS) != (rid in TRAINING_NOT_EXPRESSED_ROWS), rid


def test_no_reason_is_a_settings_dump() -> None:
    _, missing = training_cases()
    for m in missing:
        assert "{'" not in m.why and "('" not in m.why, (m.id, m.why)


@pytest.mark.parametrize(("rid", "twin"), [("PM1060", "PM1050"), ("PM1061", "PM1051"), ("PM1062", "PM1052"),
                                         ("PM1063", "PM1053")])
def test_torchtitan_memory_twins_take_the_speed_rows_settings(rid: str, twin: str) -> None:
    model, extra = TORCHTITAN_MODEL_PARALLEL[twin]
    m, fields, _, _, _ = TRAINING_ROWS[rid]
    assert m == model and all(fields[k] == v for k, v in extra.items())
    row = _rows("torchtitan")[rid]
    assert int(row["num_gpus"]) == fields["gpus"]


@pytest.mark.parametrize(("rid", "model"), [("PM1119", "llama-3.2-1b"), ("PM1122", "llama-3.2-3b"),
                                            ("PM1135", "phi-3-mini-4k-instruct")])
def test_litgpt_full_rows_that_cannot_have_run(rid: str, model: str) -> None:
    """bf16-true weights + gradients + AdamW's two bf16 states are 8 B per parameter: already above the peak."""
    n = count_params(load_model(model)).total
    measured = float(_rows("litgpt")[rid]["value"]) * 1e9
    assert n * 8 > measured
    assert f"{n / 1e9:.2f}e9" in TRAINING_NOT_EXPRESSED_ROWS[rid]


# litgpt config_hub/finetune/<model>/<method>.yaml @ 00af8b0d (Lightning-AI/litgpt): lora_r, the lora_* flags,
# micro_batch_size and devices, as read from the files
_PARALLEL_BLOCK_YAML = {
    "PM1100": ("falcon-7b", "lora", 32, "q,v", 1, 1), "PM1101": ("falcon-7b", "lora", 32, "q,v", 1, 1),
    "PM1102": ("falcon-7b", "qlora", 32, "q,v", 1, 1),
    "PM1131": ("phi-2", "full", 0, "", 4, 2),
    "PM1132": ("phi-2", "lora", 8, "q,k,v,o,gate,up,down,lm_head", 4, 1),
    "PM1133": ("phi-2", "lora", 8, "q,k,v,o,gate,up,down,lm_head", 4, 1),
    "PM1134": ("phi-2", "qlora", 8, "q,k,v,o,gate,up,down,lm_head", 4, 1),
    "PM1138": ("stablelm-base-alpha-3b", "full", 0, "", 1, 2),
    "PM1139": ("stablelm-base-alpha-3b", "lora", 32, "q,v", 1, 1),
    "PM1140": ("stablelm-base-alpha-3b", "lora", 32, "q,v", 1, 1),
    "PM1141": ("stablelm-base-alpha-3b", "qlora", 32, "q,v", 1, 1),
}


@pytest.mark.parametrize("rid", list(_PARALLEL_BLOCK_YAML))
def test_parallel_block_litgpt_rows_take_the_config_hub_settings_and_stay_out_of_the_summary(rid: str) -> None:
    model, method, rank, targets, micro, devices = _PARALLEL_BLOCK_YAML[rid]
    m, fields, _, specified, what = TRAINING_ROWS[rid]
    assert (m, fields["method"], fields["micro_batch"], fields.get("gpus", 1)) == (model, method, micro, devices)
    assert (fields.get("rank", 0), fields.get("targets", "")) == (rank, targets)
    assert fields["seq_len"] == 512 and not specified and what == "peak"
    assert rid not in TRAINING_NOT_EXPRESSED_ROWS
    # "falcon-7b" resolves in the catalog (the instruct release's in-library config.json, same shapes)
    assert load_model(model).num_layers in (32, 16)


def test_torchtitan_ring_attention_works_on_the_repeated_keys() -> None:
    """torchtitan 9dec370 repeats K/V to every local query head before SDPA (model.py lines 198-209), so under
    context parallelism the ring attention gathers and differentiates q-wide K/V: its backward buffers are those of
    formulas/context_parallel.py at the query width (the formula is measured with K/V at every head on torch's own
    ring attention: tests/training/test_context_parallel.py)."""
    from llmsizer.estimate.framework import with_framework
    from llmsizer.estimate.training import estimate_training
    from llmsizer.formulas.context_parallel import ring_attention_backward_bytes
    from llmsizer.specs import TrainingWorkload

    spec = load_model("llama-3.1-8b")
    titan = with_framework(spec, TrainingWorkload(framework="torchtitan"))[0]
    assert titan.kv_expanded_in_attention and not spec.kv_expanded_in_attention

    def transient(s: object, cp: int) -> int:
        est = estimate_training(s, method="full", precision="fsdp-bf16-mixed", fsdp="full", gpus=8, micro_batch=1,
                                seq_len=8192 * cp, context_parallel=cp, grad_checkpointing="full",
                                loss="cut-ce")  # a small head: the peak is a layer's backward
        assert est.details["peak_phase"].startswith("backward layer")
        return est.item("backward_transient").bytes

    q = spec.num_heads * spec.head_dim
    kv = spec.num_kv_heads * spec.head_dim
    assert transient(spec, 4) - transient(spec, 1) == ring_attention_backward_bytes(8192, q, kv, kv, 4, 2)
    assert transient(titan, 4) - transient(titan, 1) == ring_attention_backward_bytes(8192, q, q, q, 4, 2)
