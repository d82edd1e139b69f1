"""The text of ``json.dumps(data, indent=2, default=str)``, built faster.

Python 3.11 encodes with its C encoder only when ``indent`` is None; with an indent it runs the pure-Python
generator chain of ``json.encoder._make_iterencode`` (one generator per nesting level, one yield per token), which
took 0.2-0.4 ms of a 4 KB ``--json`` answer, more than the estimate itself. This writes the same text with one
recursive function appending to a list, and the C functions the standard encoder uses for its leaves:
``encode_basestring_ascii`` for strings (``ensure_ascii``), ``int.__repr__`` and ``float.__repr__`` for numbers,
``NaN`` / ``Infinity`` for the non-finite floats (``allow_nan``). Keys are converted as ``json`` does (str as is;
float, bool, None and int keys to their JSON text; any other key is a TypeError, as ``skipkeys=False``); an object
json cannot encode goes through ``default`` (``str``). The same checks in the same order as
``_make_iterencode._iterencode``: str, None, True, False, int, float, list/tuple, dict, then ``default``.
``tests/cli/test_json_out.py`` compares it with ``json.dumps`` on generated and real answers.
"""

from __future__ import annotations

from json.encoder import encode_basestring_ascii
from typing import Any

INDENT = "  "
_ESC = encode_basestring_ascii
_CONTAINERS = frozenset((dict, list, tuple))  # never a leaf: _leaf is not asked
_INF = float("inf")


def _float(o: float) -> str:
    if o != o:
        return "NaN"
    if o == _INF:
        return "Infinity"
    if o == -_INF:
        return "-Infinity"
    return float.__repr__(o)


def _key(k: Any) -> str:
    if isinstance(k, str):
        return k
    if isinstance(k, float):
        return _float(k)
    if k is True:
        return "true"
    if k is False:
        return "false"
    if k is None:
        return "null"
    if isinstance(k, int):
        return int.__repr__(k)
    raise TypeError(f"keys must be str, int, float, bool or None, not {k.__class__.__name__}")


def _leaf(o: Any) -> str | None:
    """The text of a str, None, bool, int or float (the checks of ``_iterencode`` in its order); None otherwise."""
    t = type(o)
    if t is str:
        return encode_basestring_ascii(o)
    if t is int:
        return int.__repr__(o)
    if t is float:
        return _float(o)
    if o is None:
        return "null"
    if o is True:
        return "true"
    if o is False:
        return "false"
    if isinstance(o, str):
        return encode_basestring_ascii(o)
    if isinstance(o, int):
        return int.__repr__(o)
    if isinstance(o, float):
        return _float(o)
    return None


def _encode(o: Any, out: list[str], level: int, seen: set[int], keys: dict[Any, str]) -> None:
    # the leaves of a list or dict are written inline (the checks of ``_leaf`` in its order, the common exact types
    # first): one append per member, its separator, key and value in one string (a 5,000-option ``recommend``
    # answer has ~120,000 members); ``keys`` holds each key's text with its ``": "`` (keys repeat across members)
    text = None if type(o) in _CONTAINERS else _leaf(o)
    if text is not None:
        out.append(text)
    elif isinstance(o, (list, tuple)):
        if not o:
            out.append("[]")
            return
        _enter(o, seen)
        inner = ",\n" + INDENT * (level + 1)
        sep = "[" + inner[1:]
        for v in o:
            t = type(v)
            if t is str:
                out.append(sep + _ESC(v))
            elif t is int:
                out.append(sep + int.__repr__(v))
            elif t is float:
                out.append(sep + _float(v))
            else:
                text = _leaf(v)
                if text is not None:
                    out.append(sep + text)
                else:
                    out.append(sep)
                    _encode(v, out, level + 1, seen, keys)
            sep = inner
        out.append("\n" + INDENT * level + "]")
        seen.discard(id(o))
    elif isinstance(o, dict):
        if not o:
            out.append("{}")
            return
        _enter(o, seen)
        inner = ",\n" + INDENT * (level + 1)
        sep = "{" + inner[1:]
        for k, v in o.items():
            key = keys.get(k)  # (only str keys are kept: no other key equals one; a str subclass's text is the same)
            if key is None:
                key = _ESC(k if type(k) is str else _key(k)) + ": "
                if type(k) is str:
                    keys[k] = key
            t = type(v)
            if t is str:
                out.append(sep + key + _ESC(v))
            elif t is int:
                out.append(sep + key + int.__repr__(v))
            elif t is float:
                out.append(sep + key + _float(v))
            elif v is None:
                out.append(sep + key + "null")
            else:
                text = _leaf(v)
                if text is not None:
                    out.append(sep + key + text)
                else:
                    out.append(sep + key)
                    _encode(v, out, level + 1, seen, keys)
            sep = inner
        out.append("\n" + INDENT * level + "}")
        seen.discard(id(o))
    else:
        _enter(o, seen)
        _encode(str(o), out, level, seen, keys)
        seen.discard(id(o))


def _enter(o: Any, seen: set[int]) -> None:
    if id(o) in seen:
        raise ValueError("Circular reference detected")
    seen.add(id(o))


def dumps_indent2(data: Any) -> str:
    """``json.dumps(data, indent=2, default=str)``, the same text."""
    out: list[str] = []
    _encode(data, out, 0, set(), {})
    return "".join(out)
