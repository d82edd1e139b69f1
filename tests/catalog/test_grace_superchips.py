"""The GH200 (96 GB HBM3 and 144 GB HBM3e) and GB300 rows against the figures their sources print, typed here from
the sources (not from the catalog), and the derivations from per-superchip / per-rack figures to one GPU.

GH200: NVIDIA's 'NVIDIA GH200 Grace Hopper Superchip' datasheet, 'Product Specifications' table
(https://nvdam.widen.net/s/rrgqqnpbz8/grace-datasheet-gh200-grace-hopper-superchip-3773000, read from the
transcription atineoSE/coding-model-seeks-gpu:pipeline/pipeline/sources/gh200_specs.md @ff05294, retrieved
2026-12-05). One GPU per superchip, so its per-superchip figures are per GPU; its GH200 NVL2 column (two superchips)
is twice the 144 GB option's.

GB300: NVIDIA's GB300 NVL72 rack figures as glennklockwood.com/garden/processors/B300 quotes them ('1.1 EF dense FP4',
'360 PF FP8 for training', '20 TB HBM at 576 TB/s', '18 NVLink Switches at 130 TB/s'), divided by the rack's 72 GPUs,
and verda.com/blog/gb300-nvl72-architecture's per-GPU table (GB300 column, without sparsity), both retrieved
2026-12-05; Google Cloud's A4X Max machine-type table (docs.cloud.google.com/compute/docs/gpus, 2026-04-14) for the
per-GPU capacity."""

from __future__ import annotations

import pytest

from llmsizer.catalog.hardware import builtin_catalog
from llmsizer.units import GiB, MiB

T = 1e12

# NVIDIA GH200 datasheet, typed from the table: (dense, sparse '*') per tensor type; FP32 has one figure
GH200_DENSE = {"tf32": 494, "bf16": 990, "fp16": 990, "fp8": 1979, "int8": 1979}  # '... teraFLOPS* | 494 teraFLOPS'
GH200_SPARSE = {"tf32": 989, "bf16": 1979, "fp16": 1979, "fp8": 3958, "int8": 3958}  # '989 teraFLOPS*', ...
GH200_FP32 = 67  # 'FP32 | 67 teraFLOPS'
GH200_HBM = {"gh200": (96, 4.0), "gh200-144gb": (144, 4.9)}  # '96GB HBM3 | 144GB HBM3e', 'Up to 4TB/s | Up to 4.9TB/s'
GH200_NVL2 = (288, 9.8)  # GH200 NVL2 column: 'Up to 288GB HBM3e', 'Up to 9.8TB/s'
GH200_C2C_BIDIRECTIONAL = 900e9  # 'NVIDIA NVLink-C2C CPU-to-GPU bandwidth | 900GB/s'
GH200_POWER_MAX = 1000  # 'Power (Memory + CPU + GPU) | Configurable 450 to 1000W'
# nvidia-smi memory.total (public captures, search-index ids in the rows): 'NVIDIA GH200 480GB, 97871 MiB',
# 'NVIDIA GH200 144G HBM3e, 580.173.02, 146831 MiB'
GH200_SMI_MIB = {"gh200": 97871, "gh200-144gb": 146831}


@pytest.mark.parametrize("ident", sorted(GH200_HBM))
def test_gh200_rows_are_the_datasheet_s_figures(ident: str) -> None:
    d = builtin_catalog().devices[ident]
    gb, tbs = GH200_HBM[ident]
    assert d.architecture == "hopper" and d.capability == 90
    assert d.memory is not None and d.memory.raw == gb and d.memory.base == gb * GiB  # vendor GB read as GiB
    assert d.memory_bytes == GH200_SMI_MIB[ident] * MiB <= gb * GiB  # the driver's figure, under the chips'
    assert d.bandwidth == pytest.approx(tbs * T)
    assert d.flops["fp32"].base == pytest.approx(GH200_FP32 * T)
    for key, dense in GH200_DENSE.items():
        assert d.flops[key].base == pytest.approx(dense * T), key
        assert d.flops_sparse[key].base == pytest.approx(GH200_SPARSE[key] * T), key
    assert d.tdp is not None and d.tdp.base == GH200_POWER_MAX


def test_the_gh200_nvl2_column_is_two_144gb_gpus() -> None:
    """The per-GPU reading: NVIDIA's NVL2 (two superchips) figures are twice the 144 GB row's, memory and bandwidth."""
    d = builtin_catalog().devices["gh200-144gb"]
    assert d.memory is not None and 2 * d.memory.raw == GH200_NVL2[0]
    assert 2 * d.bandwidth == pytest.approx(GH200_NVL2[1] * T)


@pytest.mark.parametrize("ident", sorted(GH200_HBM))
def test_a_gh200_gpu_owns_its_superchip_s_c2c_link(ident: str) -> None:
    """One GPU per Grace CPU: the GPU's host link is the datasheet's 900 GB/s bidirectional, 450 per direction, not
    the GB200's per-GPU share (225); about 7x the PCIe Gen5 x16 slot (64 GB/s per direction)."""
    from llmsizer.estimate.device import host_link

    cat = builtin_catalog()
    bandwidth, words = host_link(cat.devices[ident])
    assert bandwidth == pytest.approx(GH200_C2C_BIDIRECTIONAL / 2)
    assert "NVLink-C2C" in words
    assert bandwidth == pytest.approx(2 * host_link(cat.devices["gb200"])[0])
    assert bandwidth / cat.interconnects["pcie5"].bandwidth.base == pytest.approx(7.03, abs=0.01)


