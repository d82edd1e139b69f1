"""A CPU's FP32 peak from its mechanism (formulas/cpu_peak.py eq. CP1): cores x clock x the micro-architecture's
FP32 FLOP per cycle per core (catalog/data/hardware/cpu_microarchitectures.json). The widths are checked by hand
from their cited pipe counts and vector widths, the 7950X's peak against the work its published llama.cpp runs did,
and CPUs without the data keep their previous figure."""

from __future__ import annotations

import json
import re
from importlib import resources
from pathlib import Path

import pytest

from llmsizer.catalog.hardware import (
    builtin_catalog,
    cpu_amx_bf16_flop_per_cycle,
    cpu_fp32_flop_per_cycle,
    cpu_microarchitectures,
    load_catalog,
)
from llmsizer.errors import InputError
from llmsizer.formulas.cpu_peak import cpu_peak_flops, fma_width, matrix_tile_width


def _raw_cpus() -> list[dict]:
    text = resources.files("llmsizer.catalog").joinpath("data/hardware/cpus.json").read_text("utf-8")
    return list(json.loads(text)["devices"])


def test_fma_widths_by_hand() -> None:
    """Zen 4: two FMA pipes (AMD SOG Zen 4 §2.11.1 via LLVM's X86ScheduleZnver4.td: (v)FMA* on FP0 and FP1), each
    256 bits (AVX-512 double-pumped through the 256-bit hardware): 2 x 8 lanes x 2 FLOP = 32. A Xeon Scalable
    server core: two 512-bit FMA units (rten's note, 'server CPUs have two'): 2 x 16 x 2 = 64."""
    assert fma_width(2, 256, 32) == 32.0
    assert fma_width(2, 512, 32) == 64.0
    assert cpu_fp32_flop_per_cycle("zen4") == 32.0
    assert cpu_fp32_flop_per_cycle("golden-cove-server") == cpu_fp32_flop_per_cycle("sunny-cove-server") == 64.0
    assert cpu_fp32_flop_per_cycle("no-such-core") is None
    assert cpu_peak_flops(16, 4.5e9, 32) == pytest.approx(2.304e12)
    with pytest.raises(ValueError):
        cpu_peak_flops(0, 4.5e9, 32)


def test_every_width_names_a_dated_source() -> None:
    sources = builtin_catalog().sources
    for key, row in cpu_microarchitectures().items():
        fma = row["fp32_fma"]
        for src in {fma["source"], fma.get("width_source", fma["source"])}:
            assert src in sources and sources[src].get("date"), (key, src)


def test_ryzen_7950x_peak_is_cores_x_clock_x_zen4_width() -> None:
    """16 cores x 4.5 GHz base clock (webautoai-7950x) x 32 = 2.304 TFLOP/s, replacing huggingface.js's 0.56."""
    dev = builtin_catalog().devices["amd-ryzen-9-7950x"]
    assert dev.microarchitecture == "zen4" and dev.clock is not None and dev.clock.base == 4.5e9
    peak, key = dev.peak_flops("fp32")
    assert key == "fp32" and peak == pytest.approx(16 * 4.5e9 * 2 * 8 * 2)
    v = dev.flops["fp32"]
    assert v.source == "derived" and "llvm-znver4-sched" in v.derived and "webautoai-7950x" in v.derived


def test_epyc_9654_peak_is_96_cores_x_base_clock_x_zen4_width() -> None:
    """96 cores x 2.40 GHz base clock (llmperf-genoa's table, 'Microarchitecture Zen 4') x 32 = 7.3728 TFLOP/s;
    huggingface.js's 'EPYC 4th Generation (Genoa)' figure was 5."""
    dev = builtin_catalog().devices["amd-epyc-9654"]
    assert dev.peak_flops("fp32")[0] == pytest.approx(96 * 2.4e9 * 32)
    assert dev.flops["fp32"].source == "derived" and "llmperf-genoa" in dev.flops["fp32"].derived


