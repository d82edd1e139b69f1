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
