"""KV cache bytes against the cache a real transformers forward pass leaves behind.

Independent truth: tiny random-weight models of every attention family are built on the CPU, run with
``use_cache=True`` (prefill of T tokens for B sequences, T longer than every sliding window), then one decode
step, then ``generate()``; the key/value tensors in the returned ``Cache`` are summed
(``cache.layers[i].keys / .values``). Two measures:

* exposed bytes: ``numel x element_size`` of the tensors the cache exposes -- what ``kv_cache(...,
  window_extra=-1)`` models (transformers keeps the last window-1 tokens of a sliding layer);
* held bytes: the storages those tensors keep alive. ``DynamicSlidingWindowLayer.update`` stores a *slice*
  of ``torch.cat([old, new])``, so after a prefill a sliding layer still holds the whole prompt, and after each
  decode step it holds ``window`` tokens (window_extra=0).

transformers' Falcon with new_decoder_architecture repeats K/V to every query head before caching: compared with
``repeated_kv=True`` (the transformers profile's ``caches_repeated_kv``), which counts num_heads heads for it.

transformers 5.x DeepSeek attention caches the compressed latent (``modeling_deepseek_v3.py``: keys =
kv_nope [B, 1, T, kv_lora_rank], values = k_rot [B, 1, T, qk_rope_head_dim]), so MLA is compared with
``mla_mode="latent"``.
"""

from __future__ import annotations

import functools
from typing import Any

import pytest

from llmsizer.estimate import engines
from llmsizer.formulas.kv_cache import kv_cache
from llmsizer.formulas.params import count_params
from llmsizer.readers.hf_config import spec_from_config
from oracle_utils import (
    TINY_CONFIGS,
    assert_params_equal,
    build,
    cache_indexer_keys,
    cache_layers,
    cache_logical_bytes,
    cache_storage_bytes,
    random_ids,
    torch,
)

pytestmark = pytest.mark.slow

DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16}
SHAPES = [(1, 5), (2, 13), (3, 21)]  # (B sequences, T prompt tokens); 13 and 21 exceed every window (6, 8)
ALL_WINDOWS = 10**9  # window_extra that makes every sliding layer keep everything


@functools.cache
def _model(name: str, kv_dtype: str) -> Any:
    torch.manual_seed(0)
    return build(TINY_CONFIGS[name], device="cpu", dtype=DTYPES[kv_dtype])


def _spec(name: str) -> Any:
    return spec_from_config(TINY_CONFIGS[name], name=name)


def _mla_mode(name: str) -> str:
    return "latent" if _spec(name).mla is not None else "expanded"


def _predict(name: str, tokens: int, batch: int, kv_dtype: str, window_extra: int = -1) -> int:
    return kv_cache(_spec(name), tokens, batch, kv_dtype, mla_mode=_mla_mode(name),
                    window_extra=window_extra, repeated_kv=True).total_bytes  # transformers' own modules


def _prefill(name: str, kv_dtype: str, batch: int, tokens: int) -> Any:
    ids = random_ids(TINY_CONFIGS[name]["vocab_size"], batch, tokens)
    with torch.no_grad():
        return _model(name, kv_dtype)(input_ids=ids, use_cache=True).cache


CASES = [pytest.param(n, d, b, t, id=f"{n}-{d}-B{b}-T{t}") for n in TINY_CONFIGS for d in DTYPES for b, t in SHAPES]


@pytest.mark.parametrize(("name", "kv_dtype", "batch", "tokens"), CASES)
def test_prefill_then_decode_cache_bytes_equal_the_formula(name, kv_dtype, batch, tokens):
    cache = _prefill(name, kv_dtype, batch, tokens)
    assert cache_logical_bytes(cache) == _predict(name, tokens, batch, kv_dtype)
    # held after prefill: sliding layers still reference the whole prompt's K/V
    assert cache_storage_bytes(cache) == _predict(name, tokens, batch, kv_dtype, ALL_WINDOWS)
    with torch.no_grad():
        step = _model(name, kv_dtype)(input_ids=random_ids(128, batch, 1, seed=1), cache=cache,
                                      use_cache=True).cache
    assert cache_logical_bytes(step) == _predict(name, tokens + 1, batch, kv_dtype)
    assert cache_storage_bytes(step) == _predict(name, tokens + 1, batch, kv_dtype, window_extra=0)


