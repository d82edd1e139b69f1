"""GGUF fuzz: a real tiny GGUF (gguf-py writer) with bytes overwritten by hostile u32/u64 values, flipped or cut;
and synthetic headers with hostile counts, types and nested arrays."""

from __future__ import annotations

import struct
import tempfile
from functools import lru_cache
from pathlib import Path

import pytest
import readers_helpers as H
from fuzz_common import FUZZ, ends_cleanly
from hypothesis import given
from hypothesis import strategies as st

from llmsizer.readers.gguf_file import spec_from_gguf

gguf = pytest.importorskip("gguf")

HOSTILE_U64 = st.one_of(st.sampled_from([0, 1, 2, 8, 9, 12, 255, 2**16, 2**31, 2**32 - 1, 2**32, 2**62,
                                         2**63, 2**64 - 1]), st.integers(0, 2**64 - 1))


@lru_cache(maxsize=1)
def _real() -> bytes:
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "m.gguf"
        H.llama_gguf().write(path)
        return path.read_bytes()


def _run(raw: bytes) -> None:
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "m.gguf"
        path.write_bytes(raw)
        ends_cleanly(lambda: spec_from_gguf(path))


@FUZZ
@given(edits=st.lists(st.tuples(st.integers(0, 2000), st.sampled_from(["<Q", "<I", "<B"]), HOSTILE_U64),
                      min_size=1, max_size=4),
       cut=st.one_of(st.none(), st.integers(0, 4000)))
def test_real_gguf_with_hostile_fields_ends_cleanly(edits, cut):
    raw = bytearray(_real())
    header_len = min(len(raw), 2400)  # the metadata and tensor table of the tiny model
    for pos, fmt, value in edits:
        size = struct.calcsize(fmt)
        pos %= max(header_len - size, 1)
        raw[pos:pos + size] = struct.pack(fmt, value % 2 ** (8 * size))
    _run(bytes(raw[:cut] if cut is not None else raw))


def _s(b: bytes) -> bytes:
    return struct.pack("<Q", len(b)) + b


VALUE = st.recursive(
    st.one_of(st.tuples(st.sampled_from([0, 1, 2, 3, 4, 5, 6, 7, 10, 11, 12]), st.binary(min_size=8, max_size=8))
              .map(lambda t: struct.pack("<I", t[0]) + t[1]),
              st.binary(max_size=20).map(lambda b: struct.pack("<I", 8) + _s(b)),
              st.integers(0, 2**32 - 1).map(lambda t: struct.pack("<I", t))),
    lambda inner: st.tuples(st.integers(0, 12), HOSTILE_U64, st.lists(inner, max_size=3))
    .map(lambda t: struct.pack("<IIQ", 9, t[0], t[1]) + b"".join(x[4:] for x in t[2])),
    max_leaves=8)


@FUZZ
@given(n_tensors=HOSTILE_U64, n_kv=st.one_of(st.integers(0, 4), HOSTILE_U64),
       kvs=st.lists(st.tuples(st.binary(max_size=12), VALUE), max_size=4), tail=st.binary(max_size=64),
       version=st.sampled_from([2, 3, 3, 4, 0]))
def test_synthetic_gguf_headers_end_cleanly(n_tensors, n_kv, kvs, tail, version):
    body = b"".join(_s(k) + v for k, v in kvs)
    _run(b"GGUF" + struct.pack("<IQQ", version, n_tensors, n_kv) + body + tail)


@FUZZ
@given(depth=st.integers(0, 1500), inner=st.tuples(st.integers(0, 12), HOSTILE_U64), tail=st.binary(max_size=32))
def test_nested_gguf_arrays_of_any_depth_end_cleanly(depth, inner, tail):
    levels = struct.pack("<IQ", 9, 1) * depth  # (array of 1 array) repeated: ~450 deep overflowed the stack
    kv = _s(b"nested") + struct.pack("<I", 9) + levels + struct.pack("<IQ", *inner)
    _run(b"GGUF" + struct.pack("<IQQ", 3, 0, 1) + kv + tail)
