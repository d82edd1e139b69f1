"""The planner re-decides no default (review32 N3): a training job's budget formula states the headroom the core
applies (estimate/verdict.py check_headroom of resources.headroom; before: DEFAULT_HEADROOM whenever the estimate had
no verdict, so a device of unknown memory with headroom 0.2 was said '(1 - 0.1 headroom)'), and a service's hours
are the request spec's one reading (request/spec.py Service.hours_up; before: `or 24`, `or 7` in four places)."""

from __future__ import annotations

import copy

import pytest
import yaml

from llmsizer.estimate.verdict import DEFAULT_HEADROOM
from llmsizer.plan import plan_file
from llmsizer.request.spec import Service

TRAIN = {"name": "ft", "kind": "training", "model": {"name": "qwen2.5-0.5b"}, "method": "lora",
         "settings": {"micro_batch": 1, "seq_len": 1024, "epochs": 1}, "dataset": {"tokens": "10M tokens"},
         "resources": {"device": "gpu", "count": 1}}
SERVE = {"name": "chat", "kind": "inference", "model": {"name": "qwen2.5-0.5b"}, "engine": "vllm",
         "traffic": {"concurrency": 2, "context": "2k", "output": 200},
         "service": {"duration": "6 months"}, "resources": {"device": "l4", "count": 1, "price_per_hour": "$1/h"}}


def _plan(tmp_path, job):
    path = tmp_path / "r.yaml"
    path.write_text(yaml.safe_dump({"version": 1, "title": "t", "jobs": [job]}))
    return plan_file(path).job(job["name"])


@pytest.mark.parametrize("given, said", [(None, DEFAULT_HEADROOM), (0.2, 0.2)])
def test_the_budget_formula_states_the_headroom_in_force(tmp_path, given, said) -> None:
    job = copy.deepcopy(TRAIN)
    if given is not None:
        job["resources"]["headroom"] = given
    budget = next(f for f in _plan(tmp_path, job).section("memory").figures if f.key == "budget")
    assert budget.value is None  # a device known only by its kind: no memory, no verdict
    assert budget.formula == f"device memory x (1 - {said:g} headroom)", budget.formula


@pytest.mark.parametrize("hours, days, month", [(None, None, 730.0), (12, 5, 730.0 * 12 * 5 / 168)])
def test_service_hours_are_the_specs(tmp_path, hours, days, month) -> None:
    job = copy.deepcopy(SERVE)
    job["service"].update({k: v for k, v in (("hours_per_day", hours), ("days_per_week", days)) if v is not None})
    plan = _plan(tmp_path, job)
    assert plan.value("cost", "service_hours_month") == pytest.approx(month)  # 730 h a month x share of a 168-h week
    h, d = (24, 7) if hours is None else (hours, days)
    assert plan.value("operations", "hours") == f"{h:g} h/day, {d:g} days/week"
    assert Service(hours_per_day=hours, days_per_week=days).hours_up == (h, d)
