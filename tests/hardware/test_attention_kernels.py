"""Which kernel runs a training step's attention (--attention-kernel, specs/training.py TRAIN_ATTENTION_KERNELS) and
how fast (estimate/efficiency.py ATTENTION_KERNEL_SPEED, WGMMA_KERNEL_OVER_FA2, sdpa_backend): each ratio re-derived
from the published numbers typed here with their place, torch SDPA's dispatch against torch's own checks, and the
attention each validation row's framework runs against that framework's code (file and line cited per entry).

Independent truth: Dao 2023 (FlashAttention-2, arXiv 2307.08691), Shah et al. 2024 (FlashAttention-3, arXiv
2407.08608), pytorch/pytorch#142132, torch's aten/src/ATen/native/transformers/cuda/sdp_utils.cpp, and the
frameworks' sources."""

from __future__ import annotations

import math

import pytest

from llmsizer.catalog.hardware import builtin_catalog
from llmsizer.estimate import efficiency as E
from llmsizer.estimate.framework import with_framework
from llmsizer.formulas.sdpa_dispatch import sdpa_backend
from llmsizer.models import load_model
from llmsizer.specs.training import DEFAULT_ATTENTION_KERNEL, KERNELS_OF_ATTENTION, TrainingWorkload

# Dao 2023 section 4.1: "FlashAttention-2 is around 1.3-1.5x faster than FlashAttention in Triton in the forward
# pass and around 2x faster in the backward pass"; "around 2x faster than FlashAttention and FlashAttention in
# xformers (the 'cutlass' implementation)"; backward FLOPs = 2.5 x forward ("2 matmuls in the forward pass and 5
# matmuls in the backward pass"). Section 1: "up to 73% of the theoretical max throughput in the forward pass, and up
# to 63% of the theoretical max throughput in the backward pass".
DAO_FWD_OVER_TRITON, DAO_BWD_OVER_TRITON, DAO_OVER_CUTLASS = (1.3, 1.5), 2.0, 2.0
DAO_FWD_SHARE, DAO_BWD_SHARE, DAO_BWD_FLOPS = 0.73, 0.63, 2.5
# Dao 2023 section 4.1 (Fig. 7): the same FlashAttention-2 on H100 "up to 335 TFLOPs/s"; Shah et al. 2024 abstract:
# "FlashAttention-2 achieving only 35% utilization on the H100 GPU", FlashAttention-3 "speedup on H100 GPUs by
# 1.5-2.0x with FP16"; pytorch/pytorch#142132 (torch 2.6.0.dev20241204, H100, (1, 24, 4608, 128)): SDPA (its
# FlashAttention-2 backend) 329.483 TFLOP/s, cuDNN 631.338, FlashAttention-3 631.827
H100_FA2_MAX_TFLOPS, FA3_PAPER_FA2_UTILIZATION, FA3_PAPER_SPEEDUP = 335.0, 0.35, (1.5, 2.0)
ISSUE_SDPA, ISSUE_CUDNN, ISSUE_FA3 = 329.483, 631.338, 631.827


def _dao_fwd_bwd(forward_ratio: float) -> float:
    fwd, bwd = 1.0 / DAO_FWD_SHARE, DAO_BWD_FLOPS / DAO_BWD_SHARE  # FlashAttention-2's seconds per forward FLOP
    return (forward_ratio * fwd + DAO_BWD_OVER_TRITON * bwd) / (fwd + bwd)


def test_flashattention2_over_triton_is_dao_2023_section_4_1() -> None:
    fa2 = E.ATTENTION_KERNEL_SPEED["flash-attn-2"]
    assert (fa2.low, fa2.expected, fa2.high) == pytest.approx(
        (_dao_fwd_bwd(1.3), _dao_fwd_bwd(1.4), _dao_fwd_bwd(1.5)), rel=1e-12)
    assert fa2.expected == pytest.approx(1.846, abs=0.001)
    cutlass = E.ATTENTION_KERNEL_SPEED["mem-efficient"]  # torch SDPA's mem-efficient backend: xformers' cutlass kernel
    assert cutlass.expected == pytest.approx(_dao_fwd_bwd(1.4) / DAO_OVER_CUTLASS, rel=1e-12)
    assert E.ATTENTION_KERNEL_SPEED["triton-flash"].expected == 1.0  # the kernel FLASH_ATTENTION_SHARE is fitted on


