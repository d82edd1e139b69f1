"""GPT-2's decoder layer (readers/hf_config.py ``_gpt2``: Conv1D c_attn fused q/k/v, gelu_new in Python ops, the
resid_pdrop masks after each branch's c_proj) against what autograd saves.

Independent truth: the distinct non-parameter storages autograd saves (``torch.autograd.graph.saved_tensors_hooks``,
as tests/training/test_gpt_bigcode_saved_tensors.py) while the middle decoder layer of a small GPT2LMHeadModel
(n_embd 256, 8 heads, 3 layers, n_inner None = 4 x 256, vocab 3000) runs its training forward with SDPA, every
weight trained, B=2 sequences of T=256: fp32, and fp32 weights under CPU bf16 autocast (the estimate's bf16-mixed).
Cases: no dropout with ``activation_function`` gelu_new (GPT2Config's default: NewGELUActivation keeps its Python
intermediates) and gelu_pytorch_tanh (one fused op), and resid_pdrop 0.1 (GPT2Config's default; attn_pdrop and
embd_pdrop 0, which the count leaves out). On the CPU a dropout mask has the compute element size
(``ActivationSetup.dropout_mask``, as tests/training/test_parallel_block_saved_tensors.py). Measured (transformers
5.24, torch 2.13 CPU), saved = counted: gelu_new 9,461,760 B (autocast) / 14,704,640 B (fp32); gelu_pytorch_tanh
6,316,032 / 8,413,184; resid_pdrop 0.1 9,986,048 / 15,753,216 (before the reader set ``residual_dropout`` for GPT-2
the count missed its two masks: 9,461,760 and 14,704,640, 0.947 and 0.933).
"""

from __future__ import annotations

from typing import Any

import pytest

from llmsizer.formulas.training_activations import ActivationSetup, layer_saved_terms
from llmsizer.readers.hf_config import spec_from_config
from oracle_utils import build, random_ids, saved_storages_by_layer, torch

pytestmark = pytest.mark.slow

BATCH, TOKENS, LAYER = 2, 256, 1
CASES = {"gelu_new": {}, "gelu_pytorch_tanh": {"activation_function": "gelu_pytorch_tanh"},
         "resid_pdrop": {"resid_pdrop": 0.1}}


def _config(extra: dict[str, Any]) -> dict[str, Any]:
    return {"model_type": "gpt2", "n_embd": 256, "n_head": 8, "n_layer": 3, "n_positions": TOKENS,
            "vocab_size": 3000, "attn_pdrop": 0.0, "resid_pdrop": 0.0, "embd_pdrop": 0.0, **extra}


@pytest.mark.parametrize("autocast", [True, False], ids=["bf16-autocast", "fp32"])
@pytest.mark.parametrize("case", list(CASES))
def test_gpt2_layer_saved_tensors(case: str, autocast: bool, capsys: Any) -> None:
    cfg = _config(CASES[case])
    torch.manual_seed(0)
    model = build(cfg, device="cpu", dtype=torch.float32, attn="sdpa")
    model.train()
    layers = model.transformer.h
    by_layer = saved_storages_by_layer(model, layers)
    ids = random_ids(cfg["vocab_size"], BATCH, TOKENS)
    with torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast):
        model(input_ids=ids, labels=ids, use_cache=False)
    spec = spec_from_config(cfg, name="tiny-gpt2")
    assert spec.fused_qkv and spec.mlp_act_python == (case != "gelu_pytorch_tanh")
    assert spec.residual_dropout == (case == "resid_pdrop")
    compute = 2 if autocast else 4
    cast = sum(p.numel() for p in layers[LAYER].parameters() if p.ndim >= 2)  # the autocast weight copies
    st = ActivationSetup(batch=BATCH, seq=TOKENS, residual=4, compute=compute, expert=4, autocast=autocast,
                         weight_copy=2 if autocast else 0, full=True, attention="sdpa", dropout_mask=compute)
    predicted = sum(t.bytes for t in layer_saved_terms(spec, LAYER, st, cast))
    with capsys.disabled():
        print(f"\n[gpt2 {case}, {'autocast' if autocast else 'fp32'}] saved {by_layer[LAYER]:,} B, counted "
              f"{predicted:,} B")
    assert predicted == by_layer[LAYER]
