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
