"""A weight format that costs more quality than Q4_0 says so on every surface that chooses or takes a format.

Truth: llama.cpp's own quantize help (tools/quantize/quantize.cpp ``QUANT_OPTIONS`` @ 03161a4e), perplexity increase
over the unquantized model on Llama-3-8B, copied here from that file (not from our table).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from cli_capture import run

LLAMA_CPP_PPL = {"Q2_K": "+3.5199", "Q3_K_M": "+0.6569", "Q4_0": "+0.4685", "Q4_K_M": "+0.1754", "Q8_0": "+0.0026"}
WORSE_THAN_Q4_0 = [t for t, v in LLAMA_CPP_PPL.items() if float(v) > float(LLAMA_CPP_PPL["Q4_0"])]


def _quality_lines(out: str) -> list[str]:
    return [ln for ln in out.splitlines() if "costs quality" in ln]


@pytest.mark.parametrize("ftype", list(LLAMA_CPP_PPL))
def test_fit_warns_below_q4_0_only(ftype: str) -> None:
    code, out, err = run("fit", "qwen2.5-7b", "--device", "rtx-5060", "--weights", ftype.lower(), "--context", "8k")
    lines = _quality_lines(out + err)
    if ftype in WORSE_THAN_Q4_0:
        assert len(lines) == 1 and ftype in lines[0]
        assert f"+{float(LLAMA_CPP_PPL[ftype]):.2f}" in lines[0]
    else:
        assert lines == []


def test_recommend_names_the_quality_cost_of_q2_k_it_chose() -> None:
    # probe4 finding (#12): a CPU at Q2_K, 5.4 tokens/s, with nothing said of the quality
    code, out, err = run("recommend", "qwen2.5-7b", "--context", "8k")
    assert "at Q2_K" in out
    assert any("Q2_K" in ln and "+3.52" in ln for ln in _quality_lines(out + err))


def test_fit_auto_and_plan_carry_it(tmp_path: Path) -> None:
    code, out, err = run("fit", "qwen2.5-7b", "--device", "rtx-5060", "--auto", "--weights", "q3_k_m")
    assert any("Q3_K_M" in ln for ln in _quality_lines(out + err))
    example = Path(__file__).parents[2] / "examples" / "cpu-internal-tool.yaml"
    req = tmp_path / "req.yaml"
    req.write_text(example.read_text().replace("quantization: q4_k_m", "quantization: q2_k"))
    code, out, err = run("plan", str(req))
    assert any("Q2_K" in ln for ln in _quality_lines(out + err))
    code, out, err = run("plan", str(example))
    assert _quality_lines(out + err) == []


def test_a_quantized_release_is_rated_once_on_every_surface() -> None:
    """review9 #4: gpt-oss is published in MXFP4. llama.cpp's table measures each type from a 16-bit model, so Q2_K
    of it is 'not rated' in the models --fits-on cell and in fit's warning alike (not "+3.52 on Llama-3-8B" in one and
    "not rated" in the other); a 16-bit copy holds the same MXFP4 values: 'as released', not 'unquantized'."""
    from llmsizer.estimate.formats import format_quality, quality_warning
    code, out, err = run("fit", "gpt-oss-20b", "--device", "rtx-3090", "--engine", "llamacpp", "--weights", "q2_k")
    said = [ln for ln in (out + err).splitlines() if "Q2_K" in ln and "warning" in ln]
    assert _quality_lines(out + err) == [] and len(said) == 1 and "not rated" in said[0]
    assert format_quality("gguf:q2_k", "mxfp4") == "not rated (re-quantized from mxfp4)"
    assert "not rated" in (quality_warning("gguf:q2_k", "mxfp4") or "")
    for up in ("bf16", "gguf:bf16", "gguf:f16"):
        assert format_quality(up, "mxfp4") == "as released (mxfp4)" and quality_warning(up, "mxfp4") is None
    assert format_quality("gguf:q2_k", "bf16") == f"+{float(LLAMA_CPP_PPL['Q2_K']):.2f} ppl (below Q4_0)"
