"""GGUF header parser: metadata and tensor table, read over a memory map; tensor data is never touched.

GGUF layout (ggml ``docs/gguf.md``, versions 2 and 3): magic ``GGUF``, version (u32), tensor count and
metadata count (u64), metadata key/value pairs, tensor infos (name, dims in ggml order with ``ne[0]``
innermost, ggml type id, offset), padding to ``general.alignment`` (default 32), then the tensor data.
Bytes per tensor = elements / block size x bytes per block (``catalog/data/ggml_types.json``, from ggml
``type_traits``). gguf-py's ``GGUFReader`` gives the same table (the tests check it) but decodes every
tokenizer string in Python: ~16 s for a 150k-token vocabulary against well under one second here.
"""

from __future__ import annotations

import math
import mmap
import os
import struct
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

from ..errors import ModelFileError
from ..formulas.weight_formats import ggml_types


@dataclass(frozen=True)
class StringArray:
    """A metadata array of strings, counted but not decoded (tokenizer lists hold ~10^5 entries)."""

    count: int


@dataclass(frozen=True)
class GGUFTensor:
    """One tensor-info record: ``shape`` in ggml order (``ne[0]`` innermost), byte offset in the file."""

    name: str
    ggml_type: str
    shape: tuple[int, ...]
    data_offset: int
    nbytes: int

    @property
    def numel(self) -> int:
        return math.prod(self.shape)


@dataclass(frozen=True)
class GGUFHeader:
    """Metadata and tensor table of one GGUF file (no tensor data)."""

    path: Path
    version: int
    metadata: dict[str, Any]
    tensors: tuple[GGUFTensor, ...]
    data_offset: int


# gguf_metadata_value_type (ggml docs/gguf.md): struct codes of the scalar types; 8 = string, 9 = array
_SCALAR = {0: "B", 1: "b", 2: "H", 3: "h", 4: "I", 5: "i", 6: "f", 7: "?", 10: "Q", 11: "q", 12: "d"}
_STRING, _ARRAY = 8, 9
GGML_MAX_DIMS = 4  # ggml.h
DEFAULT_ALIGNMENT = 32  # GGUF_DEFAULT_ALIGNMENT


@lru_cache(maxsize=1)
def _types_by_id() -> dict[int, tuple[str, int, int]]:
    """ggml type id -> (name, elements per block, bytes per block), from catalog/data/ggml_types.json."""
    return {int(v["id"]): (k, int(v["block"]), int(v["bytes"])) for k, v in ggml_types().items()}


class _Cursor:
    """Sequential little/big-endian reads over a memory map; reading past the end means truncation."""

    def __init__(self, buf: Any, path: Path, order: str) -> None:
        self.buf, self.path, self.order, self.pos = buf, path, order, 0

    def need(self, size: int, what: str) -> None:
        if self.pos + size > len(self.buf):
            raise ModelFileError(f"{self.path}: truncated GGUF header ({what} at byte {self.pos} needs {size} "
                                 f"bytes; the file has {len(self.buf)})")

    def unpack(self, fmt: str, what: str = "a value") -> tuple[Any, ...]:
        fmt = self.order + fmt
        size = struct.calcsize(fmt)
        self.need(size, what)
        out = struct.unpack_from(fmt, self.buf, self.pos)
        self.pos += size
        return out

    def u32(self) -> int:
        return int(self.unpack("I")[0])

    def u64(self) -> int:
        return int(self.unpack("Q")[0])

    def raw_string(self) -> bytes:
        n = self.u64()
        self.need(n, "a string")
        out = bytes(self.buf[self.pos:self.pos + n])
        self.pos += n
        return out

    def string(self) -> str:
        try:
            return self.raw_string().decode("utf-8")
        except UnicodeDecodeError:
            raise ModelFileError(f"{self.path}: invalid UTF-8 string in the GGUF header near byte {self.pos}") from None

    def value(self, vtype: int) -> Any:
        if vtype in _SCALAR:
            return self.unpack(_SCALAR[vtype])[0]
        if vtype == _STRING:
            return self.string()
        if vtype != _ARRAY:
            raise ModelFileError(f"{self.path}: unknown GGUF metadata value type {vtype} at byte {self.pos}")
        etype, n = self.u32(), self.u64()
        if etype == _STRING:
            for _ in range(n):
                length = self.u64()
                self.pos += length  # skip the bytes; a short buffer is caught by the next read
            if self.pos > len(self.buf):
                raise ModelFileError(f"{self.path}: truncated GGUF header (string array)")
            return StringArray(n)
        if etype == _ARRAY:  # nested arrays: each element consumes at least 12 bytes, so n is bounded
            return [self.value(_ARRAY) for _ in range(n)]
        if etype not in _SCALAR:
            raise ModelFileError(f"{self.path}: unsupported GGUF array element type {etype} at byte {self.pos}")
        self.need(n * struct.calcsize(_SCALAR[etype]), f"an array of {n}")
        return list(self.unpack(f"{n}{_SCALAR[etype]}"))


