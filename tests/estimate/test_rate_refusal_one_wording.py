"""review31 N1: fit's and recommend's refusal of a request rate on an engine that does not batch continuously name
the engines from the one set (``ENG.PREFILL_SCHEDULING``), so an engine added there is named by both."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from llmsizer.estimate import engines as ENG
from llmsizer.estimate.fit import no_rate_load
from llmsizer.recommend import engine_serves_no_rate


def test_both_refusals_name_the_engines_of_the_one_set(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(ENG.PREFILL_SCHEDULING, "newengine", next(iter(ENG.PREFILL_SCHEDULING.values())))
    said = "request_rate needs an engine that batches continuously (vllm, sglang, llamacpp, newengine)"
    fit_refusal = no_rate_load(SimpleNamespace(engine="transformers", speed=None))  # type: ignore[arg-type]
    rec_refusal = engine_serves_no_rate("transformers")
    assert rec_refusal is not None
    assert said in str(fit_refusal) and said in str(rec_refusal), (str(fit_refusal), str(rec_refusal))
    assert engine_serves_no_rate("newengine") is None