# Shah et al. 2024 (FlashAttention-3, arXiv 2407.08608) Fig. 5, "Attention backward speed, head dim 128 (H100 80GB
# SXM5)", non-causal, TFLOP/s at 4k and 8k tokens: FlashAttention-2 310 / 318, cuDNN 499 / 518, FlashAttention-3
# 542 / 559 (third-party transcriptions of the bar labels, subtext.edge.nugit.net; the PDF not read)
FIG5_4K_8K = {"flash-attn-2": (310.0, 318.0), "cudnn": (499.0, 518.0), "flash-attn-3": (542.0, 559.0)}


def _fig5_backward_at_4608(kernel: str) -> float:
    f = math.log2(4608) - 12  # #142132's 4608 tokens between Fig. 5's 4k and 8k bars, linear in log2 of the length
    (k4, k8), (f4, f8) = FIG5_4K_8K[kernel], FIG5_4K_8K["flash-attn-2"]
    return k4 / f4 * (1 - f) + k8 / f8 * f


@pytest.mark.parametrize("kernel, issue", [("cudnn", ISSUE_CUDNN), ("flash-attn-3", ISSUE_FA3)])
def test_hopper_wgmma_kernels_are_142132_forward_and_fig5_backward(kernel: str, issue: float) -> None:
    """review26 D1: #142132's ratio is the forward's; the backward (2.5 x the forward's FLOPs) takes FlashAttention-3's
    Fig. 5; the two passes' times, FlashAttention-2's 73 % / 63 % split, give the forward + backward ratio."""
    r_f, r_b = issue / ISSUE_SDPA, _fig5_backward_at_4608(kernel)
    assert E.WGMMA_OVER_FA2_BY_PASS[kernel] == pytest.approx((r_f, r_b), rel=1e-12)
    t_f, t_b = 1 / DAO_FWD_SHARE, DAO_BWD_FLOPS / DAO_BWD_SHARE  # FlashAttention-2's seconds per forward FLOP
    combined = (t_f + t_b) / (t_f / r_f + t_b / r_b)
    assert E.WGMMA_KERNEL_OVER_FA2[kernel].expected == pytest.approx(combined, rel=1e-12)
    assert combined < r_f  # the backward gains less than the forward: the forward-only ratio timed it fast
    # cross-check, not an input: FlashAttention-3's own 1.5-2.0x over FlashAttention-2 (abstract)
    lo, hi = FA3_PAPER_SPEEDUP
    assert lo <= E.WGMMA_KERNEL_OVER_FA2[kernel].expected <= hi
    # eq. (10''): a recomputed forward at the kernel's forward rate, S_b / S_f its backward's over its forward's
    (s_f, s_b), why = E.attention_pass_shares(kernel)
    assert s_b / s_f == pytest.approx(DAO_BWD_SHARE * r_b / (DAO_FWD_SHARE * r_f), rel=1e-12)
    assert "pytorch/pytorch#142132" in why and "Fig. 5" in why


