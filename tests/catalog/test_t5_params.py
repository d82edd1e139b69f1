"""T5 / mT5 encoder-decoders (readers/hf_t5.py) against the models transformers builds.

Independent truth: transformers 5.24 instantiates T5ForConditionalGeneration / MT5ForConditionalGeneration from the
same config dict on the meta device; ``parameters()`` counts them (the shared embedding and a tied lm_head once)
and the module names give the per-component split (``oracle_utils.component_of``). The catalog entries are checked
exactly by tests/catalog/test_params_match_transformers.py like every entry.
"""

from __future__ import annotations

import json

import pytest

from cli_capture import run
from llmsizer.errors import InputError, ModelFileError
from llmsizer.formulas.params import count_params
from llmsizer.readers.hf_config import spec_from_config
from oracle_utils import assert_params_equal, build

pytestmark = pytest.mark.slow

_SMALL = {"vocab_size": 500, "d_model": 64, "d_kv": 16, "d_ff": 96, "num_heads": 4}
CONFIGS = {
    # original T5: ReLU FFN (wi, wo), lm_head tied to the shared embedding, class defaults for the rest
    "t5-original-like": {**_SMALL, "model_type": "t5", "num_layers": 2},
    # T5 v1.1 / T0 layout: gated-gelu (wi_0, wi_1, wo), untied lm_head, d_kv x heads != d_model
    "t5-v1_1-like": {**_SMALL, "model_type": "t5", "num_layers": 3, "num_heads": 6, "feed_forward_proj": "gated-gelu",
                     "tie_word_embeddings": False},
    # a deeper decoder than encoder, more buckets
    "t5-uneven-stacks": {**_SMALL, "model_type": "t5", "num_layers": 2, "num_decoder_layers": 4,
                         "relative_attention_num_buckets": 64, "feed_forward_proj": "gated-relu"},
    # mT5 / mT0: class default gated-gelu, untied
    "mt5-like": {**_SMALL, "model_type": "mt5", "num_layers": 2, "tie_word_embeddings": False},
    "mt5-defaults": {**_SMALL, "model_type": "mt5", "num_layers": 2},
}


@pytest.mark.parametrize("name", list(CONFIGS))
def test_params_and_components_equal_the_transformers_model(name):
    model = build(CONFIGS[name])
    ours = count_params(spec_from_config(CONFIGS[name], name=name))
    assert_params_equal(ours, model)


def test_stacks_and_layout_read_from_the_config():
    spec = spec_from_config(CONFIGS["t5-uneven-stacks"], name="u")
    ed = spec.encoder_decoder
    assert ed is not None
    assert (ed.encoder_layers, ed.decoder_layers, spec.num_layers) == (2, 4, 6)
    assert spec.cross_attention_layers == (False, False, True, True, True, True)
    assert (ed.relative_attention_buckets, ed.relative_attention_max_distance, ed.dropout) == (64, 128, 0.1)
    v11 = spec_from_config(CONFIGS["t5-v1_1-like"], name="v")
    assert (v11.mlp_gated, v11.mlp_act_python, v11.tie_word_embeddings) == (True, True, False)
    orig = spec_from_config(CONFIGS["t5-original-like"], name="o")
    assert (orig.mlp_gated, orig.mlp_act_python, orig.tie_word_embeddings) == (False, False, True)


@pytest.mark.parametrize("name", ["t5-uneven-stacks", "t5-v1_1-like"])
def test_inspect_shows_the_two_stacks_transformers_builds(name, tmp_path):
    """``inspect`` names the encoder and decoder stacks as the model has them (T5Stack ``block`` lists), in the text
    and the JSON, not their sum alone."""
    model = build(CONFIGS[name])
    enc, dec = len(model.encoder.block), len(model.decoder.block)
    path = tmp_path / "config.json"
    path.write_text(json.dumps(CONFIGS[name]))
    code, out, _ = run("inspect", str(path))
    assert code == 0 and f"layers {enc} encoder + {dec} decoder," in out
    code, out, _ = run("inspect", str(path), "--json")
    arch = json.loads(out)["architecture"]
    assert code == 0 and arch["layers"] == enc + dec
    assert (arch["encoder_decoder"]["encoder_layers"], arch["encoder_decoder"]["decoder_layers"]) == (enc, dec)


@pytest.mark.parametrize("bad", ["swish-gated", "gated-", "gated-gelu-new", "", 3])
def test_bad_feed_forward_proj_is_one_line_error(bad):
    with pytest.raises(ModelFileError, match="feed_forward_proj"):
        spec_from_config({**CONFIGS["t5-original-like"], "feed_forward_proj": bad}, name="t5")


@pytest.mark.parametrize(("key", "bad"), [("dropout_rate", 1.5), ("dropout_rate", "0.1"), ("d_model", 0),
                                          ("num_decoder_layers", "6"), ("tie_word_embeddings", "no")])
def test_bad_numbers_are_one_line_errors(key, bad):
    with pytest.raises((InputError, ModelFileError), match=key):
        spec_from_config({**CONFIGS["t5-original-like"], key: bad}, name="t5")
