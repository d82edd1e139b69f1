"""ScheduleInterleaved1F1B's order of computations on each rank and where each stage's FSDP2 gradients are reduced
(formulas/parallelism.py ``interleaved_1f1b_rank_ops``, ``interleaved_backward_states``) against torch's own
schedule code (torch 2.13 distributed/pipelining/schedules.py): ``ScheduleInterleaved1F1B.
_calculate_single_rank_operations`` (lines 2954-3004, with ``_get_warmup_ops`` and ``_get_1f1b_rank_ops``) run on
a stand-in for the schedule object (the four attributes it reads, set as its ``__init__`` sets them, lines
2933-2936), and ``_add_reduce_grad`` (lines 1252-1282), which places each stage's REDUCE_GRAD (FSDP2's
reduce-scatter, stage.py ``perform_reduce_grad``) in that order."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

torch = pytest.importorskip("torch")
from torch.distributed.pipelining import schedules as S  # noqa: E402

from llmsizer.formulas.parallelism import interleaved_1f1b_rank_ops, interleaved_backward_states  # noqa: E402

SHAPES = [(8, 2, 8), (8, 2, 16), (4, 2, 4), (4, 3, 8), (2, 2, 2), (4, 2, 6), (3, 4, 9), (8, 2, 12)]


def torch_rank_ops(rank: int, pp: int, v: int, m: int) -> list[object]:
    rounds = max(1, m // pp)
    fake = SimpleNamespace(n_local_stages=v, pp_group_size=pp, _n_microbatches=m, microbatches_per_round=m // rounds)
    return S.ScheduleInterleaved1F1B._calculate_single_rank_operations(fake, rank)  # type: ignore[arg-type]


@pytest.mark.parametrize(("pp", "v", "m"), SHAPES)
def test_rank_order_matches_torch(pp: int, v: int, m: int) -> None:
    if m % max(1, m // pp):
        pytest.skip("torch refuses micro-batches that are not a multiple of the rounds")
    for rank in range(pp):
        want = [("F" if a.computation_type == S.FORWARD else "B", a.stage_index // pp, a.microbatch_index)
                for a in torch_rank_ops(rank, pp, v, m) if a is not None]
        assert all(a.stage_index % pp == rank for a in torch_rank_ops(rank, pp, v, m) if a is not None)
        assert interleaved_1f1b_rank_ops(rank, pp, v, m) == want


@pytest.mark.parametrize(("pp", "v", "m"), SHAPES)
def test_accumulators_live_between_a_stage_first_and_reduce_grad(pp: int, v: int, m: int) -> None:
    """At each backward, a local stage other than the running one holds accumulated gradients exactly when torch
    has run one of its backwards and not yet its REDUCE_GRAD."""
    if m % max(1, m // pp):
        pytest.skip("torch refuses micro-batches that are not a multiple of the rounds")
    for rank in range(pp):
        actions = S._add_reduce_grad(torch_rank_ops(rank, pp, v, m), m)
        started: set[int] = set()
        reduced: set[int] = set()
        held = [0] * v
        want = []
        for a in actions:
            local = a.stage_index // pp
            if a.computation_type == S.FORWARD:
                held[local] += 1
            elif a.computation_type == S.REDUCE_GRAD:
                reduced.add(local)
            else:
                held[local] -= 1
                live = tuple(k != local and k in started and k not in reduced for k in range(v))
                want.append((local, local not in started, tuple(held), live))
                started.add(local)
        assert list(interleaved_backward_states(rank, pp, v, m)) == want
