"""Memory-bound traffic of attention without a fused attention kernel ('eager' attention): the softmax and dropout
over the [b, heads, s, s] score tensor, which flash / memory-efficient SDPA kernels never write to device memory.

Read from Megatron-LM's attention (NVIDIA/Megatron-LM SC21 commit 6985e58 ``megatron/model/transformer.py``
``ParallelAttention``, lines 261-330): ``torch.baddbmm`` writes the raw scores [b * np, s_q, s_k] (np = heads /
tp per device), ``self.scale_mask_softmax`` (the fused causal kernel ``scaled_upper_triang_masked_softmax``,
``megatron/fused_kernels/scaled_upper_triang_masked_softmax.h``: the forward loads only the ``local_seq`` = row + 1
causal elements of each row, lines 151-158, and writes the whole row, zeros past the diagonal, lines 209-224; the
backward loads the gradient and the softmax output of the causal elements, lines 275-282, and writes the whole
row's gradient, lines 317-326), then ``self.attention_dropout`` (torch dropout, p = ``--attention-dropout`` 0.1 by
default, ``megatron/arguments.py`` line 352: reads the probabilities, writes them and a 1-byte mask; its backward
reads the gradient and the mask and writes the gradient), then ``torch.bmm`` with the values. The two batched GEMMs'
operands are the GEMMs' own traffic (their FLOPs are the 12 L d s term of formulas/training_time.py eq. (1)); the
kernels between them move, per token and attention layer, with e = np s score elements of c bytes each::

    forward    S_f = (1.5 c + D (2c + 1)) e     (softmax: 1/2 read on average + 1 write; dropout)        (A1)
    backward   S_b = (2 c + D (2c + 1)) e       (softmax backward: 2 x 1/2 read + 1 write; dropout)      (A2)

D = 1 when attention dropout is on (Megatron's GPT pre-training default), else 0. A fully recomputed layer runs
S_f again in the backward. Time at the device memory bandwidth like every memory-bound kernel
(formulas/elementwise_traffic.py eq. (E7)). Transformers' eager attention (unfused mask add, fp32 softmax and the
cast back) moves more than the fused kernel, so for it these counts are a lower bound.

The score GEMMs themselves (eq. (A3)). Megatron-LM's core attention today runs the same two batched products
(NVIDIA/Megatron-LM @d98e8a6 ``megatron/core/transformer/dot_product_attention.py`` ``DotProductAttention.forward``:
``torch.baddbmm`` of [b * np, s, d_h] x [b * np, d_h, s] into a preallocated [b * np, s, s] buffer, lines 189-199, and
``torch.bmm`` of the [b * np, s, s] probabilities with [b * np, s, d_h] values, line 239); autograd adds four of the
same size in the backward. Each is, per sequence and head, an s x s x d_h GEMM of 2 s^2 d_h FLOPs that moves
c (s^2 + 2 s d_h) bytes, so per token of the sequence and head::

    F = 2 s d_h,    B = c (s + 2 d_h),    arithmetic intensity F / B ~ 2 d_h / c  (d_h FLOP/B in 16 bits)

(formulas/gemm_shapes.py eq. (1)), below an A100's ridge point (312 TFLOP/s / 2.04 TB/s = 153 FLOP/B) for
d_h = 64-128: unlike the projections' GEMMs, these are bound by the s x s matrix's traffic, and the FlashAttention
paper names that traffic as standard attention's cost (Dao et al. 2022, arXiv 2205.14135, section 2.2, Algorithm 0:
S and P written to and read back from HBM; section 3.2, Theorem 2: Theta(N d + N^2) HBM accesses). The roofline
max(F / R u, B / B_mem) assumes the traffic overlaps the math (Williams, Waterman and Patterson 2009, "Roofline",
CACM 52(4)); with K = d_h the products with the s x s matrix as their output (QK^T, dP) run one or two K-tiles per
thread block (CUTLASS's SM80 half-precision default, ``include/cutlass/gemm/device/default_gemm_configuration.h``
``DefaultGemmConfiguration<OpClassTensorOp, Sm80, ...>``: 128 x 256 x 64 tiles, 3 stages: the prologue loads the
whole K before the first MMA and the s x s tile is stored after the last), so load, math and store follow each other.
Timed without overlap, F at the GEMM rate R u and B at the memory-bound kernels' bandwidth, for g = 6 GEMMs (8 when
the layer is recomputed)::

    t_A3 = g (F / (R u) + B / (eta B_mem))   per token and attention layer               (A3)

Checked against a measurement of exactly these kernels (tests/formulas/test_eager_score_gemms.py): Korthikanti et
al. 2022 (arXiv 2205.05198) Table 4, one layer of their 22B GPT (Table 3: 64 heads, hidden 6144, TP 8, micro-batch 4,
s 2048) on an A100 80GB: selective recomputation, which re-runs only the attention core's forward, adds 1.3 ms
(13.2 - 11.9 ms). (A1) + (A3)'s forward give 1.24 ms; with the overlapping roofline they would give 0.95 ms, so the
measurement rules the overlap out.
"""

