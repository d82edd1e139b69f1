"""vLLM pipeline stages of a model mixing sliding and full attention (formulas/kv_groups.py eq. 8,
estimate/inference/pipeline.py ``kv_stage_share``).

Truth, independent of the estimate: vLLM 0.19.1's own rules, ported here from its code --
``get_pp_indices`` (vllm/distributed/utils.py lines 124-129), the KV cache groups of the whole model
(v1/core/kv_cache_utils.py ``_get_kv_cache_groups_uniform_page_size`` lines 1030-1049: kind t's layers dealt
round-robin, ``layers[i::num_groups]``), their projection on a stage (``_project_kv_cache_groups_to_worker`` lines
1491-1505) and the stage's block of ``max(len(group))`` pages (``get_kv_cache_config_from_groups`` lines 1129-1137,
``get_num_blocks``: available // page // group_size) -- over Gemma-3-27B's layer kinds read from its config rule
(sliding_window_pattern 6: layer i is full where (i + 1) % 6 == 0; transformers Gemma3TextConfig), and its page:
16 tokens x 2 (K, V) x 16 KV heads x 128 x 2 B = 131,072 B a layer on one device."""

from __future__ import annotations

from collections import defaultdict

import pytest

from llmsizer import estimate_inference
from llmsizer.formulas.kv_groups import vllm_stage_group_size
from llmsizer.models import load_model

LAYERS = 62
KINDS = ["full" if (i + 1) % 6 == 0 else "sliding" for i in range(LAYERS)]
PAGE = 16 * 2 * 16 * 128 * 2


def get_pp_indices(n: int, rank: int, pp: int) -> tuple[int, int]:
    parts = [n // pp] * pp
    for i in range(2, n % pp + 2):
        parts[-i] += 1
    start = sum(parts[:rank])
    return start, start + parts[rank]


def vllm_groups(kinds: list[str]) -> list[list[int]]:
    same: dict[str, list[int]] = defaultdict(list)
    for i, k in enumerate(kinds):
        same[k].append(i)
    lo = min(len(v) for v in same.values())
    hi = max(len(v) for v in same.values())
    size = hi if hi < lo * 1.5 else lo
    out = []
    for layers in same.values():
        n = -(-len(layers) // size)
        out += [layers[i::n] for i in range(n)]
    return out


def stage_group_size(kinds: list[str], rank: int, pp: int) -> int:
    lo, hi = get_pp_indices(len(kinds), rank, pp)
    return max(len([x for x in g if lo <= x < hi]) for g in vllm_groups(kinds))


@pytest.mark.parametrize("pp", [2, 3, 4, 5, 8])
def test_stage_group_size_is_vllms(pp: int) -> None:
    spec = load_model("gemma-3-27b-it")
    assert list(spec.kv_cache_layer_types) == KINDS
    for rank in range(pp):
        lo, hi = get_pp_indices(LAYERS, rank, pp)
        assert vllm_stage_group_size(spec.kv_cache_layer_types, range(lo, hi)) == stage_group_size(KINDS, rank, pp)


def test_gpt_oss_alternating_layers() -> None:
    """gpt-oss: sliding and full alternate (18 + 18 over 36 layers): one group of each, g = 18; a stage of 18 layers
    holds 9 of each, so its block is 9 pages."""
    kinds = ["sliding", "full"] * 18
    assert stage_group_size(kinds, 0, 2) == vllm_stage_group_size(kinds, range(0, 18)) == 9


@pytest.mark.parametrize("pp", [2, 4])
def test_stage_pool_and_request_bytes(pp: int) -> None:
    spec = load_model("gemma-3-27b-it")
    whole = estimate_inference(spec, engine="vllm", device="h100", context=8192).details
    staged = estimate_inference(spec, engine="vllm", device="h100", context=8192, pipeline_parallel=pp).details
    k = staged["pipeline_binding_stage"]
    g_s = stage_group_size(KINDS, k, pp)
    # the stage's blocks: its pool over blocks of g_s pages (get_num_blocks)
    assert staged["kv_blocks"] == staged["kv_pool_bytes"] // (PAGE * g_s)
    # a request's bytes on the stage: the whole model's (every group, padding included: g = 10 pages a block) x g_s / g
    assert whole["kv_group_size"] == 10
    assert staged["kv_bytes_per_sequence"] == pytest.approx(whole["kv_bytes_per_sequence"] * g_s / 10, abs=1)
    # the admitted sequences: the smallest stage's (every stage cut to the fewest blocks, lines 1599-1612)
    assert staged["max_concurrency_at_context"] == min(s["admitted_sequences"] for s in staged["pipeline_stages"])


# Jamba-1.5-Mini (config.json: 32 layers, attn_layer_period 8, attn_layer_offset 4: layers 4, 12, 20, 28 attention,
# the other 28 Mamba; 8 KV heads of 4096 / 32 = 128): vLLM groups 4 attention + 28 recurrent cache layers in groups
# of 4 (eq. 1); its hybrid page is the attention block x 2 x 8 / TP heads x 128 x 2 B (the state page padded to it)
JAMBA_ATTN = [i % 8 == 4 for i in range(32)]


def _entries_stage_group_size(attn: list[bool], rank: int, pp: int) -> int:
    same: dict[str, list[int]] = defaultdict(list)
    for i, a in enumerate(attn):
        same["full" if a else "recurrent"].append(i)
    lo, hi = min(len(v) for v in same.values()), max(len(v) for v in same.values())
    size = hi if hi < lo * 1.5 else lo
    groups = []
    for layers in same.values():
        n = -(-len(layers) // size)
        groups += [layers[i::n] for i in range(n)]
    a, b = get_pp_indices(len(attn), rank, pp)
    return max(len([x for x in g if a <= x < b]) for g in groups)


@pytest.mark.parametrize("pp", [2, 3, 4])
def test_recurrent_hybrid_stage_group_size_is_vllms(pp: int) -> None:
    spec = load_model("jamba-1.5-mini")
    assert [k != "none" for k in spec.kv_cache_layer_types] == JAMBA_ATTN
    assert list(spec.recurrent_layers) == [not a for a in JAMBA_ATTN]
    for rank in range(pp):
        a, b = get_pp_indices(32, rank, pp)
        assert vllm_stage_group_size(spec.kv_cache_layer_types, range(a, b), spec.recurrent_layers) \
            == _entries_stage_group_size(JAMBA_ATTN, rank, pp)


@pytest.mark.parametrize("pp", [2, 4])
def test_recurrent_hybrid_stage_pool(pp: int) -> None:
    spec = load_model("jamba-1.5-mini")
    kw = {"engine": "vllm", "device": "h100", "context": 8192, "tensor_parallel": 2}
    whole = estimate_inference(spec, **kw).details
    staged = estimate_inference(spec, pipeline_parallel=pp, **kw).details
    k = staged["pipeline_binding_stage"]
    g_s = _entries_stage_group_size(JAMBA_ATTN, k, pp)
    page = staged["hybrid_block_size"] * 2 * (8 // 2) * 128 * 2
    assert staged["kv_blocks"] == staged["kv_pool_bytes"] // (page * g_s)
    # K/V and state pages of a request on the stage: the whole model's x g_s / g (g = 4), within rounding
    assert staged["kv_bytes_per_sequence"] == pytest.approx(whole["kv_bytes_per_sequence"] * g_s / 4, abs=4)
