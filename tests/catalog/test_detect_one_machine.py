"""`hardware detect --from DIR` reads one machine: saved outputs of different machines in one folder are refused
with one line naming both files and what each says (probe5 defect 6); an M2 Pro without its GPU-core count names
the GPU bin it assumed (defect 7); an Intel Mac's discrete GPU is named as not modelled (defect 8). The folders are
built from the REAL recorded outputs in tests/fixtures/real_outputs/ (sources in its README); what each file names
is read by eye from the file."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from cli_capture import run
from llmsizer.catalog.detect import detect_machine
from llmsizer.errors import InputError

REAL = Path(__file__).resolve().parents[1] / "fixtures" / "real_outputs"


def folder(tmp_path: Path, files: dict[str, str]) -> Path:
    d = tmp_path / "saved"
    d.mkdir()
    for name, rel in files.items():
        shutil.copy(REAL / rel, d / name)
    return d


def test_nvidia_outputs_of_two_machines_refused(tmp_path: Path) -> None:
    # nvidia-smi -q of the H100 machine ('Product Name : NVIDIA H100 80GB HBM3') and --query-gpu of the L40S one
    d = folder(tmp_path, {"nvidia-smi-q": "nvidia-smi-q/h100-80gb-hbm3.txt",
                          "nvidia-smi-query-gpu.csv": "nvidia-smi-query-gpu/l40s-allfields.csv"})
    with pytest.raises(InputError) as e:
        detect_machine(d)
    msg = str(e.value)
    assert "\n" not in msg
    assert "nvidia-smi-q" in msg and "nvidia-smi-query-gpu.csv" in msg
    assert "'NVIDIA H100 80GB HBM3'" in msg and "'NVIDIA L40S'" in msg
    code, _, err = run("hardware", "detect", "--from", str(d), "-o", str(tmp_path / "hw.json"))
    assert code == 2 and "different GPUs" in err


def test_same_gpu_in_both_nvidia_outputs_is_one_machine(tmp_path: Path) -> None:
    d = folder(tmp_path, {"nvidia-smi-q": "nvidia-smi-q/l40s.txt",
                          "nvidia-smi-query-gpu.csv": "nvidia-smi-query-gpu/l40s-allfields.csv"})
    det = detect_machine(d)
    assert [x.catalog_id for x in det.devices] == ["l40s"]


def test_apple_outputs_of_three_machines_refused(tmp_path: Path) -> None:
    # sysctl of an M1 ('machdep.cpu.brand_string: Apple M1'), SPHardwareDataType of an M2 Pro ('Chip: Apple M2 Pro'),
    # SPDisplaysDataType of an M3 ('Chipset Model: Apple M3', 10 cores: no M2 Pro has 10)
    d = folder(tmp_path, {"sysctl-macos": "sysctl-macos/apple-m1-machdep-cpu-glpi.txt",
                          "system_profiler-SPHardwareDataType":
                              "system_profiler-SPHardwareDataType/apple-m2-pro-macbookpro-cpufetch.txt",
                          "system_profiler-SPDisplaysDataType":
                              "system_profiler-SPDisplaysDataType/apple-m3-10core-gpu-smctemp.txt"})
    with pytest.raises(InputError, match="different Apple chips") as e:
        detect_machine(d)
    assert "'Apple M1'" in str(e.value) and "'Apple M2 Pro'" in str(e.value)


def test_m2_pro_hardware_and_m3_displays_refused(tmp_path: Path) -> None:
    d = folder(tmp_path, {"system_profiler-SPHardwareDataType":
                              "system_profiler-SPHardwareDataType/apple-m2-pro-macbookpro-cpufetch.txt",
                          "system_profiler-SPDisplaysDataType":
                              "system_profiler-SPDisplaysDataType/apple-m3-10core-gpu-smctemp.txt"})
    with pytest.raises(InputError, match="'Apple M2 Pro'.*'Apple M3'"):
        detect_machine(d)


def test_m2_pro_12_core_cpu_settles_the_gpu_bin(tmp_path: Path) -> None:
    # the cpufetch SPHardwareDataType prints CPU cores ('Total Number of Cores: 12 (8 performance and 4 efficiency)')
    # but no GPU-core count; the M2 Pro comes with a 16- or a 19-core GPU, and only the 10-core CPU has the 16-core
    # one (Apple's spec; the catalog's apple-m2-pro-16c row names its 10-core CPU): 12 CPU cores settle the 19-core
    # bin, no warning (probe6 defect 12)
    d = folder(tmp_path, {"system_profiler-SPHardwareDataType":
                              "system_profiler-SPHardwareDataType/apple-m2-pro-macbookpro-cpufetch.txt"})
    det = detect_machine(d)
    (dev,) = det.devices
    assert dev.catalog_id == "apple-m2-pro-16gb"
    assert "follows from 12 CPU cores ('Total Number of Cores: 12 (8 performance and 4 efficiency)'" in dev.note
    assert "assumed" not in dev.note and not det.warnings


def test_m2_pro_10_core_cpu_leaves_the_bin_assumed(tmp_path: Path) -> None:
    # the same output with a 10-core CPU (edited here): the 16-core bin states that CPU, so the count does not
    # exclude it, and the full bin stays an assumption, named with the other
    d = folder(tmp_path, {"system_profiler-SPHardwareDataType":
                              "system_profiler-SPHardwareDataType/apple-m2-pro-macbookpro-cpufetch.txt"})
    f = d / "system_profiler-SPHardwareDataType"
    text = f.read_text()
    assert "Total Number of Cores: 12 (8 performance and 4 efficiency)" in text
    f.write_text(text.replace("Total Number of Cores: 12 (8 performance", "Total Number of Cores: 10 (6 performance"))
    det = detect_machine(d)
    (dev,) = det.devices
    assert dev.catalog_id == "apple-m2-pro-16gb"
    assert "GPU-core count not in the outputs read" in dev.note and "apple-m2-pro-16c-16gb" in dev.note
    assert any("apple-m2-pro-16c-16gb" in w and "full GPU bin assumed" in w for w in det.warnings)


def test_m1_with_its_gpu_cores_assumes_nothing(tmp_path: Path) -> None:
    # SPDisplaysDataType of the same MacBook Air: 'Total Number of Cores: 8' decides the bin; no assumption named
    d = folder(tmp_path, {"system_profiler-SPHardwareDataType":
                              "system_profiler-SPHardwareDataType/apple-m1-macbookair-glpi.txt",
                          "system_profiler-SPDisplaysDataType":
                              "system_profiler-SPDisplaysDataType/apple-m1-8c-macbookair-glpi.txt"})
    det = detect_machine(d)
    assert "assumed" not in det.devices[0].note and not det.warnings


def test_intel_mac_discrete_gpu_named_not_modelled(tmp_path: Path) -> None:
    # the iMac Pro's SPDisplaysDataType: 'Chipset Model: Radeon Pro Vega 64', 'VRAM (Total): 16 GB'
    d = folder(tmp_path, {"system_profiler-SPDisplaysDataType":
                              "system_profiler-SPDisplaysDataType/imacpro-radeon-pro-vega64-cpu_info.txt"})
    with pytest.raises(InputError) as e:
        detect_machine(d)
    msg = str(e.value)
    assert "Radeon Pro Vega 64 (VRAM (Total): 16 GB)" in msg and "Intel Mac: not modelled" in msg
    assert "neither the chip nor the memory" not in msg  # not a message about Apple chips


@pytest.mark.parametrize("name, rel, catalog_id, gib", [
    # nvidia-smi -q 'Product Name : NVIDIA GeForce RTX 4080 SUPER', 'Total : 16376 MiB'
    ("nvidia-smi-q", "nvidia-smi-q/rtx-4080-super.txt", "rtx-4080-super", 16376 / 1024),
    # rocm-smi 'Card Series': 'Navi 32 [Radeon RX 7700 XT / 7800 XT]', 'VRAM Total Memory (B)': '17163091968': the
    # 16 GB card of the two (the RX 7700 XT has 12 GB)
    ("rocm-smi-json", "rocm-smi-json/rx7800xt-navi32-gpustack.json", "rx-7800-xt", 17163091968 / 2**30),
])
def test_real_consumer_cards_are_in_the_catalog(tmp_path: Path, name: str, rel: str, catalog_id: str,
                                                gib: float) -> None:
    det = detect_machine(folder(tmp_path, {name: rel}))
    (dev,) = det.devices
    assert dev.catalog_id == catalog_id and dev.memory_bytes == round(gib * 2**30)
    (entry,) = det.document["devices"]
    assert entry["memory_bandwidth"]["value"] is not None  # decode speed known, no longer 'unknown'


def test_a_die_name_with_the_other_cards_memory_is_not_mapped() -> None:
    from llmsizer.catalog.detect import catalog_gpu
    from llmsizer.catalog.hardware import builtin_catalog
    name = "Navi 32 [Radeon RX 7700 XT / 7800 XT]"
    assert catalog_gpu(builtin_catalog(), name, 12 * 2**30) is None  # a 12 GB card: the 7700 XT, not in the catalog
    assert catalog_gpu(builtin_catalog(), name) is None  # memory unknown: which card is not known
