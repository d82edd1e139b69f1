"""vLLM's one KV page size for Gemma 4's two head sizes (estimate/inference/vllm.py ``_unified_sliding_block``).

The truth is vLLM's own rule applied by hand to the config's numbers (vllm/v1/core/kv_cache_utils.py @001cabc1
``unify_kv_cache_spec_page_size``: a layer whose page is smaller than the largest gets block_size x max_page //
its page; v1/kv_cache_interface.py ``SlidingWindowSpec.max_memory_usage_bytes``: (cdiv(min(window - 1 +
max_num_batched_tokens, max_model_len), block_size) + 1) x page_size; ``FullAttentionSpec``: cdiv(max_model_len,
block_size) x page_size). gemma-4-e2b-it's config: 35 layers, the last 20 KV-sharing (no cache of their own), so
layers 0-14 cache: full attention at 4, 9, 14, sliding elsewhere; one K/V head; head 256 (sliding), 512 (full);
sliding_window 512.
"""

from __future__ import annotations

import math

from llmsizer.estimate.inference import estimate_inference

FULL, SLIDING, KV_HEADS, WINDOW = 3, 12, 1, 512
PER_TOKEN_FULL = 2 * KV_HEADS * 512 * 2  # K and V, bf16
PER_TOKEN_SLIDING = 2 * KV_HEADS * 256 * 2
BLOCK = 16  # vLLM's default block_size
MNBT = 2048  # vllm serve's max_num_batched_tokens under 70 GiB


def test_sliding_layers_take_the_full_layers_page():
    context = 4096
    est = estimate_inference("gemma-4-e2b-it", engine="vllm", context=context, memory="24GiB")
    page = BLOCK * PER_TOKEN_FULL  # the largest page: a full layer's 16-token block
    sliding_block = BLOCK * (page // (BLOCK * PER_TOKEN_SLIDING))
    assert sliding_block == 32
    sliding = (math.ceil(min(WINDOW - 1 + MNBT, context) / sliding_block) + 1) * sliding_block * PER_TOKEN_SLIDING
    full = math.ceil(context / BLOCK) * page
    assert est.details["kv_bytes_per_sequence"] == FULL * full + SLIDING * sliding
    assert est.details["sliding_block_size"] == 32
    assert any(a.name == "vllm_sliding_block_size" and a.value == 32 for a in est.assumptions)


def test_one_head_size_keeps_the_block():
    est = estimate_inference("gemma-3-1b-it", engine="vllm", context=4096, memory="24GiB")
    assert "sliding_block_size" not in est.details
