"""Gemma 3n training activations: the ``gemma3n_activations`` warning says the training activation terms
(formulas/training_activations.py) are a lower bound; checked against what autograd really saves.

Independent truth: the distinct non-parameter storages autograd saves (``torch.autograd.graph.saved_tensors_hooks``,
as tests/training/test_moe_latent.py) during the training forward (labels given, so the loss is included) of a small
Gemma 3n text model (hidden 256, 4 AltUp streams, per-layer inputs 6 x 32, LAuReL rank 8, 6 layers, 4 of them
sliding with window 128) over B=2 sequences of T=512 tokens, fp32, SDPA, every weight trained. Measured
(transformers 5.24, torch 2.13 CPU): 369.8 MiB = 369.8 [t, h] fp32 units; the per-layer terms + head + shared
terms give 212.3 (ratio 0.574). By source line (a saved-tensor trace) the missing part is AltUp's (the
modality-router inputs of predict and correct, L1000; the repeated innovation, n t h per layer, L1058; the scaled
first prediction, L1068), the per-layer input gate and projection (L1313-1318), LAuReL (L932-933), four more
[t, h] RMSNorms per layer -- two router norms, LAuReL's, the per-layer input's -- and the v norm (L128-135: each
keeps its fp32 input and normalised output; a norm over one stream keeps the whole n-stream storage), and the
model-level stream projections before and after the layers (L1687-1691, L1718-1726).
"""

from __future__ import annotations

from typing import Any

import pytest

from llmsizer.formulas.training_activations import ActivationSetup, head_activations, layer_saved_terms
from llmsizer.readers.hf_config import spec_from_config
from oracle_utils import GEMMA3N_SMALL, build, random_ids, torch

pytestmark = pytest.mark.slow

CONFIG = GEMMA3N_SMALL
BATCH, TOKENS = 2, 512


def test_training_activation_terms_are_a_lower_bound_for_gemma3n(capsys):
    torch.manual_seed(0)
    model = build(CONFIG, device="cpu", dtype=torch.float32, attn="sdpa")
    model.train()
    params = {p.untyped_storage()._cdata for p in model.parameters()}
    saved: dict[int, int] = {}

    def pack(t: Any) -> Any:
        st = t.untyped_storage()
        if st._cdata not in params:
            saved[st._cdata] = st.nbytes()
        return t

    ids = random_ids(CONFIG["vocab_size"], BATCH, TOKENS)
    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        model(input_ids=ids, labels=ids, use_cache=False)
    measured = sum(saved.values())
    spec = spec_from_config(CONFIG, name="tiny-gemma3n")
    st = ActivationSetup(batch=BATCH, seq=TOKENS, residual=4, compute=4, full=True, attention="sdpa")
    head = head_activations(spec, st, lm_head_trained=True)
    predicted = sum(t.bytes for i in range(spec.num_layers) for t in layer_saved_terms(spec, i, st))
    predicted += sum(t.bytes for t in head.saved) + sum(t.bytes for t in head.shared)
    with capsys.disabled():
        unit = BATCH * TOKENS * CONFIG["hidden_size"] * 4
        print(f"\n[gemma3n training fp32] saved {measured / unit:.1f} [t, h] units; terms {predicted / unit:.1f} "
              f"(ratio {predicted / measured:.3f})")
    assert predicted <= measured
