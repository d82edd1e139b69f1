"""A checkpointed layer's recomputed attention forward at the kernel's forward rate (formulas/training_time.py eq.
(10''), #12): a flash kernel's backward reaches a smaller share of the peak than its forward, so timing the recomputed
forward at the forward + backward rate charged it the backward's slowness. The pass shares come from Dao 2023 (arXiv
2307.08691) sections 1 and 4.1: FlashAttention-2 "up to 73% of the theoretical max throughput in the forward pass,
and up to 63% ... in the backward pass", "around 1.3-1.5x faster than FlashAttention in Triton in the forward pass and
around 2x faster in the backward pass".
"""

from __future__ import annotations

from statistics import median

import pytest

from llmsizer.catalog.hardware import builtin_catalog
from llmsizer.errors import InputError
from llmsizer.estimate import efficiency as E
from llmsizer.estimate.duration import flops_per_token, training_duration_for
from llmsizer.formulas.training_time import attention_core_flops, recompute_pass_weight
from llmsizer.readers.hf_config import spec_from_config


@pytest.mark.parametrize(("s_f", "s_b", "layers", "recomputed"), [(0.52, 0.315, 24, 24), (0.73, 0.63, 32, 7),
                                                                   (0.4, 0.6, 5, 5), (0.5, 0.5, 12, 12)])
def test_weighted_flops_at_the_average_rate_equal_each_pass_at_its_own(s_f: float, s_b: float, layers: int,
                                                                       recomputed: int) -> None:
    width, seq = 2048, 4096
    a = 4.0 * width * seq / 2  # one causal forward per layer and token
    pass_by_pass = a * layers / s_f + 2.5 * a * layers / s_b + a * recomputed / s_f  # seconds x peak
    average_rate = 3.5 / (1 / s_f + 2.5 / s_b)  # the kernel's forward + backward share of the peak
    timed = attention_core_flops(layers, width, seq, recomputed, recompute_weight=recompute_pass_weight(s_f, s_b))
    assert timed / average_rate == pytest.approx(pass_by_pass)
    # the executed FLOPs are unchanged (eq. (10)); the weight only times them
    assert attention_core_flops(layers, width, seq, recomputed) == pytest.approx(a * (3.5 * layers + recomputed))


def test_pass_shares_are_the_papers() -> None:
    fa2_fwd, fa2_bwd = 0.73, 0.63
    triton_fwd, triton_bwd = fa2_fwd / ((1.3 + 1.5) / 2), fa2_bwd / 2.0
    assert E.ATTENTION_PASS_SHARES["triton-flash"] == pytest.approx((triton_fwd, triton_bwd))
    assert E.ATTENTION_PASS_SHARES["flash-attn-2"] == pytest.approx((fa2_fwd, fa2_bwd))
    # the Triton kernel's backward runs 0.60 x its forward's rate per FLOP: a recomputed forward costs 0.68 of
    # what it cost at the kernel's average rate
    assert triton_bwd / triton_fwd == pytest.approx(0.604, abs=0.001)
    assert recompute_pass_weight(triton_fwd, triton_bwd) == pytest.approx(0.681, abs=0.001)
    # kernels without a published split (xformers' cutlass kernel: only its overall ratio) take FlashAttention-2's, and
    # say so; cuDNN / FlashAttention-3 on Hopper have one since review26 D1 (#142132's forward, FlashAttention-3's
    # Fig. 5 backward: tests/hardware/test_attention_kernels.py checks it against the published figures)
    shares, why = E.attention_pass_shares("mem-efficient")
    assert shares == E.FA2_PEAK_SHARES and "FlashAttention-2's split" in why
    shares, why = E.attention_pass_shares("cudnn")
    assert shares[1] / shares[0] < fa2_bwd / fa2_fwd and "Fig. 5" in why
    with pytest.raises(InputError):
        recompute_pass_weight(0.0, 0.5)


MPT_1B = {"model_type": "gpt_bigcode", "n_embd": 2048, "n_head": 16, "n_layer": 24, "n_inner": 8192,
          "n_positions": 32768, "vocab_size": 50368, "multi_query": False, "tie_word_embeddings": True}


