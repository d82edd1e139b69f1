"""vLLM's one KV page size across layers (formulas/kv_groups.py eq. 7) on Gemma 4, whose full layers (global_head_dim
512) and sliding layers (head_dim 256) keep different bytes per token.

The truth is vLLM's rule applied by hand to google/gemma-4-E4B-it's text config (2 KV heads; 20 sliding + 4 full
layers caching their own K/V): ``AttentionSpec.page_size_bytes`` (vllm/v1/kv_cache_interface.py @001cabc1) is
block_size x kv_heads x head_size x 2 x dtype bytes, plus 2 x block_size x kv_heads x 4 (a float32 scale per token
and KV head) for the per-token-head dtypes; ``unify_kv_cache_spec_page_size`` (vllm/v1/core/kv_cache_utils.py
@001cabc1) multiplies a smaller page's block_size by P_max / P where P divides P_max and raises NotImplementedError
otherwise (newer releases pad that page to P_max where the backend indexes pages by the block stride).
"""

from __future__ import annotations

from llmsizer.estimate.inference import estimate_inference
from llmsizer.formulas.kv_groups import vllm_unified_block

BLOCK, HEADS = 16, 2


def _page(head: int, dtype_bytes: int, scale: bool) -> int:
    return BLOCK * HEADS * head * 2 * dtype_bytes + (2 * BLOCK * HEADS * 4 if scale else 0)


def test_bf16_sliding_pages_double_their_block():
    full, sliding = _page(512, 2, False), _page(256, 2, False)
    assert (full, sliding) == (65536, 32768)
    assert vllm_unified_block(sliding, full, BLOCK) == (32, False)
    d = estimate_inference("gemma-4-e4b-it", engine="vllm", context=8192, memory="80GiB").details
    assert d["sliding_block_size"] == 32


def test_per_token_head_int8_page_does_not_divide():
    full, sliding = _page(512, 1, True), _page(256, 1, True)
    assert (full, sliding) == (33024, 16640) and full % sliding == 16384  # the scales break the 2:1 ratio
    assert vllm_unified_block(sliding, full, BLOCK) == (BLOCK, True)
    est = estimate_inference("gemma-4-e4b-it", engine="vllm", context=8192, memory="80GiB",
                             kv_dtype="int8_per_token_head")
    assert "sliding_block_size" not in est.details
    (w,) = [w for w in est.warnings if "unifies the KV page size" in w]
    assert "33,024 B" in w and "16,640 B" in w and "NotImplementedError" in w
    assert f"{full / sliding - 1:.0%} more bytes" in w


def test_equal_pages_are_left_alone():
    assert vllm_unified_block(4096, 4096, BLOCK) == (BLOCK, False)
    assert vllm_unified_block(8192, 4096, BLOCK) == (BLOCK, False)
