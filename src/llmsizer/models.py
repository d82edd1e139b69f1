"""Resolve what the user names into a ModelSpec: catalog name, config.json, model folder, GGUF, Hub id.

Order: an existing path (folder, config.json, .gguf) wins; then the built-in catalog; then, only when
``hub=True``, the Hugging Face Hub (optional extra); then an instruct/chat/base variant of a catalog model,
resolved to it and saying so (see :mod:`llmsizer.catalog.models`). Nothing downloads weights; no model code runs.
"""

from __future__ import annotations

from pathlib import Path

from .catalog import models as catalog
from .errors import UnknownNameError
from .specs import ModelSpec


def load_model(ref: str, *, hub: bool = False) -> ModelSpec:
    """A ModelSpec for ``ref``: a catalog name/id, a config.json, a model folder, or a .gguf file."""
    p = Path(ref).expanduser()
    if p.is_file() and (p.suffix == ".safetensors" or p.name.endswith(".safetensors.index.json")):
        p = p.parent  # a weight file or shard index: read the folder it belongs to
    if p.exists():
        if p.is_dir():
            from .readers.hf_folder import spec_from_folder
            return spec_from_folder(p)
        if p.suffix.lower() == ".gguf":
            from .readers.gguf_file import spec_from_gguf
            return spec_from_gguf(p)
        from .readers.hf_config import load_config_file, spec_from_config
        return spec_from_config(load_config_file(p), name=p.parent.name or p.name, source=str(p))
    if hub and "/" in ref:  # the Hub's own config of a variant beats resolving it to its base in the catalog
        try:
            return catalog.find_spec(ref, variants=False)
        except UnknownNameError:
            from .readers.hub import spec_from_hub
            return spec_from_hub(ref)
    return catalog.find_spec(ref)
