"""A model type transformers has no tensor-parallel plan for (Falcon, StableLM, Mamba-2, Mllama): transformers 5.24
raises for ``tp_size > 1`` (transformers/distributed/mixin.py:257-264, "`tp_size=...` was requested, but ... has no
`tp_plan`"; the model's assembled plan is empty, tests/formulas/test_transformers_tp_plan.py reads it from the built
model). So an estimate at tensor_parallel 2 on transformers is refused in one line naming the field (exit 2), and fit
serves such a model as replicas at TP 1 on transformers while vLLM (which shards Falcon) may split it.
"""

from __future__ import annotations

import pytest

from cli.cli_run import answer, run


@pytest.mark.parametrize("model", ["falcon-40b", "stablelm-2-12b", "mamba-codestral-7b-v0.1"])
def test_infer_refuses_transformers_tensor_parallel_without_a_plan(model, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(["infer", model, "--engine", "transformers", "--tensor-parallel", "2"], capsys)
    assert code == 2 and not out
    assert len(err.strip().splitlines()) == 1 and "no tensor-parallel plan" in err


def test_a_planned_model_is_not_refused(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, _ = run(["infer", "llama-3.1-8b", "--engine", "transformers", "--tensor-parallel", "2"], capsys)
    assert code == 0


def test_fit_serves_falcon_as_replicas_on_transformers(capsys: pytest.CaptureFixture[str]) -> None:
    code, data = answer(["fit", "falcon-40b", "--device", "h100", "--count", "4", "--engine", "transformers"], capsys)
    assert data["tensor_parallel"] == 1 and data["replicas"] == 4
    code, data = answer(["fit", "falcon-40b", "--device", "h100", "--count", "4", "--engine", "vllm"], capsys)
    assert data["tensor_parallel"] > 1