def test_flashattention2_absolute_rates_agree_with_the_papers() -> None:
    """Cross-checks, not inputs: with the Triton-fitted rho x u_ampere, FlashAttention-2 on an A100 reaches 87 % of the
    forward + backward maximum Dao 2023's 73 % / 63 % allow; on an H100 (its A100 rate x the paper's own H100 / A100
    speed at the sequence, efficiency.fa2_speed_over_reference) at 16k tokens under the paper's 'up to 335'
    (section 4.1, Fig. 7, forward + backward); and at pytorch/pytorch#142132's (1, 24, 4608, 128) in its forward
    (efficiency.ATTENTION_PASS_SHARES, since a recomputed forward is timed at its own rate: formulas/training_time.py
    eq. (10'')) against the forward figures: tritonbench's 329.5 (tritonbench/utils/parser.py @03fa086: --mode default
    'fwd') and FlashAttention-3's '35% utilization' (346)."""
    devs = builtin_catalog().devices
    a100, h100 = devs["a100-sxm-80gb"], devs["h100-sxm"]
    u_a = E.TRAINING_UTILIZATION_BY_ARCH["ampere"].expected
    at_16k = dict(seq_len=16384, head_dim=128)
    ampere = E.attention_kernel_share("flash-attn-2", "ampere", u_a, **at_16k)[0]
    paper_max = (1 + DAO_BWD_FLOPS) / (1 / DAO_FWD_SHARE + DAO_BWD_FLOPS / DAO_BWD_SHARE)
    assert 0.85 * paper_max < ampere <= paper_max
    assert a100.peak_flops("bf16")[0] == pytest.approx(312e12)
    u_h = E.TRAINING_UTILIZATION_BY_ARCH["hopper"].expected
    hopper = E.attention_kernel_share("flash-attn-2", "hopper", u_h, **at_16k)[0]
    peak = h100.peak_flops("bf16")[0]
    assert peak is not None
    assert 0.8 * H100_FA2_MAX_TFLOPS < hopper * peak / 1e12 <= H100_FA2_MAX_TFLOPS  # 'up to': the paper's maximum
    # the forward's share: the kernel's forward + backward share x S_f over the pass-weighted average of its shares
    s_f, s_b = E.ATTENTION_PASS_SHARES["flash-attn-2"]
    at_issue = E.attention_kernel_share("flash-attn-2", "hopper", u_h, seq_len=4608, head_dim=128)[0]
    forward = at_issue * s_f * (1 / s_f + DAO_BWD_FLOPS / s_b) / (1 + DAO_BWD_FLOPS)
    assert (s_f, s_b) == (DAO_FWD_SHARE, DAO_BWD_SHARE)
    assert forward == pytest.approx(FA3_PAPER_FA2_UTILIZATION, rel=0.13)
    assert forward * peak / 1e12 == pytest.approx(ISSUE_SDPA, rel=0.08)


def test_sdpa_dispatch_follows_torchs_checks() -> None:
    """sdp_utils.cpp @001f694a: check_flash_attention_hardware_support runs the flash backend (FlashAttention-2) on
    check_sm_version<sm80, sm121>; check_mem_efficient_hardware_support on <sm50, sm121>; the priority order is flash,
    mem-efficient, math, cuDNN unless cuDNN is preferred (check_prefer_cudnn_attention: cuDNN > 9.15 on sm90/sm100,
    not the torch of the validation rows, pytorch/pytorch#142132). Checked on every catalog GPU with a capability."""
    seen = set()
    for dev in builtin_catalog().devices.values():
        cc = dev.capability
        if dev.kind != "gpu" or cc is None:
            continue
        kernel, why = sdpa_backend(cc, "fp16", False, False)
        assert kernel == ("flash-attn-2" if 80 <= cc <= 121 else "mem-efficient" if 50 <= cc else None), dev.id
        assert "sdp_utils.cpp" in why
        seen.add(kernel)
    assert seen == {"flash-attn-2", "mem-efficient"}


# sdp_utils.cpp @001f694a, can_use_flash_attention: check_for_attn_mask, check_dtypes_flash_attention ->
# check_dtypes_low_precision (sm80_dtypes {kHalf, kBFloat16}); can_use_mem_efficient_attention:
# greater_than_or_equal_sm80_mem_efficient_dtypes {kHalf, kFloat, kBFloat16}, less_than_sm80_mem_efficient_dtypes
# {kHalf, kFloat}; both: check_batch_size_and_num_heads_dense (unequal heads only with enable_gqa); math always.
TORCH_CASES = [  # (capability, dtype, unequal heads, mask) -> backend
    (90, "fp32", False, False, "mem-efficient"), (80, "bf16", False, True, "mem-efficient"),
    (80, "bf16", True, False, "math"), (70, "bf16", False, False, "math"), (70, "fp16", False, False, "mem-efficient"),
    (70, "fp32", False, True, "mem-efficient"), (89, "fp16", False, False, "flash-attn-2"),
]


