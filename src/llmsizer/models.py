"""Resolve what the user names into a ModelSpec: catalog name, config.json, model folder, GGUF, Hub id.

Order: an existing path (folder, config.json, .gguf) wins; then the built-in catalog; then, only when
``hub=True``, the Hugging Face Hub (optional extra); then an instruct/chat/base variant of a catalog model,
resolved to it and saying so (see :mod:`llmsizer.catalog.models`). Nothing downloads weights; no model code runs.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from contextvars import ContextVar
from pathlib import Path

from .catalog import models as catalog
from .errors import ModelFileError, UnknownNameError
from .inputs import check_model_ref
from .specs import ModelSpec

# False while serving the web API: a name from the network is never looked up as a file on the server (issue #13,
# "no server-side path from user input"); it is a catalog name or a Hub id, nothing else. A context variable, so
# each request's worker thread carries its own setting.
_LOCAL_PATHS: ContextVar[bool] = ContextVar("llmsizer_local_paths", default=True)


@contextlib.contextmanager
def names_only() -> Iterator[None]:
    """Within this block, :func:`load_model` (and the request reader) read no file: every name is a catalog
    name or a Hub id."""
    token = _LOCAL_PATHS.set(False)
    try:
        yield
    finally:
        _LOCAL_PATHS.reset(token)


def local_paths_allowed() -> bool:
    return _LOCAL_PATHS.get()


def load_model(ref: str, *, hub: bool = False) -> ModelSpec:
    """A ModelSpec for ``ref``: a catalog name/id, a config.json, a model folder, or a .gguf file."""
    ref = check_model_ref(ref, "model")  # None, bytes, a 100,000-character name: one line naming it (the API's entry)
    if not local_paths_allowed():
        return load_named(ref, hub=hub)
    p = Path(ref).expanduser()
    try:
        is_file, exists = p.is_file(), p.exists()
    except OSError:  # a component past NAME_MAX (255 bytes): no such path, so a name
        is_file = exists = False
    if is_file and (p.suffix == ".safetensors" or p.name.endswith(".safetensors.index.json")):
        p = p.parent  # a weight file or shard index: read the folder it belongs to
    if exists:
        if p.is_dir():
            from .readers.hf_folder import spec_from_folder
            return spec_from_folder(p)
        if p.suffix.lower() == ".gguf":
            from .readers.gguf_file import spec_from_gguf
            return spec_from_gguf(p)
        if p.suffix.lower() in (".yaml", ".yml"):  # a request file given to infer/train/fit: say where it goes
            raise ModelFileError(f"{ref}: a YAML file is not a model (config.json, model folder or .gguf); a request "
                                 "file is read by `llmsizer plan` or `llmsizer request check`")
        from .readers.hf_config import load_config_file, spec_from_config
        return spec_from_config(load_config_file(p), name=p.parent.name or p.name, source=str(p))
    try:
        return load_named(ref, hub=hub)
    except UnknownNameError:
        if _looks_like_path(ref):  # a mistyped path is not an unknown catalog name
            raise ModelFileError(f"{ref}: no such file or folder (a model path: config.json, model folder or .gguf; "
                                 "catalog names: `llmsizer models`)") from None
        raise


def _looks_like_path(ref: str) -> bool:
    """A reference only a path can be: a model file's suffix, or a start no catalog name or Hub id has."""
    return ref.lower().endswith((".gguf", ".json", ".safetensors")) or ref.startswith(("/", "./", "../", "~", "."))


def load_named(ref: str, *, hub: bool = False) -> ModelSpec:
    """A ModelSpec for a name that is not a file: a catalog name/id, or (``hub=True``) a Hugging Face Hub id."""
    if hub and "/" in ref:  # the Hub's own config of a variant beats resolving it to its base in the catalog
        try:
            return catalog.find_spec(ref, variants=False)
        except UnknownNameError:
            from .readers.hub import spec_from_hub
            return spec_from_hub(ref)
    return catalog.find_spec(ref)


def spec_of(model: ModelSpec | str) -> ModelSpec:
    """The ModelSpec a public function was given as ``model``: itself, or ``load_model`` of a name or path; anything
    else (None, a number) refused by ``load_model``'s entry check naming ``model`` (inputs.check_model_ref)."""
    return model if isinstance(model, ModelSpec) else load_model(model)
