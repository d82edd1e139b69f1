"""vLLM's KV cache groups of a model with layers of several cache kinds, and the padding slots they carry.

vLLM's KV cache manager hands out blocks of one page size, each shared by the layers of one KV cache group, so every
group holds the same number of layers (vllm-project/vllm@001cabc1be16a59a70d720ed61a13b678c060a18
vllm/v1/core/kv_cache_utils.py ``_get_kv_cache_groups_uniform_page_size``, reached from ``get_kv_cache_groups`` when
the layers' specs differ: sliding + full attention (Gemma 2/3/4, gpt-oss), chunked-local + full (Llama 4), Mamba /
Gated DeltaNet + attention (Jamba, Nemotron-H, Qwen3-Next)). With n_t layers of kind t (one spec per kind):

    g = min_t n_t,  or  max_t n_t  where  max_t n_t < 1.5 x min_t n_t                                      (1)
    groups_t = ceil(n_t / g);   slots_t = groups_t x g;   padding_t = slots_t - n_t                          (2)

(the 1.5 rule pads 12 sliding + 13 full layers to 13 + 13 rather than 24 full slots). Every block of a group is
``g`` pages, one per slot, padding slots included (``get_kv_cache_config_from_groups``: g tensors, tensor i shared
by the i-th layer of every group; ``get_num_blocks``: num_blocks = available // page // g), and a request takes in
each group the blocks its kind needs (``get_max_concurrency_for_kv_cache_config``: g x sum over groups of
``max_memory_usage_bytes``). So a request holds, with m_t one layer's bytes of kind t for it,

    per_request_bytes = sum_t slots_t x m_t                                                              (3)

against sum_t n_t x m_t without the padding: Gemma-3-27B's 10 full + 52 sliding layers are 1 + 6 groups of 10, 8
sliding slots empty (vLLM's warning "Add 8 padding layers, may waste at most 15.38% KV cache memory", the same
function). One kind (or none) is one group of all its layers, no padding (``_get_kv_cache_groups_uniform_spec``).

vLLM's start-up line "GPU KV cache size: N tokens" (``_report_kv_cache_config``, same file @001cabc1) divides the
pool's blocks evenly among all G = sum_t groups_t groups -- recurrent-state groups included -- and counts each block
at the smallest block size of any group (Gemma 4's sliding layers hold 32 tokens per block beside the full layers'
16 after page unification; a Mamba group's block is the whole max_model_len under mamba_cache_mode 'none'):

    num_blocks = pool // page // g                          (``get_num_blocks``; page = one slot's bytes)     (4)
    N = (num_blocks // G) x min_t block_size_t                                                                (5)

a token figure that is not the admitted sequences x their length: the concurrency line beside it is
num_blocks / blocks per request (``get_max_concurrency_for_kv_cache_config``), which eq. (3) gives here.

Newer releases print the concurrency times the length instead (vllm/v1/core/kv_cache_utils.py
``_report_kv_cache_config``, later ``get_kv_cache_capacity`` / ``update_kv_cache_capacity``: ``num_tokens =
int(max_concurrency * max_model_len)``), with B the blocks one request of max_model_len L takes over all groups:

    N' = int(num_blocks / B x L)                                                                          (6)

which equals eq. (5) for one group at an L that is a multiple of the block size. The release that switched is
``estimate/engines.py`` ``VLLM_KV_SIZE_LOG_CONCURRENCY_SINCE``.

The one page size (``unify_kv_cache_spec_page_size``, same file @001cabc1): a layer whose page is smaller than the
largest, P_max, takes block_size x P_max / P when P divides P_max; else @001cabc1 raises NotImplementedError ("Cannot
unify by adjusting block_size"), and newer releases keep its block size and pad its page to P_max
(``page_size_padded``) where its attention backend indexes pages by the block stride
(``AttentionSpec.indexes_kv_by_block_stride``), else raise:

    block_t = block x P_max / P_t   if P_max mod P_t = 0;   else block_t = block, page_t = P_max (padded)      (7)

Pipeline parallelism (vLLM 0.19.1 vllm/v1/core/kv_cache_utils.py ``get_kv_cache_configs``, lines 1543-1560: the
groups are made once from the merged specs of every stage, the whole model's, then projected on each stage's own
layers, ``_project_kv_cache_groups_to_worker`` lines 1472-1505; ``_get_kv_cache_groups_uniform_page_size`` lines
1030-1049 deals kind t's layers round-robin, group i of kind t holding layers_t[i::groups_t]). A stage's block is
``g_s`` pages, its largest projected group (``get_kv_cache_config_from_groups`` lines 1129-1148), while a request
still takes each global group's blocks, so a stage's blocks and each request's bytes on it are the whole model's
(eqs. 3-4) times

    g_s / g,   g_s = max over groups of |group  n  the stage's layers|                                      (8)

and every stage is then cut to the smallest block count of all (lines 1599-1612).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

# eq. (1): the group size becomes the largest kind's count while it is under this multiple of the smallest
# (vllm/v1/core/kv_cache_utils.py @001cabc1 _get_kv_cache_groups_uniform_page_size: ``max_num_layers <
# min_num_layers * 1.5``)
VLLM_GROUP_SIZE_MAX_RATIO = 1.5


def vllm_group_size(layer_counts: Mapping[str, int]) -> int:
    """Eq. (1): the layers in each of vLLM's KV cache groups for ``layer_counts`` (layers per cache kind; kinds with
    no layer ignored); 0 without any layer.

    >>> vllm_group_size({"full": 10, "sliding": 52}), vllm_group_size({"full": 13, "sliding": 12})
    (10, 13)
    """
    counts = [n for n in layer_counts.values() if n > 0]
    if not counts:
        return 0
    lo, hi = min(counts), max(counts)
    return hi if hi < lo * VLLM_GROUP_SIZE_MAX_RATIO else lo


def vllm_padding_slots(layer_counts: Mapping[str, int]) -> dict[str, int]:
    """Eq. (2): the empty slots vLLM's grouping adds to each cache kind (0 for every kind where the model has one
    kind only).

    >>> vllm_padding_slots({"full": 10, "sliding": 52})
    {'full': 0, 'sliding': 8}
    """
    g = vllm_group_size(layer_counts)
    return {kind: (-(-n // g) * g - n if n > 0 and g else 0) for kind, n in layer_counts.items()}


def vllm_group_count(layer_counts: Mapping[str, int]) -> int:
    """G of eq. (5): vLLM's KV cache groups, sum over kinds of ceil(n_t / g) (eq. 2); 0 without any layer.

    >>> vllm_group_count({"full": 10, "sliding": 52}), vllm_group_count({"full": 12, "recurrent": 36})
    (7, 4)
    """
    g = vllm_group_size(layer_counts)
    return sum(-(-n // g) for n in layer_counts.values() if n > 0) if g else 0


def vllm_num_blocks(pool_bytes: int, page_bytes: int, group_size: int) -> int:
    """Eq. (4): the blocks of vLLM's pool, each ``group_size`` pages of ``page_bytes`` (one per slot); 0 for an
    empty pool or page.

    >>> vllm_num_blocks(10_000, 100, 4)
    25
    """
    if page_bytes <= 0 or group_size <= 0 or pool_bytes <= 0:
        return 0
    return pool_bytes // page_bytes // group_size


def vllm_reported_kv_tokens(num_blocks: int, groups: int, min_block_size: int) -> int:
    """Eq. (5): the token count of vLLM's "GPU KV cache size" line: ``num_blocks`` shared evenly by ``groups``
    groups, each block counted at ``min_block_size`` tokens.

    >>> vllm_reported_kv_tokens(4439 * 4, 4, 16)
    71024
    """
    return num_blocks // max(groups, 1) * min_block_size


def vllm_concurrency_kv_tokens(num_blocks: int, blocks_per_request: int, max_model_len: int) -> int:
    """Eq. (6): the token count of the newer releases' "GPU KV cache size" line: int(max_concurrency x max_model_len),
    max_concurrency = ``num_blocks`` / ``blocks_per_request`` (float, as vLLM divides); 0 without a block per
    request.

    >>> vllm_concurrency_kv_tokens(4439 * 4, 4 * 2048, 32768), vllm_concurrency_kv_tokens(100, 3, 1000)
    (71024, 33333)
    """
    if blocks_per_request <= 0:
        return 0
    return int(num_blocks / blocks_per_request * max_model_len)


def vllm_unified_block(page_bytes: int, max_page_bytes: int, block: int) -> tuple[int, bool]:
    """Eq. (7): (tokens per block, padded) of a layer whose page at ``block`` tokens is ``page_bytes`` under vLLM's one
    page size ``max_page_bytes``: more tokens where its page divides the largest, else its own ``block`` in a page
    padded to the largest (True: the releases with ``page_size_padded``; @001cabc1 refuses such a model).

    >>> vllm_unified_block(16384, 32768, 16), vllm_unified_block(16640, 33024, 16)
    ((32, False), (16, True))
    """
    if page_bytes <= 0 or page_bytes >= max_page_bytes:
        return block, False
    if max_page_bytes % page_bytes == 0:
        return block * (max_page_bytes // page_bytes), False
    return block, True


def vllm_stage_group_size(layer_kinds: Sequence[str], layers: range, recurrent: Sequence[bool] = ()) -> int:
    """Eq. (8): g_s, the pages of one block on a pipeline stage holding ``layers``, for a model whose layer i has cache
    kind ``layer_kinds[i]`` ("none": no K/V of its own) and, where ``recurrent[i]``, a recurrent state (a "recurrent"
    cache layer of its own, vLLM's Mamba spec): the most cache layers of one of vLLM's whole-model groups (eqs. 1-2,
    kind t's layers dealt round-robin over its groups) that the stage holds.

    >>> kinds = ["sliding"] * 5 + ["full"] + ["sliding"] * 5 + ["full"]  # 10 sliding + 2 full: g = 2, 5 + 1 groups
    >>> vllm_stage_group_size(kinds, range(0, 6)), vllm_stage_group_size(kinds, range(6, 12))
    (1, 1)
    >>> vllm_stage_group_size(["sliding", "full"] * 4, range(0, 4))  # 4 + 4: one group of each, 2 of 4 on the stage
    2
    >>> # 2 attention + 6 recurrent: g = 2, state groups (1, 5), (2, 6), (3, 7): one of each on layers 0-3
    >>> vllm_stage_group_size(["full", "none", "none", "none"] * 2, range(0, 4), [False, True, True, True] * 2)
    1
    """
    by_kind: dict[str, list[int]] = {}
    for i, kind in enumerate(layer_kinds):
        if kind != "none":
            by_kind.setdefault(kind, []).append(i)
        if i < len(recurrent) and recurrent[i]:
            by_kind.setdefault("recurrent", []).append(i)
    g = vllm_group_size({k: len(v) for k, v in by_kind.items()})
    best = 0
    for own in by_kind.values():
        groups = -(-len(own) // g)
        for i in range(groups):
            best = max(best, sum(1 for j in own[i::groups] if j in layers))
    return best
