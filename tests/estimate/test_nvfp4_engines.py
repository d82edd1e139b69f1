"""Which engines load ModelOpt NVFP4 weights, on which GPUs (estimate/formats.py ``nvfp4_refused``,
``VLLM_MIN_CAPABILITY``, ``SGLANG_MIN_CAPABILITY``, ``nvfp4_kernel_note``), per the engines' own code: vLLM 0.19.1
ModelOptNvFp4Config.get_min_capability 75 (modelopt.py:1012-1014), SGLang 0.5.23 ModelOptFp4Config 80
(modelopt_quant.py:1548-1550), both weight-only FP4 Marlin below compute capability 10.0 (vLLM nvfp4_utils.py:39-66,
SGLang fp4_utils.py:154-158); transformers 5.24.0 refuses a pre-quantized NVFP4 checkpoint
(quantizer_nvfp4.py:52-54) and llama.cpp runs GGUF files."""

from __future__ import annotations

import pytest

from cli_capture import run
from llmsizer import estimate_inference
from llmsizer.catalog.hardware import builtin_catalog
from llmsizer.errors import FieldError
from llmsizer.estimate.formats import engine_refuses

MODEL = "nvidia/Qwen3-235B-A22B-NVFP4"


@pytest.mark.parametrize(("engine", "said"), [("transformers", "pre-quantized NVFP4"),
                                              ("llamacpp", "runs GGUF formats")])
def test_an_engine_that_does_not_load_it_exits_2_with_one_line(engine: str, said: str) -> None:
    code, out, err = run("infer", "qwen3-235b-a22b", "--engine", engine, "--weights", "nvfp4", "--memory", "400GiB")
    assert code == 2 and out == "" and err.count("\n") == 1 and said in err


def test_the_release_on_transformers_is_refused_naming_the_weights() -> None:
    with pytest.raises(FieldError, match="pre-quantized NVFP4") as e:
        estimate_inference(MODEL, engine="transformers", memory=400 * 2**30)
    assert e.value.field == "weights"


@pytest.mark.parametrize(("engine", "device", "refused"), [
    ("vllm", "v100-sxm2-16gb", True), ("vllm", "t4", False), ("sglang", "t4", True), ("sglang", "a100-sxm-80gb", False),
    ("vllm", "b200", False), ("sglang", "b200", False)])
def test_capability_gates(engine: str, device: str, refused: bool) -> None:
    assert (engine_refuses(engine, "nvfp4", builtin_catalog().device(device)) is not None) == refused


@pytest.mark.parametrize(("device", "marlin"), [("h100", True), ("b200", False)])
def test_below_blackwell_it_runs_as_weight_only_marlin(device: str, marlin: bool) -> None:
    est = estimate_inference(MODEL, engine="vllm", device=device, tensor_parallel=8)
    assert any("weight-only FP4 Marlin" in w for w in est.warnings) == marlin


@pytest.mark.parametrize(("engine", "warned"), [("vllm", True), ("sglang", False)])
def test_vllm_on_an_amd_gpu_says_it_emulates(engine: str, warned: bool) -> None:
    """vLLM picks NvFp4LinearBackend.EMULATION on ROCm (vllm-project/vllm pull 35733, merged 2026-03: NVFP4 dense
    models on MI300 / MI355X through emulation): the estimate says so; the weight bytes are the same as on a B200."""
    on_amd = estimate_inference(MODEL, engine=engine, device="mi300x", tensor_parallel=2)
    on_b200 = estimate_inference(MODEL, engine=engine, device="b200", tensor_parallel=2)
    assert any("emulation backend" in w for w in on_amd.warnings) == warned, on_amd.warnings
    assert not any("emulation backend" in w for w in on_b200.warnings)
    assert on_amd.item("weights").bytes == on_b200.item("weights").bytes
