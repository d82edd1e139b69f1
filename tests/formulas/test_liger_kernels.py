"""Liger-Kernel's kernels (formulas/liger_kernels.py eqs. LG1-LG4, training_activations.py eq. A3l) against the memory
Liger-Kernel itself measured: benchmark/data/all_benchmark_data.csv, the `memory` rows of fused_linear_cross_entropy,
rms_norm, swiglu and geglu for both providers, 'liger' and 'huggingface' (transformers' eager module), copied verbatim
with their source, commit and date to tests/fixtures/liger_benchmark/ (A100-SXM4-80GB, ``max_memory_allocated`` in
MiB, median of 10 calls; nothing is fitted to them).

Each row is one benchmark's peak, so the constants (weights, their gradients, cuBLAS workspace) cancel in the
difference of two rows of the same series: the per-token slope. The benchmark holds its own input x, the output y and
the incoming gradient dy; our terms give what the module keeps and makes on top of them.

- geglu forward (B 8, h 4096, I 11008, bf16; LlamaMLP vs LigerGEGLUMLP): exact, both columns. The forward's peak is
  x + y + the MLP's saved terms: 4 [t, I] eager (act input, act output, up output, product), 3 with Liger (eq. LG2).
- swiglu full (B 4, same widths; forward + ``backward(retain_graph=True)``, so every saved tensor lives through the
  backward; x.grad kept from the previous call): exact, both columns. huggingface: x, y, dy, x.grad + 4 [t, I] saved
  + eq. A3's 3 [t, I] of ``mul``'s backward = 7 I + 4 h elements per token (the smallest pair of rows is one h
  lower); Liger: 3 [t, I] saved + eq. A3l's 3 [t, h] (gradients written into the saved gate/up outputs) = 3 I + 7 h.
- fused_linear_cross_entropy full (h 4096, V 128256, bf16, BT 4096-32768; liger 0.4.2): huggingface (a bf16
  ``nn.Linear`` + ``CrossEntropyLoss`` without an upcast) exact with the three [t, V] tensors our eager loss counts at
  the loss backward (kept log-softmax + two gradients, at the logits' 2 B here) + x + x.grad. Liger: eq. LG4 (HEAD's
  code, one bf16 chunk) + x + x.grad is 32,596 B per token against 56,684 measured; the difference is exactly three
  more chunk-widths (0.4.2's lines 66-125: the fp32 ``.float()`` of the chunk beside the new bf16 chunk and the
  previous chunk's ``grad_logits_chunk``; HEAD computes in place on the bf16 chunk, lines 114, 162-163, 212), so the
  chunk rule LG3, shared by both releases, holds: the slope is linear in BT with chunk = BT / 32.
- rms_norm full (M 2048 rows, bf16 input, fp32 weights as the script builds them): the per-op backward of the eager
  norm is not modelled (eq. A3 has no norm phase), so only one side is checked: the saving our terms claim (eager fp32
  input + normalised - nothing new for Liger, whose X is the benchmark's x) is below the measured saving.
"""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from llmsizer.formulas import liger_kernels as lk
from llmsizer.formulas.training_activations import (
    ActivationSetup,
    head_activations,
    layer_backward_transient,
    layer_saved_terms,
)
from llmsizer.readers.hf_config import spec_from_config

ROWS = Path(__file__).parents[1] / "fixtures" / "liger_benchmark" / "memory_rows.csv"
MIB = 2**20
H, INTER, VOCAB = 4096, 11008, 128256


def _series(kernel: str, provider: str, mode: str = "full") -> list[tuple[int, float, dict[str, object]]]:
    with ROWS.open() as f:
        rows = [(int(r["x_value"]), float(r["y_value_50"]) * MIB, json.loads(r["extra_benchmark_config_str"]))
                for r in csv.DictReader(f) if (r["kernel_name"], r["kernel_provider"], r["kernel_operation_mode"],
                                               r["metric_name"]) == (kernel, provider, mode, "memory")]
    assert len(rows) >= 4, (kernel, provider, mode)
    return sorted(rows, key=lambda r: r[0])


