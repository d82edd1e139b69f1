"""Every option's help names only flags its own command has (or another tool's flag, said as that tool's).

Before: `recommend --zero` said "with a memory budget, --memory or --device" and `models --engine` said "a GPU known
only by its kind (no --device)", flags those commands lack (recommend sizes each option's device; models names its
device with --fits-on). The --headroom case: tests/web/api/test_surfaces_noticed_s10.py."""

from __future__ import annotations

import argparse
import re

import pytest

from llmsizer.cli.main import build_parser

# (command, option, flag named): another program's flag, quoted as that program's
OTHER_TOOLS = {
    ("train", "--precision", "--bf16"), ("fit", "--precision", "--bf16"), ("recommend", "--precision", "--bf16"),
    ("train", "--nf4-format", "--quantize"), ("fit", "--nf4-format", "--quantize"),
    ("recommend", "--nf4-format", "--quantize"),  # HF Trainer --bf16, litgpt --quantize
    ("train", "--device", "--train"),  # "as in `fit --train`": another llmsizer command
    ("recommend", "--request-rate", "--count"),  # "as `fit --count` of them answers it": another llmsizer command
    ("capacity import", "--scontrol", "--oneliner"),  # `scontrol show node --oneliner`
    # vllm serve --pipeline-parallel-size, sglang --pp-size: the engines' own flags that --pp stands for
    ("infer", "--pp", "--pipeline-parallel-size"), ("infer", "--pp", "--pp-size"),
    ("infer", "--pp", "--fits-on"),  # "as recommend and models --fits-on take": another llmsizer command
    *((cmd, "--moe-dispatcher", "--moe-token-dispatcher-type") for cmd in ("train", "fit", "recommend")),
    *((cmd, "--ep-comm-overlap", "--overlap-moe-expert-parallel-comm")  # Megatron-LM's own flags
      for cmd in ("train", "fit", "recommend")),
    # vllm serve --data-parallel-size, sglang --attn-dp-size / --ep-size: the engines' own flags --dp and
    # --enable-expert-parallel stand for (--enable-expert-parallel is vLLM's own name)
    *((cmd, opt, flag) for cmd in ("infer", "fit", "recommend")
      for opt, flag in (("--dp", "--data-parallel-size"), ("--dp", "--attn-dp-size"),
                        ("--enable-expert-parallel", "--ep-size"))),
}
FLAG = re.compile(r"(?<![\w-])--[a-z][a-z0-9-]*")


def _commands(parser: argparse.ArgumentParser, prefix: str = ""):
    for act in parser._actions:
        if isinstance(act, argparse._SubParsersAction):
            for name, sub in act.choices.items():
                yield (prefix + " " + name).strip(), sub
                yield from _commands(sub, prefix + " " + name)


def _stray() -> set[tuple[str, str, str]]:
    out = set()
    for name, parser in _commands(build_parser(all_commands=True)):
        for act in parser._actions:
            for flag in FLAG.findall(act.help or ""):
                if flag not in parser._option_string_actions:
                    out.add((name, (act.option_strings or [act.dest])[0], flag))
    return out


def test_no_help_names_a_flag_its_command_lacks() -> None:
    assert _stray() == OTHER_TOOLS


@pytest.mark.parametrize(("command", "option", "names", "lacks"), [
    ("recommend", "--zero", "each option's device", "--memory"),
    ("models", "--engine", "(--fits-on gpu)", "--device"),
    ("fit", "--engine", "(--device gpu)", "no --device"),
    ("train", "--zero", "--memory or --device", None),
    ("infer", "--engine", "(no --device)", None),
])
def test_the_budget_and_the_generic_gpu_are_named_with_the_commands_flags(command, option, names, lacks) -> None:
    sub = dict(_commands(build_parser(all_commands=True)))[command]
    text = " ".join(sub._option_string_actions[option].help.split())
    assert names in text and (lacks is None or lacks not in text)
