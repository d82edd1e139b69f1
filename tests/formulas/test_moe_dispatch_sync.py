"""Eq. K10 (formulas/launch_overhead.py): a micro-step whose host blocks on the device once per Megatron MoE layer.

The independent truth is a discrete-event model of a CUDA stream fed by one host thread (PyTorch docs, "CUDA
semantics: Asynchronous execution": the host enqueues and continues; a synchronize blocks it until the device has
drained what was queued): each kernel costs the host tau to launch and enters the queue then; the device runs it once
it is both queued and the previous kernel is done; a sync makes the host wait for the device. The tests check eq.
K1 and eq. K10 against it on random kernel sequences, and the sync counts against Megatron-Core's dispatcher code."""

from __future__ import annotations

import random
from collections.abc import Sequence

import pytest

from llmsizer.errors import InputError
from llmsizer.formulas.launch_overhead import (
    MEGATRON_DISPATCH_SYNC,
    megatron_expert_gemm_kernels,
    moe_dispatch_syncs,
    moe_layer_kernels,
    overlapped_seconds,
    synced_micro_step_seconds,
)
from llmsizer.specs.training import MOE_DISPATCHERS

TAU = 20e-6


def queue(durations: Sequence[float], syncs: set[int], tau: float = TAU) -> float:
    """Wall time of a host launching ``durations`` in order into one device queue, blocking until the device is
    idle before each kernel index in ``syncs``."""
    host = device = 0.0
    for i, d in enumerate(durations):
        if i in syncs:
            host = max(host, device)
        host += tau
        device = max(device, host) + d
    return max(host, device)


def _layers(rng: random.Random, n: int) -> tuple[list[float], list[int]]:
    """A forward of ``n`` layers: per layer a few long kernels (GEMMs, 40-400 us) among many short ones (1-15 us),
    the sync placed a third into each layer (after the router and the dispatcher's preprocessing)."""
    d: list[float] = []
    starts: list[int] = []
    for _ in range(n):
        starts.append(len(d))
        for _ in range(30):
            d.append(rng.uniform(40e-6, 400e-6) if rng.random() < 0.2 else rng.uniform(1e-6, 15e-6))
    return d, [s + 10 for s in starts]


@pytest.mark.parametrize("seed", range(20))
def test_queue_model_lies_between_overlap_and_serialisation(seed: int) -> None:
    """The simulated stream: at least max(device, host) (eq. K1) and at most their sum, with or without syncs; with
    no sync its closed form, the latest kernel m whose launch the device waits for, then runs everything after it:
    max over m of (m tau + d_m + ... + d_n)."""
    rng = random.Random(seed)
    d, syncs = _layers(rng, 12)
    dev, host = sum(d), len(d) * TAU
    for s in (set(), set(syncs)):
        t = queue(d, s)
        assert overlapped_seconds(dev, host) - 1e-12 <= t <= dev + host + 1e-12
    suffix = [sum(d[m:]) for m in range(len(d))]
    assert queue(d, set()) == pytest.approx(max((m + 1) * TAU + suffix[m] for m in range(len(d))))


@pytest.mark.parametrize("seed", range(20))
def test_each_synced_segment_is_at_most_the_no_queue_model(seed: int) -> None:
    """From a sync to the next the queue starts empty: the segment takes at most one launch plus max(d_i, tau) per
    kernel (the no-queue model eq. K10 takes per kernel), and eq. K10 with every kernel its own class is that sum."""
    rng = random.Random(seed)
    d, syncs = _layers(rng, 8)
    bounds = [*syncs, len(d)]
    for a, b in zip(bounds, bounds[1:], strict=False):
        seg = d[a:b]
        no_queue = sum(max(x, TAU) for x in seg)
        assert queue(seg, {0}) <= TAU + no_queue + 1e-12
        span = [(x, 1.0) for x in seg]
        assert synced_micro_step_seconds(sum(seg), len(seg) * TAU, span, TAU) == pytest.approx(no_queue)


@pytest.mark.parametrize("seed", range(20))
def test_k10_two_classes_bounded(seed: int) -> None:
    """Eq. K10 with the kernels in two classes (long, short) taken as alike: at least eq. K1, at most the per-kernel
    no-queue sum (a sum of maxima of class means is below the sum of per-kernel maxima: convexity) and at most the
    fully serialised step."""
    rng = random.Random(seed)
    d, _ = _layers(rng, 10)
    dev, host = sum(d), len(d) * TAU
    long_ = [x for x in d if x >= 40e-6]
    short = [x for x in d if x < 40e-6]
    span = [(sum(long_), float(len(long_))), (sum(short), float(len(short)))]
    t = synced_micro_step_seconds(dev, host, span, TAU)
    assert max(dev, host) - 1e-12 <= t <= sum(max(x, TAU) for x in d) + 1e-12 <= dev + host + 1e-12


