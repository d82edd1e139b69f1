"""Serving a T5 / mT5 encoder-decoder (``ModelSpec.encoder_decoder``) with transformers ``generate()``: memory and work.

Read from transformers v5.24.0 ``models/t5/modeling_t5.py`` and ``generation/utils.py``. ``generate()`` runs the
encoder once over the source (``_prepare_encoder_decoder_kwargs_for_generation``, generation/utils.py L1030: the
output is kept in ``model_kwargs["encoder_outputs"]`` to the end), then the decoder one target token per step; the
first step projects the encoder output to each decoder layer's cross-attention K/V and caches them
(``T5Attention.forward`` L321-333: ``is_updated`` reuses them afterwards), so a later step neither recomputes nor
reads the cross-attention k/v weights. Symbols: b sequences, s source tokens, t target tokens, width d, inner width
i = num_heads x d_kv, n heads, FFN width f, vocabulary V, c bytes of a compute element.

The encoder's forward (no padding: ``generate()``'s all-ones mask adds no [b, 1, s, s] mask) peaks in one of three
places, each measured exactly on tiny T5s with a live-tensor tracker (tests/formulas/test_t5_serving_forward.py):

- the relative-position buckets of the first block (``T5Attention._relative_position_bucket`` L218-263 over an
  int64 [s, s] ``relative_position``, L269-271): six int64 [s, s] tensors and the boolean ``is_small`` live at
  ``torch.min``, with the two position ranges (8 s each); beside them q, k, v and the block's normed input and the
  input embeddings (``T5Stack.forward`` keeps ``inputs_embeds``)

      bucket = 49 s^2 + 16 s + c b s (2 d + 3 i)                                                                  (S1)

- a later block's self-attention: the position bias [1, n, s, s] (L278-279, computed once and reused by every block)
  held, the embeddings, the block input and its normed copy, q, k, v; eager attention (``eager_attention_forward``
  L160-168) keeps two [b, n, s, s] score tensors at once (the product and its scaled copy, then scaled and biased,
  then biased and softmaxed) before any output; sdpa gets the bias as its additive mask
  (integrations/sdpa_attention.py ``create_position_bias_mask``: the bias itself), a permuted view (L279) that the
  fused kernel copies contiguous, and keeps no scores but its output and its fp32 log-sum-exp [b, n, s]

      attention = c n s^2 + c b s (3 d + 3 i) + [eager] 2 c b n s^2 | [sdpa] c b s i + c n s^2 + 4 b n s        (S2)

- a later block's feed-forward: the bias, the embeddings, the block input, the residual after attention and the
  normed copy, and the FFN's widest moment: gated ``gelu_new`` (T5 v1.1, mT5, T0, mT0: ``NewGELUActivation``'s
  Python chain holds its input, 0.5 x, x^3 and 0.044715 x^3), four [b, s, f]; ReLU (original T5) its input and
  output, two; a gated fused activation its output, ``wi_1``'s and their product, three. Under eager attention the
  block still holds the softmaxed scores: ``T5Block.forward`` binds the attention's third output to ``_`` (L464)

      ffn = c n s^2 + c b s (4 d + k f) + [eager] c b n s^2,  k = 4 | 2 | 3                                      (S3)

    encoder_peak = max(bucket, attention, ffn)                                                                    (S4)

During decoding the cache holds the decoder's self-attention K/V over the target and its cross-attention K/V over
the source (formulas/kv_cache.py eqs. 1 and 4), beside the kept encoder output; on top of them, at the last step,
the larger of two moments: ``_sample``'s logits (generation/utils.py L3248: the lm_head's output for the last
position in the compute dtype, its fp32 copy ``next_token_logits``, and the previous step's copy still bound to
that name while the new one is made), or the DynamicCache's append (cache_utils.py ``DynamicLayer.update``:
``torch.cat`` writes a layer's K or V of t tokens while the one of t - 1 is still held) in the last decoder
block, with the previous step's fp32 logits, the token ids so far (int64 [b, t]), the step's self-attention bias
[1, n, 1, t] and the block's one-token tensors (embeddings, block input, normed copy; q, k, v)

    decode_held = c b s d + max(b V (c + 8), 4 b V + c b n d_kv (t - 1) + 8 b t + c n t + c b (3 d + 3 i))        (S5)

Weights: ``T5PreTrainedModel._keep_in_fp32_modules = ["wo"]`` (modeling_t5.py L542) keeps every FFN output
projection in fp32 when the model is loaded in float16 -- and only then (modeling_utils.py L3851
``_get_dtype_plan``: "only if the requested dtype is fp16"; a bfloat16 load keeps ``wo`` in bf16), added to the
2-byte inventory as 2 more bytes per ``wo`` element                                                          (S6)

Work (formulas/speed.py conventions, 2 FLOPs per multiply-add; eq. 2's 4 x width per attended token):

    encoder pass   = 2 P_enc s b + 4 i s^2 L_enc b                  (bidirectional: every token attends s)
    first step     = 2 P_xkv s b                                    (each decoder layer's cross k, v over s)
    decode step    = 2 (P_dec - P_xkv + P_head) b + 4 i (t + s) L_dec b                                           (S7)

and a decode step reads the decoder's weights less the cross-attention k/v projections (their K/V are cached),
the lm_head, the self K/V over the target and the cross K/V over the source. P_enc: the encoder blocks' matrix
parameters, P_dec: the decoder blocks', P_xkv: their cross-attention k and v, P_head: the lm_head (the shared
embedding when tied).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

from ..errors import InputError
from ..specs import EncoderDecoderSpec, ModelSpec
from .tensors import layer_groups

ATTENTIONS = ("sdpa", "eager")


@dataclass(frozen=True)
class EncoderPeak:
    """The encoder forward's three candidate peaks (eqs. S1-S3) and the largest (S4), in bytes; ``bias_bytes``: the
    position bias [1, n, s, s] the blocks share."""

    bucket_bytes: int
    attention_bytes: int
    ffn_bytes: int
    bias_bytes: int

    @property
    def peak_bytes(self) -> int:
        return max(self.bucket_bytes, self.attention_bytes, self.ffn_bytes)

    @property
    def phase(self) -> str:
        return max((self.bucket_bytes, "position buckets"), (self.attention_bytes, "self-attention"),
                   (self.ffn_bytes, "feed-forward"))[1]


def _ed(spec: ModelSpec) -> EncoderDecoderSpec:
    if spec.encoder_decoder is None:
        raise InputError(f"{spec.name} is not an encoder-decoder")
    return spec.encoder_decoder


def ffn_width_factor(spec: ModelSpec) -> int:
    """k of eq. (S3): [b, s, f] tensors live at the FFN's widest moment."""
    if not spec.mlp_gated:
        return 2
    return 4 if spec.mlp_act_python else 3


