"""Data-parallel collectives across machines (formulas/network.py eq. (11), formulas/training_time.py eqs. (7c), (8'))
against independent truth: the ring schedules themselves, simulated step by step, and NCCL-tests' documented
bus-bandwidth formulas (NVIDIA/nccl-tests doc/PERFORMANCE.md: all-reduce t = S/B x 2(n-1)/n, reduce-scatter and
all-gather t = S/B x (n-1)/n for a per-rank bandwidth B).

The simulation builds NCCL's layout of a ring over N machines of g devices with one channel per NIC: channel k
enters every machine at device k and leaves it from device k-1 (mod g) through that device's NIC, so each channel
crosses the network once per machine on its own NIC. Every one of the n-1 steps of a ring all-gather (or
reduce-scatter) sends one chunk of S / (c n) bytes from each rank to its successor on every channel; the time is
the busiest link's bytes / its bandwidth (all links run at once).
"""

from __future__ import annotations

from collections import defaultdict

import pytest

from llmsizer.errors import InputError
from llmsizer.formulas.network import allreduce_bytes, ring_bus_bandwidth
from llmsizer.formulas.training_time import data_parallel_comm, micro_step_seconds


def simulated_ring_seconds(nodes: int, per_node: int, size: float, intra: float, nic: float,
                           passes: int = 1) -> float:
    """Seconds of ``passes`` ring passes (1: all-gather or reduce-scatter; 2: all-reduce) of ``size`` bytes over
    ``nodes`` x ``per_node`` ranks, one channel per device's NIC, by counting each link's bytes."""
    n = nodes * per_node
    channels = per_node
    chunk = size / (channels * n)
    load: dict[tuple[str, int, int], float] = defaultdict(float)
    for k in range(channels):
        order = [(m, (k + j) % per_node) for m in range(nodes) for j in range(per_node)]  # enter at k, leave at k-1
        for i, (m, dev) in enumerate(order):
            nm, _ = order[(i + 1) % n]
            link = ("nic", m, dev) if nm != m else ("nvlink", m, dev)
            load[link] += passes * (n - 1) * chunk
    return max(b / (nic if kind == "nic" else intra) for (kind, _, _), b in load.items())


@pytest.mark.parametrize("nodes,per_node,intra,nic", [
    (2, 8, 450e9, 50e9),    # DGX H100-like: 8 x 400 Gb/s per machine, network-bound (400 < 450 GB/s)
    (16, 8, 300e9, 25e9),   # A100 with 1600 Gb/s per machine (llm-foundry's RoCE tables)
    (4, 4, 300e9, 12.5e9),  # 4 devices and 4 x 100 Gb/s per machine
    (3, 8, 300e9, 25e9),
])
def test_network_bound_ring_matches_the_simulated_schedule(nodes: int, per_node: int, intra: float,
                                                          nic: float) -> None:
    n, size = nodes * per_node, 1.0e9
    node_bw = per_node * nic
    bus = ring_bus_bandwidth(intra, nodes, node_bw)
    assert bus == node_bw  # the network is the bottleneck in every case here
    # all-gather / reduce-scatter: nccl-tests t = S (n-1) / (n B)
    assert size * (n - 1) / n / bus == pytest.approx(simulated_ring_seconds(nodes, per_node, size, intra, nic))
    # all-reduce: t = S/B x 2(n-1)/n, two ring passes
    assert allreduce_bytes(size, n) / bus == pytest.approx(
        simulated_ring_seconds(nodes, per_node, size, intra, nic, passes=2))


@pytest.mark.parametrize("nodes,per_node", [(2, 8), (16, 8), (4, 4)])
def test_link_bound_ring_is_bounded_by_the_formula(nodes: int, per_node: int) -> None:
    """With a faster network than the link in the machine (here 8 x 100 GB/s against 150 GB/s) eq. (11) times the
    ring on the link alone: an upper bound, within 1/g of the schedule (the hop that leaves the machine uses a NIC,
    not the link, so each device's link carries (g-1)/g of the channels)."""
    intra, nic = 150e9, 100e9
    n, size = nodes * per_node, 1.0e9
    formula = size * (n - 1) / n / ring_bus_bandwidth(intra, nodes, per_node * nic)
    sim = simulated_ring_seconds(nodes, per_node, size, intra, nic)
    assert (per_node - 1) / per_node * formula == pytest.approx(sim)
    assert sim <= formula


def test_one_machine_is_its_link() -> None:
    assert ring_bus_bandwidth(300e9, 1, None) == 300e9
    with pytest.raises(InputError):
        ring_bus_bandwidth(300e9, 2, None)


