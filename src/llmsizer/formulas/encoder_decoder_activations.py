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
tests/training/test_t5_saved_tensors.py.

Outside the blocks (``T5Stack.forward`` and ``T5ForConditionalGeneration.forward``, same file), every weight
trained, V the vocabulary:

- each stack's ``embed_tokens`` keeps its int64 ids (8 B per token; the decoder's are the labels shifted right),
  its ``dropout`` keeps a mask; each ``final_layer_norm`` keeps 3h + 1 per token as a block's norm does (the
  dropped copy after it is the lm_head's input, or the encoder output the decoder's cross-attention k and v
  projections read), and its ``dropout`` a mask;
- each stack's relative position bias embeds an int64 [q, k] bucket index once (the first block computes it;
  the others reuse the bias): s^2 x 8 and t^2 x 8 B;
- the loss (``CrossEntropyLoss``) keeps the fp32 log-softmax [b t, V], the int64 labels and its fp32 total
  weight (4 B):

    outside = b s (3h + 1) c + b t (3h + 1) c + 8 b (s + 2 t) + 8 (s^2 + t^2) + b t V 4 + 4
              + 2 b (s + t) h m   (dropout masks; none without dropout)                                    (E5)

(c: bytes of a compute element, m: of a mask element). Measured exactly with E4 over the whole model in
tests/training/test_t5_saved_tensors.py (tied and untied embeddings alike: the tied model's rescaled decoder
output replaces the dropped copy as the lm_head's input).

LoRA on q and v (PEFT's T5 default, ``lora_dropout`` > 0, PEFT ``lora.Linear``: ``lora_B(lora_A(dropout(x)))``;
T5's q and v match in the self- and the cross-attention), every base weight frozen. A frozen linear keeps
nothing, a frozen norm keeps its input and ``rsqrt`` (h + 1, the scaling's backward reads the frozen weight), an
adapter keeps its dropped input, the mask when the input needs a gradient, and ``lora_A``'s output (r per token).
Nothing before the first adapter needs a gradient: a stack's first block keeps neither its first norm, nor the
adapters' masks, nor q (k needs no gradient); the embeddings, the position-bias buckets and the embedding dropout
keep nothing. With g = 1 for a block after the first (0 for the first), m_l the adapters' mask bytes:

    lora(tokens) = tokens x (h (c + g m_l) + r c)      (the cross-attention's q: g = 1; its v over the source: g = 1)
    encoder block:  b s [g (h + 1) c + 2 lora + (2 + g) i c + P(s) + h m + (h + 1) c + F_l + h m]
    decoder block:  b t [g (h + 1) c + 2 lora + (2 + g) i c + P(t) + h m
                         + (h + 1) c + lora + i c + P(s) + h m  +  (h + 1) c + F_l + h m]  + b s [lora + 2 i c]   (E6)
    outside:        b (s + t) [(h + 1) c + h m] + b t V 4 + 8 b t + 4

with P(k) = n k (2c + m) (n k c without dropout), F_l = 6 f c + f m (gated gelu_new: the chain, wi_1's output and
the GELU output; ``wo`` is frozen) or f c + f m (ReLU). Measured exactly with PEFT 0.21.2 in
tests/training/test_t5_saved_tensors.py.
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


def _outside_dims(spec: ModelSpec, mask_bytes: int) -> tuple[int, int, int]:
    """(hidden size, vocabulary, dropout-mask bytes per element: 0 without dropout) of an encoder-decoder ``spec``."""
    ed = spec.encoder_decoder
    if ed is None:
        raise InputError(f"model {spec.name!r} is not an encoder-decoder")
    return spec.hidden_size, spec.vocab_size, (mask_bytes if ed.dropout > 0 else 0)


def t5_outside_blocks_saved_terms(spec: ModelSpec, batch: int, source: int, target: int, elem: int,
                                  mask_bytes: int) -> tuple[tuple[str, int, str], ...]:
    """Eq. (E5): (name, bytes, arithmetic) of what the encoder-decoder ``spec`` keeps for the backward outside its
    blocks (embeddings, position-bias indices, both final norms, dropout masks, the loss's fp32 log-softmax)."""
    h, v, m = _outside_dims(spec, mask_bytes)
    b, s, t = batch, source, target
    return (
        ("final norms (encoder, decoder)", b * (s + t) * (3 * h + 1) * elem,
         f"{b} x ({s} + {t}) tokens x (3 x {h} + 1) x {elem} B"),
        ("embedding ids + position-bias buckets", 8 * b * (s + t) + 8 * (s * s + t * t),
         f"8 B x ({b} x ({s} + {t}) ids + {s}^2 + {t}^2 buckets)"),
        ("embedding and final dropout masks", 2 * b * (s + t) * h * m,
         f"2 x {b} x ({s} + {t}) tokens x {h} x {m} B"),
        ("loss log-softmax (fp32)", b * t * v * 4 + b * t * 8 + 4,
         f"{b * t} target tokens x {v} vocab x 4 B + int64 labels + fp32 total weight"),
    )


def t5_lora_block_saved_bytes(spec: ModelSpec, layer: int, batch: int, source: int, target: int, elem: int,
                              mask_bytes: int, rank: int) -> int:
    """Eq. (E6): bytes block ``layer`` keeps under LoRA on q and v (self- and cross-attention, adapter dropout on),
    every base weight frozen."""
    ed = spec.encoder_decoder
    if ed is None:
        raise InputError(f"model {spec.name!r} is not an encoder-decoder")
    h, i, n, f, c = spec.hidden_size, spec.num_heads * spec.head_dim, spec.num_heads, spec.intermediate_size, elem
    m = mask_bytes if ed.dropout > 0 else 0
    g = int(layer not in (0, ed.encoder_layers))  # a stack's first block: its input needs no gradient
    ffn = (h + 1) * c + (6 if spec.mlp_gated else 1) * f * c + f * m + h * m

    def lora(grad: int) -> int:  # per token: the dropped input, its mask (input needs a gradient), lora_A's output
        return h * (c + grad * mask_bytes) + rank * c

    def probs(keys: int) -> int:  # softmax output (+ mask and dropped copy with dropout), per query token
        return n * keys * (2 * c + m if ed.dropout > 0 else c)

    self_attn = g * (h + 1) * c + 2 * lora(g) + (2 + g) * i * c + h * m
    if layer < ed.encoder_layers:
        return batch * source * (self_attn + probs(source) + ffn)
    cross = (h + 1) * c + lora(1) + i * c + probs(source) + h * m
    return batch * target * (self_attn + probs(target) + cross + ffn) + batch * source * (lora(1) + 2 * i * c)


def t5_lora_outside_blocks_saved_terms(spec: ModelSpec, batch: int, source: int, target: int, elem: int,
                                       mask_bytes: int) -> tuple[tuple[str, int, str], ...]:
    """Eq. (E6), outside the blocks under LoRA (frozen embeddings, norms and lm_head): both final norms' input and
    rsqrt, their dropout masks, the loss's fp32 log-softmax."""
    h, v, m = _outside_dims(spec, mask_bytes)
    b, s, t = batch, source, target
    return (
        ("final norms (encoder, decoder; frozen)", b * (s + t) * (h + 1) * elem,
         f"{b} x ({s} + {t}) tokens x ({h} + 1) x {elem} B"),
        ("final dropout masks", b * (s + t) * h * m, f"{b} x ({s} + {t}) tokens x {h} x {m} B"),
        ("loss log-softmax (fp32)", b * t * v * 4 + b * t * 8 + 4,
         f"{b * t} target tokens x {v} vocab x 4 B + int64 labels + fp32 total weight"),
    )