def encoder_peak(spec: ModelSpec, batch: int, source: int, elem: int, attention: str) -> EncoderPeak:
    """Eqs. (S1)-(S4): live activation bytes of the encoder's forward over ``batch`` sources of ``source`` tokens
    (``elem``: bytes of a compute element; ``attention``: 'sdpa' or 'eager'); parameters not included."""
    _ed(spec)
    if attention not in ATTENTIONS:
        raise InputError(f"attention {attention!r}: a T5 encoder is modelled for {', '.join(ATTENTIONS)}")
    d, n, f = spec.hidden_size, spec.num_heads, spec.intermediate_size
    i = n * spec.head_dim
    s2 = source * source
    bs = batch * source
    bias = elem * n * s2
    bucket = 49 * s2 + 16 * source + elem * bs * (2 * d + 3 * i)
    eager = attention == "eager"
    scores = elem * batch * n * s2  # one [b, n, s, s] tensor
    attn = bias + elem * bs * (3 * d + 3 * i) + (2 * scores if eager else elem * bs * i + bias + 4 * batch * n * source)
    ffn = bias + elem * bs * (4 * d + ffn_width_factor(spec) * f) + (scores if eager else 0)
    return EncoderPeak(bucket, attn, ffn, bias)


def encoder_output_bytes(spec: ModelSpec, batch: int, source: int, elem: int) -> int:
    """First term of eq. (S5): the encoder output ``generate()`` keeps to the end, [b, s, d]."""
    _ed(spec)
    return elem * batch * source * spec.hidden_size


def decode_transient_bytes(spec: ModelSpec, batch: int, target: int, elem: int) -> int:
    """Second term of eq. (S5): the larger of the last step's logits (compute dtype + two fp32 copies) and the cache
    append's copy of one layer's K or V beside the previous step's fp32 logits."""
    logits = batch * spec.vocab_size
    d, n, i = spec.hidden_size, spec.num_heads, spec.num_heads * spec.head_dim
    append = (4 * logits + elem * batch * spec.num_kv_heads * spec.head_dim * max(target - 1, 0) + 8 * batch * target
              + elem * n * target + elem * batch * (3 * d + 3 * i))
    return max(logits * (elem + 8), append)


@dataclass(frozen=True)
class T5Params:
    """Matrix parameters of eq. (S7): encoder blocks, decoder blocks, the decoder's cross-attention k and v, the
    head, and the FFN output projections ``wo`` of both stacks (eq. S6)."""

    encoder: int
    decoder: int
    cross_kv: int
    head: int
    wo: int


@lru_cache(maxsize=64)
def t5_params(spec: ModelSpec) -> T5Params:
    """The parameter groups of eqs. (S6)-(S7), from the tensor inventory (formulas/tensors.py)."""
    ed = _ed(spec)
    head, groups, tail = layer_groups(spec)
    enc = dec = xkv = wo = 0
    for _, tensors, idx in groups:
        for t in tensors:
            if not t.matrix:
                continue
            for layer in idx:
                if layer < ed.encoder_layers:
                    enc += t.numel
                else:
                    dec += t.numel
                    if t.role in ("cross_attn_k", "cross_attn_v"):
                        xkv += t.numel
            if t.role == "ffn_down":
                wo += t.numel * len(idx)
    out = sum(t.numel for seg, _ in tail for t in seg if t.role == "output")
    if not out:  # tied: the shared embedding is the head
        out = sum(t.numel for t in head if t.role == "token_embd")
    return T5Params(enc, dec, xkv, out, wo)


def fp32_kept_extra_bytes(spec: ModelSpec, dtype: str) -> int:
    """Eq. (S6): bytes ``wo`` adds beyond 2 per element when transformers loads the model in ``dtype`` (fp16 only)."""
    return 2 * t5_params(spec).wo if dtype == "fp16" else 0


def encoder_flops(spec: ModelSpec, batch: int, source: int) -> float:
    """Eq. (S7), encoder pass plus the first step's cross-attention k/v projections over the source."""
    p, ed = t5_params(spec), _ed(spec)
    i = spec.num_heads * spec.head_dim
    return batch * (2.0 * p.encoder * source + 4.0 * i * source * source * ed.encoder_layers
                    + 2.0 * p.cross_kv * source)


def decode_step_flops(spec: ModelSpec, batch: int, source: int, target: int) -> float:
    """Eq. (S7), one decode step of ``batch`` sequences with ``target`` target tokens in the cache."""
    p, ed = t5_params(spec), _ed(spec)
    i = spec.num_heads * spec.head_dim
    return batch * (2.0 * (p.decoder - p.cross_kv + p.head) + 4.0 * i * (target + source) * ed.decoder_layers)
