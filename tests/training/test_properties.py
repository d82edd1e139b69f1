"""Invariants of the training estimate (hypothesis): more sharding never costs memory per device, checkpointing
never adds activations, LoRA parameters are linear in the rank, memory grows with tokens."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from llmsizer.errors import FieldError
from llmsizer.estimate.training import estimate_training
from llmsizer.formulas.lora import lora_params
from llmsizer.models import load_model

MODELS = ["llama-3.2-1b", "qwen2.5-0.5b", "qwen3-0.6b", "mistral-7b-v0.1", "gemma-2-2b-it", "qwen3-30b-a3b"]
DENSE = ["llama-3.2-1b", "qwen2.5-0.5b", "qwen3-0.6b", "mistral-7b-v0.1"]
common = dict(
    micro_batch=st.integers(1, 4),
    seq_len=st.sampled_from([128, 512, 2048, 8192]),
    precision=st.sampled_from(["fp32", "bf16-mixed", "bf16", "deepspeed-bf16", "megatron-bf16", "megatron-fp16"]),
    method=st.sampled_from(["full", "lora"]),
    ckpt=st.sampled_from(["none", "full"]),
)
SETTINGS = settings(max_examples=25, deadline=None)


def _device(model: str, **kw: object) -> int:
    return estimate_training(model, **kw).total("device")[1]


@SETTINGS
@given(model=st.sampled_from(MODELS), gpus=st.sampled_from([2, 4, 8, 64]), **common)
def test_memory_non_increasing_with_zero_stage(model: str, gpus: int, micro_batch: int, seq_len: int,
                                               precision: str, method: str, ckpt: str) -> None:
    kw = dict(micro_batch=micro_batch, seq_len=seq_len, precision=precision, method=method, grad_checkpointing=ckpt,
              gpus=gpus)
    mem = [_device(model, zero=z, **kw) for z in (0, 1, 2)]
    assert all(a >= b for a, b in zip(mem, mem[1:], strict=False)), mem
    # ZeRO-3 partitions more model state than ZeRO-2, but DeepSpeed adds fixed buffers of its own (a 5e8-element
    # IPG bucket, the fp32 copy of the gradient partition at the step: formulas/deepspeed_zero.py), so only the
    # partitioned states are ordered at small data-parallel degrees
    if precision.startswith("megatron-"):  # Megatron-Core has no ZeRO-3 (refused: estimate/training/setup.py)
        with pytest.raises(FieldError, match="no ZeRO-3"):
            estimate_training(model, zero=3, **kw)
    else:
        states = [sum(estimate_training(model, zero=z, **kw).details["model_states"].values()) for z in (2, 3)]
        assert states[0] >= states[1], states
    assert _device(model, fsdp="full", **kw) <= _device(model, fsdp="grad_op", **kw)


@SETTINGS
@given(model=st.sampled_from(DENSE), sp=st.booleans(), **common)
def test_memory_non_increasing_with_tensor_parallel(model: str, sp: bool, micro_batch: int, seq_len: int,
                                                    precision: str, method: str, ckpt: str) -> None:
    heads = load_model(model).num_heads
    tps = [t for t in (1, 2, 4, 8) if heads % t == 0]
    mem = [_device(model, micro_batch=micro_batch, seq_len=seq_len, precision=precision, method=method,
                   grad_checkpointing=ckpt, gpus=t, tp=t, sequence_parallel=sp and t > 1) for t in tps]
    assert all(a >= b for a, b in zip(mem, mem[1:], strict=False)), mem


@SETTINGS
@given(model=st.sampled_from(DENSE), **common)
def test_memory_non_increasing_with_pipeline_stages(model: str, micro_batch: int, seq_len: int, precision: str,
                                                    method: str, ckpt: str) -> None:
    layers = load_model(model).num_layers
    pps = [p for p in (1, 2, 4) if p <= layers]
    mem = [_device(model, micro_batch=micro_batch, seq_len=seq_len, precision=precision, method=method,
                   grad_checkpointing=ckpt, gpus=p, pp=p, grad_accumulation=8) for p in pps]
    assert all(a >= b for a, b in zip(mem, mem[1:], strict=False)), mem


@SETTINGS
@given(model=st.sampled_from(MODELS), attention=st.sampled_from(["sdpa", "eager", "flash"]), **common)
def test_checkpointing_never_increases_activations(model: str, attention: str, micro_batch: int, seq_len: int,
                                                   precision: str, method: str, ckpt: str) -> None:
    kw = dict(micro_batch=micro_batch, seq_len=min(seq_len, 2048), precision=precision, method=method,
              attention=attention)
    by = {g: estimate_training(model, grad_checkpointing=g, **kw) for g in ("none", "selective", "full")}
    saved = {g: e.details["saved_activations_bytes"] for g, e in by.items()}
    per_layer = {g: sum(t["bytes"] for t in e.details["layer_terms"]) for g, e in by.items()}
    assert saved["full"] <= saved["selective"] <= saved["none"]
    assert per_layer["selective"] <= per_layer["none"]
    # the peak itself may exceed no-checkpointing by the one checkpointed input held while its layer is recomputed
    spec = load_model(model)
    one_input = micro_batch * kw["seq_len"] * spec.hidden_size * 4
    total = {g: e.total("device")[1] for g, e in by.items()}
    assert total["full"] <= total["none"] + one_input
    assert total["selective"] <= total["none"]


@settings(max_examples=30, deadline=None)
@given(model=st.sampled_from(MODELS), rank=st.integers(1, 512),
       targets=st.sampled_from(["q,v", "q,k,v,o", "q,k,v,o,gate,up,down", "o,down", "q,v,embed"]))
def test_lora_params_linear_in_rank(model: str, rank: int, targets: str) -> None:
    spec = load_model(model)
    one = lora_params(spec, 1, targets).total
    assert lora_params(spec, rank, targets).total == rank * one
    dora_one = lora_params(spec, 1, targets, dora=True).total if not spec.is_moe else one
    if not spec.is_moe:
        magnitude = dora_one - one
        assert lora_params(spec, rank, targets, dora=True).total == rank * one + magnitude


@SETTINGS
@given(model=st.sampled_from(MODELS), **common)
def test_memory_non_decreasing_in_tokens(model: str, micro_batch: int, seq_len: int, precision: str, method: str,
                                         ckpt: str) -> None:
    kw = dict(precision=precision, method=method, grad_checkpointing=ckpt)
    assert _device(model, micro_batch=micro_batch, seq_len=seq_len, **kw) <= \
        _device(model, micro_batch=micro_batch + 1, seq_len=seq_len, **kw)
    assert _device(model, micro_batch=micro_batch, seq_len=seq_len, **kw) <= \
        _device(model, micro_batch=micro_batch, seq_len=2 * seq_len, **kw)
