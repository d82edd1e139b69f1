"""Reading input files and writing outputs safely (issue #15): only regular files of a bounded size are read
(a named pipe would wait for a writer forever, a device would never end), YAML is composed into nodes with its
depth and tags checked, and outputs never land on a folder, a device or one of the inputs."""

from __future__ import annotations

import os
import stat
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from .errors import InputError

# YAML tags an input may carry: the ones PyYAML's safe loader resolves by itself. Any other (``!!python/name``,
# ``!custom``, ``!!binary``) is refused with its line; nothing is ever constructed from a tag.
PLAIN_TAGS = frozenset(f"tag:yaml.org,2002:{t}" for t in
                       ("str", "int", "float", "bool", "null", "map", "seq", "timestamp"))


def short(value: object, limit: int = 60) -> str:
    """repr of a value cut to ``limit`` characters: a 1 MB value must not become the message."""
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def not_true_or_false(value: object) -> str:
    """The one message of an on/off value that is not a boolean (``"yes"``, 1), after the name of its field: the
    Python API (``tf32: ...``), a request file (``settings.tf32: ...``) and the web API (``field 'tf32': ...``) say
    the same."""
    return f"must be true or false, got {short(value, 40)}"


def regular_file(path: str | Path, what: str) -> os.stat_result:
    """The stat of ``path`` when it is a regular file, else a one-line InputError: a folder, a named pipe (opening
    it waits for a writer forever) or a device (never ends) is refused before anything opens it."""
    try:
        st = os.stat(path)
    except OSError as e:
        raise InputError(f"{what} {path}: cannot read ({e.strerror})") from None
    if stat.S_ISDIR(st.st_mode):
        raise InputError(f"{what} {path}: is a folder, not a file")
    if not stat.S_ISREG(st.st_mode):
        raise InputError(f"{what} {path}: not a regular file (a pipe or a device); give a file")
    return st


def read_small_text(path: Path, what: str, limit: int) -> str:
    """The UTF-8 text of a regular file of at most ``limit`` bytes, or a one-line InputError. Pipes, devices and
    folders are refused before opening."""
    st = regular_file(path, what)
    if st.st_size > limit:
        raise InputError(f"{what} {path}: {st.st_size:,} bytes is too large (at most {limit:,})")
    try:
        with open(path, "rb") as f:
            data = f.read(limit + 1)
    except OSError as e:
        raise InputError(f"{what} {path}: cannot read ({e.strerror})") from None
    if len(data) > limit:
        raise InputError(f"{what} {path}: too large (at most {limit:,} bytes)")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise InputError(f"{what} {path}: not UTF-8 text") from None


def foreign_tag(yaml: Any, root: Any) -> tuple[Any, str] | None:
    """The first node (in file order) whose tag is not a plain YAML one and the tag as written, walked without
    recursion; None when every tag is plain. Each node is visited once: aliases make the node tree a graph, and
    nine anchors of nine aliases each ("billion laughs") would otherwise be 9^9 visits."""
    stack, bad, seen = [root], [], set()
    while stack:
        node = stack.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        if node.tag not in PLAIN_TAGS:
            bad.append(node)
        if isinstance(node, yaml.SequenceNode):
            stack.extend(node.value)
        elif isinstance(node, yaml.MappingNode):
            for k, v in node.value:
                stack += (k, v)
    if not bad:
        return None
    node = min(bad, key=lambda n: n.start_mark.index)
    return node, short(str(node.tag).replace("tag:yaml.org,2002:", "!!"))


TOO_DEEP = "nested too deeply (lists or mappings inside each other hundreds of levels down)"


def yaml_problem(source: str, error: Exception, depth_hint: str) -> tuple[int, str]:
    """(line, one line) for a YAML file PyYAML could not read: ``SOURCE:LINE: not valid YAML: PROBLEM`` where the
    error marks a place (``yaml.MarkedYAMLError``), ``SOURCE: not valid YAML: ...`` otherwise, and ``TOO_DEEP`` with
    ``depth_hint`` (what such a file holds) for a ``RecursionError``. Line 0: no line known. The request and
    inventory readers both say it this way. A ``.json`` file (JSON is YAML 1.2's subset, read by the same parser) is
    named "not valid JSON" (probe23 C1: a truncated bad.json was called YAML)."""
    if isinstance(error, RecursionError):
        return 0, f"{source}: {TOO_DEEP}; {depth_hint}"
    what = "JSON" if str(source).lower().endswith(".json") else "YAML"
    if hasattr(error, "problem_mark"):  # yaml.MarkedYAMLError (yaml is imported by the readers, not here)
        mark = error.problem_mark or getattr(error, "context_mark", None)
        line = mark.line + 1 if mark is not None else 0
        return line, (f"{source}:{line}: not valid {what}: "
                      f"{getattr(error, 'problem', None) or getattr(error, 'context', None)}")
    return 0, f"{source}: not valid {what}: {str(error).splitlines()[0]}"


