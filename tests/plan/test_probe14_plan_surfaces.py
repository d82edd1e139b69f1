"""probe14 D3, D4, D10: a training plan's per-rank checkpoint write, its "of which" rows and its hardware words.

D3: "written by each rank" divided one checkpoint by the data-parallel ranks only (gpus / (tp x pp)): 13.36 GB for
Qwen3-30B-A3B under Megatron (TP 2, EP 8, ZeRO-1, 64 x H100) where a distributed checkpoint (Megatron dist-ckpt,
torch DCP) writes each tensor once and spreads the replicas over all 64 ranks: one / 64 (6.68 GB), at least the
rank's own shard. DeepSpeed writes each data-parallel rank's ZeRO partition: its fp32 master + Adam states only.
D4: the plan listed "of which gradients 9.64 GiB" (full size, details.model_states) under a need whose memory table
holds 8.89 GiB of gradients at the peak: one label, two numbers.
D10: 64 x h100-sxm on 8 nodes read "(8 copies)": one training job spread over 8 machines holds no copy per machine.
The truths here are parameter counts (count_params, checked against transformers' modules in tests/catalog) times
bytes per parameter from the frameworks' state layouts, not llmsizer's own per-rank output."""

from __future__ import annotations

import math

import pytest

from llmsizer.formulas.params import count_params
from llmsizer.models import load_model
from llmsizer.plan import make_plan
from llmsizer.request import parse_request


def _plan(settings: str, count: int, nodes: int | None = None, model: str = "qwen3-30b-a3b"):
    nodes_line = f", nodes: {nodes}" if nodes else ""
    text = f"""
version: 1
jobs:
  - name: t
    kind: training
    model: {{name: {model}}}
    method: full
    purpose: pretraining
    settings: {{micro_batch: 1, seq_len: 4096, grad_checkpointing: full, attention: flash, {settings}}}
    dataset: {{tokens: 10B tokens}}
    resources: {{device: h100-sxm, count: {count}{nodes_line}}}
"""
    return make_plan(parse_request(text)).jobs[0]


MEGATRON = "precision: megatron-bf16, tp: 2, ep: 8, sequence_parallel: true, train_tokens: 10B tokens"


def _params(model: str) -> int:
    return count_params(load_model(model)).total


def test_megatron_dist_ckpt_each_rank_writes_one_sixty_fourth() -> None:
    jp = _plan(MEGATRON + ", zero: 1", 64, 8)
    p = _params("qwen3-30b-a3b")
    one = p * (2 + 4 + 8)  # Megatron bf16 model + fp32 main params + Adam's two fp32 moments (dist-ckpt's contents)
    assert jp.value("storage", "checkpoint_one") == one
    per_rank = jp.value("storage", "checkpoint_shard")
    assert per_rank == math.ceil(one / 64)  # 6.68 GB; the data-parallel ranks alone (32) gave twice that
    assert per_rank < one / 32


def test_megatron_without_distributed_optimizer_still_writes_per_rank() -> None:
    """zero 0 with tp 2: dist-ckpt still has every rank write its share; the plan printed no per-rank line."""
    jp = _plan(MEGATRON + ", zero: 0", 64, 8)
    assert jp.value("storage", "checkpoint_shard") == math.ceil(_params("qwen3-30b-a3b") * 14 / 64)


def test_deepspeed_zero1_rank_writes_its_partition() -> None:
    """DeepSpeed ZeRO-1, 8 ranks: each writes its optimizer partition file, fp32 master + Adam moments (12 B) / 8,
    and data-parallel rank 0 the bf16 model file too (recfix D9: deepspeed/runtime/engine.py @edaa7221
    ``_save_checkpoint`` lines 5239-5266 writes ``mp_rank_00_model_states.pt``, the module's state_dict, where
    ``save_non_zero_checkpoint``: dp rank 0, lines 1583-1589): the most loaded rank writes 2 B + 12 B / 8 per
    parameter. Before: 12 B / 8, the model file left out."""
    jp = _plan("precision: deepspeed-bf16, zero: 1, train_tokens: 1B tokens", 8, model="llama-3.1-8b")
    p = _params("llama-3.1-8b")
    assert jp.value("storage", "checkpoint_shard") == pytest.approx(p * (2 + 12 / 8), rel=1e-6)


