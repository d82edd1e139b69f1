"""formulas/flash_attention.py: the flash-attention kernel ggml-cuda runs, case by case against the branches of
ggml_cuda_get_best_fattn_kernel (ggml-org/ggml src/ggml-cuda/fattn.cu @7b6abb2 L199-326, the 2025-11-04 sync of
llama.cpp's ggml/src/ggml-cuda/fattn.cu), and the K/V stream time of eq. F1."""

from __future__ import annotations

import pytest

from llmsizer.catalog.hardware import ARCHITECTURE_CAPABILITY, builtin_catalog
from llmsizer.catalog.models import find
from llmsizer.errors import InputError
from llmsizer.estimate.speed import estimate_speed
from llmsizer.formulas.flash_attention import (
    MMA_F16,
    TILE,
    VEC,
    WMMA_F16,
    fattn_kernel,
    fattn_stream_seconds,
    padded_kv_cells,
)

ADA, AMPERE, BLACKWELL, VOLTA, PASCAL = 890, 800, 1210, 700, 610  # DGX Spark's GB10 is sm_121


def test_one_stream_one_token_takes_the_vector_kernel_on_ada_and_newer() -> None:
    """L281: F16 K/V, cc >= Ada, Q->ne[1] == 1 and Q->ne[3] == 1: vec, whatever the GQA ratio ..."""
    for heads, kv in ((8, 4), (28, 4), (32, 8), (32, 32)):
        assert fattn_kernel(128, heads, kv, 1, 1, 4096, ADA) == VEC
    # ... except a GQA ratio above 4 over 8192 cells or more (the tensor-core kernel packs the heads)
    assert fattn_kernel(128, 32, 4, 1, 1, 8192, ADA) == MMA_F16
    assert fattn_kernel(128, 32, 8, 1, 1, 8192, ADA) == VEC  # ratio 4 is not above 4


def test_several_streams_leave_the_vector_kernel_when_the_gqa_ratio_is_even() -> None:
    """L281 needs Q->ne[3] == 1; L295 keeps vec for one column only without the GQA packing (L219: even ratio, a mask,
    no ALiBi, n_kv a multiple of 256); else mma_f16 (L300)."""
    assert fattn_kernel(256, 8, 4, 1, 16, 768, BLACKWELL) == MMA_F16  # Gemma 3 4B: ratio 2
    assert fattn_kernel(128, 28, 4, 1, 16, 768, BLACKWELL) == VEC  # Qwen2.5-7B: ratio 7
    assert fattn_kernel(64, 64, 8, 1, 16, 768, BLACKWELL) == MMA_F16  # gpt-oss: ratio 8
    assert fattn_kernel(128, 28, 4, 1, 16, 768, BLACKWELL, alibi=True) == VEC
    assert fattn_kernel(128, 32, 4, 1, 16, 768, BLACKWELL, mask=False) == VEC  # no mask: no GQA packing
    assert fattn_kernel(128, 28, 4, 2, 1, 768, BLACKWELL) == MMA_F16  # two tokens in one stream (-kvu, b = 2)


def test_quantized_kv_keeps_the_vector_kernel_for_up_to_two_columns_on_ada() -> None:
    """L285-293: a quantized K/V cache takes vec for Q->ne[1] <= 2 on Ada and newer, == 1 before, whatever the
    stream count (the Q->ne[3] test of L281 is for F16 only)."""
    assert fattn_kernel(128, 32, 8, 2, 1, 512, ADA, kv_quantized=True) == VEC
    assert fattn_kernel(128, 32, 8, 1, 16, 512, ADA, kv_quantized=True) == VEC
    assert fattn_kernel(128, 32, 8, 2, 1, 512, AMPERE, kv_quantized=True) == MMA_F16
    assert fattn_kernel(128, 32, 8, 1, 1, 512, AMPERE, kv_quantized=True) == VEC
    assert fattn_kernel(128, 32, 8, 3, 1, 512, ADA, kv_quantized=True) == MMA_F16


def test_before_ada_f16_takes_the_tensor_core_kernel_unless_the_gqa_packing_fails() -> None:
    """Turing/Ampere: L281 is Ada-only; L295 still gives vec for one column without the GQA packing."""
    assert fattn_kernel(128, 32, 8, 1, 1, 512, AMPERE) == MMA_F16
    assert fattn_kernel(128, 28, 4, 1, 1, 512, AMPERE) == VEC


