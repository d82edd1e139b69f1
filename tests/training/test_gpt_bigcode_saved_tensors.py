"""GPT-BigCode's fused c_attn under bf16 autocast (formulas/training_activations.py: ``fused_qkv``, one input copy
for q, k and v) against what autograd saves.

Independent truth: the distinct non-parameter storages autograd saves (``torch.autograd.graph.saved_tensors_hooks``,
as tests/training/test_qwen3_next_saved_tensors.py) while the middle decoder layer of a small GPT-BigCode (hidden
256, 8 heads, 3 layers, inner 1024, vocab 3000, no dropout: MPTConfig's pdrop defaults, the llm-foundry rows'
model, validation_cases.mpt_config) runs its training forward: fp32 weights under CPU bf16 autocast (the estimate's
bf16-mixed), SDPA, every weight trained, B=2 sequences of T=256. transformers' GPTBigCodeAttention projects q, k and v
with one ``c_attn`` linear (modeling_gpt_bigcode.py), so autocast casts its fp32 input once. Measured (transformers
5.24, torch 2.13 CPU): multi-head 6,316,032 B saved, 6,316,032 counted; multi-query 5,627,904 / 5,627,904. Before the
reader marked c_attn fused the count kept three copies: 6,840,320 (1.083) and 6,152,192 (1.093).
"""

from __future__ import annotations

from typing import Any

import pytest

from llmsizer.formulas.training_activations import ActivationSetup, layer_saved_terms
from llmsizer.readers.hf_config import spec_from_config
from oracle_utils import build, random_ids, saved_storages_by_layer, torch

pytestmark = pytest.mark.slow

BATCH, TOKENS, LAYER = 2, 256, 1


def _config(multi_query: bool) -> dict[str, Any]:
    return {"model_type": "gpt_bigcode", "n_embd": 256, "n_head": 8, "n_layer": 3, "n_inner": 1024,
            "n_positions": TOKENS, "vocab_size": 3000, "multi_query": multi_query, "tie_word_embeddings": True,
            "attn_pdrop": 0.0, "resid_pdrop": 0.0, "embd_pdrop": 0.0}


@pytest.mark.parametrize("multi_query", [False, True], ids=["multi-head", "multi-query"])
def test_gpt_bigcode_layer_under_autocast(multi_query: bool, capsys: Any) -> None:
    cfg = _config(multi_query)
    torch.manual_seed(0)
    model = build(cfg, device="cpu", dtype=torch.float32, attn="sdpa")
    model.train()
    layers = model.transformer.h
    by_layer = saved_storages_by_layer(model, layers)
    ids = random_ids(cfg["vocab_size"], BATCH, TOKENS)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        model(input_ids=ids, labels=ids, use_cache=False)
    spec = spec_from_config(cfg, name="tiny-gpt-bigcode")
    assert spec.fused_qkv
    cast = sum(p.numel() for p in layers[LAYER].parameters() if p.ndim >= 2)  # the autocast weight copies
    st = ActivationSetup(batch=BATCH, seq=TOKENS, residual=4, compute=2, expert=4, autocast=True, weight_copy=2,
                         full=True, attention="sdpa")
    predicted = sum(t.bytes for t in layer_saved_terms(spec, LAYER, st, cast))
    with capsys.disabled():
        print(f"\n[gpt_bigcode multi_query={multi_query}, autocast] saved {by_layer[LAYER]:,} B, counted "
              f"{predicted:,} B (ratio {predicted / by_layer[LAYER]:.4f})")
    assert predicted == pytest.approx(by_layer[LAYER], rel=0.01)