def test_epyc_7763_peak_is_64_cores_x_base_clock_x_zen3_width() -> None:
    """Zen 3: two FMAs per cycle (LLVM's Znver3 model, inverse throughput 0.5), 256-bit AVX2: 32 FP32 FLOP per
    cycle; 64 cores x 2.45 GHz base (llmperf-rome) = 5.0176 TFLOP/s, huggingface.js's Milan figure was 2.4."""
    dev = builtin_catalog().devices["amd-epyc-7763"]
    assert cpu_fp32_flop_per_cycle("zen3") == fma_width(2, 256, 32) == 32.0
    assert dev.peak_flops("fp32")[0] == pytest.approx(64 * 2.45e9 * 32)


def test_the_7950x_llamacpp_prefill_work_fits_under_the_new_peak_not_the_old_one() -> None:
    """Independent truth: the published llama.cpp pp512 rows on the 7950X (validation/llamacpp_bench.csv XC01-XC03,
    XC13-XC14) did 2 x P FLOP per token, with P = 14.96 GiB / 2 bytes (the F16 file's quoted size). Their useful
    rate is above huggingface.js's 0.56 TFLOP/s (impossible for a peak) and below the mechanism's peak."""
    path = Path(__file__).resolve().parents[2] / "validation" / "llamacpp_bench.csv"
    import csv

    with path.open(newline="", encoding="utf-8") as f:
        rows = [r for r in csv.DictReader(f) if r["device"] == "amd-ryzen-9-7950x" and r["test"] == "pp512"]
    f16 = next(r for r in rows if r["weights"] == "gguf:f16")
    gib = float(re.search(r"([0-9.]+) GiB", f16["quote"]).group(1))  # type: ignore[union-attr]
    params = gib * 2**30 / 2
    assert 8.0e9 < params < 8.1e9
    peak = builtin_catalog().devices["amd-ryzen-9-7950x"].peak_flops("fp32")[0]
    assert peak is not None
    for r in rows:
        useful = 2 * params * float(r["value"])
        assert 0.56e12 < useful < peak, (r["id"], useful)


def test_generic_rows_take_their_representative_part_and_the_rest_say_why() -> None:
    """review21 D6: the generic Milan row kept huggingface.js's 2.4 TFLOP/s while the 7763 (a Milan) is 64 cores x
    2.45 GHz x 32 = 5.02, and the Sapphire Rapids platform row 1.3 where the 8488C is 48 x 3.2 GHz x 64 = 9.83 (AMX
    BF16 48 x 3.2 GHz x 1,024 = 157.3); the test pinned the old figures. The family rows now take their representative
    part's cores and clock by the same rule. The rows still on huggingface.js's figures say so at low confidence
    (not one sourced part); Apple's CPU cores have none (no published width)."""
    devs = builtin_catalog().devices
    assert devs["amd-epyc-milan"].peak_flops("fp32")[0] == pytest.approx(64 * 2.45e9 * 32)
    assert devs["intel-xeon-spr-8ch"].peak_flops("fp32")[0] == pytest.approx(48 * 3.2e9 * 64)
    assert devs["intel-xeon-spr-8ch"].peak_flops("bf16")[0] == pytest.approx(48 * 3.2e9 * 1024)
    for ident in ("intel-core-i9-13900k", "desktop-ddr5-4800-2ch"):
        v = devs[ident].flops["fp32"]
        assert v.source == "hfjs-hardware" and v.confidence == "low" and not devs[ident].microarchitecture, ident
    assert devs["apple-m2-max-cpu"].peak_flops("fp32")[0] is None and "flops.fp32" in devs["apple-m2-max-cpu"].missing


def test_threadripper_pro_5975wx_peak_is_amd_s_cores_x_base_clock_x_zen3_width() -> None:
    """devsrc38: the 5975WX had no FP32 peak (no stored source gave its clock). AMD's own specification export
    (felixsteinke/cpu-spec-dataset dataset/amd-cpus.csv @4c08d887, 'Export Data' from amd.com) reads '# of CPU Cores'
    32, 'Base Clock' 3.6GHz, 'Memory Channels' 8, 'Up to 3200MHz' DDR4, 'AMD "Zen 3" Core Architecture': typed here,
    the row must give 32 x 3.6 GHz x 32 (Zen 3's two 256-bit FMAs) = 3.6864 TFLOP/s and 8 x 25.6 GB/s."""
    dev = builtin_catalog().devices["amd-threadripper-pro-5975wx"]
    assert dev.microarchitecture == "zen3" and dev.clock is not None and dev.clock.source == "amd-cpu-specs-export"
    assert dev.peak_flops("fp32")[0] == pytest.approx(32 * 3.6e9 * 32)
    assert dev.bandwidth == pytest.approx(8 * 3200e6 * 8)


