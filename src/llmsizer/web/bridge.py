"""JSON fields -> the CLI's own argument parser, so a web request gets the CLI's defaults, validation and messages.

A body ``{"kv_dtype": "fp8", "context": "8k", "max_context": true}`` for ``infer`` becomes the command line
``infer --kv-dtype=fp8 --context=8k --max-context`` and is parsed by the parser ``llmsizer`` itself builds
(``cli.main.build_parser``): one home for every flag, its type, range, choices and default (the workload
dataclasses). A usage error is the CLI's one line (``usage_message``), raised as a 400 naming the field instead of
exiting. Values are always passed as ``--flag=value``, so a value can never be read as another option.

The request schemas of the OpenAPI document are derived from the same parser (:func:`body_schema`).
"""

from __future__ import annotations

import argparse
import re
import threading
from collections.abc import Iterable, Mapping
from typing import Any, NoReturn

from ..catalog.hardware import names_detected
from ..cli.main import UNKNOWN_SHOWN, UNRECOGNIZED, _Parser, bounded_unrecognized, build_parser, usage_line
from ..errors import FieldError
from ..inputs import not_true_or_false, short
from ..numbers import not_a_boolean
from ..render.safe import term
from .problems import Problem

# flags a web request may not set, and why (the rest of each command's flags are fields)
DENIED = {
    "help": "the API documents itself at /api/v1/openapi.json",
    "json": "the API always answers JSON",
    "hardware_file": "it names a file on the server; the server reads no path from a request",
    "verbose": "it changes the text output only",
    "output": "it writes a file on the server; ask for the format instead",
    "quiet": "it changes the text output only",
    "force": "it overwrites a file on the server",
    "version": "GET /api/v1 gives the version",
}

FIELD_NAME = re.compile(r"^[a-z][a-z0-9_]{0,63}$")


class _UsageError(Exception):
    pass


