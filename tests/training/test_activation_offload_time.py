"""Activation offloading's host-link time (formulas/activation_offload.py eq. (AO1)): torchtune's
``OffloadActivations(use_streams=True)`` copies every offloaded save out on a side stream in the forward and back in
the backward, so each phase takes the longer of its compute and its copies (hand numbers below)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from llmsizer.catalog.hardware import builtin_catalog
from llmsizer.estimate.duration import training_duration_for
from llmsizer.estimate.training.compose import estimate_items, training_workload
from llmsizer.formulas.activation_offload import offload_step_seconds
from llmsizer.models import load_model

GIB = 2**30
RUN = dict(method="full", micro_batch=2, seq_len=4096)


def _host_link_bytes_per_s(device: str) -> float:
    """The host link the step is timed on, read from the catalog's files, not from llmsizer: the device's ``pcie``
    generation in accelerators.json and that generation's x16 row in interconnects.json (per direction)."""
    data = Path(__file__).parents[2] / "src/llmsizer/catalog/data/hardware"
    gen = next(r for r in json.loads((data / "accelerators.json").read_text())["devices"] if r["id"] == device)["pcie"]
    rows = json.loads((data / "interconnects.json").read_text())
    rows = rows["interconnects"] if isinstance(rows, dict) else rows
    row = next(r for r in rows if r["id"] == "pcie" + gen.removeprefix("gen"))
    assert row["bandwidth"]["unit"] == "GB/s"
    return float(row["bandwidth"]["value"]) * 1e9


def test_hand_numbers_transfer_bound() -> None:
    """74 GiB each way at 64 GB/s (PCIe Gen5 x16) is 1.2415 s per phase; against 1.16 s of compute (0.4 s forward,
    0.76 s backward) both phases wait for the link: 2 x 1.2415 = 2.4830 s."""
    x = 74 * GIB
    assert offload_step_seconds(0.4, 0.76, x, 64e9) == pytest.approx(2 * 79456894976 / 64e9, rel=1e-12)
    assert offload_step_seconds(0.4, 0.76, x, 64e9) == pytest.approx(2.4830, abs=1e-4)
    # a small volume (4.38 GiB, the full-checkpointing case: 0.0735 s per phase) hides under the compute
    assert offload_step_seconds(0.4, 0.76, 4.38 * GIB, 64e9) == pytest.approx(1.16, rel=1e-12)
    # compute-bound forward, transfer-bound backward
    assert offload_step_seconds(0.4, 0.76, 0.6 * 64e9, 64e9) == pytest.approx(0.6 + 0.76, rel=1e-12)


def test_train_with_offload_is_timed_on_the_host_link() -> None:
    """Llama 3.1 8B, batch 2 x 4096 on one H100 without checkpointing: ~74 GiB offloaded per micro-step takes
    ~1.24 s each way at 64 GB/s (the H100 SXM's host link, PCIe Gen5 x16), more than either phase's compute, so
    the micro-step is 2 X / B, over twice the compute alone (the flag off). With full checkpointing (~4.4 GiB)
    the copies hide and the time is unchanged."""
    spec, h100 = load_model("llama-3.1-8b"), builtin_catalog().devices["h100-sxm"]
    bw = _host_link_bytes_per_s("h100-sxm")
    assert bw == 64e9
    on = training_duration_for(spec, h100, 1, 1e9, dict(RUN, activation_offload=True))
    off = training_duration_for(spec, h100, 1, 1e9, dict(RUN))
    x = sum(i.bytes for i in estimate_items(spec, training_workload(dict(RUN, activation_offload=True, gpus=1)))
            if i.name == "host_offloaded_activations")
    assert 70 * GIB < x < 78 * GIB
    assert on.step is not None and off.step is not None
    assert x / bw > off.step.compute_seconds  # each phase is transfer-bound
    assert on.step.compute_seconds == pytest.approx(2 * x / bw, rel=1e-9)
    assert any("transfer-bound" in w for w in on.warnings)
    assert on.tokens_per_second < off.tokens_per_second / 2

    ckpt = dict(RUN, grad_checkpointing="full")
    on_c = training_duration_for(spec, h100, 1, 1e9, dict(ckpt, activation_offload=True))
    off_c = training_duration_for(spec, h100, 1, 1e9, ckpt)
    assert on_c.step is not None and off_c.step is not None
    assert on_c.step.compute_seconds == pytest.approx(off_c.step.compute_seconds, rel=1e-12)
