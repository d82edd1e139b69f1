"""The built-in model catalog: published config.json values with provenance, looked up by name.

Each file in ``data/models/`` holds one model: its Hugging Face id, the verbatim config.json, the
publisher's parameter count and where every value came from. Lookup is case-insensitive and accepts
the full id (``meta-llama/Llama-3.1-8B``), the bare name (``llama-3.1-8b``) or an alias; a miss lists
the closest names.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from typing import Any

from ..errors import ModelFileError, UnknownNameError
from ..readers.hf_config import spec_from_config
from ..specs import ModelSpec
from ..suggest import did_you_mean

MODEL_SUGGESTION_CUTOFF = 0.5  # looser than the default: model names share long prefixes ("qwen2.5-", "llama-3.")


@dataclass(frozen=True)
class CatalogEntry:
    id: str
    name: str
    aliases: tuple[str, ...]
    published_params: int | None
    published_params_source: str
    published_active_params: int | None
    source: str
    retrieved: str
    config: dict[str, Any]

    def spec(self) -> ModelSpec:
        return _spec(self.name)


@lru_cache(maxsize=1)
def entries() -> dict[str, CatalogEntry]:
    """All catalog entries by canonical name."""
    out: dict[str, CatalogEntry] = {}
    folder = resources.files("llmsizer.catalog.data").joinpath("models")
    for f in sorted(folder.iterdir(), key=lambda p: p.name):
        if not f.name.endswith(".json"):
            continue
        try:
            d = json.loads(f.read_text("utf-8"))
            e = CatalogEntry(
                id=d["id"], name=d["name"].lower(), aliases=tuple(d.get("aliases") or ()),
                published_params=d.get("published_params"),
                published_params_source=d.get("published_params_source", ""),
                published_active_params=d.get("published_active_params"),
                source=d["source"], retrieved=d["retrieved"], config=d["config"],
            )
        except (KeyError, json.JSONDecodeError) as exc:
            raise ModelFileError(f"catalog file {f.name}: malformed ({exc})") from None
        out[e.name] = e
    return out


@lru_cache(maxsize=1)
def _index() -> dict[str, str]:
    idx: dict[str, str] = {}
    for e in entries().values():
        for key in (e.name, e.id, *e.aliases):
            idx[key.lower()] = e.name
            idx[key.lower().split("/")[-1]] = e.name
    return idx


def find(name: str) -> CatalogEntry:
    """Look a model up by id, name or alias (case-insensitive); a miss names the closest matches."""
    key = name.strip().lower()
    hit = _index().get(key) or _index().get(key.split("/")[-1])
    if hit:
        return entries()[hit]
    hint = did_you_mean(key.split("/")[-1], list(entries()), cutoff=MODEL_SUGGESTION_CUTOFF)
    raise UnknownNameError(f"unknown model {name!r}{hint} (list them with `llmsizer models`)")


@lru_cache(maxsize=128)
def _spec(name: str) -> ModelSpec:
    e = entries()[name]
    return spec_from_config(e.config, name=e.id, source=f"catalog: {e.source} (retrieved {e.retrieved})",
                            published_params=e.published_params,
                            published_active_params=e.published_active_params)


def search(text: str = "") -> list[CatalogEntry]:
    """Entries whose id, name or alias contains ``text`` (all when empty)."""
    t = text.lower()
    return [e for e in entries().values()
            if not t or t in e.id.lower() or t in e.name or any(t in a.lower() for a in e.aliases)]
