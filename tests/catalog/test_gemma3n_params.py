"""Gemma 3n parameter counts against the model transformers builds on the meta device.

Independent truth: ``Gemma3nForCausalLM`` (transformers v5.24.0 models/gemma3n/modeling_gemma3n.py) built from
the same config.json dict, its ``parameters()`` summed (the tied lm_head once). The class default
(Gemma3nTextConfig(): the E4B text stack) builds to 6,835,235,568 parameters, of which the per-layer embedding
table ``embed_tokens_per_layer`` is 262,144 x 35 x 256 = 2,348,810,240; the varied tiny configs move every Gemma 3n
knob: per-layer intermediate sizes, AltUp streams, LAuReL rank, per-layer input width and vocabulary, the number of
K/V-sharing layers (whose k/v projections transformers does not build) and the layer types.
"""

from __future__ import annotations

from typing import Any

import pytest

from llmsizer.errors import LlmsizerError
from llmsizer.formulas.params import count_params
from llmsizer.readers.hf_config import spec_from_config
from oracle_utils import build, real_components, real_param_count, transformers

pytestmark = pytest.mark.slow

TINY: dict[str, Any] = {"model_type": "gemma3n_text", "vocab_size": 128, "hidden_size": 64,
                        "num_hidden_layers": 5, "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 16,
                        "intermediate_size": 96, "vocab_size_per_layer_input": 96, "hidden_size_per_layer_input": 8,
                        "num_kv_shared_layers": 0, "laurel_rank": 4, "altup_num_inputs": 4, "sliding_window": 4}
VARIED: dict[str, dict[str, Any]] = {
    "no-sharing": {},
    "kv-shared-2": {"num_kv_shared_layers": 2, "layer_types": ["sliding_attention", "full_attention"] * 2
                    + ["sliding_attention"]},
    "per-layer-ffn": {"intermediate_size": [96, 128, 64, 96, 160], "num_kv_shared_layers": 1,
                      "layer_types": ["sliding_attention", "full_attention", "sliding_attention", "full_attention",
                                      "full_attention"]},
    "altup2-untied-bias": {"altup_num_inputs": 2, "laurel_rank": 16, "hidden_size_per_layer_input": 12,
                           "tie_word_embeddings": False, "attention_bias": True, "num_key_value_heads": 4},
    "altup1-all-full": {"altup_num_inputs": 1, "layer_types": ["full_attention"] * 5, "num_kv_shared_layers": 3},
}


def _real(cfg: dict[str, Any]) -> int:
    return real_param_count(build(cfg))


def test_class_default_counts_exactly():
    cfg = {"model_type": "gemma3n_text"}
    ours = count_params(spec_from_config(cfg, name="gemma3n-default"))
    assert ours.total == _real(cfg) == 6_835_235_568
    model = build(cfg)
    assert ours.by_component == real_components(model)
    params = dict(model.named_parameters())
    assert ours.by_component["embedding"] == params["model.embed_tokens.weight"].numel()
    assert ours.by_component["per_layer_embedding"] == params["model.embed_tokens_per_layer.weight"].numel() \
        == 2_348_810_240


@pytest.mark.parametrize("variant", list(VARIED))
def test_varied_tiny_configs_count_exactly(variant):
    cfg = {**TINY, **VARIED[variant]}
    ours = count_params(spec_from_config(cfg, name=variant))
    assert ours.total == _real(cfg)
    assert ours.by_component == real_components(build(cfg))


def test_kv_shared_layers_are_the_ones_transformers_builds_without_kv():
    cfg = {**TINY, **VARIED["kv-shared-2"]}
    spec = spec_from_config(cfg, name="shared")
    model = build(cfg)
    real = tuple(not hasattr(layer.self_attn, "k_proj") for layer in model.model.layers)
    assert spec.kv_shared_layers == real == (False, False, False, True, True)


def test_multimodal_config_counts_the_language_model_and_names_the_towers():
    """The MobileNetV5 vision tower needs timm (not a dependency); the language model of a gemma3n config is
    Gemma3nForCausalLM over its text_config, lm_head tied by the top-level flag."""
    text = {k: v for k, v in TINY.items() if k != "model_type"}
    cfg = {"model_type": "gemma3n", "text_config": {**text, "model_type": "gemma3n_text"}}
    spec = spec_from_config(cfg, name="gemma3n-mm")
    assert count_params(spec).total == _real({**TINY})
    assert spec.gemma3n is not None and len(spec.gemma3n.uncounted) == 2
    untied = {**cfg, "tie_word_embeddings": False}
    assert count_params(spec_from_config(untied, name="u")).total == _real({**TINY, "tie_word_embeddings": False})


@pytest.mark.parametrize(("change", "what"), [
    ({"num_kv_shared_layers": 6}, "exceeds num_hidden_layers"),
    ({"num_kv_shared_layers": 1, "layer_types": ["sliding_attention"] * 4 + ["full_attention"]}, "no earlier layer"),
    ({"intermediate_size": [96, 96]}, "2 entries for 5 layers"),
    ({"layer_types": ["chunked_attention"] * 5}, "unknown layer type"),
])
def test_configs_transformers_refuses_are_refused_in_one_line(change, what):
    cfg = {**TINY, **change}
    with pytest.raises(LlmsizerError, match=what) as err:
        spec_from_config(cfg, name="bad")
    assert "\n" not in str(err.value)
    with pytest.raises((ValueError, KeyError)):  # transformers refuses it too (its messages vary)
        conf = transformers.AutoConfig.for_model(**cfg)
        getattr(conf, "kv_sharing_modes")  # noqa: B009 - a property that raises
        build(cfg)