def test_volta_and_older_gpus() -> None:
    """L304-308: Volta runs WMMA, vec up to two columns; L312-325: without tensor cores the tile kernel, vec for
    one F16 column without the GQA packing or up to two quantized columns."""
    assert fattn_kernel(128, 32, 8, 1, 1, 512, VOLTA) == VEC
    assert fattn_kernel(128, 32, 8, 4, 1, 512, VOLTA) == WMMA_F16
    assert fattn_kernel(128, 32, 8, 1, 1, 512, PASCAL) == TILE
    assert fattn_kernel(128, 28, 4, 1, 1, 512, PASCAL) == VEC
    assert fattn_kernel(128, 32, 8, 2, 1, 512, PASCAL, kv_quantized=True) == VEC


def test_shapes_without_a_kernel_and_unpadded_caches() -> None:
    """L223-245: head sizes 40-256 with V equal to K, 576/512 (MLA) only with a GQA ratio that is a multiple of 16;
    an n_kv that is not a multiple of 256 turns the tensor-core and vector kernels off (L278, L275): tile."""
    assert fattn_kernel(192, 32, 8, 1, 1, 512, ADA) is None
    assert fattn_kernel(128, 32, 8, 1, 1, 512, ADA, head_dim_v=64) is None
    assert fattn_kernel(576, 128, 1, 1, 4, 512, ADA, head_dim_v=512) == MMA_F16
    assert fattn_kernel(576, 8, 1, 1, 4, 512, ADA, head_dim_v=512) is None
    assert fattn_kernel(128, 32, 8, 1, 4, 500, ADA) == TILE
    with pytest.raises(InputError):
        fattn_kernel(128, 30, 8, 1, 1, 512, ADA)


def test_padding_and_stream_time() -> None:
    """n_kv rounds up to 256 cells (llama-kv-cache.cpp get_n_kv, llama.cpp PR #16812); eq. F1 divides by the share."""
    assert [padded_kv_cells(c) for c in (0, 1, 256, 257, 8224)] == [256, 256, 256, 512, 8448]
    assert fattn_stream_seconds(1e9, 1e11, 0.5, 0.5) == pytest.approx(0.04)
    with pytest.raises(InputError):
        fattn_stream_seconds(1e9, 1e11, 0.5, 0.0)


def test_catalog_architectures_map_to_their_compute_capability() -> None:
    """Every NVIDIA architecture the catalog names is mapped (else a hardware file's GPU that names only its
    architecture would silently skip eq. F1); catalog rows state their own compute_capability
    (tests/hardware/test_compute_capability.py)."""
    archs = {d.architecture for d in builtin_catalog().devices.values()
             if d.vendor == "NVIDIA" and d.kind == "gpu" and d.architecture}
    assert archs <= set(ARCHITECTURE_CAPABILITY), archs - set(ARCHITECTURE_CAPABILITY)


@pytest.mark.parametrize(("model", "fmt", "kernel"), [
    ("gemma-3-4b-it", "gguf:q4_0", MMA_F16), ("qwen2.5-7b", "gguf:q8_0", VEC), ("gpt-oss-20b", "gguf:mxfp4_moe", MMA_F16),
    ("qwen3-30b-a3b", "gguf:q8_0", MMA_F16)])
def test_the_estimate_names_the_kernel_of_a_batched_step(model: str, fmt: str, kernel: str) -> None:
    """The DGX Spark models of llama-batched-bench: with one stream per sequence, only Qwen2.5's odd ratio keeps vec."""
    s = estimate_speed(find(model).spec(), builtin_catalog().devices["dgx-spark"], weights_format=fmt,
                       prompt_tokens=512, output_tokens=32, concurrency=8, kv_dtype="fp16", ubatch=2048,
                       kv_unified=False)
    names = {a.name: a.value for a in s.assumptions}
    assert names["llamacpp_fattn_kernel"] == kernel
    assert names["llamacpp_fa_stream_share"] == pytest.approx(0.74)


def test_no_flash_attention_streams_at_the_weight_rate() -> None:
    """-fa off (or a K/V type without a kernel, BF16 here) reads the cells at the weight stream's rate: faster."""
    spec, dev = find("qwen2.5-7b").spec(), builtin_catalog().devices["dgx-spark"]
    kw = dict(weights_format="gguf:q8_0", prompt_tokens=8192, output_tokens=32, concurrency=8, ubatch=2048,
              kv_unified=False)
    fa = estimate_speed(spec, dev, kv_dtype="fp16", **kw)  # type: ignore[arg-type]
    bf16 = estimate_speed(spec, dev, kv_dtype="bf16", **kw)  # type: ignore[arg-type]
    assert "llamacpp_fattn_kernel" not in {a.name for a in bf16.assumptions}
    assert fa.decode is not None and bf16.decode is not None and fa.decode.seconds > bf16.decode.seconds
