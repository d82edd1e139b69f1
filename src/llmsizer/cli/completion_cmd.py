"""`llmsizer completion bash|zsh`: a shell completion script generated from the CLI's own argparse parser.

Sub-commands, options and option choices come from the parser, model names from the built-in catalog, so the
script is as current as the installed llmsizer. Both scripts share the generated tables (shell functions that
answer by `case`); the completing function is native to each shell (bash's COMP_WORDS / COMPREPLY, zsh's
words / CURRENT / compadd), so zsh needs no bashcompinit.
"""

from __future__ import annotations

import argparse
import shlex
from dataclasses import dataclass, field
from typing import Any

from .commands import COMMAND_HELP

SHELLS = ("bash", "zsh")

EPILOG = """examples:
  llmsizer completion bash > ~/.local/share/bash-completion/completions/llmsizer
  eval "$(llmsizer completion bash)"      # in ~/.bashrc
  eval "$(llmsizer completion zsh)"       # in ~/.zshrc
"""


def register(sub: Any) -> None:
    p = sub.add_parser("completion", help=COMMAND_HELP["completion"],
                       description="Print a completion script for SHELL: sub-commands, options, choices and the "
                                   "catalog's model names. Load it from your shell's start-up file.",
                       epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("shell", choices=SHELLS, help="the shell to complete in")
    p.set_defaults(func=cmd_completion)


@dataclass
class _Level:
    """What one command path ('', 'infer', 'request check', ...) completes."""

    subs: list[str] = field(default_factory=list)
    options: list[str] = field(default_factory=list)
    valued: list[str] = field(default_factory=list)  # options that take a value (no choices: files/free text)
    choices: dict[str, list[str]] = field(default_factory=dict)  # option -> its choices
    model: bool = False  # a MODEL positional: complete catalog names (and files)


def _walk(parser: argparse.ArgumentParser, path: str, out: dict[str, _Level]) -> None:
    level = out.setdefault(path, _Level())
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                level.subs.append(name)
                _walk(sub, f"{path} {name}".strip(), out)
        elif action.option_strings:
            level.options += action.option_strings
            if action.nargs != 0:
                if action.choices is not None:
                    for o in action.option_strings:
                        level.choices[o] = [str(c) for c in action.choices]
                else:
                    level.valued += action.option_strings
        elif action.dest == "model":
            level.model = True


def _case(fn: str, rows: dict[str, str]) -> str:
    lines = [f"{fn}() {{", '    case "$1" in']
    for key, words in rows.items():
        lines.append(f"        {shlex.quote(key)}) echo {shlex.quote(words)} ;;")
    lines += ["        *) return 1 ;;", "    esac", "}"]
    return "\n".join(lines)


def _tables(parser: argparse.ArgumentParser, models: list[str]) -> str:
    levels: dict[str, _Level] = {}
    _walk(parser, "", levels)
    subs = {k: " ".join(v.subs) for k, v in levels.items() if v.subs}
    opts = {k: " ".join(dict.fromkeys(v.options)) for k, v in levels.items() if v.options}
    valued = {f"{k} {o}": "1" for k, v in levels.items() for o in v.valued}
    choices = {f"{k} {o}": " ".join(c) for k, v in levels.items() for o, c in v.choices.items()}
    with_model = {k: "1" for k, v in levels.items() if v.model}
    return "\n".join([
        _case("__llmsizer_subs", subs), _case("__llmsizer_opts", opts), _case("__llmsizer_valued", valued),
        _case("__llmsizer_choices", choices), _case("__llmsizer_takes_model", with_model),
        f"__llmsizer_models={shlex.quote(' '.join(models))}", ""])


# The command path ('request check') is the sub-command words typed so far; `cmd` rather than `path`, which zsh
# ties to $PATH.
_BASH_MAIN = """_llmsizer() {
    local cur="${COMP_WORDS[COMP_CWORD]}" prev="${COMP_WORDS[COMP_CWORD-1]}" cmd="" i w subs list
    for ((i = 1; i < COMP_CWORD; i++)); do
        w="${COMP_WORDS[i]}"
        subs=" $(__llmsizer_subs "$cmd") "
        if [[ "$w" != -* && "$subs" == *" $w "* ]]; then cmd="${cmd:+$cmd }$w"; fi
    done
    COMPREPLY=()
    if list=$(__llmsizer_choices "${cmd:+$cmd }$prev"); then
        COMPREPLY=($(compgen -W "$list" -- "$cur")); return 0
    fi
    if __llmsizer_valued "${cmd:+$cmd }$prev" >/dev/null; then return 0; fi  # a value: files (-o default)
    if [[ "$cur" == -* ]]; then
        COMPREPLY=($(compgen -W "$(__llmsizer_opts "$cmd")" -- "$cur")); return 0
    fi
    if list=$(__llmsizer_subs "$cmd"); then
        COMPREPLY=($(compgen -W "$list" -- "$cur")); return 0
    fi
    if __llmsizer_takes_model "$cmd" >/dev/null; then
        COMPREPLY=($(compgen -W "$__llmsizer_models" -- "$cur"))
    fi
    return 0
}
complete -o default -F _llmsizer llmsizer
"""

_ZSH_MAIN = """_llmsizer() {
    local cur="${words[CURRENT]}" prev="${words[CURRENT-1]}" cmd="" i w subs list
    for ((i = 2; i < CURRENT; i++)); do
        w="${words[i]}"
        subs=" $(__llmsizer_subs "$cmd") "
        if [[ "$w" != -* && "$subs" == *" $w "* ]]; then cmd="${cmd:+$cmd }$w"; fi
    done
    if list=$(__llmsizer_choices "${cmd:+$cmd }$prev"); then compadd -- ${=list}; return; fi
    if __llmsizer_valued "${cmd:+$cmd }$prev" >/dev/null; then _files; return; fi
    if [[ "$cur" == -* ]]; then compadd -- ${=$(__llmsizer_opts "$cmd")}; return; fi
    if list=$(__llmsizer_subs "$cmd"); then compadd -- ${=list}; return; fi
    if __llmsizer_takes_model "$cmd" >/dev/null; then compadd -- ${=__llmsizer_models}; fi
    _files
}
(( $+functions[compdef] )) || { autoload -U +X compinit && compinit; }
compdef _llmsizer llmsizer
"""


def bash_script(parser: argparse.ArgumentParser, models: list[str]) -> str:
    return ("# bash completion for llmsizer (generated by `llmsizer completion bash`)\n"
            + _tables(parser, models) + _BASH_MAIN)


def zsh_script(parser: argparse.ArgumentParser, models: list[str]) -> str:
    return ("# zsh completion for llmsizer (generated by `llmsizer completion zsh`); load it with\n"
            '#   eval "$(llmsizer completion zsh)"   in ~/.zshrc\n' + _tables(parser, models) + _ZSH_MAIN)


def cmd_completion(args: argparse.Namespace) -> int:
    from ..catalog import models as catalog
    from .main import build_parser
    parser = build_parser(all_commands=True)
    models = sorted(catalog.entries())
    print(bash_script(parser, models) if args.shell == "bash" else zsh_script(parser, models), end="")
    return 0
