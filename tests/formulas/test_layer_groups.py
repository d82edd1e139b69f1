"""The inventory builds each kind of decoder layer once (formulas/tensors.py layer_groups: ModelSpec.layer_keys) and
stamps the other layers of that kind from it. This checks the premise on every catalog model: each layer's tensors
built for that layer itself (the per-block builders called with its index, as a layer-by-layer inventory would) equal
the rows model_layout gives it, and every layer is in exactly one group, the group of its own kind (its key from
its per-layer fields). (The vision
towers' blocks, one repeated segment each, are checked by the parameter counts against transformers:
tests/catalog/test_params_match_transformers.py, test_llama_vision_params.py, test_qwen3_vl_moe.py.)"""

from __future__ import annotations

from typing import Any

import pytest

from llmsizer.catalog.models import entries
from llmsizer.formulas import tensors as T

MODELS = sorted(entries())


def _layer_by_itself(s: Any, i: int) -> list[T.Tensor]:
    """Layer ``i``'s tensors from the spec's per-layer fields (not from its layer key)."""
    out = (T._attention(s, i) if s.layer_types[i] != "none" else []) \
        + (T._cross_attention(s, i) if s.cross_attention_layers[i] else []) \
        + (T._recurrent(s, i) if s.recurrent_layers[i] else []) + (T._feed_forward(s, i) if s.ffn_layers[i] else []) \
        + T._gemma3n_layer(s, i) + T._gemma4_layer(s, i)
    for j in range(s.norms_per_layer):
        out += T._norm(f"layer_norm_{j}", s.hidden_size, s.norm_kind, i)
    return out


@pytest.mark.parametrize("name", MODELS)
def test_every_layer_equals_its_own_build(name: str) -> None:
    spec = entries()[name].spec()
    tensors, _, ranges, _ = T.model_layout(spec)
    head, groups, tail = T.layer_groups(spec)
    assert sorted(i for _, _, idx in groups for i in idx) == list(range(spec.num_layers))
    # the key from the per-layer fields, one layer at a time (ModelSpec.layer_keys builds them all at once)
    assert [kind for i in range(spec.num_layers) for kind, _, idx in groups if i in idx] == [
        (spec.layer_types[i] != "none", spec.recurrent_layers[i], spec.ffn_layers[i],
         spec.moe_layers[i] and spec.moe is not None, spec.cross_attention_layers[i], spec.kv_shared_layers[i],
         spec.ffn_size(i), spec.full_head_dim if spec.full_head_dim and spec.layer_types[i] == "full"
         else spec.head_dim) for i in range(spec.num_layers)]
    for i, (a, z) in enumerate(ranges):
        assert list(tensors[a:z]) == _layer_by_itself(spec, i), i
    after = T.expand(tail)
    assert tensors[:len(head)] == head and list(tensors[len(tensors) - len(after):]) == after
    for segment, blocks in tail:  # a repeated segment's blocks (a vision tower's) differ only in their index
        assert all(t.layer == (blocks[0] if blocks else t.layer) for t in segment)