def _slopes(series: list[tuple[int, float, dict[str, object]]], per_x: int) -> list[float]:
    """Bytes per token (per element of x for rms_norm) between consecutive rows."""
    return [(b[1] - a[1]) / ((b[0] - a[0]) * per_x) for a, b in zip(series, series[1:], strict=False)]


def _spec(act: str):  # type: ignore[no-untyped-def]
    return spec_from_config({"model_type": "llama", "vocab_size": VOCAB, "hidden_size": H, "intermediate_size": INTER,
                             "num_hidden_layers": 1, "num_attention_heads": 32, "num_key_value_heads": 8,
                             "max_position_embeddings": 8192, "hidden_act": act}, name="liger-bench")


def _mlp_saved(spec, st: ActivationSetup, liger: bool) -> int:  # type: ignore[no-untyped-def]
    """The MLP's saved activations per layer (its input is the benchmark's x, counted apart)."""
    terms = layer_saved_terms(spec, 0, st)
    if liger:
        terms = lk.layer_terms(spec, st, terms)
    mlp = [t for t in terms if t.name.startswith("mlp ") and not t.name.startswith(("mlp input", "mlp norm"))]
    assert len(mlp) == 1, [t.name for t in terms]
    return mlp[0].bytes


def test_chunk_rule_matches_liger_example() -> None:
    # fused_linear_cross_entropy.py lines 61-63: "BT = 4096*4, V = 32000, H = 4096 ==> inc_factor = 8, chunk_size = 2048"
    assert lk.flce_chunk_rows(4096 * 4, 4096, 32000) == 2048
    assert lk.flce_chunk_rows(4096, H, VOCAB) == 128  # inc_factor ceil(128256 / 4096) = 32
    assert lk.flce_chunk_rows(3000, H, VOCAB) == 128  # next power of 2 of ceil(3000 / 32) = 94
    assert lk.flce_chunk_rows(5, H, VOCAB) == 1
    assert lk.flce_chunk_rows(20, 4096, 1000) == 20  # V < h: one chunk of every row


@pytest.mark.parametrize("provider", ["huggingface", "liger"])
def test_geglu_forward_rows_exact(provider: str) -> None:
    series = _series("geglu", provider, "forward")
    bsz = int(series[0][2]["bsz"])  # type: ignore[call-overload]
    assert series[0][2]["hidden_act"] == "gelu_pytorch_tanh" and series[0][2]["intermediate_size"] == INTER
    spec, c = _spec("gelu_pytorch_tanh"), 2
    per_token = []
    for tokens in (1024, 2048):  # the terms are linear in tokens: two sizes give the slope
        st = ActivationSetup(batch=1, seq=tokens, compute=c, residual=c)
        per_token.append(_mlp_saved(spec, st, provider == "liger") + 2 * tokens * H * c)  # + x and y
    model = (per_token[1] - per_token[0]) / 1024
    assert model == (4 if provider == "huggingface" else 3) * INTER * c + 2 * H * c
    for slope in _slopes(series, bsz):
        assert slope == pytest.approx(model, rel=1e-4), (provider, slope, model)


@pytest.mark.parametrize("provider", ["huggingface", "liger"])
def test_swiglu_full_rows(provider: str) -> None:
    series = _series("swiglu", provider)
    bsz = int(series[0][2]["B"])  # type: ignore[call-overload]
    spec, c, t = _spec("silu"), 2, 1024
    st = ActivationSetup(batch=1, seq=t, compute=c, residual=c)
    liger = provider == "liger"
    # A3 over a layer whose attention is negligible (one head of 8): the MLP's phases
    tiny_attention = spec_from_config({"model_type": "llama", "vocab_size": VOCAB, "hidden_size": H,
                                       "intermediate_size": INTER, "num_hidden_layers": 1, "num_attention_heads": 1,
                                       "num_key_value_heads": 1, "head_dim": 8, "max_position_embeddings": 8192},
                                      name="liger-bench-mlp")
    transient = layer_backward_transient(tiny_attention, 0, st, in_place_glu=liger)
    assert transient == (max(INTER, 3 * H) if liger else 3 * INTER) * t * c + t * H * c  # + dy, the incoming gradient
    model = (_mlp_saved(spec, st, liger) + transient + 3 * t * H * c) / t  # + x, y and x.grad (from the last call)
    assert model == ((3 * INTER + 7 * H) if liger else (7 * INTER + 4 * H)) * c
    slopes = _slopes(series, bsz)
    for slope in slopes[1:]:
        assert slope == pytest.approx(model, rel=1e-4), (provider, slopes, model)
    # the smallest pair: liger exact too; huggingface one [t, h] lower (its peak there is not the larger sizes')
    assert slopes[0] == pytest.approx(model - (0 if liger else H * c), rel=1e-4)


