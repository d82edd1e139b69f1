"""Kernels an eager transformers inference step launches, from the model's structure (formulas/launch_overhead.py
eq. K4), and the layer-kind split the training kernel counts share (``moe_kinds``)."""

from __future__ import annotations

from functools import lru_cache

from ..formulas.elementwise_traffic import LayerWidths, model_layer_widths
from ..formulas.launch_overhead import GENERATE_STEP_KERNELS, Linear, forward_head_kernels, inference_step_kernels
from ..formulas.selective_checkpointing import layer_matmul_shapes
from ..formulas.training_activations import ActivationSetup
from ..specs import ModelSpec


def moe_kinds(spec: ModelSpec) -> list[bool]:
    """Per decoder layer, whether it runs routed experts (an MoE layer of an MoE model): the one layer-kind split of
    the duration's float8 linears and kernel counts, and of the inference kernel count."""
    layers = spec.moe_layers[:spec.num_layers]
    return list(map(bool, layers)) if spec.moe is not None else [False] * len(layers)


def kernel_linears(spec: ModelSpec, st: ActivationSetup) -> tuple[list[LayerWidths], list[list[Linear]]]:
    """Per decoder layer, its widths (``model_layer_widths``) and the linears the eager kernel counts take (name,
    trained, has bias): the projections and adapters of ``layer_matmul_shapes`` (trained: a full fine-tune's, or an
    adapter's) and, in an MoE layer, its top-k routed experts' linears (``experts_per_token`` x 3 gated | 2; trained
    in a full fine-tune). The one rule of the training count (estimate/duration.py kernels_per_micro_step) and the
    inference count (:func:`inference_kernels`); layers of one kind (``moe_kinds``) share their objects, which
    formulas/launch_overhead.py counts once."""
    by_kind: dict[bool, tuple[LayerWidths, list[Linear]]] = {}
    kinds = moe_kinds(spec)
    for moe in dict.fromkeys(kinds):
        i = kinds.index(moe)  # the first layer of this kind
        lin = [(name, st.full or "lora_" in name, not counted)
               for name, _, _, counted in layer_matmul_shapes(spec, i, st)]
        if moe and spec.moe is not None:
            m = spec.moe
            lin += [("expert", st.full, False)] * (m.experts_per_token * (3 if m.expert_gated else 2))
        by_kind[moe] = (model_layer_widths(spec, i, st.tp), lin)
    return [by_kind[moe][0] for moe in kinds], [by_kind[moe][1] for moe in kinds]


@lru_cache(maxsize=256)
def inference_kernels(spec: ModelSpec, tp: int = 1, half: bool = True,
                      per_step: int = GENERATE_STEP_KERNELS) -> int:
    """Eq. (K4): kernels one eager inference step of ``spec`` launches on one device of ``tp``: every decoder
    layer's frozen forward (its linears from ``layer_matmul_shapes``, an MoE layer's top-k routed experts as linears:
    :func:`kernel_linears`) and cache update, the embedding, positions, rotary tables, final norm and head, and the
    decoding loop's own ops, ``per_step``: ``generate()``'s GENERATE_STEP_KERNELS (a decode step), the measure
    worker's WORKER_STEP_KERNELS (its forward + argmax loop), 0 (a bare forward, as a prefill forward without the
    loop's ops). The count is the same on each of ``tp`` devices (the widths shrink, not the ops); the collectives
    of a tensor-parallel forward are not in it. Memoized (a spec is immutable)."""
    widths, linears = kernel_linears(spec, ActivationSetup(batch=1, seq=1, full=False, tp=tp))
    head = forward_head_kernels(spec.norm_kind == "layernorm", widths[0].rotary, half)
    return inference_step_kernels(widths, linears, head, per_step=per_step, half=half)
