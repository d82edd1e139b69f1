"""``quantization: none`` is a demand (unquantized: the format pinned at the precision, else the checkpoint's
dtype); a missing key lets the plan choose. Before, the reader read both as "not given" and a request saying
``quantization: none`` with no resources was planned on awq-int4 (the web calculator's downloaded YAML did this)."""

from __future__ import annotations

import pytest

from llmsizer.plan import make_plan
from llmsizer.recommend import recommend_inference
from llmsizer.request import parse_request
from llmsizer.request.spec import UNQUANTIZED


def _text(extra: str) -> str:
    return ("version: 1\njobs:\n  - name: chat\n    kind: inference\n    model: {name: qwen2.5-7b-instruct}\n"
            f"{extra}    traffic:\n      concurrency: {{typical: 2, peak: 2}}\n"
            "      context: {typical: 2k, peak: 2k}\n      output: {typical: 128, peak: 128}\n")


@pytest.mark.parametrize(("line", "want"), [("", None), ("    quantization: none\n", UNQUANTIZED),
                                            ("    quantization: off\n", UNQUANTIZED),
                                            ("    quantization: AWQ-INT4\n", "awq-int4")])
def test_the_reader_keeps_none_apart_from_absent(line: str, want: str | None) -> None:
    assert parse_request(_text(line), source="t.yaml").jobs[0].quantization == want  # type: ignore[union-attr]


@pytest.mark.parametrize(("extra", "fmt"), [
    ("    quantization: none\n", "bf16"),  # Qwen2.5-7B's config.json: "torch_dtype": "bfloat16"
    ("    quantization: none\n    precision: fp16\n", "fp16"),
])
def test_quantization_none_pins_the_unquantized_format(extra: str, fmt: str) -> None:
    jp = make_plan(parse_request(_text(extra), source="t.yaml"), alternatives=True).jobs[0]
    assert jp.options and {o["weights_format"] for o in jp.options} == {fmt}
    rec = recommend_inference("qwen2.5-7b-instruct", context=2048, concurrency=2, output_tokens=128, weights=fmt,
                              quantization_advice=False)
    assert [(o["target"], o["tokens_per_second"]) for o in jp.options] == [
        (o.target, o.tokens_per_second) for o in rec.options[:6]]
    assert rec.chosen is not None
    # one instance: the devices line (estimate/fit.py devices_text) names it without ", N instances"
    assert f", {fmt}," in jp.summary and f"({rec.chosen.target})" in jp.summary


def test_no_quantization_key_lets_the_plan_choose_a_format() -> None:
    jp = make_plan(parse_request(_text(""), source="t.yaml"), alternatives=True).jobs[0]
    assert len({o["weights_format"] for o in jp.options}) > 1  # the search ranges over formats
