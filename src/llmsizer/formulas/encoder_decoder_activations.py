"""What one T5 / mT5 block keeps for the backward in training (``ModelSpec.encoder_decoder``), eager attention.

Read from transformers v5.24.0 ``models/t5/modeling_t5.py`` (``T5LayerNorm``, ``T5Attention``,
``T5LayerSelfAttention``, ``T5LayerCrossAttention``, ``T5DenseActDense``, ``T5DenseGatedActDense``, ``T5LayerFF``)
and counted per element of the compute dtype (fp32 here: no casts), for ``b`` sequences of ``s`` source tokens
(encoder) or ``t`` target tokens (decoder), width h, inner width i = num_heads x d_kv, n heads, FFN width f:

- each ``T5LayerNorm``: its input, ``rsqrt(variance)`` [t, 1], ``x * rsqrt`` and ``weight * (...)`` (the
  projections' input): 3h + 1 per token;
- self-attention: q, k, v and the head-merged context (``o``'s input): 4i per token; the scores (position bias
  added) go through softmax and dropout: the probabilities, the dropout mask and the dropped probabilities,
  3 x n x (tokens attended) per token; the dropout mask after the sub-layer: h per token                       (E1)
- cross-attention (decoder): q and the context, 2i per target token; k and v over the encoder output,
  2i per source token; 3 x n x s per target token of scores; the sub-layer's dropout mask, h                   (E2)
- the FFN: gated gelu_new (T5 v1.1, mT5, T0, mT0: ``wi_0``, NewGELU's Python chain keeps its input, tanh output,
  0.5 x and 1 + tanh; ``wi_1``'s output and the GELU output for their product; the dropped product for ``wo``;
  the dropout mask): 8f per token; ReLU (original T5: ReLU output, dropped output, mask): 3f; the sub-layer's
  dropout mask, h                                                                                               (E3)

    encoder block:  b x s x [(3h + 1) + 4i + h + 3 n s  +  (3h + 1) + F + h]
    decoder block:  b x t x [(3h + 1) + 4i + h + 3 n t  +  (3h + 1) + 2i + h + 3 n s  +  (3h + 1) + F + h]
                    + b x s x 2i                                                                               (E4)

with F = 8f (gated gelu_new) or 3f (ReLU). Without dropout (``dropout_rate`` 0) the masks and dropped copies go:
n x tokens of probabilities, no sub-layer masks, F = 7f (``wo`` keeps the product itself) or 1f (``wo`` keeps the
ReLU output the ReLU keeps). Masks are counted at
``mask_bytes`` each (on a CPU ``at::dropout`` multiplies by a noise tensor of the input dtype; CUDA's fused
``native_dropout`` keeps 1-byte masks). Measured exactly (fp32, CPU, torch 2.13) in
tests/training/test_t5_saved_tensors.py. The position bias, embedding dropout, final norms, lm_head and loss are
outside the blocks and not counted here.
"""

from __future__ import annotations

from ..errors import InputError
from ..specs import ModelSpec


def t5_block_saved_bytes(spec: ModelSpec, layer: int, batch: int, source: int, target: int, elem: int,
                         mask_bytes: int) -> int:
    """Eq. (E4): bytes block ``layer`` of the encoder-decoder ``spec`` keeps for the backward (``elem``: bytes of a
    compute element; ``mask_bytes``: of a dropout mask element)."""
    ed = spec.encoder_decoder
    if ed is None:
        raise InputError(f"model {spec.name!r} is not an encoder-decoder")
    drop = ed.dropout > 0
    if spec.mlp_gated and spec.mlp_act_python:  # gelu_new chain (4), wi_1 output, gelu output, wo's input
        ffn_kept = 7
    elif not spec.mlp_gated and not spec.mlp_act_python:  # ReLU output (also wo's input without dropout) + dropped
        ffn_kept = 2 if drop else 1
    else:
        raise InputError(f"model {spec.name!r}: the saved tensors of this T5 feed-forward activation are not counted "
                         "(only gated gelu_new and ReLU)")
    h, i, n, f = spec.hidden_size, spec.num_heads * spec.head_dim, spec.num_heads, spec.intermediate_size
    norm = (3 * h + 1) * elem
    sub_mask = h * mask_bytes if drop else 0

    def probs(keys: int) -> int:  # softmax output (+ mask and dropped copy with dropout), per query token
        return n * keys * (2 * elem + mask_bytes if drop else elem)

    ffn = norm + f * (ffn_kept * elem + (mask_bytes if drop else 0)) + sub_mask
    self_attn = norm + 4 * i * elem + sub_mask
    if layer < ed.encoder_layers:
        return batch * source * (self_attn + probs(source) + ffn)
    cross = norm + 2 * i * elem + sub_mask + probs(source)
    return batch * target * (self_attn + probs(target) + cross + ffn) + batch * source * 2 * i * elem