def check_output(path: str | Path, inputs: Iterable[str | Path | None] = ()) -> Path:
    """``path`` as an output: not a folder, not a device or pipe, not one of ``inputs`` (compared as the same file
    on disk, so ``./req.json`` and a link to it count). Called before any work, and again by the writer. ``-`` is
    refused: it reads as standard output, where the answer goes without the option, and written as a file it made
    one named '-' beside the user's files (review13)."""
    if str(path) == "-":
        raise InputError("cannot write '-': the answer goes to standard output without this option; give a file name")
    out = Path(path).expanduser()
    try:
        st = os.stat(out)
    except OSError:
        return out  # a new file: nothing to overwrite
    if stat.S_ISDIR(st.st_mode):
        raise InputError(f"cannot write {out}: it is a folder; give a file name")
    if not stat.S_ISREG(st.st_mode):
        raise InputError(f"cannot write {out}: not a regular file (a pipe or a device)")
    for given in inputs:
        if given is None or str(given) == "-":
            continue
        try:
            same = os.path.samefile(out, Path(given).expanduser())
        except OSError:
            continue
        if same:
            raise InputError(f"cannot write {out}: it is an input of this command ({given}); it would be "
                             "overwritten; choose another file name")
    return out


# PATH_MAX on Linux; Hugging Face ids are at most 96 characters. A longer "model name" is a mistake, and the
# operating system would refuse it as a path anyway (with an OSError, not a message).
MAX_MODEL_NAME = 4096
# the most characters of a model name an error echoes (its repr, quotes included; a longer one is cut with "..."):
# every Hugging Face id (at most 96 characters) is shown whole, a 2,000-character mistake is not (probe13 D8)
SHOWN_MODEL_NAME = 100


def shown_model_name(name: str) -> str:
    """``name`` as an error about it writes it: quoted, cut to :data:`SHOWN_MODEL_NAME` characters."""
    return short(name, SHOWN_MODEL_NAME)


def check_model_ref(ref: object, what: str = "model") -> str:
    """A Python caller's model reference (``load_model``, and ``estimate_inference``/``fit`` given a name) as text:
    ``None``, a number or bytes is refused naming the argument, a path-like object read as its path, then
    :func:`check_model_name` (before, a TypeError or an OSError 'File name too long', probe13 D6)."""
    text = text_arg(ref, what, "a model name, Hub id or path (text) or a ModelSpec")
    return check_model_name(text, what)


def text_arg(ref: object, what: str, expected: str) -> str:
    """The one entry check of a Python argument that names something by text (a model, a request file's path): a
    path-like object read as its path; ``None``, a number, bytes, a dict or an empty string refused in one line
    naming the argument ``what`` and what to give (``expected``), instead of a TypeError from ``os.fspath``."""
    if isinstance(ref, os.PathLike):
        ref = os.fspath(ref)
    if not isinstance(ref, str):
        raise InputError(f"{what}: expected {expected}, got {type(ref).__name__} {short(ref, 40)}")
    if not ref.strip():
        raise InputError(f"{what}: expected {expected}, got an empty string")
    return ref


def check_model_name(name: str, what: str = "model") -> str:
    """``name`` if it can be a catalog name, Hub id or path; else a one-line InputError (never the whole name)."""
    if len(name) > MAX_MODEL_NAME:
        raise InputError(f"{what} {shown_model_name(name)}: a name of {len(name):,} characters is too long "
                         f"(at most {MAX_MODEL_NAME:,})")
    if "\x00" in name:
        raise InputError(f"{what} {shown_model_name(name)}: a name cannot contain a NUL character")
    return name