def test_the_5975wx_llamacpp_prefill_work_fits_under_its_peak() -> None:
    """Independent truth: the published mainline llama.cpp pp512 rows on the 5975WX (validation/llamacpp_bench.csv
    XC17-XC18, 32 threads, LLaMA-3.1-8B) did about 2 x 8.03e9 FLOP per token; that useful rate must sit below the
    peak the row now gives (a peak under a measured rate would be impossible)."""
    path = Path(__file__).resolve().parents[2] / "validation" / "llamacpp_bench.csv"
    import csv

    with path.open(newline="", encoding="utf-8") as f:
        rows = [r for r in csv.DictReader(f)
                if r["device"] == "amd-threadripper-pro-5975wx" and r["test"] == "pp512"]
    assert len(rows) >= 2
    peak = builtin_catalog().devices["amd-threadripper-pro-5975wx"].peak_flops("fp32")[0]
    assert peak is not None
    for r in rows:
        assert 2 * 8.03e9 * float(r["value"]) < peak, r["id"]


def test_no_builtin_cpu_states_its_fp32_beside_the_mechanism() -> None:
    """The peak has one home: a row with microarchitecture and clock states no fp32 of its own, nor a bf16 where the
    micro-architecture has a matrix unit (review21 D2: the 8488C's and c3-highmem-8's AMX bf16 were written by hand)."""
    for raw in _raw_cpus():
        if "microarchitecture" in raw:
            assert "clock" in raw and "cores" in raw, raw["id"]
            assert "fp32" not in raw.get("flops", {}), raw["id"]
            if "amx_bf16" in cpu_microarchitectures()[raw["microarchitecture"]]:
                assert "bf16" not in raw.get("flops", {}), raw["id"]
    # every built-in Sapphire Rapids row with an AMX flag names its core, so it gets both peaks
    for raw in _raw_cpus():
        if (raw.get("isa") or {}).get("amx", {}).get("value") and raw["id"] not in GENERIC_ROWS:
            assert raw.get("microarchitecture") == "golden-cove-server", raw["id"]


# the generic platform rows, not one part (no sourced cores or clock of their own)
GENERIC_ROWS = {"desktop-ddr5-4800-2ch"}


def test_amx_bf16_width_by_hand_and_one_clock_for_both_peaks(tmp_path: Path) -> None:
    """AMX TDPBF16PS (Intel SDM): a 16x32 BF16 tile by a 32x16 one = 8,192 multiply-adds, 16,384 FLOP, once per 16
    cycles = 1,024 FLOP per cycle per core, Intel's '1024 BF16 operations per cycle'. The 8488C: 48 cores x 3.2 GHz
    x 1,024 = 157.2864 TFLOP/s; c3-highmem-8: 4 cores x 3.0 GHz (Google's sustained all-core turbo) x 1,024 =
    12.288 TFLOP/s (the figures the rows stated by hand before), and its FP32 peak, which it had none of, 4 x 3.0 GHz
    x 64 = 0.768 TFLOP/s. A hardware file's clock moves both peaks (before: 2.0 GHz gave fp32 6.144 and bf16 still
    157.29)."""
    assert matrix_tile_width(16, 32, 16, 16) == 2 * 16 * 32 * 16 / 16 == 1024.0
    assert cpu_amx_bf16_flop_per_cycle("golden-cove-server") == 1024.0
    assert cpu_amx_bf16_flop_per_cycle("zen4") is None and cpu_amx_bf16_flop_per_cycle("sunny-cove-server") is None
    devs = builtin_catalog().devices
    assert devs["intel-xeon-platinum-8488c"].peak_flops("bf16")[0] == pytest.approx(48 * 3.2e9 * 1024)
    c3 = devs["xeon-spr-gcp-c3-highmem-8"]
    assert c3.peak_flops("bf16")[0] == pytest.approx(4 * 3.0e9 * 1024)
    assert c3.peak_flops("fp32") == (pytest.approx(4 * 3.0e9 * 64), "fp32")
    assert "gcp-c3-turbo" in c3.flops["bf16"].derived and "amx-bf16-rate" in c3.flops["bf16"].derived
    f = tmp_path / "clk.json"
    f.write_text(json.dumps({"devices": [{"id": "intel-xeon-platinum-8488c", "memory": "256GiB", "clock": "2.0 GHz"}]}))
    d = load_catalog([f]).device("intel-xeon-platinum-8488c")
    assert d.peak_flops("fp32")[0] == pytest.approx(48 * 2.0e9 * 64)
    assert d.peak_flops("bf16")[0] == pytest.approx(48 * 2.0e9 * 1024)
    # a row whose own ISA says no AMX (a VM whose hypervisor masks it) gets no AMX peak from its micro-architecture,
    # only the FP32 vector one (review22 D2: 8 x 3 GHz golden-cove-server with amx false was timed at 24.6 bf16)
    g = tmp_path / "noamx.json"
    g.write_text(json.dumps({"devices": [{"id": "my", "name": "m", "kind": "cpu", "memory": "64GiB",
                                          "memory_bandwidth": "80GB/s", "cores": "8 cores", "clock": "3 GHz",
                                          "microarchitecture": "golden-cove-server", "isa": {"amx": False}}]}))
    masked = load_catalog([g]).device("my")
    assert masked.peak_flops("fp32") == (pytest.approx(8 * 3e9 * 64), "fp32")
    assert "bf16" not in masked.flops


