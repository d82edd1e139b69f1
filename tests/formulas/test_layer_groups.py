"""The inventory builds each kind of decoder layer once (formulas/tensors.py layer_groups: ModelSpec.layer_key) and
stamps the other layers of that kind from it. This checks the premise on every catalog model: each layer's tensors
built for that layer itself (the per-block builders called with its index, as a layer-by-layer inventory would) equal
the rows model_layout gives it, and every layer is in exactly one group, the group of its own kind. (The vision
towers' blocks, one repeated segment each, are checked by the parameter counts against transformers:
tests/catalog/test_params_match_transformers.py, test_llama_vision_params.py, test_qwen3_vl_moe.py.)"""

from __future__ import annotations

import pytest

from llmsizer.catalog.models import entries
from llmsizer.formulas import tensors as T

MODELS = sorted(entries())


def _layer_by_itself(spec: object, i: int) -> list[T.Tensor]:
    kind = spec.layer_key(i)  # type: ignore[attr-defined]
    out = (T._attention(spec, i) if kind[0] else []) + (T._cross_attention(spec, i) if kind[4] else []) \
        + (T._recurrent(spec, i) if kind[1] else []) + (T._feed_forward(spec, i) if kind[2] else []) \
        + T._gemma3n_layer(spec, i)  # type: ignore[arg-type]
    for j in range(spec.norms_per_layer):  # type: ignore[attr-defined]
        out += T._norm(f"layer_norm_{j}", spec.hidden_size, spec.norm_kind, i)  # type: ignore[attr-defined]
    return out


@pytest.mark.parametrize("name", MODELS)
def test_every_layer_equals_its_own_build(name: str) -> None:
    spec = entries()[name].spec()
    tensors, _, ranges, _ = T.model_layout(spec)
    head, groups, tail = T.layer_groups(spec)
    assert sorted(i for _, _, idx in groups for i in idx) == list(range(spec.num_layers))
    for kind, _, idx in groups:
        assert all(spec.layer_key(i) == kind for i in idx)
    for i, (a, z) in enumerate(ranges):
        assert list(tensors[a:z]) == _layer_by_itself(spec, i), i
    after = T.expand(tail)
    assert tensors[:len(head)] == head and list(tensors[len(tensors) - len(after):]) == after
    for segment, blocks in tail:  # a repeated segment's blocks (a vision tower's) differ only in their index
        assert all(t.layer == (blocks[0] if blocks else t.layer) for t in segment)
