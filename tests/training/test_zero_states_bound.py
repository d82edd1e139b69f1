"""The ZeRO stage search skips measuring a stage whose model states alone are past the budget
(estimate/training/compose.py ``_states_past``): the weights, master weights and optimizer states on the device are
a lower bound of the stage's need. Two checks: the bound is at most the need the full estimate measures (every stage,
method, precision, offload and metric below), and the search answers the same estimate with the skip as with every
stage measured (the search before the skip: the truth it must reproduce)."""

from __future__ import annotations

import itertools
from typing import Any

import pytest

from llmsizer import estimate_training
from llmsizer.catalog.models import find
from llmsizer.errors import InputError
from llmsizer.estimate.caches import clear_caches
from llmsizer.estimate.training import compose
from llmsizer.estimate.training.states import stage_states

GIB = 2**30
MODELS = ("llama-3.1-8b", "qwen3-30b-a3b", "gemma-2-9b-it", "deepseek-v2-lite")
SETTINGS: list[dict[str, Any]] = [
    dict(method=m, precision=p, offload=o, **extra)
    for m, p, o, extra in itertools.product(
        ("full", "lora"), ("bf16-mixed", "fp32"), ("none", "optimizer"),
        ({}, {"grad_checkpointing": "full", "micro_batch": 2, "seq_len": 4096}))
]


def _bound(spec: Any, w: Any) -> int:
    ctx = compose._start(spec, w, None)[1]
    st = stage_states(ctx, 0)
    return st.weights + st.master + st.optimizer


@pytest.mark.parametrize("name", MODELS)
def test_states_are_at_most_the_need(name: str) -> None:
    spec = find(name).spec()
    checked = 0
    for fields, zero, metric in itertools.product(SETTINGS[::3], (0, 1, 2, 3), (None, "allocated", "reserved")):
        if fields["offload"] == "optimizer" and zero == 0:
            continue  # DeepSpeed's optimizer offload needs a stage (refused)
        kw = dict(fields, gpus=8, zero=zero, metric=metric)
        w = compose.training_workload(kw)
        try:
            need = estimate_training(spec, **kw).total("device")[1]
        except InputError:
            continue
        assert _bound(spec, w) <= need, (name, kw)
        checked += 1
    assert checked >= 20


def _answer(spec: Any, kw: dict[str, Any]) -> Any:
    try:
        return estimate_training(spec, **kw).to_dict()
    except InputError as e:
        return str(e)


def _never_past(spec: Any, w: Any, key: Any, budget: Any) -> Any:
    """The search before the skip: every stage measured (the start handed on, as the skip hands it)."""
    acc, ctx = compose._start(spec, w, key)
    return acc, ctx, stage_states(ctx, 0)


@pytest.mark.parametrize("name", MODELS)
def test_search_with_the_skip_answers_as_measuring_every_stage(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    spec = find(name).spec()
    skipped = 0
    for fields, gpus, memory in itertools.product(SETTINGS, (2, 8), (24 * GIB, 80 * GIB, 200 * GIB)):
        kw = dict(fields, gpus=gpus, memory=memory)
        clear_caches(estimates_only=True)
        calls: list[int] = []
        real = compose._states_past

        def counted(*a: Any, _real: Any = real, _calls: list[int] = calls) -> Any:
            out = _real(*a)
            _calls.append(out is None)
            return out

        monkeypatch.setattr(compose, "_states_past", counted)
        fast = _answer(spec, kw)
        skipped += sum(calls)
        monkeypatch.undo()
        clear_caches(estimates_only=True)
        monkeypatch.setattr(compose, "_states_past", _never_past)
        full = _answer(spec, kw)
        monkeypatch.undo()
        assert fast == full, (name, kw)
    assert skipped > 0  # the skip was taken (else this compares nothing)
