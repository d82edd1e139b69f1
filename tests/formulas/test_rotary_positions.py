"""``ModelSpec.rotary``, the one test of "the forward builds rotary cos/sin tables" (the prefill's forward locals,
formulas/activations.py; the training's shared rotary tables, training_activations.py; the rotation kernels,
elementwise_traffic.py), against the modules transformers builds from the same config.json: a model rotates q/k
exactly when it builds a ``...RotaryEmbedding`` module (LlamaRotaryEmbedding, FalconH1RotaryEmbedding, ...).
Mamba2Model, NemotronHModel and JambaModel build none (modeling_mamba2.py, modeling_nemotron_h.py,
modeling_jamba.py), GraniteMoeHybridModel only with position_embedding_type "rope" (modeling_granitemoehybrid.py
line 1057), GPT-BigCode learns a position table (wpe) instead (review24 D7), T5 adds relative position biases
to its scores (T5Attention)."""

from __future__ import annotations

from typing import Any

import pytest

from llmsizer.formulas.activations import prefill_activation_bytes
from llmsizer.readers.hf_config import spec_from_config
from oracle_utils import HYBRID_TINY, TINY_CONFIGS, build

CASES: dict[str, dict[str, Any]] = {
    **{f"hybrid-{k}": v for k, v in HYBRID_TINY.items()}, **TINY_CONFIGS,
    "granitemoehybrid-rope": {**HYBRID_TINY["granitemoehybrid"], "position_embedding_type": "rope"},
    # T5Model: relative position buckets (T5Attention.relative_attention_bias), no rotary embedding
    "t5-relative-positions": {"model_type": "t5", "vocab_size": 128, "d_model": 64, "d_kv": 16, "d_ff": 96,
                              "num_layers": 2, "num_heads": 4, "feed_forward_proj": "gated-gelu"},
}


def _builds_rotary(cfg: dict[str, Any]) -> bool:
    return any(type(m).__name__.endswith("RotaryEmbedding") for m in build(cfg).modules())


@pytest.mark.parametrize("name", sorted(CASES))
def test_rotary_is_a_model_that_builds_a_rotary_embedding(name: str) -> None:
    cfg = CASES[name]
    assert spec_from_config(cfg, name=name).rotary is _builds_rotary(cfg)


@pytest.mark.parametrize("name", ["mamba2", "nemotron_h"])
def test_the_mixer_phase_holds_no_rotary_tables_without_rope(name: str) -> None:
    """The mixer phase's model-forward locals are the input embeddings only, [t, h] (Mamba2Model.forward keeps
    ``inputs_embeds`` while its layers run; no ``position_embeddings`` is made): the mixer term less the mixer's own
    peak is t x h x bytes."""
    cfg = HYBRID_TINY[name]
    spec = spec_from_config(cfg, name=name)
    batch, tokens, c = 2, 256, 2
    with_locals = prefill_activation_bytes(spec, batch, tokens, tokens, c, forward_locals=True, recurrent_scan=True)
    without = prefill_activation_bytes(spec, batch, tokens, tokens, c, forward_locals=False, recurrent_scan=True)
    assert with_locals.mixer_bytes - without.mixer_bytes == batch * tokens * cfg["hidden_size"] * c
