"""formulas/model_parallel_time.py and formulas/eager_attention_traffic.py: the 1F1B step time against a simulation of
Megatron's own schedule order, the ring volumes written out, and the modules' worked examples."""

from __future__ import annotations

import doctest

import pytest

from llmsizer.errors import InputError
from llmsizer.formulas import eager_attention_traffic, model_parallel_time
from llmsizer.formulas.model_parallel_time import (
    bubble_fraction,
    data_parallel_bus_bandwidth,
    model_parallel_step,
    pipeline_p2p_bytes,
    tensor_parallel_bytes,
)
from llmsizer.formulas.training_time import data_parallel_comm


@pytest.mark.parametrize("module", [model_parallel_time, eager_attention_traffic])
def test_worked_examples(module: object) -> None:
    failed, tried = doctest.testmod(module)  # type: ignore[arg-type]
    assert tried > 0 and failed == 0


def _simulate_1f1b(p: int, m: int, t_f: float, t_b: float) -> float:
    """Makespan of Megatron's non-interleaved 1F1B schedule, simulated op by op: each rank runs
    min(p - rank - 1, m) warm-up forwards, then one forward and one backward in turn, then the remaining backwards
    (NVIDIA/Megatron-LM @6985e58 megatron/schedules.py forward_backward_pipelining_without_interleaving, lines
    369-470). A forward waits for the previous stage's forward of the same micro-batch, a backward for the next
    stage's backward of it; each rank runs its ops in that order, one at a time."""
    orders = []
    for r in range(p):
        warm = min(p - r - 1, m)
        ops = [("F", i) for i in range(warm)]
        f, b = warm, 0
        while f < m:
            ops += [("F", f), ("B", b)]
            f += 1
            b += 1
        ops += [("B", i) for i in range(b, m)]
        orders.append(ops)
    done: dict[tuple[str, int, int], float] = {}
    clock = [0.0] * p
    pos = [0] * p
    while any(pos[r] < len(orders[r]) for r in range(p)):
        progressed = False
        for r in range(p):
            if pos[r] >= len(orders[r]):
                continue
            kind, i = orders[r][pos[r]]
            dep = ("F", r - 1, i) if kind == "F" and r > 0 else ("B", r + 1, i) if kind == "B" and r < p - 1 \
                else ("F", r, i) if kind == "B" else None
            if dep is not None and dep not in done:
                continue
            start = max(clock[r], done[dep] if dep is not None else 0.0)
            clock[r] = start + (t_f if kind == "F" else t_b)
            done[(kind, r, i)] = clock[r]
            pos[r] += 1
            progressed = True
        assert progressed
    return max(clock)


@pytest.mark.parametrize("p, m", [(2, 4), (4, 8), (4, 4), (8, 32), (3, 7)])
def test_1f1b_step_equals_the_simulated_schedule(p: int, m: int) -> None:
    """Eq. (P4) with v = 1, (m + p - 1)(t_f + t_b), is the makespan of Megatron's 1F1B order (backward = 2 x
    forward, no communication)."""
    t_f, t_b = 1.0, 2.0
    step = model_parallel_step(t_f + t_b, m, p, 1, 0.0, 1.0, 0.0, 1.0, 0.0, 1.0)
    assert step.step_seconds == pytest.approx(_simulate_1f1b(p, m, t_f, t_b))
    assert step.bubble == pytest.approx((p - 1) / m)


def test_megatron_table1_bubbles() -> None:
    """Narayanan et al. 2021 section 2.2: (p - 1)/(v m). The 1T run of Table 1 (p 64, 3072 sequences over 6
    replicas at micro-batch 1: m = 512, plain 1F1B) idles 63/512 of its micro-batches' time; the 145.6B run (p 8,
    interleaved v = 2, m = 2304 / (2 x 24) = 48) 7/96."""
    assert bubble_fraction(64, 512) == pytest.approx(0.123046875)
    assert bubble_fraction(8, 48, 2) == pytest.approx(7 / 96)


def test_tensor_parallel_ring_volume() -> None:
    """Eq. (T1) against the ring all-reduce written out (2 (t-1)/t S per rank, NCCL-tests PERFORMANCE.md): 18.4B of
    Table 1 (40 layers, h 6144, micro-batch 8 x 2048, fp16, t = 8): forward 2 x 40, backward 2 x 40 + 2 x 40
    recomputed all-reduces of 8 x 2048 x 6144 x 2 B."""
    s = 8 * 2048 * 6144 * 2
    fwd, bwd = tensor_parallel_bytes(40, 40, 8 * 2048, 6144, 2, 8)
    assert fwd == pytest.approx(80 * 2 * 7 / 8 * s)
    assert bwd == pytest.approx(160 * 2 * 7 / 8 * s)
    assert tensor_parallel_bytes(40, 0, 8 * 2048, 6144, 2, 8)[1] == pytest.approx(fwd)


