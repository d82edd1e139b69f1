"""SGLang's fp8 KV of DeepSeek-V3.2 (DSA) by device (estimate/engines.py serving_profile; task sglv32).

Truth from SGLang's own code (sglang 0.5.23 PyPI wheel): a float8_e4m3fn cache of a DSA model gets the row
``kv_lora_rank + kv_lora_rank // 128 * 4 + qk_rope_head_dim * rope_storage_dtype.itemsize`` (bf16 rope,
mem_cache/memory_pool.py:5280-5282; mem_cache/kv_cache_configurator.py:3464-3473) unless a DSA backend is trtllm,
which reads the raw ``kv_lora_rank + qk_rope_head_dim`` row (:3425-3440); the default backends for fp8_e4m3 are trtllm
at compute capability >= 10 and flashmla_kv below (arg_groups/overrides.py:714-720). The indexer key row is
``index_head_dim + index_head_dim // 128 * 4`` uint8 per token (mem_cache/index_key_cache.py:41-47)."""

from __future__ import annotations

import pytest

from llmsizer import estimate_inference
from llmsizer.estimate.engines import sglang_dsa_latent_cache

KV_LORA_RANK, ROPE, INDEX_HEAD_DIM, LAYERS = 512, 64, 128, 61  # DeepSeek-V3.2 config.json (MTP layer not served)
BF16, FP8, QUANT_BLOCK, SCALE = 2, 1, 128, 4
SCALED_ROW = KV_LORA_RANK * FP8 + KV_LORA_RANK // QUANT_BLOCK * SCALE + ROPE * BF16  # 656 (flashmla_kv)
RAW_ROW = (KV_LORA_RANK + ROPE) * FP8  # 576 (trtllm)
INDEXER_ROW = INDEX_HEAD_DIM + INDEX_HEAD_DIM // QUANT_BLOCK * SCALE  # 132


@pytest.mark.parametrize(("device", "row"), [("h200", SCALED_ROW), ("h100", SCALED_ROW), ("b200", RAW_ROW)])
def test_sglang_v32_fp8_row_follows_the_default_backend(device: str, row: int) -> None:
    est = estimate_inference("deepseek-v3.2", device=device, tensor_parallel=8, engine="sglang", context=32768,
                             concurrency=32, kv_dtype="fp8_e4m3")
    assert est.details["kv_bytes_per_token"] == LAYERS * (row + INDEXER_ROW)  # H200: 48,068 (was 43,188)
    layout = next(a for a in est.assumptions if a.name == "dsa_kv_layout")
    assert (layout.value == "fp8_ds_mla") == (row == SCALED_ROW)
    assert f"{INDEXER_ROW} B" in layout.why and layout.why.startswith(f"{SCALED_ROW}-B") == (row == SCALED_ROW)


def test_sglang_pool_cell_is_the_scaled_row_on_hopper() -> None:
    est = estimate_inference("deepseek-v3.2", device="h200", tensor_parallel=8, engine="sglang", context=32768,
                             concurrency=32, kv_dtype="fp8_e4m3")
    kv = next(i for i in est.items if i.name == "kv_cache")
    tokens = est.details["max_total_num_tokens"]
    # the pool: whole 64-token pages (DSA's page_size, arg_groups/model_overrides/deepseek_v2.py:161-173;
    # pool_configurator.py:646) of LAYERS x 788 B tokens (MLA's latent is not split over TP ranks)
    assert tokens % 64 == 0
    assert tokens * LAYERS * (SCALED_ROW + INDEXER_ROW) <= kv.bytes < (tokens + 64) * LAYERS * (SCALED_ROW + INDEXER_ROW)


def test_bf16_kv_stays_eq2_on_sglang() -> None:
    est = estimate_inference("deepseek-v3.2", device="h200", tensor_parallel=8, engine="sglang", context=32768,
                             concurrency=8, kv_dtype="bf16")
    assert est.details["kv_bytes_per_token"] == LAYERS * ((KV_LORA_RANK + ROPE) * BF16 + INDEXER_ROW)


@pytest.mark.parametrize(("device", "runtime", "capability", "kind"), [
    ("gpu", "cuda", 90, "fp8_ds_mla"), ("gpu", "cuda", 80, "fp8_ds_mla"), ("gpu", "cuda", None, "fp8_ds_mla"),
    ("gpu", "cuda", 100, "plain"), ("gpu", "cuda", 120, "plain"), ("gpu", "rocm", None, "plain"),
    ("cpu", "cuda", None, "plain")])
def test_sglang_latent_rule(device: str, runtime: str, capability: int | None, kind: str) -> None:
    assert sglang_dsa_latent_cache(device, runtime, capability) == kind