@pytest.mark.parametrize(("cc", "dtype", "heads", "mask", "backend"), TORCH_CASES)
def test_sdpa_backend_reads_dtype_mask_and_heads(cc: int, dtype: str, heads: bool, mask: bool, backend: str) -> None:
    assert sdpa_backend(cc, dtype, heads, mask)[0] == backend


def test_memory_and_duration_read_one_backend() -> None:
    """#12 'one answer': Falcon-7B's multi-query SDPA call (71 query heads, 1 K/V head, no enable_gqa) runs the math
    kernel: the memory counts its fp32 probabilities and the duration times the math kernel, not FlashAttention-2;
    Llama in fp32 on an H100 is timed as mem-efficient (flash takes fp16/bf16 only)."""
    from llmsizer.estimate.duration import training_duration_for
    from llmsizer.estimate.training import estimate_training
    from llmsizer.models import load_model

    devs = builtin_catalog().devices
    run = {"method": "lora", "seq_len": 2048, "micro_batch": 1}
    falcon = estimate_training("falcon-7b", **run)
    assert "SDPA math kernel" in repr(falcon)  # the memory's math-kernel terms (training_activations.sdpa_runs_math)
    d = training_duration_for(load_model("falcon-7b"), devs["a100-sxm-80gb"], 1, 1e9, run)
    assert {a.name: a for a in d.assumptions}["attention_kernel_timed"].value == "math"
    d = training_duration_for(load_model("llama-3.1-8b"), devs["h100-sxm"], 1, 1e9, dict(run, precision="fp32"))
    assert {a.name: a for a in d.assumptions}["attention_kernel_timed"].value == "mem-efficient"


def test_kernels_and_their_attention() -> None:
    assert DEFAULT_ATTENTION_KERNEL == {"sdpa": "sdpa", "flash": "flash-attn-2", "eager": "eager",
                                        "flex": "flex-attention"}
    for attention, kernels in KERNELS_OF_ATTENTION.items():
        for kernel in kernels:
            assert TrainingWorkload(attention=attention, attention_kernel=kernel).attention_kernel == kernel
    with pytest.raises(ValueError, match="attention_kernel 'triton-flash' does not run attention 'sdpa'"):
        TrainingWorkload(attention_kernel="triton-flash")
    with pytest.raises(ValueError, match="unknown attention_kernel"):
        TrainingWorkload(attention_kernel="fa9")
    # off Hopper a wgmma kernel has no published speed: timed as FlashAttention-2, with a warning
    kernel, _, warning = E.timed_attention_kernel("flash", "flash-attn-3", "ampere", 80, "bf16", False, False, True, 128)
    assert kernel == "flash-attn-2" and warning is not None and "sm90" in warning


