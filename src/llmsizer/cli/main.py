"""Entry point: builds the parser from the command modules and turns library errors into one line."""

from __future__ import annotations

import argparse
import importlib
import io
import os
import re
import sys
import threading
import weakref
from collections.abc import Callable, Sequence
from typing import Any, NoReturn

from ..errors import FieldError, LlmsizerError
from .commands import COMMAND_HELP, COMMANDS

EPILOG = """examples:
  llmsizer plan examples/lora-finetune-and-chat.yaml -o report.html
  llmsizer request new -o my-request.yaml
  llmsizer models qwen
  llmsizer inspect meta-llama/Llama-3.1-8B
  llmsizer infer llama-3.1-8b --weights q4_k_m --engine llamacpp --context 8192
  llmsizer infer qwen2.5-7b --engine vllm --memory 24GiB --context 32k --concurrency 2 --json
  llmsizer train llama-3.1-8b --method lora --batch 4 --seq 4096 --grad-checkpointing full
  llmsizer fit llama-3.3-70b-instruct --device h100-sxm --count 4 --engine vllm
  llmsizer recommend llama-3.1-8b --context 8k --concurrency 8
  llmsizer measure infer qwen2.5-0.5b --context 4096
  llmsizer validate
  eval "$(llmsizer completion bash)"

Bad input (an unknown command, option, value or model name; an unreadable request) prints one line per problem on
stderr, with "did you mean" when a known name is close, and exits 2. A request path of - reads standard input.
"""


_INVALID_CHOICE = re.compile(r"invalid choice: (?P<value>'[^']*'|\"[^\"]*\") \(choose from (?P<choices>.*)\)$")
UNRECOGNIZED = "unrecognized arguments: "  # argparse's words (parse_args); web/bridge.py reads them
UNKNOWN_SHOWN = 3  # unknown options an error line names (and says how many more): 50,000 unknown web fields made a
# 209 KB "one line" and 50,000 did-you-mean searches (probe13 D3)
ECHO_CHARS = 40  # characters of one unknown word echoed (a 900 kB value is not repeated back)


def bounded_unrecognized(words: Sequence[str]) -> str:
    """argparse's "unrecognized arguments: ..." for ``words`` (the unknown words as typed), bounded: the words up to
    the first UNKNOWN_SHOWN options, each cut to ECHO_CHARS characters with "...", then "(and N more)" counting the
    options left out. Applied to its own output it changes nothing (the web API builds the line before argparse)."""
    shown: list[str] = []
    options = 0
    for i, w in enumerate(words):
        if w.startswith("-"):
            options += 1
            if options > UNKNOWN_SHOWN:
                more = sum(1 for x in words[i:] if x.startswith("-"))
                return UNRECOGNIZED + " ".join(shown) + f" (and {more:,} more)"
        shown.append(w if len(w) <= ECHO_CHARS else w[:ECHO_CHARS - 3] + "...")
    return UNRECOGNIZED + " ".join(shown)


def _option_strings(parser: argparse.ArgumentParser) -> list[str]:
    """Every long option of ``parser`` and of the sub-command parsers registered under it."""
    out: list[str] = []
    for action in parser._actions:
        out += [o for o in action.option_strings if o.startswith("--")]
        if isinstance(action, argparse._SubParsersAction):
            for sub in dict.fromkeys(action.choices.values()):
                out += _option_strings(sub)
    return list(dict.fromkeys(out))


def _invoked(parser: argparse.ArgumentParser, argv: Sequence[str] | None) -> argparse.ArgumentParser:
    """The (sub-)command parser ``argv`` names (``hardware list`` -> its parser), or ``parser``: "did you mean"
    suggests only its options (before, ``models --images`` got '--layers', an option of ``inspect``)."""
    words = [a for a in argv or () if not a.startswith("-")]
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction) and words and words[0] in action.choices:
            return _invoked(action.choices[words[0]], words[1:])
    return parser


def _prefix_or_close(word: str, options: list[str]) -> list[str]:
    """The option ``word`` is a prefix of (every one, when several start with it: '--con' is '--concurrency' or
    '--context'), else the closest spelling (at most one)."""
    from ..suggest import close_matches
    started = [o for o in options if o.startswith(word)]
    return started or close_matches(word, options, n=1)


