"""The LoRA and quantization tables walk the inventory once per kind of decoder layer (formulas/tensors.py
layer_groups) instead of tensor by tensor; this checks, on every catalog model, that they equal the plain walk over
``model_tensors`` (every tensor of every layer, in order) that they replace: the adapted modules (order, layer
indexes and features), whether any linear is 4-bit quantizable, the largest quantized matrix, and a training stage's
tensors before/after the layers and of each layer (estimate/training/states.py)."""

from __future__ import annotations

from typing import Any

import pytest

from llmsizer.catalog.models import entries
from llmsizer.errors import InputError
from llmsizer.estimate.training import states
from llmsizer.formulas import lora, weight_formats
from llmsizer.formulas import tensors as T
from llmsizer.specs.training import normalize_targets

MODELS = sorted(entries())
TARGETS = ("q,v", "all-linear", "q,k,v,o,gate,up,down,embed,lm_head", "embed,lm_head", "down")
# the plain walk below knows the decoder's projections by name; all-linear (PEFT's: routers, vision towers, Mamba
# projections too) is checked against PEFT's own models in tests/training/test_lora_all_linear.py
WALKED_TARGETS = tuple(t for t in TARGETS if t != "all-linear") + ("q,k,v,o,gate,up,down",)
QUANT_SKIP = ("embedding", "lm_head", "vision", "per_layer_embedding")


def _adapted_by_tensor(spec: Any, targets: str) -> tuple[lora.AdaptedModule, ...]:
    """formulas/lora.py adapted_modules as a walk over every tensor of model_tensors (the fused experts first)."""
    wanted = set(normalize_targets(targets))
    out: list[lora.AdaptedModule] = []
    if spec.is_moe and spec.moe is not None and spec.model_type in lora.PEFT_EXPERT_CONVERSION:
        exp = wanted & {"gate", "up", "down"}
        e, h, i_e = spec.moe.num_experts, spec.hidden_size, spec.moe.expert_intermediate_size
        for layer, is_moe in enumerate(spec.moe_layers):
            if is_moe and exp & {"gate", "up"}:
                out.append(lora.AdaptedModule("ffn_exps_gate_up", layer, h, 2 * i_e, experts=e, rank_mult=2))
            if is_moe and "down" in exp:
                out.append(lora.AdaptedModule("ffn_exps_down", layer, i_e, h, experts=e))
        wanted -= exp
    # PEFT wraps a fused query_key_value (Falcon, GPT-NeoX, Phi-3's qkv_proj, GPT-BigCode's c_attn) as one module: one
    # adapter in attn_q's place; a fused gate_up (Phi-3, Granite-4.0-H's shared MLP) one in the gate's place
    fused = spec.fused_qkv and bool(wanted & {"q", "k", "v"})
    fused_mlp = spec.fused_gate_up and bool(wanted & {"gate", "up"})
    # PEFT's suffix match adapts the vision tower's linears named as a decoder target is (formulas/lora.py
    # VISION_MODULES, from transformers' modeling files)
    tower = lora.vision_role_targets(spec.vision.encoder) if spec.vision is not None else {}
    for t in T.model_tensors(spec):
        if len(t.shape) != 2 or t.component == "experts" or t.role.endswith(".bias"):
            continue
        if t.component == "vision":
            if tower.get(t.role) in wanted:
                out.append(lora.AdaptedModule(t.role, t.layer, t.shape[1], t.shape[0], t.count))
            continue
        if fused and t.role in ("attn_q", "attn_k", "attn_v"):
            if t.role == "attn_q":
                qkv = (spec.num_heads + 2 * spec.num_kv_heads) * spec.head_dim
                out.append(lora.AdaptedModule("attn_qkv", t.layer, t.shape[1], qkv, t.count))
            continue
        if fused_mlp and t.role in ("ffn_gate", "ffn_up", "ffn_shexp_gate", "ffn_shexp_up"):
            if t.role.endswith("_gate"):  # gate then up, each I wide: 2 I out
                out.append(lora.AdaptedModule(t.role + "_up", t.layer, t.shape[1], 2 * t.shape[0], t.count))
            continue
        name = lora._role_target(t.role)
        if name is None:  # PEFT matches T5's and Mllama's cross-attention q/k/v/o by name (lora.T5_CROSS_TARGET)
            name = {"cross_attn_q": "q", "cross_attn_k": "k", "cross_attn_v": "v", "cross_attn_o": "o"}.get(t.role)
        if name is None or name not in wanted:
            continue
        if t.role == "token_embd":
            out.append(lora.AdaptedModule(t.role, t.layer, t.shape[0], t.shape[1], t.count, embedding=True))
        else:
            out.append(lora.AdaptedModule(t.role, t.layer, t.shape[1], t.shape[0], t.count))
    if "lm_head" in wanted and spec.tie_word_embeddings:
        out.append(lora.AdaptedModule("output", -1, spec.hidden_size, spec.vocab_size))
    return tuple(out)


