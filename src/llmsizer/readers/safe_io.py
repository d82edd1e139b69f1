"""Opening and parsing untrusted model files within fixed limits (issue #15; docs/security.md).

Every reader opens its files through :func:`open_regular` (only regular files: a named pipe would block forever,
a device could stream without end) and parses JSON through :func:`loads_bounded`, which measures the nesting
depth and the number of values *before* ``json.loads`` builds anything: the C parser recurses once per level
(deep nesting ends in RecursionError) and allocates a Python object per value (a small file can claim many).
Each limit is far above what published models need and low enough that reaching it stays cheap.
"""

from __future__ import annotations

import json
import os
import stat
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from itertools import accumulate
from pathlib import Path
from typing import Any, BinaryIO

from ..errors import ModelFileError

# config.json files are a few kB; the largest model.safetensors.index.json (one weight_map entry per tensor of a
# ~10^5-tensor MoE checkpoint) is ~10 MB. 64 MiB leaves room and bounds the text held in memory.
MAX_JSON_FILE_BYTES = 64 << 20
# Published configs nest 3-4 levels (rope_scaling, quantization_config, text_config/vision_config), safetensors
# headers 3. 64 levels is far above both and far below the ~1,000-frame recursion of the json parser.
MAX_JSON_DEPTH = 64
# A safetensors header holds ~8 JSON values per tensor (name, dtype, shape dims, offsets and three containers):
# MAX_TENSORS (below) tensors -> ~2.1M values, ~0.4 GB once parsed. 4M bounds the parsed size under ~1 GiB.
MAX_JSON_VALUES = 4_000_000
# Tensors in one model (all its files): the largest published MoE checkpoints, one tensor per expert
# projection and scale, hold ~10^5. 2^18 = 262,144 bounds the time and memory a tensor table can take.
MAX_TENSORS = 2**18

_CHUNK = 1 << 20
_NOT_STRUCTURE = bytes(sorted(set(range(256)) - set(b"[]{},")))
_DEPTH_STEP = [0] * 256
for _c in b"[{":
    _DEPTH_STEP[_c] = 1
for _c in b"]}":
    _DEPTH_STEP[_c] = -1


def shown(value: object, limit: int = 80) -> str:
    """``repr(value)`` cut to ``limit`` characters: a name or value from an untrusted file, safe to print in an
    error line (control characters escaped by repr, no megabyte-long lines)."""
    text = repr(value)
    return text if len(text) <= limit else text[:limit - 3] + "..."


@contextmanager
def open_regular(path: Path, what: str = "file") -> Iterator[BinaryIO]:
    """``path`` opened for binary reading, refused in one line unless it is a regular file.

    Opened with O_NONBLOCK so that a named pipe without a writer cannot block the open itself; the type is
    then checked on the open descriptor (no race between a check and the open).
    """
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0))
    except FileNotFoundError:
        raise ModelFileError(f"{path}: no such file") from None
    except IsADirectoryError:
        raise ModelFileError(f"{path}: is a folder, expected a {what}") from None
    except OSError as e:
        raise ModelFileError(f"{path}: cannot open ({e.__class__.__name__}: {e.strerror or e})") from None
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            kind = ("a folder" if stat.S_ISDIR(mode) else "a named pipe" if stat.S_ISFIFO(mode)
                    else "a device" if stat.S_ISCHR(mode) or stat.S_ISBLK(mode)
                    else "a socket" if stat.S_ISSOCK(mode) else "not a regular file")
            raise ModelFileError(f"{path}: is {kind}, expected a regular {what}")
        if hasattr(os, "set_blocking"):
            os.set_blocking(fd, True)
        f = os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise
    with f:
        yield f


def read_regular(path: Path, limit: int, what: str = "file") -> bytes:
    """The bytes of a regular file of at most ``limit`` bytes (checked before reading)."""
    with open_regular(path, what) as f:
        try:
            size = os.fstat(f.fileno()).st_size
            if size > limit:
                raise ModelFileError(f"{path}: {size:,} bytes is larger than the {limit:,}-byte limit for a {what}")
            data = f.read(limit + 1)
        except OSError as e:
            raise ModelFileError(f"{path}: cannot read ({e.__class__.__name__}: {e.strerror or e})") from None
    if len(data) > limit:  # the file grew while being read
        raise ModelFileError(f"{path}: larger than the {limit:,}-byte limit for a {what}")
    return data


