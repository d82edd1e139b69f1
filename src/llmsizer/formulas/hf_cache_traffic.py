"""Memory traffic of an eager transformers decode step that grows with the KV cache, beyond reading the cache once.

Per attention layer and decode step, with b sequences, T cached tokens each, h query heads, h_kv K/V heads of d
elements, c bytes per element (the cache's and the activations' dtype):

**(H1) the DynamicCache append.** transformers 5.24 ``cache_utils.py`` ``DynamicLayer.update`` (lines 119-138)
grows each layer's cache by ``torch.cat([self.keys, key_states], dim=-2)`` and the same for the values (lines
136-137): every step reads the whole layer cache and writes it again, one token longer. Per step, over the model,
that is twice the K/V bytes the attention reads::

    B_cat = 2 B_kv,   B_kv = 2 b T h_kv d c per layer (the cache the step's attention reads)              (H1)

**(H2) K/V repeated to every query head.** ``repeat_kv`` (``integrations/sdpa_attention.py`` lines 19-28 in 5.24:
``expand`` + ``reshape``, a copy) reads the layer's K and V and writes them with h heads; the attention then reads h
heads instead of h_kv. Eager attention always repeats (``models/llama/modeling_llama.py``
``eager_attention_forward`` lines 190-191). SDPA does not on CUDA: 5.24's ``use_gqa_in_sdpa`` (lines 42-51) passes
``enable_gqa=True`` when the mask is None (no padding; a one-token decode step with ``allow_is_causal_skip``) and
the head size is <= 256, else packs a single query's heads (``pack_gqa``, a view, lines 30-39, 121-124);
earlier 5.x (huggingface/transformers @00c238bd ``use_gqa_in_sdpa``) asks torch >= 2.5 (the release that added
``scaled_dot_product_attention(enable_gqa=...)``) and a None mask. With g = h / h_kv > 1::

    B_rep = B_kv (1 + g)  (the copy)  +  B_kv (g - 1)  (the attention's wider read)  = 2 g B_kv          (H2)

**(H3) the eager score tensor.** ``eager_attention_forward`` (lines 193-199): ``matmul(q, k^T)`` writes the scores
[b, h, q, T] (c bytes), ``* scaling`` reads and writes them, ``+ attention_mask`` reads them and the [b, 1, q, T]
mask and writes them, ``softmax(..., dtype=float32)`` reads c and writes 4 bytes per score (one kernel on CUDA:
ATen ``softmax`` takes its ``half_to_float`` path for a half/bfloat16 CUDA input; a CPU input is first copied to
fp32), ``.to(query.dtype)`` reads 4 and writes c (no op when c = 4), dropout is the identity in eval, and
``matmul(p, v)`` reads the c-byte probabilities. With e = b h q T scores::

    B_scores = e (7 c + 4 + [c != 4] (4 + c)) + b q T c                                                    (H3)

(24 e bytes for bf16). Prefill runs (H2) and (H3) with q = T = the prompt (eager attention computes every score and
masks the upper triangle; nothing is skipped); its cache append writes into an empty cache (E13 counts it).

All of it is memory-bound and timed at the device bandwidth with the step's other bytes. Checked on real CPU decode
steps of a small Llama under TorchDispatchMode (tests/formulas/test_hf_cache_traffic.py).
"""

from __future__ import annotations

from ..errors import InputError

ATTENTION = ("sdpa", "eager", "flash")  # transformers attn_implementation names (flash: flash_attention_2)
SOURCE = ("transformers 5.24 cache_utils.py DynamicLayer.update L119-138 (torch.cat of the whole layer cache each "
          "step), integrations/sdpa_attention.py repeat_kv L19-28 / use_gqa_in_sdpa L42-51, modeling_llama.py "
          "eager_attention_forward L180-202 (formulas/hf_cache_traffic.py eqs. H1-H3)")


def cache_append_bytes(kv_bytes: float) -> float:
    """Eq. (H1): bytes the DynamicCache's ``torch.cat`` moves in one decode step whose attention reads
    ``kv_bytes`` of K/V [B].

    >>> cache_append_bytes(100.0)
    200.0
    """
    if kv_bytes < 0:
        raise InputError(f"K/V bytes must not be negative, got {kv_bytes}")
    return 2.0 * kv_bytes


def repeat_kv_bytes(kv_bytes: float, heads: int, kv_heads: int) -> float:
    """Eq. (H2): the extra bytes of repeating ``kv_bytes`` of K/V from ``kv_heads`` to ``heads`` heads and reading
    the copy [B]; 0 when every query head has its own K/V.

    >>> repeat_kv_bytes(100.0, 8, 2)
    800.0
    >>> repeat_kv_bytes(100.0, 8, 8)
    0.0
    """
    if heads < 1 or kv_heads < 1 or heads % kv_heads:
        raise InputError(f"heads ({heads}) must be a positive multiple of K/V heads ({kv_heads})")
    if kv_bytes < 0:
        raise InputError(f"K/V bytes must not be negative, got {kv_bytes}")
    g = heads // kv_heads
    return 0.0 if g == 1 else 2.0 * g * kv_bytes


def eager_score_bytes(batch: int, heads: int, queries: int, keys: float, c: float) -> float:
    """Eq. (H3): bytes the eager attention's score tensor moves in one layer [B]: ``batch`` x ``heads`` x
    ``queries`` x ``keys`` scores of ``c`` bytes (softmax in fp32), and the [batch, 1, queries, keys] mask.

    >>> eager_score_bytes(1, 1, 1, 10, 2)   # 10 scores x (14 + 4 + 6) + 10 x 2 mask
    260.0
    """
    if batch < 1 or heads < 1 or queries < 1 or keys < 0 or c <= 0:
        raise InputError("batch, heads and queries must be >= 1, keys >= 0, element size positive")
    e = float(batch) * heads * queries * keys
    per = 7.0 * c + 4.0 + (0.0 if c == 4 else 4.0 + c)
    return e * per + float(batch) * queries * keys * c
