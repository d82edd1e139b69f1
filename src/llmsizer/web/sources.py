"""Where a web request's model comes from: a catalog name or Hub id, a config.json object, or the header of a
.gguf / .safetensors file the page read in the browser and uploaded (only the header: never the weights).

No server-side path is ever built from a request: a name is a catalog name or a Hub id (``models.names_only``),
an upload lives under the hash of its bytes (in memory, and for ``serve``'s
worker processes in a private folder, ``upload_files``), and the file name a page sends is only a label.
"""

from __future__ import annotations

import argparse
import hashlib
import re
import threading
from collections import OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from ..errors import ModelFileError
from ..models import load_named
from ..readers.gguf_file import spec_from_gguf_header
from ..readers.gguf_header import parse_gguf_header
from ..readers.hf_config import spec_from_config
from ..readers.hf_folder import attach_file_weights, layer_of, role_of
from ..readers.safe_io import MAX_TENSORS
from ..readers.safetensors_header import TensorInfo, header_tensors, summarize
from ..specs import ModelSpec
from .problems import Problem
from .upload_files import HEX, HeaderFiles, StoredHeader

MODEL_FIELDS = ("model", "config", "config_name", "model_file")
KINDS = ("gguf", "safetensors")
# A GGUF header holds the tokenizer (vocabulary, merges): 5-10 MB for the 128k-262k-token vocabularies of current
# models, so the header upload has its own cap above the 1 MB of a JSON body. The page sends min(size, this).
UPLOAD_LIMIT = 32 << 20
KEEP_UPLOADS = 32  # parsed headers kept in memory (least recently used dropped first)...
KEEP_TENSORS = MAX_TENSORS  # ...and tensor records of all of them together (~0.5 KB each: ~130 MB at most)
KEEP_UPLOAD_BYTES = 8 * UPLOAD_LIMIT  # raw headers kept on disk for all workers together (with KEEP_UPLOADS)
ID_PREFIX = "sha256:"
# a file name as a browser gives it (File.name): any characters but folder separators and control characters
LABEL = re.compile(r"^[^/\\\x00-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]{1,200}$")

MODEL_SCHEMA: dict[str, Any] = {
    "model": {"type": "string", "description": "a catalog name or id (GET /api/v1/models), or a Hugging Face id "
                                               "with hub=true; never a server-side path"},
    "config": {"type": "object", "description": "the content of a config.json (instead of model)"},
    "config_name": {"type": "string", "description": "a label for config: the model's name in the answer "
                                                     "(source LABEL/config.json); default 'model'"},
    "model_file": {"oneOf": [{"type": "string"}, {"type": "array", "items": {"type": "string"}}],
                   "description": "the id POST /api/v1/model-files returned: a GGUF header is the whole model; "
                                  "safetensors headers (a list for the shards) give the exact stored bytes of the "
                                  "model or config given with them"},
}


@dataclass(frozen=True)
class Upload:
    """One uploaded header, parsed: a GGUF's ModelSpec, or a safetensors file's tensor records."""

    id: str
    kind: str
    name: str
    size: int
    spec: ModelSpec | None
    tensors: tuple[TensorInfo, ...]  # a safetensors header's records (a GGUF's are summed up in its spec)
    tensor_count: int

    def to_dict(self) -> dict[str, Any]:
        from ..cli.model_cmds import inspect_data
        fw = self.spec.file_weights if self.spec is not None else \
            summarize(self.name, self.tensors, 0, layer_of, role_of)
        assert fw is not None
        out: dict[str, Any] = {"model_file": self.id, "kind": self.kind, "name": self.name, "size": self.size,
                               "tensors": self.tensor_count, "bytes": fw.total_bytes, "by_dtype": dict(fw.by_dtype)}
        if self.spec is not None:
            out["model"] = inspect_data(self.spec)
        return out


