"""The built-in model catalog: published config.json values with provenance, looked up by name.

Each file in ``data/models/`` holds one model: its Hugging Face id, the verbatim config.json, the
publisher's parameter count and where every value came from. Lookup is case-insensitive and accepts
the full id (``meta-llama/Llama-3.1-8B``), the bare name (``llama-3.1-8b``) or an alias; a miss lists
the closest names.

Variants. A post-trained release (``-Instruct``, ``-Chat``, ``-it``) and its pre-trained base (``-Base``,
``-pt``) share the architecture: the same layer shapes and vocabulary, hence the same memory. A name that
becomes a catalog entry once the words in :data:`VARIANT_WORDS` are removed from it (``Qwen2.5-7B-Instruct``
-> ``qwen2.5-7b``; ``gemma-3-4b-pt`` -> ``gemma-3-4b-it``'s base) resolves to that entry, and the spec says so
in its notes (the estimate's assumption ``model.name``). Only the variant word is removed: a different
size, version or date (``Qwen2.5-7B-Instruct-1M``, ``Qwen3-4B-Instruct-2507``) is a different name and stays
unknown. :data:`VARIANTS_THAT_DIFFER` lists variants known to change the architecture; they never resolve.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field, replace
from functools import lru_cache
from importlib import resources
from typing import Any

from ..errors import InputError, ModelFileError, UnknownNameError
from ..inputs import shown_model_name
from ..readers.hf_config import spec_from_config
from ..specs import ModelSpec
from ..suggest import did_you_mean, matches_name

MODEL_SUGGESTION_CUTOFF = 0.5
_FILE_STEM = re.compile(r"[a-z0-9][a-z0-9._-]*")  # what a catalog file may be named (its entry's name)  # looser than the default: model names share long prefixes ("qwen2.5-", "llama-3.")

# Hyphen-separated words that name a post-trained or pre-trained release of the same architecture.
VARIANT_WORDS = ("instruct", "chat", "it", "base", "pt")

# Variant names (lower case, without the org) whose config is known to differ in shape from the entry they
# would resolve to: resolving them would be wrong, so they stay unknown with the reason.
VARIANTS_THAT_DIFFER = {
    "mixtral-8x22b-instruct-v0.1": "its vocab_size is 32768 (v3 tokenizer), the base Mixtral-8x22B-v0.1 has 32000",
}

VARIANT_NOTE = ("{asked} resolved to {id} (same architecture: instruct/chat/base releases of one model share layer "
                "shapes and vocabulary; other config values, e.g. max_position_embeddings, are {id}'s)")


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
    # the image processor's own file (preprocessor_config.json), for models whose tokens per image depend on it
    preprocessor: dict[str, Any] = field(default_factory=dict)
    # the video processor's file (video_preprocessor_config.json), where the family publishes one (Qwen3-VL)
    video_preprocessor: dict[str, Any] = field(default_factory=dict)
    # a ModelOpt release's hf_quant_config.json (its quantization recipe, beside a config.json without
    # quantization_config): the config's quantization_config, as vLLM makes it (``_spec``)
    hf_quant_config: dict[str, Any] = field(default_factory=dict)

    def spec(self) -> ModelSpec:
        return _spec(self.name)

    @property
    def public_source(self) -> str:
        """``source`` as users see it: public citations (repository:path@commit, URLs, papers) kept, references to
        the search index our research notes used (file ids a user cannot look up) taken out."""
        return public_citation(self.source)


# Research notes cite copies by the id a code-search index gave them; users cannot look those up.
_IDS = r"(?:(?:code|search)-)?(?:index )?(?:file )?ids? \d{6,}(?:(?:,\s*|\s*/\s*|\s+and\s+)\d{6,})*"
_INDEX_REFS = (
    (re.compile(r"GitHub code-search index copy, file id \d+ \(repository/path not reported by the index\)"),
     "a public GitHub copy (repository not recorded)"),
    (re.compile(r"GitHub code-search index copy, file id \d+"), "a public GitHub copy"),
    (re.compile(r"repository/path not reported by the index"), "repository not recorded"),
    (re.compile(r"GitHub (?:Python|C\+\+|Rust|C#)? ?(?:file|test)? ?\((?:search-)?index file id \d+(, )?"),
     "public GitHub code ("),
    (re.compile(r"\b(in|quoted in|from) " + _IDS), r"\1 public GitHub code"),
    (re.compile(r"(?:[,;]?\s*(?:and|same values|identical)?\s*)" + _IDS), ""),
    (re.compile(r"\(\s*[,;]?\s*"), "("),
    (re.compile(r"\s*\(\)"), ""),
    (re.compile(r"\(,\s*"), "("),
    (re.compile(r"(\(\d\)),\s*"), r"\1 "),
)


def public_citation(text: str) -> str:
    """``text`` without references to code-search index ids (see :attr:`CatalogEntry.public_source`)."""
    for pattern, repl in _INDEX_REFS:
        text = pattern.sub(repl, text)
    return text


def _folder() -> Any:
    return resources.files("llmsizer.catalog.data").joinpath("models")


@lru_cache(maxsize=512)  # the catalog's files, and the misses of names typed in a long-lived process (the web API)
def _entry(stem: str) -> CatalogEntry | None:
    """The entry in ``data/models/<stem>.json`` (the file is named after the entry's name: tests/catalog checks
    it), parsed once per process; None without such a file."""
    f = _folder().joinpath(f"{stem}.json")
    try:
        if not f.is_file():
            return None
    except OSError:  # a name past the file system's NAME_MAX (255 bytes) names no catalog file
        return None
    try:
        d = json.loads(f.read_text("utf-8"))
        return CatalogEntry(
            id=d["id"], name=d["name"].lower(), aliases=tuple(d.get("aliases") or ()),
            published_params=d.get("published_params"),
            published_params_source=d.get("published_params_source", ""),
            published_active_params=d.get("published_active_params"),
            source=d["source"], retrieved=d["retrieved"], config=d["config"],
            preprocessor=d.get("preprocessor_config") or {},
            video_preprocessor=d.get("video_preprocessor_config") or {},
            hf_quant_config=d.get("hf_quant_config") or {},
        )
    except (KeyError, json.JSONDecodeError) as exc:
        raise ModelFileError(f"catalog file {f.name}: malformed ({exc})") from None


@lru_cache(maxsize=1)
def entries() -> dict[str, CatalogEntry]:
    """All catalog entries by canonical name."""
    out: dict[str, CatalogEntry] = {}
    for f in sorted(_folder().iterdir(), key=lambda p: p.name):
        if not f.name.endswith(".json"):
            continue
        e = _entry(f.name[:-5])
        assert e is not None
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


def variant_base(name: str) -> str:
    """``name`` (lower case, without the org) with the :data:`VARIANT_WORDS` removed: 'Qwen/Qwen2.5-7B-Instruct'
    -> 'qwen2.5-7b', 'Llama-2-7b-chat-hf' -> 'llama-2-7b-hf'."""
    words = name.strip().lower().split("/")[-1].split("-")
    return "-".join(w for w in words if w not in VARIANT_WORDS) or name.lower()


@lru_cache(maxsize=1)
def _variant_index() -> dict[str, str]:
    idx: dict[str, str] = {}
    for e in entries().values():
        for key in (e.name, e.id, *e.aliases):
            idx.setdefault(variant_base(key), e.name)
    for e in entries().values():  # an entry that is the base itself (llama-3.1-70b) before a release of it that
        if variant_base(e.name) == e.name:  # sorts first (llama-3.1-70b-instruct): 'Llama-3.1-70B-Base' -> the base
            idx[e.name] = e.name
    return idx


def _lookup(name: str, *, variants: bool) -> tuple[CatalogEntry, bool]:
    """(entry, whether ``name`` is a variant release of it) or UnknownNameError."""
    key = name.strip().lower()
    bare = key.split("/")[-1]
    # a catalog name (``infer llama-3.1-8b``): its own file, without reading the other entries. The same entry the
    # index gives: every name, id and alias names one entry (tests/catalog/test_catalog_lookup_keys.py)
    own_file = _entry(bare) if _FILE_STEM.fullmatch(bare) else None
    hit = bare if own_file is not None and own_file.name == bare else _index().get(key) or _index().get(bare)
    if hit:
        e = own_file if own_file is not None and hit == own_file.name else entries()[hit]
        own = {e.name, e.id.lower(), e.id.lower().split("/")[-1]}
        return e, bare not in own and variant_base(bare) in {variant_base(k) for k in own}
    if bare in VARIANTS_THAT_DIFFER:
        raise UnknownNameError(f"unknown model {shown_model_name(name)}: not resolved to its base because "
                               f"{VARIANTS_THAT_DIFFER[bare]}; give its config.json")
    base = _variant_index().get(variant_base(bare)) if variants and variant_base(bare) != bare else None
    if base:
        return entries()[base], True
    hint = did_you_mean(bare, list(entries()), cutoff=MODEL_SUGGESTION_CUTOFF)
    raise UnknownNameError(f"unknown model {shown_model_name(name)}{hint} (list them with `llmsizer models`)")


def find(name: str, *, variants: bool = True) -> CatalogEntry:
    """Look a model up by id, name or alias (case-insensitive), or as an instruct/chat/base variant of one
    (``variants``; see the module docstring); a miss names the closest matches."""
    return _lookup(name, variants=variants)[0]


def find_spec(name: str, *, variants: bool = True) -> ModelSpec:
    """The ModelSpec of catalog model ``name``; a variant release of a catalog entry gets the entry's spec with a
    ``name=`` note saying so (the estimate shows it as the assumption ``model.name``)."""
    e, is_variant = _lookup(name, variants=variants)
    return _variant_spec(e.name, name.strip()) if is_variant else e.spec()


@lru_cache(maxsize=128)
def _variant_spec(entry: str, asked: str) -> ModelSpec:
    spec = _spec(entry)
    return replace(spec, notes=(*spec.notes, "name=" + VARIANT_NOTE.format(asked=asked, id=spec.name)))


@lru_cache(maxsize=128)
def _spec(name: str) -> ModelSpec:
    e = _entry(name) or entries()[name]
    cfg = dict(e.config)
    if e.preprocessor:
        cfg["preprocessor_config"] = e.preprocessor
    if e.video_preprocessor:
        cfg["video_preprocessor_config"] = e.video_preprocessor
    if e.hf_quant_config and not cfg.get("quantization_config"):
        # vllm 0.34.0 (PyPI wheel) transformers_utils/config.py:996-1009 ``get_config``: a config.json without
        # quantization_config takes hf_quant_config.json's content as it (ModelOpt <= 0.29 checkpoints)
        cfg["quantization_config"] = e.hf_quant_config
    spec = spec_from_config(cfg, name=e.id, source=f"catalog: {e.public_source} (retrieved {e.retrieved})",
                            published_params=e.published_params,
                            published_active_params=e.published_active_params)
    if e.published_params is not None and e.published_params_source:
        spec = replace(spec, published_params_source=public_citation(e.published_params_source))
    return spec


def search(text: str = "") -> list[CatalogEntry]:
    """Entries whose id, name or an alias ``text`` matches by words (``suggest.matches_name``: ``'7b'`` finds
    qwen2.5-7b, not gemma-2-27b); all when empty."""
    return [e for e in entries().values() if matches_name(text, (e.id, e.name, *e.aliases))]


def search_some(text: str | None) -> list[CatalogEntry]:
    """``search(text)``, or InputError (bad input: exit 2, a web 400) when a search names no model, with the
    closest catalog names (the "did you mean" of an unknown model's name): an empty listing answers nothing."""
    found = search(text or "")
    if not found:
        hint = did_you_mean(str(text).strip().lower(), list(entries()), cutoff=MODEL_SUGGESTION_CUTOFF)
        raise InputError(f"no catalog model matches {text!r}{hint} (list them with `llmsizer models`)")
    return found
