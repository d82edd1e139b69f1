"""``cli.json_out.dumps_indent2`` against the standard library's ``json.dumps(indent=2, default=str)``: the text of
every ``--json`` answer and of the web API must stay the same bytes."""

from __future__ import annotations

import enum
import json
import math
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from llmsizer.cli.json_out import dumps_indent2


def truth(data):
    return json.dumps(data, indent=2, default=str)


scalars = (st.none() | st.booleans() | st.integers() | st.integers(min_value=-2**80, max_value=2**80)
           | st.floats(allow_nan=True, allow_infinity=True) | st.text() | st.text(alphabet="\"\\\n\t\x00\x7f é中😀"))
keys = st.text() | st.integers() | st.floats(allow_nan=True) | st.booleans() | st.none()
values = st.recursive(scalars, lambda inner: st.lists(inner, max_size=5) | st.tuples(inner, inner)
                      | st.dictionaries(keys, inner, max_size=5), max_leaves=40)


@settings(max_examples=400, deadline=None)
@given(values)
def test_the_same_text_as_json_dumps(data):
    assert dumps_indent2(data) == truth(data)


class Colour(enum.Enum):
    RED = "red"


class Level(enum.IntEnum):
    HIGH = 3


class Name(str):
    pass


def test_subclasses_and_other_objects_as_json_encodes_them():
    data = {"path": Path("/x/y"), "enum": Colour.RED, "int_enum": Level.HIGH, "name": Name("n\u00e9"),
            "nested": [{"a": (1, 2.5, float("nan"))}, [], {}], 1.5: "float key", 2: "int key", None: 0, True: 1,
            "set": {1}, "big": 10**30, "neg_inf": -math.inf, "tiny": 5e-324}
    assert dumps_indent2(data) == truth(data)


def test_bad_keys_and_cycles_fail_as_json_fails():
    with pytest.raises(TypeError):
        json.dumps({(1, 2): 0}, indent=2)
    with pytest.raises(TypeError):
        dumps_indent2({(1, 2): 0})
    loop: list = []
    loop.append(loop)
    with pytest.raises(ValueError, match="Circular reference"):
        dumps_indent2(loop)


def test_real_answers_of_every_estimate_command():
    """Answers the CLI prints (infer, train, fit, recommend, inspect) on catalog models: the same text."""
    from llmsizer.cli.fit_cmd import fit_answer
    from llmsizer.cli.infer_cmd import infer_answer
    from llmsizer.cli.main import build_parser
    from llmsizer.cli.model_cmds import inspect_data
    from llmsizer.cli.recommend_cmd import recommend_answer
    from llmsizer.cli.train_cmd import train_answer
    from llmsizer.models import load_named
    cases = [(infer_answer, ["infer", "llama-3.1-8b", "--engine", "vllm", "--memory", "24GiB"]),
             (infer_answer, ["infer", "qwen3-30b-a3b", "--weights", "q4_k_m", "--engine", "llamacpp"]),
             (train_answer, ["train", "qwen2.5-7b", "--method", "qlora"]),
             (fit_answer, ["fit", "llama-3.1-70b-instruct", "--device", "h100-sxm", "--count", "4"]),
             (recommend_answer, ["recommend", "qwen2.5-7b"])]
    for answer, argv in cases:
        args = build_parser([argv[0]]).parse_args(argv)
        spec = load_named(argv[1])
        data = answer(spec, args)[0]
        assert dumps_indent2(data) == truth(data), argv
    data = inspect_data(load_named("deepseek-v3"))
    assert dumps_indent2(data) == truth(data)
