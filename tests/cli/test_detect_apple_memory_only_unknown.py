"""probe21 C5: `hardware detect` reading only an M3's `system_profiler SPDisplaysDataType` (the chip and its
10-core GPU, no memory size) said "detected-apple-m3 ... not in catalog". The chip and its bin are known; only the
memory is not. The answer now names the catalog configurations it can be, one per memory size, and asks for the
memory alone (text, --json and Python alike); with no GPU-core count read either, every configuration of the chip
is named and both are asked for.

Truth: the real SPDisplaysDataType output of an M3 (tests/fixtures/real_outputs, narugit/smctemp#26: 'Chipset
Model: Apple M3', 'Total Number of Cores: 10'), and the memory options Apple sells the M3 with (the MacBook Pro
14-inch M3, Nov 2023, technical specifications: 8 GB unified memory, configurable to 16 GB or 24 GB), which the
catalog's M3 configurations (hfjs-hardware) hold."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from cli_capture import run_cli
from llmsizer.catalog.detect import detect_hardware

REAL = Path(__file__).resolve().parents[1] / "fixtures" / "real_outputs" / "system_profiler-SPDisplaysDataType"
M3_SIZES_GB = (8, 16, 24)  # Apple's M3 memory options


def _folder(tmp_path: Path, cores: int | None = 10) -> Path:
    text = (REAL / "apple-m3-10core-gpu-smctemp.txt").read_text()
    if cores is None:
        text = "\n".join(ln for ln in text.splitlines() if "Total Number of Cores" not in ln) + "\n"
    elif cores != 10:
        text = text.replace("Total Number of Cores: 10", f"Total Number of Cores: {cores}")
    (tmp_path / "system_profiler-SPDisplaysDataType.txt").write_text(text)
    return tmp_path


def test_the_known_chip_asks_only_for_the_memory(tmp_path: Path) -> None:
    d = _folder(tmp_path)
    det = detect_hardware(d)
    (dev,) = det.devices
    assert dev.catalog_id is None and dev.memory_bytes == 0
    assert dev.candidates == tuple(f"apple-m3-{gb}gb" for gb in M3_SIZES_GB)
    (w,) = det.warnings
    assert w.startswith("detected-apple-m3: memory size not in the outputs: the Apple M3 with 10 GPU cores is in the "
                        "catalog as apple-m3-8gb (8.00 GiB), apple-m3-16gb (16.00 GiB), apple-m3-24gb (24.00 GiB); "
                        "the memory alone decides")
    r = run_cli("hardware", "detect", "--from", str(d), "--json")
    assert r.returncode == 0 and json.loads(r.stdout)["warnings"] == det.warnings
    r = run_cli("hardware", "detect", "--from", str(d))
    assert r.returncode == 0 and f"warning: {w}" in r.stdout.splitlines()
    assert "one of 3 (see the warning)" in r.stdout and "not in catalog" not in r.stdout


def test_the_other_bin_names_its_own_configurations(tmp_path: Path) -> None:
    (dev,) = detect_hardware(_folder(tmp_path, cores=8)).devices
    assert dev.candidates == tuple(f"apple-m3-8c-{gb}gb" for gb in M3_SIZES_GB)


def test_no_core_count_names_every_configuration(tmp_path: Path) -> None:
    det = detect_hardware(_folder(tmp_path, cores=None))
    (dev,) = det.devices
    assert set(dev.candidates) == {f"apple-m3-{b}{gb}gb" for b in ("", "8c-") for gb in M3_SIZES_GB}
    assert "its memory and GPU-core count decide" in det.warnings[0]


def test_a_chip_with_its_memory_is_placed_as_before(tmp_path: Path) -> None:
    """The M1 MacBook Air whose SPHardwareDataType states 'Memory: 16 GB' (glpi-agent fixtures): one configuration,
    no candidates, no warning."""
    shutil.copyfile(REAL.parent / "system_profiler-SPHardwareDataType" / "apple-m1-macbookair-glpi.txt",
                    tmp_path / "system_profiler-SPHardwareDataType.txt")
    shutil.copyfile(REAL / "apple-m1-8c-macbookair-glpi.txt", tmp_path / "system_profiler-SPDisplaysDataType.txt")
    det = detect_hardware(tmp_path)
    (dev,) = det.devices
    assert dev.catalog_id == "apple-m1-16gb" and dev.candidates == () and not det.warnings
