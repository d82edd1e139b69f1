"""Helpers shared by command modules: unit-aware argument types and output."""

from __future__ import annotations

import argparse
import os
import stat
import sys
import tempfile
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from ..errors import InputError
from ..inputs import check_model_name, check_output, short
from ..numbers import (
    AMOUNT,
    BYTES,
    HEADS,
    LAYERS,
    PARAMS,
    SECONDS,
    TOKENS,
    VOCAB,
    WIDTH,
    Range,
    check_number,
)
from ..specs import ENGINES, ModelSpec, normalize_engine
from ..units import comma_values, parse_bytes, parse_count, parse_plain_number, parse_tokens
from .json_out import dumps_indent2

# Every numeric flag goes through the one validation layer (numbers.check_number, issue #15): argparse names the
# flag ("argument --count: -1 is out of range; expected an integer in [1, 1,048,576] (...)"), exit 2.


def _argtype(parse: Callable[[str], Any], name: str, rng: Range | None = None) -> Callable[[str], Any]:
    """An argparse type reading text with ``parse``; ``rng``, the range of a numeric flag, is kept on it as
    ``number_range`` (the web bridge says a JSON true/false given for the flag with it: numbers.not_a_boolean)."""
    def convert(text: str) -> Any:
        if len(text) > 200:  # no number is written in 200 characters; keep a 1 MB value out of the message
            raise argparse.ArgumentTypeError(f"a value of {len(text):,} characters is not a number")
        try:
            return parse(text)
        except InputError as e:
            raise argparse.ArgumentTypeError(str(e)) from None
    convert.__name__ = name  # argparse names the type in some of its messages
    convert.number_range = rng  # type: ignore[attr-defined]
    return convert


argtype = _argtype  # for argparse types defined beside their flags (workload_args.py)


def int_arg(rng: Range) -> Callable[[str], int]:
    """argparse type: a whole number in ``rng`` (``--count``, ``--tp``, ``--layers``...), decimal suffixes read."""
    assert rng.integral
    # read as a request file's int field and the Python API read the same text (units.parse_count: '4k' = 4,000,
    # one message for a word), so `--grad-accumulation 4k` is `grad_accumulation: 4k`
    return _argtype(lambda t: parse_count(t, what="", rng=rng), "int", rng)


def float_arg(rng: Range) -> Callable[[str], float]:
    """argparse type: a number in ``rng`` (``--alpha``, ``--kwh-price``...), read as a request file's number field
    and the Python API read the same text (units.parse_count: '1.5k' = 1500; a fraction kept)."""
    assert not rng.integral
    return _argtype(lambda t: float(parse_count(t, what="", rng=rng)), "float", rng)


def plain_float_arg(rng: Range) -> Callable[[str], float]:
    """argparse type: a plain number in ``rng`` with no decimal suffix (``--hold-hours``: hours are not counts;
    units.parse_plain_number)."""
    assert not rng.integral
    return _argtype(lambda t: parse_plain_number(t, rng=rng), "float", rng)


def money_arg(rng: Range, period: str | None = None, rates: str = "") -> Callable[[str], float]:
    """argparse type: US dollars in ``rng`` ('50', '$50', '$20k', '1.5M USD'; with ``period`` "h" also '$2/h'),
    read by the request files' money reader (request/quantities.py ``parse_money``), so `--max-cost '$20k'` is
    `budget.total: $20k`; ``rates``: where a rate given to a total flag goes (parse_money's words)."""
    def read(text: str) -> float:
        from ..request.quantities import parse_money
        return parse_money(text, period, rng, rates)
    return _argtype(read, "money", rng)


def seconds_arg(rng: Range) -> Callable[[str], float]:
    """argparse type: seconds, a plain number ('1800') or a duration with its unit ('30 min', '2h': the request
    file's reader, request/quantities.py parse_duration); a count's suffix is no unit of time ('5m' is not 5 x 10^6
    seconds, nor 5 minutes: 'm' could be months, and parse_duration says so)."""
    def read(text: str) -> float:
        s = text.strip()
        if s[-1:].isalpha():
            from ..request.quantities import parse_duration
            return float(check_number(parse_duration(s), "", rng))
        return float(parse_count(s, what="", rng=rng))
    return _argtype(read, "seconds", rng)


def bytes_in(rng: Range) -> Callable[[str], int]:
    """argparse type: a size ('24GiB', '80GB') in ``rng``."""
    return _argtype(lambda t: parse_bytes(t, what="", rng=rng), "size", rng)


def count_in(rng: Range) -> Callable[[str], int]:
    """argparse type: a count ('7B', '32k', '8') in ``rng``."""
    return _argtype(lambda t: parse_count(t, what="", rng=rng), "count", rng)