def test_pipeline_point_to_point_and_data_parallel_links() -> None:
    # scatter/gather: each of 8 tensor-parallel ranks sends 1/8 of 1 x 2048 x 25600 fp16, forward and backward
    assert pipeline_p2p_bytes(2048, 25600, 2, tp=8) == pytest.approx(2 * 2048 * 25600 * 2 / 8)
    # a replica of 8 devices per DGX A100 (8 x 200 Gb/s HDR), 4 machines: one rank of each data-parallel ring per
    # machine, 8 rings at once, each over its own 25 GB/s card
    assert data_parallel_bus_bandwidth(300e9, 200e9, 8, 4, 8, 32) == pytest.approx(25e9)
    # replicas of 2 devices (tp 2): 4 ranks of each of 2 rings per machine, the 2 rings share its 200 GB/s
    assert data_parallel_bus_bandwidth(300e9, 200e9, 8, 16, 2, 32) == pytest.approx(100e9)
    assert data_parallel_bus_bandwidth(300e9, None, 8, 4, 2, 8) == 300e9  # one machine: no network needed
    # tp 2, pp 4 on 4 x 8 (Megatron's order puts pp outermost): each stage's dp groups are ranks 8s..8s+7, one machine
    assert data_parallel_bus_bandwidth(300e9, 200e9, 8, 4, 2, 32) == 300e9
    with pytest.raises(InputError):
        data_parallel_bus_bandwidth(300e9, None, 8, 4, 8, 32)


def test_communication_adds_to_every_micro_batch_and_the_bubble() -> None:
    """Not overlapped (eq. (T3)) and blocking (eq. (P2)): the bubble stretches with the micro-batch's communication;
    the gradient all-reduce comes once per step."""
    s = model_parallel_step(1.0, 4, 2, 1, 50.0, 100.0, 10.0, 100.0, 300.0, 100.0)
    micro = 1.0 + 0.5 + 0.1
    assert s.step_seconds == pytest.approx((4 + 1) * micro + 3.0)
    assert s.comm_share == pytest.approx((4 * 0.6 + 3.0) / s.step_seconds)


def test_fsdp_beside_pipeline_is_once_per_step_and_without_it_every_micro_batch() -> None:
    """Eq. (P7): inside torch's pipeline stages the gathers and the reduce-scatter come once per step (their bytes and
    exposed time do not grow with the micro-batches; the reduce-scatter after the last backward is never hidden);
    without pipeline parallelism every micro-batch runs eq. (7c)'s collectives, a compute-bound one hiding all but
    the first unit's gather and the last unit's reduction (eq. (8'))."""
    c = data_parallel_comm(4, 4, 400.0, 800.0, "full", 8, 100.0, regathered_bytes=0.0)  # c_f 3 s, c_b 6 s
    piped = [model_parallel_step(10.0, m, 4, 1, 0.0, 1.0, 0.0, 1.0, 0.0, 1.0, fsdp=c) for m in (4, 8)]
    assert piped[0].dp_bytes == piped[1].dp_bytes == c.bytes
    assert piped[0].dp_exposed_seconds == piped[1].dp_exposed_seconds >= c.backward_seconds
    plain = [model_parallel_step(100.0, m, 1, 1, 0.0, 1.0, 0.0, 1.0, 0.0, 1.0, fsdp=c) for m in (1, 2)]
    assert plain[1].dp_bytes == 2 * plain[0].dp_bytes == 2 * c.bytes
    assert plain[0].dp_exposed_seconds == pytest.approx(c.first_seconds + c.last_seconds)
    assert plain[0].step_seconds == pytest.approx(100.0 + c.first_seconds + c.last_seconds)


def test_bad_inputs() -> None:
    with pytest.raises(InputError):
        bubble_fraction(4, 0)
    with pytest.raises(InputError):
        tensor_parallel_bytes(2, 3, 10, 10, 2, 2)
    with pytest.raises(InputError):
        model_parallel_step(1.0, 4, 2, 1, 1.0, 0.0, 0.0, 1.0, 0.0, 1.0)
