"""Llama-3.2-Vision (mllama) and Llama 4 with its vision tower: parameter count, per-component split and layer
schedule against the model transformers builds.

Independent truth: transformers 5.24 instantiates MllamaForConditionalGeneration / Llama4ForConditionalGeneration on
the meta device from the same config dict; ``parameters()`` counts it and the module names split it
(``oracle_utils.component_of``: ``vision_model.*`` and ``multi_modal_projector.*`` are the vision part, ``cross_attn*``
attention). Tiny configs vary every key the reader reads; the full-size case is each configuration class's own
default (MllamaConfig = Llama-3.2-11B-Vision's shape, Llama4Config's text part = Llama-4-Scout-17B-16E's).
"""

from __future__ import annotations

from typing import Any

import pytest

from llmsizer.errors import InputError, ModelFileError
from llmsizer.formulas.params import count_params
from llmsizer.readers.hf_config import spec_from_config
from oracle_utils import assert_params_equal, build, transformers

pytestmark = pytest.mark.slow

_MLLAMA: dict[str, Any] = {
    "model_type": "mllama",
    "text_config": {"vocab_size": 128, "hidden_size": 64, "num_hidden_layers": 5, "num_attention_heads": 4,
                    "num_key_value_heads": 2, "intermediate_size": 96, "cross_attention_layers": [1, 3],
                    "pad_token_id": 0},
    "vision_config": {"hidden_size": 32, "num_hidden_layers": 3, "num_global_layers": 2, "attention_heads": 4,
                      "intermediate_size": 48, "vision_output_dim": 96, "image_size": 56, "patch_size": 14,
                      "max_num_tiles": 4, "intermediate_layers_indices": [0, 2]},
}
_LLAMA4_TEXT = {"model_type": "llama4_text", "vocab_size": 128, "hidden_size": 64, "num_hidden_layers": 4,
                "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 16, "intermediate_size": 32,
                "intermediate_size_mlp": 96, "num_local_experts": 4, "num_experts_per_tok": 1,
                "attention_chunk_size": 16, "pad_token_id": 0}
_LLAMA4: dict[str, Any] = {
    "model_type": "llama4", "text_config": _LLAMA4_TEXT,
    "vision_config": {"hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 4, "intermediate_size": 128,
                      "vision_output_dim": 48, "image_size": 56, "patch_size": 14, "pixel_shuffle_ratio": 0.5,
                      "projector_input_dim": 48, "projector_output_dim": 48},
}

CASES: list[tuple[str, dict[str, Any]]] = [
    ("mllama", _MLLAMA),
    ("mllama-aspect-ratios", {**_MLLAMA, "vision_config": {**_MLLAMA["vision_config"], "max_num_tiles": 2,
                                                           "supported_aspect_ratios": [[1, 1], [1, 2], [2, 1]]}}),
    ("mllama-no-cross", {**_MLLAMA, "text_config": {**_MLLAMA["text_config"], "cross_attention_layers": []}}),
    ("mllama-mha-odd-heads", {**_MLLAMA, "text_config": {**_MLLAMA["text_config"], "num_key_value_heads": 4},
                              "vision_config": {**_MLLAMA["vision_config"], "hidden_size": 36,
                                                "attention_heads": 8, "num_channels": 4}}),
    ("llama4", _LLAMA4),
    ("llama4-tied-interleaved", {**_LLAMA4, "text_config": {**_LLAMA4_TEXT, "tie_word_embeddings": True,
                                                            "interleave_moe_layer_step": 2,
                                                            "attention_bias": True}}),
    ("llama4-shuffle-quarter", {**_LLAMA4, "vision_config": {**_LLAMA4["vision_config"], "pixel_shuffle_ratio": 0.25,
                                                             "projector_input_dim": 40, "projector_output_dim": 24,
                                                             "vision_output_dim": 24, "num_channels": 1}}),
]


def _check(cfg: dict[str, Any]) -> None:
    model = build(cfg)
    spec = spec_from_config(cfg, name=cfg["model_type"])
    ours = count_params(spec)
    assert_params_equal(ours, model)
    layers = model.model.language_model.layers if cfg["model_type"] == "mllama" else \
        model.language_model.model.layers
    cross = tuple(type(layer).__name__ == "MllamaCrossAttentionDecoderLayer" for layer in layers)
    assert spec.cross_attention_layers == cross
    assert tuple(k == "none" for k in spec.layer_types) == cross  # a cross layer keeps no text K/V


@pytest.mark.parametrize(("label", "cfg"), CASES, ids=[c[0] for c in CASES])
def test_tiny_config_builds_the_model_transformers_builds(label, cfg):
    _check(cfg)


@pytest.mark.parametrize("model_type", ["mllama", "llama4"])
def test_full_size_class_default_config(model_type):
    """The configuration class's defaults as transformers saves them (``to_dict``): MllamaConfig is
    Llama-3.2-11B-Vision's shape (10.67B), Llama4Config Llama-4-Scout's text stack with the default vision tower."""
    _check(transformers.AutoConfig.for_model(model_type).to_dict())


def test_mllama_class_default_is_the_11b_vision_model():
    """Meta's Llama-3.2-11B-Vision card gives '10.6B' parameters (llama-models models/llama3_2/MODEL_CARD_VISION.md,
    'Llama 3.2-Vision 11B ... 10.6B'); the class default builds 10,642,941,475."""
    pc = count_params(spec_from_config(transformers.AutoConfig.for_model("mllama").to_dict(), name="m"))
    assert abs(pc.total - 10.6e9) <= 0.05e9


@pytest.mark.parametrize(("cfg", "fragment"), [
    ({**_MLLAMA, "text_config": {**_MLLAMA["text_config"], "cross_attention_layers": [9]}}, "beyond"),
    ({**_MLLAMA, "vision_config": {**_MLLAMA["vision_config"], "supported_aspect_ratios": "wide"}}, "aspect"),
    ({**_MLLAMA, "vision_config": {**_MLLAMA["vision_config"], "image_size": [56, 28]}}, "image_size"),
    ({**_LLAMA4, "vision_config": {**_LLAMA4["vision_config"], "pixel_shuffle_ratio": 0.3}}, "1/n"),
    ({**_LLAMA4, "vision_config": "big"}, "object"),
])
def test_bad_llama_vision_config_is_one_clear_error(cfg, fragment):
    with pytest.raises((ModelFileError, InputError), match=fragment):
        spec_from_config(cfg, name="bad")
