"""vLLM's MXFP4 MoE under tensor parallelism: each rank's experts at its own padded sizes, held and read
(formulas/vllm_mxfp4.py eqs. X1-X4; issue #12/#16).

The truth is vLLM 0.19.1's own rounding, rebuilt here for gpt-oss-20b (openai/gpt-oss-20b config.json: hidden_size
2880, intermediate_size 2880, num_local_experts 32, experts_per_token 4, num_hidden_layers 24), never llmsizer's
output:

  FusedMoE splits the intermediate size first, ``intermediate_size_per_partition = intermediate_size // tp_size``
  (model_executor/layers/fused_moe/layer.py:425-426), then the quant method rounds that per-rank size and the hidden
  size (layer.py:536-547 -> quantization/mxfp4.py:121-136 -> fused_moe/oracle/mxfp4.py:376-400
  ``mxfp4_round_up_hidden_size_and_intermediate_size``): Marlin I to 128 and H to 256, FlashInfer TRT-LLM both to
  256, Triton I to 64 (H unpadded); create_weights makes every rank's expert tensors at those sizes
  (quantization/mxfp4.py:157-229). The checkpoint's loader hands a rank ceil(90 / tp) scale groups of I
  (models/gpt_oss.py:366-375), at most 736 at TP 4 and 384 at TP 8, inside every backend's padded size.

Per-rank (H_p, I_p), worked by hand:

  TP   I / TP   Marlin          Triton          TRT-LLM
  1    2880     (3072, 2944)    (2880, 2880)    (3072, 3072)
  2    1440     (3072, 1536)    (2880, 1472)    (3072, 1536)
  4     720     (3072,  768)    (2880,  768)    (3072,  768)
  8     360     (3072,  384)    (2880,  384)    (3072,  512)

so a rank's padding is not 1 / TP of the single GPU's (Marlin TP 2: 1536, not 2944 / 2 = 1472; TRT-LLM TP 8: 512,
not 384)."""

from __future__ import annotations

import math

import pytest

from llmsizer import estimate_inference
from llmsizer.catalog.hardware import load_catalog
from llmsizer.estimate.speed import estimate_speed
from llmsizer.formulas.vllm_mxfp4 import vllm_mxfp4_padded_sizes
from llmsizer.models import load_model

H, I_FULL, E, TOP_K, LAYERS = 2880, 2880, 32, 4, 24  # openai/gpt-oss-20b config.json
F32, BF16, U8 = 4, 2, 1

BY_HAND = {  # tp: {backend: (H_p, I_p)}, the table above
    1: {"marlin": (3072, 2944), "triton": (2880, 2880), "flashinfer_trtllm": (3072, 3072)},
    2: {"marlin": (3072, 1536), "triton": (2880, 1472), "flashinfer_trtllm": (3072, 1536)},
    4: {"marlin": (3072, 768), "triton": (2880, 768), "flashinfer_trtllm": (3072, 768)},
    8: {"marlin": (3072, 384), "triton": (2880, 384), "flashinfer_trtllm": (3072, 512)},
}
DEVICES = (("a100-80gb", "marlin"), ("b200", "flashinfer_trtllm"))


def _bytes(tensors: list[tuple[tuple[int, ...], int]]) -> int:
    return sum(math.prod(shape) * size for shape, size in tensors)


