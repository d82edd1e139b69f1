"""vLLM's hybrid (attention + recurrent) pages on one GPU under tensor parallelism.

The truth is vLLM's rule applied by hand to the models' config.json numbers:
vllm-project/vllm@1936cf3841edb9781b06c50fc4daf4bac9d3b23e vllm/model_executor/models/config.py
``HybridAttentionMambaModelConfig.verify_and_update_config``: the attention page of one token holds
``get_num_kv_heads(parallel_config)`` = max(1, kv_heads // tp) KV heads; the Mamba page is this GPU's state shapes
(vllm-project/vllm@2afe1e8573cf51b73569ae1d35f59078a2032a91 vllm/model_executor/layers/mamba/mamba_utils.py
``MambaStateShapeCalculator``: conv and SSM heads divided by tp, Mamba-2 groups replicated to tp when tp does not
divide them); attn_block = 16 x cdiv(mamba_page, 16 x attn_page_1_token), the Mamba page padded to
attn_block x attn_page_1_token. The pool (``kv_pool_bytes``) is the estimate's own, tested elsewhere; here only the
pages, blocks and per-sequence bytes that follow from it.
"""

from __future__ import annotations

import pytest

from llmsizer.catalog.models import find_spec
from llmsizer.estimate.inference import estimate_inference
from llmsizer.formulas.recurrent_state import layer_state_bytes_per_device

BF16, FP32, ALIGN = 2, 4, 16


