"""QLoRA's default activation checkpointing (probe5 defect 4): a QLoRA workload that states no checkpointing gets
peft's k-bit preparation, which turns it on. Truth: peft's own signature,
``prepare_model_for_kbit_training(model, use_gradient_checkpointing=True, ...)`` (peft 0.21.2
src/peft/utils/other.py lines 158-159), read from the installed peft; every other method keeps none."""

from __future__ import annotations

import inspect

import pytest

from cli_capture import run_json
from llmsizer import estimate_training
from llmsizer.specs import TrainingWorkload
from llmsizer.specs.training import default_grad_checkpointing


def test_peft_kbit_preparation_checkpoints_by_default() -> None:
    peft = pytest.importorskip("peft")
    default = inspect.signature(peft.prepare_model_for_kbit_training).parameters["use_gradient_checkpointing"].default
    assert default is True
    assert default_grad_checkpointing("qlora") == "full"


@pytest.mark.parametrize("method, expected", [("qlora", "full"), ("lora", "none"), ("full", "none"), ("dora", "none")])
def test_workload_default_by_method(method: str, expected: str) -> None:
    w = TrainingWorkload(method=method)
    assert w.grad_checkpointing == expected
    assert "grad_checkpointing" not in (w.given or ())  # a default, not the caller's


def test_a_given_setting_wins() -> None:
    w = TrainingWorkload(method="qlora", grad_checkpointing="none")
    assert w.grad_checkpointing == "none" and "grad_checkpointing" in (w.given or ())


def test_assumption_names_the_default_and_its_source() -> None:
    est = estimate_training("llama-3.1-8b", method="qlora")
    (a,) = [a for a in est.assumptions if a.name == "grad_checkpointing"]
    assert (a.value, a.default) == ("full", True)
    assert "prepare_model_for_kbit_training" in a.why
    none = estimate_training("llama-3.1-8b", method="qlora", grad_checkpointing="none")
    assert none.total("device")[1] > est.total("device")[1]  # every layer's activations kept again


def test_fit_and_train_answer_qlora_8b_on_a_24gb_card_with_checkpointing() -> None:
    # the probe's question: QLoRA of an 8B on an RTX 4090 (24 GB) answered with the recipe's checkpointing
    code, d = run_json("fit", "llama-3.1-8b", "--train", "--method", "qlora", "--device", "rtx-4090")
    assert code == 0 and d["fits"] is True
    (a,) = [a for a in d["memory"]["assumptions"] if a["name"] == "grad_checkpointing"]
    assert a["value"] == "full" and a["default"] is True
    code, d = run_json("fit", "llama-3.1-8b", "--train", "--method", "qlora", "--device", "rtx-4090",
                       "--grad-checkpointing", "none")
    assert code == 1 and d["fits"] is False
