"""Each "(default N)" a command's --help states is the value the code applies, read from that value's one home
(review32 D6): the web's forms show the same words as the input's placeholder (web/pages.py text_input), so a
default written a second time in a help string is a second answer once its constant moves (vLLM main moved
gpu_memory_utilization to 0.92).

The truth for a flag argparse fills in (``default=``) is that default, and the constant it is read from; for a
flag left None (the engine, workload or recipe decides) the constant named below, in its own module."""

from __future__ import annotations

import argparse
import re
from collections.abc import Iterator
from dataclasses import fields

import pytest

from llmsizer.cli.main import build_parser
from llmsizer.cli.serve_cmd import ANSWER_CACHE_ENTRIES, DEFAULT_PORT
from llmsizer.estimate import engines
from llmsizer.estimate.verdict import DEFAULT_HEADROOM
from llmsizer.numbers import DEFAULT_HOLD_HOURS, DEFAULT_TOP
from llmsizer.specs import InferenceWorkload, TrainingWorkload

# "(default 16)", "; default 1)", "(vLLM default 16)", "(default per engine: 0.1", "(default: SGLang's 0.9)": a
# number the help gives as this tool's default (not "torchtune default 0", another framework's, nor "2 x rank")
DEFAULT = re.compile(r"(?:\(|; )(?:vLLM )?default(?: per engine)?:? (?:SGLang's )?(-?\d[\d,]*(?:\.\d+)?)(?!\.?\d)(?![\d.]* x )")

IW = {f.name: f.default for f in fields(InferenceWorkload)}
TW = {f.name: f.default for f in fields(TrainingWorkload)}
# flags left None, whose default the engine, workload or recipe applies: the constant each is read from
ENGINE_DEFAULTS = {
    "paged_block_size": engines.VLLM.block_size,
    "gpu_memory_utilization": engines.VLLM_GPU_MEMORY_UTILIZATION,
    "mamba_full_memory_ratio": engines.SGLANG_MAMBA_FULL_MEMORY_RATIO,
    "n_ubatch": engines.LLAMACPP_N_UBATCH,
    "headroom": DEFAULT_HEADROOM,
    "answer_cache": ANSWER_CACHE_ENTRIES,
}
# flags argparse fills in: the constant their default= reads
ARG_DEFAULTS = {"hold_hours": DEFAULT_HOLD_HOURS, "top": DEFAULT_TOP, "port": DEFAULT_PORT}


def _said(p: argparse.ArgumentParser, path: tuple[str, ...] = ()) -> Iterator[tuple[str, argparse.Action, str]]:
    for a in p._actions:
        if isinstance(a, argparse._SubParsersAction):
            for name, sub in a.choices.items():
                yield from _said(sub, (*path, name))
        elif a.help and a.help is not argparse.SUPPRESS:
            for m in DEFAULT.finditer(a.help):
                yield " ".join(path), a, m.group(1)


def _truth(command: str, a: argparse.Action) -> object:
    if a.default is not None:
        return a.default
    if a.dest in ENGINE_DEFAULTS:
        return ENGINE_DEFAULTS[a.dest]
    if a.dest == "gpus":  # llama.cpp's split (InferenceWorkload) or a training run's devices (TrainingWorkload)
        return IW["gpus"] if "llama.cpp" in (a.help or "") else TW["gpus"]
    if a.dest in TW and command in ("train", "fit", "recommend") or a.dest not in IW:
        return TW[a.dest]
    return IW[a.dest]


SAID = sorted({(c, a.dest, n): (c, a, n) for c, a, n in _said(build_parser(all_commands=True))}.values(),
              key=lambda t: (t[0], t[1].dest))


def test_the_help_states_defaults_at_all() -> None:
    dests = {a.dest for _, a, _ in SAID}
    # the four of review32 D6, and a training and a serving workload default
    assert {"paged_block_size", "gpu_memory_utilization", "mamba_full_memory_ratio", "n_ubatch", "rank",
            "tensor_parallel", "hold_hours"} <= dests, sorted(dests)


@pytest.mark.parametrize("command, action, number", SAID, ids=[f"{c}-{a.dest}" for c, a, _ in SAID])
def test_each_stated_default_is_its_constant(command: str, action: argparse.Action, number: str) -> None:
    truth = _truth(command, action)
    assert float(number.replace(",", "")) == float(truth), (command, action.dest, number, truth)  # type: ignore[arg-type]
    if action.dest in ARG_DEFAULTS:
        assert action.default == ARG_DEFAULTS[action.dest], (action.dest, action.default)


def test_measure_defaults_are_the_settings_defaults() -> None:
    """`measure`'s flags fill in their defaults in the parser (the CLI must not import the measure package, 0.27 s,
    to print --help): each equals the MeasureSettings field / runner default the Python API applies."""
    from llmsizer.measure.runner import DEFAULT_TIMEOUT
    from llmsizer.measure.settings import MeasureSettings
    ms = {f.name: f.default for f in fields(MeasureSettings)}
    for command, a, _ in SAID:
        if command.startswith("measure"):
            assert a.default == (DEFAULT_TIMEOUT if a.dest == "timeout" else ms[a.dest]), (command, a.dest)


def test_the_answer_cache_default_is_the_servers() -> None:
    pytest.importorskip("starlette")
    from llmsizer.web.answer_cache import ENTRIES
    assert ENTRIES == ANSWER_CACHE_ENTRIES
