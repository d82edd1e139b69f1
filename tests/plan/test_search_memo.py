"""PlanContext.search: one catalog search per distinct question in a plan, the same answer as asking directly."""

from __future__ import annotations

import pytest

from llmsizer.errors import InputError
from llmsizer.models import load_model
from llmsizer.plan.hardware import PlanContext
from llmsizer.recommend import Constraints, recommend_inference


def test_same_question_is_searched_once_and_answers_as_a_direct_call() -> None:
    ctx = PlanContext()
    spec = load_model("qwen2.5-0.5b")
    kw = dict(context=4096, concurrency=4, output_tokens=256, weights=None,
              constraints=Constraints(max_ttft=2.0), catalog=ctx.cat(), quantization_advice=False)
    first = ctx.search(recommend_inference, spec, **kw)
    again = ctx.search(recommend_inference, spec, **dict(kw))
    assert again is first
    direct = recommend_inference(spec, **kw)
    assert first.to_dict() == direct.to_dict()


def test_any_difference_in_the_question_is_a_new_search() -> None:
    ctx = PlanContext()
    calls: list[dict[str, object]] = []

    def fake(spec: object, **kw: object) -> tuple[object, ...]:
        calls.append(kw)
        return (spec, tuple(sorted(kw.items(), key=str)))

    spec = load_model("qwen2.5-0.5b")
    other = load_model("llama-3.1-8b")
    ctx.search(fake, spec, context=4096, constraints=Constraints(max_ttft=2))
    ctx.search(fake, spec, context=4096, constraints=Constraints(max_ttft=2))  # the same: no call
    ctx.search(fake, spec, context=4096, constraints=Constraints(max_ttft=2.0))  # Constraints reads 2 as 2.0: the same
    ctx.search(fake, spec, context=4096, constraints=Constraints(max_ttft=3))
    ctx.search(fake, spec, context=8192, constraints=Constraints(max_ttft=2))
    ctx.search(fake, other, context=4096, constraints=Constraints(max_ttft=2))
    ctx.search(fake, spec, context=4096, constraints=Constraints(max_ttft=2), fields={"rank": 16})
    ctx.search(fake, spec, context=4096, constraints=Constraints(max_ttft=2), fields={"rank": 32})
    ctx.search(fake, spec, context=4096, constraints=Constraints(max_ttft=2), fields={"rank": 32})
    assert len(calls) == 6


def test_an_error_is_not_memoized() -> None:
    ctx = PlanContext()
    n = {"calls": 0}

    def failing(spec: object, **kw: object) -> None:
        n["calls"] += 1
        raise InputError("no")

    spec = load_model("qwen2.5-0.5b")
    for _ in range(2):
        with pytest.raises(InputError):
            ctx.search(failing, spec, context=1)
    assert n["calls"] == 2
