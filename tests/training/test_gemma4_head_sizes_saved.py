"""Gemma 4's per-layer head sizes in the training activation terms (formulas/training_activations.py
``layer_saved_terms`` with ``_head_dims(spec, layer)``, its v_norm term, ``shared_activations``' rotary pair per layer
type) against what autograd really saves.

Independent truth: the distinct non-parameter storages autograd saves (oracle_utils ``saved_storage_hooks``) in the
training forward (labels given) of two small Gemma 4 text models, transformers v5.24.0 ``Gemma4ForCausalLM`` on the
CPU, that differ only in ``global_head_dim`` (32 against 16 = ``head_dim``): 4 layers, sliding / full alternating,
no K/V sharing, no per-layer inputs, B=2 x T=256 tokens, SDPA. What the wider full-attention heads add is measured
as the difference of the two runs and compared with the difference of the terms. Before the per-layer head sizes
the terms added nothing (every layer took head_dim); measured (torch 2.13 CPU): fp32 1,736,704 B saved more,
1,736,704 counted; bf16 1,327,360 saved, 1,327,104 counted (the 256 B left: the q/k norms' fp32 weight copies, not
counted at this setup). The rest of Gemma 4's activations (per-layer inputs) stays a stated lower bound.
"""

from __future__ import annotations

import pytest

from llmsizer.formulas.training_activations import ActivationSetup, layer_saved_terms, shared_activations
from llmsizer.readers.hf_config import spec_from_config
from oracle_utils import build, random_ids, saved_storage_hooks, torch

pytestmark = pytest.mark.slow

BASE = {"model_type": "gemma4_text", "vocab_size": 128, "hidden_size": 64, "num_hidden_layers": 4,
        "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 16, "intermediate_size": 96,
        "hidden_size_per_layer_input": 0, "num_kv_shared_layers": 0, "sliding_window": 64,
        "max_position_embeddings": 1024, "layer_types": ["sliding_attention", "full_attention"] * 2}
BATCH, TOKENS = 2, 256


def _saved_and_counted(global_head_dim: int, dtype_name: str) -> tuple[int, int]:
    cfg = {**BASE, "global_head_dim": global_head_dim}
    elem = 4 if dtype_name == "float32" else 2
    torch.manual_seed(0)
    model = build(cfg, device="cpu", dtype=getattr(torch, dtype_name), attn="sdpa")
    model.train()
    saved, hooks = saved_storage_hooks(model)
    ids = random_ids(BASE["vocab_size"], BATCH, TOKENS)
    with hooks:
        model(input_ids=ids, labels=ids, use_cache=False)
    spec = spec_from_config(cfg, name=f"tiny-gemma4-{global_head_dim}")
    st = ActivationSetup(batch=BATCH, seq=TOKENS, residual=elem, compute=elem, expert=elem, full=True,
                         attention="sdpa")
    counted = sum(t.bytes for i in range(spec.num_layers) for t in layer_saved_terms(spec, i, st))
    counted += sum(t.bytes for t in shared_activations(spec, st))
    return sum(saved.values()), counted


@pytest.mark.parametrize("dtype_name", ["float32", "bfloat16"])
def test_wider_full_attention_heads_add_what_autograd_saves(dtype_name):
    saved_narrow, counted_narrow = _saved_and_counted(16, dtype_name)
    saved_wide, counted_wide = _saved_and_counted(32, dtype_name)
    assert saved_wide > saved_narrow
    assert counted_wide - counted_narrow == pytest.approx(saved_wide - saved_narrow, rel=0.005)
