"""Inference prefill: Llama 4's chunked-attention layers attend within their chunk (formulas/speed.py
chunked_attended_tokens), checked against transformers' own chunked causal mask (masking_utils)."""

from __future__ import annotations

import pytest

from llmsizer.models import load_model

torch = pytest.importorskip("torch")



@pytest.mark.parametrize(("past", "tokens", "chunk"), [(0, 1000, 128), (300, 700, 256), (0, 64, 512)])
def test_prefill_chunked_layers_attend_within_their_chunk(past: int, tokens: int, chunk: int) -> None:
    """Inference prefill (estimate/speed.py): Llama 4's chunked layers attend within their chunk, the rows P..P+T-1 of
    transformers' chunked causal mask, not a sliding window of the chunk's size."""
    from transformers.masking_utils import chunked_causal_mask_function

    from llmsizer.estimate.speed_prefill import attended_all_layers
    from llmsizer.formulas.speed import attended_tokens, chunked_attended_tokens

    fn = chunked_causal_mask_function(chunk, torch.zeros(1, dtype=torch.long))
    q = torch.arange(past, past + tokens).view(-1, 1)
    k = torch.arange(past + tokens).view(1, -1)
    b = torch.zeros((), dtype=torch.long)
    assert chunked_attended_tokens(tokens, past, chunk) == int(fn(b, b, q, k).sum())
    scout = load_model("llama-4-scout-17b-16e-instruct")
    assert scout.chunked_attention and scout.sliding_window == 8192
    n = 20000
    assert attended_all_layers(scout, n, 0) == (12 * attended_tokens(n, 0) + 36 * chunked_attended_tokens(n, 0, 8192))