def _cdiv(a: int, b: int) -> int:
    return -(-a // b)


def _vllm(model: str, tp: int, context: int = 32768):
    return estimate_inference(model, engine="vllm", context=context, memory="80GiB", tensor_parallel=tp).details


# Qwen/Qwen3-Next-80B-A3B-Thinking config.json: 48 layers, full attention every 4th (12), 36 Gated DeltaNet;
# num_key_value_heads 2, head_dim 256; linear_num_key_heads 16, linear_num_value_heads 32, linear_key_head_dim and
# linear_value_head_dim 128, linear_conv_kernel_dim 4; bf16 (gated_delta_net_state_dtype: both in the model dtype).
def _qwen3_next_gpu(tp: int) -> tuple[int, int]:
    conv = (128 * 16 * 2 + 128 * 32) // tp * (4 - 1) * BF16
    ssm = 32 // tp * 128 * 128 * BF16
    attn_token = 2 * max(1, 2 // tp) * 256 * BF16
    return conv + ssm, attn_token


@pytest.mark.parametrize(("tp", "block"), [(4, 272), (8, 144)])
def test_qwen3_next_pages_per_gpu(tp, block):
    state, attn_token = _qwen3_next_gpu(tp)
    if tp == 4:  # the figures of the brief: one KV head per GPU, 1,024 B per token and layer; 274,432 B of state
        assert (state, attn_token) == (274_432, 1024)
    assert ALIGN * _cdiv(state, ALIGN * attn_token) == block
    page = block * attn_token  # the state page padded to the attention page
    context = 32768
    d = _vllm("qwen3-next-80b-a3b-thinking", tp, context)
    assert d["hybrid_block_size"] == block
    assert d["recurrent_state_bytes_per_sequence"] == 36 * page
    assert d["kv_bytes_per_sequence"] == 12 * _cdiv(context, block) * page + 36 * page
    # one page size for every group: num_blocks = pool // page // 12 (get_num_blocks), four groups of 12 layers
    assert d["kv_blocks"] == d["kv_pool_bytes"] // page // 12
    # "GPU KV cache size" (vLLM 0.21 on): int(num_blocks / a request's blocks x 32768), a request's blocks = 12 x
    # cdiv(32768, block) attention pages + 36 state pages over g = 12 slots (get_max_concurrency_for_kv_cache_config)
    per_request = _cdiv(12 * _cdiv(context, block) + 36, 12)
    assert d["kv_tokens"] == int(d["kv_blocks"] / per_request * context)
    assert d["max_concurrency_at_context"] == d["kv_pool_bytes"] // d["kv_bytes_per_sequence"]


def test_qwen3_next_tp4_attention_per_sequence_is_404_mb():
    # 12 attention layers x cdiv(32768, 272) = 121 blocks of 272 tokens x 1,024 B: 404,422,656 B (not the 407.8 MB of
    # 544-token blocks)
    d = _vllm("qwen3-next-80b-a3b-thinking", 4)
    assert d["kv_bytes_per_sequence"] - d["recurrent_state_bytes_per_sequence"] == 12 * 121 * 272 * 1024 \
        == 404_422_656


# nvidia/NVIDIA-Nemotron-3-Nano-30B-A3B-BF16 config.json: 23 Mamba-2 + 6 attention layers; 2 KV heads of 128;
# mamba_num_heads 64 x mamba_head_dim 64, ssm_state_size 128, n_groups 8, conv_kernel 4; mamba_ssm_cache_dtype float32
@pytest.mark.parametrize(("tp", "block"), [(1, 2096), (2, 2096), (4, 1056), (8, 528)])
def test_nemotron3_nano_pages_per_gpu(tp, block):
    conv = (64 * 64 + 2 * 8 * 128) // tp * (4 - 1) * BF16  # 8 groups: tp 1-8 divide them, no replication
    ssm = 64 // tp * 64 * 128 * FP32
    attn_token = 2 * max(1, 2 // tp) * 128 * BF16
    assert ALIGN * _cdiv(conv + ssm, ALIGN * attn_token) == block
    page = block * attn_token
    d = _vllm("nvidia-nemotron-3-nano-30b-a3b-bf16", tp, 8192)
    assert d["hybrid_block_size"] == block
    slots = 24  # 23 Mamba layers in groups of 6: 4 groups, one empty slot
    assert d["recurrent_state_bytes_per_sequence"] == slots * page
    assert d["kv_bytes_per_sequence"] == 6 * _cdiv(8192, block) * page + slots * page
    assert d["kv_blocks"] == d["kv_pool_bytes"] // page // 6


# tiiuae/Falcon-H1-0.5B-Instruct config.json: 36 layers, each attention + Mamba-2; 2 KV heads of 64; mamba_d_ssm 1536
# (24 heads x 64), mamba_d_state 128, mamba_n_groups 1, mamba_d_conv 4; bf16. One group: replicated to tp groups.
@pytest.mark.parametrize(("tp", "block"), [(1, 800), (2, 800), (4, 400), (8, 208)])
def test_falcon_h1_groups_replicated_per_gpu(tp, block):
    groups = 1 if tp == 1 else tp  # extra_groups_for_head_shards(1, tp) = tp - 1
    conv = (1536 + 2 * groups * 128) // tp * (4 - 1) * BF16
    ssm = 24 // tp * 64 * 128 * BF16
    attn_token = 2 * max(1, 2 // tp) * 64 * BF16
    assert ALIGN * _cdiv(conv + ssm, ALIGN * attn_token) == block
    d = _vllm("falcon-h1-0.5b-instruct", tp)
    assert d["hybrid_block_size"] == block
    assert d["recurrent_state_bytes_per_sequence"] == 36 * block * attn_token


def test_state_per_gpu_replicates_mamba2_groups():
    # ibm-granite/granite-4.0-h-tiny: mamba_d_state 128, mamba_n_groups 1, 48 heads x 64, d_conv 4; at tp 4 each GPU
    # carries the one group (conv 3072 / 4 + 2 x 128 channels), the SSM state 48 / 4 heads
    spec = find_spec("granite-4.0-h-tiny")
    assert layer_state_bytes_per_device(spec, 4, BF16, BF16) == (3072 // 4 + 2 * 128) * 3 * BF16 \
        + 48 // 4 * 64 * 128 * BF16
    # Jamba (Mamba-1): conv and SSM over intermediate_size / tp, no groups
    jamba = find_spec("jamba-1.5-mini")
    assert layer_state_bytes_per_device(jamba, 8, BF16, BF16) == 8192 // 8 * 3 * BF16 + 8192 // 8 * 16 * BF16


@pytest.mark.parametrize("model", ["jamba-1.5-mini", "nemotron-h-56b-base-8k", "granite-4.0-h-tiny"])
def test_kv_heads_that_divide_keep_the_tp1_block(model):
    # 8, 8 and 4 KV heads: max(1, kv_heads // tp) = kv_heads / tp up to tp 4, and the state shards evenly, so both
    # pages shrink by tp together and the block stays
    blocks = {tp: _vllm(model, tp)["hybrid_block_size"] for tp in (1, 2, 4)}
    assert len(set(blocks.values())) == 1
