"""weight_bytes resolves each GGUF tensor type once per (role, shape, layer class) instead of once per tensor; this
checks that shortcut against the plain per-tensor rule (gguf_tensor_type on every tensor, no memo) for every catalog
model and GGUF file type, layer by layer. A new layer predicate in gguf_tensor_type that _layer_class does not carry
fails here."""

from __future__ import annotations

import pytest

from llmsizer.catalog.models import entries
from llmsizer.formulas.tensors import model_tensors
from llmsizer.formulas.weight_formats import GGUF_FTYPES, ggml_tensor_bytes, gguf_tensor_type, weight_bytes

MODELS = sorted(entries())


@pytest.mark.parametrize("name", MODELS)
def test_memoised_gguf_bytes_equal_the_per_tensor_rule(name: str) -> None:
    spec = entries()[name].spec()
    for ftype in sorted(GGUF_FTYPES):
        layers = [0] * spec.num_layers
        total = 0
        for t in model_tensors(spec):
            b = ggml_tensor_bytes(gguf_tensor_type(spec, ftype, t), t.numel // t.count) * t.count
            total += b
            if t.layer >= 0 and t.component != "vision":
                layers[t.layer] += b
        wb = weight_bytes(spec, "gguf:" + ftype)
        assert (wb.total, wb.layer_bytes) == (total, tuple(layers)), ftype
