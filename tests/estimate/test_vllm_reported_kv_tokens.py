"""``kv_tokens`` / ``kv_blocks``: vLLM's start-up line "GPU KV cache size: N tokens" and its block count
(formulas/kv_groups.py eqs. 4-5, estimate/inference/vllm.py ``_reported_pool``).

The truth is vLLM's own rule applied by hand to the models' config numbers (vllm-project/vllm@001cabc1
vllm/v1/core/kv_cache_utils.py): ``get_num_blocks``: num_blocks = pool // page // g (g = the layers per KV cache group,
page = one layer's block); ``_report_kv_cache_config``: N = num_blocks // len(kv_cache_groups) x the smallest
block_size of any group; the group rule of ``_get_kv_cache_groups_uniform_page_size`` (g = the fewest layers of a
kind, or the most where under 1.5 x the fewest; each kind in ceil(n / g) groups), a Mamba group's block_size being
max_model_len under mamba_cache_mode 'none' (vllm/model_executor/models/config.py
HybridAttentionMambaModelConfig.verify_and_update_config). The pool (bytes per device) is the estimate's own
``kv_pool_bytes``, tested against vLLM's logs elsewhere; only the rule from pool to tokens is under test here. The
admitted sequences do not depend on this rule (unchanged: tests/estimate/test_vllm_kv_group_padding.py).
"""

from __future__ import annotations

import math

import pytest

from llmsizer.estimate.inference import estimate_inference
from llmsizer.formulas.kv_groups import vllm_group_count

BLOCK = 16  # vLLM's default block_size
BF16 = 2


def _vllm(model: str, **kw):
    # eq. 5 is the rule of the releases before VLLM_KV_SIZE_LOG_CONCURRENCY_SINCE (vLLM 0.19.0 prints it:
    # vllm-project/vllm#40691); the newer rule (eq. 6) is tested at the end
    return estimate_inference(model, engine="vllm", engine_version="0.19", **kw).details


def test_dense_model_one_group_blocks_times_block():
    # meta-llama/Llama-3.1-8B: 32 layers of full attention, 8 KV heads of 128: one group of 32 layers
    d = _vllm("llama-3.1-8b", context=32768, memory="80GiB")
    page = BLOCK * 2 * 8 * 128 * BF16
    blocks = d["kv_pool_bytes"] // page // 32
    assert d["kv_blocks"] == blocks
    assert d["kv_tokens"] == blocks * BLOCK
    assert "kv_cache_groups" not in d


def test_gpt_oss_sliding_and_full_two_groups():
    # openai/gpt-oss-20b: 24 layers alternating sliding (window 128) and full, 8 KV heads of 64; bf16 KV.
    # 12 + 12 layers: g = 12, two groups; every layer's page the same (16 tokens)
    d = _vllm("gpt-oss-20b", context=32768, memory="80GiB")
    page = BLOCK * 2 * 8 * 64 * BF16
    num_blocks = d["kv_pool_bytes"] // page // 12
    assert d["kv_blocks"] == num_blocks
    assert d["kv_tokens"] == num_blocks // 2 * BLOCK
    assert d["kv_cache_groups"] == 2


def test_gemma4_counts_every_block_at_the_full_layers_16_tokens():
    # google/gemma-4-E4B-it text config: 42 layers, the last 18 share K/V (num_kv_shared_layers), so 24 cache their
    # own: full at 5, 11, 17, 23 (4), 20 sliding (window 512); 2 KV heads, head_dim 256 (sliding), global_head_dim
    # 512 (full). A full layer's page is 16 x 2 x 2 x 512 x 2 B; a sliding layer's page unifies to it at 32 tokens
    # (unify_kv_cache_spec_page_size), and the log counts each block at the smallest block size, 16.
    d = _vllm("gemma-4-e4b-it", context=32768, memory="80GiB")
    full_token, sliding_token = 2 * 2 * 512 * BF16, 2 * 2 * 256 * BF16
    assert full_token // sliding_token * BLOCK == 32 == d["sliding_block_size"]
    g = 4  # 20 >= 1.5 x 4: the fewest
    groups = 20 // g + 4 // g
    assert groups == 6 == vllm_group_count({"full": 4, "sliding": 20})
    num_blocks = d["kv_pool_bytes"] // (BLOCK * full_token) // g
    assert d["kv_blocks"] == num_blocks
    assert d["kv_tokens"] == num_blocks // groups * BLOCK
    # not the tokens a sequence's full layers could hold: the pool / (4 full + 20 sliding layers' bytes per token)
    assert d["kv_tokens"] < d["kv_pool_bytes"] // (4 * full_token + 20 * sliding_token)


def test_qwen3_next_recurrent_groups_share_the_blocks():
    # Qwen/Qwen3-Next-80B-A3B-Thinking: 48 layers, full attention every 4th (12), 36 Gated DeltaNet; 2 KV heads of
    # 256; GDN: 16 key heads and 32 value heads of 128, conv kernel 4; bf16 states (TP 1).
    attn_token = 2 * 2 * 256 * BF16
    conv = (2 * 16 * 128 + 32 * 128) * (4 - 1) * BF16
    ssm = 32 * 128 * 128 * BF16
    block = 16 * math.ceil((conv + ssm) / (16 * attn_token))  # one attention page holds one state page
    assert block == 544
    context = 32768
    d = _vllm("qwen3-next-80b-a3b-thinking", context=context, memory="192GiB")
    assert d["hybrid_block_size"] == block
    g = 12  # 36 >= 1.5 x 12
    groups = 36 // g + 12 // g  # three recurrent groups and one attention group: all four share the blocks
    assert groups == 4 == d["kv_cache_groups"]
    num_blocks = d["kv_pool_bytes"] // (block * attn_token) // g
    assert d["kv_blocks"] == num_blocks
    # the Mamba groups' block is max_model_len (32768): the smallest block is the attention one
    assert d["kv_tokens"] == num_blocks // groups * min(block, context)


