"""Issue #15, numbers: every numeric field of a model description goes through llmsizer.numbers.check_number,
so an impossible value is refused in one line naming the field and the file -- never a traceback, never a
wrong answer. The truth is physical: a model has at least one layer and one head, a width is a whole number,
a boolean is not a count, and grouped-query attention needs the KV heads to divide the query heads."""

from __future__ import annotations

import json
import math

import pytest
import readers_helpers as H

from bounded import run_bounded
from llmsizer.errors import LlmsizerError
from llmsizer.readers.hf_config import load_config_file, spec_from_config
from llmsizer.readers.manual import spec_from_manual
from llmsizer.specs import ModelSpec

BASE = dict(H.LLAMA_CONFIG)


def _config(tmp_path, **override):
    path = tmp_path / "config.json"
    path.write_text(json.dumps({**BASE, **override}))
    return path


def _refused(path, field: str) -> str:
    with pytest.raises(LlmsizerError) as e:
        spec_from_config(load_config_file(path), name="m", source=str(path))
    msg = str(e.value)
    assert "\n" not in msg and field in msg and str(path) in msg, msg
    return msg


@pytest.mark.parametrize(("field", "value"), [
    ("num_hidden_layers", 10**30),  # OverflowError before #15
    ("num_hidden_layers", 0),
    ("num_attention_heads", 0),  # ZeroDivisionError before #15
    ("num_attention_heads", -4),
    ("head_dim", 1e30),  # refused before #15 without naming the file
    ("head_dim", 2**40),  # accepted before #15
    ("intermediate_size", 32.5),  # accepted before #15
    ("num_key_value_heads", True),  # accepted before #15 (True == 1)
    ("hidden_size", math.nan),
    ("hidden_size", math.inf),
    ("vocab_size", "64"),
    ("max_position_embeddings", 2**40),
    ("max_position_embeddings", -1),
])
def test_impossible_config_numbers_are_refused_naming_field_and_file(tmp_path, field, value):
    _refused(_config(tmp_path, **{field: value}), field)


def test_two_billion_layers_are_refused_before_any_per_layer_list(tmp_path):
    # before #15 the reader built per-layer tuples of 2^31 entries (16 GiB) and died with MemoryError
    path = _config(tmp_path, num_hidden_layers=2**31)
    out = run_bounded("spec_from_config(load_config_file(path), name='m', source=path)", path)
    assert out.startswith("ERROR") and "num_hidden_layers" in out and str(path) in out, out


@pytest.mark.parametrize(("heads", "kv"), [(4, 3), (5, 2), (4, 8)])
def test_kv_heads_must_divide_the_query_heads(tmp_path, heads, kv):
    msg = _refused(_config(tmp_path, num_attention_heads=heads, num_key_value_heads=kv), "num_key_value_heads")
    assert f"({heads})" in msg and f"({kv})" in msg


@pytest.mark.parametrize(("field", "value"), [("layer_types", 7), ("layer_types", {"a": 1}),
                                              ("layer_types", ["full"] * 3)])
def test_per_layer_lists_must_be_lists_of_one_entry_per_layer(tmp_path, field, value):
    _refused(_config(tmp_path, **{field: value}), field)


def test_moe_per_layer_list_entries_are_layer_indices(tmp_path):
    cfg = {**BASE, "model_type": "qwen3_moe", "num_experts": 4, "num_experts_per_tok": 2,
           "moe_intermediate_size": 16, "mlp_only_layers": [[0]]}
    path = tmp_path / "config.json"
    path.write_text(json.dumps(cfg))
    _refused(path, "mlp_only_layers")  # TypeError (unhashable list) before #15


def test_top_k_cannot_exceed_the_experts(tmp_path):
    cfg = {**BASE, "model_type": "mixtral", "num_local_experts": 2, "num_experts_per_tok": 3}
    path = tmp_path / "config.json"
    path.write_text(json.dumps(cfg))
    with pytest.raises(LlmsizerError, match="experts_per_token"):
        spec_from_config(load_config_file(path), name="m", source=str(path))


def _spec(**kw):
    base = dict(name="m", model_type="llama", vocab_size=64, hidden_size=32, num_layers=2, num_heads=4,
                num_kv_heads=2, head_dim=8, intermediate_size=48)
    return ModelSpec(**{**base, **kw})


@pytest.mark.parametrize(("field", "value"), [("head_dim", 2**40), ("intermediate_size", 32.5),
                                              ("num_kv_heads", True), ("num_layers", 2**31),
                                              ("max_position_embeddings", 2**40), ("sliding_window", -5)])
def test_model_spec_checks_every_number(field, value):
    with pytest.raises(LlmsizerError, match=field):
        _spec(**{field: value})


@pytest.mark.parametrize(("kw", "flag"), [({"layers": 10**30}, "--layers"), ({"heads": -1}, "--heads"),
                                          ({"kv_heads": 3}, "--kv-heads"), ({"head_dim": 2**40}, "--head-dim"),
                                          ({"vocab": True}, "--vocab")])
def test_manual_fields_are_checked_and_named_by_flag(kw, flag):
    with pytest.raises(LlmsizerError, match=flag):
        spec_from_manual(**{"layers": 2, "hidden": 32, "heads": 4, "intermediate": 48, **kw})


gguf = pytest.importorskip("gguf")


@pytest.mark.parametrize(("key", "value"), [
    ("llama.attention.key_length", H.U64(2**64 - 1)),  # accepted as head_dim before #15
    ("llama.context_length", H.U64(2**64 - 1)),
    ("llama.attention.head_count", 0),
    ("llama.embedding_length", H.U64(2**40)),
    ("llama.attention.head_count_kv", [2, 2**30]),
])
def test_impossible_gguf_numbers_are_refused_naming_the_key_and_file(tmp_path, key, value):
    from llmsizer.readers.gguf_file import spec_from_gguf

    path = tmp_path / "model.gguf"
    H.llama_gguf().with_meta(key, value).write(path)
    with pytest.raises(LlmsizerError) as e:
        spec_from_gguf(path)
    msg = str(e.value)
    assert "\n" not in msg and key in msg and str(path) in msg, msg


@pytest.mark.parametrize("value", ["\x1b[31m" + "9" * 100_000, ["x"] * 50_000, {"a": "b" * 100_000}])
def test_a_non_number_is_shown_short_and_escaped(tmp_path, value):
    msg = _refused(_config(tmp_path, hidden_size=value), "hidden_size")
    assert len(msg) < 600 and "\x1b" not in msg, msg[:300]
