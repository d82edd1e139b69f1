"""The gradient reductions of a machine's ranks share its network (formulas/model_parallel_time.py eqs. (P5), (P5e)).

Independent truth:

- the parameters of the real Qwen3-30B-A3B model (transformers on the meta device, shapes only: ``oracle_utils.build``):
  the routed experts are the ``.mlp.experts.`` tensors, the 1-D tensors the norms;
- Megatron-Core's groups (NVIDIA/Megatron-LM @d98e8a64 megatron/core/parallel_state.py): one rank order,
  'tp-cp-ep-dp-pp' (:617), rank = tp_rank + tp x (cp_rank + cp x (dp_rank + dp x pp_rank)) (``RankGenerator``'s
  documented equation, :290-294); the expert grid the same with etp for tp, ep inside and cp = 1 (:887-895), whose
  'dp' groups are the expert data-parallel groups (:1457); the dense gradients reduce over 'dp-cp' (:963); the dense
  buckets then the expert ones, synchronous (distributed/distributed_data_parallel.py:664-678);
- a ring collective's per-rank volume crosses each machine boundary once per ring (NCCL rings, formulas/network.py
  eq. (1), (11)): a machine's NICs carry, per step, the per-rank volume of every ring that leaves it.

Each expected time is bytes per NIC per step / the machine's network, computed here from those counts and groups,
not read from llmsizer's output.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest

from llmsizer.catalog.hardware import builtin_catalog
from llmsizer.catalog.models import entries
from llmsizer.estimate.duration import training_duration_for
from llmsizer.models import load_model

NET = 25e9 / 8  # 25 Gb/s per machine [B/s]
MEGATRON = dict(method="full", micro_batch=1, seq_len=4096, grad_accumulation=8, grad_checkpointing="selective",
                precision="megatron-bf16", zero=1, gpus_per_node=8, network="25 Gb/s")
# the distributed optimizer: fp32 gradients reduce-scattered, bf16 parameters all-gathered (eq. (7f))
BYTES = 4 + 2


def _counts() -> tuple[float, float, float]:
    """(dense, experts, 1-D elements: the norms, whole on every TP rank) of the real Qwen3-30B-A3B."""
    from oracle_utils import build

    dense = experts = norms = 0.0
    for name, p in build(entries()["qwen3-30b-a3b"].config).named_parameters():
        if ".mlp.experts." in name:
            experts += p.numel()
        else:
            dense += p.numel()
            norms += p.numel() if p.dim() == 1 else 0
    return dense, experts, norms


def _groups(world: int, sizes: dict[str, int], order: str, within: str) -> list[list[int]]:
    """The rank groups of ``within`` (the axes varying inside a group) under Megatron's rank order: rank = sum of
    axis rank x the product of the sizes of the axes before it in ``order``."""
    axes = order.split("-")
    stride = {}
    s = 1
    for a in axes:
        stride[a] = s
        s *= sizes[a]
    assert s == world
    out: dict[tuple[int, ...], list[int]] = {}
    for r in range(world):
        coord = {a: r // stride[a] % sizes[a] for a in axes}
        out.setdefault(tuple(coord[a] for a in axes if a not in within.split("-")), []).append(r)
    return list(out.values())


def _rings_per_machine(groups: list[list[int]], g: int) -> int:
    """How many of ``groups`` leave machine 0 (each group with a rank there and a rank elsewhere)."""
    return sum(1 for grp in groups if any(r // g == 0 for r in grp) and len(Counter(r // g for r in grp)) > 1)


def _dp(gpus: int, **fields: Any) -> Any:
    spec, mi300x = load_model("qwen3-30b-a3b"), builtin_catalog().devices["mi300x"]
    return training_duration_for(spec, mi300x, gpus, 20e9, {**MEGATRON, **fields}).step


@pytest.mark.parametrize("ep", [8, 4, 16])
def test_ep_on_two_machines_expert_rings_share_the_nics(ep: int) -> None:
    """Probe21 D1: 16 x MI300X on 2 machines of 8, EP ep, TP = PP = 1. The dense ring spans all 16 ranks (one ring
    leaves each machine); the expert data-parallel groups are 16 / ep ranks ep apart, and 8 / (ranks of one group in
    a machine) of them leave each machine at once. Bytes per NIC per step / 3.125 GB/s."""
    dense, experts, _ = _counts()
    g, world = 8, 16
    edp = world // ep
    expert_groups = _groups(world, {"tp": 1, "cp": 1, "ep": ep, "dp": edp, "pp": 1}, "tp-cp-ep-dp-pp", "dp")
    dense_groups = _groups(world, {"tp": 1, "cp": 1, "ep": 1, "dp": world, "pp": 1}, "tp-cp-ep-dp-pp", "dp-cp")
    assert _rings_per_machine(dense_groups, g) == 1
    rings = _rings_per_machine(expert_groups, g)
    assert rings == {8: 8, 4: 4, 16: 0}[ep]
    per_rank_dense = BYTES * dense * (world - 1) / world
    per_rank_experts = BYTES * experts / ep * (edp - 1) / edp
    nic_bytes = per_rank_dense + rings * per_rank_experts  # through machine 0's network, per step
    step = _dp(world, ep=ep)
    assert step.comm_bytes * step.micro_steps == pytest.approx(per_rank_dense + per_rank_experts, rel=1e-9)
    assert step.comm_seconds * step.micro_steps == pytest.approx(nic_bytes / NET, rel=1e-6)


def test_ep8_two_machines_the_probes_case() -> None:
    """Probe21 D1 by the numbers: per rank 1.445 B dense and 1.812 B expert elements x 6 B; 8 expert rings leave a
    machine: 30.6 s per step at 25 Gb/s, where timing each ring with the whole machine's network gave 6.25 s."""
    step = _dp(16, ep=8)
    assert step.comm_seconds * step.micro_steps == pytest.approx(30.605, abs=0.01)


