"""torch SDPA's math kernel runs its score matmuls in fp32 (#12 speed: they were timed at the BF16 GEMM rate).

Independent truth: torch's own ``_scaled_dot_product_attention_math`` (ATen attention.cpp: ``query_.to(at::kFloat)``
unless ``allowFP16BF16ReductionMathSDP``), observed here through a dispatch mode that records the dtype of every
batched matmul of a bf16 forward + backward forced onto the math backend; and the dense FP32 peak the catalog
sources for the GPU (the matmul does not use TF32 by default: ``torch.backends.cuda.matmul.allow_tf32`` False)."""

from __future__ import annotations

import pytest

from llmsizer.catalog.hardware import builtin_catalog
from llmsizer.estimate.duration import training_duration_for
from llmsizer.models import load_model

torch = pytest.importorskip("torch")


def _bmm_dtypes() -> list[torch.dtype]:
    import torch.nn.functional as F
    from torch.nn.attention import SDPBackend, sdpa_kernel
    from torch.utils._python_dispatch import TorchDispatchMode

    seen: list[torch.dtype] = []

    class Record(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # type: ignore[no-untyped-def]
            if func is torch.ops.aten.bmm.default:
                seen.extend(a.dtype for a in args)
            return func(*args, **(kwargs or {}))

    q = torch.randn(1, 2, 16, 8, dtype=torch.bfloat16, requires_grad=True)
    with sdpa_kernel(SDPBackend.MATH), Record():
        F.scaled_dot_product_attention(q, q, q, is_causal=True).sum().backward()
    return seen


def test_math_kernel_matmuls_are_fp32_in_torch() -> None:
    assert not torch.backends.cuda.matmul.allow_tf32
    assert not torch.backends.cuda.fp16_bf16_reduction_math_sdp_allowed()
    dtypes = _bmm_dtypes()
    assert len(dtypes) == 12 and set(dtypes) == {torch.float32}  # 2 forward + 4 backward bmm, two operands each


def test_math_kernel_is_timed_at_the_fp32_peak() -> None:
    """Falcon-7B's multi-query SDPA call runs the math kernel (test_attention_kernels.py): its score GEMMs are timed
    at the A100's 19.5 TFLOP/s FP32 peak, so the attention takes longer than at the 312 TFLOP/s BF16 rate."""
    dev = builtin_catalog().devices["a100-sxm-80gb"]
    spec = load_model("falcon-7b")
    d = training_duration_for(spec, dev, 1, 1e9, {"method": "lora", "seq_len": 2048, "micro_batch": 1})
    names = {a.name: a.value for a in d.assumptions}
    assert names["attention_kernel_timed"] == "math"
    assert names["math_kernel_matmul_peak"] == pytest.approx(19.5e12)
    eager = training_duration_for(spec, dev, 1, 1e9, {"method": "lora", "seq_len": 2048, "micro_batch": 1,
                                                      "attention": "eager"})
    assert "math_kernel_matmul_peak" not in {a.name for a in eager.assumptions}
    assert d.step is not None and eager.step is not None
    assert d.step.attention_seconds > eager.step.attention_seconds * 2


def test_math_kernel_under_tf32_without_a_sourced_tf32_peak_is_not_timed() -> None:
    """tf32 on a GPU with TF32 units but no sourced TF32 figure (DGX Spark's GB10: sm121,
    catalog flops.tf32 absent, fp32 given): the fp32 GEMMs' rule (device.fp32_matmul_peak: None, duration not
    estimated) holds for the math kernel's fp32 score matmuls too; they were timed at the BF16 peak. Falcon-7B's SDPA
    call runs the math kernel (above)."""
    dev = builtin_catalog().devices["dgx-spark"]
    assert dev.capability == 121 and dev.peak_flops("tf32")[0] is None and dev.peak_flops("fp32")[0] is not None
    spec = load_model("falcon-7b")
    run = {"method": "lora", "seq_len": 2048, "micro_batch": 1}
    assert training_duration_for(spec, dev, 1, 1e9, run).seconds is not None  # tf32 off: the FP32 peak, timed
    d = training_duration_for(spec, dev, 1, 1e9, {**run, "tf32": True})
    assert d.seconds is None and any("no sourced tf32 peak" in w for w in d.warnings), d.warnings
    # a model whose SDPA call takes a fused kernel: tf32 touches no matmul of a bf16 run, still timed
    assert training_duration_for(load_model("llama-3.2-1b"), dev, 1, 1e9, {**run, "tf32": True}).seconds is not None