def test_the_duration_times_the_recomputed_forward_at_the_forward_rate() -> None:
    """MPT-1B at 32k tokens on an A100 with every layer checkpointed: the attention seconds are each pass at its own
    share (the kernel's average share split by Dao 2023's forward / backward ratio), composed here apart."""
    spec = spec_from_config(MPT_1B, name="MPT-1b")
    dev = builtin_catalog().devices["a100-sxm-80gb"]
    fields = dict(method="full", precision="bf16-mixed", micro_batch=1, seq_len=32768, attention="flash",
                  attention_kernel="triton-flash", grad_checkpointing="full")
    d = training_duration_for(spec, dev, 1, 1e6, fields)
    names = {a.name: a.value for a in d.assumptions}
    share = float(names["attention_kernel_share"])  # the kernel's forward + backward share of the peak
    s_f, s_b = 0.73 / 1.4, 0.63 / 2.0
    k = share * (1 / s_f + 2.5 / s_b) / 3.5  # scale both passes so that their average is that share
    a = 4.0 * 2048 * 32768 / 2
    tokens = 32768
    peak, _ = dev.peak_flops("bf16")
    expected = tokens * a * (24 / (k * s_f) + 2.5 * 24 / (k * s_b) + 24 / (k * s_f)) / peak
    assert d.step is not None and d.step.attention_seconds == pytest.approx(expected, rel=2e-4)  # the share is named to 4 digits
    assert names["attention_recompute_pass_weight"] == pytest.approx(0.6811, abs=1e-4)
    # without checkpointing nothing is recomputed and no weight is named
    fl = flops_per_token(spec, "full", 32768)
    none = training_duration_for(spec, dev, 1, 1e6, dict(fields, grad_checkpointing="none"))
    assert "attention_recompute_pass_weight" not in {x.name for x in none.assumptions}
    assert none.step is not None
    assert none.step.attention_seconds == pytest.approx(tokens * fl.attention_executed("flash") / (peak * share),
                                                        rel=2e-4)


def test_the_checkpointing_gap_of_the_a100_tables_narrows() -> None:
    """llm-foundry's MPT tables (scripts/train/benchmarking/README.md @5e85bd62d, validation/public_measurements.csv):
    on one node the runs without checkpointing were over-predicted 7.3 points more than the checkpointed ones (A100
    80GB +7.4 % against +0.1 %, A100 40GB +9.1 % against +1.8 %); with the recomputed attention at its forward rate
    (and the constants re-derived on their rows) the gap was 5.1 / 5.4 points: part of it, not all (#12). Since
    llm-foundry's fused cross-entropy and Composer's metric passes are counted (eqs. E11, E12; the Ampere constants
    re-derived), it is 5.3 / 7.1 points: the 40GB gap is back near the 7.3 it started from, so the bound is that
    starting gap (still narrower on both cards); why the 40GB no-checkpointing rows stay +9 % is open (note22).
    Most of the gap is the row mix and the collectives (tests/validation/test_mpt_checkpointing_gap.py): at 8k+ tokens
    with collectives under 3 % of the compute it is 2.9 / 2.3 points (80GB / 40GB)."""
    from llmsizer.validation_cases import TRAINING_SPEED, speed_cases

    cases = [c for c in speed_cases()[0] if c.kind == TRAINING_SPEED and "llm-foundry" in c.what]
    for gpu, gap in (("a100_80gb", 0.058), ("a100_40gb", 0.073)):
        rows = [c for c in cases if f"x{gpu} " in c.what and c.error is not None
                and int(c.what.split()[4].split("x")[0]) <= 8]
        ck0 = [c.error for c in rows if "no checkpointing" in c.note]
        ck1 = [c.error for c in rows if "no checkpointing" not in c.note]
        assert len(ck0) > 25 and len(ck1) > 10
        assert 0.0 < median(ck0) - median(ck1) < gap, (gpu, median(ck0), median(ck1))
