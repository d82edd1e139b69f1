"""Gemma 3n through the composition core: which layers the engines give a KV cache, and the named warnings.

Independent truth for the cache layers: transformers' own ``Gemma3nTextConfig`` (v5.24.0) -- its ``layer_types`` and
``kv_sharing_modes`` (configuration_gemma3n.py L140-143, L206-231), a layer with mode "reuse" holding no cache.
"""

from __future__ import annotations

import json

import pytest

import llmsizer
from llmsizer.estimate.model_warnings import GEMMA3N_ACTIVATIONS, GEMMA3N_FFN_WIDTHS, GEMMA3N_TOWERS
from llmsizer.readers.hf_config import spec_from_config
from oracle_utils import transformers

TEXT = {"model_type": "gemma3n_text"}
MULTIMODAL = {"model_type": "gemma3n", "text_config": {"model_type": "gemma3n_text"}}


def _caching_layers() -> tuple[int, int]:
    """(full, sliding) layers that cache K/V of their own in transformers' class default."""
    conf = transformers.Gemma3nTextConfig()
    own = [t for t, m in zip(conf.layer_types, conf.kv_sharing_modes, strict=True) if m != "reuse"]
    return own.count("full_attention"), own.count("sliding_attention")


@pytest.mark.parametrize("engine", ["transformers", "vllm", "llamacpp", "sglang"])
def test_every_engine_caches_only_the_layers_transformers_gives_a_cache(engine):
    full, sliding = _caching_layers()
    assert (full, sliding) == (4, 16)  # 35 layers, the last 15 share
    spec = spec_from_config(TEXT, name="gemma3n")
    est = llmsizer.estimate_inference(spec, engine=engine, context=8192, concurrency=1,
                                       output_tokens=0)  # the whole context is prompt: the cache holds 8192
    assert est.details["kv_bytes_per_token"] == (full + sliding) * 2 * 2 * 256 * 2  # K, V x 2 heads x 256 x 2 B
    formula = est.item("kv_cache").formula
    assert f"({full} full layers x 8192 tokens + {sliding} sliding layers x " in formula


def test_named_warnings_on_inference_and_training():
    for cfg, towers in ((TEXT, False), (MULTIMODAL, True)):
        spec = spec_from_config(cfg, name="g")
        runs = [(llmsizer.estimate_inference(spec, context=1024, engine=e), e != "transformers")
                for e in ("transformers", "vllm", "llamacpp")] + [(llmsizer.estimate_training(spec), False)]
        for est, lower_bound in runs:
            names = {w.split(":")[0] for w in est.warnings}
            # transformers' inference peak and the training terms count AltUp, per-layer inputs and LAuReL
            # (test_gemma3n_activations_forward, tests/training/test_gemma3n_saved_tensors.py)
            assert (GEMMA3N_ACTIVATIONS in names) == lower_bound
            assert (GEMMA3N_TOWERS in names) == towers
            assert GEMMA3N_FFN_WIDTHS not in names
    ragged = {**TEXT, "intermediate_size": [8192] * 20 + [16384] * 15}
    est = llmsizer.estimate_inference(spec_from_config(ragged, name="r"), context=1024)
    assert any(w.startswith(GEMMA3N_FFN_WIDTHS) for w in est.warnings)


def test_cli_sizes_a_gemma3n_config(tmp_path, capsys):
    from llmsizer.cli.main import main

    path = tmp_path / "config.json"
    path.write_text(json.dumps(MULTIMODAL))
    assert main(["infer", str(path), "--context", "2048", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert any(GEMMA3N_TOWERS in w for w in out["warnings"])
    assert main(["inspect", str(path), "--json"]) == 0
    g = json.loads(capsys.readouterr().out)["architecture"]["gemma3n"]
    conf = transformers.Gemma3nTextConfig()
    assert (g["kv_shared_layers"], g["kv_cache_layers"]) == (conf.num_kv_shared_layers, conf.kv_sharing_modes.count(None)
                                                             + conf.kv_sharing_modes.count("store"))
    assert main(["inspect", str(path)]) == 0
    assert "reuse earlier layers' K/V (KV cache on 20)" in capsys.readouterr().out


def test_llamacpp_keeps_both_lookup_tables_in_host_memory_and_copies_only_token_embd():
    """llama.cpp src/llama-arch.cpp: token_embd and per_layer_token_embd are LLM_TENSOR_LAYER_INPUT (host buffer);
    a tied output is a device copy of token_embd alone. Table sizes from transformers' class default."""
    conf = transformers.Gemma3nTextConfig()
    token_embd = conf.vocab_size * conf.hidden_size * 2  # bf16
    per_layer = conf.vocab_size_per_layer_input * conf.num_hidden_layers * conf.hidden_size_per_layer_input * 2
    spec = spec_from_config(TEXT, name="gemma3n")
    est = llmsizer.estimate_inference(spec, engine="llamacpp", device="rtx-4090", context=4096)
    total = est.details["weights_bytes"]
    host = est.item("weights_host").bytes
    assert token_embd + per_layer <= host < token_embd + per_layer + 0.02 * total
    assert est.item("weights").bytes == pytest.approx(total - host + token_embd, abs=16)