def test_fused_linear_cross_entropy_full_rows() -> None:
    hf, lg = _series("fused_linear_cross_entropy", "huggingface"), _series("fused_linear_cross_entropy", "liger")
    cfg = hf[0][2]
    assert (cfg["H"], cfg["V"], cfg["dtype"]) == (H, VOCAB, "torch.bfloat16")
    c = 2
    # huggingface: the eager loss's tensors at the loss backward (head_activations, all fp32 so no upcast is added:
    # the kept log-softmax and the two gradients), at this loss's 2 B logits, + x and x.grad
    st32 = ActivationSetup(batch=1, seq=1024, compute=4, residual=4)
    head = head_activations(_spec("silu"), st32, lm_head_trained=True)
    logsm = sum(t.bytes for t in head.saved if t.name.startswith("loss log-softmax")) - 1024 * 8  # less the labels
    eager_tv = (logsm + head.loss_backward) * c // 4 // 1024
    assert eager_tv == 3 * VOCAB * c
    for slope in _slopes(hf, 1):
        assert slope == pytest.approx(eager_tv + 2 * H * c, rel=1e-4)
    # liger: eq. LG4 per token (grad_input + fp32 loss; one chunk at BT / 32 rows) + x and x.grad
    for (bt0, y0, _), (bt1, y1, _) in zip(lg, lg[1:], strict=False):
        ours = []
        for bt in (bt0, bt1):
            kept, fwd = lk.flce_terms(bt, H, VOCAB, c, c, lm_head_trained=False)
            assert lk.flce_chunk_rows(bt, H, VOCAB) == bt // 32
            ours.append(sum(t.bytes for t in kept) + fwd + 2 * bt * H * c)
        model = (ours[1] - ours[0]) / (bt1 - bt0)
        slope = (y1 - y0) / (bt1 - bt0)
        assert model < slope
        # liger 0.4.2's chunk: its fp32 copy beside the new bf16 chunk and the previous chunk's bf16 gradient
        assert slope == pytest.approx(model + 3 * VOCAB * c / 32, rel=5e-3), (bt0, slope, model)
    # the constants: two models' [V, h] weights (the script builds both) + the lm_head's .grad from the last call,
    # and for liger its grad_weight (eq. LG4) too; within 32 MiB (cuBLAS workspace, small buffers)
    vh = VOCAB * H * c
    for series, n in ((hf, 3), (lg, 4)):
        bt, y, _ = series[0]
        slope = (series[1][1] - y) / (series[1][0] - bt)
        assert 0 <= (y - slope * bt) - n * vh < 32 * MIB, (n, y - slope * bt)


def test_rms_norm_full_rows_one_sided() -> None:
    hf, lg = _series("rms_norm", "huggingface"), _series("rms_norm", "liger")
    rows = int(hf[0][2]["M"])  # type: ignore[call-overload]
    spec = _spec("silu")
    st = ActivationSetup(batch=1, seq=rows, compute=2, residual=2)
    eager = [t for t in layer_saved_terms(spec, 0, st) if t.name.startswith("attention norm")]
    liger = lk.layer_terms(spec, st, tuple(eager))
    assert [t.name for t in liger] == ["attention norm input + 1/rms (LigerRMSNorm)"]
    # Liger's X is the caller's own tensor (the benchmark's x): nothing new; eager: the fp32 copy and normalised
    claimed = (sum(t.bytes for t in eager) - rows * 4) / (rows * H)
    assert claimed == 4 + 2
    for (n, y_hf, _), (n2, y_lg, _) in zip(hf, lg, strict=True):
        assert n == n2
        measured = (y_hf - y_lg) / (rows * n)
        assert claimed < measured, (n, measured)
    assert liger[0].bytes == rows * H * 2 + rows * 4