def test_validation_rows_run_their_frameworks_attention() -> None:
    """The attention each framework's rows are given (validation_cases.FRAMEWORK_ATTENTION), from the code of the run:
    - torchtitan @9dec370 torchtitan/models/llama/model.py line 209:
      ``output = F.scaled_dot_product_attention(xq, xk, xv, is_causal=True)`` -> sdpa, torch's dispatch;
    - torchtune @bd2a0fc torchtune/modules/attention.py line 140 ``self._attention_call = _sdpa_or_flex_attention()``,
      attention_utils.py line 209 ``return nn.functional.scaled_dot_product_attention(`` (flex only for packed
      BlockMasks) -> sdpa;
    - VectorLM @9045f08 vectorlm/utils/model_utils.py line 116 ``model_args["attn_implementation"] =
      "flash_attention_2"`` (profiling/benchmark.py line 329 passes get_is_flash_attention_supported()) -> flash,
      the flash-attn package's FlashAttention-2;
    - llm-foundry scripts/train/yamls/pretrain/mpt-7b.yaml @15fb4ffa line 20 ``attn_impl: triton`` -> triton-flash;
    - Megatron-LM 2021-2022: no fused attention kernel -> eager;
    - fms-fsdp @5805ace main_training.py line 7 ``from fms.models.llama import LLaMA``; foundation-model-stack
      @b85a0d8 fms/modules/attention.py line 217 ``attn = F.scaled_dot_product_attention(`` -> sdpa;
    - Qwen README "Profiling of Memory and Speed": "Flash attention 2 is applied" -> flash."""
    from llmsizer.validation_cases import (
        FRAMEWORK_ATTENTION,
        MEGATRON_SELENE,
        TORCHTITAN_FSDP,
        mpt_fields,
        mpt_row,
        public_rows,
        vectorlm_fields,
    )

    assert FRAMEWORK_ATTENTION == {"torchtitan": ("sdpa", None), "torchtune": ("sdpa", None),
                                   "vectorlm": ("flash", None),
                                   "megatron-lm": ("eager", None), "fms-fsdp": ("sdpa", None),
                                   "qwen": ("flash", None)}
    # llm-foundry's attention is its framework profile's (catalog/data/frameworks.json), as the rows run it
    from llmsizer.catalog.frameworks import framework_profile

    lf = framework_profile("llm-foundry")
    assert (lf.default("attention").value, lf.default("attention_kernel").value) == ("flash", "triton-flash")  # type: ignore[union-attr]
    assert "mpt-7b.yaml line 20: attn_impl: triton" in lf.default("attention").source  # type: ignore[union-attr]
    # every row builds its attention fields from that table: no validation case spells its own attention
    import inspect

    import llmsizer.validation_cases as vc
    for fn in (vc.fms_case, vc.vectorlm_fields, vc.mpt_fields):
        assert 'attention="' not in inspect.getsource(fn), fn.__name__
    rows = public_rows()
    w = TrainingWorkload(**{k: v for k, v in vectorlm_fields(rows["PM1031"]).items()})
    assert (w.attention, w.attention_kernel) == ("flash", None)  # the default: flash-attn-2
    _, w = with_framework(load_model("qwen2.5-0.5b"), TrainingWorkload(**mpt_fields(mpt_row(rows["PM0890"]["quote"]))))
    assert (w.attention, w.attention_kernel) == ("flash", "triton-flash")
    assert MEGATRON_SELENE["attention"] == "eager"
    assert "attention" not in TORCHTITAN_FSDP and TrainingWorkload().attention == "sdpa"  # torchtitan: the default


# llm-foundry sweep.py @5e85bd62d lines 40-83, the script of the README's 'H100 80GB BF16 (Large Scale, >= 128 GPUs)'
# table: ('--model_yamls 1b.yaml', ..., '--attn_impl flash'), 3b flash, 7b flash, 13b triton, 30b triton, 70b flash;
# llm-foundry installed as '.[gpu-flash2]' (flash-attn==2.4.2). Every other table: submit_benchmarks.py's default
# '--attn_impl' 'triton' (line 144), which sweep.sh @b2a43a147 never overrides.
SWEEP_PY_ATTN_IMPL = {"1b": "flash", "3b": "flash", "7b": "flash", "13b": "triton", "30b": "triton", "70b": "flash"}


def test_llm_foundry_rows_run_the_attention_of_their_sweep() -> None:
    from llmsizer.validation_cases import SPEED_NOT_EXPRESSIBLE, mpt_attn_impl, mpt_fields, mpt_row, public_rows

    large = other = 0
    for r in public_rows().values():
        if not r["framework"].startswith("llm-foundry") or r["id"] in SPEED_NOT_EXPRESSIBLE:
            continue
        m = mpt_row(r["quote"])
        impl = mpt_attn_impl(m, r["source_location"])
        if "Large Scale" in r["source_location"]:
            large += 1
            assert impl == SWEEP_PY_ATTN_IMPL[m.model], r["id"]
            assert f"attn_impl {impl} (sweep.py @5e85bd62d" in r["other_settings"], r["id"]
            assert "<insert_image_name>" in r["other_settings"] and "sweep.sh" not in r["other_settings"], r["id"]
        else:
            other += 1
            assert impl == "triton", r["id"]
        _, w = with_framework(load_model("qwen2.5-0.5b"), TrainingWorkload(**mpt_fields(m, impl)))
        assert (w.attention, w.attention_kernel) == (("flash", "flash-attn-2") if impl == "flash"
                                                     else ("flash", "triton-flash"))
    assert large == 18 and other > 50
