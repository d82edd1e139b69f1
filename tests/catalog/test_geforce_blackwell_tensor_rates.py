"""GeForce RTX 50 tensor peaks: the dense FP16/BF16 rate with FP32 accumulate (what torch bf16/fp16 autocast runs at,
half the FP16-accumulate rate on GeForce), as NVIDIA's RTX Blackwell GPU Architecture whitepaper tables print it.

Before these rows the RTX 5080 and 5090 held the FP16-accumulate rate (225.1, 419: twice what a torch bf16 GEMM can
reach) and the RTX 5070 / 5070 Ti held none, so `train ... --device rtx-5070` had no duration. The published numbers
below are typed from the quoted tables (not from the catalog); each row must hold the number and quote it.

The RTX 5060 Ti, 5060 and 5050 (GB206, GB207) have no whitepaper table: their rows are SMs x boost clock x the
per-SM rate the four whitepaper cards share (issue #16), checked here against those cards' figures."""

from __future__ import annotations

import json
import re
from importlib import resources
from typing import Any

import pytest

from cli_capture import run_json
from llmsizer.catalog.hardware import builtin_catalog

DATA = resources.files("llmsizer.catalog.data").joinpath("hardware")

# (device, group, key): the whitepaper's number (dense unless group is flops_sparse), as quoted in public files that
# cite the PDF (the row's 'where' names the file), or gpumap-nvidia's rounded TF32 row
PUBLISHED = {
    ("rtx-5090", "flops", "bf16"): 209.5,  # Table 3 'BF16 209.5/419'
    ("rtx-5090", "flops", "fp16"): 209.5,
    ("rtx-5090", "flops", "fp8"): 419,  # Table 3 'FP8 FP32累加419/838'
    ("rtx-5090", "flops_sparse", "bf16"): 419,
    ("rtx-5090", "flops_sparse", "fp8"): 838,
    ("rtx-5080", "flops", "bf16"): 112.6,  # 'RTX 5080 | 112.6 | 225.1'
    ("rtx-5080", "flops", "fp16"): 112.6,
    ("rtx-5070-ti", "flops", "fp32"): 43.9,  # Appendix B Table 5 'FP32 (텐서 아님) | 43.9 TFLOPS'
    ("rtx-5070-ti", "flops", "bf16"): 87.9,  # 'BF16 텐서 (FP32 누산) | 87.9 TFLOPS'
    ("rtx-5070-ti", "flops", "fp16"): 87.9,  # 'FP16 텐서 (FP16 누산 / FP32 누산) | 175.8 / 87.9'
    ("rtx-5070-ti", "flops", "fp16_acc16"): 175.8,
    ("rtx-5070-ti", "flops", "fp8"): 175.8,  # 'FP8 텐서 (FP16 누산 / FP32 누산) | 351.5 / 175.8'
    ("rtx-5070", "flops", "bf16"): 61.7,  # Appendix C GB205 'Peak BF16 Tensor TFLOPS' '61.7/123.5'
    ("rtx-5070", "flops", "fp16"): 61.7,
    ("rtx-5070", "flops", "fp16_acc16"): 123.5,  # 'Peak FP16 Tensor TFLOPS' '123.5/246.9'
    ("rtx-5090", "flops", "tf32"): 105,  # gpumap-nvidia 'TF32 Tensor Core(TFLOPS) 105 | 56 | 44 | 31'
    ("rtx-5080", "flops", "tf32"): 56,
    ("rtx-5070-ti", "flops", "tf32"): 44,
    ("rtx-5070", "flops", "tf32"): 31,
}

# SMs and boost clock (MHz) of each card, from gpumap-nvidia's RTX 50 table ('SM(CU)数', 'GPU Boost频率(MHZ)'), and
# the GeForce Blackwell FP32-accumulate tensor rate per SM, 512 FLOP/clk (4 tensor cores x 128: half the 1024 of the
# FP16-accumulate path, as on GeForce Ada: RTX 4090 165.2 = 128 SMs x 2520 MHz x 512)
SM_CLOCK = {"rtx-5090": (170, 2407), "rtx-5080": (84, 2617), "rtx-5070-ti": (70, 2452), "rtx-5070": (48, 2512)}


