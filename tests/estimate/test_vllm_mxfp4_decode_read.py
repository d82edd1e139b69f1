"""vLLM's MXFP4 MoE kernels read each routed expert at the sizes they run at (formulas/vllm_mxfp4.py eq. X4).

The truth is the operands vLLM 0.19.1 hands each backend's kernel for gpt-oss-20b (openai/gpt-oss-20b config.json:
hidden_size 2880, intermediate_size 2880, num_local_experts 32, experts_per_token 4, num_hidden_layers 24), rebuilt
from its code, never llmsizer's output:

  the routed input is padded to the rounded hidden size (fused_moe/runner/default_moe_runner.py:447-467, F.pad to
  moe_config.hidden_dim, which layer.py:536-547 sets to the backend's rounding: Marlin H to 256, I to 128; FlashInfer
  TRT-LLM both to 256; Triton I to 64 (oracle/mxfp4.py:376-400));
  Marlin: gemm1 size_n = 2 N, size_k = K, gemm2 size_n = K, size_k = N with K the padded input's width and N = I_p
  (fused_marlin_moe.py:89-90, :147-148, :199-200), 4-bit values, E8M0 scales per 32, bf16 biases;
  TRT-LLM: intermediate_size = the rounded I (experts/trtllm_mxfp4_moe.py:44-47, :214), float32 biases;
  Triton: the unpadded H, I, its swizzled scales (one byte per 32 values) and float32 biases;
against the checkpoint's experts (gate_up_proj / down_proj _blocks, _scales, bf16 _bias)."""

from __future__ import annotations

import pytest

from llmsizer.catalog.hardware import load_catalog
from llmsizer.estimate.speed import estimate_speed
from llmsizer.formulas.vllm_mxfp4 import vllm_mxfp4_extra_bytes
from llmsizer.models import load_model

H, I_FULL, E, TOP_K, LAYERS = 2880, 2880, 32, 4, 24  # openai/gpt-oss-20b config.json


def _up(x: int, m: int) -> int:
    return (x + m - 1) // m * m


def kernel_operands(k: int, n: int, bias_bytes: int) -> int:
    """One expert's bytes a kernel of input width ``k`` and intermediate ``n`` reads: w13 [2n, k] and w2 [k, n]
    4-bit values, their E8M0 scales (1 B per 32 along the reduced dimension), biases [2n] and [k]."""
    return (2 * n * k + k * n) // 2 + (2 * n * k // 32 + k * n // 32) + bias_bytes * (2 * n + k)


def checkpoint_expert(h: int, i: int) -> int:
    """One expert in the checkpoint: gate_up_proj_blocks [2i, h/32, 16] + _scales [2i, h/32] + bf16 _bias [2i], and
    down_proj_blocks [h, i/32, 16] + _scales [h, i/32] + bf16 _bias [h]."""
    return 2 * i * (h // 32) * 16 + 2 * i * (h // 32) + 2 * 2 * i + h * (i // 32) * 16 + h * (i // 32) + 2 * h


def read_per_expert(backend: str, i: int) -> int:
    if backend == "marlin":
        return kernel_operands(_up(H, 256), _up(i, 128), 2)
    if backend == "flashinfer_trtllm":
        return kernel_operands(_up(H, 256), _up(i, 256), 4)
    return kernel_operands(H, _up(i, 64), 4)


@pytest.mark.parametrize("tp", [1, 2])
@pytest.mark.parametrize("backend", ["triton", "marlin", "flashinfer_trtllm"])
def test_the_read_extra_is_the_kernels_operands_less_the_checkpoint(backend: str, tp: int) -> None:
    i = I_FULL // tp
    assert vllm_mxfp4_extra_bytes(backend, LAYERS, E, H, i, read=True) == LAYERS * E * (
        read_per_expert(backend, i) - checkpoint_expert(H, i))


def test_gpt_oss_20b_read_by_hand() -> None:
    """TP 1 per expert: checkpoint 13,236,480 B (values 12,441,600, scales 777,600, biases 17,280); Marlin at
    3072 x 2944 reads 14,431,744 (+1,195,264, what it holds beyond the checkpoint: eq. X2's padding is all read);
    TRT-LLM at 3072 x 3072 15,077,376 (+1,840,896); Triton 13,253,760 (+17,280: float32 biases only, its swizzled
    scales read in place of the loaded ones)."""
    assert checkpoint_expert(H, I_FULL) == 13_236_480
    assert [read_per_expert(b, I_FULL) for b in ("marlin", "flashinfer_trtllm", "triton")] == [
        14_431_744, 15_077_376, 13_253_760]
    assert vllm_mxfp4_extra_bytes("marlin", LAYERS, E, H, I_FULL, read=True) == 768 * 1_195_264
    assert vllm_mxfp4_extra_bytes("flashinfer_trtllm", LAYERS, E, H, I_FULL, read=True) == 768 * 1_840_896
    assert vllm_mxfp4_extra_bytes("triton", LAYERS, E, H, I_FULL, read=True) == 768 * 17_280


@pytest.mark.parametrize(("device", "backend"), [("a100-80gb", "marlin"), ("b200", "flashinfer_trtllm"),
                                                 ("rtx-5090", "marlin")])
def test_a_decode_step_reads_the_backends_padded_experts(device: str, backend: str) -> None:
    """Against Hopper's Triton on the same model: the weights a step reads differ by the experts' read bytes, and a
    one-sequence decode step reads their routed share, top-4 of 32 experts (formulas/speed.py eq. 5 at b = 1)."""
    spec = load_model("gpt-oss-20b")
    cat = load_catalog()

    def speed(dev: str) -> tuple[float, float, str]:
        sp = estimate_speed(spec, cat.device(dev), weights_format="mxfp4", engine="vllm")
        said = next(a for a in sp.assumptions if a.name == "mxfp4_expert_read")
        return sp.details["weights_bytes"], sp.details["weight_bytes_per_decode_step"], str(said.value)

    w, step, said = speed(device)
    w_h, step_h, said_h = speed("h100-sxm")
    assert (said, said_h) == (backend, "triton")
    delta = LAYERS * E * (read_per_expert(backend, I_FULL) - read_per_expert("triton", I_FULL))
    assert w - w_h == delta
    assert step - step_h == pytest.approx(delta * TOP_K / E, rel=1e-9)


def test_other_engines_read_the_checkpoint() -> None:
    spec = load_model("gpt-oss-20b")
    sp = estimate_speed(spec, load_catalog().device("a100-80gb"), weights_format="mxfp4", engine="sglang")
    assert not any(a.name == "mxfp4_expert_read" for a in sp.assumptions)
