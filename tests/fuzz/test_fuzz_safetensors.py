"""safetensors header fuzz: random entries (dtypes, shapes, offsets, nesting), lying length prefixes, raw bytes."""

from __future__ import annotations

import json
import struct
import tempfile
from pathlib import Path

from fuzz_common import FUZZ, HOSTILE_NUMBERS, JSON_VALUES, ends_cleanly
from hypothesis import given
from hypothesis import strategies as st

from llmsizer.readers.safetensors_header import DTYPE_BITS, read_header

COUNTS = st.one_of(st.integers(0, 64), HOSTILE_NUMBERS)
ENTRY = st.one_of(
    st.fixed_dictionaries({"dtype": st.one_of(st.sampled_from(sorted(DTYPE_BITS)), JSON_VALUES),
                           "shape": st.one_of(st.lists(COUNTS, max_size=5), JSON_VALUES),
                           "data_offsets": st.one_of(st.lists(COUNTS, min_size=2, max_size=2), JSON_VALUES)}),
    JSON_VALUES,
)
HEADER = st.dictionaries(st.text(max_size=12), ENTRY, max_size=6)


def _write(d: str, header: bytes, data: int, prefix: int | None) -> Path:
    path = Path(d) / "model.safetensors"
    n = len(header) if prefix is None else prefix
    path.write_bytes(struct.pack("<Q", n % 2**64) + header + b"\0" * data)
    return path


@FUZZ
@given(header=HEADER, data=st.integers(0, 512), prefix=st.one_of(st.none(), st.integers(0, 2**64 - 1)))
def test_random_headers_end_cleanly(header, data, prefix):
    with tempfile.TemporaryDirectory() as d:
        path = _write(d, json.dumps(header).encode(), data, prefix)
        ends_cleanly(lambda: read_header(path))


@FUZZ
@given(raw=st.one_of(st.binary(max_size=300), st.integers(0, 3000).map(lambda k: b'{"a":' + b"[" * k + b"]" * k + b"}"),
                     JSON_VALUES.map(lambda v: json.dumps(v).encode())),
       data=st.integers(0, 64))
def test_raw_header_bytes_end_cleanly(raw, data):
    with tempfile.TemporaryDirectory() as d:
        path = _write(d, raw, data, None)
        ends_cleanly(lambda: read_header(path))


@FUZZ
@given(blob=st.binary(max_size=40))
def test_files_shorter_than_a_header_end_cleanly(blob):
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "model.safetensors"
        path.write_bytes(blob)
        ends_cleanly(lambda: read_header(path))
