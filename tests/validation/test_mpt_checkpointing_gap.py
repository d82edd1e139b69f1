"""Where the checkpointing gap of llm-foundry's A100 tables comes from (scripts/train/benchmarking/README.md @4952183,
validation/public_measurements.csv PM0877-PM1015; the open question of tests/training/test_attention_recompute_pass.py
test_the_checkpointing_gap_of_the_a100_tables_narrows). On one node the rows without activation checkpointing are
over-predicted 3.7 (A100 40GB) and 4.0 (A100 80GB) points more than the checkpointed ones (7.1 and 5.3 before review26
D3 timed the attention kernel at FlashAttention-2's rate by sequence, estimate/efficiency.py fa2_sequence_level: the
plain rows are the short ones, whose attention had run at the 16k rate). The two sets are not the
same runs with one switch flipped: the sweeps (sweep.sh @b2a43a147 and @300cc5c58) checkpoint the 7B-30B models and the
longest sequences, and run the 125M-3B models at 512-16k tokens without it, at the micro-batch that fits, so the
rows without checkpointing are the short sequences and, for 1B-13B, small micro-batches whose FSDP collectives are a
large share of the step (the all-gathers and reduce-scatter move the whole model per micro-step, whatever its tokens).

What the rows show, predicted against measured only (no constant is fitted here):

- at sequences of 8k tokens and more with collectives under 3 % of the compute, the gap is 2.4 (40GB, 4 checkpointed and 8 plain rows) and 2.3 (80GB)
  points: the rest of it is the row mix;
- the A100 40GB table's own excess is its collectives: for the same configuration without checkpointing on 8 GPUs
  in both tables (same model, sequence, sharding), the 40GB row is over-predicted against its 80GB twin by about the
  difference of their collectives' share of the compute (least squares slope 0.96 over 29 twins; the 3B twins, whose
  40GB micro-batches are half the 80GB ones, +4.1 .. +5.6 % at a 4.9 .. 6.5-point larger share), as if those
  collectives were not hidden behind the compute, which the model assumes (formulas/training_time.py eq. (8')). The
  125M/350M twins, whose collectives are under 2.7 % of either step and whose memory-bound kernels are the largest
  share of any row, agree within a few percent: the 40GB card's lower memory bandwidth (1555 against 2039 GB/s) is
  timed right.

Not taken into the time: which mechanism hides less of the collectives than eq. (8') says (NCCL's kernels take SMs
and memory bandwidth from the overlapped compute; Composer's FSDP default backward_prefetch BACKWARD_POST, composer
v0.16.4 trainer/dist_strategy.py line 135 and v0.13.4 line 190, "prefetches the next set of parameters *after* the
current set of parameters' gradient computation", torch 2.13 distributed/fsdp/api.py lines 84-86; the A100 40GB table
ran torch 1.13.1's FSDP) has no published rate for these GPUs and
collectives, and a share fitted to these rows would be a constant tuned to them."""

from __future__ import annotations

import statistics
from functools import lru_cache
from typing import NamedTuple

from llmsizer.readers.hf_config import spec_from_config
from llmsizer.validation_cases import (
    LLMFOUNDRY_LARGE_SCALE_TABLE,
    MPT_DEVICE,
    MPT_NODE_GPUS,
    Case,
    mpt_attn_impl,
    mpt_config,
    mpt_fields,
    mpt_row,
    public_rows,
    speed_case,
)


class Row(NamedTuple):
    gpu: str
    model: str
    seq_len: int
    checkpointing: bool
    error: float
    comm_share: float  # the collectives' time per micro-step over the compute per micro-step (both predicted)