def _tensor_info(c: _Cursor) -> tuple[str, tuple[int, ...], int, int]:
    name = c.string()
    n_dims = c.u32()
    if n_dims > GGML_MAX_DIMS:
        raise ModelFileError(f"{c.path}: tensor {name!r} has {n_dims} dimensions (at most {GGML_MAX_DIMS})")
    shape = tuple(int(d) for d in c.unpack(f"{n_dims}Q"))
    return name, shape, c.u32(), c.u64()


def _tensor(path: Path, name: str, shape: tuple[int, ...], type_id: int, offset: int) -> GGUFTensor:
    known = _types_by_id().get(type_id)
    if known is None:
        raise ModelFileError(f"{path}: tensor {name!r} has ggml type id {type_id}, unknown to llmsizer "
                             "(catalog/data/ggml_types.json)")
    tname, block, size = known
    numel = math.prod(shape)
    if numel % block:
        raise ModelFileError(f"{path}: tensor {name!r}: {numel} elements are not whole {tname} blocks of {block}")
    return GGUFTensor(name, tname, shape, offset, numel // block * size)


def _parse(path: Path, buf: Any) -> GGUFHeader:
    magic = bytes(buf[:4])
    if magic != b"GGUF":
        raise ModelFileError(f"{path}: not a GGUF file (starts with {magic!r}, expected b'GGUF')")
    if len(buf) < 24:
        raise ModelFileError(f"{path}: truncated GGUF file ({len(buf)} bytes)")
    order = "<" if struct.unpack_from("<I", buf, 4)[0] & 0xFFFF else ">"  # big-endian files read 0 here
    c = _Cursor(buf, path, order)
    c.pos = 4
    version = c.u32()
    if version not in (2, 3):
        raise ModelFileError(f"{path}: GGUF version {version} is not supported (2 and 3 are)")
    n_tensors, n_kv = c.u64(), c.u64()
    meta: dict[str, Any] = {}
    for _ in range(n_kv):
        key = c.string()
        if key in meta:
            raise ModelFileError(f"{path}: metadata key {key!r} appears twice")
        meta[key] = c.value(c.u32())
    infos = [_tensor_info(c) for _ in range(n_tensors)]
    align = meta.get("general.alignment", DEFAULT_ALIGNMENT)
    if not isinstance(align, int) or align <= 0 or align & (align - 1):
        raise ModelFileError(f"{path}: general.alignment {align!r} is not a power of two")
    start = -(-c.pos // align) * align
    tensors, seen = [], set()
    for name, shape, type_id, offset in infos:
        t = _tensor(path, name, shape, type_id, start + offset)
        if name in seen:
            raise ModelFileError(f"{path}: tensor {name!r} appears twice")
        if t.data_offset + t.nbytes > len(buf):
            raise ModelFileError(f"{path}: truncated: tensor {name!r} ends at byte {t.data_offset + t.nbytes} "
                                 f"but the file has {len(buf)}")
        seen.add(name)
        tensors.append(t)
    return GGUFHeader(path, version, meta, tuple(tensors), start)


def read_gguf_header(path: str | os.PathLike[str]) -> GGUFHeader:
    """Metadata and tensor table of a GGUF file (ggml docs/gguf.md), parsed in pure Python.

    The file is memory-mapped and only the header pages are touched: tensor data is never read, and
    string arrays (tokenizer vocabularies, merges) are skipped, so a 150k-token header parses in well
    under a second.
    """
    p = Path(path)
    try:
        with p.open("rb") as f:
            if os.fstat(f.fileno()).st_size == 0:
                raise ModelFileError(f"{p}: empty file (not a GGUF file)")
            with mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as buf:
                return _parse(p, buf)
    except FileNotFoundError:
        raise ModelFileError(f"{p}: no such file") from None
    except OSError as e:
        raise ModelFileError(f"{p}: cannot read ({e.__class__.__name__}: {e.strerror or e})") from None
