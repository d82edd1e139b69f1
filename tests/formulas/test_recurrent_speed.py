"""Decode of a recurrent model reads and writes every sequence's state once per token (Gu & Dao 2023, section 3.3:
the recurrent mode updates h_t from h_{t-1}); arithmetic written out in the test from the Mamba-2 shapes."""

from __future__ import annotations

import pytest

from llmsizer.catalog.hardware import builtin_catalog
from llmsizer.estimate.speed import estimate_speed
from llmsizer.readers.hf_config import spec_from_config

# Mamba2Config's defaults (transformers 5.24): 64 layers, hidden 4096, expand 2, 128 heads x 64, state 128,
# 8 groups, conv 4 -- written out, not read from transformers
MAMBA2 = {"model_type": "mamba2", "vocab_size": 32768, "hidden_size": 4096, "num_hidden_layers": 64, "num_heads": 128,
          "head_dim": 64, "state_size": 128, "n_groups": 8, "expand": 2, "conv_kernel": 4}


@pytest.mark.parametrize("state_dtypes", [("fp32", "fp32"), ("bf16", "fp32")])
def test_decode_moves_the_state_of_every_sequence_twice(state_dtypes):
    spec = spec_from_config(MAMBA2, name="mamba2")
    dev = builtin_catalog().devices["h100-sxm"]
    conv_b, ssm_b = (4 if d == "fp32" else 2 for d in state_dtypes)
    per_seq = 64 * ((8192 + 2 * 8 * 128) * (4 - 1) * conv_b + 8192 * 128 * ssm_b)
    sp = estimate_speed(spec, dev, weights_format="bf16", prompt_tokens=1024, output_tokens=256, concurrency=32,
                        state_dtypes=state_dtypes)
    be = next(a.value for a in sp.assumptions if a.name == "bandwidth_efficiency")
    assert sp.details["recurrent_state_bytes_per_decode_step"] == 2 * 32 * per_seq
    assert sp.decode is not None and sp.decode_single is not None
    extra = sp.decode.memory_seconds - sp.decode_single.memory_seconds
    assert extra == pytest.approx(2 * 31 * per_seq / (dev.bandwidth * be), rel=1e-9)


def test_a_model_without_recurrent_layers_moves_no_state():
    llama = {"model_type": "llama", "vocab_size": 32000, "hidden_size": 4096, "num_hidden_layers": 32,
             "num_attention_heads": 32, "intermediate_size": 11008}
    sp = estimate_speed(spec_from_config(llama, name="l"), builtin_catalog().devices["h100-sxm"],
                        weights_format="bf16", concurrency=8)
    assert "recurrent_state_bytes_per_decode_step" not in sp.details


@pytest.mark.parametrize("engine", ["sglang", "vllm"])
def test_tp_decode_reads_each_shard_with_its_replicated_groups(engine):
    """review31 D2's speed side: a vLLM / SGLang rank of granite-4.0-h-tiny at TP 4 holds its Mamba-2 state shard with
    the groups replicated for the head shards, and a decode step reads and writes it. Bytes from sglang 0.5.6
    srt/configs/mamba_utils.py:100-107 (Mamba2StateShape.create): n_groups 1 % tp 4 != 0 -> n_groups += 3
    (extra_groups_for_head_shards(1, 4) = 3), conv_dim = intermediate 3072 + 2 x 4 x state 128 = 4096, conv state
    (conv_dim / tp, d_conv - 1) = (1024, 3), temporal (num_heads / tp, head_dim, state) = (12, 64, 128); the same in
    vllm 0.19.1 model_executor/layers/mamba/mamba_utils.py:127-151 (MambaStateShapeCalculator.mamba2_state_shape).
    granite-4.0-h-tiny config.json: hidden 1536, mamba_expand 2, mamba_n_heads 48, mamba_d_head 64, mamba_d_state 128,
    mamba_n_groups 1, mamba_d_conv 4; 36 'mamba' layers of 40."""
    from llmsizer.models import load_model

    spec = load_model("granite-4.0-h-tiny")
    conv = (3072 + 2 * (1 + 3) * 128) // 4 * (4 - 1) * 2  # bf16 conv state, 6,144 B (4,992 B without the extra groups)
    ssm = 48 // 4 * 64 * 128 * 4  # fp32 temporal state
    sp = estimate_speed(spec, builtin_catalog().devices["h100-sxm"], 4, weights_format="bf16", concurrency=8,
                        tensor_parallel=4, engine=engine, state_dtypes=("bf16", "fp32"))
    assert sp.details["recurrent_state_bytes_per_decode_step"] == 2 * 8 * 36 * (conv + ssm)
    # not the whole state / 4: that would drop the 3 replicated groups' conv channels (768 / 4 per rank)
    whole = 36 * ((3072 + 2 * 128) * 3 * 2 + 48 * 64 * 128 * 4)
    assert sp.details["recurrent_state_bytes_per_decode_step"] - 2 * 8 * whole / 4 == 2 * 8 * 36 * 3 * 2 * 768 / 4
