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
from .safe_io import MAX_TENSORS, open_regular, shown


@dataclass(frozen=True)
class StringArray:
    """A metadata array of strings, counted but not decoded (tokenizer lists hold ~10^5 entries)."""

    count: int


@dataclass(frozen=True)
class LongArray:
    """A metadata array of numbers longer than MAX_INLINE_ARRAY (token scores, token types): counted, skipped."""

    count: int
    element_type: int


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

# Limits on what a GGUF header may claim (docs/security.md). Each count is also checked against the bytes left in
# the file before anything proportional to it is built, so a small file cannot make the parser loop or allocate.
MAX_METADATA_KEYS = 65_536  # published GGUFs carry ~20-60 keys
MAX_KEY_BYTES = 65_535  # ggml docs/gguf.md: a key is at most 2^16 - 1 bytes
MAX_TENSOR_NAME_BYTES = 64  # ggml docs/gguf.md: a tensor name is at most 64 bytes (GGML_MAX_NAME)
MAX_STRING_BYTES = 16 << 20  # one metadata string; chat templates, the longest, are tens of kB
MAX_ARRAY_LEN = 2**24  # one metadata array; tokenizer lists (the longest) hold <= 2^18 entries (numbers.VOCAB: 2^24)
MAX_STRING_ARRAY_LEN = 2**21  # tokenizer lists (vocabulary, merges) hold <= ~2^19; each costs a Python-level step
MAX_INLINE_ARRAY = 65_536  # longer numeric arrays are counted and skipped (LongArray), not decoded into Python lists
MAX_INLINE_VALUES = 2**20  # numbers decoded from all metadata arrays together (per-layer arrays need ~10^2 each)
MAX_ARRAY_DEPTH = 8  # arrays of arrays; published GGUFs hold flat arrays only
_MIN_KV_BYTES = 8 + 4 + 1  # key length, value type, smallest value (a u8/i8/bool; an empty key)
_MIN_TENSOR_INFO_BYTES = 8 + 4 + 4 + 8  # name length, n_dims (0), type, offset


@lru_cache(maxsize=1)
def _types_by_id() -> dict[int, tuple[str, int, int]]:
    """ggml type id -> (name, elements per block, bytes per block), from catalog/data/ggml_types.json."""
    return {int(v["id"]): (k, int(v["block"]), int(v["bytes"])) for k, v in ggml_types().items()}


class _Cursor:
    """Sequential little/big-endian reads over a memory map; reading past the end means truncation."""

    def __init__(self, buf: Any, path: Path, order: str) -> None:
        self.buf, self.path, self.order, self.pos = buf, path, order, 0
        self.inline_budget = MAX_INLINE_VALUES

    def left(self) -> int:
        return len(self.buf) - self.pos

    def count(self, n: int, limit: int, min_bytes: int, what: str) -> int:
        """A claimed number of records, checked against its limit and the bytes left before anything is built."""
        if n > limit:
            raise ModelFileError(f"{self.path}: GGUF header claims {n:,} {what} at byte {self.pos}; the limit is "
                                 f"{limit:,}")
        if n * min_bytes > self.left():
            raise ModelFileError(f"{self.path}: truncated GGUF header ({n:,} {what} at byte {self.pos} need at least "
                                 f"{n * min_bytes:,} bytes; {self.left():,} are left)")
        return n

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

    def raw_string(self, limit: int = MAX_STRING_BYTES, what: str = "a string") -> bytes:
        n = self.u64()
        if n > limit:
            raise ModelFileError(f"{self.path}: {what} of {n:,} bytes at byte {self.pos}; the limit is {limit:,}")
        self.need(n, what)
        out = bytes(self.buf[self.pos:self.pos + n])
        self.pos += n
        return out

    def string(self, limit: int = MAX_STRING_BYTES, what: str = "a string") -> str:
        try:
            return self.raw_string(limit, what).decode("utf-8")
        except UnicodeDecodeError:
            raise ModelFileError(f"{self.path}: invalid UTF-8 string in the GGUF header near byte {self.pos}") from None

    def value(self, vtype: int, depth: int = 0) -> Any:
        if vtype in _SCALAR:
            return self.unpack(_SCALAR[vtype])[0]
        if vtype == _STRING:
            return self.string()
        if vtype != _ARRAY:
            raise ModelFileError(f"{self.path}: unknown GGUF metadata value type {vtype} at byte {self.pos}")
        if depth >= MAX_ARRAY_DEPTH:
            raise ModelFileError(f"{self.path}: GGUF arrays nested more than {MAX_ARRAY_DEPTH} deep at byte {self.pos}")
        etype, n = self.u32(), self.u64()
        if etype == _STRING:
            return self._skip_strings(self.count(n, MAX_STRING_ARRAY_LEN, 8, "strings in an array"))
        if etype == _ARRAY:  # nested arrays: decoded (each element takes >= 12 bytes), bounded by the budget
            self.count(n, MAX_INLINE_ARRAY, 12, "nested arrays")
            self.spend(n)
            return [self.value(_ARRAY, depth + 1) for _ in range(n)]
        if etype not in _SCALAR:
            raise ModelFileError(f"{self.path}: unsupported GGUF array element type {etype} at byte {self.pos}")
        size = struct.calcsize(self.order + _SCALAR[etype])
        self.count(n, MAX_ARRAY_LEN, size, "array entries")
        if n > MAX_INLINE_ARRAY or n > self.inline_budget:
            self.pos += n * size  # counted, not decoded: nothing proportional to n is built
            return LongArray(n, etype)
        self.spend(n)
        return list(self.unpack(f"{n}{_SCALAR[etype]}"))

    def spend(self, n: int) -> None:
        self.inline_budget -= n
        if self.inline_budget < 0:
            raise ModelFileError(f"{self.path}: GGUF metadata arrays hold more than {MAX_INLINE_VALUES:,} values to "
                                 f"decode (the limit) at byte {self.pos}")

    def _skip_strings(self, n: int) -> StringArray:
        """Skip an array of ``n`` strings (tokenizer lists), reading only their lengths."""
        buf, pos, end = self.buf, self.pos, len(self.buf)
        unpack = struct.Struct(self.order + "Q").unpack_from
        for _ in range(n):
            if pos + 8 > end:
                break
            pos += 8 + unpack(buf, pos)[0]  # a short or lying length is caught below, or by the next read
        else:
            if pos <= end:
                self.pos = pos
                return StringArray(n)
        raise ModelFileError(f"{self.path}: truncated GGUF header (string array at byte {self.pos})")