def created(backend: str, tp: int) -> list[tuple[tuple[int, ...], int]]:
    """One layer's expert tensors a rank creates (quantization/mxfp4.py:157-229) at the table's sizes, with the
    dtypes each backend keeps after loading: w13 [E, 2 I_p, H_p / 2] and w2 [E, H_p, I_p / 2] 4-bit values, their
    E8M0 scales (1 B per 32), biases [E, 2 I_p] and [E, H_p] (bf16 on Marlin, float32 on Triton and TRT-LLM:
    oracle/mxfp4.py:457-458, :725-726)."""
    hp, ip = BY_HAND[tp][backend]
    bias = BF16 if backend == "marlin" else F32
    return [((E, 2 * ip, hp // 2), U8), ((E, hp, ip // 2), U8), ((E, 2 * ip, hp // 32), U8),
            ((E, hp, ip // 32), U8), ((E, 2 * ip), bias), ((E, hp), bias)]


def resident(backend: str, tp: int) -> list[tuple[tuple[int, ...], int]]:
    """What a rank holds: the created tensors, + Triton's Hopper-swizzled scales beside the loaded ones (rows to
    2 x 8 warps x 2 x 8 = 256, groups to 2: triton_kernels hopper_scale.py) + TRT-LLM's three float32 [E] per layer
    (experts/trtllm_mxfp4_moe.py:51-68)."""
    out = created(backend, tp)
    hp, ip = BY_HAND[tp][backend]
    if backend == "triton":
        out += [((E, -(-2 * ip // 256) * 256, -(-(hp // 32) // 2) * 2), U8),
                ((E, -(-hp // 256) * 256, -(-(ip // 32) // 2) * 2), U8)]
    if backend == "flashinfer_trtllm":
        out += [((E,), F32)] * 3
    return out


@pytest.mark.parametrize("tp", [1, 2, 4, 8])
@pytest.mark.parametrize("backend", ["marlin", "triton", "flashinfer_trtllm"])
def test_each_rank_pads_its_own_intermediate_size(backend: str, tp: int) -> None:
    assert vllm_mxfp4_padded_sizes(backend, H, I_FULL // tp) == BY_HAND[tp][backend]


@pytest.mark.parametrize("tp", [1, 2, 4, 8])
@pytest.mark.parametrize(("device", "backend"), DEVICES)
def test_the_weights_per_device_hold_the_ranks_padded_tensors(device: str, backend: str, tp: int) -> None:
    """Against the same model sized for Hopper (no device named: the Triton backend) at the same TP: the per-device
    weights differ by the two backends' per-rank tensors (the checkpoint's share, the same on both, cancels)."""
    est = estimate_inference("gpt-oss-20b", engine="vllm", device=device, tensor_parallel=tp, context=4096)
    hopper = estimate_inference("gpt-oss-20b", engine="vllm", memory="79.18GiB", tensor_parallel=tp, context=4096)
    assert next(a.value for a in est.assumptions if a.name == "vllm_mxfp4_backend") == backend
    assert est.item("weights").bytes - hopper.item("weights").bytes == LAYERS * (
        _bytes(resident(backend, tp)) - _bytes(resident("triton", tp)))


def _step(device: str, tp: int, engine: str = "vllm") -> float:
    sp = estimate_speed(load_model("gpt-oss-20b"), load_catalog().device(device), tp, weights_format="mxfp4",
                        engine=engine, tensor_parallel=tp)
    return float(sp.details["weight_bytes_per_decode_step"])


@pytest.mark.parametrize("tp", [1, 2, 4, 8])
@pytest.mark.parametrize(("device", "backend"), DEVICES)
def test_a_ranks_decode_step_reads_its_padded_experts(device: str, backend: str, tp: int) -> None:
    """One sequence's decode step on one rank reads its routed share (top 4 of 32, eq. 5 at b = 1) of its own padded
    expert shards: against Hopper's Triton at the same TP, the difference is the two backends' created tensors
    (Triton reads its swizzled scales in place of the loaded copy: created() is what each kernel reads, eq. X4)."""
    delta = LAYERS * (_bytes(created(backend, tp)) - _bytes(created("triton", tp)))
    assert _step(device, tp) - _step("h100-sxm", tp) == pytest.approx(delta * TOP_K / E, rel=1e-9)


@pytest.mark.parametrize("tp", [1, 2, 4, 8])
def test_triton_ranks_read_their_padding_beyond_the_checkpoint(tp: int) -> None:
    """On an H100 against SGLang, which reads the checkpoint's experts: the rank reads its Triton tensors less its
    checkpoint share, in its routed share. The share: 1 / TP of the checkpoint's split tensors (gate_up_proj /
    down_proj _blocks and _scales, gate_up_proj_bias) and the whole down_proj_bias [E, H] every rank holds; at TP 4
    and 8 the loader's ranks hold 23, 23, 23, 21 and 12 x 7, 6 of the 90 scale groups (models/gpt_oss.py:366-375),
    the mean rank 22.5 and 11.25. At TP 1 only the float32 biases differ; at TP 2 each rank's 1440 pads to 1472."""
    split = [((E, 2 * I_FULL, H // 2), U8), ((E, H, I_FULL // 2), U8), ((E, 2 * I_FULL, H // 32), U8),
             ((E, H, I_FULL // 32), U8), ((E, 2 * I_FULL), BF16)]
    checkpoint = _bytes(split) / tp + _bytes([((E, H), BF16)])
    delta = LAYERS * (_bytes(created("triton", tp)) - checkpoint)
    assert _step("h100-sxm", tp) - _step("h100-sxm", tp, "sglang") == pytest.approx(delta * TOP_K / E, rel=1e-9)


def test_tp2_marlin_reads_more_than_half_the_single_gpus_padding() -> None:
    """The single GPU's extra split evenly (the rule before) is short of a rank's own: Marlin TP 2 per expert
    7,532,544 B read (3072 x 1536) against 14,431,744 / 2 = 7,215,872 (3072 x 2944 halved)."""
    assert _bytes(created("marlin", 2)) // E == 7_532_544
    assert _bytes(created("marlin", 1)) // E // 2 == 7_215_872
