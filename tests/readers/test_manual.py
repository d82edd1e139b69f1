"""Manual model fields (for models llmsizer does not know)."""

import pytest

from llmsizer.errors import InputError
from llmsizer.formulas.params import count_params
from llmsizer.readers.manual import spec_from_manual


def test_solving_the_mlp_width_from_llama2_7b_published_count_recovers_its_config():
    # Llama-2-7b: 6,738,415,616 parameters (HF safetensors total); config.json intermediate_size 11008.
    spec = spec_from_manual(params=6_738_415_616, layers=32, hidden=4096, heads=32, vocab=32000)
    assert spec.intermediate_size == 11008
    assert count_params(spec).total == 6_738_415_616


def test_defaults_are_named_in_notes():
    spec = spec_from_manual(params=7_000_000_000, layers=32, hidden=4096, heads=32)
    text = " ".join(spec.notes)
    assert "vocab_size=32000" in text and "intermediate_size=" in text and "num_kv_heads=32" in text


@pytest.mark.parametrize("kwargs", [dict(params=7e9), dict(layers=32, hidden=4096, heads=32),
                                    dict(params=1000, layers=32, hidden=4096, heads=32)])
def test_incomplete_or_impossible_fields_are_rejected(kwargs):
    with pytest.raises(InputError):
        spec_from_manual(**kwargs)


def _real_llama(hidden, heads, kv_heads, head_dim=None):
    """The transformers Llama (2 layers) on the meta device; ``head_dim`` set after the config's checks (transformers
    5 refuses a hidden size that is not a multiple of the heads, whatever head_dim says)."""
    from transformers import LlamaConfig

    from oracle_utils import build
    cfg = {"model_type": "llama", "hidden_size": hidden, "num_attention_heads": heads, "num_key_value_heads": kv_heads,
           "num_hidden_layers": 2, "intermediate_size": 1024, "vocab_size": 1000, "tie_word_embeddings": False}
    if head_dim is None:
        return build(cfg)
    conf = LlamaConfig(**{**cfg, "num_attention_heads": 1, "num_key_value_heads": 1})
    conf.num_attention_heads, conf.num_key_value_heads, conf.head_dim = heads, kv_heads, head_dim
    import torch
    import transformers
    with torch.device("meta"):
        return transformers.AutoModelForCausalLM.from_config(conf)


@pytest.mark.parametrize(("hidden", "heads", "kv_heads"), [(4096, 32, 8), (3072, 24, 24), (4096, 33, 11)])
def test_head_dim_not_given_is_the_floor_and_named(hidden, heads, kv_heads):
    """``--heads 33`` with ``--hidden 4096`` and no ``--head-dim``: a config without head_dim gets hidden_size //
    num_attention_heads = 124 (floored: 33 x 124 = 4092 of 4096), and the assumption list now names it (before, a
    floored head_dim was silent). Truth: transformers' LlamaConfig derives exactly that expression, the real Llama
    model on the meta device has that head_dim and the same parameter count; for 33 heads transformers 5 refuses the
    config, so the model is built with the head_dim set after its checks, and the note says it is refused."""
    pytest.importorskip("torch")
    import inspect

    from transformers import LlamaConfig

    from oracle_utils import real_param_count
    assert "self.head_dim = self.hidden_size // self.num_attention_heads" in inspect.getsource(LlamaConfig)
    spec = spec_from_manual(layers=2, hidden=hidden, heads=heads, kv_heads=kv_heads, intermediate=1024, vocab=1000)
    floored = bool(hidden % heads)
    if floored:
        with pytest.raises(Exception, match="not a multiple of the number of attention heads"):
            LlamaConfig(hidden_size=hidden, num_attention_heads=heads, num_key_value_heads=kv_heads)
    model = _real_llama(hidden, heads, kv_heads, hidden // heads if floored else None)
    attn = model.model.layers[0].self_attn
    assert spec.head_dim == attn.head_dim == hidden // heads
    assert attn.q_proj.out_features == heads * spec.head_dim and attn.o_proj.in_features == heads * spec.head_dim
    assert count_params(spec).total == real_param_count(model)
    (note,) = [n for n in spec.notes if n.startswith("head_dim=")]
    assert note.startswith(f"head_dim={hidden // heads} (not given: hidden_size // num_heads = {hidden} // {heads}")
    assert ("floored" in note) == floored and ("transformers 5 refuses" in note) == floored
    if floored:
        assert f"span {heads * (hidden // heads)} of the {hidden} hidden dimensions" in note


def test_a_floored_head_dim_is_an_assumption_of_the_estimate():
    import json

    from cli_capture import run

    code, out, err = run("infer", "--layers", "32", "--hidden", "4096", "--heads", "33", "--intermediate", "11008",
                         "--json")
    assert code == 0, err
    named = [a for a in json.loads(out)["assumptions"] if a["name"] == "model.head_dim"]
    assert len(named) == 1 and named[0]["default"]
    assert named[0]["value"].startswith("124 (not given: hidden_size // num_heads = 4096 // 33, floored")
    given = run("infer", "--layers", "32", "--hidden", "4096", "--heads", "33", "--head-dim", "128",
                "--intermediate", "11008", "--json")[1]
    assert not [a for a in json.loads(given)["assumptions"] if a["name"] == "model.head_dim"]
