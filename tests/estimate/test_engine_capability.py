"""vLLM's compute-capability gate (s7probe): a format vLLM refuses on a GPU is not sized as if it ran.

Independent truth: vLLM refuses a quantization method below QuantizationConfig.get_min_capability() ("The
quantization method awq is not supported for the current GPU. Minimum capability: 75. Current capability: 70." on a
V100, vllm-project/vllm#1488, #4202); AWQConfig's is 75 (quantization/awq.py, "The AWQ kernel only supports Turing
or newer GPUs"), Mxfp4Config's 80. NVIDIA's compute capabilities: V100 7.0, T4 7.5, A100 8.0. Before,
`fit llama-3.1-70b --device v100-sxm2-32gb --count 8 --weights awq-int4 --engine vllm` said FITS and `recommend`
listed 8 x V100 at awq-int4 among the options meeting the constraints.
"""

from __future__ import annotations

import contextlib
import io

import pytest

from llmsizer.cli.main import main
from llmsizer.errors import InputError
from llmsizer.estimate.fit import fit
from llmsizer.recommend import recommend_inference

CAPABILITY = {"v100-sxm2-32gb": 70, "v100-pcie-16gb": 70, "v100-sxm2-16gb": 70, "t4": 75, "a100-sxm-80gb": 80}
MIN_CAPABILITY = {"awq-int4": 75, "mxfp4": 80}


@pytest.mark.parametrize(("model", "device", "fmt"), [
    ("llama-3.1-8b", "v100-sxm2-32gb", "awq-int4"), ("llama-3.1-8b", "t4", "awq-int4"),
    ("llama-3.1-8b", "a100-sxm-80gb", "awq-int4"), ("gpt-oss-20b", "t4", "mxfp4"),
    ("gpt-oss-20b", "a100-sxm-80gb", "mxfp4")])
def test_fit_refuses_what_vllm_refuses(model: str, device: str, fmt: str) -> None:
    runs = CAPABILITY[device] >= MIN_CAPABILITY[fmt]
    if runs:
        assert fit(model, device, engine="vllm", weights=fmt).weights_format == fmt
    else:
        with pytest.raises(InputError, match="vLLM refuses"):
            fit(model, device, engine="vllm", weights=fmt)


def test_the_cli_says_it_in_one_line_with_exit_2() -> None:
    err = io.StringIO()
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(err):
        code = main(["fit", "llama-3.1-70b", "--engine", "vllm", "--device", "v100-sxm2-32gb", "--count", "8",
                     "--weights", "awq-int4"])
    assert code == 2 and err.getvalue().count("\n") == 1 and "compute capability 7.0" in err.getvalue()


def test_recommend_offers_no_format_vllm_refuses() -> None:
    rec = recommend_inference("llama-3.1-70b", context=32768, concurrency=16, engine="vllm")
    seen = 0
    for o in (*rec.options, *rec.rejected):
        if o.device in CAPABILITY and o.weights_format in MIN_CAPABILITY:
            assert CAPABILITY[o.device] >= MIN_CAPABILITY[o.weights_format], o
        if o.device.startswith("v100"):
            seen += 1
            assert o.status == "rejected" and any("refuses awq-int4" in r for r in o.reasons), o
    assert seen


def test_infer_on_the_device_says_the_same_as_fit() -> None:
    from llmsizer.estimate.inference import estimate_inference
    with pytest.raises(InputError, match="vLLM refuses awq-int4 on v100-sxm2-32gb"):
        estimate_inference("llama-3.1-8b", device="v100-sxm2-32gb", engine="vllm", weights="awq-int4")
    with pytest.raises(InputError, match="vLLM refuses mxfp4 on t4"):  # the checkpoint's own format, vLLM named
        estimate_inference("gpt-oss-20b", device="t4", engine="vllm")
    # with no engine named the one rule falls back to llama.cpp (tests/web/api/test_engine_fallback_one_answer.py)
    assert estimate_inference("gpt-oss-20b", device="t4").details["weights_format"] == "gguf:mxfp4_moe"
    assert estimate_inference("llama-3.1-8b", device="t4", engine="vllm", weights="awq-int4").details["fits"]


@pytest.mark.parametrize("device", ["v100-sxm2-32gb", "t4", "a100-sxm-80gb"])
def test_vllm_says_it_runs_bf16_as_fp16_below_ampere(device: str) -> None:
    """vllm/platforms/cuda.py CudaPlatformBase.supported_dtypes: no bf16 below compute capability 8.0, so --dtype
    auto loads Llama-3.1-8B's bf16 in fp16 on a V100 or T4; the memory is the same (2 bytes per value)."""
    from llmsizer.estimate.inference import estimate_inference
    below = CAPABILITY[device] < 80
    r = fit("llama-3.1-8b", device, engine="vllm")
    est = estimate_inference("llama-3.1-8b", device=device, engine="vllm")
    for warnings in (r.warnings, est.warnings):
        assert any("runs bf16 as fp16" in w for w in warnings) is below
    assert est.item("weights").bytes == 8_030_261_248 * 2  # the same bytes either way


# SGLang's gate is the same (python/sglang/srt/model_loader/loader.py _get_quantization_config raises "The quantization
# method awq is not supported for the current GPU. Minimum capability: 75. ..."), and its AWQConfig.get_min_capability
# is 75 (python/sglang/srt/layers/quantization/awq.py: "The AWQ kernel only supports Turing or newer GPUs").
@pytest.mark.parametrize("device", ["v100-sxm2-32gb", "t4", "a100-sxm-80gb"])
def test_sglang_refuses_awq_below_turing(device: str) -> None:
    from llmsizer.estimate.inference import estimate_inference
    if CAPABILITY[device] >= MIN_CAPABILITY["awq-int4"]:
        assert fit("llama-3.1-8b", device, engine="sglang", weights="awq-int4").weights_format == "awq-int4"
        assert estimate_inference("llama-3.1-8b", device=device, engine="sglang", weights="awq-int4")
    else:
        for ask in (lambda: fit("llama-3.1-8b", device, engine="sglang", weights="awq-int4"),
                    lambda: estimate_inference("llama-3.1-8b", device=device, engine="sglang", weights="awq-int4")):
            with pytest.raises(InputError, match=f"SGLang refuses awq-int4 on {device}"):
                ask()