def _with_suggestion(parser: argparse.ArgumentParser, message: str) -> str:
    """argparse's message plus "did you mean" for a mistyped sub-command, choice or option."""
    import ast

    from ..suggest import did_you_mean
    m = _INVALID_CHOICE.search(message)
    if m:
        try:
            value = ast.literal_eval(m["value"])
            choices = [str(c) for c in ast.literal_eval(f"[{m['choices']}]")]
        except (ValueError, SyntaxError):
            return message
        head = message[:m.end("value")]
        return head + did_you_mean(str(value), choices) + message[m.end("value"):]
    if message.startswith(UNRECOGNIZED):
        message = bounded_unrecognized(message[len(UNRECOGNIZED):].split(" "))
        argv = getattr(parser, "argv", None)
        invoked = _invoked(parser, argv)
        options = _option_strings(invoked)
        words = [w.split("=", 1)[0] for w in message[len(UNRECOGNIZED):].split() if w.startswith("--")]
        training = _training_words(words) if _serving(invoked, argv) else []
        if training:  # `infer --method lora`: not a misspelt serving option but another question's (no "--metric")
            more = training[1:]
            also = f" (so {'is' if len(more) == 1 else 'are'} {', '.join(more)})" if more else ""
            return message + f"; {training[0]} is {training_elsewhere(training[0])}{also}"
        searched = _searched_by_recommend(words, options) if invoked.prog.endswith(" recommend") else []
        if searched:  # `recommend --device h100` (or `--devic`): the search chooses these; one device is fit's
            # question (no "did you mean '--deadline'" / '--metric')
            return message + (f"; recommend searches the catalog's devices, counts and memory itself (no "
                              f"{', '.join(searched)}): to size one, `llmsizer fit MODEL --device NAME` (--count N, "
                              "--memory SIZE)")
        if invoked.prog.endswith(" models") and _names_rate(words, options):
            # `models --fits-on h100 --request-rate 5` (probe33 D6): a rate is recommend's and fit's question
            return message + ("; models --fits-on takes sequences at once (--concurrency), not a request rate: "
                              "`llmsizer recommend MODEL --request-rate R` (or `llmsizer fit MODEL --device NAME "
                              "--request-rate R`) sizes one")
        # `train --lora 8`: how a training command says it (not '--lora-dropout', the option it is a prefix of); else
        # the one option a typed prefix starts (the one argparse's abbreviation took), else the closest spelling
        spelt = _training_spelling(words) if "--method" in options else {}
        hits = {w: spelt.get(w) or " or ".join(map(repr, h)) for w in words
                for h in [[] if w in spelt else _prefix_or_close(w, options)] if h or w in spelt}
        if len(hits) == 1:
            return message + f"; did you mean {next(iter(hits.values()))}?"
        if hits:
            return message + "; did you mean " + ", ".join(f"{h} for {w!r}" for w, h in hits.items()) + "?"
    return message


# the target options of fit and infer that recommend's search chooses itself (its candidates)
SEARCHED_BY_RECOMMEND = ("--device", "--count", "--memory")


def _searched_by_recommend(words: list[str], options: list[str]) -> list[str]:
    """The SEARCHED_BY_RECOMMEND options the unknown ``words`` mean: each one's own, or the one it is a prefix or a
    close spelling of among recommend's options and these (``--devic`` is --device, not '--metric')."""
    out = []
    for w in words:
        hits = [w] if w in SEARCHED_BY_RECOMMEND else _prefix_or_close(w, [*options, *SEARCHED_BY_RECOMMEND])
        if hits and all(h in SEARCHED_BY_RECOMMEND for h in hits):
            out += hits
    return list(dict.fromkeys(out))


def _names_rate(words: list[str], options: list[str]) -> bool:
    """Whether one of the unknown ``words`` is ``--request-rate`` (itself, or a prefix or close spelling of it among
    the command's options and it), on a command that takes no rate (``models --fits-on``)."""
    return any(w == "--request-rate" or _prefix_or_close(w, [*options, "--request-rate"]) == ["--request-rate"]
               for w in words)


def _serving(parser: argparse.ArgumentParser, argv: Sequence[str] | None) -> bool:
    """Whether ``parser`` (the invoked command's) asks a serving question: it takes the inference workload
    (workload_args.add_inference_args: infer, fit, recommend) and, where it also sizes training, --train is not
    given. Only there is a training option another question's (`train --lora`, `hardware list --rank` are not)."""
    if not any(g.title == "inference workload" for g in parser._action_groups):
        return False
    takes_train = any("--train" in a.option_strings for a in parser._actions)
    return not (takes_train and "--train" in (argv or ()))


def training_elsewhere(option: str) -> str:
    """Where the training word ``option`` is asked instead: InferenceWorkload.ELSEWHERE's text for its field (the one
    table the Python API's refusal reads), imported only when a command line holds an unknown option."""
    from ..specs.workload import InferenceWorkload
    return InferenceWorkload.ELSEWHERE[_training_fields([option])[option]]


def _training_spelling(options: list[str]) -> dict[str, str]:
    """The unknown ``options`` a training command spells otherwise (``--lora``: --method lora --rank N;
    specs/workload.py TRAINING_SPELLING) -> that spelling."""
    from ..specs.workload import TRAINING_SPELLING
    return {o: f"'{TRAINING_SPELLING[f]}'" for o, f in _training_fields(options).items() if f in TRAINING_SPELLING}


