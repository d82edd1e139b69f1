"""Context parallelism's time (formulas/context_parallel.py eqs. (CP1)-(CP2)): each rank computes its 1/cp share of
the sequence and receives the other ranks' K/V in every layer's forward and backward (probe8 defect 6). Hand
numbers for Llama 3.1 8B (32 layers, 8 KV heads x 128 = 1024 wide K and V, bf16)."""

from __future__ import annotations

import pytest

from llmsizer.catalog.hardware import builtin_catalog
from llmsizer.estimate.duration import training_duration_for
from llmsizer.formulas.context_parallel import ring_exchange_bytes, ring_exposed_seconds
from llmsizer.models import load_model
from llmsizer.units import format_bytes

RUN = dict(seq_len=4096, micro_batch=2, grad_checkpointing="full", fsdp="full")


def test_exchange_bytes_by_hand() -> None:
    """t = 2 x 4096 / 8 = 1024 tokens per rank, 7 peers: 7 x 1024 x 2048 = 14,680,064 K/V elements per layer;
    forward 32 x 2 B of them, backward (32 + 32 recomputed) x 2 B + 32 x 4 B (fp32 dK/dV)."""
    kv = 7 * 1024 * 2048
    assert kv == 14_680_064
    f, b = ring_exchange_bytes(1024, 1024, 1024, 8, 2, 32, 32)
    assert f == 32 * kv * 2 == 939_524_096
    assert b == 64 * kv * 2 + 32 * kv * 4 == 3_758_096_384
    assert ring_exchange_bytes(1024, 1024, 1024, 1, 2, 32, 32) == (0, 0)
    assert ring_exposed_seconds(0.5, 0.2) == pytest.approx(0.3)
    assert ring_exposed_seconds(0.1, 0.2) == 0.0


def test_duration_counts_the_share_and_the_exchange() -> None:
    spec, h100 = load_model("llama-3.1-8b"), builtin_catalog().devices["h100-sxm"]
    none = training_duration_for(spec, h100, 8, 1e9, RUN)
    cp8 = training_duration_for(spec, h100, 8, 1e9, dict(RUN, context_parallel=8))
    assert none.step is not None and cp8.step is not None
    assert cp8.step.tokens_per_device_micro == 2 * 4096 / 8  # the rank's 1/cp share of each sequence
    a = {x.name: x.value for x in cp8.assumptions}
    assert a["ring_attention_exchange_bytes"] == 939_524_096 + 3_758_096_384
    # probe25 D3: the step itself carries the exchange (the plan's network section and both duration texts read it),
    # apart from the data-parallel collectives' comm_bytes, which do not move with the sequence split
    assert cp8.step.ring_bytes == 939_524_096 + 3_758_096_384 and none.step.ring_bytes == 0
    assert cp8.step.ring_exposed_seconds == a["ring_attention_exposed_seconds"]
    assert cp8.step.ring_seconds > 0 and cp8.step.comm_bytes == none.step.comm_bytes
    # 512-token GEMMs run less efficiently than 4096-token ones: the same tokens take longer than without CP
    assert cp8.tokens_per_second < none.tokens_per_second
    assert cp8.step.compute_seconds < none.step.compute_seconds / 4  # but each micro-step is 1/8 of the work


def test_ring_exchange_in_the_texts_and_the_plan_network() -> None:
    """The ring's bytes reach what users read (probe25 D3: a 16-way CP run at 128k printed only the data-parallel
    58 GB, as if CP sent nothing): `train --tokens`'s duration line and the plan's network section. 8192 tokens per
    rank, 15 peers, K and V 1024 wide each: 15 x 8192 x 2048 = 251,658,240 elements per layer; per layer bf16 forward +
    recomputed forward + backward (2 B each) and fp32 dK/dV (4 B): x (3 x 2 + 4) B, x 32 layers = 80,530,636,800 B."""
    from llmsizer.cli.train_cmd import render_duration
    spec, h100 = load_model("llama-3.1-8b"), builtin_catalog().devices["h100-sxm"]
    d = training_duration_for(spec, h100, 16, 1e9, dict(seq_len=131072, micro_batch=1, grad_checkpointing="full",
                                                       fsdp="full", context_parallel=16))
    assert d.step is not None and d.step.ring_bytes == 15 * 8192 * 2048 * (3 * 2 + 4) * 32 == 80_530_636_800
    # review36 N3: transfer bytes decimal, as the plan's network rows (B_disk) write them: 80,530,636,800 B is
    # 80.53 GB in both (it was 75.00 GiB in this line and 80.53 GB in the plan's cp_ring_bytes)
    assert "ring attention 80.53 GB K/V exchange per micro-step" in render_duration(d)
    assert format_bytes(d.step.ring_bytes, binary=False) == "80.53 GB"


def test_the_plans_ring_row_is_the_train_lines_number() -> None:
    """One micro-batch per step: the plan's cp_ring_bytes (per step) is the train line's per-micro-step bytes, and
    both surfaces print it the same way (render/markdown.py writes B_disk rows decimal)."""
    from llmsizer.cli.train_cmd import render_duration
    from llmsizer.plan import make_plan
    from llmsizer.render.markdown import format_value
    from llmsizer.request import parse_request

    text = """\
version: 1
jobs:
  - name: cp
    kind: training
    model: {name: llama-3.1-8b}
    method: full
    purpose: knowledge
    baseline_tried: true
    settings: {micro_batch: 1, seq_len: 131072, context_parallel: 16, grad_checkpointing: full, fsdp: full,
               train_tokens: 1B tokens}
    dataset: {tokens: 1B tokens}
    resources: {device: h100-sxm, count: 16, nodes: 2, network: ib-ndr}
"""
    (job,) = make_plan(parse_request(text, source="cp.yaml")).jobs
    net = job.section("network")
    row = net.value("cp_ring_bytes")
    spec, h100 = load_model("llama-3.1-8b"), builtin_catalog().devices["h100-sxm"]
    d = training_duration_for(spec, h100, 16, 1e9, dict(seq_len=131072, micro_batch=1, grad_checkpointing="full",
                                                       fsdp="full", context_parallel=16))
    assert d.step is not None and d.step.micro_steps == 1 and row == d.step.ring_bytes == 80_530_636_800
    shown = format_value(row, "B_disk")
    assert shown == "80.53 GB" and f"ring attention {shown} K/V exchange per micro-step" in render_duration(d)