def _rows() -> dict[str, Any]:
    return {d["id"]: d for d in json.loads(DATA.joinpath("accelerators.json").read_text("utf-8"))["devices"]}


@pytest.mark.parametrize(("dev", "group", "key"), sorted(PUBLISHED))
def test_each_added_figure_is_the_quoted_published_number(dev: str, group: str, key: str) -> None:
    row = _rows()[dev][group][key]
    published = PUBLISHED[(dev, group, key)]
    assert row["value"] == published and row["unit"] == "TFLOP/s"
    assert row["source"] in ("nvidia-rtx-blackwell-wp", "gpumap-nvidia")
    assert str(published) in row["where"], f"{dev}.{group}.{key}: the quote holds the number"
    assert builtin_catalog().devices[dev].values()[f"{group}.{key}"].base == pytest.approx(published * 1e12)


@pytest.mark.parametrize("dev", sorted(SM_CLOCK))
def test_the_bf16_figure_is_the_fp32_accumulate_rate_sms_x_clock_x_512(dev: str) -> None:
    """An independent check that the catalog holds the FP32-accumulate rate, not the FP16-accumulate one (2x) nor
    a sparse one (2x): SMs x boost clock x 512 FLOP/clk/SM, within the whitepaper's rounding."""
    sms, mhz = SM_CLOCK[dev]
    assert 165.2e12 == pytest.approx(128 * 2520e6 * 512, rel=1e-3)  # the per-SM rate, from the RTX 4090's table
    d = builtin_catalog().devices[dev]
    bf16, key = d.peak_flops("bf16")
    assert key == "bf16" and bf16 == pytest.approx(sms * mhz * 1e6 * 512, rel=2e-3)
    assert d.peak_flops("fp16")[0] == bf16
    # FP16 accumulate and FP8 (FP32 accumulate) run at twice the FP32-accumulate BF16 rate on GeForce Blackwell
    assert d.peak_flops("fp16_acc16")[0] == pytest.approx(2 * bf16, rel=2e-3)
    assert d.peak_flops("fp8")[0] == pytest.approx(2 * bf16, rel=2e-3)
    # GeForce TF32 runs at the FP32 CUDA-core rate, so tf32 is no speed-up (gpumap rounds to the TFLOP/s)
    fp32 = d.peak_flops("fp32")[0]
    assert fp32 is not None and d.peak_flops("tf32")[0] == pytest.approx(fp32, abs=0.5e12)


# "N SMs x M MHz x R FLOP/clk/SM": how a row states the SM count and boost clock its rate rests on
SM_TEXT = re.compile(r"(\d+) SMs x (\d+) MHz x (\d+) FLOP/clk/SM")
WHITEPAPER = sorted(SM_CLOCK)
DERIVED = ("rtx-5060-ti-16gb", "rtx-5060-ti-8gb", "rtx-5060", "rtx-5050")
# the dense rate per SM per clock each key runs at, as a multiple of the BF16 FP32-accumulate rate (FP16 with FP32
# accumulate = BF16; FP16 accumulate and FP8 with FP32 accumulate = 2 x; TF32 = the FP32 lanes, 1/2)
KEY_RATIO = {"bf16": 1.0, "fp16": 1.0, "fp16_acc16": 2.0, "fp8": 2.0, "tf32": 0.5}


def _stated_sm_clock(text: str) -> tuple[int, int, int]:
    m = SM_TEXT.search(text)
    assert m, f"no 'N SMs x M MHz x R FLOP/clk/SM' in {text[:80]!r}"
    sms, mhz, rate = (int(x) for x in m.groups())
    return sms, mhz, rate


