"""vLLM's MXFP4 MoE backend by GPU and what each keeps resident (formulas/vllm_mxfp4.py eq. X1-X3; issue #16).

The truth here is the tensors vLLM 0.19.1 itself holds after ``process_weights_after_loading``, rebuilt from the
shapes and dtypes its code creates for gpt-oss's config (openai/gpt-oss-20b config.json: hidden_size 2880,
intermediate_size 2880, num_local_experts 32, num_hidden_layers 24), against the checkpoint's own tensors
(model.layers.N.mlp.experts.{gate_up,down}_proj_{blocks,scales,bias}), never llmsizer's output:

  created (quantization/mxfp4.py:157-229) at the sizes FusedMoE rounds (fused_moe/layer.py:536-565 ->
  fused_moe/oracle/mxfp4.py:376-400: Marlin H to 256, I to 128; FlashInfer TRT-LLM both to 256; Triton I to 64);
  Marlin: gptq_marlin_repack's [K/16, N*16/8] int32 (_custom_ops.py:1179-1193), scales [K/32, N] E8M0
  (marlin_utils_fp4.py:590-616), biases in the model dtype (:619-629), each replacing its parameter;
  TRT-LLM: shuffled values, scales reshaped to [E, 2I, H/32] / [E, H, I/32] (oracle/mxfp4.py:561-570), float32
  biases (:457-458), gemm1_alpha / beta / clamp_limit float32 [E] (experts/trtllm_mxfp4_moe.py:51-68);
  Triton: swizzled values, the loaded scales kept beside their Hopper-swizzled copy (rows to 256 at num_warps 8,
  groups to 2: triton_kernels hopper_scale.py), float32 biases (oracle/mxfp4.py:721-756)."""

from __future__ import annotations

import math

import pytest

from llmsizer import estimate_inference
from llmsizer.catalog.hardware import load_catalog
from llmsizer.estimate.device import device_weights_capability
from llmsizer.estimate.fit import fit
from llmsizer.estimate.formats import rung_bytes
from llmsizer.formulas.vllm_mxfp4 import vllm_mxfp4_backend, vllm_mxfp4_extra_bytes, vllm_mxfp4_resident_extra
from llmsizer.models import load_model

H, I_FULL, E, LAYERS = 2880, 2880, 32, 24  # openai/gpt-oss-20b config.json
F32, BF16, U8, I32 = 4, 2, 1, 4


def _up(x: int, m: int) -> int:
    return (x + m - 1) // m * m


def _bytes(tensors: list[tuple[tuple[int, ...], int]]) -> int:
    return sum(math.prod(shape) * size for shape, size in tensors)


