"""torchtitan's H100 benchmarks ran on Grand Teton's H100 96GB HBM2e at 500 W, not the catalog's 700 W H100 SXM with
HBM3: the benchmark's Hardware section states "96GB HBM2e with 2.4 TB/sec peak memory bandwidth" (pytorch/torchtitan
benchmarks/llama3_h100_202412_torchtitan.md @31a17bfd lines 15-17), which the rows' hardware column records. Hopper's
u and rho8 are fitted on two of these rows (PM0501, PM0503), so every memory-bound kernel of those rows must be timed
at that bandwidth, or u absorbs the difference and every 700 W H100 SXM row reads slow (validation_cases.
torchtitan_h100)."""

from __future__ import annotations

import re

import pytest

from llmsizer.catalog.hardware import builtin_catalog
from llmsizer.catalog.models import find
from llmsizer.estimate.duration import training_duration_for
from llmsizer.validation_cases import (
    MEGATRON_BRIDGE_RUNS,
    TORCHTITAN_FSDP,
    TORCHTITAN_H100,
    TORCHTITAN_MODEL_PARALLEL,
    TORCHTITAN_RUNS,
    public_rows,
    row_device,
    torchtitan_h100,
)


def _grand_teton_speed_rows() -> dict[str, dict[str, str]]:
    return {rid: r for rid, r in public_rows().items()
            if "Grand Teton" in r["hardware"] and r["kind"] == "throughput"}


def test_the_rows_state_the_bandwidth_the_device_carries() -> None:
    rows = _grand_teton_speed_rows()
    assert {"PM0501", "PM0503", "PM1050", "PM1310"} <= rows.keys()
    for rid, r in rows.items():
        m = re.search(r"([\d.]+) TB/s memory bandwidth", r["hardware"])
        assert m, rid
        assert torchtitan_h100().memory_bandwidth.base == pytest.approx(float(m.group(1)) * 1e12), rid


def test_only_the_bandwidth_differs_from_the_sxm() -> None:
    sxm, gt = builtin_catalog().devices["h100-sxm"], torchtitan_h100()
    assert gt.memory_bandwidth.base < sxm.memory_bandwidth.base
    assert gt.flops == sxm.flops and gt.architecture == sxm.architecture and gt.memory == sxm.memory


def test_every_grand_teton_speed_row_runs_on_it() -> None:
    """Each such row is routed to the Grand Teton device: the torchtitan benchmark's FSDP rows (PM0501-PM0506, read in
    public_case), its FSDP + TP (+ PP) rows (TORCHTITAN_MODEL_PARALLEL) and the asyncTP rows (TORCHTITAN_RUNS); no
    other row (the 700 W Megatron-Bridge H100 rows) is."""
    rows = _grand_teton_speed_rows()
    runs = {rid for rid, run in TORCHTITAN_RUNS.items() if run[1] == TORCHTITAN_H100}
    assert runs == {rid for rid in rows if rid in TORCHTITAN_RUNS}
    assert set(TORCHTITAN_MODEL_PARALLEL) <= rows.keys()
    assert all(run[1] != TORCHTITAN_H100 for run in MEGATRON_BRIDGE_RUNS.values())
    assert row_device("h100-sxm") is builtin_catalog().devices["h100-sxm"]


def test_the_calibration_row_spends_more_of_its_step_in_memory_bound_kernels() -> None:
    """PM0501 at the same u: its eager memory-bound kernels take 3.35 / 2.4 as long at the stated bandwidth, and
    nothing else in the micro-step changes (the GEMMs are compute-bound at these shapes)."""
    r = public_rows()["PM0501"]
    n = int(r["num_gpus"])
    fields = dict(TORCHTITAN_FSDP, gpus=n)
    spec = find("llama-3.1-8b").spec()
    sxm = training_duration_for(spec, builtin_catalog().devices["h100-sxm"], n, 1e6, fields, utilization=0.5).step
    gt = training_duration_for(spec, torchtitan_h100(), n, 1e6, fields, utilization=0.5).step
    assert sxm is not None and gt is not None
    assert gt.elementwise_seconds == pytest.approx(sxm.elementwise_seconds * 3350 / 2400, rel=1e-9)
    assert gt.attention_seconds == pytest.approx(sxm.attention_seconds, rel=1e-9)
    assert gt.compute_seconds - gt.elementwise_seconds == pytest.approx(
        sxm.compute_seconds - sxm.elementwise_seconds, rel=1e-3)
