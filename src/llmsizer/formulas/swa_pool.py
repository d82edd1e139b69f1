"""A hybrid sliding-window (SWA) KV pool: one budget split between a full-attention pool and a sliding-window pool.

An engine that stores the full-attention layers' and the sliding layers' K/V in two pools, each indexed by token
(SGLang's ``HybridSWAPoolConfigurator``), sizes both from one byte budget with a fixed ratio of their token counts:

    bytes_per_full_token = B_full + r x B_swa                                                            (S1)
    full_tokens          = floor(floor(budget / bytes_per_full_token) / page) x page                    (S2)
    swa_tokens           = floor(floor(full_tokens x r) / page) x page                                   (S3)

with B_full the bytes of one token over every full-attention layer, B_swa over every sliding layer, r the ratio of
SWA-layer tokens to full-layer tokens (``--swa-full-tokens-ratio``) and page the tokens of a page. A running
sequence of t tokens holds ceil(t / page) pages of the full pool (sglang utils/common.py:4859-4861
get_num_new_pages; t itself at page 1) and, once its tokens slide out of the window w, only the last
ones of the SWA pool: the engine frees the out-of-window slots every ``eviction_interval`` decoded tokens, so at
most

    swa_held(t) = min(t, w + eviction_interval + 2 x page)                                               (S4)

(the window, the tokens decoded since the last eviction, the page the eviction point is aligned to and the page the
next decode step allocates). A pool admits n sequences of t tokens while

    n <= floor(full_tokens / (ceil(t / page) x page))  and  n <= floor(swa_tokens / swa_held(t))      (S5)

With the radix cache disabled and a running-request cap M given, SGLang sizes the SWA pool from that cap instead of
the ratio (``SWARequestCapPoolConfigurator``): S4's bound for each of the M requests, the prefill chunks in flight
and one page, the full pool taking the rest of the budget:

    swa_tokens  = ceil(((w + eviction_interval + 2 x page) x max(1, M) + c x chunk + page) / page) x page    (S6)
    full_tokens = floor(floor((budget - swa_tokens x B_swa) / B_full) / page) x page                         (S7)

with chunk the prefill chunk (``chunked_prefill_size``) and c the chunks in flight: 2 with the overlap scheduler, 1
without; w the runner's window, as in S4 (``kvc.sliding_window_size``, L982: the model runner's
``resolve_sliding_window_size``, model_executor/model_runner.py L669, L1353 and
model_runner_components/load_model_utils.py L144-157, the model's ``get_attention_sliding_window_size`` where it has
one: GPT-OSS's config.sliding_window - 1, models/gpt_oss.py L131-132).

Source: SGLang 0.5.23 (the PyPI wheel) ``sglang/srt/model_executor/pool_configurator.py``
``HybridSWAPoolConfigurator._recompute_cell_size`` L786-803 (S1), ``calculate_pool_sizes`` L907-916 and
``_solve_pool_sizes`` L859-893 (S2, S3), ``compute_swa_request_cap`` L924-968 (S4: ``trailing_tokens = window +
eviction_interval x draft_tokens + page_size``, ``decode_alloc = page_size`` without speculative decoding);
``SGLANG_SWA_EVICTION_INTERVAL`` = 128 (``sglang/srt/environ.py`` L730), the eviction trigger in
``sglang/srt/managers/schedule_batch.py`` L4063-4100 (``maybe_evict_swa``); S6, S7: ``compute_swa_request_cap``
L924-968 (``chunks_in_flight = 1 if disable_overlap_schedule else 2``, L963-968) and
``SWARequestCapPoolConfigurator.calculate_pool_sizes`` L1005-1032, applicable (``is_applicable`` L986-1003) with
max_running_requests given, the radix cache disabled, a positive chunked_prefill_size and a sliding_window_size, and
picked by ``create_memory_pool_configurator`` L1715-1725.
"""

from __future__ import annotations


def hybrid_swa_pool_tokens(budget_bytes: int, full_bytes_per_token: float, swa_bytes_per_token: float,
                           swa_full_tokens_ratio: float, page_size: int = 1) -> tuple[int, int]:
    """Eqs. (S1)-(S3): (full_tokens, swa_tokens) of a hybrid SWA pool of ``budget_bytes`` [B].

    ``full_bytes_per_token`` [B]: one token over every full-attention layer; ``swa_bytes_per_token`` [B]: one token
    over every sliding layer; ``swa_full_tokens_ratio`` [-] in (0, 1]; ``page_size`` [tokens].

    >>> hybrid_swa_pool_tokens(10_000, 100, 100, 0.8)
    (55, 44)
    """
    per_full = full_bytes_per_token + swa_full_tokens_ratio * swa_bytes_per_token  # (S1)
    if budget_bytes <= 0 or per_full <= 0:
        return 0, 0
    full = int(budget_bytes // per_full) // page_size * page_size  # (S2)
    swa = int(full * swa_full_tokens_ratio) // page_size * page_size  # (S3)
    return full, swa


def swa_tokens_held(tokens: int, window: int, eviction_interval: int, page_size: int = 1) -> int:
    """Eq. (S4): the SWA-pool tokens a running sequence of ``tokens`` tokens holds at most [tokens].

    >>> swa_tokens_held(32768, 128, 128)
    258
    >>> swa_tokens_held(100, 128, 128)
    100
    """
    return min(tokens, window + eviction_interval + 2 * page_size)


def hybrid_swa_admitted(full_tokens: int, swa_tokens: int, tokens: int, window: int, eviction_interval: int,
                        page_size: int = 1) -> int:
    """Eq. (S5): the sequences of ``tokens`` tokens both pools hold at once.

    >>> hybrid_swa_admitted(1000, 800, 100, 128, 128)
    8
    """
    if tokens <= 0:
        return 0
    held = swa_tokens_held(tokens, window, eviction_interval, page_size)  # >= 1: tokens >= 1
    full_held = -(-tokens // page_size) * page_size  # whole pages of the full pool
    return min(full_tokens // full_held, swa_tokens // held)


def swa_request_cap_pool_tokens(budget_bytes: int, full_bytes_per_token: float, swa_bytes_per_token: float,
                                max_running_requests: int, window: int, eviction_interval: int,
                                chunked_prefill_size: int, chunks_in_flight: int,
                                page_size: int = 1) -> tuple[int, int]:
    """Eqs. (S6), (S7): (full_tokens, swa_tokens) of a hybrid SWA pool of ``budget_bytes`` [B] whose SWA pool is
    sized from ``max_running_requests`` [requests]; full_tokens 0 where the SWA pool leaves the full pool nothing.
    ``window``, ``eviction_interval``, ``chunked_prefill_size``, ``page_size`` [tokens]; ``chunks_in_flight`` [-].

    >>> swa_request_cap_pool_tokens(10_000_000, 100, 100, 8, 128, 128, 2048, 2)
    (93839, 6161)
    """
    cap = (window + eviction_interval + 2 * page_size) * max(1, max_running_requests) \
        + chunks_in_flight * chunked_prefill_size + page_size
    swa = -(-cap // page_size) * page_size  # (S6)
    if full_bytes_per_token <= 0:
        return 0, swa
    full = int((budget_bytes - swa * swa_bytes_per_token) // full_bytes_per_token) // page_size * page_size  # (S7)
    return max(full, 0), swa