class Uploads:
    """The parsed headers, by the hash of what was sent (so the same file uploaded twice is one entry). With
    ``folder`` (``serve`` gives each run a private one), the raw headers are also kept there for the other worker
    processes (``upload_files.HeaderFiles``): a worker that does not hold an id parses the file once and keeps it."""

    def __init__(self, keep: int = KEEP_UPLOADS, keep_tensors: int = KEEP_TENSORS,
                 folder: str | None = None, keep_bytes: int = KEEP_UPLOAD_BYTES) -> None:
        self._items: OrderedDict[str, Upload] = OrderedDict()
        self._keep, self._keep_tensors = keep, keep_tensors
        self._lock = threading.Lock()
        self._files = HeaderFiles(folder, keep, keep_bytes) if folder is not None else None

    def add(self, kind: str, name: str, size: int, data: bytes) -> Upload:
        digest = hashlib.sha256(f"{kind}\0{name}\0{size}\0".encode() + data).hexdigest()
        key = f"{ID_PREFIX}{digest}"
        with self._lock:
            if key in self._items:
                self._items.move_to_end(key)
                return self._items[key]
        upload = parse_upload(key, kind, name, size, data)
        if self._files is not None:
            self._files.put(digest, StoredHeader(kind, name, size, data))
        self._keep_parsed(upload)
        return upload

    def _keep_parsed(self, upload: Upload) -> None:
        with self._lock:
            self._items[upload.id] = upload
            self._items.move_to_end(upload.id)
            while len(self._items) > 1 and (len(self._items) > self._keep or
                                            sum(len(u.tensors) for u in self._items.values()) > self._keep_tensors):
                self._items.popitem(last=False)

    def get(self, key: Any) -> Upload:
        if not isinstance(key, str):
            raise Problem(400, "field 'model_file': expected the id the upload returned (a string)", "model_file")
        with self._lock:
            upload = self._items.get(key)
            if upload is not None:
                self._items.move_to_end(key)
        if upload is None and self._files is not None and key.startswith(ID_PREFIX) \
                and HEX.match(key[len(ID_PREFIX):]):
            stored = self._files.get(key[len(ID_PREFIX):])
            if stored is not None:  # uploaded to another worker: parsed here once, with the same readers
                upload = parse_upload(key, stored.kind, stored.name, stored.size, stored.data)
                self._keep_parsed(upload)
        if upload is None:
            raise Problem(400, f"model_file {key[:80]!r}: not uploaded to this server, or forgotten (it keeps the "
                               f"last {self._keep} headers; a restart forgets all): upload the header again to "
                               "POST /api/v1/model-files", "model_file")
        return upload


def check_label(name: str, field: str) -> str:
    if not LABEL.match(name) or name.strip() in ("", ".", ".."):
        raise Problem(400, f"{field} {name[:80]!r}: a file name (at most 200 characters; no folder, no control "
                           "characters)", field)
    return name


def parse_upload(key: str, kind: str, name: str, size: int, data: bytes) -> Upload:
    """Parse an uploaded header with the readers the CLI uses on files (header-only, the same checks)."""
    if kind == "gguf":
        try:
            header = parse_gguf_header(data, name, size)
        except ModelFileError as e:  # "the file has N" counts the bytes sent, not the file: say so
            if "truncated GGUF header" in str(e) and len(data) < size:
                raise ModelFileError(f"{e}; only the first {len(data):,} of the file's {size:,} bytes were sent, and "
                                     "the header goes on: send more of the file (up to where its tensor data "
                                     "starts)") from None
            raise
        spec = spec_from_gguf_header(header)
        return Upload(key, kind, name, size, spec, (), len(header.tensors))
    tensors = header_tensors(data, name, size)
    return Upload(key, kind, name, size, None, tuple(tensors), len(tensors))


def model_loader(fields: Mapping[str, Any], uploads: Uploads) -> tuple[str | None, Callable[..., ModelSpec]]:
    """(the MODEL argument for ``cli.common.resolve_model``, the loader it calls) for the model fields of a request.
    The loader reads no file: a name goes to the catalog (or the Hub with hub=true)."""
    name, config, files = fields.get("model"), fields.get("config"), fields.get("model_file")
    if name is not None and not isinstance(name, str):
        raise Problem(400, "field 'model': expected a catalog name or Hugging Face id (a string); send a config.json "
                           "as 'config'", "model")
    if config is not None and not isinstance(config, dict):
        raise Problem(400, "field 'config': expected the content of a config.json (a JSON object)", "config")
    if name is not None and config is not None:
        raise Problem(400, "give the model as 'model' (a name) or 'config' (a config.json), not both", "config")
    label = fields.get("config_name", "model")
    if not isinstance(label, str):
        raise Problem(400, "field 'config_name': expected a string", "config_name")
    check_label(label, "config_name")
    ups = [uploads.get(k) for k in (files if isinstance(files, list) else [files] if files is not None else [])]
    ggufs = [u for u in ups if u.kind == "gguf"]
    if ggufs and (len(ups) > 1 or name is not None or config is not None):
        raise Problem(400, "a GGUF file is the whole model: give it alone as model_file (no model, config or other "
                           "files)", "model_file")
    if ggufs:
        spec = ggufs[0].spec
        assert spec is not None
        return ggufs[0].name, lambda ref, hub=False: spec
    if ups and name is None and config is None:
        raise Problem(400, "a safetensors header holds the stored bytes, not the architecture: give the model as "
                           "'model' (a catalog name) or 'config' (its config.json) with it", "model_file")

    def load(ref: str, hub: bool = False) -> ModelSpec:
        if config is None:
            spec = load_named(ref, hub=hub)
        else:  # as the CLI names LABEL/config.json, or the folder LABEL when its weight files come too
            spec = spec_from_config(config, name=label, source=label if ups else f"{label}/config.json")
        if not ups:
            return spec
        tensors = [t for u in ups for t in u.tensors]
        return attach_file_weights(spec, tensors, label if config is not None else " + ".join(u.name for u in ups))

    return (label if config is not None else name), load


def resolve(args: argparse.Namespace, fields: Mapping[str, Any], uploads: Uploads) -> ModelSpec:
    """The request's model, through the CLI's own resolver (model or manual fields, and its messages)."""
    from ..cli.common import resolve_model
    ref, load = model_loader(fields, uploads)
    args.model = ref
    return resolve_model(args, load=load)