def test_gh200_sm_clock_from_the_datasheet_is_the_reported_one() -> None:
    """FP32 peak = 2 x FP32 lanes x clock: the datasheet's 67 TFLOPS over 16,896 lanes is 1.98 GHz, the clock an
    OpenCL run on a GH200 480GB reports ('132 at 1980 MHz (16896 cores, 66.908 TFLOPs/s)')."""
    for ident in GH200_HBM:
        d = builtin_catalog().devices[ident]
        assert d.sm_count is not None and d.fp32_cores is not None
        assert d.sm_count.raw == 132 and d.fp32_cores.raw == 132 * 128
        assert GH200_FP32 * T / (2 * d.fp32_cores.raw) == pytest.approx(1980e6, rel=0.002)


# GB300 NVL72 rack (NVIDIA, as glennklockwood.com quotes it) and 72 GPUs per rack
RACK_GPUS = 72
RACK_FP4_DENSE = 1.1e18  # '1.1 EF dense FP4 for inference'
RACK_FP8 = 360e15  # '360 PF FP8 for training'
RACK_HBM_BANDWIDTH = 576 * T  # '20 TB HBM at 576 TB/s'
RACK_NVLINK = 130 * T  # '18 NVLink Switches at 130 TB/s' (both directions)
# verda.com per-GPU table, GB300 column, 'Performance numbers without sparsity'
VERDA_GB300 = {"fp4": 15e15, "fp8": 5e15, "bf16": 2.5e15, "fp16": 2.5e15, "tf32": 1.25e15, "fp32": 0.080e15,
               "int8": 0.165e15}
VERDA_TDP = 1400  # 'Max Thermal Design Power (TDP) | 1.4 kW'
GB300_HBM_GB = 288  # glennklockwood.com: 'Each GPU will have ... 288 GB HBM3e'
GCP_A4X_MAX = (1116, 4)  # 'a4x-maxgpu-4g-metal | ... | 4 | 1,116' (GPU count, GPU memory GB HBM3e)
GCP_A4X, GCP_A4 = (744, 4), (1440, 8)  # the GB200 and B200 machines on the same page


def test_gb300_row_is_nvidia_s_rack_figures_per_gpu() -> None:
    d = builtin_catalog().devices["gb300"]
    assert d.architecture == "blackwell" and d.capability == 103
    assert d.flops["fp8"].base == pytest.approx(RACK_FP8 / RACK_GPUS)
    assert d.flops["fp4"].base == pytest.approx(RACK_FP4_DENSE / RACK_GPUS, rel=0.02)  # 15 of 15.3 ('1.1' rounded)
    assert d.bandwidth == pytest.approx(RACK_HBM_BANDWIDTH / RACK_GPUS)
    assert d.interconnect_bandwidth is not None
    # per direction; '130' is 72 x 1.8 TB/s = 129.6 rounded
    assert d.interconnect_bandwidth.base == pytest.approx(RACK_NVLINK / RACK_GPUS / 2, rel=0.005)


def test_gb300_row_is_the_per_gpu_table_s() -> None:
    d = builtin_catalog().devices["gb300"]
    for key, value in VERDA_GB300.items():
        assert d.flops[key].base == pytest.approx(value), key
    assert d.tdp is not None and d.tdp.base == VERDA_TDP
    assert d.flops["fp8"].base == pytest.approx(2 * d.flops["bf16"].base)  # dense FP8 = 2 x dense BF16 (Blackwell)


def test_gb300_memory_is_google_s_per_gpu_figure_below_the_hbm_it_carries() -> None:
    """288 GB of HBM3e per GPU (read as GiB), the budget Google's A4X Max table gives per GPU: 1,116 GB / 4. On the
    same page Google's GB200 and B200 figures sit within 1 GiB above the driver's (nvidia-smi 189471 and 183359
    MiB, typed here from those captures): the stated reading of Google's figure."""
    cat = builtin_catalog()
    d = cat.devices["gb300"]
    assert d.memory is not None and d.memory.raw == GB300_HBM_GB
    assert d.memory_bytes == GCP_A4X_MAX[0] / GCP_A4X_MAX[1] * GiB < GB300_HBM_GB * GiB
    for (total, count), driver_mib in ((GCP_A4X, 189471), (GCP_A4, 183359)):
        assert 0 <= total / count * GiB - driver_mib * MiB < 1 * GiB


def test_gb300_gpus_share_a_grace_link_like_gb200_s() -> None:
    """Two GPUs per Grace CPU (Google: 'two sockets with NVIDIA Grace CPUs ... connected to four NVIDIA B300 Blackwell
    GPUs'): the GB300 row's host link is the shared one, half the GH200's own."""
    from llmsizer.estimate.device import host_link

    cat = builtin_catalog()
    assert host_link(cat.devices["gb300"])[0] == host_link(cat.devices["gb200"])[0]
    assert host_link(cat.devices["gb300"])[0] == pytest.approx(host_link(cat.devices["gh200"])[0] / 2)


def test_llama_70b_fp8_fits_one_gh200(capsys: pytest.CaptureFixture[str]) -> None:
    """70.6 B parameters at 1 byte is 65.7 GiB: it fits one GH200's 95.58 GiB with room for a KV pool."""
    from llmsizer.cli.main import main

    assert main(["fit", "llama-3.1-70b", "--device", "gh200", "--weights", "fp8", "--context", "8192"]) == 0
    out = capsys.readouterr().out
    assert "on gh200: FITS" in out and "95.58 GiB device memory" in out
