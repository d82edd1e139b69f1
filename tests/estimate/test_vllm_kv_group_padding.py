"""vLLM's KV cache groups and their padding slots (formulas/kv_groups.py, estimate/inference/vllm.py).

The truth is vLLM's own rule applied by hand (vllm-project/vllm@001cabc1 vllm/v1/core/kv_cache_utils.py
``_get_kv_cache_groups_uniform_page_size``: group size = the fewest layers of a kind, or the most where that is under
1.5 x the fewest; each kind in ceil(n / g) groups of g; ``get_max_concurrency_for_kv_cache_config``: a request takes
g x the sum over groups of one layer's ``max_memory_usage_bytes``) to the worked examples in vLLM's own comments and
to the models' config numbers; v1/kv_cache_interface.py ``SlidingWindowSpec.max_memory_usage_bytes``:
(cdiv(min(window - 1 + max_num_batched_tokens, max_model_len), block) + 1) x page; ``FullAttentionSpec``:
cdiv(max_model_len, block) x page.
"""

from __future__ import annotations

import math

import pytest

from llmsizer.estimate.inference import estimate_inference
from llmsizer.formulas.kv_groups import vllm_group_size, vllm_padding_slots

BLOCK = 16  # vLLM's default block_size


@pytest.mark.parametrize(("counts", "size", "pads"), [
    # _get_kv_cache_groups_uniform_page_size's docstring: 2 full + 3 sliding -> (full.0, full.1), (sw.0, sw.2),
    # (sw.1, padding)
    ({"full": 2, "sliding": 3}, 2, {"full": 0, "sliding": 1}),
    # its comment on the 1.5 rule: gpt-oss-20b + eagle, 12 sw + 13 full padded to (13 sw, 13 full)
    ({"full": 13, "sliding": 12}, 13, {"full": 0, "sliding": 1}),
    # _max_memory_usage_bytes_from_groups' docstring: 8 full + 9 sliding padded to 9 full + 9 sliding
    ({"full": 8, "sliding": 9}, 9, {"full": 1, "sliding": 0}),
    # its docstring's 10 full + 20 sliding: three groups of 10, no padding
    ({"full": 10, "sliding": 20}, 10, {"full": 0, "sliding": 0}),
    # one kind: one group of all its layers (_get_kv_cache_groups_uniform_spec)
    ({"full": 32, "sliding": 0, "recurrent": 0}, 32, {"full": 0, "sliding": 0, "recurrent": 0}),
])
def test_group_rule_on_vllms_own_examples(counts, size, pads):
    assert vllm_group_size(counts) == size
    assert vllm_padding_slots(counts) == pads