def test_deepspeed_stage_the_memory_took_is_the_one_written() -> None:
    """recfix D9: with no zero given the memory takes the least-sharded stage that fits (here ZeRO-1 or 2 on 8 x
    H100 for an 8B full fine-tune, which ZeRO-0's 16 B / param does not fit); the per-rank line read the request's
    zero (none: stage 0) and printed nothing. Rank 0 writes its partition (12 B / 8) and the bf16 model file (2 B)."""
    jp = _plan("precision: deepspeed-bf16, train_tokens: 1B tokens", 8, model="llama-3.1-8b")
    stage = next(a.value for a in jp.estimate.assumptions if a.name == "zero")
    assert int(stage) in (1, 2)
    p = _params("llama-3.1-8b")
    assert jp.value("storage", "checkpoint_shard") == pytest.approx(p * (2 + 12 / 8), rel=1e-6)


def test_deepspeed_zero3_has_no_model_file_on_rank_0() -> None:
    """ZeRO-3: the weights are partitioned, each rank writes its own (bf16 weights + fp32 master + Adam's two fp32
    moments: 14 B / 8); no whole model file on rank 0 (unchanged by D9, a guard that the file is below stage 3 only)."""
    jp = _plan("precision: deepspeed-bf16, zero: 3, train_tokens: 1B tokens", 8, model="llama-3.1-8b")
    p = _params("llama-3.1-8b")
    assert jp.value("storage", "checkpoint_shard") == pytest.approx(p * 14 / 8, rel=1e-6)


def test_of_which_rows_are_the_memory_tables_items() -> None:
    jp = _plan(MEGATRON + ", zero: 1", 64, 8)
    items = {i.name: i.bytes for i in jp.estimate.items if i.location == "device"}
    mem = {f.key: f for f in jp.section("memory").figures}
    rows = {k[len("state_"):]: f for k, f in mem.items() if k.startswith("state_") and not k.endswith("_full")}
    assert set(rows) >= {"weights", "master_weights", "gradients", "optimizer_states"}
    for k, f in rows.items():
        assert f.value == items[k], k  # the table's cell, at the peak
        assert f.label.strip().startswith("of which") and "at the peak" in f.label
    assert sum(f.value for f in rows.values()) <= jp.value("memory", "need")
    # Megatron's grad buffer holds every fp32 main grad at every moment (megrad: param_and_grad_buffer.py allocates
    # it at wrap time): the gradients at the peak are the full size, so the plan gives them no second row
    assert rows["gradients"].value == jp.estimate.details["model_states"]["gradients"]
    assert "state_gradients_full" not in mem
    labels = [f.label for f in mem.values()]
    assert len(labels) == len(set(labels))


def test_full_size_gradients_row_where_fewer_are_live_at_the_peak() -> None:
    """The full-size gradients differ from those live at the peak (torch's .grads built during the backward, grad
    accumulation 1): their own label, not an "of which" row."""
    jp = _plan("precision: bf16-mixed, zero: 1, train_tokens: 10B tokens", 8)
    items = {i.name: i.bytes for i in jp.estimate.items if i.location == "device"}
    mem = {f.key: f for f in jp.section("memory").figures}
    full = mem["state_gradients_full"]
    assert full.value == jp.estimate.details["model_states"]["gradients"] != items["gradients"]
    assert "of which" not in full.label and "full size" in full.label
    labels = [f.label for f in mem.values()]
    assert len(labels) == len(set(labels))


def test_training_machines_are_not_copies() -> None:
    jp = _plan(MEGATRON + ", zero: 1", 64, 8)
    assert jp.hardware.label == "64 x h100-sxm (8 machines)"
    assert "copies" not in jp.summary
