"""torchtitan's op-level selective checkpointing under tensor + sequence parallelism on real ranks
(formulas/model_parallel_time.py eq. (T1''')): ``op_sac_tp_collectives_step.py`` runs one forward + backward of a
Llama-style block with PyTorch's tensor-parallel styles as torchtitan applies them, under a selective policy of
torchtitan's rule (every second matmul, the SDPA output and the reduce-scatters saved; all-gathers not), on two gloo
ranks, and records every all-gather and reduce-scatter with its payload. The backward gathers each column-parallel
block's input again: the bytes each rank sends in it are eq. (T1)'s backward plus two all-gathers, which
``tensor_parallel_bytes`` with one regathered layer gives; the forward's are eq. (T1)'s. Under full recomputation
(non-reentrant, early stop) the backward runs the forward's collectives again but the MLP output's reduce-scatter."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("torch")

from ranks import run_cases, run_ranks  # noqa: E402

from llmsizer.formulas.model_parallel_time import tensor_parallel_bytes  # noqa: E402

pytestmark = pytest.mark.slow

HERE = Path(__file__).resolve().parent
CASE = dict(hidden=64, inter=128, heads=4, batch=2, seq=16)
TP = 2


@pytest.fixture(scope="module", autouse=True)
def _both_modes() -> None:
    """Both modes in one launch (ranks.run_cases: one torch import per rank, no transformers, which the step does not
    use); each test's run_ranks reads its case back."""
    run_cases(HERE / "op_sac_tp_collectives_step.py", [dict(CASE, mode="op"), dict(CASE, mode="full")], TP)


def _sent(phase: dict[str, list[int]]) -> float:
    """Bytes one rank sends in a ring all-gather / reduce-scatter of each payload: (t - 1)/t of it."""
    return sum(payload * (TP - 1) / TP for _, payload in phase.values())


def test_op_sac_gathers_each_column_parallel_input_again_in_the_backward() -> None:
    out = run_ranks(HERE / "op_sac_tp_collectives_step.py", dict(CASE, mode="op"), TP)["collectives"]
    tokens = CASE["batch"] * CASE["seq"]
    fwd, bwd = tensor_parallel_bytes(1, 0, tokens, CASE["hidden"], 4.0, TP, regathered_layers=1)
    assert out["forward"]["all_gather_into_tensor"][0] == 2 and out["backward"]["all_gather_into_tensor"][0] == 4
    assert out["backward"]["reduce_scatter_tensor"][0] == 2  # the backward's own; the forward's were saved
    assert _sent(out["forward"]) == fwd
    assert _sent(out["backward"]) == bwd
    # without the regathered all-gathers eq. (T1) would have the backward send a third less
    assert tensor_parallel_bytes(1, 0, tokens, CASE["hidden"], 4.0, TP)[1] < _sent(out["backward"])


def test_full_recomputation_stops_before_the_mlp_output_reduce_scatter() -> None:
    """Full recomputation with torch's non-reentrant checkpoint (early stop): the recomputed forward gathers both
    block inputs again and reduce-scatters the attention output again (the MLP norm's input), but stops before the
    MLP output's reduce-scatter, which only the residual add reads: eq. (T1) with ``early_stop``; the reentrant count
    (2 c_s: every forward collective again) sends one reduce-scatter more than measured."""
    out = run_ranks(HERE / "op_sac_tp_collectives_step.py", dict(CASE, mode="full"), TP)["collectives"]
    tokens = CASE["batch"] * CASE["seq"]
    assert out["backward"]["all_gather_into_tensor"][0] == 4 and out["backward"]["reduce_scatter_tensor"][0] == 3
    fwd, bwd = tensor_parallel_bytes(1, 1, tokens, CASE["hidden"], 4.0, TP, early_stop=True, sequence_parallel=True)
    assert _sent(out["forward"]) == fwd and _sent(out["backward"]) == bwd
    assert tensor_parallel_bytes(1, 1, tokens, CASE["hidden"], 4.0, TP)[1] > _sent(out["backward"])
