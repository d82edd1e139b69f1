"""The INT8 rate llama.cpp's MMQ kernels are timed at where a catalog row sources none (probe18 D1a), and Volta's
path. Truth: the datasheet figures the catalog rows quote (each row's source), and ggml-cuda's own kernel choice."""

from __future__ import annotations

from dataclasses import replace

import pytest

from llmsizer.catalog.hardware import builtin_catalog
from llmsizer.estimate import efficiency as E
from llmsizer.estimate.device import INT8_TENSOR_RATIO, int8_peak
from llmsizer.estimate.fit import fit


def _nvidia() -> list:
    return [d for d in builtin_catalog().devices.values() if d.kind == "gpu" and d.vendor == "NVIDIA"]


def test_the_ratio_holds_on_every_row_that_sources_both_figures() -> None:
    """INT8_TENSOR_RATIO is read off the sourced rows: dense INT8 over dense FP16 (FP16 accumulate where given) on
    every NVIDIA GPU with INT8 MMA (capability >= 7.2) whose row quotes both, Blackwell Ultra (10.3) excepted."""
    rows = []
    for d in _nvidia():
        i8 = d.flops.get("int8")
        p16, _ = d.peak_flops("fp16_acc16")
        cc = d.capability
        if i8 is None or not i8.base or p16 is None or cc is None or cc < 72 or cc == 103:
            continue
        rows.append(d.id)
        assert float(i8.base) / p16 == pytest.approx(INT8_TENSOR_RATIO, rel=0.03), d.id
    assert len(rows) >= 20  # H100/H200/GH200, A100 x4, L40S/L40/L4, A40/A10/A10G, T4, RTX 4090/3090/6000 Ada/A6000..


def test_no_int8_rate_and_the_stand_in() -> None:
    cat = builtin_catalog().devices
    assert int8_peak(cat["h100-sxm"]) == (1978.9e12, None)  # sourced: no assumption
    # the H100 NVL datasheet's 'INT8 Tensor Core* | 3,341 TOPS' (with sparsity) / 2: sourced, no assumption
    assert int8_peak(cat["h100-nvl"]) == (1670.5e12, None)
    # every built-in NVIDIA row with INT8 MMA now gives an INT8 figure (devsrc38); the stand-in still serves a
    # hardware-file entry that gives none: the RTX 4080 SUPER row without its int8, 2 x its dense FP16-accumulate 208.8
    bare = replace(cat["rtx-4080-super"], flops={k: v for k, v in cat["rtx-4080-super"].flops.items() if k != "int8"})
    p, why = int8_peak(bare)
    assert p == pytest.approx(417.6e12) and why is not None and why.name == "int8_peak"
    assert int8_peak(cat["rtx-4080-super"]) == (418e12, None)  # NVIDIA's 836 AI TOPS (sparse INT8) / 2
    assert int8_peak(cat["v100-sxm2-32gb"]) == (None, None)  # Volta 7.0: FP16 tensor cores only
    assert int8_peak(cat["b300"])[1] is None  # Blackwell Ultra keeps its sourced (cut) INT8 figure


def test_volta_prefill_is_dequantized_to_cublas() -> None:
    """ggml-cuda mmq.cu ggml_cuda_should_use_mmq (@027ef876): no Turing MMA and FP16 MMA present -> MMQ only below
    MMQ_DP4A_MAX_BATCH_SIZE = 64 columns; a 512-column ubatch goes to F16 cuBLAS."""
    assert E.llamacpp_gemm_path("gguf:q4_k_m", "gpu", "NVIDIA", True, 7.0) == E.DEQUANT_CUBLAS_PATH
    assert E.llamacpp_gemm_path("gguf:q4_k_m", "gpu", "NVIDIA", True, 7.5) == E.MMQ_PATH
    assert E.llamacpp_gemm_path("gguf:q4_k_m", "gpu", "NVIDIA", True, 6.1) == E.MMQ_PATH  # dp4a, no FP16 MMA
    r = fit("llama-3.1-8b", "v100-sxm2-32gb", engine="llamacpp", weights="q4_k_m", context=768, output_tokens=256,
            fits_at=False)
    assert r.speed is not None
    names = {a.name: a.value for a in r.speed.assumptions}
    assert names.get("llamacpp_prefill_path") == E.DEQUANT_CUBLAS_PATH