class _WebParser(_Parser):
    """The CLI's parser, raising its one-line message instead of printing it and exiting. A field must name its
    option in full: no abbreviations (argparse would read ``hardware_fil`` as ``--hardware-file``)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs["allow_abbrev"] = False
        super().__init__(*args, **kwargs)

    def error(self, message: str) -> NoReturn:
        raise _UsageError(usage_line(self, _as_typed(message)))




def _as_typed(message: str) -> str:
    """argparse's message with the unknown options as the command line types them: the API hands argparse each field
    as one word, ``--rank=8`` (``_words``), which argparse echoes; the CLI's line for the same input says
    ``--rank 8`` (API.md "Errors": the detail is the CLI's line)."""
    if not message.startswith(UNRECOGNIZED):
        return message
    words = message[len(UNRECOGNIZED):].split(" ")
    return UNRECOGNIZED + " ".join(w.replace("=", " ", 1) if w.startswith("--") else w for w in words)

    def exit(self, status: int = 0, message: str | None = None) -> NoReturn:
        raise _UsageError((message or "").strip() or "not a request the API answers")


_PARSERS: dict[str, argparse.ArgumentParser] = {}
_LOCK = threading.Lock()


def _parser(command: str) -> argparse.ArgumentParser:
    """The top-level parser holding ``command`` (built once; parsing does not change it)."""
    with _LOCK:
        if command not in _PARSERS:
            _PARSERS[command] = build_parser([command], parser_class=_WebParser)
        return _PARSERS[command]


def subparser(command: tuple[str, ...]) -> argparse.ArgumentParser:
    """The parser of ``command`` (``("infer",)``, ``("hardware", "list")``)."""
    p = _parser(command[0])
    for word in command:
        sub = next(a for a in p._actions if isinstance(a, argparse._SubParsersAction))
        p = sub.choices[word]
    return p


def _option(key: str) -> str:
    return "--" + key.replace("_", "-")


def _words(key: str, value: Any, negatable: bool = False) -> list[str]:
    opt = _option(key)
    if value is False and negatable:  # --x / --no-x (argparse.BooleanOptionalAction): false is said, not left out
        return ["--no-" + opt[2:]]
    if value is None or value is False:
        return []  # not given: the CLI default applies (an on/off flag cannot be switched off, only left out)
    if value is True:
        return [opt]
    if isinstance(value, (str, int, float)):
        return [f"{opt}={value}"]
    if isinstance(value, list) and all(isinstance(v, (str, int, float)) and not isinstance(v, bool) for v in value):
        return [f"{opt}={v}" for v in value]
    kind = "an object" if isinstance(value, dict) else "a list of other things" if isinstance(value, list) else \
        type(value).__name__
    raise Problem(400, f"field '{key}': expected a string, a number, true/false or a list of strings, got {kind}",
                  key)


# fields whose value a JSON number would change: refused as numbers, with why
TEXT_ONLY = {"engine_version": "give the release as text, e.g. \"0.10\" (a JSON number drops trailing zeros: 0.10 "
                               "is 0.1, another release)"}


def _check_shape(key: str, value: Any, action: argparse.Action | None) -> None:
    """A list only for a repeatable option (as the CLI takes --provider twice), true only for an on/off one: before,
    ``"context": [1, 2]`` answered for context 2 (the last, as argparse keeps it) and ``"context": true`` said
    'expected one argument'. An unknown field is left to argparse's own message."""
    if action is None:
        return
    takes_value = action.nargs != 0
    if isinstance(value, list) and not isinstance(action, argparse._AppendAction):
        raise Problem(400, f"field '{key}': one value expected, got a list (a list is for a repeatable option, "
                           "such as provider)", key)
    if isinstance(value, bool) and takes_value:  # false too: before, it was left out and the default answered
        rng = getattr(action.type, "number_range", None)
        if rng is not None:  # a numeric option: the one wording of a boolean for a number, as a request file and
            # the Python API say it (numbers.not_a_boolean)
            raise Problem(400, f"field '{key}': {not_a_boolean(value, rng)}", key)
        raise Problem(400, f"field '{key}': a value expected (e.g. what --{key.replace('_', '-')} takes on the "
                           f"command line), got {str(value).lower()}; true/false are for on/off options", key)
    if not takes_value and value is not None and not isinstance(value, bool):  # before: argparse's "ignored
        # explicit argument 'yes'", a command-line message for a JSON field
        raise Problem(400, f"field '{key}': {not_true_or_false(value)}", key)


def given_twice(key: str) -> Problem:
    """The 400 of a field a request gives twice (a JSON key twice, a query parameter repeated that is no repeatable
    option): the API takes one value per field, never silently the last."""
    return Problem(400, f"field '{key}' given twice; give it once", key)


def unique_pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """``json.loads``'s ``object_pairs_hook`` for a request body: the object, refusing a key given twice
    (``given_twice``; plain ``json.loads`` keeps the last silently)."""
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise given_twice(key)
        out[key] = value
    return out


def query_fields(command: tuple[str, ...], items: Iterable[tuple[str, str]]) -> dict[str, Any]:
    """Query parameters as the fields of ``command``: a repeatable option's repeats (as the CLI takes
    --hardware-file twice) gathered into a list; any other parameter given twice refused (``given_twice``; before, the
    last one was taken)."""
    repeatable = {o[2:].replace("-", "_") for a in subparser(command)._actions
                  if isinstance(a, argparse._AppendAction) for o in a.option_strings if o.startswith("--")}
    out: dict[str, Any] = {}
    for key, value in items:
        if key not in out:
            out[key] = [value] if key in repeatable else value
        elif key in repeatable:
            out[key].append(value)
        else:
            raise given_twice(key)
    return out


def parse(command: tuple[str, ...], fields: Mapping[str, Any], *, skip: Iterable[str] = (),
          positionals: Iterable[str] = ()) -> argparse.Namespace:
    """Parse ``fields`` (a JSON body or query parameters) as the command line of ``command``; ``skip`` are fields
    the caller reads itself (the model source, the request text)."""
    skipped = set(skip)
    words: list[str] = [*command]
    given: dict[str, str] = {}  # option -> field
    actions = {o: a for a in subparser(command)._actions for o in a.option_strings}
    by_action: dict[int, str] = {}  # the field that set each option (two names of one option: refused)
    negatable = {o for o, a in actions.items() if isinstance(a, argparse.BooleanOptionalAction)}
    _refuse_many_unknown(command, fields, skipped, actions)
    for key, value in fields.items():
        if key in skipped:
            continue
        if not isinstance(key, str) or not FIELD_NAME.match(key):
            raise Problem(400, f"field {short(key, 40)}: not a field name; fields are the command's long options "
                               "with - written _ (e.g. kv_dtype for --kv-dtype)", str(key)[:64])
        if key in DENIED:
            raise Problem(400, f"field '{key}' is not accepted by the web API: {DENIED[key]}", key)
        if key in TEXT_ONLY and isinstance(value, (int, float)) and not isinstance(value, bool):
            raise Problem(400, f"field '{key}': {TEXT_ONLY[key]}, got the number {value!r}", key)
        given[_option(key)] = key
        action = actions.get(_option(key))
        if action is not None and value is not None:
            first = by_action.setdefault(id(action), key)
            if first != key:  # batch and micro_batch (--batch/--micro-batch): before, the last one was taken
                raise Problem(400, f"field '{key}': the same option as field '{first}' "
                                   f"({'/'.join(action.option_strings)}); give one of them", key)
        if isinstance(value, list) and action is not None and getattr(action.type, "comma_separated", False):
            value = ",".join(str(v) for v in value)  # --free 22GiB,11GiB: one value of comma-separated parts
        _check_shape(key, value, action)
        words += _words(key, value, _option(key) in negatable)
    words += ["--", *positionals] if positionals else []
    try:
        args = _parser(command[0]).parse_args(words)
    except _UsageError as e:
        raise Problem(400, str(e), _field(command, str(e), given)) from None  # the CLI's line (field_problem)
    for action in subparser(command)._actions:  # belt and braces: a denied option cannot have been set
        if action.dest in DENIED and getattr(args, action.dest, action.default) != action.default:
            raise Problem(400, f"field '{action.dest}' is not accepted by the web API: {DENIED[action.dest]}",
                          action.dest)
    for dest in ("fits_on", "device"):  # 'detected' is the machine the CLI runs on (catalog/hardware.py names_detected)
        if names_detected(getattr(args, dest, None)):
            raise Problem(400, f"field '{dest}': 'detected' is the machine the CLI runs on; the server does not detect "
                               "its own: run `llmsizer hardware detect -o FILE` there and send the file's text as "
                               "'hardware' (POST /api/v1/models/fits-on)", dest)
    return args


def _refuse_many_unknown(command: tuple[str, ...], fields: Mapping[str, Any], skipped: set[str],
                         actions: Mapping[str, argparse.Action]) -> None:
    """More than UNKNOWN_SHOWN unknown fields: refused before argparse reads them (a 0.5 MB body of 50,000 made
    argparse and a did-you-mean per field run past the 30 s limit, probe13 D3), with the line argparse would give,
    bounded as the CLI bounds it (cli/main.py bounded_unrecognized): the first fields, then how many more."""
    unknown = [k for k in fields if k not in skipped and not (isinstance(k, str) and _option(k) in actions)]
    # an unknown field set to null / false says no word to argparse, which would then answer as if it were absent:
    # refused here like any other unknown field, whatever their number (review13 D1: 1-3 such fields answered 200)
    silent = any(fields[k] is None or fields[k] is False for k in unknown)
    if len(unknown) <= UNKNOWN_SHOWN and not silent:
        return
    words = [w for k in unknown[:UNKNOWN_SHOWN] for v in [fields[k]] for w in (
        _option(str(k)), *([str(v)] if isinstance(v, (str, int, float)) and not isinstance(v, bool) else []))]
    more = ["-"] * max(0, len(unknown) - UNKNOWN_SHOWN)  # counted, not echoed
    message = usage_line(subparser(command), bounded_unrecognized([*words, *more]))
    raise Problem(400, message, str(unknown[0])[:64])


def field_problem(command: tuple[str, ...], e: FieldError, fields: Mapping[str, Any]) -> Problem:
    """A FieldError on the web: ``detail`` is the CLI's line for the same input (cli/main.py ``command_line``: each
    field written as the command's flag, ``--tp``), the one rule of every error the web returns (API.md "Errors");
    ``field`` is the body's own key for the field at fault (``tp`` where the body said ``tp``, ``tensor_parallel``
    where it said that; workload_args.flag_of), or the Python name of a field the body did not give; ``also``, the
    same for the other fields a cross-field error names (FieldError.fields: gpus vs tp x pp x context_parallel)."""
    from ..cli.main import command_line
    from ..cli.workload_args import typed_flag
    p = subparser(command)
    options = {_option(str(k)) for k in fields}

    def gave(dest: str) -> bool:
        return _option(dest) in options

    def key(field: str) -> str:
        flag = typed_flag(field, p, gave)
        action = next((a for a in p._actions if flag in a.option_strings), None) if flag else None
        return next((str(k) for k in fields if action is not None and _option(str(k)) in action.option_strings),
                    field)
    return Problem(400, term(command_line(e, p, gave)).splitlines()[0], key(e.field),
                   also=[key(f) for f in e.fields[1:]])  # a cross-field error's others (gpus vs tp x pp x cp)


_ARGUMENT = re.compile(r"^(?:argument |unrecognized arguments: |the following arguments are required: )(--[a-z0-9-]+)")


def _field(command: tuple[str, ...], message: str, given: dict[str, str]) -> str | None:
    """The field a usage message is about: the option it names, as the field the request used for it."""
    m = _ARGUMENT.match(message)
    if not m:
        return None
    opt = m.group(1)
    for action in subparser(command)._actions:
        if opt in action.option_strings:
            for o in action.option_strings:
                if o in given:
                    return given[o]
    return given.get(opt, opt[2:].replace("-", "_"))


# ------------------------------------------------------------------------------------------------ OpenAPI schemas

_INTEGER_TYPES = {"int", "count", "tokens", "size"}  # cli.common's converters, by the name they give themselves


def _schema(p: argparse.ArgumentParser, a: argparse.Action, aliases: list[str]) -> dict[str, Any]:
    out: dict[str, Any]
    if isinstance(a, (argparse._StoreTrueAction, argparse._StoreConstAction, argparse.BooleanOptionalAction)):
        out = {"type": "boolean"}
    elif isinstance(a, argparse._AppendAction):
        out = {"type": "array", "items": {"type": "string"}}
    elif a.choices is not None:
        out = {"type": "string", "enum": [str(c) for c in a.choices]}
    else:
        name = getattr(a.type, "__name__", "str")
        out = {"type": ["integer", "string"]} if name in _INTEGER_TYPES or a.type is int else \
            {"type": ["number", "string"]} if name in ("float", "share", "money") else {"type": "string"}
    text = p._get_formatter()._expand_help(a) if a.help else ""
    if aliases:
        text += ("; " if text else "") + "also accepted as " + ", ".join(aliases)
    if text:
        out["description"] = text
    return out


def body_schema(command: tuple[str, ...], extra: Mapping[str, Any] | None = None,
                skip: Iterable[str] = ()) -> dict[str, Any]:
    """JSON Schema of the body of ``command``: one property per long option (the CLI's help as description)."""
    p = subparser(command)
    skipped = set(skip)
    props: dict[str, Any] = dict(extra or {})
    required: list[str] = []
    for a in p._actions:
        longs = [o[2:].replace("-", "_") for o in a.option_strings if o.startswith("--")]
        if isinstance(a, argparse.BooleanOptionalAction):
            longs = longs[:1]  # false sends the --no- form
        if not longs or longs[0] in DENIED or longs[0] in skipped:
            continue
        props[longs[0]] = _schema(p, a, longs[1:])
        if a.required:
            required.append(longs[0])
    out: dict[str, Any] = {"type": "object", "properties": props}
    if required:
        out["required"] = required
    return out
