"""A T5 / mT5 encoder-decoder's KV cache (formulas/kv_cache.py: eq. (1) over the target tokens in the decoder layers,
eq. (4) over the source tokens for their cross-attention) against the cache a real CPU forward leaves.

Independent truth: tiny T5ForConditionalGeneration / MT5ForConditionalGeneration (transformers 5.24) run one forward
over B sources of S tokens and B decoder inputs of T tokens on CPU with ``use_cache=True``; the bytes of the tensors
its ``EncoderDecoderCache`` holds (``self_attention_cache`` and ``cross_attention_cache``) are summed. Serving an
encoder-decoder is still refused as a whole (tests/estimate/test_encoder_decoder_refused.py): these are the two
terms it will need.
"""

from __future__ import annotations

import pytest

from llmsizer.formulas.kv_cache import cross_attention_kv, kv_cache
from llmsizer.readers.hf_config import spec_from_config
from oracle_utils import build, cache_layers, random_ids, torch

pytestmark = pytest.mark.slow

_SMALL = {"vocab_size": 300, "d_model": 64, "d_kv": 16, "d_ff": 96, "num_heads": 6}
CONFIGS = {
    "t5-v1_1-like": {**_SMALL, "model_type": "t5", "num_layers": 2, "num_decoder_layers": 3,
                     "feed_forward_proj": "gated-gelu", "tie_word_embeddings": False},
    "mt5-like": {**_SMALL, "model_type": "mt5", "num_layers": 3, "tie_word_embeddings": False},
}


def _bytes(cache) -> int:
    return sum(t.numel() * t.element_size() for kv in cache_layers(cache) for t in kv)


@pytest.mark.parametrize("name", list(CONFIGS))
@pytest.mark.parametrize(("batch", "source", "target", "dtype"), [(1, 7, 3, "float32"), (2, 11, 5, "bfloat16")])
def test_decoder_self_and_cross_attention_kv_equal_a_real_forward(name, batch, source, target, dtype):
    cfg = CONFIGS[name]
    model = build(cfg, device="cpu", dtype=getattr(torch, dtype))
    with torch.no_grad():
        out = model(input_ids=random_ids(cfg["vocab_size"], batch, source),
                    decoder_input_ids=random_ids(cfg["vocab_size"], batch, target, seed=1), use_cache=True)
    cache = out.past_key_values
    spec = spec_from_config(cfg, name=name)
    kv_dtype = "fp32" if dtype == "float32" else "bf16"
    assert spec.kv_cache_layers == len(cache_layers(cache.self_attention_cache))  # the decoder's layers only
    assert kv_cache(spec, target, batch, kv_dtype).total_bytes == _bytes(cache.self_attention_cache)
    assert cross_attention_kv(spec, source, batch, kv_dtype) == _bytes(cache.cross_attention_cache)