def test_syncs_expose_the_host_lead_the_queue_would_carry() -> None:
    """The mechanism: a forward whose short kernels outpace the host (host-bound) after a backward that is
    device-bound. Unsynced, the backward's queued work of the previous micro-step hides the forward's launches and two
    micro-steps take about eq. K1; with a sync in every forward layer the forward's short kernels are exposed, and
    eq. K10 (the forward as the synced span) lies between eq. K1 and the simulation's no-queue bound."""
    fwd_layer = [200e-6] + [5e-6] * 20  # one long GEMM, twenty short kernels: 300 us of device, 420 us of host
    bwd_layer = [600e-6] * 3 + [5e-6] * 10  # device-bound
    layers = 10
    step: list[float] = []
    sync_at: set[int] = set()
    for _ in range(2):  # two micro-steps: the second's forward follows the first's backward
        for _ in range(layers):
            sync_at.add(len(step) + 1)  # after the long kernel: the dispatcher's copy of the splits
            step += fwd_layer
        step += bwd_layer * layers
    dev, host = sum(step), len(step) * TAU
    unsynced, synced = queue(step, set()), queue(step, sync_at)
    assert unsynced == pytest.approx(max(dev, host), rel=0.05)
    assert synced > unsynced * 1.05
    fwd = fwd_layer * layers
    span = [(200e-6 * layers, float(layers)), (5e-6 * 20 * layers, 20.0 * layers)]
    k10 = 2 * synced_micro_step_seconds(dev / 2, host / 2, span, TAU)
    assert max(dev, host) < k10 <= 2 * (sum(bwd_layer) * layers + sum(max(x, TAU) for x in fwd)) + 1e-12


def test_every_megatron_dispatcher_syncs_once_per_moe_layer_forward() -> None:
    """Megatron-Core @d7288711 (the commit Megatron-Bridge v0.4.1 pins), read: alltoall waits on its device-to-host
    copy's event before the EP all-to-all (token_dispatcher.py:566, 904), allgather reads the token counts back with a
    blocking ``.cpu()`` (token_dispatcher.py:295), flex's HybridEP backend runs blocking without
    ``num_permuted_tokens`` (fused_a2a.py:367), which only a padded-to-capacity input gives (token_dispatcher.py:1012-
    1022); the backward reuses the forward's splits / handle (mappings.py:453-461; fused_a2a.py:397-407, 428-441), and
    the 'moe' recompute re-runs route, preprocess and dispatch in the backward (moe_layer.py:599-616)."""
    assert set(MEGATRON_DISPATCH_SYNC) == set(MOE_DISPATCHERS) == {"alltoall", "allgather", "flex"}
    for kind in MOE_DISPATCHERS:
        assert moe_dispatch_syncs(48, kind) == 48
        assert moe_dispatch_syncs(23, kind, moe_recomputed=True) == 46
        assert moe_dispatch_syncs(0, kind) == 0
    with pytest.raises(InputError, match="dispatcher"):
        moe_dispatch_syncs(4, "deepep")
    with pytest.raises(InputError):
        moe_dispatch_syncs(-1, "flex")


def test_expert_gemms_are_eq_k9s() -> None:
    """TE's GroupedLinear: one GEMM per local expert for fc1 and fc2, dgrad and wgrad backward: the expert GEMMs of
    eq. K9's megatron-te count, which the synced span's GEMM class takes."""
    assert megatron_expert_gemm_kernels(128, 16) == (16, 32)
    f, b = moe_layer_kernels("megatron-te", 128, 8, 4096, ep=16)
    assert (f - 16, b - 32) == (33, 16)
    with pytest.raises(InputError):
        megatron_expert_gemm_kernels(128, 3)


def test_span_larger_than_the_step_is_refused() -> None:
    with pytest.raises(InputError, match="synced span"):
        synced_micro_step_seconds(0.1, 0.1, [(0.2, 10.0)], TAU)
    with pytest.raises(InputError, match="synced span"):
        synced_micro_step_seconds(0.1, 0.001, [(0.05, 100.0)], TAU)
