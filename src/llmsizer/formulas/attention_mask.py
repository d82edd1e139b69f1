"""The (query, key) pairs a causal attention layer computes when its kernel skips the blocks a mask leaves empty:
sliding windows, chunked attention and packed documents (issue #12 speed).

A causal layer over a row of n tokens computes n^2 / 2 score pairs, the area under the diagonal: flash-attn's own
count (``benchmarks/benchmark_flash_attention.py``: ``// (2 if causal else 1)``), the s / 2 keys per query of
formulas/training_time.py eq. (10). A kernel that skips the tiles a mask empties computes only the pairs inside it
(the same area convention, tiles cut by the mask's edge counted by their share)::

    causal, one document of n tokens:                      P(n) = n^2 / 2                                     (M1)
    sliding window W (query t sees keys t-W+1 .. t):         P_W(n) = n^2 / 2 for n <= W, else n W - W^2 / 2   (M2)
    chunked attention, chunk C (keys of the query's chunk):  P_C(n) = k P(C) + P(n - k C),  k = floor(n / C)   (M3)
    packed documents of d tokens filling a row of S:         P_d(S) = j P(d) + P(S - j d),  j = floor(S / d)    (M4)

(M2) is the integral of min(t, W) over the row; with documents, (M2)/(M3) apply inside each document (a chunk's
boundaries are taken from the document's start). The mean keys each query attends, a = P / S, replaces s / 2 in
eq. (10) (``attended`` of ``training_time.attention_core_flops``).

Which kernels skip (the duration reads this with the kernel formulas/sdpa_dispatch.py picks):

- the flash-attn package (attention 'flash'): a sliding layer's window (transformers 5.24.0
  ``modeling_flash_attention_utils.py`` line 692: ``window_size = (sliding_window - 1, sliding_window - 1)`` with
  ``causal``; flash-attn ``csrc/flash_attn/src/flash_fwd_kernel.h`` starts each row block's key loop at
  ``n_block_min`` from ``window_size_left`` when ``Is_local``), and packed documents as varlen rows (transformers'
  ``DataCollatorWithFlattening`` hands position_ids that restart per document; ``_flash_attention_forward`` lines
  855-857 read them as ``cu_seqlens`` for ``flash_attn_varlen_func``). flash-attn has no chunk mask: a chunked
  layer is timed causal over the row.
- torch SDPA's backends take a sliding window only as an explicit mask (training_activations.needs_mask, the memory's
  rule): its flash backend refuses a mask and mem-efficient runs every key block of a bias, so no window is skipped.
  Packed documents under SDPA are taken as torchtune runs them: ``packed_block_causal_mask`` builds a FlexAttention
  ``BlockMask`` (torchtune ``modules/attention_utils.py``) whose empty blocks are skipped, so documents are timed
  per document. transformers' SDPA path (masking_utils.py line 870 ``find_packed_sequence_indices``: a
  block-diagonal mask from position_ids) skips nothing; torchtitan's
  default ``attn_mask_type = "causal"`` attends across documents (its ``block_causal`` with flex masks them).
- eager attention and SDPA's math kernel materialise every score (formulas/eager_attention_traffic.py): no skipping.
"""

from __future__ import annotations

from ..errors import InputError


def causal_pairs(tokens: float, window: int | None = None) -> float:
    """Eqs. (M1)-(M2): score pairs of one causal run of ``tokens`` tokens, each query seeing at most ``window`` keys.

    >>> causal_pairs(8)
    32.0
    >>> causal_pairs(8, 2)   # 8 x 2 - 2^2 / 2
    14.0
    """
    if tokens < 0:
        raise InputError("tokens must not be negative")
    n = float(tokens)
    if window is None or n <= window:
        return n * n / 2.0
    if window < 1:
        raise InputError("a window must be at least 1 token")
    return n * window - window * window / 2.0


def chunked_pairs(tokens: int, chunk: int) -> float:
    """Eq. (M3): score pairs of ``tokens`` tokens of causal attention within chunks of ``chunk`` tokens.

    >>> chunked_pairs(10, 4)   # 2 x 4^2 / 2 + 2^2 / 2
    18.0
    """
    if chunk < 1:
        raise InputError("a chunk must be at least 1 token")
    k, rest = divmod(tokens, chunk)
    return k * causal_pairs(chunk) + causal_pairs(rest)


def row_pairs(seq_len: int, window: int | None = None, chunk: int | None = None, doc_len: int | None = None) -> float:
    """Eqs. (M1)-(M4): score pairs of one row of ``seq_len`` tokens whose kernel skips what the mask empties: a
    sliding ``window``, a ``chunk`` size (chunked attention), documents of ``doc_len`` tokens packed into the row
    (None: one document fills it).

    >>> row_pairs(8192, doc_len=1024) == 8 * 1024 ** 2 / 2
    True
    """
    if seq_len < 1:
        raise InputError("seq_len must be positive")
    if doc_len is not None and doc_len < 1:
        raise InputError("doc_len must be positive")
    d = seq_len if doc_len is None else min(doc_len, seq_len)
    j, rest = divmod(seq_len, d)

    def one(n: int) -> float:
        return chunked_pairs(n, chunk) if chunk is not None else causal_pairs(n, window)

    return j * one(d) + (one(rest) if rest else 0.0)


def mean_attended(seq_len: int, window: int | None = None, chunk: int | None = None,
                  doc_len: int | None = None) -> float:
    """The mean keys each query of a row attends, a = P / S (the s / 2 of eq. (10) for a causal row) [tokens].

    >>> mean_attended(4096)
    2048.0
    >>> mean_attended(32768, window=4096)   # Mistral 7B v0.1: 4096 - 4096^2 / (2 x 32768)
    3840.0
    """
    return row_pairs(seq_len, window, chunk, doc_len) / seq_len
