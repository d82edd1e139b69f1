"""checkpoint_offload and loss='cut-ce' (specs/training.py) move exactly the bytes their mechanisms move."""

from __future__ import annotations

import pytest

from llmsizer.errors import InputError
from llmsizer.estimate.training import estimate_training

BASE = dict(method="lora", micro_batch=2, seq_len=4096, grad_checkpointing="full", precision="bf16")


def test_checkpoint_offload_moves_every_kept_input_to_the_host() -> None:
    kept = estimate_training("llama-3.1-8b", **BASE)
    off = estimate_training("llama-3.1-8b", **BASE, checkpoint_offload=True)
    layers, h, tokens = 32, 4096, 2 * 4096
    inputs = layers * tokens * h * 2  # bf16 layer inputs
    assert off.item("host_checkpointed_inputs").bytes == inputs
    fwd = {e: x.details["phases"]["forward end"] for e, x in (("kept", kept), ("off", off))}
    assert fwd["kept"] - fwd["off"] == inputs
    assert off.details["tensor_peak_bytes"] < kept.details["tensor_peak_bytes"]


def test_cut_ce_keeps_no_vocabulary_sized_tensor() -> None:
    ce = estimate_training("llama-3.1-8b", **BASE)
    cut = estimate_training("llama-3.1-8b", **BASE, loss="cut-ce")
    tokens, vocab = 2 * 4096, 128256
    assert ce.details["phases"]["forward end"] - cut.details["phases"]["forward end"] >= tokens * vocab * 4
    assert cut.details["tensor_peak_bytes"] < ce.details["tensor_peak_bytes"]


def test_checkpoint_offload_needs_full_checkpointing() -> None:
    with pytest.raises(InputError, match="needs grad_checkpointing 'full'"):
        estimate_training("llama-3.1-8b", method="lora", checkpoint_offload=True)


def test_unsloth_kernels_keep_what_the_kernels_save() -> None:
    # unsloth/kernels @ e3162dc: per layer and token 2 norm inputs + 1/rms, LoRA_QKV's and LoRA_MLP's X, q/k/v/o,
    # the log-sum-exp and LoRA_MLP's e and g (formulas/unsloth_kernels.py eq. 1), all bf16 under QLoRA
    fields = dict(method="qlora", rank=32, targets="q,k,v,o,gate,up,down", micro_batch=1, seq_len=1000,
                  grad_checkpointing="none", kernels="unsloth")
    est = estimate_training("llama-3.1-8b", **fields)
    per_token = sum(t["bytes"] for t in est.details["layer_terms"]) / 1000
    h, inter, q, kv, heads = 4096, 14336, 4096, 1024, 32
    assert per_token == 2 * (h * 2 + 4) + 2 * h * 2 + (q + kv + kv + q) * 2 + 4 * heads + 2 * inter * 2


def test_unsloth_kernels_are_refused_where_unsloth_has_no_fast_path() -> None:
    with pytest.raises(InputError, match="kernels 'unsloth'"):
        estimate_training("llama-3.1-8b", method="full", kernels="unsloth")
    with pytest.raises(InputError, match="adapters on all of"):
        estimate_training("llama-3.1-8b", method="lora", targets="q,v", kernels="unsloth")