def _per_sm_rates(key: str) -> dict[str, float]:
    """FLOP per SM per clock of each whitepaper card: the catalog figure / (the SMs x boost clock its bf16 note
    states), the note's numbers checked against gpumap-nvidia's table (SM_CLOCK)."""
    rows = _rows()
    out = {}
    for dev in WHITEPAPER:
        sms, mhz, _ = _stated_sm_clock(rows[dev]["flops"]["bf16"]["note"])
        assert (sms, mhz) == SM_CLOCK[dev], dev
        out[dev] = rows[dev]["flops"][key]["value"] * 1e12 / (sms * mhz * 1e6)
    return out


@pytest.mark.parametrize("key", ["bf16", "fp16", "fp16_acc16", "fp8"])
def test_the_whitepaper_cards_share_one_rate_per_sm_per_clock(key: str) -> None:
    """RTX 5070, 5070 Ti, 5080 and 5090 (GB205, GB203, GB202): the whitepaper figure / (SMs x boost clock) is one
    number per precision, within the whitepaper's rounding to 0.1 TFLOP/s (0.1 % at 61.7): 512 FLOP/clk/SM for BF16
    and FP16 with FP32 accumulate, 1024 for FP16 accumulate and FP8 (FP32 accumulate)."""
    rates = _per_sm_rates(key)
    assert max(rates.values()) / min(rates.values()) - 1 < 0.005, rates
    assert all(r == pytest.approx(512 * KEY_RATIO[key], rel=0.005) for r in rates.values()), rates


def test_the_whitepaper_cards_tf32_rate_per_sm_is_the_fp32_lanes() -> None:
    """gpumap-nvidia's TF32 rows are rounded to the TFLOP/s: 256 FLOP/clk/SM (128 FP32 lanes x 2) lies inside every
    card's rounding interval (v +- 0.5) / (SMs x clock)."""
    rows = _rows()
    for dev in WHITEPAPER:
        sms, mhz = SM_CLOCK[dev]
        v = rows[dev]["flops"]["tf32"]["value"]
        assert (v - 0.5) * 1e12 / (sms * mhz * 1e6) <= 256 <= (v + 0.5) * 1e12 / (sms * mhz * 1e6), dev


def test_the_stated_sms_x_clock_reproduce_nvidias_ai_tops() -> None:
    """NVIDIA's 'AI TOPS' (FP4 with sparsity) / (SMs x boost clock) is 8192 FLOP/clk/SM on the RTX 5090 and 5080
    (their catalog fp4 sparse rows) and on the RTX 5060 (614, filibuster-5060) and 5050 (421, hothardware-5050), as
    their derived rows quote them, with the SMs and clock those rows state: a vendor figure independent of the spec
    pages the SM counts come from."""
    rows = _rows()
    tops = {dev: rows[dev]["flops_sparse"]["fp4"]["value"] for dev in ("rtx-5090", "rtx-5080")}
    for dev in ("rtx-5060", "rtx-5050"):
        tops[dev] = float(re.search(r"'(\d+) (?:AI TOPS|TOPs)'", rows[dev]["flops"]["bf16"]["derived"]).group(1))  # type: ignore[union-attr]
    for dev, v in tops.items():
        text = rows[dev]["flops"]["bf16"].get("derived") or rows[dev]["flops"]["bf16"]["note"]
        sms, mhz, _ = _stated_sm_clock(text)
        assert v * 1e12 / (sms * mhz * 1e6) == pytest.approx(8192, rel=0.002), dev