@pytest.mark.parametrize("name", list(TINY_CONFIGS))
def test_generate_cache_bytes_equal_the_formula(name):
    """generate() feeds back all but the last new token: the cache ends with T + N - 1 tokens."""
    batch, tokens, new = 2, 11, 6
    ids = random_ids(128, batch, tokens)
    with torch.no_grad():
        out = _model(name, "bf16").generate(input_ids=ids, attention_mask=torch.ones_like(ids),
                                            max_new_tokens=new, min_new_tokens=new, do_sample=False,
                                            return_dict_in_generate=True, pad_token_id=0)
    assert out.sequences.shape == (batch, tokens + new)
    cache = out.cache
    assert cache_logical_bytes(cache) == _predict(name, tokens + new - 1, batch, "bf16")
    assert cache_storage_bytes(cache) == _predict(name, tokens + new - 1, batch, "bf16", window_extra=0)


@pytest.mark.parametrize("name", [n for n in TINY_CONFIGS if TINY_CONFIGS[n]["model_type"].startswith("deepseek")])
def test_mla_cache_holds_the_latent_not_per_head_keys(name):
    cfg = TINY_CONFIGS[name]
    cache = _prefill(name, "fp32", 2, 7)
    for keys, values in cache_layers(cache):
        assert tuple(keys.shape) == (2, 1, 7, cfg["kv_lora_rank"])
        assert tuple(values.shape) == (2, 1, 7, cfg["qk_rope_head_dim"])


@pytest.mark.parametrize("name", list(TINY_CONFIGS))
def test_tiny_model_params_equal_the_transformers_model(name):
    model = build(TINY_CONFIGS[name])  # meta device
    ours = count_params(_spec(name))
    assert_params_equal(ours, model)


# --- the engine profile llmsizer uses for transformers, against the bytes transformers holds ---------------

def _profile_deviation(name: str) -> str | None:
    """Known gaps between engines.TRANSFORMERS and what transformers holds (none at present)."""
    return None


def _profile_cases() -> list[Any]:
    out = []
    for n in TINY_CONFIGS:
        why = _profile_deviation(n)
        marks = [pytest.mark.xfail(reason=why, strict=True)] if why else []
        out.append(pytest.param(n, id=n, marks=marks))
    return out


@pytest.mark.parametrize("name", _profile_cases())
def test_transformers_engine_profile_matches_the_bytes_held(name):
    prof = engines.PROFILES["transformers"]
    batch, tokens = 2, 13
    cache = _prefill(name, "bf16", batch, tokens)
    extra = tokens if prof.prefill_keeps_full_prompt else prof.window_extra
    predicted = kv_cache(_spec(name), tokens, batch, "bf16", mla_mode=prof.mla_mode,
                         window_extra=extra, repeated_kv=prof.caches_repeated_kv).total_bytes
    assert predicted == cache_storage_bytes(cache)
    with torch.no_grad():
        step = _model(name, "bf16")(input_ids=random_ids(128, batch, 1, seed=1), cache=cache,
                                    use_cache=True).cache
    predicted = kv_cache(_spec(name), tokens + 1, batch, "bf16", mla_mode=prof.mla_mode,
                         window_extra=prof.window_extra, repeated_kv=prof.caches_repeated_kv).total_bytes
    assert predicted == cache_storage_bytes(step)


# --- DeepSeek-V3.2 DSA indexer keys -------------------------------------------------------------------------

def test_dsa_indexer_keys_are_cached_at_the_model_dtype_beside_the_latent():
    """transformers' DynamicIndexedLayer keeps [B, T, index_head_dim] indexer keys in the model dtype."""
    cfg = TINY_CONFIGS["deepseek-v32-dsa"]
    cache = _prefill("deepseek-v32-dsa", "bf16", 2, 7)
    keys = cache_indexer_keys(cache)
    assert len(keys) == cfg["num_hidden_layers"]
    for t in keys:
        assert tuple(t.shape) == (2, 7, cfg["index_head_dim"]) and t.dtype == torch.bfloat16


def test_vllm_and_sglang_store_dsa_indexer_keys_as_fp8_with_block_scales():
    """vLLM DeepseekV32IndexerCache and SGLang NSATokenToKVPool: index_head_dim + index_head_dim // 128 * 4 bytes
    (uint8) per token and layer, whatever the KV dtype; the latent stays at the KV dtype."""
    from llmsizer.catalog.models import find_spec
    spec = find_spec("deepseek-v3.2")
    assert (spec.mla.index_head_dim, spec.num_layers) == (128, 61)
    for profile in (engines.PROFILES["vllm"], engines.PROFILES["sglang"]):
        per_token = kv_cache(spec, 1, 1, "bf16", mla_mode="latent",
                             indexer_cache=profile.dsa_indexer_cache).bytes_per_token
        assert per_token == 61 * ((512 + 64) * 2 + (128 + 4))
    assert kv_cache(spec, 1, 1, "bf16").bytes_per_token == 61 * (512 + 64 + 128) * 2  # transformers
