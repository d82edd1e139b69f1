"""`hardware detect` on real recorded nvidia-smi outputs (tests/fixtures/real_outputs/): a detected card gives the same
CUDA total, vLLM pool and fit verdict as the catalog card it matched (probe30 D1: the detected H100 left out
memory_cuda, so vLLM's pool was sized from 79.65 GiB instead of CUDA's 79.18 GiB and `fit llama-3.1-70b --count 2
--concurrency 3` FIT on it but not on the catalog h100-sxm), and a GPU in MIG mode is its MIG devices, never the
whole GPU (probe30 D2: the MIG H100 of utkuozdemir/nvidia_gpu_exporter's capture was one 79.65 GiB GPU on which
qwen2.5-32b "fit" in 68.87 GiB, while the largest MIG device a process can get holds 39.50 GiB).

The truths are read from the fixture text here (its Total and Reserved lines, its MIG Device sections) or are the
catalog card's own answer, never detect's output copied."""

from __future__ import annotations

import csv
import io
import json
import re
from pathlib import Path

import pytest

from cli_capture import run_cli
from llmsizer.catalog.detect import Output, detect
from llmsizer.catalog.hardware import builtin_catalog, load_catalog
from llmsizer.errors import InputError
from llmsizer.estimate.fit import fit

REAL = Path(__file__).resolve().parents[1] / "fixtures" / "real_outputs"
MiB = 2**20
MIG_Q = "nvidia-smi-q/h100-80gb-hbm3-mig.txt"
MIG_CSV = "nvidia-smi-query-gpu/h100-80gb-hbm3-mig-allfields.csv"


def text(rel: str) -> str:
    return (REAL / rel).read_text("utf-8")


def out(name: str, rel: str) -> Output:
    return Output(name, text(rel), name, rel, "2026-12-07")


def live_query(rel: str) -> str:
    """The real all-fields CSV cut to the fields `hardware detect` asks for live (COMMANDS: index, name, memory.total,
    driver_version, pci.bus_id): the same machine's values, no memory.reserved column (the catalog-match path)."""
    rows = list(csv.reader(io.StringIO(text(rel).strip()), skipinitialspace=True))
    keep = ["index", "name", "memory.total [MiB]", "driver_version", "pci.bus_id"]
    cols = [rows[0].index(k) for k in keep]
    return "\n".join(", ".join(r[i] for i in cols) for r in rows) + "\n"


def q_total_reserved(rel: str) -> tuple[int, int]:
    """'FB Memory Usage' Total and Reserved of a real -q, read here (MiB)."""
    m = re.search(r"^    FB Memory Usage\n\s+Total\s*:\s*(\d+) MiB\n\s+Reserved\s*:\s*(\d+) MiB", text(rel), re.M)
    assert m is not None
    return int(m.group(1)), int(m.group(2))


CARDS = [("h100-sxm", "nvidia-smi-q/h100-80gb-hbm3.txt", "nvidia-smi-query-gpu/h100-80gb-hbm3-allfields.csv"),
         ("l40s", "nvidia-smi-q/l40s.txt", "nvidia-smi-query-gpu/l40s-allfields.csv"),
         ("rtx-4080-super", "nvidia-smi-q/rtx-4080-super.txt", "nvidia-smi-query-gpu/rtx-4080-super-allfields.csv")]


def _outputs(how: str, q: str, allfields: str) -> list[Output]:
    if how == "q":
        return [out("nvidia-smi-q", q)]
    if how == "csv":
        return [out("nvidia-smi-query-gpu", allfields)]
    return [Output("nvidia-smi-query-gpu", live_query(allfields), "nvidia-smi-query-gpu", "live.csv", "2026-12-07")]