def checkpoint_tensors(i: int) -> list[tuple[tuple[int, ...], int]]:
    """One layer's experts in the gpt-oss safetensors (per tensor-parallel rank: I = i)."""
    return [((E, 2 * i, H // 32, 16), U8), ((E, 2 * i, H // 32), U8), ((E, 2 * i), BF16),
            ((E, H, i // 32, 16), U8), ((E, H, i // 32), U8), ((E, H), BF16)]


def vllm_tensors(backend: str, i: int) -> list[tuple[tuple[int, ...], int]]:
    """One layer's expert tensors vLLM 0.19.1 holds after loading on ``backend``."""
    if backend == "marlin":
        hp, ip = _up(H, 256), _up(i, 128)
        return [((E, hp // 16, 2 * ip * 16 // 8), I32), ((E, ip // 16, hp * 16 // 8), I32),  # repacked values
                ((E, hp // 32, 2 * ip), U8), ((E, ip // 32, hp), U8),  # permuted E8M0 scales
                ((E, 2 * ip), BF16), ((E, hp), BF16)]  # permuted biases, model dtype
    if backend == "flashinfer_trtllm":
        hp, ip = _up(H, 256), _up(i, 256)
        return [((E, 2 * ip, hp // 2), U8), ((E, hp, ip // 2), U8),
                ((E, 2 * ip, hp // 32), U8), ((E, hp, ip // 32), U8),
                ((E, 2 * ip), F32), ((E, hp), F32),
                ((E,), F32), ((E,), F32), ((E,), F32)]  # gemm1_alpha, gemm1_beta, gemm1_clamp_limit
    assert backend == "triton"
    ip = _up(i, 64)
    return [((E, 2 * ip, H // 2), U8), ((E, H, ip // 2), U8),  # swizzled values (same bytes)
            ((E, 2 * ip, H // 32), U8), ((E, H, ip // 32), U8),  # the loaded scales, still registered
            ((E, _up(2 * ip, 256), _up(H // 32, 2)), U8), ((E, _up(H, 256), _up(ip // 32, 2)), U8),  # swizzled
            ((E, 2 * ip), F32), ((E, H), F32)]


# TP 1, 2, 3: I / TP (2880, 1440, 960) a whole number of 32-wide scale groups, so each rank's checkpoint share is
# whole tensors (at TP 4, 720 = 22.5 groups: vLLM's loader gives the ranks 23 or 22 groups, not modelled)
@pytest.mark.parametrize("tp", [1, 2, 3])
@pytest.mark.parametrize("backend", ["triton", "marlin", "flashinfer_trtllm"])
def test_the_extra_bytes_are_vllms_tensors_less_the_checkpoints(backend: str, tp: int) -> None:
    i = I_FULL // tp
    expected = LAYERS * (_bytes(vllm_tensors(backend, i)) - _bytes(checkpoint_tensors(i)))
    assert vllm_mxfp4_extra_bytes(backend, LAYERS, E, H, i) == expected


def test_gpt_oss_20b_by_hand() -> None:
    """The TP 1 figures worked out: Triton 823,680 B per expert (swizzled scales 5888 x 90 + 3072 x 90, float32
    biases +2 x 8640); Marlin 1,195,264 (H 2880 -> 3072, I -> 2944: values 1,124,352, scales 70,272, biases 640);
    TRT-LLM 1,840,896 (H, I -> 3072: values 1,714,176, scales 107,136, float32 biases 36,864 - 17,280) + 12 x 32 per
    layer."""
    assert vllm_mxfp4_extra_bytes("triton", LAYERS, E, H, I_FULL) == 768 * 823_680  # 0.589 GiB
    assert vllm_mxfp4_extra_bytes("marlin", LAYERS, E, H, I_FULL) == 768 * 1_195_264  # 0.855 GiB
    assert vllm_mxfp4_extra_bytes("flashinfer_trtllm", LAYERS, E, H, I_FULL) == 768 * 1_840_896 + 24 * 384


@pytest.mark.parametrize(("capability", "backend"), [
    (80, "marlin"), (86, "marlin"), (89, "marlin"),  # Ampere, Ada: below the Triton kernels' 9.0
    (90, "triton"),  # Hopper: TRT-LLM wants the 10.x family; Triton's 9.0 <= cc < 11.0 comes before CUTLASS
    (100, "flashinfer_trtllm"), (103, "flashinfer_trtllm"),  # is_device_capability_family(100)
    (110, "marlin"), (120, "marlin"), (121, "marlin"),  # Triton stops at 11.0; CUTLASS MXFP4 x BF16 is 9.0 only
    (None, "triton"), (0, "triton")])  # not known / no CUDA: sized as on Hopper (named in the assumption)
def test_the_backend_by_capability(capability: int | None, backend: str) -> None:
    assert vllm_mxfp4_backend(capability) == backend


@pytest.mark.parametrize(("device", "backend"), [("h100-sxm", "triton"), ("a100-80gb", "marlin"),
                                                 ("l40s", "marlin"), ("b200", "flashinfer_trtllm"),
                                                 ("rtx-5090", "marlin")])
def test_an_estimate_on_a_device_holds_its_backends_bytes(device: str, backend: str) -> None:
    spec = load_model("gpt-oss-20b")
    assert (spec.hidden_size, spec.moe.expert_intermediate_size, spec.moe.num_experts) == (H, I_FULL, E)  # type: ignore[union-attr]
    est = estimate_inference("gpt-oss-20b", engine="vllm", device=device, context=16000)
    said = next(a for a in est.assumptions if a.name == "vllm_mxfp4_backend")
    assert said.value == backend
    extra = LAYERS * (_bytes(vllm_tensors(backend, I_FULL)) - _bytes(checkpoint_tensors(I_FULL)))
    hopper = LAYERS * (_bytes(vllm_tensors("triton", I_FULL)) - _bytes(checkpoint_tensors(I_FULL)))
    unnamed = estimate_inference("gpt-oss-20b", engine="vllm", memory="79.18GiB", context=16000)
    assert est.item("weights").bytes - unnamed.item("weights").bytes == extra - hopper
    assert extra in est.details["weights_by_storage"].values()
    # fit and the format ladder read the same rule: fit's estimate, and the rung the ladder ranks on this device
    dev = load_catalog().device(device)
    assert fit("gpt-oss-20b", device, engine="vllm", context=16000).estimate.item("weights").bytes == (
        est.item("weights").bytes)
    capability = device_weights_capability(dev, "vllm", spec.model_type, "mxfp4")
    assert capability == dev.capability
    assert rung_bytes(spec, "mxfp4", engine="vllm", capability=capability) - rung_bytes(
        spec, "mxfp4", engine="vllm") == extra - hopper


def test_the_capability_is_read_only_where_it_decides() -> None:
    """Outside vLLM's MXFP4 (and its fp32 gate) the weights are the same on every device: one cache entry per
    model."""
    dev = load_catalog().device("a100-80gb")
    assert device_weights_capability(dev, "vllm", "gpt_oss", "bf16") is None
    assert device_weights_capability(dev, "sglang", "gpt_oss", "mxfp4") is None
    spec = load_model("gpt-oss-20b")
    assert vllm_mxfp4_resident_extra(spec, "bf16", capability=80) == 0
