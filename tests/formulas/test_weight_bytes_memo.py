"""weight_bytes resolves each GGUF tensor type once per (role, shape, layer class) instead of once per tensor, and
sums each kind of decoder layer once (formulas/tensors.py layer_groups) instead of each layer; this checks those
shortcuts against the plain per-tensor rule (gguf_tensor_type, or the non-GGUF byte rule, on every tensor of
model_tensors, no memo) for every catalog model and format, layer by layer: the total, each component, each storage
type (in the order a tensor-by-tensor sum first meets them), and each layer's bytes, expert bytes and matrix bytes.
A new layer predicate in gguf_tensor_type that _layer_class does not carry fails here."""

from __future__ import annotations

import pytest

from llmsizer.catalog.models import entries
from llmsizer.formulas.tensors import model_tensors
from llmsizer.formulas.weight_formats import (
    GGUF_FTYPES,
    _tensor_bytes_simple,
    ggml_tensor_bytes,
    gguf_tensor_type,
    weight_bytes,
)

MODELS = sorted(entries())
OTHER_FORMATS = ("bf16", "fp32", "fp8", "fp8-block", "int8", "llm.int8", "gptq-int4", "awq-int4", "nf4", "nf4-dq",
                 "mxfp4")


def _per_tensor(spec: object, fmt: str) -> tuple[int, list[tuple[str, int]], list[tuple[str, int]], tuple[int, ...],
                                                 tuple[int, ...], tuple[int, ...]]:
    n = spec.num_layers  # type: ignore[attr-defined]
    layers, experts, matrices = [0] * n, [0] * n, [0] * n
    comps: dict[str, int] = {}
    stores: dict[str, int] = {}
    for t in model_tensors(spec):  # type: ignore[arg-type]
        if fmt.startswith("gguf:"):
            label = gguf_tensor_type(spec, fmt[5:], t)  # type: ignore[arg-type]
            b = ggml_tensor_bytes(label, t.numel // t.count) * t.count
        else:
            b, label = _tensor_bytes_simple(fmt, t, 128)
        comps[t.component] = comps.get(t.component, 0) + b
        stores[label] = stores.get(label, 0) + b
        if t.layer >= 0 and t.component != "vision":
            layers[t.layer] += b
            if t.component == "experts":
                experts[t.layer] += b
            elif t.matrix:
                matrices[t.layer] += b
    return (sum(comps.values()), list(comps.items()), list(stores.items()), tuple(layers), tuple(experts),
            tuple(matrices))


@pytest.mark.parametrize("name", MODELS)
def test_memoised_gguf_bytes_equal_the_per_tensor_rule(name: str) -> None:
    spec = entries()[name].spec()
    for fmt in [*("gguf:" + f for f in sorted(GGUF_FTYPES)), *OTHER_FORMATS]:
        wb = weight_bytes(spec, fmt)
        got = (wb.total, list(wb.by_component.items()), list(wb.by_storage.items()), wb.layer_bytes,
               wb.layer_expert_bytes, wb.layer_matrix_bytes)
        assert got == _per_tensor(spec, fmt), fmt
