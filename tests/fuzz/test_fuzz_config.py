"""config.json fuzz: random keys and values (nan, inf, huge, bool, nesting) on top of real configs, and raw text."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

import readers_helpers as H
from fuzz_common import FUZZ, HOSTILE_NUMBERS, JSON_VALUES, ends_cleanly
from hypothesis import given
from hypothesis import strategies as st

from llmsizer.formulas.params import count_params
from llmsizer.readers.hf_config import NUMERIC_KEYS, SUPPORTED_MODEL_TYPES, load_config_file, spec_from_config

BASES = [
    H.LLAMA_CONFIG,
    {**H.LLAMA_CONFIG, "model_type": "qwen3_moe", "num_experts": 4, "num_experts_per_tok": 2,
     "moe_intermediate_size": 16, "use_sliding_window": True, "sliding_window": 64},
    {**H.LLAMA_CONFIG, "model_type": "deepseek_v3", "n_routed_experts": 4, "num_experts_per_tok": 2,
     "moe_intermediate_size": 16, "kv_lora_rank": 16, "q_lora_rank": 24, "qk_nope_head_dim": 8,
     "qk_rope_head_dim": 4, "v_head_dim": 8, "first_k_dense_replace": 1},
    {**H.LLAMA_CONFIG, "model_type": "gemma3_text", "sliding_window": 32, "head_dim": 8},
    {"model_type": "gpt_bigcode", "n_embd": 32, "n_head": 4, "n_layer": 2, "n_positions": 64, "vocab_size": 64},
    {"model_type": "gemma3n_text", "vocab_size": 64, "hidden_size": 32, "num_hidden_layers": 5,
     "num_attention_heads": 2, "num_key_value_heads": 1, "head_dim": 16, "intermediate_size": [32, 48, 32, 48, 32],
     "vocab_size_per_layer_input": 64, "hidden_size_per_layer_input": 4, "laurel_rank": 4, "num_kv_shared_layers": 2,
     "sliding_window": 8},
]
KEYS = st.one_of(st.sampled_from(sorted(NUMERIC_KEYS)), st.sampled_from(
    ["model_type", "layer_types", "mlp_only_layers", "text_config", "vision_config", "quantization_config",
     "torch_dtype", "tie_word_embeddings", "use_sliding_window", "attention_bias", "intermediate_size"]),
    st.text(max_size=6))


def _spec(cfg):
    spec = spec_from_config(cfg, name="fuzz", source="fuzz/config.json")
    count_params(spec)  # a spec the reader accepts must also be countable
    return spec


@FUZZ
@given(base=st.sampled_from(BASES), changes=st.dictionaries(KEYS, st.one_of(HOSTILE_NUMBERS, JSON_VALUES),
                                                             min_size=1, max_size=4))
def test_mutated_configs_end_cleanly(base, changes):
    ends_cleanly(lambda: _spec({**base, **changes}))


@FUZZ
@given(base=st.sampled_from(BASES), key=st.sampled_from(sorted(NUMERIC_KEYS)), value=HOSTILE_NUMBERS,
       model_type=st.sampled_from(SUPPORTED_MODEL_TYPES))
def test_every_numeric_key_with_every_hostile_number(base, key, value, model_type):
    ends_cleanly(lambda: _spec({**base, "model_type": model_type, key: value}))


@FUZZ
@given(text=st.one_of(st.text(max_size=200), st.binary(max_size=200).map(lambda b: b.decode("latin-1")),
                      st.integers(0, 3000).map(lambda d: '{"a":' + "[" * d + "]" * d + "}"),
                      JSON_VALUES.map(json.dumps)))
def test_raw_config_text_ends_cleanly(text):
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "config.json"
        path.write_bytes(text.encode("utf-8", "surrogatepass"))
        ends_cleanly(lambda: _spec(load_config_file(path)))
