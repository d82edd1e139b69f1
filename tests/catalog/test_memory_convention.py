"""One device-memory convention (issue #11 item 5): a device's memory is the capacity its driver reports where a
sourced report exists, else the vendor's figure read with JEDEC's binary prefix (JESD100B.01 / JESD21-C: "24 GB"
of memory = 24 GiB). The expected numbers below are copied from the real driver outputs, not from the catalog."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from llmsizer.catalog.hardware import MEMORY_CONVENTION, builtin_catalog, load_catalog
from llmsizer.cli import main

MiB, GiB = 2**20, 2**30

# memory.total as the driver prints it, MiB (B for rocm-smi), with where it was read. Independent truth: these are
# the numbers in the pasted outputs, not values computed by llmsizer.
DRIVER_MIB: dict[str, float] = {
    "h100-sxm": 81559,  # nvidia-smi -q 'FB Memory Usage Total: 81559 MiB', H100 80GB HBM3, driver 590.48.01
    "h100-pcie": 81559,  # nvidia-smi 'NVIDIA H100 PCIe ... 81559MiB'
    "h100-nvl": 95830,  # nvidia-smi 'NVIDIA H100 NVL ... 95830MiB'
    "h200": 143771,  # nvidia-smi 8x 'NVIDIA H200 ... 143771MiB', driver 570.158.01
    "b200": 183359,  # AWS p6-b200 GpuInfo SizeInMiB; nvidia-smi 'NVIDIA B200 ... 183359MiB'
    "a100-sxm-80gb": 81920,  # AWS p4de GpuInfo SizeInMiB
    "a100-sxm-40gb": 40960,  # AWS p4d GpuInfo SizeInMiB; nvidia-smi 'NVIDIA A100-SXM4-40GB ... 40960MiB'
    "a100-pcie-80gb": 81920,  # nvidia-smi 'NVIDIA A100 80GB PCIe ... 81920MiB'
    "a100-pcie-40gb": 40960,  # nvidia-smi 'NVIDIA A100-PCIE-40GB ... 40960MiB'
    "l40s": 46068,  # nvidia-smi -q 'Total: 46068 MiB', NVIDIA L40S, driver 595.80
    "l40": 46068,  # nvidia-smi 'NVIDIA L40 ... 46068MiB'
    "l4": 23034,  # nvidia-smi 'NVIDIA L4 ... 23034MiB'
    "a10": 23028,  # nvidia-smi 'NVIDIA A10 ... 23028MiB'
    "a10g": 23028,  # nvidia-smi 'NVIDIA A10G ... 23028MiB' on AWS g5
    "t4": 15360,  # nvidia-smi 'Tesla T4 ... 15360MiB'
    "v100-sxm2-16gb": 16384,  # AWS p3 GpuInfo SizeInMiB; nvidia-smi agrees
    "v100-sxm2-32gb": 32768,  # AWS p3dn GpuInfo SizeInMiB; nvidia-smi agrees
    "v100-pcie-16gb": 16384,  # nvidia-smi 'Tesla V100-PCIE-16GB ... 16384MiB'
    "rtx-5090": 32607,  # nvidia-smi 'NVIDIA GeForce RTX 5090 ... 32607MiB', driver 610.57.04
    "rtx-4090": 24564,  # nvidia-smi 'NVIDIA GeForce RTX 4090 ... 24564MiB', driver 550.163.01
    "rtx-3090": 24576,  # nvidia-smi 'NVIDIA GeForce RTX 3090 ... 24576MiB', driver 595.84
    "rtx-6000-ada": 49140,  # nvidia-smi 'NVIDIA RTX 6000 Ada Gene... ... 49140MiB' (ECC off)
    "a40": 46068,  # nvidia-smi 'NVIDIA A40 ... 0MiB / 46068MiB' (ECC on; 49140MiB with ECC off)
    "rtx-a6000": 49140,  # 'NVIDIA RTX A6000 | 49140 MiB | driver 580.173.02'
    "rtx-pro-6000-server": 97887,  # nvidia-smi 'NVIDIA RTX PRO 6000 Blac... ... 97887MiB', driver 580.178.04
    "mi300x": 205822885888 / MiB,  # rocm-smi 'VRAM Total Memory (B): 205822885888'
    "b300": 275040,  # AIConfigurator b300_sxm.yaml '275040MiB reported by nvidia-smi'; 'NVIDIA B300 SXM6 AC' 275040 MiB
    "gb200": 189471,  # NVIDIA AIConfigurator gb200.yaml: '189471MiB reported by nvidia-smi'
    "gh200": 97871,  # nvidia-smi 'NVIDIA GH200 480GB, 97871 MiB' (96GB HBM3 part)
    "gh200-144gb": 146831,  # nvidia-smi '0, NVIDIA GH200 144G HBM3e, 580.173.02, 146831 MiB, 9.0'
    "gb300": 279 * 1024,  # Google Cloud A4X Max: 'GPU count 4', 'GPU memory (GB HBM3e) 1,116' -> 279 GB read as GiB
    "rtx-5080": 16303,  # resource audit 'NVIDIA GeForce RTX 5080', driver 610.88, 'gpu_total_memory_mib': 16303
    "rtx-pro-6000-workstation": 97886,
    "rtx-5070-ti": 16303,  # 'NVIDIA GeForce RTX 5070 Ti ... driver 596.49 ... 16,303 MiB reported VRAM'
    "h20": 97871,  # nvidia-smi 'NVIDIA H20 ... 4MiB /  97871MiB'
    "rtx-5060": 8151,  # 'NVIDIA GeForce RTX 5060, 8151 MiB, driver 595.71.05'
    "rtx-5060-ti-8gb": 8151,  # 'NVIDIA GeForce RTX 5060 Ti, 8151 MiB reported VRAM, NVIDIA driver: 596.49'
    "rtx-5050": 8151,  # 'NVIDIA GeForce RTX 5050, 8151 MiB, 610.74'
    "rtx-3060": 12288,  # 'NVIDIA GeForce RTX 3060, 12288 MiB, driver 595.71.05' (public notes, probe28 N3)
    "rtx-4060": 8188,  # 'NVIDIA GeForce RTX 4060, 8188 MiB', driver 610.62, 24 SM, compute capability 8.9
    "rtx-4060-ti-16gb": 16380,  # 'NVIDIA GeForce RTX 4060 Ti, 16380 MiB', driver 595.71.05
    # tests/fixtures/real_outputs: nvidia-smi -q 'NVIDIA GeForce RTX 4080 SUPER', 'Total : 16376 MiB', 595.71.05
    "rtx-4080-super": 16376,
    # tests/fixtures/real_outputs: rocm-smi 'Navi 32 [Radeon RX 7700 XT / 7800 XT]', 'VRAM Total Memory (B): 17163091968'
    "rx-7800-xt": 17163091968 / MiB,
  # 'NVIDIA RTX PRO 6000 Blackwell Workstation Edition ... VRAM: 97886 MiB'
}
# devices with no driver report found: the vendor's figure in GB, read as GiB
VENDOR_GB = {"dgx-spark": 128, "mi250x": 128, "gaudi2": 96, "gaudi3": 128, "tpu-v5e": 16, "tpu-v5p": 95,
             "mi325x": 256, "mi355x": 288, "rtx-5070": 12, "rtx-5060-ti-16gb": 16}

ACCELERATOR_KINDS = ("gpu", "tpu", "accelerator")


def test_every_accelerator_is_a_sourced_driver_figure_or_exactly_the_vendor_figure_in_gib() -> None:
    cat = builtin_catalog()
    accelerators = {d.id: d for d in cat.devices.values() if d.kind in ACCELERATOR_KINDS}
    assert set(accelerators) == set(DRIVER_MIB) | set(VENDOR_GB)  # a new device needs a row here
    for ident, d in accelerators.items():
        assert d.memory is not None and d.memory.unit == "GB", ident
        if ident in DRIVER_MIB:
            assert d.memory_basis == "driver", ident
            assert d.memory_bytes == int(DRIVER_MIB[ident] * MiB), ident
            assert d.memory_usable is not None and d.memory_usable.source in cat.sources, ident
            assert dict(d.memory_usable.extra).get("where"), ident  # says which output it was read from
            # a driver never reports more than the chips hold
            assert d.memory_bytes <= d.memory.raw * GiB, ident
        else:
            assert d.memory_basis == "vendor-binary", ident
            assert d.memory_usable is None and d.memory.raw == VENDOR_GB[ident], ident
            assert d.memory_bytes == VENDOR_GB[ident] * GiB, ident
            assert "JEDEC" in d.memory.derived, ident


def test_consumer_and_workstation_budgets_are_no_longer_read_as_decimal_gb() -> None:
    cat = builtin_catalog()
    rtx4090, a6000 = cat.devices["rtx-4090"], cat.devices["rtx-a6000"]
    assert rtx4090.memory_bytes == 24564 * MiB  # was 24e9 B = 22.35 GiB
    assert a6000.memory_bytes == 49140 * MiB  # was 48e9 B = 44.70 GiB
    assert rtx4090.memory_bytes > 0.99 * 24 * GiB and a6000.memory_bytes > 0.99 * 48 * GiB
    # two parts sold as "80 GB" are sized alike
    assert cat.devices["h100-sxm"].memory_bytes == cat.devices["h100-pcie"].memory_bytes == 81559 * MiB


def test_apple_unified_memory_and_host_ram_gb_are_gib_disks_and_bandwidth_stay_decimal() -> None:
    cat = builtin_catalog()
    m3pro = cat.devices["apple-m3-pro-36gb"]
    assert m3pro.memory_bytes == 36 * GiB and m3pro.memory_basis == "vendor-binary"
    nd = cat.instances["azure-standard_nd96isr_h100_v5"]
    assert nd.memory is not None and nd.memory.unit == "GB" and nd.memory.base == nd.memory.raw * GiB
    assert cat.devices["h100-sxm"].bandwidth == 3350e9
    disks = [i.local_disk for i in cat.instances.values() if i.local_disk is not None and i.local_disk.unit == "TB"]
    assert disks and all(v.base == v.raw * 1e12 for v in disks)  # disks are sold in decimal units


def test_user_files_follow_the_same_rule(tmp_path: Path) -> None:
    f = tmp_path / "hw.json"
    f.write_text(json.dumps({"devices": [
        {"id": "card-gb", "name": "card", "kind": "gpu", "memory": "24GB"},
        {"id": "card-gib", "name": "card", "kind": "gpu", "memory": "24GiB"},
        {"id": "card-smi", "name": "card", "kind": "gpu", "memory": "24GB", "memory_usable": "24564MiB"},
    ]}), "utf-8")
    cat = load_catalog([f])
    assert cat.devices["card-gb"].memory_bytes == 24 * GiB and cat.devices["card-gb"].memory_basis == "vendor-binary"
    assert cat.devices["card-gib"].memory_bytes == 24 * GiB and cat.devices["card-gib"].memory_basis == "stated"
    assert cat.devices["card-smi"].memory_bytes == 24564 * MiB and cat.devices["card-smi"].memory_basis == "driver"


FIXTURES = Path("/work/shared/fixtures/real_outputs/nvidia-smi-query-gpu")


@pytest.mark.skipif(not FIXTURES.is_dir(), reason="real nvidia-smi captures not present on this machine")
@pytest.mark.parametrize("fname, device", [("h100-80gb-hbm3-allfields.csv", "h100-sxm"),
                                           ("l40s-allfields.csv", "l40s")])
def test_catalog_matches_the_real_nvidia_smi_capture(fname: str, device: str) -> None:
    rows = list(csv.reader((FIXTURES / fname).read_text("utf-8").splitlines()))
    header = [h.strip() for h in rows[0]]
    total = rows[1][header.index("memory.total [MiB]")].strip()
    assert total.endswith(" MiB")
    assert builtin_catalog().devices[device].memory_bytes == int(total.removesuffix(" MiB")) * MiB


def test_hardware_list_and_show_print_gib_with_the_basis(capsys: pytest.CaptureFixture[str]) -> None:
    assert main.main(["hardware", "list", "h100", "--kind", "gpu"]) == 0
    out = capsys.readouterr().out
    rows = {line.split()[0]: line for line in out.splitlines() if line.startswith("h100-")}
    assert set(rows) == {"h100-sxm", "h100-pcie", "h100-nvl"}
    for ident in ("h100-sxm", "h100-pcie"):
        assert "79.65 GiB" in rows[ident] and " GB " not in rows[ident].split("GB/s")[0], rows[ident]
        assert "driver" in rows[ident]
    assert "JEDEC" in out  # the footer states the convention
    assert main.main(["hardware", "list", "gaudi2"]) == 0
    assert "96.00 GiB" in (line := capsys.readouterr().out.splitlines()[2]) and "vendor GB=GiB" in line
    assert main.main(["hardware", "show", "rtx-4090"]) == 0
    out = capsys.readouterr().out
    assert "memory: 23.99 GiB" in out and "driver-reported 24564 MiB" in out and MEMORY_CONVENTION in out
    assert main.main(["hardware", "show", "tpu-v5e", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["memory_bytes"] == 16 * GiB and data["memory_basis"] == "vendor-binary"
