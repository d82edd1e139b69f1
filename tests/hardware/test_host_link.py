"""Each device's own host link (estimate/device.py ``host_link``), the one figure every host-transfer term reads.

Truth by hand from PCI-SIG's published per-lane rates (8 / 16 / 32 / 64 GT/s for Gen3 / 4 / 5 / 6; the "PCI Express
6.0 Specification" announcement's x16 bidirectional 32 / 64 / 128 / 256 GB/s): per direction, x16, one bit per
transfer per lane, 16 lanes / 8 bits = 2 GB/s per GT/s (the published rounding; after Gen3-5's 128b/130b encoding
15.75 / 31.5 / 63 GB/s, within 1.6 %). The catalog's ``pcie`` field of each accelerator names the generation."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from llmsizer.catalog.hardware import builtin_catalog
from llmsizer.estimate import duration as D
from llmsizer.estimate import efficiency as E
from llmsizer.estimate.device import host_link
from llmsizer.estimate.duration import training_duration_for
from llmsizer.models import load_model

GT_PER_S = {"gen3": 8, "gen4": 16, "gen5": 32, "gen6": 64}


def _by_hand(gen: str, lanes: int = 16) -> float:
    """Per-direction bytes/s of a PCIe link: GT/s x lanes / 8 bits (PCI-SIG's rounded figure)."""
    return GT_PER_S[gen] * 1e9 * lanes / 8


def _raw_row(ident: str) -> dict[str, Any]:
    path = Path(__file__).parents[2] / "src/llmsizer/catalog/data/hardware/accelerators.json"
    return next(r for r in json.loads(path.read_text())["devices"] if r["id"] == ident)


@pytest.mark.parametrize("ident, gen, lanes", [
    ("v100-sxm2-32gb", "gen3", 16),   # NVLink between GPUs: the host link is its PCIe Gen3 slot
    ("t4", "gen3", 16),
    ("a100-sxm-80gb", "gen4", 16),
    ("a100-pcie-80gb", "gen4", 16),
    ("rtx-4090", "gen4", 16),
    ("h100-sxm", "gen5", 16),
    ("h100-pcie", "gen5", 16),
    ("rtx-5090", "gen5", 16),
    ("rtx-5060", "gen5", 8),          # GB206: electrically x8 (its catalog interconnect_bandwidth)
    ("b200", "gen6", 16),             # Blackwell's own host interface: 'PCIe Gen6 (H2D)' (klockwood-b200)
    ("b300", "gen6", 16),
])
def test_the_link_is_the_devices_pcie_generation(ident: str, gen: str, lanes: int) -> None:
    dev = builtin_catalog().devices[ident]
    assert _raw_row(ident)["pcie"] == gen == dev.pcie  # the loader keeps the field
    bw, why = host_link(dev)
    assert bw == _by_hand(gen, lanes)
    if gen != "gen6":  # Gen3-5 encode 128b/130b: the exact line rate is 1.6 % under the published figure
        assert bw == pytest.approx(GT_PER_S[gen] * 1e9 * lanes * (128 / 130) / 8, rel=0.016)
    assert ident in why and f"{bw / 1e9:.4g} GB/s" in why


# NVLink-C2C between a Grace CPU and its GPUs: NVIDIA's 900 GB/s bidirectional (GH200 and GB200 superchips, "7x faster
# than PCIe Gen5"), so 450 GB/s per direction; one GH200 measured 346 GB/s host-to-device with nvbandwidth's copy
# engines (NVIDIA/nvbandwidth issue #23), under the line rate and 5.4x PCIe Gen5's 64. A GB200 superchip has one
# Grace CPU and two Blackwell GPUs on that one link (the cited "a 72-core Grace CPU with two high-end Blackwell GPUs
# using ... 900 GBps NVLink-C2C"): each GPU's share when both copy is half of it.
NVLINK_C2C_BIDIRECTIONAL = 900e9
GB200_GPUS_PER_GRACE = 2
GH200_MEASURED_H2D = 346e9


def test_a_grace_superchip_gpu_reads_host_memory_over_nvlink_c2c() -> None:
    """GB200: the GPU's host is its Grace CPU over NVLink-C2C, not the PCIe Gen5 x16 slot its ``pcie`` field names
    (that link goes to its NICs): the host link is one GPU's share of the superchip's C2C per direction (the two
    GPUs share the Grace CPU's one link, review11 #5: was the whole link's 450 GB/s per GPU), with its source and
    date; the superchip's whole link stays in the catalog (nvlink-c2c)."""
    cat = builtin_catalog()
    dev = cat.devices["gb200"]
    assert _raw_row("gb200")["host_interconnect"] == "nvlink-c2c-gb200-gpu" == dev.host_interconnect
    bw, why = host_link(dev)
    assert bw == NVLINK_C2C_BIDIRECTIONAL / 2 / GB200_GPUS_PER_GRACE
    whole = cat.interconnect("nvlink-c2c")
    assert whole is not None and float(whole.bandwidth.base) == NVLINK_C2C_BIDIRECTIONAL / 2
    assert float(whole.bandwidth.base) / _by_hand("gen5") == pytest.approx(7, rel=0.01)  # NVIDIA's "7x PCIe Gen5"
    assert bw > _by_hand("gen5")
    assert "NVLink-C2C" in why and "225 GB/s per direction" in why and "two Blackwell GPUs" in why and "2026-" in why
    # a PCIe-hosted Blackwell keeps its slot
    assert host_link(builtin_catalog().devices["b200"])[0] == _by_hand("gen6")


def test_cpu_offload_on_a_grace_superchip_is_timed_at_the_c2c_link() -> None:
    """The same FSDP CPU-offload run on a GB200 and on the GB200 stated without its C2C host link (its PCIe Gen5
    slot): the copies are timed at its share of the C2C, 225 GB/s, vs 64 GB/s, so less communication is exposed."""
    cat = builtin_catalog().devices
    run = dict(method="full", precision="bf16", micro_batch=2, seq_len=2048, grad_checkpointing="full",
               optimizer="adamw", fsdp="full", offload="params")
    spec = load_model("llama-3.1-70b")
    c2c = training_duration_for(spec, cat["gb200"], 8, 1e6, run)
    pcie = training_duration_for(spec, replace(cat["gb200"], host_interconnect=None), 8, 1e6, run)
    assert _link_notes(c2c) == [NVLINK_C2C_BIDIRECTIONAL / 2 / GB200_GPUS_PER_GRACE] and _link_notes(pcie) == [_by_hand("gen5")]
    assert c2c.step is not None and pcie.step is not None
    assert c2c.step.exposed_comm_seconds < pcie.step.exposed_comm_seconds


def test_an_unknown_host_interconnect_is_refused(tmp_path: Path) -> None:
    from llmsizer.catalog.hardware import load_catalog
    from llmsizer.errors import InputError
    f = tmp_path / "hw.json"
    f.write_text(json.dumps({"devices": [{"id": "x1", "name": "X1", "kind": "gpu", "host_interconnect": "c2c"}]}))
    with pytest.raises(InputError, match="host_interconnect 'c2c'"):
        load_catalog([f])


def test_a_device_without_the_field_falls_back() -> None:
    """No ``pcie`` and no PCIe interconnect (a user's hardware file, ``--device gpu``): the named fallback."""
    h100 = builtin_catalog().devices["h100-sxm"]
    bare = replace(h100, id="my-gpu", pcie=None)
    bw, why = host_link(bare)
    assert bw == E.HOST_LINK_BANDWIDTH == _by_hand("gen4") and "fallback" in why
    assert host_link(builtin_catalog().devices["dgx-spark"])[0] == E.HOST_LINK_BANDWIDTH  # the catalog's one without


def test_a_bad_pcie_field_is_refused(tmp_path: Path) -> None:
    from llmsizer.catalog.hardware import load_catalog
    from llmsizer.errors import InputError
    f = tmp_path / "hw.json"
    f.write_text(json.dumps({"devices": [{"id": "x1", "name": "X1", "kind": "gpu", "pcie": "4"}]}))
    with pytest.raises(InputError, match="pcie"):
        load_catalog([f])


def _link_notes(d: Any) -> list[float]:
    return [a.value for a in d.assumptions if a.name == "host_link_bandwidth"]


def test_the_three_host_terms_read_the_one_function(monkeypatch: pytest.MonkeyPatch) -> None:
    """Paged optimizer states, FSDP CPU-offload copies and activation offload all time their bytes at
    ``host_link``'s figure: with it replaced by an odd value, each term states and uses that value (a term with
    its own figure fails here)."""
    odd = 7.77e9
    monkeypatch.setattr(D, "host_link", lambda dev: (odd, "probe link"))
    cat = builtin_catalog().devices
    run = dict(method="full", precision="bf16", micro_batch=2, seq_len=2048, grad_checkpointing="full")
    paged = training_duration_for(load_model("llama-3.1-8b"), cat["rtx-4090"], 1, 1e6,
                                  dict(run, optimizer="paged-adamw-8bit"))
    moved = next(a.value for a in paged.assumptions if a.name == "paged_bytes_per_step")
    assert paged.step is not None and moved > 0 and _link_notes(paged) == [odd]
    assert paged.step.paging_seconds == pytest.approx(moved / odd, rel=1e-12)

    act = training_duration_for(load_model("llama-3.1-8b"), cat["h100-sxm"], 1, 1e6,
                                dict(run, grad_checkpointing="none", activation_offload=True))
    assert act.step is not None and _link_notes(act) == [odd]
    assert any(f"{odd / 1e9:.4g} GB/s" in w for w in act.warnings)  # transfer-bound at the probe's rate

    fsdp = dict(run, optimizer="adamw", fsdp="full", offload="params")
    off = training_duration_for(load_model("llama-3.1-70b"), cat["a100-sxm-80gb"], 8, 1e6, fsdp)
    assert _link_notes(off) == [odd]
    monkeypatch.setattr(D, "host_link", lambda dev: (odd / 100, "slow probe"))
    slow = training_duration_for(load_model("llama-3.1-70b"), cat["a100-sxm-80gb"], 8, 1e6, fsdp)
    assert slow.step is not None and off.step is not None
    assert slow.step.exposed_comm_seconds > off.step.exposed_comm_seconds  # the copies are timed on it


def test_each_device_states_its_own_link() -> None:
    """The same paged run on an RTX 4090 (its own PCIe Gen4 x16 link) and on the same card stated only as Gen5
    (no interconnect): the paging time halves with the link."""
    cat = builtin_catalog().devices
    spec = load_model("llama-3.1-8b")
    run = dict(method="full", precision="bf16", micro_batch=2, seq_len=2048, grad_checkpointing="full",
               optimizer="paged-adamw-8bit")
    a = training_duration_for(spec, replace(cat["rtx-4090"], pcie="gen4"), 1, 1e6, run)
    b = training_duration_for(spec, replace(cat["rtx-4090"], interconnect=None, interconnect_bandwidth=None,
                                            pcie="gen5"), 1, 1e6, run)
    assert a.step is not None and b.step is not None and a.step.paging_seconds > 0
    assert _link_notes(a) == [_by_hand("gen4")] and _link_notes(b) == [_by_hand("gen5")]
    assert b.step.paging_seconds == pytest.approx(a.step.paging_seconds / 2, rel=1e-12)


def test_a_split_prefill_copies_the_host_weights_over_the_host_link_not_nvlink() -> None:
    """llama.cpp -ngl 40 of Llama-3.1-70B on one H100 SXM: the host layers' weights reach the GPU over its PCIe Gen5
    x16 slot (64 GB/s per direction), not over the 450 GB/s NVLink between GPUs it was timed at before."""
    import llmsizer
    fit = llmsizer.fit("llama-3.1-70b-instruct", "h100-sxm", engine="llamacpp", weights="q4_k_m", context=4352,
                       output_tokens=256, n_gpu_layers=40, host_device="amd-epyc-9654")
    assert fit.speed is not None
    res = fit.speed.details["split_prefill"]
    assert res["link_bandwidth"] == _by_hand("gen5")
    why = [a.why for a in fit.speed.assumptions if a.name == "op_offload_min_batch"]
    assert len(why) == 1 and "PCIe Gen5 x16 at 64 GB/s" in why[0]
    # an NVIDIA GPU: llama.cpp's CUDA backend decides the offload (ggml-cuda.cu), not Metal's
    assert "llama.cpp's CUDA offload threshold" in why[0] and "ggml_backend_cuda_device_offload_op" in why[0]
