"""Liger-Kernel's step-time mechanism (formulas/elementwise_traffic.py eqs. E20-E22, formulas/liger_kernels.py eqs.
LG3, LG5) against the speed Liger-Kernel itself measured: benchmark/data/all_benchmark_data.csv @ead96b6, the `speed`
rows of rms_norm, rope, geglu, swiglu and fused_linear_cross_entropy, providers 'liger' and 'huggingface' (copied
verbatim to tests/fixtures/liger_benchmark/speed_rows.csv; A100-SXM4-80GB; nothing is fitted to them).

What is compared is the time a kernel saves (or costs) against transformers' eager module: the difference of the two
rows, measured, against the difference of their bytes at the memory-bound bandwidth (efficiency.MEMORY_BOUND_BANDWIDTH
x the catalog's A100 bandwidth), predicted. The GEMMs of the MLP and lm_head rows run the same FLOPs on both sides and
cancel. Only the largest sizes of each series are used: below them Liger's own kernels sit at a launch floor (rms_norm
backward about 0.09 ms from H 1024 to 4096), which the bandwidth does not describe.

Found (predicted / measured saving): RMSNorm 0.74-0.89, RoPE 0.48-0.70 (the eager rotary's strided ops run slower
than their bytes: the mechanism is conservative), GeGLU backward and forward + backward 0.75-1.23. The MLP forward
alone is not resolved by the rows: a single sample of a GEMM-bound module (y_20 = y_50 = y_80), whose predicted saving
(2c I per token, about 2 % of the module) is within the spread of the GEMMs (swiglu T 1024 and 2048: Liger 8-10 %
slower). The fused linear cross-entropy rows are liger 0.4.2, whose chunk loop differs from HEAD's (0.4.2's lines
66-125: the chunk upcast to fp32, the kernel on fp32, the cast back, the ``* alpha`` copy; ``addmm`` into a bf16
grad_weight); with that release's bytes and the chunk rule LG3 that both share, the excess Liger pays over the eager
loss is predicted 0.71-1.41 x the measured one over BT 4096-32768 (the per-chunk weight-gradient pass dominates at
small BT; the per-chunk sum is the shipped eq. LG5 at release 0.4.2; the default release's LG5 moves more per chunk
and no row measures it).
"""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from llmsizer.catalog.hardware import builtin_catalog
from llmsizer.estimate import efficiency as E
from llmsizer.formulas import liger_kernels as lk
from llmsizer.formulas.elementwise_traffic import LayerWidths, layer_bytes, rmsnorm_bytes, rotary_forward_bytes

ROWS = Path(__file__).parents[1] / "fixtures" / "liger_benchmark" / "speed_rows.csv"
C = 2.0  # bf16, every series


def _bandwidth() -> float:
    dev = builtin_catalog().devices["a100-sxm-80gb"]
    return float(dev.memory_bandwidth.base) * E.MEMORY_BOUND_BANDWIDTH.expected  # type: ignore[union-attr]


def _ms(kernel: str, provider: str, mode: str, x: int, **config: object) -> float:
    with ROWS.open() as f:
        rows = [float(r["y_value_50"]) for r in csv.DictReader(f)
                if (r["kernel_name"], r["kernel_provider"], r["kernel_operation_mode"], int(r["x_value"]))
                == (kernel, provider, mode, x) and r["gpu_name"] == "NVIDIA A100-SXM4-80GB"
                and all(json.loads(r["extra_benchmark_config_str"]).get(k) == v for k, v in config.items())]
    assert len(rows) == 1, (kernel, provider, mode, x, config)
    return rows[0]


def _saved(kernel: str, mode: str, x: int, **config: object) -> float:
    """Measured eager minus Liger, in seconds."""
    return (_ms(kernel, "huggingface", mode, x, **config) - _ms(kernel, "liger", mode, x, **config)) / 1e3


BAND = (0.4, 1.3)  # predicted / measured saving; a mechanism off by more than this is reported, not applied


@pytest.mark.parametrize("h", [16384, 32768])
def test_rms_norm_saving(h: int) -> None:
    """LlamaRMSNorm (the script's copy, benchmark_rms_norm.py @b5672a1) vs LigerRMSNorm over M = 2048 rows: eager
    N_f, N_b (weight trained) against eq. E20/E21's 2c h + 4 and 3c h + 4 per row."""
    m = 2048
    nf, nb = rmsnorm_bytes(h, C, False, True)
    for mode, eager, liger in (("forward", nf, 2 * C * h + 4), ("backward", nb, 3 * C * h + 4)):
        predicted = m * (eager - liger) / _bandwidth()
        ratio = predicted / _saved("rms_norm", mode, h, M=m)
        assert BAND[0] <= ratio <= BAND[1], (mode, h, ratio)


@pytest.mark.parametrize("seq", [8192, 16384])
def test_rope_saving(seq: int) -> None:
    """transformers' apply_rotary_pos_emb vs LigerRopeFunction, batch 1, hidden 8192, 32 q / 8 kv heads (d_h 256):
    eager (E1r) forward, 16c (q_w + k_w) + 4c d_h backward, against eq. E20/E21's 2c (q_w + k_w) + c d_h."""
    w = LayerWidths(8192, 0, 32 * 256, 8 * 256, 256)
    liger = 2 * C * (w.q_width + w.kv_width) + C * w.head_dim
    back = 16 * C * (w.q_width + w.kv_width) + 4 * C * w.head_dim
    for mode, eager in (("forward", rotary_forward_bytes(w, C)), ("backward", back)):
        predicted = seq * (eager - liger) / _bandwidth()
        ratio = predicted / _saved("rope", mode, seq, hidden_size=8192)
        assert BAND[0] <= ratio <= BAND[1], (mode, seq, ratio)