def test_a_hardware_file_cpu_gets_the_mechanism_and_a_stated_fp32_wins(tmp_path: Path) -> None:
    f = tmp_path / "hw.json"
    f.write_text(json.dumps({"devices": [
        {"id": "my-zen4", "name": "my Zen 4 box", "kind": "cpu", "cores": "8 cores", "clock": "5 GHz",
         "microarchitecture": "zen4"},
        {"id": "amd-ryzen-9-7950x", "flops": {"fp32": "3 TFLOP/s"}}]}), encoding="utf-8")
    cat = load_catalog([f])
    assert cat.device("my-zen4").peak_flops("fp32")[0] == pytest.approx(8 * 5e9 * 32)
    assert cat.device("amd-ryzen-9-7950x").peak_flops("fp32")[0] == pytest.approx(3e12)
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"devices": [{"id": "x", "name": "x", "kind": "cpu", "cores": "8 cores",
                                            "clock": "5 GHz", "microarchitecture": "zen9"}]}), encoding="utf-8")
    with pytest.raises(InputError, match="microarchitecture"):
        load_catalog([bad])


@pytest.mark.parametrize("clock,ok", [("5000", False), (5000, False), ("3.0", False), ("50 GHz", False),
                                      ("50 MHz", False), ({"value": "x"}, False), ([1, 2], False), (True, False),
                                      ("5000 MHz", True)])
def test_a_clock_needs_its_unit_and_a_cpu_range(tmp_path: Path, clock: object, ok: bool) -> None:
    """review21 D7: lscpu's 'CPU max MHz: 5000' written as a bare "5000" was read as 5,000 GHz (8 Zen 4 cores: 1.28
    PFLOP/s, rc 0). A clock without a unit, and one outside 0.1-10 GHz, is one line naming the field, exit 2, through
    the CLI; "5000 MHz" is 8 x 5.0e9 x 32 = 1.28 TFLOP/s."""
    from cli_capture import run

    f = tmp_path / "h.json"
    f.write_text(json.dumps({"devices": [{"id": "my", "name": "m", "kind": "cpu", "memory": "64GiB",
                                          "memory_bandwidth": "80GB/s", "cores": "8 cores", "clock": clock,
                                          "microarchitecture": "zen4"}]}), encoding="utf-8")
    code, out, err = run("infer", "llama-3.1-8b", "--hardware-file", str(f), "--device", "my", "--weights",
                         "gguf:q4_0", "--engine", "llamacpp")
    if ok:
        assert code == 0, err
        assert load_catalog([f]).device("my").peak_flops("fp32")[0] == pytest.approx(8 * 5.0e9 * 32)
        return
    assert code == 2 and len(err.strip().splitlines()) == 1, err
    assert "devices[my].clock" in err and ("unit" in err or "0.1 to 10 GHz" in err or "not a number" in err), err