@lru_cache(maxsize=1)
def _one_node_rows() -> dict[str, Row]:
    """The BF16 A100 and H100 rows of the tables run on one node (8 GPUs), calibration rows included."""
    from llmsizer.catalog.hardware import builtin_catalog
    from llmsizer.estimate.duration import training_duration_for

    out = {}
    for rid, r in public_rows().items():
        if not r["framework"].startswith("llm-foundry") or LLMFOUNDRY_LARGE_SCALE_TABLE in r["source_location"]:
            continue
        m = mpt_row(r["quote"])
        if m.gpus != MPT_NODE_GPUS or "fp8" in m.precision:
            continue
        c = speed_case(r)
        assert isinstance(c, Case) and c.error is not None, rid
        spec = spec_from_config(mpt_config(m.model, m.seq_len), name=f"MPT-{m.model}")
        d = training_duration_for(
            spec,
            builtin_catalog().devices[MPT_DEVICE[m.gpu]],
            m.gpus,
            1e6,
            mpt_fields(m, mpt_attn_impl(m, r["source_location"])),
        )
        assert d.step is not None
        out[rid] = Row(
            m.gpu, m.model, m.seq_len, m.checkpointing, c.error, d.step.comm_seconds / d.step.compute_seconds
        )
    return out


def _gap(rows: list[Row]) -> float:
    return statistics.median(r.error for r in rows if not r.checkpointing) - statistics.median(
        r.error for r in rows if r.checkpointing
    )


def test_the_a100_checkpointing_gap_is_mostly_the_row_mix() -> None:
    rows = list(_one_node_rows().values())
    for gpu, whole, matched in (("a100_40gb", 0.035, 0.03), ("a100_80gb", 0.035, 0.035)):
        table = [r for r in rows if r.gpu == gpu]
        alike = [r for r in table if r.seq_len >= 8192 and r.comm_share < 0.03]
        # at NCCL's NVLink bus bandwidth (formulas/network.py eq. (12)) one 40GB checkpointed row's collectives pass 3 %
        assert sum(r.checkpointing for r in alike) >= 4 and sum(not r.checkpointing for r in alike) >= 4, gpu
        assert _gap(table) > whole, (gpu, _gap(table))
        assert 0.0 < _gap(alike) < matched, (gpu, _gap(alike))


# 760M at 512/1024 tokens on A100 80GB (PM0920/PM0919) are the re-measurement the model cannot follow
# (tests/validation/test_mpt_rows.py test_760m_short_sequence_misses_are_the_re_measurement): not twins here.
RE_MEASURED = {("760m", 512), ("760m", 1024)}


def test_the_40gb_excess_over_its_80gb_twins_is_their_collective_share() -> None:
    rows = [r for r in _one_node_rows().values() if not r.checkpointing]
    by = {(r.gpu, r.model, r.seq_len): r for r in rows}
    twins = [
        (by[("a100_40gb", m, s)], by[("a100_80gb", m, s)])
        for (g, m, s) in by
        if g == "a100_40gb" and ("a100_80gb", m, s) in by and (m, s) not in RE_MEASURED
    ]
    assert len(twins) == 29
    extra = [a.comm_share - b.comm_share for a, b in twins]  # the 40GB row's larger share of collectives
    miss = [(1 + a.error) / (1 + b.error) - 1 for a, b in twins]  # predicted 40GB / 80GB over measured
    slope, intercept = statistics.linear_regression(extra, miss)
    assert 0.6 < slope < 1.4 and abs(intercept) < 0.01, (slope, intercept)
    assert statistics.correlation(extra, miss) > 0.4
    three_b = [d for (a, _), d in zip(twins, miss, strict=True) if a.model == "3b"]
    assert len(three_b) == 5 and min(three_b) > 0.03
    small = [d for (a, _), d in zip(twins, miss, strict=True) if a.model in ("125m", "350m")]
    assert len(small) == 14 and abs(statistics.median(small)) < 0.02


def test_the_collectives_share_raises_the_error_in_every_table() -> None:
    """The same sign in each one-node table, checkpointed or not (MPT-125M/350M left out: their collectives are under
    3 % of every step): the over-prediction grows with the share of the step the collectives take."""
    rows = [r for r in _one_node_rows().values() if r.model not in ("125m", "350m") and abs(r.error) < 0.3]
    for gpu in ("a100_40gb", "a100_80gb", "h100_80gb"):
        for ck in (False, True):
            sub = [r for r in rows if r.gpu == gpu and r.checkpointing == ck]
            assert len(sub) >= 15, (gpu, ck)
            assert statistics.correlation([r.comm_share for r in sub], [r.error for r in sub]) > 0.25, (gpu, ck)