@pytest.mark.parametrize("t", [4096, 8192])
def test_geglu_mlp_saving(t: int) -> None:
    """LlamaMLP (gelu_pytorch_tanh) vs LigerGEGLUMLP, bsz 8, h 4096, I 11008: the layer equations' activation terms
    (E1/E2's 5c I and 9c I; E20/E21's 3c I and 5c I), read off layer_bytes as the difference of a gated layer with
    and without Liger's kernels at hidden 0 heads 0 (only the MLP's terms left)."""
    tokens, inter = 8 * t, 11008
    w = LayerWidths(1, inter, 0, 0, 0, rotary=False)
    ef, eb = layer_bytes(w, C, False, False)
    gf, gb = layer_bytes(w, C, False, False, liger=True)
    rf, rb = rmsnorm_bytes(1, C, False, False)
    # the hidden-width 1 leftovers (two norms, residual terms) differ by the norms' own bytes only
    norm_f, norm_b = 2 * (rf - (2 * C + 4)), 2 * (rb - (3 * C + 4))
    act_f, act_b = ef - gf - norm_f, eb - gb - norm_b
    assert (act_f, act_b) == (2 * C * inter, 4 * C * inter)
    for mode, saved in (("backward", act_b), ("full", act_f + act_b)):
        ratio = tokens * saved / _bandwidth() / _saved("geglu", mode, t)
        assert BAND[0] <= ratio <= BAND[1], (mode, t, ratio)


def test_swiglu_forward_below_the_rows_resolution() -> None:
    """The MLP forward's saving (2c I per token) is under 3 % of the measured module, while the two providers' rows
    differ by up to 10 % at small T: the rows cannot check it (the module docstring)."""
    for t in (1024, 2048, 4096, 8192):
        saving = 4 * t * 2 * C * 11008 / _bandwidth()
        assert saving < 0.03 * _ms("swiglu", "huggingface", "forward", t) / 1e3
    assert _ms("swiglu", "liger", "forward", 2048) > 1.05 * _ms("swiglu", "huggingface", "forward", 2048)


@pytest.mark.parametrize("bt", [4096, 8192, 16384, 32768])
def test_flce_excess(bt: int) -> None:
    """nn.Linear + CrossEntropyLoss on bf16 logits (benchmark_fused_linear_cross_entropy.py @7e3683e: no upcast:
    log_softmax 2c, nll_loss_backward's zeroed gradient c, log_softmax_backward 3c per logit) vs liger 0.4.2's loop
    per logit: ``.float()`` c + 4, the cross-entropy kernel on fp32 (two reads, one write: 12), ``.to(dtype)`` 4 + c,
    ``* alpha`` 2c; per chunk (eq. LG3) ``addmm`` reading and writing the bf16 grad_weight, 2c V h."""
    h, v = 4096, 128256
    chunks = -(-bt // lk.flce_chunk_rows(bt, h, v))
    assert chunks == 32  # inc_factor ceil(V / h) = 32; BT a power of two
    per_logit = (C + 4) + 12 + (4 + C) + 2 * C - 6 * C
    # the per-chunk weight-gradient sum through the shipped eq. LG5 at that release (addmm into grad_weight)
    sums = lk.flce_weight_grad_bytes(bt, h, v, int(C), int(C), release="0.4.2")
    assert sums == chunks * 2 * C * v * h
    predicted = (bt * v * per_logit + sums) / _bandwidth()
    ratio = predicted / -_saved("fused_linear_cross_entropy", "full", bt, H=h, V=v)
    assert 0.5 <= ratio <= 1.5, (bt, ratio)


def test_lg5_head_bytes() -> None:
    """Eq. LG5 at HEAD, Llama 3 8B's lm_head, 4096 tokens: 32 chunks, bf16 weights 16 B per element per chunk (line
    257: mm written 2, .float() 2 + 4, += 2 + 4 read and 2 written); fp32 weights under autocast 8 (line 249)."""
    h, v = 4096, 128256
    assert lk.flce_weight_grad_bytes(4096, h, v, 2, 2) == 32 * v * h * 16
    assert lk.flce_weight_grad_bytes(4096, h, v, 2, 4) == 32 * v * h * 8
    assert lk.flce_weight_grad_bytes(4096, h, v, 4, 4) == 32 * v * h * 16


def test_lg5_release_paths() -> None:
    """Eq. LG5 follows the release's loop (liger_kernels.LG5_PATHS, from the file's git history): v0.6.1 addmm into a
    bf16 grad_weight 4 B; v0.6.2-v0.8.0 mm().float() then += for fp32 weights under autocast too (2 + 6 + 12 = 20 B);
    v0.8.1/v0.8.2 addmm out_dtype for fp32 (8 B); the unreleased 00eba634 also addmm(out=grad_weight) for bf16 (4 B).
    The default is the newest release, and the step-time assumption names it."""
    e = lk.flce_weight_grad_element_bytes
    assert (e(2, 2, "0.6.1"), e(2, 2, "0.6.2"), e(2, 2, "0.8.2"), e(2, 2, lk.LIGER_UNRELEASED)) == (4, 16, 16, 4)
    assert (e(2, 4, "0.6.1"), e(2, 4, "0.8.0"), e(2, 4, "0.8.1"), e(2, 4, lk.LIGER_UNRELEASED)) == (8, 20, 8, 8)
    assert e(2, 2) == e(2, 2, lk.LIGER_RELEASE) == 16
    from llmsizer.estimate.duration import LIGER_TIME_WHY
    assert f"Liger-Kernel {lk.LIGER_RELEASE}" in LIGER_TIME_WHY
    from llmsizer.errors import InputError
    with pytest.raises(InputError, match="Liger-Kernel release"):
        e(2, 2, "latest")