def _training_words(options: list[str]) -> list[str]:
    """The unknown ``options`` that name a training field (InferenceWorkload.ELSEWHERE)."""
    from ..specs.workload import InferenceWorkload
    field = _training_fields(options)
    return [o for o in options if field[o] in InferenceWorkload.ELSEWHERE]


def _training_fields(options: list[str]) -> dict[str, str]:
    """Each option -> the training field it names: its field spelling (--micro-batch is micro_batch) or as `train`
    spells it (--batch, --seq: the dest of train's flag); else the option's own words."""
    from ..specs.workload import InferenceWorkload
    field = {o: o[2:].replace("-", "_") for o in options}
    if not all(f in InferenceWorkload.ELSEWHERE for f in field.values()):  # train's own spellings (an error path)
        sub = next(a for a in build_parser(["train"])._actions if isinstance(a, argparse._SubParsersAction))
        dest = {o: a.dest for a in sub.choices["train"]._actions for o in a.option_strings}
        field = {o: f if f in InferenceWorkload.ELSEWHERE else dest.get(o, f) for o, f in field.items()}
    return field


def usage_line(parser: argparse.ArgumentParser, message: str) -> str:
    """A usage error's one line, as the web API answers it in its 4xx detail: the CLI's line (usage_message) without
    "(see --help)", which the web's forms leave out too (web/static/js/problems.js formMessage): a JSON client has
    no --help to see."""
    from ..render.safe import term
    return term(_with_suggestion(parser, message))


def usage_message(parser: argparse.ArgumentParser, message: str) -> str:
    """The one line a usage error prints after "llmsizer: error: "."""
    return f"{usage_line(parser, message)} (see --help)"


_ARGV = threading.local()  # _Parser.argv


class _Parser(argparse.ArgumentParser):
    """Every option named in full, as the web API's fields are (web/bridge.py _WebParser): argparse's default
    prefix matching would read ``--contex`` as ``--context`` here while the API refuses ``contex``; a misspelt flag
    gets "did you mean" instead."""

    @property
    def argv(self) -> list[str] | None:
        """What this parser was last given in this thread, for "did you mean" (_invoked) and whether --train was
        given (_serving). Per thread and per call: the web API keeps one parser per command (web/bridge.py), so the
        first request's words must not answer a later one's."""
        by_parser = getattr(_ARGV, "by_parser", None)
        return by_parser.get(self) if by_parser is not None else None

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs["allow_abbrev"] = False
        super().__init__(*args, **kwargs)

    def parse_known_args(self, args: Sequence[str] | None = None,  # type: ignore[override]
                         namespace: argparse.Namespace | None = None) -> tuple[argparse.Namespace, list[str]]:
        if not hasattr(_ARGV, "by_parser"):
            _ARGV.by_parser = weakref.WeakKeyDictionary()
        _ARGV.by_parser[self] = list(sys.argv[1:] if args is None else args)
        return super().parse_known_args(args, namespace)

    def error(self, message: str) -> NoReturn:  # one line, exit 2 (argparse's own convention)
        self.exit(2, f"llmsizer: error: {usage_message(self, message)}\n")


def _modules(argv: Sequence[str] | None) -> list[str]:
    args = list(sys.argv[1:] if argv is None else argv)
    words = [a for a in args if not a.startswith("-")]
    if words and words[0] in COMMANDS:
        return [COMMANDS[words[0]]]
    if not words:
        return []  # `llmsizer --version` / `--help`: the top-level parser and the command list answer it
    return list(dict.fromkeys(COMMANDS.values()))  # an unknown command: every parser, for "did you mean"


def build_parser(argv: Sequence[str] | None = None, *, all_commands: bool = False,
                 parser_class: type[argparse.ArgumentParser] | None = None) -> argparse.ArgumentParser:
    """The command-line parser (only the modules of the command in ``argv``). ``parser_class`` replaces the
    one-line-and-exit parser for callers that turn a usage error into their own answer (the web API)."""
    cls = parser_class or _Parser
    p = cls(prog="llmsizer", description="What does this LLM workload need? Memory, with every number "
                "traceable to a formula and a source.", epilog=EPILOG,
                formatter_class=argparse.RawDescriptionHelpFormatter)
    from .._version import __version__
    p.add_argument("--version", action="version", version=f"llmsizer {__version__}")
    sub = p.add_subparsers(dest="command", metavar="COMMAND", parser_class=cls)
    names = list(dict.fromkeys(COMMANDS.values())) if all_commands else _modules(argv)
    if not names:  # list the commands from their registry without importing their modules
        for command, text in COMMAND_HELP.items():
            sub.add_parser(command, help=text)
    for name in names:
        try:
            module = importlib.import_module(f".{name}", __package__)
        except ModuleNotFoundError as e:
            if e.name and e.name.endswith(name):
                continue  # a command module not shipped in this build
            raise
        module.register(sub)
    if names:
        from .common import accept_engine_aliases
        accept_engine_aliases(p)
    _values_may_start_with_minus(p)
    return p