from __future__ import annotations

from ..errors import InputError


def eager_attention_bytes_per_token(heads_per_device: int, seq_len: int, c: float, dropout: bool,
                                    recomputed: bool) -> float:
    """Eqs. (A1)-(A2) per token and attention layer [B], with the forward again when the layer is recomputed.

    >>> eager_attention_bytes_per_token(1, 10, 2, True, False)   # (3 + 5) 10 forward + (4 + 5) 10 backward
    170.0
    """
    if heads_per_device < 1 or seq_len < 1 or c <= 0:
        raise InputError("heads per device and sequence length must be >= 1, element size positive")
    e = float(heads_per_device) * seq_len
    drop = (2.0 * c + 1.0) if dropout else 0.0
    fwd = (1.5 * c + drop) * e
    bwd = (2.0 * c + drop) * e
    return fwd * (2.0 if recomputed else 1.0) + bwd



SCORE_GEMMS_FORWARD = 2  # QK^T (torch.baddbmm into the [b * np, s, s] buffer), PV (torch.bmm)
SCORE_GEMMS_BACKWARD = 4  # dP = dO V^T, dV = P^T dO, dQ = dS K, dK = dS^T Q (autograd of bmm / baddbmm)


def score_gemm_seconds_per_token(heads_per_device: int, seq_len: int, head_dim: int, c: float, recomputed: bool,
                                 math_rate: float, bandwidth: float) -> float:
    """Eq. (A3) per token and attention layer [s]: the batched score GEMMs of eager attention, each (per sequence and
    head) an s x s x d_h product with the s x s matrix as its output (QK^T, dP) or an operand (PV, dV, dQ, dK), timed
    without overlap of that matrix's traffic and the math: F / ``math_rate`` + B / ``bandwidth``.

    >>> score_gemm_seconds_per_token(1, 10, 2, 2.0, False, 40.0, 28.0)   # 6 x (2 x 10 x 2 / 40 + 2 x 14 / 28)
    12.0
    """
    if heads_per_device < 1 or seq_len < 1 or head_dim < 1 or c <= 0:
        raise InputError("heads per device, sequence length and head size must be >= 1, element size positive")
    if math_rate <= 0 or bandwidth <= 0:
        raise InputError("math rate and bandwidth must be positive")
    h, s, d = float(heads_per_device), float(seq_len), float(head_dim)
    flops = 2.0 * h * s * d  # one GEMM's 2 s^2 d_h per head, per token of the sequence
    nbytes = c * h * (s + 2.0 * d)  # its s x s matrix and two s x d_h operands, per token
    g = SCORE_GEMMS_FORWARD * (2 if recomputed else 1) + SCORE_GEMMS_BACKWARD
    return g * (flops / math_rate + nbytes / bandwidth)
