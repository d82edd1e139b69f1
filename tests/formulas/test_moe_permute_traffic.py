"""Megatron-Core's MoE token permutation traffic (formulas/elementwise_traffic.py eqs. E17/E18, #12).

Independent truth: the kernels TransformerEngine @d0067d0d runs for Megatron-Core @d7288711's fused permutation
(``moe_permute_fusion``), each with the tensors it loads and stores per token, read from the Triton source
(transformer_engine/common/triton/permutation.py; the launchers in pytorch/triton/permutation.py):

- ``make_row_id_map`` (pytorch/triton/permutation.py lines 24-118): the row-id map is int32 [T, 2E + 1] (line 52).
  Pass 1 (common lines 93-124) loads the bool routing map column and stores the block cumsum; pass 2 (128-163) loads
  and stores it again; pass 3 (166-203) loads the E words of a token and stores the k sorted rows, the k expert
  indices and the count (masked ``off < n_routed``);
- ``_permute_kernel`` (206-303): one program per token and hidden block loads the token's row once (line 261), the
  count (266), k destination rows (272), with probabilities the k expert indices (276) and k probabilities (292),
  and stores the k copies (301/303) and k permuted probabilities (295);
- ``_unpermute_kernel`` (316-416): loads the count (371), k source rows (377), without merging probabilities no
  expert index unless it permutes the probabilities back (381, 401), the k rows (390), stores the sum (416); with
  ``PERMUTE_PROBS`` (the permute-with-probs backward) it first stores a zero row of the dense [T, E] gradient (367)
  and then the k gradients loaded from the permuted ones (411-412);
- ``make_chunk_sort_map`` (pytorch launcher lines 361-390) stores one int32 per permuted row; ``sort_chunks_by_map``
  (common 583-627) loads it (612/614), loads and stores the row (620-621) and the probability (625-627); the
  backward reuses the saved map (pytorch/permutation.py lines 1256-1274).

Megatron's 'alltoall' dispatcher: permute with the probabilities (token_dispatcher.py lines 636-648), the chunk sort
with them when more than one expert is local (737-743), the sort back (772-777) and the unpermute without merging
probabilities (838-845). The hidden-width tensors are also measured on real torch, Megatron's unfused ``permute`` /
``unpermute`` / ``sort_chunks_by_idxs`` (moe_utils.py lines 302-566) re-written with plain torch ops.
"""

from __future__ import annotations

from dataclasses import replace
from types import SimpleNamespace

import pytest

from llmsizer.catalog.models import find
from llmsizer.errors import InputError
from llmsizer.estimate.duration import megatron_moe_permute
from llmsizer.formulas.elementwise_traffic import (
    layer_bytes,
    model_layer_widths,
    moe_dispatch_bytes,
    step_bytes_per_token,
)

I32 = 4.0
Kernel = tuple[str, float, float]  # (name, bytes loaded, bytes stored per token)


def _inventory(h: int, k: int, e: int, c: float, p: float, sorts: bool) -> tuple[list[Kernel], list[Kernel]]:
    fwd: list[Kernel] = [
        ("row_id_map pass 1", e * 1.0, e * I32),
        ("row_id_map pass 2", e * I32, e * I32),
        ("row_id_map pass 3", e * I32, (2 * k + 1) * I32),
        ("permute with probs", c * h + (2 * k + 1) * I32 + k * p, k * c * h + k * p),
    ]
    bwd: list[Kernel] = []
    if sorts:
        fwd += [("chunk sort map", 0.0, k * I32), ("sort_chunks_by_map with probs", k * I32 + k * c * h + k * p,
                                                    k * c * h + k * p),
                ("chunk sort map (back)", 0.0, k * I32), ("sort_chunks_by_map (back)", k * I32 + k * c * h,
                                                          k * c * h)]
        bwd += [("sort back backward", k * I32 + k * c * h, k * c * h),
                ("sort backward with probs", k * I32 + k * c * h + k * p, k * c * h + k * p)]
    fwd.append(("unpermute, no merging probs", (k + 1) * I32 + k * c * h, c * h))
    bwd += [("unpermute backward = permute of the gradient", c * h + (k + 1) * I32, k * c * h),
            ("permute backward = unpermute with PERMUTE_PROBS", (2 * k + 1) * I32 + k * c * h + k * p,
             c * h + e * p + k * p)]
    return fwd, bwd


