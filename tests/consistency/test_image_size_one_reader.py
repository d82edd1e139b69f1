"""An image size reads the same on every surface: the CLI (`--image-size 1024x768`), the web and request files took
"WxH" (units.parse_image_size), while Python's InferenceWorkload took only a (w, h) tuple and refused
``image_size="1024x768"`` and ``[1024, 768]`` (probe3 finding). The workload now reads it with the same parser, so
the three spellings give the CLI's answer, and a bad one gets the parser's one line."""

from __future__ import annotations

import pytest

import llmsizer
from cli_capture import run_json
from llmsizer.errors import InputError


@pytest.mark.parametrize("size", ["1024x768", [1024, 768], (1024, 768)])
def test_python_reads_the_image_size_as_the_cli(size: object) -> None:
    code, cli = run_json("infer", "qwen2.5-vl-7b-instruct", "--images", "1", "--image-size", "1024x768")
    assert code == 0
    est = llmsizer.estimate_inference("qwen2.5-vl-7b-instruct", images=1, image_size=size)
    assert est.total("device")[1] == cli["totals"]["device"]["bytes"]


def test_a_bad_size_is_the_parsers_line() -> None:
    with pytest.raises(InputError, match="cannot read '10x' as an image size"):
        llmsizer.estimate_inference("qwen2.5-vl-7b-instruct", images=1, image_size="10x")