def tokens_in(rng: Range) -> Callable[[str], int]:
    """argparse type: a token length ('8k' = 8192) in ``rng``."""
    return _argtype(lambda t: parse_tokens(t, what="", rng=rng), "tokens", rng)


bytes_arg = bytes_in(BYTES)


def _seconds(text: str) -> float:
    """A duration read as request files read one (request/quantities.py ``parse_duration``: '3 days', '12h',
    '90 min'; 'm' refused as minutes-or-months), or a bare number of seconds as the flag's help states ('0.5')."""
    try:
        value = float(text.strip())
    except ValueError:
        from ..request.quantities import parse_duration  # only the duration flags need it

        return parse_duration(text)
    if not value > 0:
        raise InputError(f"duration {short(text)} must be positive")
    return float(check_number(value, "", SECONDS))


duration_arg = _argtype(_seconds, "duration")


def share_in(rng: Range) -> Callable[[str], float]:
    """argparse type: a share ('0.1' or '10%') in ``rng``, read as request files read one (request/quantities.py
    ``parse_share``: ``--headroom 10%`` and a request's ``headroom: 10%`` are the same number)."""
    def parse(text: str) -> float:
        from ..units import parse_share

        return parse_share(text, rng)

    return _argtype(parse, "share", rng)


def needs_subcommand(p: argparse.ArgumentParser) -> Callable[[argparse.Namespace], int]:
    """The ``func`` of a command group run without its subcommand (`llmsizer request`): one line naming the
    subcommands, exit 2, as any other bad input (it printed the group's help on standard output)."""
    def refuse(_: argparse.Namespace) -> int:
        names = [n for a in p._actions if isinstance(a, argparse._SubParsersAction) for n in a.choices]
        raise InputError(f"`{p.prog}` needs a subcommand: {', '.join(names)} (see `{p.prog} --help`)")
    return refuse


def list_of(parse: Callable[[str], Any], name: str, most: int = 128) -> Callable[[str], tuple[Any, ...]]:
    """argparse type: comma-separated values, each read by ``parse`` (``--tensor-split 3,1``, ``--free 22GiB,10GiB``)."""
    def convert(text: str) -> tuple[Any, ...]:
        try:  # the one splitting rule (units.comma_values; fit_llamacpp(free="22GiB,10GiB") reads it too)
            parts = comma_values(text, most=most)
        except InputError as e:  # argparse adds the flag's name
            raise argparse.ArgumentTypeError(str(e)) from None
        return tuple(parse(p) for p in parts)
    convert.__name__ = name
    convert.comma_separated = True  # type: ignore[attr-defined]  # the web API joins a JSON list with commas
    return convert
count_arg = count_in(AMOUNT)


def exit_code(fits: bool | None) -> int:
    """The exit-code convention (README "Exit codes"): 0 answered and it fits / holds (or nothing was checked),
    1 answered and it does not fit or a stated constraint fails; bad input exits 2 in main()."""
    return 1 if fits is False else 0


def engine_arg(text: str) -> str:
    """--engine value: 'llama.cpp' / 'llama-cpp' / 'LlamaCpp' -> 'llamacpp' (argparse's choices then check it)."""
    return normalize_engine(text)


