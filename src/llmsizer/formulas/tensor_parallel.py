"""Tensor parallelism (Megatron-LM, Shoeybi et al. 2019, arXiv 1909.08053, section 3): per-device shares.

Column- and row-parallel linears split every matrix across ``tp`` devices; vocabulary-parallel
embeddings and lm_head split the vocabulary (vLLM ``VocabParallelEmbedding``); 1-D tensors (norms) stay
replicated. KV heads are split across devices, but a device holds at least one head, so with fewer KV
heads than devices they are replicated (vLLM ``get_num_kv_heads``: max(1, num_kv_heads // tp)). An MLA
latent cache is one shared "head" and is replicated on every device.
"""

from __future__ import annotations

import math
from dataclasses import replace
from functools import lru_cache

from ..errors import FieldError, InputError
from ..specs import ModelSpec
from .tensors import model_tensors
from .weight_formats import WeightBytes


def check_tensor_parallel(spec: ModelSpec, tp: int) -> None:
    """TP must divide the attention heads (vLLM: 'Total number of attention heads must be divisible by tp')."""
    if tp < 1:
        raise InputError(f"tensor_parallel must be >= 1, got {tp}")
    if spec.num_heads % tp:
        raise FieldError("tensor_parallel",
                         f"tensor_parallel {tp} does not divide the {spec.num_heads} attention heads of {spec.name}")


def serving_tensor_parallel_refusal(spec: ModelSpec, tp: int) -> str | None:
    """Why vLLM (and SGLang, whose QKVParallelLinear is the same) will not shard ``spec`` ``tp`` ways, or None.

    vllm 0.19.1 (PyPI wheel): the attention heads must divide by tp (vllm/config/model.py:1110-1116, "Total number of
    attention heads ... must be divisible by tensor parallel size"); the KV heads are split when tp < kv heads and
    replicated when tp >= kv heads, each through ``divide``, which asserts exact divisibility
    (vllm/model_executor/layers/linear.py:1012-1016, vllm/distributed/utils.py:53-64): kv % tp == 0 or tp % kv == 0.
    An MLA model's latent cache is one shared head, replicated on every device (no KV-head rule)."""
    if spec.num_heads % tp:
        return f"tensor_parallel {tp} does not divide the {spec.num_heads} attention heads of {spec.name}"
    kv = spec.num_kv_heads
    if spec.mla is None and kv % tp and tp % kv:
        return (f"tensor_parallel {tp} neither divides nor is a multiple of the {kv} KV heads of {spec.name} "
                "(vLLM splits KV heads evenly or replicates them evenly)")
    return None


@lru_cache(maxsize=256)  # per spec, like model_tensors
def replicated_elements(spec: ModelSpec) -> int:
    """Elements of 1-D tensors (norms, biases of row-parallel layers, sinks) kept whole on every device."""
    return sum(t.numel for t in model_tensors(spec) if len(t.shape) == 1)


def shard_weights(spec: ModelSpec, wb: WeightBytes, tp: int, bytes_per_replicated: float = 4.0) -> WeightBytes:
    """Per-device weights: (total - replicated) / tp + replicated. ``bytes_per_replicated`` = 4 (F32 in GGUF) or
    the compute dtype's size; the 1-D share is tiny either way."""
    if tp == 1:
        return wb
    # memoized on the spec and weight objects themselves (both treated as immutable, as weight_bytes' cache
    # already does) and the numbers with their types
    key = (id(spec), id(wb), tp, bytes_per_replicated, type(tp), type(bytes_per_replicated))
    hit = _SHARD_MEMO.get(key)
    if hit is not None and hit[0] is spec and hit[1] is wb:
        return hit[2]
    out = _shard_weights(spec, wb, tp, bytes_per_replicated)
    if len(_SHARD_MEMO) >= 2048:
        _SHARD_MEMO.clear()
    _SHARD_MEMO[key] = (spec, wb, out)
    return out


_SHARD_MEMO: dict[tuple[object, ...], tuple[ModelSpec, WeightBytes, WeightBytes]] = {}


@lru_cache(maxsize=256)  # per spec, like model_tensors
def replicated_by_place(spec: ModelSpec) -> tuple[tuple[int, ...], dict[str, int]]:
    """The 1-D elements of ``replicated_elements`` by where they sit: per decoder layer, and per component."""
    layers = [0] * spec.num_layers
    comps: dict[str, int] = {}
    for t in model_tensors(spec):
        if len(t.shape) == 1:
            if 0 <= t.layer < spec.num_layers:
                layers[t.layer] += t.numel
            comps[t.component] = comps.get(t.component, 0) + t.numel
    return tuple(layers), comps


def _shard_weights(spec: ModelSpec, wb: WeightBytes, tp: int, bytes_per_replicated: float) -> WeightBytes:
    rep = int(replicated_elements(spec) * bytes_per_replicated)
    rep = min(rep, wb.total)

    def share(x: int) -> int:  # the 1-D share in proportion to the bytes (where their place is not known)
        frac = x / wb.total if wb.total else 0.0
        return int((x - rep * frac) / tp + rep * frac)

    def exact(x: int, elements: int) -> int:  # a part whose own 1-D elements are known stay whole, the rest / tp
        r = min(x, int(elements * bytes_per_replicated))
        return int((x - r) / tp + r)

    per_layer, per_comp = replicated_by_place(spec)
    layers = (tuple(map(exact, wb.layer_bytes, per_layer)) if len(wb.layer_bytes) == len(per_layer)
              else tuple(share(v) for v in wb.layer_bytes))
    return replace(wb, total=share(wb.total),
                   by_component={k: exact(v, per_comp.get(k, 0)) for k, v in wb.by_component.items()},
                   by_storage={k: share(v) for k, v in wb.by_storage.items()}, layer_bytes=layers,
                   notes=wb.notes + (f"per device under tensor parallel {tp}",))


def kv_fraction_per_device(spec: ModelSpec, tp: int, mla_latent: bool) -> float:
    """Share of the KV cache one device holds: ceil-free max(1, kv_heads // tp) / kv_heads; 1 for MLA latent."""
    if tp == 1 or (spec.mla is not None and mla_latent):
        return 1.0
    heads_here = max(1, spec.num_kv_heads // tp)
    return heads_here / spec.num_kv_heads


def per_device(nbytes: int, fraction: float) -> int:
    return int(math.ceil(nbytes * fraction))
