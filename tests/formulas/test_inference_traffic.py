"""Memory-bound traffic of an eager transformers forward (formulas/elementwise_traffic.py eq. E13), against real
PyTorch.

Independent truth: a transformers causal LM (random weights, CPU, bf16, two layers) runs one prefill forward the way
``llmsizer measure`` times it (measure/workloads.py: no grad, an empty DynamicCache, ``logits_to_keep=1``) under a
``TorchDispatchMode`` that adds up, for every aten op that is not a view, a GEMM or the attention kernel, the bytes
of its tensor inputs and outputs (tests/formulas/test_elementwise_traffic.py's counter). Eq. (E13) leaves out the
rotary module's cos/sin, computed once per forward; the test traces that module alone and takes it off.
"""

from __future__ import annotations

import inspect
from typing import Any

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from test_elementwise_traffic import _traced_bytes  # noqa: E402

from llmsizer.formulas.elementwise_traffic import (  # noqa: E402
    LayerWidths,
    inference_forward_bytes_per_token,
    layer_bytes,
)
from llmsizer.readers.hf_config import spec_from_config  # noqa: E402

pytestmark = pytest.mark.slow

GQA = dict(hidden_size=256, intermediate_size=688, num_attention_heads=8, num_key_value_heads=2)
CASES = {"llama": ("LlamaConfig", "LlamaForCausalLM", GQA),
         "qwen2": ("Qwen2Config", "Qwen2ForCausalLM", dict(GQA, num_key_value_heads=4))}


def _model(case: str) -> Any:
    conf_cls, model_cls, cfg = CASES[case]
    torch.manual_seed(0)
    conf = getattr(transformers, conf_cls)(**cfg, num_hidden_layers=2, vocab_size=512, attn_implementation="sdpa")
    return getattr(transformers, model_cls)(conf).to(torch.bfloat16).eval()


def _prefill_bytes(model: Any, tokens: int) -> int:
    ids = torch.randint(0, model.config.vocab_size, (1, tokens))
    cache = transformers.DynamicCache(config=model.config)
    kw = "cache" if "cache" in inspect.signature(model.forward).parameters else "past_key_values"

    def run() -> None:
        with torch.no_grad():
            model(input_ids=ids, use_cache=True, logits_to_keep=1, **{kw: cache})

    def rotary() -> None:
        with torch.no_grad():
            model.model.rotary_emb(torch.zeros(1, tokens, 1, dtype=torch.bfloat16), torch.arange(tokens)[None])
    return _traced_bytes(run) - _traced_bytes(rotary)


@pytest.mark.parametrize("case", list(CASES))
def test_eager_prefill_bytes_equal_the_traced_ops(case: str) -> None:
    model = _model(case)
    tokens = 512
    traced = _prefill_bytes(model, tokens)
    spec = spec_from_config(model.config.to_dict(), name=case)
    per_token = inference_forward_bytes_per_token(spec, 2)
    assert per_token * tokens == pytest.approx(traced, rel=0.005)
    # the case discriminates: the layers' forward alone (no cache append, embedding or final norm) falls short
    cfg = CASES[case][2]
    d = cfg["hidden_size"] // cfg["num_attention_heads"]
    w = LayerWidths(cfg["hidden_size"], cfg["intermediate_size"], cfg["hidden_size"], cfg["num_key_value_heads"] * d, d)
    layers_only = 2 * layer_bytes(w, 2, compiled=False, norms_trained=False)[0]
    assert layers_only * tokens < 0.93 * traced