def test_tp2_ep4_on_four_machines() -> None:
    """32 ranks, TP 2 (sequence parallel), EP 4, the experts' etp = tp (Megatron-Core's default): the dense dp-cp
    groups are 16 ranks 2 apart, 4 in each machine, so 2 rings leave a machine; the expert data-parallel groups are 4
    ranks 2 x 4 = 8 apart, one per machine, so 8 rings leave it. Each rank's shares are its TP shard (the 1-D norms
    whole on every TP rank: in whole-model terms tp times; llmsizer splits the head_dim q/k norms, 1.6e-5 of the
    dense share); the dense bucket, then the expert one."""
    dense, experts, norms = _counts()
    g, world, tp, ep = 8, 32, 2, 4
    dp, edp = world // tp, world // (tp * ep)
    dense_groups = _groups(world, {"tp": tp, "cp": 1, "ep": 1, "dp": dp, "pp": 1}, "tp-cp-ep-dp-pp", "dp-cp")
    expert_groups = _groups(world, {"tp": tp, "cp": 1, "ep": ep, "dp": edp, "pp": 1}, "tp-cp-ep-dp-pp", "dp")
    d_rings, e_rings = _rings_per_machine(dense_groups, g), _rings_per_machine(expert_groups, g)
    assert (d_rings, e_rings) == (2, 8)
    per_rank_dense = BYTES * (dense + norms * (tp - 1)) / tp * (dp - 1) / dp
    per_rank_experts = BYTES * experts / (tp * ep) * (edp - 1) / edp
    mp = _dp(world, tp=tp, sequence_parallel=True, ep=ep).model_parallel
    assert mp.dp_bytes == pytest.approx(per_rank_dense + per_rank_experts, rel=1e-4)
    assert mp.dp_seconds == pytest.approx((d_rings * per_rank_dense + e_rings * per_rank_experts) / NET, rel=1e-4)


def test_pipeline_stages_keep_their_dp_groups_inside_a_machine() -> None:
    """The dense defect the same place had: TP 2, PP 4 on 4 x 8 puts each pipeline stage on its own machine
    (pp outermost in Megatron's order), so every dp-cp group stays inside one: the gradient reduction runs over the
    link inside the machine whatever the network (eq. (P5) once took t x p = 8 as its stride: 1 rank per machine, at
    the card's 1/8 of the network)."""
    world, tp, pp = 32, 2, 4
    groups = _groups(world, {"tp": tp, "cp": 1, "ep": 1, "dp": world // (tp * pp), "pp": pp}, "tp-cp-ep-dp-pp",
                     "dp-cp")
    assert _rings_per_machine(groups, 8) == 0
    spec, h100 = load_model("llama-3.1-8b"), builtin_catalog().devices["h100-sxm"]
    fields = dict(method="full", micro_batch=1, seq_len=4096, grad_accumulation=8, precision="megatron-bf16",
                  zero=1, gpus_per_node=8, tp=tp, pp=pp)
    slow = training_duration_for(spec, h100, world, 1e9, {**fields, "network": "25 Gb/s"}).step.model_parallel
    fast = training_duration_for(spec, h100, world, 1e9, {**fields, "network": "3200 Gb/s"}).step.model_parallel
    assert slow.dp_seconds == pytest.approx(fast.dp_seconds, rel=1e-12)
    assert slow.dp_bandwidth == slow.tp_bandwidth  # the link inside the machine, the TP collectives' too


def test_the_expert_ring_note_names_the_grid_of_the_framework_that_runs() -> None:
    """review27 D7: the note names Megatron-Core's expert grid for a Megatron run only; a DeepSpeed ZeRO-1 run of the
    same layout (framework none, bf16, ep 8) cites DeepSpeed-MoE's expert data-parallel groups (every ep-th rank of a
    stage, deepspeed/utils/groups.py:350-372 @edaa7221), the same geometry and so the same seconds."""
    spec, mi300x = load_model("qwen3-30b-a3b"), builtin_catalog().devices["mi300x"]
    whys = {}
    seconds = {}
    for precision in ("megatron-bf16", "bf16"):
        d = training_duration_for(spec, mi300x, 16, 20e9, {**MEGATRON, "precision": precision, "ep": 8})
        (a,) = [a for a in d.assumptions if a.name == "expert_dp_ring_bandwidth"]
        whys[precision], seconds[precision] = a.why, a.value
    assert "Megatron-Core's expert grid" in whys["megatron-bf16"]
    assert "Megatron" not in whys["bf16"] and "groups.py:350-372" in whys["bf16"]
    assert seconds["bf16"] == seconds["megatron-bf16"]
