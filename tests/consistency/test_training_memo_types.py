"""fit's training-estimate memo (estimate/fit.py ``_training_estimate``) keys each field with its value's type: two
questions that differ only in a value's type (micro_batch 1 and True: equal and of one hash in Python, but the second
is refused, a count is not a flag) get each their own answer, the one each gets with every memo cleared, whichever
was asked first. Keyed on the values alone, the first asked made the other its answer (this test failed so with
seq_len 4096 and 4096.0; 4096.0 is now read as 4096 through numbers.py's range, as a context of 8192.0 is)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from llmsizer.errors import InputError
from llmsizer.estimate.caches import clear_caches
from llmsizer.estimate.fit import fit_training

QUESTIONS: dict[str, dict[str, Any]] = {"int": {"micro_batch": 1}, "bool": {"micro_batch": True}}


def _answer(fields: dict[str, Any]) -> str:
    try:
        r = fit_training("llama-3.1-8b", "h100-sxm", method="lora", **fields)
    except InputError as e:
        return f"refused: {e}"
    return json.dumps(r.to_dict(), sort_keys=True, default=str)


@pytest.mark.parametrize(("first", "second"), [("int", "bool"), ("bool", "int")])
def test_each_question_gets_its_own_answer_whatever_came_first(first: str, second: str) -> None:
    alone = {}
    for name in (first, second):
        clear_caches()
        alone[name] = _answer(QUESTIONS[name])
    assert alone[first] != alone[second]  # the two questions differ (else the test could not fail)
    clear_caches()
    got = {name: _answer(QUESTIONS[name]) for name in (first, second)}
    assert got == alone
