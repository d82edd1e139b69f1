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
"""

from __future__ import annotations

from collections.abc import Mapping

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
