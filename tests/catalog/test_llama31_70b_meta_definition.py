"""The llama-3.1-70b catalog row against Meta's own definition of the model (meta-llama/llama-models
models/llama3_1/api/sku_list.py @1768925: llama3_1_70b model_args, quoted below) and Meta's FeedForward width rule
(models/llama3/model.py FeedForward: hidden = int(2 * 4 dim / 3), int(ffn_dim_multiplier * hidden), rounded up to
multiple_of); the row's source names that repository."""

from __future__ import annotations

from llmsizer.catalog.models import find

META = {"dim": 8192, "n_layers": 80, "n_heads": 64, "n_kv_heads": 8, "vocab_size": 128256,
        "ffn_dim_multiplier": 1.3, "multiple_of": 4096, "norm_eps": 1e-05, "rope_theta": 500000.0}


def test_row_is_metas_definition() -> None:
    e = find("llama-3.1-70b")
    c = e.config
    hidden = int(1.3 * int(2 * 4 * META["dim"] / 3))
    ffn = META["multiple_of"] * ((hidden + META["multiple_of"] - 1) // META["multiple_of"])
    assert (c["hidden_size"], c["num_hidden_layers"], c["num_attention_heads"], c["num_key_value_heads"],
            c["vocab_size"], c["intermediate_size"], c["rms_norm_eps"], c["rope_theta"]) == (
        META["dim"], META["n_layers"], META["n_heads"], META["n_kv_heads"], META["vocab_size"], ffn,
        META["norm_eps"], META["rope_theta"])
    assert "meta-llama/llama-models:models/llama3_1/api/sku_list.py" in e.source


def test_base_row_counts_metas_parameters_exactly() -> None:
    """The base row (meta-llama/Llama-3.1-70B) counted from Meta's definition by hand: untied embedding and head
    2 x 128256 x 8192, per layer q, o 8192^2, k, v 8192 x 1024 (8 of 64 heads), gate, up, down 8192 x 28672 and two
    norms, 80 layers, the final norm: 70,553,706,496, the published Instruct's safetensors total_size / 2
    (tests/consistency/test_same_question_probe3.py) for the same shapes."""
    from llmsizer.formulas.params import count_params

    e = find("llama-3.1-70b")
    assert e.id == "meta-llama/Llama-3.1-70B"
    d, kv, ffn, layers, vocab = META["dim"], 1024, 28672, META["n_layers"], META["vocab_size"]
    per_layer = 2 * d * d + 2 * d * kv + 3 * d * ffn + 2 * d
    assert 2 * vocab * d + layers * per_layer + d == 70_553_706_496
    assert count_params(e.spec()).total == 70_553_706_496
