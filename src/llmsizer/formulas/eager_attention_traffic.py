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
