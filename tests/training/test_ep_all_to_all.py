"""The expert-parallel token exchange (formulas/expert_parallel_time.py eqs. (E1)-(E4)).

Independent truth: ``ep_all_to_all_step.py`` runs one MoE layer's forward and backward on 4 CPU ranks over gloo with
torch's autograd all-to-all in Megatron's alltoall-dispatcher arithmetic (random top-2 routing over 8 experts) and
records the bytes each ``all_to_all_single`` call sends to the other ranks; eq. (E1) under uniform routing must
match their mean, and the calls must be eq. (E4)'s count: dispatch + combine in the forward, the transposed pair in
the backward, and the forward's pair again in a checkpointed layer (torch's non-reentrant checkpoint as well as the
reentrant one re-runs both: the combine's output feeds the probability-weighted sum, which the backward needs)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from llmsizer.catalog.hardware import builtin_catalog
from llmsizer.estimate.duration import training_duration_for
from llmsizer.formulas.expert_parallel_time import (
    all_to_all_bytes,
    all_to_all_seconds,
    expert_parallel_exchange,
    peers_in_machine,
)
from llmsizer.models import load_model

HERE = Path(__file__).resolve().parent
CASE = dict(tokens=2048, experts=8, topk=2, hidden=16)


def _measured(recompute: bool, reentrant: bool = False) -> list[list[int]]:
    pytest.importorskip("torch")
    from ranks import run_ranks

    sent: list[list[int]] = run_ranks(HERE / "ep_all_to_all_step.py",
                                      dict(CASE, recompute=recompute, reentrant=reentrant), 4)["sent"]
    return sent


@pytest.mark.parametrize("recompute", [False, True])
def test_measured_all_to_alls_match_eqs_e1_e4(recompute: bool) -> None:
    sent = _measured(recompute)
    x = expert_parallel_exchange(CASE["tokens"], CASE["topk"], CASE["hidden"], 4.0, 4, 1, 1, int(recompute), 4,
                                 1.0, 1.0)
    assert {len(s) for s in sent} == {x.collectives}  # 4 (6 recomputed) all-to-alls of float data per rank
    mean = sum(map(sum, sent)) / (len(sent) * x.collectives)
    # 2048 x 2 copies x 16 x 4 B x 3/4 = 196,608 B; random routing: ~0.5 % sampling noise on the mean of 4 ranks
    assert x.a2a_bytes == 196_608
    assert mean == pytest.approx(x.a2a_bytes, rel=0.02)


def test_etp_and_link_split_by_hand() -> None:
    assert all_to_all_bytes(4096, 8, 2048, 2, 16) == 4096 * 8 * 2048 * 2 * 15 / 16
    # EP 16 on machines of 8: 7 peers over the link, 8 over the device's network share
    assert peers_in_machine(16, 1, 8) == 8
    v = all_to_all_bytes(4096, 8, 2048, 2, 16)
    assert all_to_all_seconds(v, 16, 8, 370e9, 50e9) == pytest.approx(8 * v / 15 / 50e9)
    x = expert_parallel_exchange(100, 2, 8, 2, 4, 2, 3, 0, 8, 1e9, 1e9)  # ETP 2: + (2 - 1) x 100 x 2 x 8 x 2 B
    assert x.etp_bytes == 3200 and x.bytes == 12 * (x.a2a_bytes + 3200)


RUN: dict[str, Any] = dict(method="full", precision="megatron-bf16", zero=1, micro_batch=1, seq_len=4096,
                           grad_accumulation=8)


def _run(gpus: int, **fields: Any) -> Any:
    spec, h100 = load_model("qwen3-30b-a3b"), builtin_catalog().devices["h100-sxm"]
    return training_duration_for(spec, h100, gpus, 1e9, dict(RUN, network="400GB/s", **fields))


def test_ep1_adds_nothing_and_crossing_machines_costs_more() -> None:
    one = _run(8)
    assert "ep_all_to_all_bytes_per_micro_batch" not in {a.name for a in one.assumptions}
    inside = _run(16, ep=16, gpus_per_node=16)
    across = _run(16, ep=16, gpus_per_node=8)
    a = {x.name: x.value for x in across.assumptions}
    # 48 MoE layers x 4 all-to-alls of 4096 x 8 x 2048 x 2 B x 15/16
    assert a["ep_all_to_all_bytes_per_micro_batch"] == 192 * 4096 * 8 * 2048 * 2 * 15 // 16
    assert across.step is not None and inside.step is not None
    assert across.step.compute_seconds > inside.step.compute_seconds
    assert across.tokens_per_second < inside.tokens_per_second


def test_full_recompute_repeats_the_forward_pair() -> None:
    plain = {x.name: x.value for x in _run(8, ep=8).assumptions}
    again = {x.name: x.value for x in _run(8, ep=8, grad_checkpointing="full").assumptions}
    key = "ep_all_to_all_bytes_per_micro_batch"
    assert again[key] == plain[key] * 6 // 4
