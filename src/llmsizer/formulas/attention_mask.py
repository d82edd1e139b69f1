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

FlexAttention (torch.nn.attention.flex_attention, attention 'flex') skips at the granularity of its BlockMask: tiles
of B x B (query block, key block), B = 128 (torch 2.13.0 ``flex_attention.py`` line 388 ``_DEFAULT_SPARSE_BLOCK_SIZE
= 128``; the ``BlockMask`` docstring, lines 790-795: a block is skipped only if every element in it is masked), and a
tile it visits computes all B^2 pairs (partial tiles apply the mask_mod inside the tile, lines 831-837). Documents of d
tokens packed into a row of S, causal within each (torchtune ``packed_block_causal_mask``'s mask_mod, modules/
attention_utils.py @bd2a0fc lines 161-171): query block i visits key blocks floor(a_i / B) .. i, where a_i is the
first token of the document holding block i's first token (documents are contiguous, so that one reaches furthest
back)::

    P_flex(S, d, B) = B^2 sum_{i=0}^{ceil(S/B)-1} (i - floor(a_i / B) + 1),  a_i = d floor(i B / d)              (M5)

(the last block of a row S not divisible by B counted whole, as the kernel pads it). One document (d >= S) gives the
causal row's ceil(S/B) (ceil(S/B) + 1) / 2 tiles.

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
  Packed documents under SDPA get an explicit block-diagonal mask (torchtune without flex: ``create_block_causal_mask``,
  a [b, s, s] bool tensor, attention_utils.py @bd2a0fc lines 95-130 and 181-182; transformers' SDPA path (masking_utils.py line 870 ``find_packed_sequence_indices``: a
  block-diagonal mask from position_ids): torch SDPA's flash backend refuses a mask, mem-efficient runs every tile of
  it (estimate/duration.py sdpa_masked_layers), nothing skipped. torchtitan's
  default ``attn_mask_type = "causal"`` attends across documents (its ``block_causal`` with flex masks them).
- FlexAttention (attention 'flex', torchtune's path for packed documents on CUDA): per document at tile granularity,
  eq. (M5) (the tiles of ``create_block_mask``: kv_num_blocks + full_kv_num_blocks per query block). Sliding windows
  are not read here: a sliding layer under flex is timed over its documents' tiles, an upper bound.
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


FLEX_BLOCK = 128  # torch 2.13.0 torch/nn/attention/flex_attention.py line 388: _DEFAULT_SPARSE_BLOCK_SIZE


def flex_tiles(seq_len: int, doc_len: int | None = None, block: int = FLEX_BLOCK) -> int:
    """Eq. (M5): the B x B tiles FlexAttention visits in one row of ``seq_len`` tokens holding documents of ``doc_len``
    tokens (None: one document fills the row), causal within each, ``block`` = B [tokens].

    >>> flex_tiles(8192)            # causal: 64 x 65 / 2
    2080
    >>> flex_tiles(8192, 1024)      # 8 documents of 8 blocks: 8 x 36
    288
    """
    if seq_len < 1 or block < 1:
        raise InputError("seq_len and the block size must be positive")
    if doc_len is not None and doc_len < 1:
        raise InputError("doc_len must be positive")
    d = seq_len if doc_len is None else min(doc_len, seq_len)
    return sum(i - (d * (i * block // d)) // block + 1 for i in range(-(-seq_len // block)))


def flex_pairs(seq_len: int, doc_len: int | None = None, block: int = FLEX_BLOCK) -> float:
    """Eq. (M5): the score pairs FlexAttention computes in one row, B^2 per visited tile.

    >>> flex_pairs(8192, 1024) / 8192   # keys per query: 288 tiles x 128^2 / 8192
    576.0
    """
    return float(flex_tiles(seq_len, doc_len, block) * block * block)


def mean_attended(seq_len: int, window: int | None = None, chunk: int | None = None,
                  doc_len: int | None = None) -> float:
    """The mean keys each query of a row attends, a = P / S (the s / 2 of eq. (10) for a causal row) [tokens].

    >>> mean_attended(4096)
    2048.0
    >>> mean_attended(32768, window=4096)   # Mistral 7B v0.1: 4096 - 4096^2 / (2 x 32768)
    3840.0
    """
    return row_pairs(seq_len, window, chunk, doc_len) / seq_len
