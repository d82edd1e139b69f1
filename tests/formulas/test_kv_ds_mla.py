"""vLLM's fp8_ds_mla KV layout for DeepSeek-V3.2 (formulas/kv_cache.py eq. 7; probe25 D1).

Truth from vLLM's own description of the row (vllm 0.34.0 v1/attention/backends/mla/flashmla_sparse.py:86-94: "each
token's KV cache is 656 Bytes": 512 float8_e4m3 NoPE values, 4 float32 scales, one per 128 values, 64 bfloat16 RoPE
values) and of the indexer key cache (v1/attention/backends/mla/indexer.py:894: "128 fp8 bytes and 4 scale bytes for a
total of 132 bytes"); any quantized KV dtype of V3.2 is served in that layout (mla_attention.py:367-383)."""

from __future__ import annotations

import pytest

from llmsizer import estimate_inference
from llmsizer.catalog.models import find_spec
from llmsizer.formulas.kv_cache import kv_cache

FP8_E4M3, FP32, BF16 = 1, 4, 2
ROW = 512 * FP8_E4M3 + 4 * FP32 + 64 * BF16  # the 656-B fp8_ds_mla row
INDEXER = 128 * FP8_E4M3 + 1 * FP32  # 132 B
V32_LAYERS = 61  # config.json num_hidden_layers (the MTP layer is not served)


@pytest.mark.parametrize("kv_dtype", ["fp8", "fp8_e4m3", "fp8_e5m2"])
def test_v32_quantized_latent_is_the_ds_mla_row(kv_dtype: str) -> None:
    spec = find_spec("deepseek-v3.2")
    kv = kv_cache(spec, 1, 1, kv_dtype, indexer_cache="fp8_scaled", latent_cache="fp8_ds_mla")
    assert ROW == 656 and kv.layer_bytes_per_token_full == ROW + INDEXER == 788
    assert kv.bytes_per_token == V32_LAYERS * 788


def test_bf16_and_plain_layouts_are_eq2() -> None:
    spec = find_spec("deepseek-v3.2")
    assert kv_cache(spec, 1, 1, "bf16", indexer_cache="fp8_scaled",
                    latent_cache="fp8_ds_mla").layer_bytes_per_token_full == (512 + 64) * BF16 + INDEXER
    assert kv_cache(spec, 1, 1, "fp8", indexer_cache="fp8_scaled").layer_bytes_per_token_full == 576 + INDEXER


def test_a_model_without_indexer_keeps_plain_fp8_mla() -> None:
    spec = find_spec("deepseek-v3")  # dense MLA: vLLM's plain fp8 MLA cache, 576 B
    assert kv_cache(spec, 1, 1, "fp8", latent_cache="fp8_ds_mla").layer_bytes_per_token_full == 576


def test_vllm_estimate_sizes_v32_fp8_kv_at_788_bytes_per_layer() -> None:
    est = estimate_inference("deepseek-v3.2", device="h200", tensor_parallel=8, engine="vllm", context=32768,
                             concurrency=32, kv_dtype="fp8")
    assert est.details["kv_bytes_per_token"] == V32_LAYERS * (ROW + INDEXER)  # 48,068 (was 43,188 at 708 B)
