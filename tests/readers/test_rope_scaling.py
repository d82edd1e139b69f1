"""The config's rope_scaling as the spec carries it (readers/hf_config.py ``rope_scaling_of``), the input of the
serving engines' window (estimate/context_window.py): every catalog model's entries are its config.json's own values
(the verbatim copies in catalog/data/models), legacy names renamed as vLLM's patch_rope_parameters_dict does
('type' -> rope_type, 'su' -> longrope, 'mrope' -> default); a malformed rope_scaling is one line naming the key."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from llmsizer.errors import LlmsizerError
from llmsizer.models import load_model
from llmsizer.readers.hf_config import spec_from_config

MODELS = Path(__file__).resolve().parents[2] / "src" / "llmsizer" / "catalog" / "data" / "models"
RENAMES = {"su": "longrope", "mrope": "default"}


def _rope(config: dict[str, Any]) -> dict[str, Any] | None:
    text = config.get("text_config") or {}
    return config.get("rope_scaling") or text.get("rope_scaling") or config.get("rope_parameters") \
        or text.get("rope_parameters")


@pytest.mark.parametrize("path", sorted(MODELS.glob("*.json")), ids=lambda p: p.stem)
def test_the_spec_carries_the_configs_rope_scaling(path: Path) -> None:
    entry = json.loads(path.read_text())
    rope = _rope(entry["config"])
    spec = load_model(entry["name"])
    if rope is None:  # (T5 / mT5 have relative position buckets, no rotary)
        assert spec.rope_scaling == ()
        return
    # transformers v5 keys the object by layer type (Gemma 4: full_attention, sliding_attention): one entry each
    nested = all(isinstance(v, dict) for v in rope.values())
    wanted = list(rope.values()) if nested else [rope]
    assert len(spec.rope_scaling) == len(wanted)
    for got, want in zip(spec.rope_scaling, wanted, strict=True):
        kind = want.get("rope_type", want.get("type", "default"))
        assert got.rope_type == RENAMES.get(kind, kind)
        assert got.factor == want.get("factor")
        assert got.original_max_position_embeddings == want.get("original_max_position_embeddings")


BASE = json.loads((MODELS / "llama-2-7b-hf.json").read_text())["config"]


@pytest.mark.parametrize(("rope", "words"), [
    ("linear", "rope_scaling must be an object"),
    ({"type": "linear", "factor": "2"}, "rope_scaling factor must be a number"),
    ({"type": "linear", "factor": 0}, "rope_scaling factor"),
    ({"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 4096.5},
     "original_max_position_embeddings must be an integer"),
    ({"rope_type": ["yarn"]}, "rope_type must be a name"),
])
def test_a_malformed_rope_scaling_is_one_line(rope: Any, words: str) -> None:
    with pytest.raises(LlmsizerError) as e:
        spec_from_config(dict(BASE, rope_scaling=rope), name="x")
    assert words in str(e.value) and "\n" not in str(e.value)


def test_nested_per_layer_type_entries_are_each_read() -> None:
    rope = {"full_attention": {"rope_type": "linear", "factor": 8.0}, "sliding_attention": {"rope_type": "default"}}
    spec = spec_from_config(dict(BASE, rope_parameters=rope), name="x")
    assert [(r.rope_type, r.factor) for r in spec.rope_scaling] == [("linear", 8.0), ("default", None)]