# A value that starts with "-" and a digit ("-ts -1,2", "--free -1GiB,2GiB") is a value, not an option: Python
# 3.11's argparse takes only "-1" or "-1.5" so ("expected one argument"), 3.13's takes any "-<digit>" (its
# _negative_number_matcher). No option of ours starts with "-<digit>", so the value reaches the flag's own check,
# which names the flag and the bad element.
_NEGATIVE_VALUE = re.compile(r"-\.?\d")


def _values_may_start_with_minus(parser: argparse.ArgumentParser) -> None:
    parser._negative_number_matcher = _NEGATIVE_VALUE  # type: ignore[attr-defined]
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for child in set(action.choices.values()):
                _values_may_start_with_minus(child)


def cli_message(e: LlmsizerError, parser: argparse.ArgumentParser, args: argparse.Namespace) -> str:
    """The error as the CLI says it for ``args.command`` (``command_line``)."""
    sub = next((a.choices.get(args.command) for a in parser._actions
                if isinstance(a, argparse._SubParsersAction)), None)
    return command_line(e, sub, lambda dest: getattr(args, dest, None) is not None)


def command_line(e: LlmsizerError, sub: argparse.ArgumentParser | None,
                 gave: Callable[[str], bool] | None = None) -> str:
    """The error as the CLI says it for the command whose parser is ``sub``: a FieldError names its field by the
    command's flag (``--tp``, not ``tensor_parallel``; workload_args.flag_of), where the command has one, and by the
    flag the user typed where two set it (``--count`` for the device count: workload_args.typed_flag; ``gave(dest)``:
    whether an option was given). The one home of an error's words: the web's ``detail`` is this line too
    (web/bridge.py ``field_problem``)."""
    if not isinstance(e, FieldError):
        return str(e)
    from .workload_args import typed_flag
    return e.renamed(lambda f: (typed_flag(f, sub, gave) if sub is not None else None) or f)


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser(argv)
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    out = sys.stdout
    sys.stdout = _PipeSafe(out)  # a reader that stops early (`| head`) must not change the answer's exit code
    try:
        detected_device(args)
        return int(args.func(args) or 0)
    except LlmsizerError as e:
        from ..render.safe import term
        for line in cli_message(e, parser, args).splitlines() or [""]:  # a file with several problems: one prefixed line each
            print(term(f"llmsizer: error: {line}"), file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:  # a write outside the wrapper: stop quietly, the answer's code is unknown
        _silence(out)
        return 0
    finally:
        if isinstance(sys.stdout, _PipeSafe):
            sys.stdout.flush()  # while the wrapper can still catch a closed pipe (not at interpreter exit)
            sys.stdout = out


def detected_device(args: argparse.Namespace) -> None:
    """``--device detected`` (fit, infer, train): this machine, detected in-process as ``hardware detect`` reads it,
    no file written (catalog/detect.py ``detected_target``: its first device, that device's count when ``--count``
    is not given, its hardware file added as text). ``models --fits-on detected`` is the core's
    (``fits_on.models_that_fit``). The web does not come here: its bridge refuses 'detected'."""
    device = getattr(args, "device", None)
    if args.command not in ("fit", "infer", "train") or device is None:
        return
    from ..catalog.hardware import names_detected
    if not names_detected(device):
        return
    from ..catalog.detect import detected_target

    count = getattr(args, "count", None)
    args.device, count, args.hardware_file = detected_target(device, count, args.hardware_file or [])
    if hasattr(args, "count"):
        args.count = count


def _silence(stream: Any) -> None:
    """Send the rest of ``stream``'s output to /dev/null (its reader has gone)."""
    try:
        os.dup2(os.open(os.devnull, os.O_WRONLY), stream.fileno())
    except (OSError, ValueError, io.UnsupportedOperation):
        pass


class _PipeSafe:
    """stdout that swallows what is written after its reader went away (BrokenPipeError), so the command still
    finishes and returns its exit code (0 fits, 1 does not fit) instead of 0 for "pipe closed"."""

    def __init__(self, stream: Any) -> None:
        self._stream = stream
        self._broken = False

    def write(self, text: str) -> int:
        if not self._broken:
            try:
                return int(self._stream.write(text))
            except BrokenPipeError:
                self._broken = True
                _silence(self._stream)
        return len(text)

    def flush(self) -> None:
        if not self._broken:
            try:
                self._stream.flush()
            except BrokenPipeError:
                self._broken = True
                _silence(self._stream)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
