"""``budget_left_bytes`` is what the need leaves of the budget, budget - need, where the budget is the device memory
less the headroom (estimate/verdict.py eq. 1: memory x (1 - headroom)); ``headroom_bytes``, the name this number had,
is kept as a deprecated alias for one release (docs/nomenclature.md, web/API.md). Checked on the numbers given on
the command line: 24 GiB with a 20 % headroom, so the headroom is 4.8 GiB and the budget 19.2 GiB (issue #12/#16)."""

from __future__ import annotations

import pytest

from cli.cli_run import answer

MEMORY, HEADROOM = 24 * 2**30, 0.2
ARGS = ("qwen2.5-0.5b", "--engine", "transformers", "--memory", "24GiB", "--headroom", "0.2", "--context", "4096")


def test_infer_details(capsys: pytest.CaptureFixture[str]) -> None:
    _, out = answer(["infer", *ARGS], capsys)
    d, need = out["details"], out["totals"]["device"]["bytes"]
    budget = int(MEMORY * (1 - HEADROOM))
    assert d["memory_budget"] == budget and d["verdict_basis"] == "expected"
    assert d["budget_left_bytes"] == budget - need > 0
    assert d["budget_left_bytes"] != MEMORY - budget  # not the headroom (4.8 GiB held back)
    assert d["headroom_bytes"] == d["budget_left_bytes"]  # the deprecated alias: the same number


def test_fit_json(capsys: pytest.CaptureFixture[str]) -> None:
    _, out = answer(["fit", *ARGS[:3], "--device", "rtx-4090", "--memory", "24GiB", "--headroom", "0.2",
                     "--context", "4096"], capsys)
    budget = int(MEMORY * (1 - HEADROOM))
    assert out["budget_per_device"] == budget
    assert out["budget_left_bytes"] == budget - out["memory_per_device"] > 0
    assert out["headroom_bytes"] == out["budget_left_bytes"]