@pytest.mark.parametrize("dev", DERIVED)
@pytest.mark.parametrize("key", sorted(KEY_RATIO))
def test_each_derived_row_is_its_stated_sms_x_clock_x_the_whitepaper_rate(dev: str, key: str) -> None:
    """GB206 / GB207 cards have no whitepaper table: each tensor row is SMs x boost clock x the per-SM rate, with
    the SMs and clock read from the row's own 'derived' text and the rate re-derived from the whitepaper cards."""
    row = _rows()[dev]["flops"][key]
    assert row["source"] == "derived" and row["unit"] == "TFLOP/s"
    sms, mhz, stated_rate = _stated_sm_clock(row["derived"])
    if key == "tf32":
        measured = 256.0  # test_the_whitepaper_cards_tf32_rate_per_sm_is_the_fp32_lanes
    else:
        rates = _per_sm_rates(key)
        measured = sum(rates.values()) / len(rates)
    assert stated_rate == pytest.approx(measured, rel=0.005)
    assert row["value"] == pytest.approx(sms * mhz * 1e6 * measured / 1e12, abs=0.06)  # rounded to 0.1 TFLOP/s
    assert f"= {row['value']}" in row["derived"]
    assert builtin_catalog().devices[dev].values()[f"flops.{key}"].base == pytest.approx(row["value"] * 1e12)


def test_derived_rows_name_only_recorded_sources_and_the_fp32_agrees() -> None:
    """Every source id a derived row names is in sources.json; where the card has a published FP32 (shader) rate,
    SMs x 128 lanes x 2 x the stated clock gives it (the spec pages' own arithmetic, to their rounding)."""
    sources = set(json.loads(DATA.joinpath("sources.json").read_text("utf-8"))["sources"])
    rows = _rows()
    for dev in DERIVED:
        for key in KEY_RATIO:
            text = rows[dev]["flops"][key]["derived"]
            named = set(re.findall(r"\b([a-z][a-z0-9]*(?:-[a-z0-9]+)+)\b", text)) & sources
            assert named, (dev, key)
            for src in ("fpsbench-5060ti16", "fpsbench-5060", "fpsbench-5050", "tpu-5060ti-tuf", "techspot-5060ti",
                        "iotech-5050", "hothardware-5050", "filibuster-5060", "nvidia-rtx-blackwell-wp", "gpumap-nvidia"):
                if src in text:
                    assert src in sources, src
        sms, mhz, _ = _stated_sm_clock(rows[dev]["flops"]["bf16"]["derived"])
        fp32 = rows[dev]["flops"]["fp32"]["value"]
        assert fp32 == pytest.approx(sms * 128 * 2 * mhz * 1e6 / 1e12, abs=0.51 if fp32 == round(fp32) else 0.006)


@pytest.mark.parametrize(("dev", "peak"), [("rtx-5070", 61.7e12), ("rtx-5070-ti", 87.9e12),
                                         ("rtx-5060-ti-16gb", 47.4e12)])
def test_train_on_the_card_now_has_a_duration_at_its_fp32_accumulate_peak(dev: str, peak: float) -> None:
    code, out = run_json("train", "qwen2.5-0.5b", "--method", "lora", "--device", dev, "--tokens", "1M")
    assert code == 0
    dur = out["duration"]
    assert dur is not None and dur["peak_key"] == "bf16" and dur["peak_flops"] == pytest.approx(peak)
    assert dur["seconds"] > 0


@pytest.mark.parametrize("dev", ["rtx-a6000", "rtx-6000-ada", "a100-sxm-80gb", "l40s"])
def test_professional_tf32_is_half_the_fp32_accumulate_half_precision_rate(dev: str) -> None:
    """On Ampere and Ada professional / data-centre parts TF32 runs at half the FP16/BF16 FP32-accumulate rate (A100
    datasheet 156 vs 312; L40S 183 vs 362): the RTX A6000 and RTX 6000 Ada figures (gpumap-nvidia, rounded) keep it."""
    d = builtin_catalog().devices[dev]
    half = d.peak_flops("bf16")[0]
    tf32 = d.peak_flops("tf32")[0]
    assert half is not None and tf32 is not None and tf32 == pytest.approx(half / 2, rel=0.02)
