"""A Python caller's typo in a choice field gets the "did you mean" the command line gives for the same typo (issues
#12/#16): the CLI's suggestion is argparse's invalid choice plus suggest.did_you_mean; the Python API's comes from
the same helper (suggest.unknown_choice), so the two name the same candidates in the same order."""

from __future__ import annotations

import re

import pytest
from tests.cli_capture import run

import llmsizer
from llmsizer.errors import LlmsizerError

SUGGESTION = re.compile(r"; did you mean [^?]*\?")

CASES = [  # (python call, its keywords, the CLI's argv for the same typo)
    ("estimate_inference", {"engine": "vlm"}, ("infer", "llama-3.1-8b", "--engine", "vlm")),
    ("estimate_inference", {"dtype": "bf61"}, ("infer", "llama-3.1-8b", "--dtype", "bf61")),
    ("estimate_inference", {"attention": "sdpaa"}, ("infer", "llama-3.1-8b", "--attention", "sdpaa")),
    ("estimate_inference", {"metric": "allocatd"}, ("infer", "llama-3.1-8b", "--metric", "allocatd")),
    ("estimate_inference", {"weights": "gptq-int3"}, ("infer", "llama-3.1-8b", "--weights", "gptq-int3")),
    ("estimate_training", {"optimizer": "adamw9"}, ("train", "llama-3.1-8b", "--optimizer", "adamw9")),
    ("estimate_training", {"precision": "bf16-mixd"}, ("train", "llama-3.1-8b", "--precision", "bf16-mixd")),
    ("estimate_training", {"method": "lorra"}, ("train", "llama-3.1-8b", "--method", "lorra")),
    ("estimate_training", {"fsdp": "ful"}, ("train", "llama-3.1-8b", "--fsdp", "ful")),
]


@pytest.mark.parametrize(("call", "kwargs", "argv"), CASES, ids=[next(iter(c[1].values())) for c in CASES])
def test_python_typo_gets_the_cli_suggestion(call, kwargs, argv):
    code, _, err = run(*argv)
    assert code == 2
    cli = SUGGESTION.search(err)
    assert cli, err
    with pytest.raises(LlmsizerError) as e:
        getattr(llmsizer, call)("llama-3.1-8b", **kwargs)
    message = str(e.value)
    assert "\n" not in message
    assert SUGGESTION.search(message) and SUGGESTION.search(message)[0] == cli[0], message
    value = next(iter(kwargs.values()))
    assert f"{value!r}" in message  # names what was mistyped


def test_device_name_typo_same_line_as_cli():
    code, _, err = run("fit", "llama-3.1-8b", "--device", "h1000")
    assert code == 2
    with pytest.raises(LlmsizerError) as e:
        llmsizer.find_hardware("h1000")
    assert err.strip() == f"llmsizer: error: {e.value}"


def test_no_suggestion_for_a_far_word():
    with pytest.raises(LlmsizerError) as e:
        llmsizer.estimate_inference("llama-3.1-8b", engine="tensorrt-llm")
    assert "did you mean" not in str(e.value) and "choose one of: transformers, vllm" in str(e.value)
