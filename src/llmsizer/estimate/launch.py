"""Kernels an eager transformers inference step launches, from the model's structure (formulas/launch_overhead.py
eq. K4), and the layer-kind split the training kernel counts share (``moe_kinds``)."""

from __future__ import annotations

from functools import lru_cache

from ..formulas.elementwise_traffic import model_layer_widths
from ..formulas.launch_overhead import forward_head_kernels, inference_step_kernels
from ..formulas.selective_checkpointing import layer_matmul_shapes
from ..formulas.training_activations import ActivationSetup
from ..specs import ModelSpec


def moe_kinds(spec: ModelSpec) -> list[bool]:
    """Per decoder layer, whether it runs routed experts (an MoE layer of an MoE model): the one layer-kind split of
    the duration's float8 linears and kernel counts, and of the inference kernel count."""
    layers = spec.moe_layers[:spec.num_layers]
    return list(map(bool, layers)) if spec.moe is not None else [False] * len(layers)


@lru_cache(maxsize=256)
def inference_kernels(spec: ModelSpec, tp: int = 1, half: bool = True) -> int:
    """Eq. (K4): kernels of one eager ``generate()`` step of ``spec`` (a decode step; a prefill forward launches the
    same) on one device of ``tp``: every decoder layer's frozen forward (its linears from ``layer_matmul_shapes``, an
    MoE layer's top-k routed experts as linears, as the training count) and cache update, the embedding, positions,
    rotary tables, final norm and head, and generate()'s own ops. Memoized (a spec is immutable)."""
    st = ActivationSetup(batch=1, seq=1, full=False, tp=tp)
    by_kind: dict[bool, tuple[object, list[tuple[str, bool, bool]]]] = {}
    kinds = moe_kinds(spec)
    for moe in dict.fromkeys(kinds):
        i = kinds.index(moe)
        lin = [(name, False, not counted) for name, _, _, counted in layer_matmul_shapes(spec, i, st)]
        if moe and spec.moe is not None:
            m = spec.moe
            lin += [("expert", False, False)] * (m.experts_per_token * (3 if m.expert_gated else 2))
        by_kind[moe] = (model_layer_widths(spec, i, tp), lin)
    widths = [by_kind[moe][0] for moe in kinds]
    linears = [by_kind[moe][1] for moe in kinds]
    rotary = model_layer_widths(spec, 0, tp).rotary
    head = forward_head_kernels(spec.norm_kind == "layernorm", rotary, half)
    return inference_step_kernels(widths, linears, head, half=half)  # type: ignore[arg-type]
