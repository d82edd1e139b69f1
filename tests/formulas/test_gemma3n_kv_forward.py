"""Gemma 3n's KV cache against the cache a real transformers forward pass leaves behind.

Independent truth: tiny random-weight ``Gemma3nForCausalLM`` models (transformers v5.24.0) run on the CPU with
``use_cache=True`` -- a prefill of T tokens for B sequences (T longer than the sliding window), then one decode
step -- and the key/value tensors in the returned cache are summed (oracle_utils ``cache_logical_bytes`` /
``cache_storage_bytes``). The last ``num_kv_shared_layers`` layers attend over an earlier layer's K/V and must hold
none of their own (transformers gives them a ``DummyLayer``, cache_utils.py L1981-1985): counting them would
overstate the cache by num_kv_shared_layers / (num_layers - num_kv_shared_layers).
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

_TYPES = ["sliding_attention", "sliding_attention", "full_attention"] * 2
CONFIGS: dict[str, dict[str, Any]] = {
    # 6 layers, the last 2 (one sliding, one full) reuse layers 3 and 2's K/V: 4 layers hold a cache
    "shared-2": {"model_type": "gemma3n_text", "vocab_size": 128, "hidden_size": 64, "num_hidden_layers": 6,
                 "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 16, "intermediate_size": 96,
                 "vocab_size_per_layer_input": 128, "hidden_size_per_layer_input": 8, "laurel_rank": 4,
                 "altup_num_inputs": 2, "num_kv_shared_layers": 2, "sliding_window": 6, "layer_types": _TYPES,
                 "max_position_embeddings": 512},
    # the class default's pattern (every 5th layer full), 10 layers of which the last 4 share
    "default-pattern-shared-4": {"model_type": "gemma3n_text", "vocab_size": 128, "hidden_size": 32,
                                 "num_hidden_layers": 10, "num_attention_heads": 2, "num_key_value_heads": 1,
                                 "head_dim": 16, "intermediate_size": [64, 96] * 5, "vocab_size_per_layer_input": 64,
                                 "hidden_size_per_layer_input": 4, "laurel_rank": 8, "num_kv_shared_layers": 4,
                                 "sliding_window": 8, "max_position_embeddings": 512},
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
        return _model(name)(input_ids=random_ids(128 if name == "shared-2" else 64, batch, tokens),
                            use_cache=True).cache


@pytest.mark.parametrize("name", list(CONFIGS))
@pytest.mark.parametrize(("batch", "tokens"), SHAPES)
def test_prefill_and_decode_cache_bytes_equal_the_formula(name, batch, tokens):
    spec = _spec(name)
    cache = _prefill(name, batch, tokens)
    assert len(cache_layers(cache)) == spec.kv_cache_layers
    assert cache_logical_bytes(cache) == kv_cache(spec, tokens, batch, "bf16").total_bytes
    assert cache_storage_bytes(cache) == kv_cache(spec, tokens, batch, "bf16", window_extra=10**9).total_bytes
    with torch.no_grad():
        step = _model(name)(input_ids=random_ids(32, batch, 1, seed=1), cache=cache, use_cache=True).cache
    assert cache_logical_bytes(step) == kv_cache(spec, tokens + 1, batch, "bf16").total_bytes
    assert cache_storage_bytes(step) == kv_cache(spec, tokens + 1, batch, "bf16", window_extra=0).total_bytes


@pytest.mark.parametrize("name", list(CONFIGS))
def test_transformers_engine_profile_matches_the_bytes_held(name):
    prof = engines.PROFILES["transformers"]
    batch, tokens = 2, 13
    cache = _prefill(name, batch, tokens)
    extra = tokens if prof.prefill_keeps_full_prompt else prof.window_extra
    assert kv_cache(_spec(name), tokens, batch, "bf16", window_extra=extra).total_bytes == cache_storage_bytes(cache)


def test_shared_layers_are_what_the_cache_leaves_empty():
    spec = _spec("default-pattern-shared-4")
    cache = _prefill("default-pattern-shared-4", 1, 5)
    empty = tuple(getattr(layer, "keys", None) is None or not layer.keys.numel() for layer in cache.layers)
    assert empty == spec.kv_shared_layers == (False,) * 6 + (True,) * 4
