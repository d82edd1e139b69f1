"""``ModelSpec.attention_free``, the one test of "a model with no attention layer" (SGLang's token pool of 0 B,
eq. 3m; SGLang's window fallback for a config with no length key), against the modules transformers builds from the
same config.json: a model is attention-free exactly when no module of it is an attention block (the classes of
modeling_*.py named ``...Attention``: LlamaAttention, JambaAttention, FalconH1Attention, NemotronHAttention, ...;
Mamba2Model builds none)."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest

from llmsizer.estimate.context_window import sglang_window
from llmsizer.readers.hf_config import spec_from_config
from oracle_utils import HYBRID_TINY, TINY_CONFIGS, build

CATALOG = Path(__file__).resolve().parents[2] / "src/llmsizer/catalog/data/models"
CASES = {**HYBRID_TINY, "llama-gqa": TINY_CONFIGS["llama-gqa"]}


def _catalog_config(name: str) -> dict[str, Any]:
    return json.loads((CATALOG / f"{name}.json").read_text())["config"]


def _builds_attention(cfg: dict[str, Any]) -> bool:
    return any(type(m).__name__.endswith("Attention") for m in build(cfg).modules())


@pytest.mark.parametrize("name", sorted(CASES))
def test_attention_free_is_a_model_with_no_attention_module(name: str) -> None:
    cfg = CASES[name]
    assert spec_from_config(cfg, name=name).attention_free is (not _builds_attention(cfg))


def test_falcon_h1_every_layer_recurrent_still_attends() -> None:
    """Falcon-H1: each decoder layer holds a Mamba-2 mixer and an attention block (FalconH1DecoderLayer), so every
    layer is recurrent and the model is not attention-free; the former test of SGLang's window fallback (every layer
    recurrent) took it for a pure Mamba model and gave a hand-described Falcon-H1 with no max_position_embeddings a
    window of 2048 (common.py:690-694 is for a config with no length key, which Falcon-H1's config is not)."""
    cfg = _catalog_config("falcon-h1-0.5b-instruct")
    spec = spec_from_config(cfg, name="falcon-h1")
    assert spec.recurrent_layer_count == spec.num_layers == cfg["num_hidden_layers"]
    assert _builds_attention(cfg) and not spec.attention_free
    assert sglang_window(dataclasses.replace(spec, max_position_embeddings=None)) is None
    codestral = _catalog_config("mamba-codestral-7b-v0.1")
    assert "max_position_embeddings" not in codestral and not _builds_attention(codestral)
    assert sglang_window(spec_from_config(codestral, name="codestral"))[0] == 2048  # type: ignore[index]
