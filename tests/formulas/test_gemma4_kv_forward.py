"""Gemma 4's KV cache against the cache a real transformers forward pass leaves behind.

Independent truth: tiny random-weight ``Gemma4ForCausalLM`` models (transformers v5.24.0 models/gemma4) run on the
CPU with ``use_cache=True`` -- a prefill of T tokens for B sequences (T longer than the sliding window), then one
decode step -- and the key/value tensors in the returned cache are summed (oracle_utils ``cache_logical_bytes`` /
``cache_storage_bytes``). Two Gemma 4 rules are what this checks: a full-attention layer caches K/V of
``global_head_dim`` per head, a sliding layer of ``head_dim`` (Gemma4TextAttention L1152-1153); the last
``num_kv_shared_layers`` layers reuse an earlier layer's K/V and hold none of their own (counting them, or giving
every layer one head size, would be off by the ratio of the two).
"""

from __future__ import annotations

import functools
from typing import Any

import pytest

from llmsizer.estimate import engines
from llmsizer.formulas.kv_cache import kv_cache
from llmsizer.readers.hf_config import spec_from_config
from oracle_utils import build, cache_layers, cache_logical_bytes, cache_storage_bytes, random_ids, torch

pytestmark = pytest.mark.slow

_BASE: dict[str, Any] = {"model_type": "gemma4_text", "vocab_size": 128, "hidden_size": 64, "num_attention_heads": 4,
                         "num_key_value_heads": 2, "head_dim": 16, "global_head_dim": 32, "intermediate_size": 96,
                         "vocab_size_per_layer_input": 128, "hidden_size_per_layer_input": 8,
                         "max_position_embeddings": 512}
CONFIGS: dict[str, dict[str, Any]] = {
    # 6 layers (E2B's pattern shortened: 2 sliding + 1 full), the last 2 reuse layers 3 and 2's K/V: 4 hold a cache
    "shared-2": {**_BASE, "num_hidden_layers": 6, "num_kv_shared_layers": 2, "sliding_window": 6,
                 "layer_types": ["sliding_attention", "sliding_attention", "full_attention"] * 2,
                 "use_double_wide_mlp": True},
    # the class default's pattern (every 6th layer full, the last forced full), 8 layers of which the last 1 shares
    "default-pattern-shared-1": {**_BASE, "num_hidden_layers": 8, "num_kv_shared_layers": 1, "sliding_window": 8,
                                 "num_key_value_heads": 1},
}
SHAPES = [(1, 5), (2, 13), (3, 21)]


@functools.cache
def _model(name: str) -> Any:
    torch.manual_seed(0)
    return build(CONFIGS[name], device="cpu", dtype=torch.bfloat16)


def _spec(name: str) -> Any:
    return spec_from_config(CONFIGS[name], name=name)


def _prefill(name: str, batch: int, tokens: int) -> Any:
    with torch.no_grad():
        return _model(name)(input_ids=random_ids(128, batch, tokens), use_cache=True).cache


@pytest.mark.parametrize("name", list(CONFIGS))
@pytest.mark.parametrize(("batch", "tokens"), SHAPES)
def test_prefill_and_decode_cache_bytes_equal_the_formula(name, batch, tokens):
    spec = _spec(name)
    cache = _prefill(name, batch, tokens)
    assert len(cache_layers(cache)) == spec.kv_cache_layers
    assert cache_logical_bytes(cache) == kv_cache(spec, tokens, batch, "bf16").total_bytes
    assert cache_storage_bytes(cache) == kv_cache(spec, tokens, batch, "bf16", window_extra=10**9).total_bytes
    with torch.no_grad():
        step = _model(name)(input_ids=random_ids(128, batch, 1, seed=1), cache=cache, use_cache=True).cache
    assert cache_logical_bytes(step) == kv_cache(spec, tokens + 1, batch, "bf16").total_bytes
    assert cache_storage_bytes(step) == kv_cache(spec, tokens + 1, batch, "bf16", window_extra=0).total_bytes


@pytest.mark.parametrize("name", list(CONFIGS))
def test_transformers_engine_profile_matches_the_bytes_held(name):
    prof = engines.PROFILES["transformers"]
    batch, tokens = 2, 13
    cache = _prefill(name, batch, tokens)
    extra = tokens if prof.prefill_keeps_full_prompt else prof.window_extra
    assert kv_cache(_spec(name), tokens, batch, "bf16", window_extra=extra).total_bytes == cache_storage_bytes(cache)


def test_each_cached_layer_holds_its_own_head_size():
    """Per layer: the key tensor's last dimension is the layer's head size, and the K/V-sharing layers hold none."""
    spec = _spec("shared-2")
    cache = _prefill("shared-2", 1, 5)
    held = tuple(None if getattr(x, "keys", None) is None or not x.keys.numel() else x.keys.shape[-1]
                 for x in cache.layers)
    assert held == tuple(None if s else spec.kv_head_dim(t)
                         for s, t in zip(spec.kv_shared_layers, spec.layer_types, strict=True)) \
        == (16, 16, 32, 16, None, None)
