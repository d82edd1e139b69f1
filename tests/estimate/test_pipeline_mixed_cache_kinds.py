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
