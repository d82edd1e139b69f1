"""safe_io.json_shape (the pre-parse depth / size scan) against an independent recursive walk of the parsed value:
exact depth and object count, and an upper bound on the values, for any JSON text (strings full of quotes,
backslashes, brackets and non-ASCII), in chunks or not."""

from __future__ import annotations

import json

from fuzz_common import FUZZ
from hypothesis import given
from hypothesis import strategies as st

from llmsizer.readers import safe_io

TEXT = st.text(alphabet=st.sampled_from(list('"\\[]{},:a é\n\x00')), max_size=8)
VALUES = st.recursive(st.one_of(TEXT, st.integers(), st.booleans(), st.none()),
                      lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(TEXT, inner, max_size=4)),
                      max_leaves=30)


def _walk(v) -> tuple[int, int, int]:
    """(depth, values, objects) by recursion over the parsed value."""
    if isinstance(v, (list, dict)):
        kids = [_walk(x) for x in (v.values() if isinstance(v, dict) else v)]
        return (1 + max((k[0] for k in kids), default=0), 1 + sum(k[1] for k in kids),
                isinstance(v, dict) + sum(k[2] for k in kids))
    return 0, 1, 0


@FUZZ
@given(value=VALUES, ascii_only=st.booleans(), chunk=st.sampled_from([1, 2, 3, 7, 1 << 20]))
def test_json_shape_matches_a_recursive_walk(value, ascii_only, chunk):
    raw = json.dumps(value, ensure_ascii=ascii_only).encode()
    old, safe_io._CHUNK = safe_io._CHUNK, chunk  # small chunks: strings and escapes cross chunk boundaries
    try:
        depth, values, objects = safe_io.json_shape(raw)
    finally:
        safe_io._CHUNK = old
    want_depth, want_values, want_objects = _walk(value)
    assert (depth, objects) == (want_depth, want_objects)
    assert values >= want_values
