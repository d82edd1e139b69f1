"""A serving tensor-parallel group that spans machines (issue #12): its all-reduces are timed over the network.

Independent truths:
- NCCL's tuning model, NVIDIA/nccl @5067397c ``src/graph/tuning.cc``: baseLatencies (lines 149-155: Ring LL 6.6 us,
  Tree LL 6.8 us), hwLatencies (lines 156-177: NVLink LL 0.6 us for ring and tree, NET LL 2.7 us ring, 5.0 us tree),
  getNetOverhead (lines 228-233: 1 us on an Intel x86 host), and the latency sums of lines 384-418 (ring: base +
  (nsteps - nInterSteps) x max(intra, overhead) + nInterSteps x inter, nsteps = 2 (n - 1), nInterSteps = 2 (N - 1);
  tree all-reduce: base + 2 ((n/N - 1) intra + log2 N inter)), written out below by hand;
- the bus bandwidth of a ring over machines, min(in-machine, the machine's network) (nccl-tests PERFORMANCE.md: the
  hardware bottleneck; NVIDIA/nccl issue #1576: 192 GB/s all-reduce busBW across DGX-A100s of 8 x 200 Gb/s), with the
  in-machine figure NCCL's SM90 per-link NVLink bandwidth (topo.h SM90_NVLINK_BW 20.6 GB/s) x the H100's 18 links,
  and the machine's network the catalog's aws-p5.48xlarge (3200 Gb/s);
- vLLM 0.19.1 custom_all_reduce.py L90-94: the custom all-reduce is disabled when the group spans nodes.
"""

from __future__ import annotations

import math

import pytest

from llmsizer.catalog.hardware import builtin_catalog
from llmsizer.estimate import efficiency as E
from llmsizer.estimate import engines as ENG
from llmsizer.estimate.fit import fit
from llmsizer.formulas.network import (
    cross_machine_allreduce_latency,
    cross_machine_send_latency,
    nccl_allreduce_model_latency,
)

H100_NCCL_NVLINK = 18 * 20.6e9  # topo.h SM90_NVLINK_BW x the H100 SXM's 18 NVLink 4 links
# tuning.cc, by hand: 16 ranks on 2 machines (ring: 6.6 + 28 x max(0.6, 1.0) + 2 x 2.7 = 40.0; tree: 6.8 + 2 (7 x 0.6
# + 1 x 5.0) = 25.2) and 8 ranks on one (ring 6.6 + 14 x 0.6 = 15.0; tree 6.8 + 2 (7 x 0.6) = 15.2)
NCCL_16_ON_2 = min(6.6 + 28 * 1.0 + 2 * 2.7, 6.8 + 2 * (7 * 0.6 + 1 * 5.0)) * 1e-6
NCCL_8_ON_1 = min(6.6 + 14 * 0.6, 6.8 + 2 * (7 * 0.6)) * 1e-6


def p5_network() -> float:
    inst = builtin_catalog().instances["aws-p5.48xlarge"]
    assert inst.network is not None and inst.device_count == 8
    return float(inst.network.base)


def test_nccl_tuning_model_latencies() -> None:
    assert nccl_allreduce_model_latency(16, 2) == pytest.approx(NCCL_16_ON_2)
    assert nccl_allreduce_model_latency(8, 1) == pytest.approx(NCCL_8_ON_1)
    # one rank a machine: the ring's network hop takes the tree's 5.0 (line 387): ring 6.6 + 0 + 2 x 5.0, tree 6.8 + 2 x 5.0
    assert nccl_allreduce_model_latency(2, 2) == pytest.approx(16.6e-6)
    # four machines: the tree's 2 network levels (log2 4) against the ring's 6 network steps
    assert nccl_allreduce_model_latency(32, 4) == pytest.approx(
        min(6.6 + (62 - 6) * 1.0 + 6 * 2.7, 6.8 + 2 * (7 * 0.6 + 2 * 5.0)) * 1e-6)
    # the measured in-machine latency plus the network's share; one machine: the measurement itself
    assert cross_machine_allreduce_latency(20.71e-6, 16, 2) == pytest.approx(20.71e-6 + NCCL_16_ON_2 - NCCL_8_ON_1)
    assert cross_machine_allreduce_latency(20.71e-6, 8, 1) == 20.71e-6
    assert cross_machine_send_latency() == pytest.approx((6.6 + 2.7) * 1e-6)


