"""Training activations of parallel attention + MLP blocks (formulas/training_activations.py, 'Parallel blocks')
against what autograd really saves.

Independent truth: the distinct non-parameter storages autograd saves (``torch.autograd.graph.saved_tensors_hooks``,
as tests/training/test_gemma3n_saved_tensors.py) during the training forward (labels given, so the loss is
included) of small Falcon, Phi, GPT-NeoX and StableLM models (hidden 256, 8 heads, 3 layers, vocab 3000) over B=2 sequences
of T=256 tokens, SDPA, every weight trained, in fp32 and bf16 without autocast. Measured (transformers 5.24,
torch 2.13 CPU), in [t, h] fp32 units, saved / counted: Falcon-7B layout 79.9 / 80.0 (fp32), 62.3 / 62.4 (bf16:
torch's math kernel keeps fp32 copies of q, K, V); Falcon-40B layout
62.0 / 62.1 (fp32), 36.9 / 37.0 (bf16); Phi-2 layout 100.9 / 101.0, 56.4 / 56.4; GPT-NeoX parallel 67.9 / 67.9,
39.9 / 39.9; GPT-NeoX sequential 70.9 / 70.9, 41.4 / 41.4; StableLM-2 layout (sequential) 88.9 / 88.9, 50.4 / 50.4;
StableLM parallel with 2 of 8 kv heads 78.4 / 78.4, 45.1 / 45.1; with qk_layernorm (StableLM-2-12B's per-head
LayerNorms) parallel 2 of 8 kv heads 82.4 / 82.4, 47.1 / 47.2, sequential 95.3 / 95.3, 53.6 / 53.8 (the per-head
LayerNorm term was 1.04-1.11 of the whole count when it was the RMSNorm term). Before the parallel-block terms the
count was 0.53-0.93 of the saved bytes.

On a CPU, dropout multiplies by a noise tensor of the input dtype (``at::dropout``), so the Phi masks are counted at
the compute element size here (``ActivationSetup.dropout_mask``; CUDA's fused ``native_dropout`` keeps 1 B masks).
"""

from __future__ import annotations

import pytest

from llmsizer.formulas.training_activations import ActivationSetup, head_activations, layer_saved_terms
from llmsizer.readers.hf_config import spec_from_config
from oracle_utils import build, random_ids, saved_storage_hooks, torch

pytestmark = pytest.mark.slow

_SMALL = {"hidden_size": 256, "num_attention_heads": 8, "num_hidden_layers": 3, "vocab_size": 3000}
CONFIGS = {
    "falcon-7b-layout": {**_SMALL, "model_type": "falcon", "multi_query": True, "parallel_attn": True,
                         "new_decoder_architecture": False, "bias": False, "alibi": False},
    "falcon-40b-layout": {**_SMALL, "model_type": "falcon", "num_kv_heads": 2, "new_decoder_architecture": True,
                          "parallel_attn": True, "bias": False, "alibi": False},
    "phi-2-layout": {**_SMALL, "model_type": "phi", "intermediate_size": 1024, "partial_rotary_factor": 0.4,
                     "resid_pdrop": 0.1, "hidden_act": "gelu_new"},
    "gpt-neox-parallel": {**_SMALL, "model_type": "gpt_neox", "intermediate_size": 1024, "rotary_pct": 0.25,
                          "use_parallel_residual": True},
    "gpt-neox-sequential": {**_SMALL, "model_type": "gpt_neox", "intermediate_size": 1024, "rotary_pct": 0.25,
                            "use_parallel_residual": False},
    "stablelm-2-layout": {**_SMALL, "model_type": "stablelm", "intermediate_size": 1024, "num_key_value_heads": 8,
                          "use_qkv_bias": True, "partial_rotary_factor": 0.25, "use_parallel_residual": False},
    "stablelm-gqa-parallel": {**_SMALL, "model_type": "stablelm", "intermediate_size": 1024,
                              "num_key_value_heads": 2, "partial_rotary_factor": 0.25, "use_parallel_residual": True},
    # StableLM-2-12B layout: qk_layernorm (one LayerNorm per query and K/V head), parallel, grouped K/V
    "stablelm-2-12b-layout": {**_SMALL, "model_type": "stablelm", "intermediate_size": 1024,
                              "num_key_value_heads": 2, "qk_layernorm": True, "partial_rotary_factor": 0.25,
                              "use_parallel_residual": True},
    "stablelm-qk-layernorm-sequential": {**_SMALL, "model_type": "stablelm", "intermediate_size": 1024,
                                         "num_key_value_heads": 8, "qk_layernorm": True, "use_qkv_bias": True,
                                         "partial_rotary_factor": 0.25, "use_parallel_residual": False},
}
BATCH, TOKENS = 2, 256
# A strict xfail each: what the terms do not follow, with what was measured (none at present)
KNOWN: dict[tuple[str, str], str] = {}


def _cases() -> list:
    out = []
    for name in CONFIGS:
        for dtype in ("float32", "bfloat16"):
            marks = [pytest.mark.xfail(reason=KNOWN[name, dtype], strict=True)] if (name, dtype) in KNOWN else []
            out.append(pytest.param(name, dtype, id=f"{name}-{dtype}", marks=marks))
    return out


@pytest.mark.parametrize(("name", "dtype_name"), _cases())
def test_parallel_block_terms_match_what_autograd_saves(name, dtype_name, capsys):
    cfg = CONFIGS[name]
    elem = 4 if dtype_name == "float32" else 2
    torch.manual_seed(0)
    model = build(cfg, device="cpu", dtype=getattr(torch, dtype_name), attn="sdpa")
    model.train()
    saved, hooks = saved_storage_hooks(model)
    ids = random_ids(cfg["vocab_size"], BATCH, TOKENS)
    with hooks:
        model(input_ids=ids, labels=ids, use_cache=False)
    measured = sum(saved.values())
    spec = spec_from_config(cfg, name=name)
    st = ActivationSetup(batch=BATCH, seq=TOKENS, residual=elem, compute=elem, expert=elem, full=True,
                         attention="sdpa", dropout_mask=elem)
    head = head_activations(spec, st, lm_head_trained=True)
    predicted = sum(t.bytes for i in range(spec.num_layers) for t in layer_saved_terms(spec, i, st))
    predicted += sum(t.bytes for t in head.saved) + sum(t.bytes for t in head.shared)
    with capsys.disabled():
        unit = BATCH * TOKENS * cfg["hidden_size"] * 4
        print(f"\n[{name} {dtype_name}] saved {measured / unit:.1f} [t, h] units; terms {predicted / unit:.1f} "
              f"(ratio {predicted / measured:.3f})")
    assert predicted == pytest.approx(measured, rel=0.01)


def test_the_sequential_neox_block_keeps_more_than_the_parallel_one():
    """The parallel block's second norm reads the layer input (saved once); the sequential one norms the residual sum."""
    st = ActivationSetup(batch=1, seq=128, residual=2, compute=2, full=True)
    par = spec_from_config(CONFIGS["gpt-neox-parallel"], name="p")
    seq = spec_from_config(CONFIGS["gpt-neox-sequential"], name="s")
    diff = sum(t.bytes for t in layer_saved_terms(seq, 0, st)) - sum(t.bytes for t in layer_saved_terms(par, 0, st))
    assert diff == 128 * 256 * 2  # the residual sum h + attn(x), 2 B per element