def _tensor_info(c: _Cursor) -> tuple[str, tuple[int, ...], int, int]:
    name = c.string(MAX_TENSOR_NAME_BYTES, "a tensor name")
    n_dims = c.u32()
    if n_dims > GGML_MAX_DIMS:
        raise ModelFileError(f"{c.path}: tensor {shown(name)} has {n_dims} dimensions (at most {GGML_MAX_DIMS})")
    shape = tuple(int(d) for d in c.unpack(f"{n_dims}Q"))
    return name, shape, c.u32(), c.u64()


def _tensor(path: Path, name: str, shape: tuple[int, ...], type_id: int, offset: int) -> GGUFTensor:
    known = _types_by_id().get(type_id)
    if known is None:
        raise ModelFileError(f"{path}: tensor {shown(name)} has ggml type id {type_id}, unknown to llmsizer "
                             "(catalog/data/ggml_types.json)")
    tname, block, size = known
    numel = math.prod(shape)
    if numel % block:
        raise ModelFileError(f"{path}: tensor {shown(name)}: {numel} elements are not whole {tname} blocks of {block}")
    return GGUFTensor(name, tname, shape, offset, numel // block * size)


def _parse(path: Path, buf: Any, file_size: int | None = None) -> GGUFHeader:
    """The header in ``buf``; each tensor's data must end within ``file_size`` (default: ``buf`` is the whole file)."""
    size = len(buf) if file_size is None else file_size
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
    c.count(n_kv, MAX_METADATA_KEYS, _MIN_KV_BYTES, "metadata keys")
    meta: dict[str, Any] = {}
    for _ in range(n_kv):
        key = c.string(MAX_KEY_BYTES, "a metadata key")
        if key in meta:
            raise ModelFileError(f"{path}: metadata key {shown(key)} appears twice")
        meta[key] = c.value(c.u32())
    c.count(n_tensors, MAX_TENSORS, _MIN_TENSOR_INFO_BYTES, "tensors")
    infos = [_tensor_info(c) for _ in range(n_tensors)]
    align = meta.get("general.alignment", DEFAULT_ALIGNMENT)
    if not isinstance(align, int) or align <= 0 or align & (align - 1):
        raise ModelFileError(f"{path}: general.alignment {shown(align)} is not a power of two")
    start = -(-c.pos // align) * align
    tensors, seen = [], set()
    for name, shape, type_id, offset in infos:
        t = _tensor(path, name, shape, type_id, start + offset)
        if name in seen:
            raise ModelFileError(f"{path}: tensor {shown(name)} appears twice")
        if t.data_offset + t.nbytes > size:
            raise ModelFileError(f"{path}: truncated: tensor {shown(name)} ends at byte {t.data_offset + t.nbytes} "
                                 f"but the file has {size}")
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
        with open_regular(p, "GGUF file") as f:
            if os.fstat(f.fileno()).st_size == 0:
                raise ModelFileError(f"{p}: empty file (not a GGUF file)")
            with mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as buf:
                return _parse(p, buf)
    except FileNotFoundError:
        raise ModelFileError(f"{p}: no such file") from None
    except OSError as e:
        raise ModelFileError(f"{p}: cannot read ({e.__class__.__name__}: {e.strerror or e})") from None


def parse_gguf_header(data: bytes, name: str, file_size: int) -> GGUFHeader:
    """Metadata and tensor table from the first bytes of a GGUF file of ``file_size`` bytes (the web page sends
    only these, read in the browser with ``File.slice``): the same parser as :func:`read_gguf_header`, with the
    tensor table checked against the whole file's size. ``name`` labels the file in messages; nothing is opened.
    A header longer than ``data`` is reported as truncated."""
    p = Path(name)
    if not data:
        raise ModelFileError(f"{p}: empty file (not a GGUF file)")
    if len(data) > file_size:
        raise ModelFileError(f"{p}: {len(data):,} bytes sent but the file size is given as {file_size:,}")
    return _parse(p, memoryview(data), file_size)
