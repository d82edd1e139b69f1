"""The KV cache a decode step reads, against the cache a real transformers forward pass holds -- one rule for the
memory estimate and the decode-speed estimate.

transformers' Falcon with ``new_decoder_architecture`` broadcasts K/V to every query head before the cache update
(models/falcon/modeling_falcon.py ``FalconAttention._split_heads`` / ``forward``), so the cache holds num_heads heads
and every decode step reads them all back; vLLM and llama.cpp cache num_kv_heads. Independent truth: a tiny random
Falcon (``oracle_utils.TINY_CONFIGS['falcon-new-arch']``: 4 query heads, 2 kv heads) run on the CPU, prefill of T
tokens for B sequences and one decode step; the cache tensors' shapes and bytes are measured. The speed estimate
evaluates decode at context = prompt + output // 2, so output_tokens = 2 puts its step at T + 1 cached tokens.
"""

from __future__ import annotations

import pytest

from llmsizer import estimate_inference
from llmsizer.catalog.hardware import builtin_catalog
from llmsizer.estimate.speed import estimate_speed
from llmsizer.readers.hf_config import spec_from_config
from oracle_utils import TINY_CONFIGS, build, cache_layers, cache_logical_bytes, random_ids, torch

pytestmark = pytest.mark.slow

NAME = "falcon-new-arch"
BATCH, TOKENS = 3, 9


def _measured_cache() -> tuple[int, list[tuple[int, ...]]]:
    """(bytes, key/value shapes) of the cache after a prefill of TOKENS tokens and one decode step, bf16."""
    torch.manual_seed(0)
    model = build(TINY_CONFIGS[NAME], device="cpu", dtype=torch.bfloat16)
    with torch.no_grad():
        cache = model(input_ids=random_ids(128, BATCH, TOKENS), use_cache=True).cache
        cache = model(input_ids=random_ids(128, BATCH, 1, seed=1), cache=cache, use_cache=True).cache
    shapes = [tuple(t.shape) for kv in cache_layers(cache) for t in kv]
    return cache_logical_bytes(cache), shapes


def _speed_kv(engine: str) -> float:
    spec = spec_from_config(TINY_CONFIGS[NAME], name=NAME)
    s = estimate_speed(spec, builtin_catalog().devices["h200"], prompt_tokens=TOKENS, output_tokens=2,
                       concurrency=BATCH, kv_dtype="bf16", engine=engine)
    return float(s.details["kv_bytes_per_decode_step"])


def test_transformers_falcon_new_arch_caches_every_query_head():
    cfg = TINY_CONFIGS[NAME]
    heads, kv_heads = cfg["num_attention_heads"], cfg["num_kv_heads"]
    assert kv_heads < heads  # the case this test is about
    nbytes, shapes = _measured_cache()
    head_dim = cfg["hidden_size"] // heads
    assert set(shapes) == {(BATCH, heads, TOKENS + 1, head_dim)}  # num_heads heads, not num_kv_heads
    # the decode step reads the cache the memory estimate sizes: both equal the measured bytes
    assert _speed_kv("transformers") == nbytes
    spec = spec_from_config(cfg, name=NAME)
    est = estimate_inference(spec, engine="transformers", context=TOKENS + 2, concurrency=BATCH, kv_dtype="bf16",
                             output_tokens=2)
    assert est.details["kv_bytes_per_token"] * (TOKENS + 1) * BATCH == nbytes


@pytest.mark.parametrize("engine", ["vllm", "llamacpp"])
def test_engines_without_repetition_read_kv_heads(engine):
    """vLLM and llama.cpp cache (and read) num_kv_heads heads: the measured cache x kv_heads / heads."""
    cfg = TINY_CONFIGS[NAME]
    nbytes, _ = _measured_cache()
    assert _speed_kv(engine) == nbytes * cfg["num_kv_heads"] // cfg["num_attention_heads"]