def test_h100_nvl_not_faster_than_h100_sxm_beyond_their_peaks() -> None:
    """probe18 D1a: NVL llama.cpp prefill was 44,428 tok/s beside the SXM's 12,279. The NVL has 835 / 989.4 of the
    SXM's 16-bit tensor rate and 3.9 / 3.35 of its bandwidth: its prefill may not exceed the SXM's by more than the
    larger of the two ratios."""
    cat = builtin_catalog().devices
    nvl, sxm = cat["h100-nvl"], cat["h100-sxm"]
    bound = max(nvl.peak_flops("bf16")[0] / sxm.peak_flops("bf16")[0], nvl.bandwidth / sxm.bandwidth)  # type: ignore
    runs = {d: fit("llama-3.1-8b", d, engine="llamacpp", weights="q4_k_m", context=768, output_tokens=256,
                   fits_at=False).speed for d in ("h100-nvl", "h100-sxm")}
    assert runs["h100-nvl"] is not None and runs["h100-sxm"] is not None
    assert runs["h100-nvl"].prefill_tokens_per_second <= bound * runs["h100-sxm"].prefill_tokens_per_second
    for d in ("h100-nvl", "h100-sxm"):  # both with a sourced SM count: llama.cpp's SM stream cap applies to both
        assert not any("SM stream cap" in w for w in runs[d].warnings), d
        assert any(a.name == "llamacpp_sm_stream_limit" for a in runs[d].assumptions), d


def test_every_nvidia_row_with_int8_mma_gives_its_int8_figure() -> None:
    """devsrc38: no built-in NVIDIA GPU with INT8 MMA (capability >= 7.2, not Blackwell Ultra's cut 10.3) is timed on
    the int8_peak stand-in any more: each row gives flops.int8, a datasheet figure or one derived and saying how."""
    for d in _nvidia():
        cc = d.capability
        if cc is None or cc < 72 or cc == 103:
            continue
        i8 = d.flops.get("int8")
        assert i8 is not None and i8.base, d.id
        assert i8.source != "derived" or i8.derived, d.id
        assert int8_peak(d)[1] is None, d.id


# NVIDIA's own figures, typed from the pages the catalog sources name: 'AI TOPS' (GeForce Ada: INT8 with sparsity;
# GeForce / RTX PRO Blackwell: FP4 with sparsity) and the RTX Blackwell whitepaper's dense INT8 rows
AI_TOPS_ADA = {"rtx-4080-super": 836}
AI_TOPS_BLACKWELL = {"rtx-5060-ti-16gb": 759, "rtx-5060-ti-8gb": 759, "rtx-5060": 614, "rtx-5050": 421,
                     "rtx-pro-6000-workstation": 4000}
WHITEPAPER_INT8 = {"rtx-5090": (838, 170, 2.407), "rtx-5070": (246.9, 48, 2.512)}  # dense TOPS, SMs, boost GHz


def test_derived_int8_rows_agree_with_nvidia_s_published_rates() -> None:
    """The derived INT8 rows (SMs x boost x 2,048 on Blackwell; AI TOPS / 2 on Ada) against NVIDIA's figures they
    were not computed from: GeForce Ada's AI TOPS is sparse INT8, so dense = / 2; GeForce Blackwell's AI TOPS is
    sparse FP4, dense INT8 = FP4 dense / 2 = AI TOPS / 4 (the whitepaper's RTX 5090: 3,352 / 4 = 838). Within 1 %
    (AI TOPS are rounded; the PRO 6000's 4,000 is NVIDIA's rounding of 188 x 2.617 GHz x 8,192 = 4,030)."""
    cat = builtin_catalog().devices
    for ident, (tops, sms, ghz) in WHITEPAPER_INT8.items():
        assert tops * 1e3 / (sms * ghz) == pytest.approx(2048, rel=0.002), ident  # ops per SM per clock
        assert cat[ident].flops["int8"].base == pytest.approx(tops * 1e12), ident
    assert 3352 / 4 == 838
    for ident, ai in AI_TOPS_ADA.items():
        assert cat[ident].flops["int8"].base == pytest.approx(ai / 2 * 1e12, rel=0.01), ident
    for ident, ai in AI_TOPS_BLACKWELL.items():
        assert cat[ident].flops["int8"].base == pytest.approx(ai / 4 * 1e12, rel=0.01), ident
