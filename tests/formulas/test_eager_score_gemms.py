"""formulas/eager_attention_traffic.py eq. (A3): eager attention's batched score GEMMs.

Against independent truth: the GEMM calls, FLOPs and operand sizes of a real CPU forward and backward of Megatron-LM's
core attention (baddbmm into a [b * np, s, s] buffer with beta 0, the causal softmax, dropout, bmm with the values:
NVIDIA/Megatron-LM @d98e8a6 megatron/core/transformer/dot_product_attention.py lines 189-239), recorded at the ATen
dispatch; and a published measurement of those kernels' time on an A100 (Korthikanti et al. 2022, arXiv 2205.05198,
Table 4)."""

from __future__ import annotations

import pytest

from llmsizer.catalog.hardware import builtin_catalog
from llmsizer.estimate import efficiency as E
from llmsizer.formulas.eager_attention_traffic import (
    SCORE_GEMMS_BACKWARD,
    SCORE_GEMMS_FORWARD,
    eager_attention_bytes_per_token,
    score_gemm_seconds_per_token,
)
from llmsizer.formulas.gemm_shapes import gemm_efficiency

torch = pytest.importorskip("torch")


def _core_attention_gemms(b: int, np_: int, s: int, d: int) -> list[tuple[str, float, float]]:
    """(op, FLOPs, bytes read and written by the GEMM) of every batched GEMM one forward and backward of Megatron's
    core attention dispatches, fp16 element sizes (2 B), recorded from real tensors on the CPU in float32."""
    from torch.utils._python_dispatch import TorchDispatchMode

    calls: list[tuple[str, float, float]] = []
    aten = torch.ops.aten

    class Record(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # type: ignore[no-untyped-def]
            out = func(*args, **(kwargs or {}))
            if func in (aten.bmm.default, aten.baddbmm.default):
                a, bm = (args[1], args[2]) if func is aten.baddbmm.default else (args[0], args[1])
                beta = (kwargs or {}).get("beta", args[3] if len(args) > 3 else 1)
                c_in = args[0].numel() if func is aten.baddbmm.default and beta != 0 else 0  # beta 0: C not read
                batch, m, k = a.shape
                n = bm.shape[2]
                calls.append((func.__name__, 2.0 * batch * m * n * k,
                              2.0 * (a.numel() + bm.numel() + out.numel() + c_in)))
            return out

    q = torch.randn(s, b * np_, d, requires_grad=True)
    k = torch.randn(s, b * np_, d, requires_grad=True)
    v = torch.randn(s, b * np_, d, requires_grad=True)
    with Record():
        buf = torch.empty(b * np_, s, s)
        scores = torch.baddbmm(buf, q.transpose(0, 1), k.transpose(0, 1).transpose(1, 2), beta=0.0, alpha=d ** -0.5)
        mask = torch.ones(s, s, dtype=torch.bool).triu(1)
        probs = torch.nn.functional.dropout(scores.masked_fill(mask, float("-inf")).softmax(-1), 0.1)
        ctx = torch.bmm(probs, v.transpose(0, 1))
        ctx.sum().backward()
    return calls


def test_the_six_gemms_their_flops_and_bytes_match_a_real_forward_and_backward() -> None:
    b, np_, s, d = 2, 3, 64, 16
    calls = _core_attention_gemms(b, np_, s, d)
    assert len(calls) == SCORE_GEMMS_FORWARD + SCORE_GEMMS_BACKWARD == 6
    tokens = b * s
    flops = sum(f for _, f, _ in calls) / tokens
    nbytes = sum(x for _, _, x in calls) / tokens
    # eq. (A3) with the memory term negligible gives g F / R, with the math term negligible g B / B_mem
    big = 1e30
    assert score_gemm_seconds_per_token(np_, s, d, 2.0, False, 1.0, big) == pytest.approx(flops, rel=1e-9)
    assert score_gemm_seconds_per_token(np_, s, d, 2.0, False, big, 1.0) == pytest.approx(nbytes, rel=1e-9)
    # the same FLOPs as the 12 d s attention term of formulas/training_time.py eq. (1) (d = heads x d_h)
    assert flops == 12 * np_ * d * s
    # a recomputed layer runs the two forward GEMMs again
    again = score_gemm_seconds_per_token(np_, s, d, 2.0, True, 1.0, big)
    assert again == pytest.approx(flops * 8 / 6, rel=1e-9)


def test_korthikanti_table4_attention_core_recompute_time() -> None:
    """Korthikanti et al. 2022 (arXiv 2205.05198), Table 3: the 22B GPT (64 heads, hidden 6144, 48 layers, TP 8,
    micro-batch 4, s 2048, mixed precision) on A100 80GB (Selene); Table 4: selective recomputation, which re-runs
    only the attention core's forward (QK^T, softmax, dropout, attention over V), takes the backward of one layer from
    11.9 to 13.2 ms: 1.3 ms ("The overhead of selective recomputation is 1.3ms"). What recomputing a layer adds in
    eqs. (A1) + (A3) is that forward: held out, nothing was fitted on it. The overlapping roofline
    (formulas/gemm_shapes.py eq. (2)) for the GEMMs would leave it 27 % short."""
    dev = builtin_catalog().devices["a100-sxm-80gb"]
    peak, _ = dev.peak_flops("fp16")
    bw = float(dev.memory_bandwidth.base)  # type: ignore[union-attr]
    u = E.TRAINING_UTILIZATION_BY_ARCH["ampere"].expected
    eta = E.MEMORY_BOUND_BANDWIDTH.expected
    np_, s, d_h, c, tokens = 64 // 8, 2048, 6144 // 64, 2.0, 4 * 2048
    gemms = (score_gemm_seconds_per_token(np_, s, d_h, c, True, peak * u, bw * eta)
             - score_gemm_seconds_per_token(np_, s, d_h, c, False, peak * u, bw * eta))
    traffic = (eager_attention_bytes_per_token(np_, s, c, True, True)
               - eager_attention_bytes_per_token(np_, s, c, True, False)) / (bw * eta)
    predicted = tokens * (gemms + traffic)
    assert predicted == pytest.approx(1.3e-3, rel=0.06)  # 1.244 ms: -4.3 %
    # the same two GEMMs at the overlapping roofline (full bandwidth, as formulas/gemm_shapes.py times GEMMs)
    flops = 2 * 2.0 * np_ * s * d_h
    roofline = tokens * (flops / (peak * u * gemm_efficiency(s, s, d_h, peak * u, bw)) + traffic)
    assert roofline < 0.75 * 1.3e-3


def test_megatron_selective_recomputation_reruns_the_eager_attention_core() -> None:
    """Through the duration rule: on the Table 3 22B GPT (one micro-batch of 4 x 2048 on 8 A100s, TP 8), Megatron's
    selective recomputation adds to a micro-step what re-running every layer's attention core forward takes (eqs. (A1)
    and (A3) again), 48 x 1.3 ms by Table 4's measurement (held out: nothing was fitted on it)."""
    from llmsizer.estimate.duration import training_duration_for
    from llmsizer.readers.hf_config import spec_from_config

    config = {"model_type": "gpt_bigcode", "n_embd": 6144, "n_head": 64, "n_layer": 48, "n_inner": 4 * 6144,
              "n_positions": 2048, "vocab_size": 51200, "multi_query": False, "tie_word_embeddings": True}
    spec = spec_from_config(config, name="GPT 22B (Korthikanti et al. 2022 Table 3)")
    dev = builtin_catalog().devices["a100-sxm-80gb"]
    fields = dict(method="full", precision="megatron-fp16", micro_batch=4, seq_len=2048, tp=8, gpus=8,
                  optimizer="adamw", attention="eager")
    none = training_duration_for(spec, dev, 8, 1e6, dict(fields, grad_checkpointing="none"))
    selective = training_duration_for(spec, dev, 8, 1e6, dict(fields, grad_checkpointing="selective"))
    assert none.step is not None and selective.step is not None
    added = selective.step.compute_seconds - none.step.compute_seconds
    assert added / 48 == pytest.approx(1.3e-3, rel=0.06)
    assert none.step.attention_seconds < selective.step.attention_seconds
