"""``kv_dtype="auto"`` is the model's own dtype, as vLLM (vllm/utils/torch_utils.py kv_cache_dtype_str_to_dtype:
``if kv_cache_dtype == "auto": return model_config.dtype``) and SGLang (model_runner.py: ``kv_cache_dtype == "auto"``
-> ``self.dtype``) resolve it; not bf16 whatever the model, and never a QuantizedCache for transformers. Checked on
checkpoints whose torch_dtype is not bf16, so a fixed bf16 fails."""

from __future__ import annotations

import pytest

from llmsizer import estimate_inference
from llmsizer.errors import FieldError, InputError
from llmsizer.formulas.kv_cache import kv_dtype_bytes, resolve_kv_dtype
from llmsizer.result import Estimate


def _kv(est: Estimate) -> int:
    return est.item("kv_cache").bytes


def test_auto_is_the_float16_checkpoint_dtype() -> None:
    # meta-llama/Llama-2-7b-hf config.json: torch_dtype float16
    for engine in ("transformers", "vllm", "sglang"):
        est = estimate_inference("llama-2-7b-hf", engine=engine, context=4096, kv_dtype="auto")
        kv = next(a for a in est.assumptions if a.name == "kv_dtype")
        assert kv.value == "fp16" and kv.why.startswith("auto -> fp16"), engine
        assert "(fp16)" in est.item("kv_cache").formula, engine
        assert not any("QuantizedCache" in w for w in est.warnings), engine
        assert "kv_dtype=fp16 (auto -> fp16: the model's dtype" in str(est), engine


def test_auto_is_the_float32_checkpoint_dtype() -> None:
    """stabilityai/stablelm-base-alpha-3b config.json: torch_dtype float32; run in fp32, its KV cache is fp32: 4 B
    an element, twice a bf16 cache (the old reading of auto)."""
    common = dict(engine="transformers", weights="fp32", context=2048, output_tokens=1)
    auto = estimate_inference("stablelm-base-alpha-3b", kv_dtype="auto", **common)
    bf16 = estimate_inference("stablelm-base-alpha-3b", kv_dtype="bf16", **common)
    fp32 = estimate_inference("stablelm-base-alpha-3b", kv_dtype="fp32", **common)
    assert _kv(auto) == _kv(fp32) == 2 * _kv(bf16)
    # 16 layers x 2 (K, V) x 32 heads x 128 head_dim x 2047 prompt tokens x 4 B (GPTNeoX config)
    assert _kv(auto) == 16 * 2 * 32 * 128 * 2047 * 4
    assert not any("QuantizedCache" in w for w in auto.warnings)


def test_auto_has_no_size_until_resolved() -> None:
    assert resolve_kv_dtype("auto", "float16") == "fp16"
    assert resolve_kv_dtype("AUTO", "fp32") == "fp32"
    assert resolve_kv_dtype("fp8", "fp32") == "fp8"
    with pytest.raises(InputError, match="auto"):
        kv_dtype_bytes("auto")


def _backend_warning(kv_dtype: str) -> str:
    est = estimate_inference("llama-3.1-8b", engine="transformers", kv_dtype=kv_dtype)
    return next(w for w in est.warnings if "QuantizedCache" in w)


def test_the_transformers_kv_warning_names_the_backend_transformers_has() -> None:
    """The warning names the QuantizedCache backend that stores each dtype, checked against transformers' own
    cache_utils.py: an fp8 cache is its fp8 backend (float8_e4m3fn), not quanto/HQQ, which store integers (quanto
    2 or 4 bits, HQQ 1-8); an int8 cache is HQQ's nbits=8. Before: "quanto/HQQ" for fp8."""
    import inspect
    torch = pytest.importorskip("torch")
    cu = pytest.importorskip("transformers.cache_utils")
    if not hasattr(cu, "Fp8QuantizedLayer"):
        pytest.skip("a transformers release before the fp8 QuantizedCache backend")
    assert cu.Fp8QuantizedLayer.fp8_dtype is torch.float8_e4m3fn
    assert '"fp8"' in inspect.getsource(cu.QuantizedCache.__init__)
    assert "nbits not in [2, 4]" in inspect.getsource(cu.QuantoQuantizedLayer.__init__)
    assert "nbits not in [1, 2, 3, 4, 8]" in inspect.getsource(cu.HQQQuantizedLayer.__init__)
    for fp8 in ("fp8", "fp8_e4m3"):
        w = _backend_warning(fp8)
        assert "backend='fp8'" in w and "float8_e4m3fn" in w and "quanto/HQQ" not in w, w
    assert "backend='hqq', nbits=8" in _backend_warning("int8")


def test_transformers_refuses_an_e5m2_cache_no_backend_stores() -> None:
    """No transformers cache stores float8_e5m2 (its fp8 backend is float8_e4m3fn, the others integers), so
    ``kv_dtype='fp8_e5m2'`` on transformers is refused on the kv_dtype field, naming what transformers stores and the
    engines that store e5m2; before, it was sized at 1 byte with a warning that no backend stores it (smalls2 #5)."""
    import inspect
    torch = pytest.importorskip("torch")
    cu = pytest.importorskip("transformers.cache_utils")
    if not hasattr(cu, "Fp8QuantizedLayer"):
        pytest.skip("a transformers release before the fp8 QuantizedCache backend")
    assert cu.Fp8QuantizedLayer.fp8_dtype is torch.float8_e4m3fn and "float8_e5m2" not in inspect.getsource(cu)
    with pytest.raises(FieldError) as e:
        estimate_inference("llama-3.1-8b", engine="transformers", kv_dtype="fp8_e5m2")
    assert e.value.field == "kv_dtype"
    assert "float8_e4m3fn only" in str(e.value) and "fp8_e5m2: engine vllm or sglang" in str(e.value), e.value
    for kvd in ("fp8", "fp8_e4m3", "int8"):  # the dtypes a backend stores still answer
        assert estimate_inference("llama-3.1-8b", engine="transformers", kv_dtype=kvd).item("kv_cache").bytes > 0
