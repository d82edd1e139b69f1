"""Megatron-Core's core attention is TransformerEngine's DotProductAttention, whose own backend choice prefers
FusedAttention (cuDNN's fused flash attention) over FlashAttention on sm90+ (NVIDIA/TransformerEngine @d0067d0d
transformer_engine/pytorch/attention/dot_product_attention/utils.py ``get_attention_backend`` lines 1647-1653;
Megatron-LM @d98e8a64 transformer_engine_spec_provider.py lines 71-73, attention_backend default auto,
transformer_config.py line 151): formulas/sdpa_dispatch.py ``te_attention_backend``, estimate/training/setup.py
``megatron_attention_kernel``.

Independent truth: the kernel TE's selection code picks per compute capability (sm90 H100 and sm100 B200 at or above
its (9, 0) threshold, sm80 A100 below it), and the attention time that follows from it against the published
measurement of the two kernels on H100 (pytorch/pytorch#142132: cuDNN 631.338 vs SDPA's flash backend 329.483
TFLOP/s, (1, 24, 4608, 128) bf16 causal, the forward) and of their backward (FlashAttention-3's paper, Shah et al.
2024, Fig. 5, head dim 128: cuDNN 499 / 518 vs FlashAttention-2 310 / 318 TFLOP/s at 4k / 8k tokens, third-party
transcriptions of its bar labels): the Megatron step's attention seconds must shrink by the two passes' combined
ratio (the backward 2.5 x the forward's FLOPs, FlashAttention-2's 73 % / 63 % split, Dao 2023) against the same step
with the FlashAttention-2 kernel named.
"""

from __future__ import annotations

import math

import pytest

from llmsizer.catalog.hardware import builtin_catalog
from llmsizer.catalog.models import find
from llmsizer.estimate.duration import training_duration_for

# the published H100 figures, written out (not read from llmsizer): pytorch/pytorch#142132
CUDNN_TFLOPS_H100, SDPA_FLASH_TFLOPS_H100 = 631.338, 329.483
FIG5_CUDNN_4K_8K, FIG5_FA2_4K_8K = (499.0, 518.0), (310.0, 318.0)
FA2_FWD_SHARE, FA2_BWD_SHARE = 0.73, 0.63
BASE = dict(method="full", precision="megatron-bf16", optimizer="adamw", zero=1, micro_batch=1, seq_len=4096,
            tp=2, sequence_parallel=True, grad_accumulation=4)


def _duration(device: str, **extra):
    fields = dict(BASE, gpus=2, **extra)
    return training_duration_for(find("llama-3.1-8b").spec(), builtin_catalog().devices[device], 2, 1e6, fields)


def _timed(d) -> tuple[str, str]:
    a = next(a for a in d.assumptions if a.name == "attention_kernel_timed")
    return a.value, a.why


@pytest.mark.parametrize("device, kernel", [("h100-sxm", "cudnn"), ("b200", "flash-attn-2"), ("a100-sxm-80gb", "flash-attn-2")])
def test_te_backend_by_capability(device, kernel):
    """sm90: cuDNN (TE's preference); sm100: TE picks cuDNN too, which has no published speed off Hopper and is timed
    as FlashAttention-2 with a warning naming cuDNN; sm80: below TE's threshold, FlashAttention-2."""
    d = _duration(device)
    value, _ = _timed(d)
    assert value == kernel
    if device == "b200":
        assert any("cudnn has no published speed" in w for w in d.warnings)
    if device == "a100-sxm-80gb":
        assert not any("cudnn" in w for w in d.warnings)


def test_h100_attention_time_follows_published_kernel_ratio():
    default = _duration("h100-sxm")
    fa2 = _duration("h100-sxm", attention_kernel="flash-attn-2")  # named: the caller's kernel is kept
    assert _timed(fa2)[0] == "flash-attn-2"
    ratio = default.step.attention_seconds / fa2.step.attention_seconds
    f = math.log2(4608) - 12  # #142132's length between Fig. 5's 4k and 8k bars
    r_f = CUDNN_TFLOPS_H100 / SDPA_FLASH_TFLOPS_H100
    r_b = (FIG5_CUDNN_4K_8K[0] / FIG5_FA2_4K_8K[0]) * (1 - f) + (FIG5_CUDNN_4K_8K[1] / FIG5_FA2_4K_8K[1]) * f
    t_f, t_b = 1 / FA2_FWD_SHARE, 2.5 / FA2_BWD_SHARE  # FlashAttention-2's seconds per forward FLOP, by pass
    assert ratio == pytest.approx((t_f / r_f + t_b / r_b) / (t_f + t_b), rel=1e-9)
    # the rest of the micro-step is the same work: only the attention moved
    assert default.step.compute_seconds - default.step.attention_seconds == pytest.approx(
        fa2.step.compute_seconds - fa2.step.attention_seconds, rel=1e-9)
    assert "utils.py get_attention_backend lines 1647-1653" in _timed(default)[1]


def test_not_megatron_keeps_sdpa_dispatch():
    """bf16-mixed (torch SDPA, torchtitan / transformers): SDPA's dispatch picks its flash backend on H100."""
    d = training_duration_for(find("llama-3.1-8b").spec(), builtin_catalog().devices["h100-sxm"], 8, 1e6,
                              dict(method="full", precision="bf16-mixed", micro_batch=1, seq_len=4096, gpus=8,
                                   fsdp="full"))
    assert _timed(d)[0] == "flash-attn-2"