def test_llamacpp_cpu_prefill_names_its_kernel_and_runs_at_the_fp32_peak() -> None:
    """llama.cpp's CPU products (llamafile sgemm.cpp): F16 on the FP32 FMA units, Q8_0/Q4_0 as int8 block dots with
    one FP32 FMA per 32-block (tinyBLAS_Q0). The published 7950X pp512 rates (XC01-XC03: 112.37, 118.07, 104.46
    tok/s, one build) are within 13 % of each other, so no int8 peak several times the FP32 one bounds the
    quantized kernels: all three are timed at the FP32 peak, and the assumption says which kernel runs."""
    from llmsizer.catalog.models import find_spec
    from llmsizer.estimate.speed import estimate_speed

    dev = builtin_catalog().devices["amd-ryzen-9-7950x"]
    rates = {}
    for fmt in ("gguf:f16", "gguf:q8_0", "gguf:q4_0"):
        s = estimate_speed(find_spec("llama-3.1-8b"), dev, weights_format=fmt, engine="llamacpp", prompt_tokens=512)
        kernel = next(a for a in s.assumptions if a.name == "llamacpp_cpu_kernel")
        assert ("tinyBLAS_Q0" in str(kernel.value)) == (fmt != "gguf:f16") and "fp32 FMA peak" in kernel.why
        rates[fmt] = s.prefill_tokens_per_second
    assert max(rates.values()) == pytest.approx(min(rates.values()), rel=1e-9)
    assert max(112.37, 118.07, 104.46) / min(112.37, 118.07, 104.46) < 1.14


def test_llamacpp_cpu_bf16_kernel_is_a_bf16_dot_not_int8() -> None:
    """BF16, the CPU default GGUF format: llama.cpp's ggml.c (ik_llama.cpp @0ceeb117 L922-932) gives GGML_TYPE_BF16
    ``vec_dot = ggml_vec_dot_bf16`` and ``vec_dot_type = GGML_TYPE_BF16`` (activations in BF16, not Q8), and
    sgemm.cpp's llamafile_sgemm there has no BF16 case (L849-1011); mainline's has one (ggml-org/llama.cpp @02e86cfd
    ggml/src/ggml-cpu/llamafile/sgemm.cpp, ``case GGML_TYPE_BF16``: tinyBLAS with _mm512_dpbf16_ps under
    __AVX512BF16__; probe19 D3), so the assumption names tinyBLAS BF16, the BF16 dot product and no int8 or Q8
    activations; a K-quant (Q8_K activations, ggml_vec_dot_q4_K_q8_K; no K-quant case in either llamafile_sgemm)
    keeps the int8 wording. Mainline's Q5_0 and IQ4_NL cases take tinyBLAS_Q0_AVX."""
    from llmsizer.catalog.models import find_spec
    from llmsizer.estimate.speed import estimate_speed

    dev = builtin_catalog().devices["amd-ryzen-9-7950x"]
    words = {}
    for fmt in ("gguf:bf16", "gguf:q4_k_m", "gguf:q5_0", "gguf:iq4_nl"):
        s = estimate_speed(find_spec("llama-3.1-8b"), dev, weights_format=fmt, engine="llamacpp", prompt_tokens=512)
        words[fmt] = str(next(a for a in s.assumptions if a.name == "llamacpp_cpu_kernel").value)
    assert "BF16 x BF16" in words["gguf:bf16"] and "vdpbf16ps" in words["gguf:bf16"]
    assert "int8" not in words["gguf:bf16"] and "Q8" not in words["gguf:bf16"]
    assert "int8" in words["gguf:q4_k_m"] and "Q8_K" in words["gguf:q4_k_m"]
    assert "tinyBLAS BF16" in words["gguf:bf16"] and "tinyBLAS" not in words["gguf:q4_k_m"].replace(
        "tinyBLAS has no kernel", "")
    assert all("tinyBLAS_Q0" in words[f] and "Q8_0" in words[f] for f in ("gguf:q5_0", "gguf:iq4_nl"))
