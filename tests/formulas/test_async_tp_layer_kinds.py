"""Async tensor parallelism's per-layer pairs (estimate/model_parallel.py ``micro_pipelined_layer``, eq. (T5)) are
summed over the busiest stage once per layer kind (``formulas/tensors.py`` ``layer_kind_firsts``) and recompute
flag: that reads each layer through the first layer of its kind. This checks the reading against the layers
themselves: every layer's pairs, computed from its own index, equal those of its kind's first layer, on models whose
layers differ in kind (a dense first layer before MoE layers, Gated DeltaNet beside attention layers, Mamba / MoE /
attention layers of a hybrid), recomputed or not; and a whole async-TP step's exposed time equals the sum over its
layers taken one by one, in order."""

from __future__ import annotations

import pytest

from llmsizer.catalog.models import find
from llmsizer.estimate.model_parallel import micro_pipelined_layer
from llmsizer.formulas.tensors import layer_kind_firsts

MIXED = ("deepseek-v2-lite", "qwen3-next-80b-a3b-instruct", "jamba-1.5-mini", "nemotron-h-56b-base-8k")


@pytest.mark.parametrize("name", MIXED)
def test_every_layer_pairs_as_its_kind_first_layer(name: str) -> None:
    spec = find(name).spec()
    firsts = layer_kind_firsts(spec)
    assert len(set(firsts)) > 1, f"{name}: one layer kind, the check would be empty"
    micro_pipelined_layer.cache_clear()
    for i in range(spec.num_layers):
        for recomputed in (False, True):
            own = micro_pipelined_layer(spec, i, 2, 8192, 1e-4, 2e-4, 4e14, 3e12, 2.0, recomputed)
            kind = micro_pipelined_layer(spec, firsts[i], 2, 8192, 1e-4, 2e-4, 4e14, 3e12, 2.0, recomputed)
            assert own == kind, (name, i, recomputed)


def test_a_step_sums_its_layers_one_by_one() -> None:
    """The exposed async-TP time of a run with mixed layers, part of them recomputed (checkpoint_every 2), equals
    eq. (T5') with every layer's pairs taken from its own index, added in layer order (the sum before the pairs were
    taken once per kind), bit for bit."""
    from llmsizer.estimate import model_parallel as mp
    from llmsizer.estimate.caches import clear_caches
    from llmsizer.estimate.fit import fit_training

    spec = find("deepseek-v2-lite").spec()
    kw = dict(method="full", precision="bf16-mixed", tp=2, sequence_parallel=True, tp_comm_overlap=True,
              compile=True, grad_checkpointing="full", checkpoint_every=2, seq_len=4096)
    clear_caches()
    step = fit_training(spec, "h100-sxm", 2, tokens=1e9, **kw).duration
    assert step is not None
    seen: list[tuple[int, bool]] = []
    real = mp.micro_pipelined_layer

    def by_own_index(spec_: object, layer: int, *rest: object) -> tuple[float, float]:
        seen.append((layer, bool(rest[7])))  # (tp, tokens, c_ag, c_rs, rate, bandwidth, bytes, recomputed, ...)
        return real.__wrapped__(spec_, layer, *rest)  # type: ignore[attr-defined,no-any-return]

    clear_caches()
    mp.micro_pipelined_layer = by_own_index  # type: ignore[assignment]
    firsts_of = mp.layer_kind_firsts
    mp.layer_kind_firsts = lambda s: tuple(range(s.num_layers))  # type: ignore[assignment,misc]  # every layer its own
    try:
        again = fit_training(spec, "h100-sxm", 2, tokens=1e9, **kw).duration
    finally:
        mp.micro_pipelined_layer = real
        mp.layer_kind_firsts = firsts_of
        clear_caches()
    assert len(seen) == spec.num_layers and {r for _, r in seen} == {False, True}  # every layer, both flags
    assert again is not None and again.to_dict() == step.to_dict()