def test_nemotron3_nano_padded_recurrent_groups():
    # nvidia/NVIDIA-Nemotron-3-Nano-30B-A3B-BF16: 23 Mamba-2 + 6 attention layers, 2 KV heads of 128; the attention
    # block of 2096 tokens (tests/estimate/test_vllm_kv_group_padding.py derives it from the state page)
    attn_token = 2 * 2 * 128 * BF16
    block = 2096
    context = 8192
    d = _vllm("nvidia-nemotron-3-nano-30b-a3b-bf16", context=context, memory="80GiB")
    g = 6
    groups = math.ceil(23 / g) + 6 // g
    assert groups == 5 == d["kv_cache_groups"]
    num_blocks = d["kv_pool_bytes"] // (block * attn_token) // g
    assert d["kv_tokens"] == num_blocks // groups * min(block, context)


@pytest.mark.parametrize(("counts", "groups"), [
    ({"full": 10, "sliding": 52}, 7),  # Gemma-3-27B: 1 + 6 groups of 10 (vLLM's padding warning)
    ({"full": 2, "sliding": 3}, 3),  # _get_kv_cache_groups_uniform_page_size's docstring: (full.0, full.1), (sw.0,
    # sw.2), (sw.1, padding)
    ({"full": 13, "sliding": 12}, 2),  # its gpt-oss + eagle example: 13 + 13
    ({"full": 4, "recurrent": 28}, 8),  # Jamba 1.5 Mini: 28 Mamba in 7 groups of 4 + 1
    ({"full": 0, "sliding": 0, "recurrent": 0}, 0),
])
def test_group_count_on_vllms_examples(counts, groups):
    assert vllm_group_count(counts) == groups


def _gemma4_e4b_blocks_and_per_request(d, context):
    # Gemma-4-E4B at 32768 tokens, vllm serve on >= 70 GiB (max_num_batched_tokens 8192): num_blocks = pool // the
    # full layers' page // g = 4; one request takes the full group's cdiv(32768, 16) blocks and each of the 5 sliding
    # groups cdiv(min(512 - 1 + 8192, 32768), 32) + 1 (SlidingWindowSpec.max_memory_usage_bytes, 32-token blocks;
    # get_max_concurrency_for_kv_cache_config)
    num_blocks = d["kv_pool_bytes"] // (BLOCK * 2 * 2 * 512 * BF16) // 4
    per_request = math.ceil(context / BLOCK) + 5 * (math.ceil((512 - 1 + 8192) / 32) + 1)
    assert per_request == 2048 + 5 * 273
    return num_blocks, per_request


def test_gemma4_current_release_figure_is_concurrency_times_context():
    # the current release (0.23) prints int(max_concurrency x max_model_len), max_concurrency = num_blocks / the
    # blocks of one request summed over the groups (kv_cache_utils.py _report_kv_cache_config / get_kv_cache_capacity:
    # num_tokens = int(max_concurrency * max_model_len)); the older figure is said in the assumption
    context = 32768
    est = estimate_inference("gemma-4-e4b-it", engine="vllm", context=context, memory="80GiB")
    d = est.details
    num_blocks, per_request = _gemma4_e4b_blocks_and_per_request(d, context)
    assert d["kv_blocks"] == num_blocks
    assert d["kv_tokens"] == int(num_blocks / per_request * context)
    (a,) = [a for a in est.assumptions if a.name == "vllm_kv_size_log"]
    older = num_blocks // 6 * BLOCK
    assert a.value == d["kv_tokens"] and f"{older:,} tokens" in a.why
    # the admitted sequences are the same blocks per request: floor(num_blocks / per_request)
    assert d["max_concurrency_at_context"] == num_blocks // per_request


@pytest.mark.parametrize(("version", "newer"), [("0.19", False), ("0.20.2", False), ("0.21", True), ("0.24.0", True)])
def test_release_picks_the_rule(version, newer):
    # vLLM 0.19.0 prints eq. 5 (vllm-project/vllm#40691's Qwen3.5 log); main had switched by #42206 (after the 0.20
    # line); 0.24.0 prints concurrency x length (club-3090#652: 569,878 tokens beside 4.35x at 131,072)
    context = 32768
    d = estimate_inference("gemma-4-e4b-it", engine="vllm", context=context, memory="80GiB",
                           engine_version=version).details
    num_blocks, per_request = _gemma4_e4b_blocks_and_per_request(d, context)
    assert d["kv_tokens"] == (int(num_blocks / per_request * context) if newer else num_blocks // 6 * BLOCK)


def test_dense_one_group_both_rules_agree():
    # one group at a context that is a multiple of the block: blocks / (context / 16) x context = blocks x 16
    for version in ("0.19", "0.23"):
        d = _vllm("llama-3.1-8b", context=32768, memory="80GiB") if version == "0.19" else \
            estimate_inference("llama-3.1-8b", engine="vllm", context=32768, memory="80GiB").details
        assert d["kv_tokens"] == d["kv_blocks"] * BLOCK