@pytest.mark.parametrize(("card", "q", "allfields"), CARDS)
@pytest.mark.parametrize("how", ["q", "csv", "live"])
def test_detected_card_has_the_cuda_total_of_the_catalog_card(card: str, q: str, allfields: str, how: str) -> None:
    """-q and the all-fields CSV print the driver's Reserved (Total - Reserved); the live query does not (the
    catalog card's memory_cuda, its memory.total being the one detected). All three: CUDA's total as the catalog's."""
    (d,) = detect(_outputs(how, q, allfields)).devices
    assert d.catalog_id == card
    total, reserved = q_total_reserved(q)
    doc = detect(_outputs(how, q, allfields)).document
    (entry,) = doc["devices"]
    assert (entry["memory_cuda"]["value"], entry["memory_cuda"]["unit"]) == (total - reserved, "MiB")
    assert builtin_catalog().devices[card].memory_cuda.base == (total - reserved) * MiB
    if how == "live":
        cat = builtin_catalog().devices[card].memory_cuda
        assert f"from catalog {card}" in entry["note"] and entry["memory_cuda"]["source"] == cat.source
    else:
        assert f"Reserved {reserved} MiB" in entry["note"] and entry["memory_cuda"]["source"].startswith("detected:")


@pytest.mark.parametrize(("card", "q", "allfields"), CARDS)
@pytest.mark.parametrize("how", ["q", "live"])
def test_detected_card_sizes_vllm_and_sglang_as_the_catalog_card(tmp_path: Path, card: str, q: str, allfields: str,
                                                                 how: str) -> None:
    """The KV pool (vLLM's "GPU KV cache size" tokens, SGLang's) and the fit verdict on the detected card are the
    catalog card's: probe30 D1's 417,920 vs 421,360 tokens (H100) and 190,672 vs 195,056 (L40S)."""
    det = detect(_outputs(how, q, allfields))
    f = tmp_path / "hw.json"
    f.write_text(json.dumps(det.document), "utf-8")
    for engine in ("vllm", "sglang"):
        a, b = (fit("llama-3.1-8b", dev, engine=engine, context=4096, hardware_files=[f], fits_at=False)
                for dev in (det.target.id, card))
        assert a.estimate is not None and b.estimate is not None
        assert a.estimate.details.get("kv_tokens") == b.estimate.details.get("kv_tokens"), engine
        assert (a.fits, a.memory_per_device, a.reasons) == (b.fits, b.memory_per_device, b.reasons), engine


def test_detected_h100_pair_gives_the_catalog_verdict_at_the_pool_edge(tmp_path: Path) -> None:
    """probe30 D1's case: llama-3.1-70b, 2 x H100, 2k context, 3 in flight, utilization 0.91: the catalog H100's pool
    holds 2 (DOES NOT FIT); the detected H100 (the real CSV capture) said 3 (FITS). Now both say the catalog's."""
    det = detect([out("nvidia-smi-query-gpu", CARDS[0][2])])
    f = tmp_path / "hw.json"
    f.write_text(json.dumps(det.document), "utf-8")
    # at TP 2 (pipeline_parallel 1: fit's free choice takes TP 1 x PP 2 here, whose pool holds 3, since fitpp)
    a, b = (fit("llama-3.1-70b", dev, count=2, engine="vllm", context=2048, concurrency=3, pipeline_parallel=1,
                gpu_memory_utilization=0.91, hardware_files=[f], fits_at=False) for dev in ("detected-h100-sxm", "h100-sxm"))
    assert b.fits is False  # the catalog card: the pool holds 2 of the 3
    assert (a.fits, a.reasons, a.memory_per_device) == (b.fits, b.reasons, b.memory_per_device)
    # and fit's own layout choice is the same for both cards
    a, b = (fit("llama-3.1-70b", dev, count=2, engine="vllm", context=2048, concurrency=3,
                gpu_memory_utilization=0.91, hardware_files=[f], fits_at=False) for dev in ("detected-h100-sxm", "h100-sxm"))
    assert (a.fits, a.pipeline_parallel, a.reasons, a.memory_per_device) == \
        (b.fits, b.pipeline_parallel, b.reasons, b.memory_per_device)


# ------------------------------------------------------------------------------------------------------------- MIG