def accept_engine_aliases(parser: argparse.ArgumentParser) -> None:
    """Give every option of ``parser`` (and its sub-commands) whose choices are the engines the
    :func:`engine_arg` normalizer, so each command's ``--engine`` accepts the aliases without its own code."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in dict.fromkeys(action.choices.values()):
                accept_engine_aliases(sub)
        elif action.choices is not None and tuple(action.choices) == ENGINES and action.type is None:
            action.type = engine_arg


def json_text(data: Any) -> str:
    """The text of every ``--json`` answer (and of the web API's answers: the same bytes):
    ``json.dumps(data, indent=2, default=str)`` plus a newline, built by ``json_out`` (about 2x faster)."""
    return dumps_indent2(data) + "\n"


def emit_json(data: Any) -> None:
    # one write of the whole text: json.dump streams one write per token (a 5,000-option recommend made
    # 500,000 writes, about 1 s), the text is the same
    sys.stdout.write(json_text(data))


tokens_arg = tokens_in(TOKENS)


def add_model_args(p: argparse.ArgumentParser) -> None:
    """MODEL (catalog name/id, config.json, folder, .gguf) or manual fields for an unknown model."""
    p.add_argument("model", nargs="?", help="catalog name or id, config.json, model folder or .gguf file "
                   "(omit and give --params/--layers/... for a model llmsizer does not know)")
    p.add_argument("--hub", action="store_true", help="fetch config.json from the Hugging Face Hub if not local")
    g = p.add_argument_group("manual model (Llama-style decoder)")
    g.add_argument("--params", type=count_in(PARAMS), help="parameter count, e.g. 7B (solves the MLP width)")
    g.add_argument("--layers", type=int_arg(LAYERS))
    g.add_argument("--hidden", type=int_arg(WIDTH))
    g.add_argument("--heads", type=int_arg(HEADS))
    g.add_argument("--kv-heads", type=int_arg(HEADS))
    g.add_argument("--head-dim", type=int_arg(WIDTH))
    g.add_argument("--intermediate", type=int_arg(WIDTH))
    g.add_argument("--vocab", type=int_arg(VOCAB))
    g.add_argument("--tied", action="store_true", help="tied input/output embeddings")


def resolve_model(args: argparse.Namespace, load: Callable[..., ModelSpec] | None = None) -> ModelSpec:
    """The model the command names: MODEL through ``load`` (None: ``models.load_model``, a path, a catalog name or a
    Hub id, imported here and not with the parser: the catalog and its readers are no part of `--help`; the web API
    passes its own loader, which never opens a server-side path), or the manual fields."""
    if load is None:
        from ..models import load_model
        load = load_model
    manual = any(getattr(args, k) is not None for k in ("params", "layers", "hidden", "heads"))
    if args.model and manual:
        raise InputError("give a MODEL or manual fields (--params/--layers/...), not both")
    if args.model:
        try:
            return load(check_model_name(args.model), hub=args.hub)
        except OSError as e:  # a path the operating system refuses (a component over 255 bytes...)
            raise InputError(f"model {short(args.model, 40)}: cannot read ({e.strerror or e})") from None
    if not manual:
        raise InputError("give a MODEL (see `llmsizer models`) or manual fields (--params 7B --layers 32 ...)")
    from ..readers.manual import spec_from_manual  # only a model given by its sizes

    return spec_from_manual(params=args.params, layers=args.layers, hidden=args.hidden, heads=args.heads,
                            kv_heads=args.kv_heads, head_dim=args.head_dim, intermediate=args.intermediate,
                            vocab=args.vocab, tied=args.tied)


NEW_FILE_MODE = 0o666  # what open() asks for a new file; the process umask takes its bits away (0644 under 022)


def _umask() -> int:
    mask = os.umask(0o022)  # the only portable way to read it is to set it; put it straight back
    os.umask(mask)
    return mask


def refuse_overwrite(path: str | Path | None, force: bool, why: str = "") -> None:
    """The one rule of every file a command writes (`-o`, `--svg`, `--html`, `--markdown`): an existing ``path`` is
    refused without ``--force`` (a report may have been renamed over a file the user keeps; `request new`,
    `hardware detect` and `capacity import` refused before the others did); ``why`` says what may be lost."""
    if path and Path(path).exists() and not force:
        raise InputError(f"{path} exists{f' ({why})' if why else ''}; use --force to overwrite it")


def check_output_file(path: str | Path, inputs: Iterable[str | Path | None] = (), *, force: bool,
                      why: str = "") -> Path:
    """``path`` as a command's output, checked before any work: not a folder, device or input of the command
    (inputs.check_output), and not an existing file without ``--force`` (refuse_overwrite)."""
    out = check_output(path, inputs)
    refuse_overwrite(out, force, why)
    return out


def add_force(p: Any, what: str = "the output file") -> None:
    """The --force flag of a command that writes a file (refuse_overwrite)."""
    p.add_argument("--force", action="store_true", help=f"overwrite {what} when it exists")


def write_atomic(path: Path, text: str, inputs: Iterable[str | Path | None] = (), *, force: bool,
                 why: str = "") -> None:
    """Write ``text`` to ``path`` through a temporary file in the same folder, renamed when complete: a failure
    leaves nothing half-written. The file gets the permissions a plain ``open()`` would give it (an existing
    file keeps its own; a new one NEW_FILE_MODE less the umask), not the private 0600 of a temporary file.
    A folder, a device or pipe, or one of the command's ``inputs`` is refused (inputs.check_output), and an
    existing file without ``force`` (refuse_overwrite)."""
    path = check_output_file(path, inputs, force=force, why=why)
    folder = path.parent if str(path.parent) else Path(".")
    if not folder.is_dir():
        raise InputError(f"cannot write {path}: folder {folder} does not exist")
    try:
        mode = stat.S_IMODE(path.stat().st_mode)
    except OSError:
        mode = NEW_FILE_MODE & ~_umask()
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name[:100]}.", suffix=".tmp", dir=folder)
    except OSError as e:
        raise InputError(f"cannot write {path}: {e.strerror or e}") from None
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except OSError as e:
        Path(tmp).unlink(missing_ok=True)
        raise InputError(f"cannot write {path}: {e.strerror or e}") from None
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
