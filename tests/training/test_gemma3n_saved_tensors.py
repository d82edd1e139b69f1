"""Gemma 3n training activations (formulas/training_activations.py ``gemma3n_saved_terms``, ``gemma3n_model_terms``)
against what autograd really saves.

Independent truth: the distinct non-parameter storages autograd saves (``torch.autograd.graph.saved_tensors_hooks``,
as tests/training/test_moe_latent.py) during the training forward (labels given, so the loss is included) of a small
Gemma 3n text model (hidden 256, 4 AltUp streams, per-layer inputs 6 x 32, LAuReL rank 8, 6 layers, 4 of them
sliding with window 128, the last 2 sharing K/V) over B=2 sequences of T=512 tokens, SDPA, every weight trained, in
fp32 and in bf16 (the two differ: in fp32 ``hidden_states.float()`` of a norm over one AltUp stream is a view, so
the whole 4-stream tensor is saved; in bf16 it is a fp32 copy of that stream). Measured (transformers 5.24,
torch 2.13 CPU), in [t, h] fp32 units: fp32 369.8 saved, 369.8 counted (ratio 1.000); bf16 240.3 saved, 239.8
counted (0.998). Before the Gemma 3n terms the count was 212.3 of 369.8 in fp32 (0.574).
"""

from __future__ import annotations

import pytest

from llmsizer.formulas.training_activations import ActivationSetup, head_activations, layer_saved_terms
from llmsizer.readers.hf_config import spec_from_config
from oracle_utils import GEMMA3N_SMALL, build, random_ids, saved_storage_hooks, torch

pytestmark = pytest.mark.slow

CONFIG = GEMMA3N_SMALL
BATCH, TOKENS = 2, 512


@pytest.mark.parametrize("dtype_name", ["float32", "bfloat16"])
def test_training_activation_terms_match_what_autograd_saves_for_gemma3n(dtype_name, capsys):
    dtype = getattr(torch, dtype_name)
    elem = 4 if dtype_name == "float32" else 2
    torch.manual_seed(0)
    model = build(CONFIG, device="cpu", dtype=dtype, attn="sdpa")
    model.train()
    saved, hooks = saved_storage_hooks(model)
    ids = random_ids(CONFIG["vocab_size"], BATCH, TOKENS)
    with hooks:
        model(input_ids=ids, labels=ids, use_cache=False)
    measured = sum(saved.values())
    spec = spec_from_config(CONFIG, name="tiny-gemma3n")
    st = ActivationSetup(batch=BATCH, seq=TOKENS, residual=elem, compute=elem, expert=elem, full=True, attention="sdpa")
    head = head_activations(spec, st, lm_head_trained=True)
    predicted = sum(t.bytes for i in range(spec.num_layers) for t in layer_saved_terms(spec, i, st))
    predicted += sum(t.bytes for t in head.saved) + sum(t.bytes for t in head.shared)
    with capsys.disabled():
        unit = BATCH * TOKENS * CONFIG["hidden_size"] * 4
        print(f"\n[gemma3n training {dtype_name}] saved {measured / unit:.1f} [t, h] units; terms {predicted / unit:.1f} "
              f"(ratio {predicted / measured:.3f})")
    assert predicted == pytest.approx(measured, rel=0.02)
