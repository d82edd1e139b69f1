"""Nemotron-H's mixer-only layers in the training formulas (``layer_saved_terms``): an MLP layer ("-") has no
attention and an attention layer ("*") no MLP, and NemotronHRMSNorm keeps its fp32 normalised tensor (eq. N3).

Independent truth: the distinct non-parameter storages autograd saves while each decoder layer of a small
Nemotron-H (pattern "M-*-", hidden 256, 4 query / 2 K/V heads of 64, relu^2 MLP of 384) runs a pure-bf16 training
forward on the CPU (``saved_storages_by_layer``, as tests/training/test_qwen3_next_saved_tensors.py), B=2, T=256.
Measured (transformers 5.24, torch 2.13): MLP layer 2,100,224 B, attention layer 2,108,416 B; counted to the byte.
Before, each was counted as attention + MLP with a half-precision normalised tensor: 2,893,824 B (1.38). The
Mamba-2 layer ("M") is compared in tests/training/test_mamba_saved_tensors.py (eq. M1).
"""

from __future__ import annotations

from typing import Any

import pytest

from llmsizer.formulas.training_activations import ActivationSetup, layer_saved_terms
from llmsizer.readers.hf_config import spec_from_config
from oracle_utils import build, random_ids, saved_storages_by_layer, torch

pytestmark = pytest.mark.slow

CONFIG: dict[str, Any] = dict(
    model_type="nemotron_h", vocab_size=512, hidden_size=256, hybrid_override_pattern="M-*-", num_attention_heads=4,
    num_key_value_heads=2, head_dim=64, intermediate_size=384, mamba_num_heads=8, mamba_head_dim=64,
    ssm_state_size=16, n_groups=2, chunk_size=64, max_position_embeddings=1024)
BATCH, TOKENS = 2, 256
MLP_LAYER, ATTENTION_LAYER = 1, 2


def test_mixer_only_layers_keep_only_their_own_block(capsys: Any) -> None:
    torch.manual_seed(0)
    model = build(CONFIG, device="cpu", dtype=torch.bfloat16, attn="sdpa")
    model.train()
    layers = model.model.layers
    assert [type(layers[i].mixer).__name__ for i in (MLP_LAYER, ATTENTION_LAYER)] == ["NemotronHMLP",
                                                                                       "NemotronHAttention"]
    measured = saved_storages_by_layer(model, layers)
    ids = random_ids(CONFIG["vocab_size"], BATCH, TOKENS)
    model(input_ids=ids, labels=ids, use_cache=False)
    spec = spec_from_config(CONFIG, name="tiny-nemotron-h")
    st = ActivationSetup(batch=BATCH, seq=TOKENS, residual=2, compute=2, expert=2, full=True, attention="sdpa")
    for layer in (MLP_LAYER, ATTENTION_LAYER):
        predicted = sum(t.bytes for t in layer_saved_terms(spec, layer, st))
        with capsys.disabled():
            print(f"\n[nemotron-h layer {layer}] saved {measured[layer]:,} B, counted {predicted:,} B "
                  f"(ratio {predicted / measured[layer]:.4f})")
        assert predicted == pytest.approx(measured[layer], rel=0.02)