def test_custom_all_reduce_is_off_across_machines() -> None:
    inside = ENG.tp_allreduce("vllm", 8, 16384, True)
    across = ENG.tp_allreduce("vllm", 8, 16384, True, machines=2)
    assert inside is not None and inside.kernel.startswith("custom")
    assert across is not None and across.kernel == "NCCL" and "spans 2 machines" in across.why


def _decode(tp: int, count: int, pp: int = 1):
    r = fit("llama-3.1-8b", "aws-p5.48xlarge", count, engine="vllm", weights="bf16", tensor_parallel=tp, concurrency=1,
            context=4096, **({"pipeline_parallel": pp} if pp > 1 else {}))
    assert r.speed is not None and r.speed.decode is not None
    return r


def test_tp16_over_two_p5s_times_its_all_reduces_over_the_network() -> None:
    r = _decode(16, 16)
    sp = r.speed
    assert sp is not None and sp.decode is not None
    # Llama-3.1-8B: 32 layers, hidden 4096, bf16: 2 x 32 + 1 all-reduces of 4096 x 2 B a decode step of one sequence
    msg = 4096 * 2
    bus = min(H100_NCCL_NVLINK, p5_network())
    alpha = E.NCCL_ALLREDUCE_LATENCY.expected + NCCL_16_ON_2 - NCCL_8_ON_1
    assert sp.decode.comm_seconds == pytest.approx(65 * (alpha + 2 * 15 / 16 * msg / bus))
    named = {a.name: a for a in sp.assumptions}
    assert "30.91 us" in str(named["tp_allreduce"].value) and "tuning.cc" in named["tp_allreduce"].why
    assert any("spans 2 machines" in w and "eqs. (11), (13')" in w for w in r.warnings)


def test_tp8_inside_one_machine_is_unchanged() -> None:
    """8 x H100 in one p5: vLLM's custom one-stage kernel (16 KB < 256 KB), each GPU reading the message from its 7
    peers (eq. 6') at NCCL's NVLink figure, at the custom kernel's measured latency; no network term."""
    r = _decode(8, 8)
    sp = r.speed
    assert sp is not None and sp.decode is not None
    msg = 4096 * 2
    assert sp.decode.comm_seconds == pytest.approx(65 * (E.CUSTOM_ALLREDUCE_LATENCY.expected + 7 * msg / H100_NCCL_NVLINK))
    assert not any("spans" in w for w in r.warnings)


def test_pipeline_hop_between_p5s_pays_the_network_share_and_latency() -> None:
    r = _decode(8, 16, pp=2)
    sp = r.speed
    assert sp is not None
    # one send of 2 b h a / tp at one device's share of the machine's network (3200 Gb/s / 8), plus eq. (14)
    hop = 2 * 1 * 4096 * 2 / 8 / (p5_network() / 8) + (6.6 + 2.7) * 1e-6
    assert math.isclose(sp.details["pipeline_hop_seconds"], hop, rel_tol=1e-9)


def test_a_thin_network_bounds_the_bus_bandwidth() -> None:
    """2 x Azure ND40rs_v2 (8 x V100 SXM2, one 100 Gb/s InfiniBand NIC a machine: the catalog's 12.5 GB/s): the ring
    across the machines runs at min(NCCL's V100 NVLink figure, 6 links x 20.0 GB/s (topo.h SM70_NVLINK_BW), the
    machine's network), the network's."""
    inst = builtin_catalog().instances["azure-standard_nd40rs_v2"]
    assert inst.network is not None and inst.device_count == 8
    r = fit("llama-3.1-8b", inst.id, 16, engine="vllm", weights="fp16", tensor_parallel=16, concurrency=1,
            context=4096)
    sp = r.speed
    assert sp is not None and sp.decode is not None
    bus = min(6 * 20.0e9, float(inst.network.base))
    assert bus == 12.5e9
    alpha = E.NCCL_ALLREDUCE_LATENCY.expected + NCCL_16_ON_2 - NCCL_8_ON_1
    assert sp.decode.comm_seconds == pytest.approx(65 * (alpha + 2 * 15 / 16 * 4096 * 2 / bus))
