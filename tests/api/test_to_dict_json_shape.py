"""Every public result's ``to_dict()`` is the JSON its command prints, as Python holds JSON: lists, string keys,
plain str/int/float/bool/None (probe22 C4). Before, it held tuples (``speed.calibrated_ranges``,
``speed.under_load.ttft_bounds_seconds``, ``training_time.calibrated_seconds_range``) and int keys
(``memory.details.stage_peaks`` of a pipeline-parallel run), so it equalled ``--json`` only after
``json.loads(json.dumps(...))``. The truth here is the standard library's: ``json.loads`` of the text the real CLI
printed, and ``json.loads(json.dumps(x, default=str))`` for ``result.json_data``."""

from __future__ import annotations

import datetime as _dt
import json
from collections.abc import Callable
from enum import Enum, IntEnum
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import llmsizer
from cli_capture import run
from llmsizer.result import KindedWarning, json_data

ROOT = Path(__file__).resolve().parents[2]
TODAY = "2026-01-05"


def _json_only(data: Any, path: str = "$") -> list[str]:
    """Where ``data`` holds anything ``json.loads`` would not return: a type other than dict/list/str/int/float/
    bool/None (exactly: no tuple, no str subclass), or a key that is not a str."""
    t = type(data)
    if t is dict:
        return [f"{path}: key {k!r}" for k in data if type(k) is not str] + [
            bad for k, v in data.items() for bad in _json_only(v, f"{path}.{k}")]
    if t is list:
        return [bad for i, v in enumerate(data) for bad in _json_only(v, f"{path}[{i}]")]
    return [] if t in (str, int, float, bool, type(None)) else [f"{path}: {t.__name__}"]


# (Python call, the same question on the command line); each holds one of the shapes C4 found, or a command's own
CASES: dict[str, tuple[Callable[[], Any], list[str]]] = {
    "infer": (lambda: llmsizer.estimate_inference("llama-3.1-8b"), ["infer", "llama-3.1-8b"]),
    "train-pp": (lambda: llmsizer.estimate_training("llama-3.1-8b", gpus=8, pp=2),
                 ["train", "llama-3.1-8b", "--gpus", "8", "--pp", "2"]),
    "fit": (lambda: llmsizer.fit("llama-3.1-8b", "h100-sxm"), ["fit", "llama-3.1-8b", "--device", "h100-sxm"]),
    "fit-train-pp": (lambda: llmsizer.fit_training("llama-3.1-8b", "h100-sxm", 8, pp=2, tokens=1e9),
                     ["fit", "llama-3.1-8b", "--device", "h100-sxm", "--count", "8", "--train", "--pp", "2",
                      "--tokens", "1B"]),
    "fit-auto": (lambda: llmsizer.fit_llamacpp("qwen2.5-7b", device="rtx-4090"),
                 ["fit", "qwen2.5-7b", "--device", "rtx-4090", "--engine", "llamacpp", "--auto"]),
    "recommend": (lambda: llmsizer.recommend_inference("llama-3.1-8b"), ["recommend", "llama-3.1-8b"]),
    "recommend-train": (lambda: llmsizer.recommend_training("qwen2.5-0.5b", tokens=1e8, method="lora"),
                        ["recommend", "qwen2.5-0.5b", "--train", "--tokens", "100M", "--method", "lora"]),
    "plan": (lambda: llmsizer.plan_file(ROOT / "examples" / "cpu-internal-tool.yaml",
                                        today=_dt.date.fromisoformat(TODAY)),
             ["plan", str(ROOT / "examples" / "cpu-internal-tool.yaml"), "--today", TODAY]),
}


@pytest.mark.parametrize("name", list(CASES))
def test_to_dict_is_the_cli_json_without_a_round_trip(name: str) -> None:
    call, argv = CASES[name]
    data = call().to_dict()
    code, out, err = run(*argv, "--json")
    assert code in (0, 1), err
    assert _json_only(data) == []
    assert data == json.loads(out)


def test_the_shapes_probe22_found_are_json_now() -> None:
    """The exact places C4 named: lists where tuples were, "0"/"1" where the stage numbers were int keys."""
    serving = llmsizer.fit("llama-3.1-8b", "h100-sxm").to_dict()["speed"]
    assert type(serving["calibrated_ranges"]["decode_tokens_per_second"]) is list
    assert type(serving["under_load"]["ttft_bounds_seconds"]) is list
    training = llmsizer.fit_training("llama-3.1-8b", "h100-sxm", 8, pp=2, tokens=1e9).to_dict()
    assert list(training["memory"]["details"]["stage_peaks"]) == ["0", "1"]
    assert type(training["training_time"]["calibrated_seconds_range"]) is list


class _Colour(str, Enum):
    RED = "red"


class _Level(IntEnum):
    HIGH = 3


_SCALARS = (st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=5)
            | st.sampled_from([_Colour.RED, _Level.HIGH, KindedWarning("w", "kind"), _dt.date(2026, 1, 5),
                               Path("a/b")]))
_KEYS = (st.text(max_size=4) | st.integers() | st.booleans() | st.none() | st.floats(allow_nan=False)
         | st.sampled_from([_Level.HIGH, _Colour.RED]))
_VALUES = st.recursive(_SCALARS, lambda inner: st.lists(inner, max_size=4) | st.lists(inner, max_size=4).map(tuple)
                       | st.dictionaries(_KEYS, inner, max_size=4), max_leaves=20)


@settings(max_examples=300, deadline=None)
@given(_VALUES)
def test_json_data_is_what_json_reads_back(value: Any) -> None:
    """``json_data(x)`` is ``json.loads(json.dumps(x, default=str))`` (the text ``--json`` prints, read back), and
    holds only what ``json.loads`` returns."""
    try:
        text = json.dumps(value, default=str)
    except TypeError:  # a key json refuses (none drawn here); json_data is not asked to agree
        pytest.skip("json.dumps refused a key")
    shaped = json_data(value)
    assert _json_only(shaped) == []
    assert shaped == json.loads(text)