@pytest.mark.parametrize("name", MODELS)
def test_grouped_walks_equal_the_tensor_walk(name: str) -> None:
    spec = entries()[name].spec()
    tensors, before, ranges, after = T.model_layout(spec)
    quantizable = [t for t in tensors if t.matrix and t.component not in QUANT_SKIP and not t.role.endswith(".bias")]
    assert lora.any_quantizable(spec) is bool(quantizable)
    assert weight_formats.largest_quantized_matrix(spec, "nf4-dq") == max(
        (t.numel // t.count for t in tensors if len(t.shape) == 2 and min(t.shape) > 1
         and t.component not in QUANT_SKIP), default=0)
    head, tail, kinds = states._layers_alike(spec)
    assert head == tuple(tensors[k] for k in before) and tail == tuple(tensors[k] for k in after)
    assert sorted(i for v in kinds.values() for i in v) == list(range(spec.num_layers))
    for i, (a, z) in enumerate(ranges):
        assert states._layer_tensors(spec, i) == tensors[a:z], i
    for targets in WALKED_TARGETS:
        try:
            expected = _adapted_by_tensor(spec, targets)
        except InputError:
            continue
        try:
            got = lora.adapted_modules(spec, targets)
        except InputError:  # refused (gate without up on fused experts): the walk above does not check it
            continue
        assert got == expected, targets
        assert [m.layer for m in got] == [m.layer for m in expected]


def _alike_by_module(mods: tuple[lora.AdaptedModule, ...]) -> tuple[tuple[lora.AdaptedModule, int], ...]:
    """formulas/lora.py _alike_modules as a walk over every adapted module."""
    out: dict[tuple[object, ...], list[Any]] = {}
    for m in mods:
        sig = (m.role, m.in_features, m.out_features, m.count, m.experts, m.rank_mult)
        out.setdefault(sig, [m, 0])[1] += 1
    return tuple((m, k) for m, k in out.values())


def _stage_by_module(spec: Any, mods: tuple[lora.AdaptedModule, ...], pp: int, stage: int) -> states.StageAdapters:
    """estimate/training/states.py _stage_adapters as a walk over every adapted module."""
    from collections import Counter

    from llmsizer.formulas.parallelism import pipeline_stage_layers

    last = len(pipeline_stage_layers(spec.num_layers, pp)) - 1
    layer_stage = states._layer_stages(spec.num_layers, pp)
    kinds: dict[tuple[int, ...], int] = {}
    modules: list[list[Any]] = []
    per_layer: dict[int, list[int]] = {}
    embedding: list[int] = []
    head: list[int] = []
    for m in mods:
        if m.count < 1:
            continue
        tower = m.role.startswith("v_")  # a vision tower's block (all-linear): beside the head, on stage 0
        if pp > 1:
            m_stage = 0 if (m.layer < 0 or tower) and m.role != "output" else (
                last if m.layer < 0 else layer_stage[m.layer])
            if m_stage != stage:
                continue
        elif stage != 0:
            continue
        g = kinds.setdefault((m.in_features, m.out_features, m.experts, m.rank_mult, m.count), len(modules))
        if g == len(modules):
            modules.append([m, 0])
        modules[g][1] += 1
        if m.layer >= 0 and not tower:
            per_layer.setdefault(m.layer, []).append(g)
        elif m.role == "token_embd":
            embedding.append(g)
        else:
            head.append(g)
    layers: dict[tuple[int, ...], list[int]] = {}
    for i, gs in per_layer.items():
        layers.setdefault(tuple(gs), []).append(i)
    return states.StageAdapters(tuple((m, k) for m, k in modules),
                                tuple((tuple(v), tuple(Counter(k).items())) for k, v in layers.items()),
                                tuple(Counter(embedding).items()), tuple(Counter(head).items()))


@pytest.mark.parametrize("name", MODELS)
def test_grouped_adapter_tables_equal_the_module_walk(name: str) -> None:
    spec = entries()[name].spec()
    for targets in TARGETS:
        try:
            mods = lora.adapted_modules(spec, targets)
        except InputError:
            continue
        alike = lora._alike_modules(spec, targets)
        assert alike == _alike_by_module(mods), targets
        assert [m.layer for m, _ in alike] == [m.layer for m, _ in _alike_by_module(mods)]
        for pp in (1, 2, 4):
            if pp > spec.num_layers:
                continue
            for stage in range(pp):
                got = states._stage_adapters(spec, targets, pp, stage)
                want = _stage_by_module(spec, mods, pp, stage)
                assert got == want, (targets, pp, stage)
                assert [m.layer for m, _ in got.modules] == [m.layer for m, _ in want.modules]


@pytest.mark.parametrize("name", MODELS)
def test_grouped_duration_linears_equal_the_module_walk(name: str) -> None:
    from llmsizer.estimate.duration import _adapted_linears

    spec = entries()[name].spec()
    for targets in TARGETS:
        try:
            mods = lora.adapted_modules(spec, targets)
        except InputError:
            continue
        want: dict[int, list[tuple[int, int]]] = {}
        for m in mods:
            if not m.embedding and m.experts == 1 and m.layer >= 0:
                want.setdefault(m.layer, []).extend([(m.in_features, m.out_features)] * m.count)
        got = _adapted_linears(spec, targets)
        assert got == {k: tuple(v) for k, v in want.items()} and list(got) == list(want), targets
