"""The timeline evaluates each kind of layer once (timeline.py, the kind from formulas/tensors.py
``layer_kind_firsts`` with the attention type, MoE flag, autocast copies and input gradient): every layer's terms in
the timeline must equal that layer's own ``layer_saved_terms``. Gemma 4 E2B's K/V-sharing layers (15-34) keep no
k/v projection inputs and have a double-wide MLP (12,288 for 6,144): a kind that missed K/V sharing and the
feed-forward width gave them layer 0's / 4's terms."""

import pytest

from llmsizer.catalog.models import find
from llmsizer.estimate.caches import clear_caches
from llmsizer.estimate.training import compose, estimate_training
from llmsizer.estimate.training.setup import layer_inputs_need_grad
from llmsizer.estimate.training.timeline import stage_timeline
from llmsizer.formulas.training_activations import layer_saved_terms

MIXED = ("gemma-4-e2b-it", "gpt-oss-20b", "deepseek-v2-lite", "qwen3-next-80b-a3b-thinking", "falcon-h1-0.5b-instruct",
         "nemotron-h-56b-base-8k")


@pytest.mark.parametrize("name", MIXED)
@pytest.mark.parametrize("method", ["full", "lora"])
@pytest.mark.parametrize("precision", ["bf16", "bf16-mixed"])
def test_each_layer_has_its_own_terms(name: str, method: str, precision: str) -> None:
    spec = find(name).spec()
    clear_caches(estimates_only=True)
    estimate_training(spec, method=method, precision=precision, micro_batch=1, seq_len=2048, grad_checkpointing="none")
    (ctx, st), *_ = compose._STAGE_STATES.values()
    timeline = stage_timeline(ctx, st)
    layers = list(st.layers)
    grads = layer_inputs_need_grad(ctx.w, ctx.lora, layers, st.has_embedding)
    for i, g in zip(layers, grads, strict=True):
        own = layer_saved_terms(spec, i, ctx.act, st.layer_copy_elements.get(i, 0), input_grad=bool(g))
        assert timeline.layer_terms[i] == own, (name, method, precision, i)


def test_gemma4_kv_sharing_layers_have_their_own_terms() -> None:
    spec = find("gemma-4-e2b-it").spec()
    clear_caches(estimates_only=True)
    estimate_training(spec, method="full", precision="bf16", micro_batch=1, seq_len=2048)  # (no autocast copies)
    (ctx, st), *_ = compose._STAGE_STATES.values()
    terms = stage_timeline(ctx, st).layer_terms
    assert spec.kv_shared_layers[15] and not spec.kv_shared_layers[0]
    assert spec.layer_types[15] == spec.layer_types[0] and spec.ffn_sizes[15] == 2 * spec.ffn_sizes[0]
    assert terms[15] == layer_saved_terms(spec, 15, ctx.act, st.layer_copy_elements.get(15, 0))
    assert terms[15] != terms[0]
