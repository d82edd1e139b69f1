"""Decode speed of a llama.cpp split (formulas/speed.py eq. 8): each device streams its bytes at its own bandwidth,
one after the other, plus the activations crossing PCIe."""

from __future__ import annotations

import pytest

import llmsizer
from llmsizer.catalog.hardware import load_catalog
from llmsizer.errors import InputError
from llmsizer.estimate import efficiency as E
from llmsizer.formulas.speed import split_decode_time


def test_eq8_sums_devices_and_transfers():
    # 10 GB at 1 TB/s x 0.9 + 2 GB at 50 GB/s x 0.5 + 8 KiB over 32 GB/s + 1 ms
    t = split_decode_time([(10e9, 1e12, 0.9), (2e9, 50e9, 0.5)], 8192, 32e9, 1e-3)
    assert t.seconds == pytest.approx(10e9 / 0.9e12 + 2e9 / 25e9 + 8192 / 32e9 + 1e-3)
    assert t.comm_seconds == pytest.approx(8192 / 32e9)
    with pytest.raises(InputError):
        split_decode_time([], -1, None)


def test_two_identical_gpus_decode_like_one_device_plus_the_hops():
    """A layer split streams the same bytes at the same bandwidth as one big device would: the split's decode equals
    the one-device decode up to the PCIe transfers (2 residuals + the logits)."""
    r = llmsizer.fit("llama-3.1-70b-instruct", "rtx-3090", 2, engine="llamacpp", weights="q4_k_m", context=4096,
                     headroom=0.0)
    sd = r.speed.details["split_decode"]
    one = llmsizer.fit("llama-3.1-70b-instruct", "rtx-3090", 1, engine="llamacpp", weights="q4_k_m", context=4096,
                       memory=200 * 2**30).speed.decode.seconds
    assert sd["transfer_bytes"] == 2 * 8192 * 4 + 128256 * 4  # host->GPU0, GPU0->GPU1, logits GPU1->host
    assert sd["seconds"] == pytest.approx(one, rel=0.01)


def test_host_layers_run_at_host_bandwidth():
    cat = load_catalog()
    gpu, host = cat.find("rtx-3090"), cat.find("desktop-ddr5-4800-2ch")
    r = llmsizer.fit("llama-3.1-70b-instruct", "rtx-3090", 1, engine="llamacpp", weights="q4_k_m", context=4096,
                     n_gpu_layers=40, host_device="desktop-ddr5-4800-2ch")
    sd = r.speed.details["split_decode"]
    rows = {d["device"]: d for d in sd["devices"]}
    assert rows["host"]["bandwidth"] == float(host.bandwidth) and rows["GPU0"]["bandwidth"] == float(gpu.bandwidth)
    assert rows["host"]["efficiency"] == E.DECODE_BANDWIDTH_CPU.expected
    total = sum(d["bytes"] / (d["bandwidth"] * d["efficiency"]) for d in sd["devices"])
    assert sd["memory_seconds"] == pytest.approx(total)
    assert r.speed.decode.seconds == pytest.approx(sd["seconds"]) and rows["host"]["seconds"] > 10 * rows["GPU0"]["seconds"]
    no_host = llmsizer.fit("llama-3.1-70b-instruct", "rtx-3090", 1, engine="llamacpp", weights="q4_k_m",
                           context=4096, n_gpu_layers=40)
    assert no_host.speed.decode is None and any("--host-device" in w for w in no_host.warnings)