def test_full_shard_volumes_are_the_fsdp_collectives() -> None:
    """FULL_SHARD per micro-step: all-gather W in the forward, all-gather W + reduce-scatter G in the backward
    (Zhao et al. 2023 section 3.2), each at nccl-tests' (n-1)/n; two machines of 8 at 8 x 50 GB/s."""
    W, G, n, units = 16e9, 32e9, 16, 32
    c = data_parallel_comm(n, 8, W, G, "full", units, 450e9, 400e9)
    sim_ag = simulated_ring_seconds(2, 8, W, 450e9, 50e9)
    sim_rs = simulated_ring_seconds(2, 8, G, 450e9, 50e9)
    assert c.forward_seconds == pytest.approx(sim_ag)
    assert c.backward_seconds == pytest.approx(sim_ag + sim_rs)
    assert c.first_seconds == pytest.approx(sim_ag / units)  # the first unit's all-gather
    assert c.last_seconds == pytest.approx(sim_rs / units)  # the last unit's reduce-scatter
    assert c.bytes == pytest.approx(15 / 16 * (2 * W + G))
    assert c.nodes == 2 and c.bus_bandwidth == 400e9


def test_hybrid_all_reduces_each_shard_over_its_own_nic() -> None:
    """HSDP: FULL_SHARD inside each machine on its link; the replicas' all-reduce of each device's shard G/g runs
    as g independent rings of one device per machine, each on its own NIC (per device: B_node / g), concurrently
    with the machine's own collectives (FSDP2's all_reduce_stream)."""
    W, G, nodes, g, units = 14e9, 28e9, 16, 8, 32
    intra, nic = 300e9, 25e9
    c = data_parallel_comm(nodes * g, g, W, G, "hybrid", units, intra, g * nic)
    inside_ag = simulated_ring_seconds(1, g, W, intra, nic)
    inside_rs = simulated_ring_seconds(1, g, G, intra, nic)
    across = simulated_ring_seconds(nodes, 1, G / g, intra, nic, passes=2)  # one device per machine, its NIC
    assert c.forward_seconds == pytest.approx(inside_ag)
    assert c.backward_seconds == pytest.approx(max(inside_ag + inside_rs, across))
    assert c.first_seconds == pytest.approx(inside_ag / units)
    assert c.last_seconds == pytest.approx(max(inside_rs, across) / units)


def test_replicated_and_grad_op() -> None:
    W, G, n = 10e9, 20e9, 8
    ddp = data_parallel_comm(n, 8, W, G, "ddp", 10, 100e9)
    assert ddp.forward_seconds == 0 and ddp.backward_seconds == pytest.approx(2 * 7 / 8 * G / 100e9)
    op = data_parallel_comm(n, 8, W, G, "grad_op", 10, 100e9)
    assert op.forward_seconds == pytest.approx(7 / 8 * W / 100e9)
    assert op.backward_seconds == pytest.approx(7 / 8 * G / 100e9)


def simulated_forward_seconds(units: int, compute: float, gather: float) -> float:
    """The forward as FSDP runs it, unit by unit, with equal units: the all-gathers back to back on their stream
    (implicit prefetch); unit i computes after its all-gather and after unit i-1's compute."""
    c_end = m_end = 0.0
    for _ in range(units):
        m_end += gather
        c_end = max(c_end, m_end) + compute
    return c_end


def simulated_backward_seconds(units: int, compute: float, gather: float, reduce: float) -> float:
    """The backward unit by unit: unit i's pre-backward prefetches unit i+1's all-gather (unit 0 is still gathered
    from the forward, as torchtitan leaves the last block unsharded), unit i's post-backward issues its
    reduce-scatter; the collectives share one network (serial), the phase ends with the last reduce-scatter."""
    c_end = m_end = 0.0
    gathered = [0.0] * (units + 1)
    for i in range(units):
        start = max(c_end, gathered[i])
        if i + 1 < units:
            m_end = max(m_end, start) + gather
            gathered[i + 1] = m_end
        c_end = start + compute
        m_end = max(m_end, c_end) + reduce
    return max(c_end, m_end)


@pytest.mark.parametrize("network", [400e9, 50e9, 12.5e9, 3e9])
def test_overlap_by_phase_matches_the_unit_by_unit_schedule(network: float) -> None:
    """Eq. (8') against the two-stream schedule simulated unit by unit (equal units), from compute-bound (400 GB/s
    per machine) to communication-bound (3 GB/s): within one unit's collective (1/U) of the schedule."""
    units, t, phi = 32, 3.0, 1 / 3
    W, G = 16e9, 32e9
    c = data_parallel_comm(16, 8, W, G, "full", units, 450e9, network)
    ag, rs = c.forward_seconds / units, c.last_seconds
    fwd = simulated_forward_seconds(units, phi * t / units, ag)
    bwd = simulated_backward_seconds(units, (1 - phi) * t / units, ag, rs)
    assert micro_step_seconds(t, phi, c) == pytest.approx(fwd + bwd, rel=1 / units)
    assert micro_step_seconds(t, phi, None) == t
