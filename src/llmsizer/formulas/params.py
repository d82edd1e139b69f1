"""Parameter counts: total, per component, and active per token for MoE.

Total = sum of every tensor's elements (``tensors.layer_groups``: each kind of layer once, times its layers).
Active per token (MoE) = total - routed-expert parameters x (1 - k/E): each token visits k of the E
routed experts in every MoE layer (Fedus et al. 2022, Switch Transformer, section 2; DeepSeek-V3
technical report arXiv 2412.19437 section 1, "671B total, 37B activated"). Here the input embedding and
vision parameters count as active (Qwen's "A3B"/"A22B" follow this); DeepSeek and OpenAI publish active
counts without the input embedding ("36.6B including 0.9B for the output head"):
``active_without_embedding`` gives that figure.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

from ..specs import ModelSpec
from .tensors import COMPONENTS, layer_groups


@dataclass(frozen=True)
class ParamCounts:
    total: int
    active: int
    by_component: dict[str, int]

    @property
    def active_without_embedding(self) -> int:
        return self.active - self.by_component.get("embedding", 0) - self.by_component.get("per_layer_embedding", 0)


def routed_share(spec: ModelSpec) -> float:
    """k / E: the share of a routed-expert tensor one token uses (module docstring); 1.0 for a dense model. The one
    home of the routing rule: ``count_params``' active count, the per-token work of the experts' LoRA adapters
    (formulas/lora.py ``expert_adapter_work``), the GGUF product weights a prompt token multiplies
    (weight_formats.py ``gguf_product_weights``) and llama.cpp's prefill expert GEMMs (estimate/speed.py) read it."""
    if spec.moe is None or not spec.moe.num_experts:
        return 1.0
    return spec.moe.experts_per_token / spec.moe.num_experts


@lru_cache(maxsize=256)
def count_params(spec: ModelSpec) -> ParamCounts:
    """Exact parameter counts of ``spec`` (see module docstring for the active-parameter rule)."""
    by: dict[str, int] = {c: 0 for c in COMPONENTS}
    head, groups, tail = layer_groups(spec)
    for t in head:
        by[t[1]] += t[5]
    for tensors, blocks in tail:  # a repeated segment (a vision tower's blocks): once, times its blocks
        k = len(blocks) or 1
        for t in tensors:
            by[t[1]] += t[5] * k
    # the decoder layers of one kind (ModelSpec.layer_key) hold the same tensors (tensors.layer_groups): each
    # kind's tensors once, times its layers (integer sums)
    for _, tpl, layers in groups:
        n = len(layers)
        for _, comp, _, _, _, numel in tpl:  # Tensor is a tuple: unpacking is the fast path
            by[comp] += numel * n
    total = sum(by.values())
    active = total
    if spec.moe is not None and by["experts"]:
        active = total - round(by["experts"] * (1 - routed_share(spec)))
    return ParamCounts(total=total, active=active, by_component={k: v for k, v in by.items() if v})