def test_gemma3_27b_sliding_layers_take_eight_empty_slots():
    # google/gemma-3-27b-it text config: 62 layers, sliding_window_pattern 6 (full at 5, 11, ..., 59: 10 layers),
    # 16 KV heads of 128, sliding_window 1024, bf16; vllm serve on >= 70 GiB: max_num_batched_tokens 8192
    full, sliding, window, mnbt, context = 10, 52, 1024, 8192, 32768
    per_token = 2 * 16 * 128 * 2
    g = min(full, sliding)
    slots = math.ceil(sliding / g) * g
    assert (g, slots - sliding) == (10, 8)  # vLLM: "Add 8 padding layers, may waste at most 15.38% KV cache memory"
    full_layer = math.ceil(context / BLOCK) * BLOCK * per_token
    sliding_layer = (math.ceil(min(window - 1 + mnbt, context) / BLOCK) + 1) * BLOCK * per_token
    est = estimate_inference("gemma-3-27b-it", engine="vllm", context=context, memory="80GiB", tensor_parallel=2)
    # TP 2 splits the 16 KV heads: half of every layer's bytes per device
    assert est.details["kv_bytes_per_sequence"] == (full * full_layer + slots * sliding_layer) // 2
    assert est.details["kv_group_size"] == 10 and est.details["kv_group_padding_slots"] == 8
    # "GPU KV cache size" (vLLM 0.21 on): int(num_blocks / blocks per request x max_model_len), num_blocks = pool //
    # page // g (get_num_blocks), a request's blocks = its bytes / (page x g) (get_max_concurrency_for_kv_cache_config);
    # vLLM 0.19-0.20: num_blocks // 7 groups x block (_report_kv_cache_config @001cabc1)
    page = BLOCK * per_token // 2
    num_blocks = est.details["kv_pool_bytes"] // page // g
    per_request = math.ceil((full * full_layer + slots * sliding_layer) // 2 / (page * g))
    assert est.details["kv_tokens"] == int(num_blocks / per_request * context)
    older = estimate_inference("gemma-3-27b-it", engine="vllm", context=context, memory="80GiB", tensor_parallel=2,
                               engine_version="0.19")
    assert older.details["kv_tokens"] == num_blocks // 7 * BLOCK
    assert any(a.name == "vllm_kv_group_padding" and a.value == 8 for a in est.assumptions)


def test_gemma3_1b_two_empty_sliding_slots():
    # google/gemma-3-1b-it: 26 layers, full at 5, 11, 17, 23 (4), 1 KV head of 256, sliding_window 512; under 70 GiB
    # max_num_batched_tokens 2048
    full, sliding, window, mnbt, context = 4, 22, 512, 2048, 4096
    per_token = 2 * 1 * 256 * 2
    slots = math.ceil(sliding / full) * full
    assert slots == 24
    full_layer = math.ceil(context / BLOCK) * BLOCK * per_token
    sliding_layer = (math.ceil(min(window - 1 + mnbt, context) / BLOCK) + 1) * BLOCK * per_token
    est = estimate_inference("gemma-3-1b-it", engine="vllm", context=context, memory="24GiB")
    assert est.details["kv_bytes_per_sequence"] == full * full_layer + slots * sliding_layer


def test_nemotron3_nano_recurrent_slots_padded():
    # nvidia/NVIDIA-Nemotron-3-Nano-30B-A3B-BF16 config: hybrid_override_pattern of 52 layers, 23 Mamba-2 ("M"), 6
    # attention ("*"), 2 KV heads of 128; mamba 64 heads x 64, ssm_state_size 128, n_groups 8, conv_kernel 4,
    # mamba_ssm_cache_dtype float32, bf16 otherwise. vLLM: conv state (d_conv - 1) columns
    conv = (64 * 64 + 2 * 8 * 128) * (4 - 1) * 2
    ssm = 64 * 64 * 128 * 4
    attn_token = 2 * 2 * 128 * 2
    block = 16 * math.ceil((conv + ssm) / (16 * attn_token))  # _align_hybrid_block_size: a page holds one state
    page = block * attn_token
    assert block == 2096
    g = 6
    slots = math.ceil(23 / g) * g
    assert slots == 24
    context = 8192
    est = estimate_inference("nvidia-nemotron-3-nano-30b-a3b-bf16", engine="vllm", context=context, memory="80GiB")
    assert est.details["recurrent_state_bytes_per_sequence"] == slots * page
    assert est.details["kv_bytes_per_sequence"] == 6 * math.ceil(context / block) * page + slots * page


@pytest.mark.parametrize("model", ["gemma-2-9b-it", "gemma-4-e2b-it", "gpt-oss-20b", "llama-4-scout-17b-16e-instruct",
                                   "qwen3-next-80b-a3b-thinking", "jamba-1.5-mini", "mistral-7b-v0.1"])
def test_layer_counts_that_divide_have_no_padding(model):
    # gemma-2: 1:1; gemma-4-e2b: 12 sliding + 3 full; gpt-oss: 12 + 12; Llama 4: 36 chunked + 12 full; Qwen3-Next:
    # 36 Gated DeltaNet + 12 full; Jamba 1.5 Mini: 28 Mamba + 4 attention; Mistral: sliding only (one kind)
    est = estimate_inference(model, engine="vllm", context=8192, memory="80GiB", tensor_parallel=4)
    assert "kv_group_padding_slots" not in est.details
    assert not any(a.name == "vllm_kv_group_padding" for a in est.assumptions)
