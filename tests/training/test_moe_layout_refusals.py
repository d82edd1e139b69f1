"""Mixture-of-experts layouts the framework itself refuses to train are bad input (one line naming the fields).

Independent truth: the frameworks' own checks.

- Megatron-Core (NVIDIA/Megatron-LM @d98e8a64) megatron/core/transformer/moe/moe_layer.py:636-640: ``MoELayer.forward``
  raises ValueError in training when the attention's TP group has more than one rank and sequence_parallel is off
  (megatron/training/yaml_arguments.py:335-338 asserts the same for any MoE with TP > 1).
- DeepSpeed (deepspeedai/DeepSpeed @edaa7221) deepspeed/runtime/engine.py:1872-1897
  ``_validate_zero3_moe_compatibility``: under ZeRO stage 3 native DeepSpeed-MoE layers are refused, only AutoEP
  layers pass, and AutoEP refuses AutoTP (tensor parallelism) there.
"""

from __future__ import annotations

import pytest

from llmsizer.errors import FieldError
from llmsizer.estimate.training import estimate_training
from llmsizer.models import load_model

BASE = dict(method="full", micro_batch=1, seq_len=4096, gpus=64, gpus_per_node=8, grad_checkpointing="full")


def test_megatron_moe_with_tp_needs_sequence_parallelism() -> None:
    spec = load_model("deepseek-v3")
    for ep in (1, 8):  # moe_layer.py's check reads the TP group alone, with or without EP
        with pytest.raises(FieldError, match="moe_layer.py:636-640") as e:
            estimate_training(spec, **{**BASE, "precision": "megatron-bf16", "tp": 8, "ep": ep, "zero": 1})
        assert e.value.fields == ("sequence_parallel", "tp")
    ok = estimate_training(spec, **{**BASE, "precision": "megatron-bf16", "tp": 8, "ep": 8, "zero": 1,
                                    "sequence_parallel": True})
    assert ok.total_bytes > 0
    dense = estimate_training(load_model("llama-3.1-8b"), **{**BASE, "precision": "megatron-bf16", "tp": 8})
    assert dense.total_bytes > 0  # a dense model trains under TP without sequence parallelism


def test_deepspeed_zero3_expert_parallelism_refuses_tensor_parallelism() -> None:
    spec = load_model("deepseek-v3")
    with pytest.raises(FieldError, match="engine.py:1889-1897") as e:
        estimate_training(spec, **{**BASE, "precision": "deepspeed-bf16", "zero": 3, "ep": 8, "tp": 8})
    assert e.value.fields == ("zero", "ep", "tp")
    autoep = estimate_training(spec, **{**BASE, "precision": "deepspeed-bf16", "zero": 3, "ep": 8})
    assert autoep.total_bytes > 0  # AutoEP under ZeRO-3 without TP runs (its experts over their expert dp group)
