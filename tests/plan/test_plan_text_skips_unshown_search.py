"""probe28 D7: `llmsizer plan examples/lora-finetune-and-chat.yaml` took 2.2-2.8 s, most of it recommend_training's
182 fit_training for alternatives to resources the request names. The alternatives are shown only by the faces that
render options (the JSON's ``options``, the report's cost chart); the text summary shows none, so the summary alone
runs no catalog search for a job whose resources are given, and prints what it printed before (the same text as
with --no-alternatives); a report or --json still searches and lists them."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import llmsizer.plan.inference as plan_inference
import llmsizer.plan.training as plan_training
from cli_capture import run

EXAMPLE = str(Path(__file__).resolve().parents[2] / "examples" / "lora-finetune-and-chat.yaml")


@pytest.fixture
def searches(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    calls: list[str] = []
    for mod, name in ((plan_training, "recommend_training"), (plan_inference, "recommend_inference")):
        real = getattr(mod, name)

        def counted(*a: Any, _real: Any = real, _name: str = name, **k: Any) -> Any:
            calls.append(_name)
            return _real(*a, **k)
        monkeypatch.setattr(mod, name, counted)
    return calls


def test_the_summary_alone_searches_nothing_and_prints_the_same(searches: list[str]) -> None:
    code, text, err = run("plan", EXAMPLE)
    assert code == 0, err
    assert searches == []  # both jobs name their resources: nothing to search for a face that shows no option
    code, without, _ = run("plan", EXAMPLE, "--no-alternatives")
    assert code == 0 and text == without


def test_a_report_still_lists_the_alternatives(searches: list[str], tmp_path: Path) -> None:
    report = tmp_path / "plan.json"
    code, text, err = run("plan", EXAMPLE, "-o", str(report))
    assert code == 0, err
    assert sorted(set(searches)) == ["recommend_inference", "recommend_training"]
    jobs = json.loads(report.read_text())["jobs"]
    assert all(j["options"] for j in jobs)  # each job's alternatives, as before
    code, summary, _ = run("plan", EXAMPLE)
    assert text == summary + f"report written to {report}\n"  # the summary beside a report: the same words
