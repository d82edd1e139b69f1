"""Host RAM of the PEFT README's DeepSpeed ZeRO-3 offload runs (PM0071 T0_3B, PM0076 mt0-xxl, PM0081 bloomz-7b1).

The README's CPU column (peft README @ 0032f32a 'GPU memory required for adapting LLMs') is the host RAM of the same
runs as its GPU column. With ``offload_param_device: cpu`` DeepSpeed ZeRO-3 keeps every parameter's fp32 partition in
host memory, so the estimate's offloaded weights must hold the real model's parameters, LoRA adapters included, x 4 B
(counted here on the transformers model built on the meta device with PEFT's adapters added, not by llmsizer; within
0.1 %; the bloom rows' LoRA adapters alone exactly: one on the fused query_key_value, targets q,k,v). What the estimate leaves out is the CUDA process's
own host RSS (validation_cases.TRAINING_HOST_RSS_NOT_MODELLED), which only adds: no prediction may exceed what was
measured by more than the rounding of the README's figures (one digit: 1 %).
"""

from __future__ import annotations

import csv
from pathlib import Path

import pytest

from llmsizer.catalog.models import entries
from llmsizer.estimate.training import estimate_training
from llmsizer.formulas.lora import lora_params
from llmsizer.models import load_model
from llmsizer.validation_cases import TRAINING_ROWS, TRAINING_UNIT, bloom_7b1, training_prediction
from oracle_utils import build, real_param_count

DATA = Path(__file__).resolve().parents[2] / "validation" / "public_measurements.csv"
HOST_ROWS = ("PM0071", "PM0076", "PM0081")
BLOOMZ_7B1 = {"model_type": "bloom", "vocab_size": 250880, "hidden_size": 4096, "n_layer": 30, "n_head": 32,
              "tie_word_embeddings": True}  # bigscience/bloomz-7b1 config.json (the fields that set the shapes)


def _measured(rid: str) -> float:
    with DATA.open(newline="", encoding="utf-8") as f:
        row = next(r for r in csv.DictReader(f) if r["id"] == rid)
    assert "host" in row["hardware"] and row["metric"].startswith("CPU memory")
    return float(row["value"]) * TRAINING_UNIT[row["unit"]]


def _config(model: str) -> dict:
    if model == "bigscience/bloomz-7b1":
        return BLOOMZ_7B1
    return dict(entries()[model].config)


def _peft_model(model: str):
    """The transformers model on the meta device with PEFT's LoRA r8 on the rows' targets (T5: q and v; BLOOM: the
    fused query_key_value)."""
    from peft import LoraConfig, get_peft_model

    targets = ["query_key_value"] if model == "bigscience/bloomz-7b1" else ["q", "v"]
    return get_peft_model(build(_config(model)), LoraConfig(r=8, lora_alpha=32, target_modules=targets))


def _peft_param_count(model: str) -> int:
    """Every parameter of :func:`_peft_model` counted."""
    return real_param_count(_peft_model(model))


@pytest.mark.parametrize("rid", ("PM0078", "PM0080", "PM0081"))
def test_bloom_lora_adapters_are_peft_trainable_count(rid):
    """PEFT's trainable parameters on BloomForCausalLM (meta device): one adapter per layer on query_key_value."""
    model, fields, _, _, _ = TRAINING_ROWS[rid]
    assert fields["targets"] == "q,k,v"
    peft_model = _peft_model(model)
    trainable = sum(p.numel() for p in peft_model.parameters() if p.requires_grad)
    assert lora_params(bloom_7b1(), fields["rank"], fields["targets"]).total == trainable


@pytest.mark.parametrize("rid", HOST_ROWS)
def test_offloaded_weights_are_the_real_parameter_count_in_fp32(rid):
    model, fields, _, _, what = TRAINING_ROWS[rid]
    assert what == "host"
    spec = bloom_7b1() if model == "bigscience/bloomz-7b1" else load_model(model)
    est = estimate_training(spec, **fields)
    real = _peft_param_count(model) * 4
    assert abs(est.item("host_weights").bytes - real) <= 0.001 * real
    assert est.item("host_weights").location == "host"


@pytest.mark.parametrize("rid", HOST_ROWS)
def test_host_prediction_is_not_above_the_measured_host_ram(rid):
    assert training_prediction(rid) <= _measured(rid) * 1.01