def mig_sections() -> list[tuple[int, int, int]]:
    """(index, Multiprocessor count, Shared FB Memory Usage Total MiB) of each MIG Device in the real -q, read here."""
    t = text(MIG_Q)
    return [(int(i), int(sm), int(mem)) for i, sm, mem in re.findall(
        r"MIG Device\n\s+Index\s*:\s*(\d+)\n(?:.*\n)*?\s+Multiprocessor count\s*:\s*(\d+)\n(?:.*\n)*?"
        r"\s+Shared FB Memory Usage\n\s+Total\s*:\s*(\d+) MiB", t)]


def test_the_mig_capture_is_the_one_cited() -> None:
    sections = mig_sections()
    assert sections == [(0, 60, 40448), (1, 32, 20096), (2, 16, 9984), (3, 16, 9984)]  # nvidia-smi -L: 3g.40gb, ...
    assert re.search(r"MIG Mode\n\s+Current\s*:\s*Enabled", text(MIG_Q))
    assert "mig.mode.current" in text(MIG_CSV).splitlines()[0] and ", Enabled, Enabled," in text(MIG_CSV)


@pytest.mark.parametrize("outputs", [[MIG_Q], [MIG_CSV, MIG_Q]], ids=["q", "csv+q"])
def test_a_mig_gpu_is_its_mig_devices(tmp_path: Path, outputs: list[str]) -> None:
    """Each MIG device its own device of count 1 with its own memory and SMs, the largest first (the target); no
    device of the whole GPU's 79.65 GiB; a warning says so."""
    det = detect([out("nvidia-smi-q" if r.startswith("nvidia-smi-q/") else "nvidia-smi-query-gpu", r) for r in outputs])
    truth = sorted(mig_sections(), key=lambda s: (-s[2], s[0]))
    assert [(d.count, d.memory_bytes) for d in det.devices] == [(1, mem * MiB) for _, _, mem in truth]
    assert det.target.memory_bytes == 40448 * MiB
    assert all(d.memory_bytes < 81559 * MiB for d in det.devices)
    assert any("MIG mode" in w for w in det.warnings)
    f = tmp_path / "hw.json"
    f.write_text(json.dumps(det.document), "utf-8")
    devs = load_catalog([f]).devices
    for (idx, sm, mem), d in zip(truth, det.devices, strict=True):
        dev = devs[d.id]
        assert dev.sm_count is not None and dev.sm_count.base == sm, idx
        assert dev.memory_cuda is not None and dev.memory_cuda.base == mem * MiB  # Reserved 0 MiB in each section
        assert dev.bandwidth is None and dev.interconnect is None  # a share of the GPU not in the catalog


def test_no_fit_claims_the_whole_mig_gpu() -> None:
    """probe30 D2: qwen2.5-32b "fit" on the MIG H100 needing 68.87 GiB; the largest MIG device holds 39.50 GiB."""
    det = detect([out("nvidia-smi-q", MIG_Q)])
    r = fit("qwen2.5-32b", det, fits_at=False)
    assert r.fits is False and r.budget_per_device is not None and r.budget_per_device <= 40448 * MiB
    whole = fit("qwen2.5-32b", "h100-sxm", fits_at=False)
    assert whole.fits is True  # the same model on the whole card does: the MIG device is what refuses it


def test_a_mig_gpu_without_its_mig_devices_is_refused_in_one_line(tmp_path: Path) -> None:
    """The CSV query says MIG mode Enabled but never lists the MIG devices: refused, not sized as the whole GPU."""
    with pytest.raises(InputError, match="MIG mode"):
        detect([out("nvidia-smi-query-gpu", MIG_CSV)])
    d = tmp_path / "m"
    d.mkdir()
    (d / "nvidia-smi-query-gpu.csv").write_text(text(MIG_CSV), "utf-8")
    r = run_cli("hardware", "detect", "--from", str(d))
    assert r.returncode == 2 and r.stdout == "" and r.stderr.count("\n") == 1 and "MIG" in r.stderr, r.stderr