def json_shape(raw: bytes) -> tuple[int, int, int]:
    """(deepest nesting, upper bound on the number of values, number of objects) of JSON text, without parsing.

    Escaped backslashes and quotes are dropped first, so every remaining quote opens or closes a string; the
    text is then scanned in 1 MiB chunks, keeping only the brackets, braces and commas outside strings (C-speed
    split/translate/accumulate; memory: one chunk). Every value but the first of each container is preceded by
    a comma, so commas + containers + 1 bounds the values. For invalid JSON the figures are only estimates; the
    parser then reports the error.
    """
    if b"\\" in raw:
        raw = raw.replace(b"\\\\", b"").replace(b'\\"', b"")
    depth = level = objects = values = 0
    inside = False  # inside a string at the chunk's start
    for start in range(0, len(raw), _CHUNK):
        parts = raw[start:start + _CHUNK].split(b'"')
        structure = b"".join(parts[1::2] if inside else parts[0::2]).translate(None, _NOT_STRUCTURE)
        inside ^= (len(parts) - 1) % 2 == 1
        if structure:
            levels = list(accumulate(map(_DEPTH_STEP.__getitem__, structure), initial=level))
            depth, level = max(depth, max(levels)), levels[-1]
            n_objects = structure.count(b"{")
            objects += n_objects
            values += structure.count(b",") + structure.count(b"[") + n_objects
    return depth, values + 1, objects


def _int_or_digits(digits: str) -> int | str:
    """A JSON integer as ``json.loads`` reads it, except one past Python's int-from-text limit
    (``sys.get_int_max_str_digits``, 4,300 digits), which ``int`` refuses with a ValueError: kept as its text, so the
    field's own reader refuses it in its words (the CLI's "a value of 5,000 characters is not a number"), not as
    "the body cannot be parsed (ValueError)" (probe13 D8)."""
    limit = sys.get_int_max_str_digits()
    return digits if limit and len(digits.lstrip("-")) > limit else int(digits)


def loads_bounded(raw: bytes, where: str, what: str = "JSON", max_objects: int | None = None,
                  objects_are: str = "objects",
                  object_pairs_hook: Callable[[list[tuple[str, Any]]], Any] | None = None) -> Any:
    """``json.loads`` of untrusted bytes after checking depth and size; every failure is one ModelFileError.

    ``max_objects`` caps the number of JSON objects (a safetensors header holds one per tensor).
    ``object_pairs_hook``: ``json.loads``'s (the web API's body refuses a key given twice with it; an exception it
    raises that is no ValueError passes through as it is).
    """
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise ModelFileError(f"{where}: {what} is not UTF-8 text (byte {e.start})") from None
    depth, values, objects = json_shape(raw)
    if depth > MAX_JSON_DEPTH:
        raise ModelFileError(f"{where}: {what} nests {depth} levels deep; the limit is {MAX_JSON_DEPTH}")
    if values > MAX_JSON_VALUES:
        raise ModelFileError(f"{where}: {what} holds about {values:,} values; the limit is {MAX_JSON_VALUES:,}")
    if max_objects is not None and objects > max_objects:
        raise ModelFileError(f"{where}: {what} holds {objects:,} {objects_are}; the limit is {max_objects:,}")
    try:
        return json.loads(text, object_pairs_hook=object_pairs_hook, parse_int=_int_or_digits)
    except json.JSONDecodeError as e:
        raise ModelFileError(f"{where}: {what} is not valid JSON (line {e.lineno}, column {e.colno}: {e.msg})") from None
    except (RecursionError, ValueError) as e:  # belt and braces: the depth check above should make these impossible
        raise ModelFileError(f"{where}: {what} cannot be parsed ({e.__class__.__name__})") from None