def _total(kernels: list[Kernel]) -> float:
    return sum(r + w for _, r, w in kernels)


# gpt-oss-120b (h 2880, top-4 of 128), Qwen3-30B-A3B (2048, top-8 of 128), Qwen3-235B (4096, 8 of 128), a tiny one
CASES = [(2880, 4, 128), (2048, 8, 128), (4096, 8, 128), (8, 2, 4)]


@pytest.mark.parametrize(("h", "k", "e"), CASES)
@pytest.mark.parametrize(("c", "p"), [(2.0, 2.0), (2.0, 4.0), (4.0, 4.0)])
@pytest.mark.parametrize("sorts", [False, True])
def test_equals_te_kernel_inventory(h: int, k: int, e: int, c: float, p: float, sorts: bool) -> None:
    fwd, bwd = _inventory(h, k, e, c, p, sorts)
    assert moe_dispatch_bytes(h, k, e, c, p, sorts) == pytest.approx((_total(fwd), _total(bwd)), rel=1e-12)


def test_hidden_width_rows_of_megatrons_permutation_on_torch() -> None:
    """Real torch (CPU, autograd, ``TorchDispatchMode``): Megatron's argsort ``permute``, ``sort_chunks_by_idxs``
    (two chunks swapped, and back) and ``unpermute`` (``scatter_add``), lines 396-428, 568-570 and 517-529,
    re-written with plain torch ops, forward and backward. Each data-moving op's [rows, h] source and output, per
    token (the rows a fused kernel loads once and stores), must be eqs. E17/E18's hidden-width coefficients: 2 (1 +
    k) rows each way, and 4k more each way for the two chunk sorts. (The unfused path's ``zeros`` / ``new_zeros``
    fills are what TE's kernels do not write.)"""
    torch = pytest.importorskip("torch")
    from torch.utils._python_dispatch import TorchDispatchMode

    t, h, e, k = 6, 16, 4, 2
    moves = ("index_select", "cat", "scatter_add", "gather", "index_add")

    class Rows(TorchDispatchMode):
        def __init__(self) -> None:
            super().__init__()
            self.rows: dict[str, float] = {}

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # type: ignore[no-untyped-def]
            out = func(*args, **(kwargs or {}))
            name = func.__name__.split(".")[0]
            if name in moves:
                src = args[3] if name in ("scatter_add", "index_add") else args[0]
                read = sum(x.shape[0] for x in src) if isinstance(src, (list, tuple)) else src.shape[0]
                kind = "sort" if name == "cat" else "perm"
                self.rows[kind] = self.rows.get(kind, 0.0) + (read + out.shape[0]) / t
            return out

    torch.manual_seed(0)
    x = torch.randn(t, h, requires_grad=True)
    top = torch.stack([torch.randperm(e)[:k] for _ in range(t)])
    routing_map = torch.zeros(t, e, dtype=torch.bool).scatter(1, top, True)
    flat = routing_map.T.contiguous().reshape(-1).argsort(descending=True, stable=True)[: t * k]
    sizes = [t * k // 2, t * k - t * k // 2]
    with Rows() as fwd:
        permuted = x.index_select(0, flat % t)
        chunks = torch.split(permuted, sizes, dim=0)
        expert_out = torch.cat([chunks[1], chunks[0]], dim=0) * 3.0  # the experts: not the dispatcher's
        chunks = torch.split(expert_out, [sizes[1], sizes[0]], dim=0)
        back = torch.cat([chunks[1], chunks[0]], dim=0)
        y = torch.zeros(t, h).scatter_add(0, (flat % t).unsqueeze(1).expand(-1, h), back)
    with Rows() as bwd:
        y.sum().backward()
    assert x.grad is not None
    for rec in (fwd, bwd):
        assert rec.rows == {"perm": 2 * (1 + k), "sort": 4 * k}
    # the same coefficients in the equations (c = p = 1, the index and probability words taken off)
    f0, b0 = moe_dispatch_bytes(h, k, e, 1.0, 1.0, False)
    f1, b1 = moe_dispatch_bytes(h, k, e, 1.0, 1.0, True)
    assert f0 - (2 * k + 17 * e + 20 * k + 12) == fwd.rows["perm"] * h
    assert b0 - (2 * k + e + 12 * k + 8) == bwd.rows["perm"] * h
    assert (f1 - f0 - 2 * k - 16 * k, b1 - b0 - 2 * k - 8 * k) == (fwd.rows["sort"] * h, bwd.rows["sort"] * h)


def test_moe_layers_add_the_permutation_in_a_megatron_step_only() -> None:
    spec = find("qwen3-30b-a3b").spec()
    assert spec.moe is not None
    w = model_layer_widths(spec, 0, 1)
    assert (w.topk, w.experts, w.permuted) == (spec.moe.experts_per_token, spec.moe.num_experts, False)
    steps = {mode: step_bytes_per_token(spec, 2.0, False, True, {}, 0, "megatron-ce", 1, megatron=True,
                                        moe_permute=mode) for mode in ("none", "permute", "permute+sort")}
    f0, b0 = moe_dispatch_bytes(spec.hidden_size, w.topk, w.experts, 2.0, 2.0, False)
    f1, b1 = moe_dispatch_bytes(spec.hidden_size, w.topk, w.experts, 2.0, 2.0, True)
    layers = sum(spec.moe_layers)
    assert steps["permute"] - steps["none"] == pytest.approx(layers * (f0 + b0))
    assert steps["permute+sort"] - steps["none"] == pytest.approx(layers * (f1 + b1))
    permuted = replace(w, permuted=True)
    per = sum(layer_bytes(permuted, 2.0, False, True, megatron=True))
    assert per - sum(layer_bytes(w, 2.0, False, True, megatron=True)) == pytest.approx(f0 + b0)
    # the eager (non-Megatron) count has no dispatcher
    assert layer_bytes(permuted, 2.0, False, True) == layer_bytes(w, 2.0, False, True)
    # under sequence parallelism the permutation runs on the rank's T/t tokens
    assert sum(layer_bytes(permuted, 2.0, False, True, seq_shards=4, megatron=True)) - sum(
        layer_bytes(w, 2.0, False, True, seq_shards=4, megatron=True)) == pytest.approx((f0 + b0) / 4)
    # recomputed MoE layers run the permutation's forward again
    again = step_bytes_per_token(spec, 2.0, False, True, {}, spec.num_layers, "megatron-ce", 1, megatron=True,
                                 moe_permute="permute")
    again0 = step_bytes_per_token(spec, 2.0, False, True, {}, spec.num_layers, "megatron-ce", 1, megatron=True)
    assert (again - again0) - (steps["permute"] - steps["none"]) == pytest.approx(layers * f0)


@pytest.mark.parametrize(("dispatcher", "ep", "want"), [
    (None, 1, "permute+sort"), ("alltoall", 8, "permute+sort"), ("alltoall", 128, "permute"),
    ("flex", 16, "none"), ("allgather", 8, "none")])
def test_which_megatron_runs_permute(dispatcher: str | None, ep: int, want: str) -> None:
    """token_dispatcher.py @d7288711: 'alltoall' sorts by local expert only with E / ep > 1 (lines 712, 758);
    HybridEP's flex path returns the dispatched tensor unpermuted by any kernel of its own (lines 1083-1087)."""
    spec = find("qwen3-30b-a3b").spec()
    w = SimpleNamespace(moe_dispatcher=dispatcher, ep=ep)
    assert megatron_moe_permute(spec, w) == want  # type: ignore[arg-type]
    assert megatron_moe_permute(find("llama-3.1-8b").spec(), w) == "none"  # type: ignore[arg-type]


def test_rejects_an_unknown_permute_mode() -> None:
    spec = find("qwen3-30b-a3b").spec()
    with pytest.raises(InputError, match="moe_permute"):
        step_bytes_per_token(spec, 2.0, False, True, {}, 0, "megatron-ce", 1, megatron=True, moe_permute="sort")
