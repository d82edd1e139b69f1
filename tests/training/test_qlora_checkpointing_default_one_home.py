"""review8 #8: QLoRA's activation-checkpointing default (peft ``prepare_model_for_kbit_training``,
``use_gradient_checkpointing=True``: specs/training.py ``default_grad_checkpointing``) resolves in one place that
every path reads. Before, it was fixed once at construction: ``dataclasses.replace`` of a full-training workload to
QLoRA kept 'none' and the assumptions called it "(default)"; and ``measure train`` had a default of its own,
'none', so ``measure train --method qlora`` ran another recipe than ``train --method qlora`` sizes."""

from __future__ import annotations

import dataclasses

from llmsizer import TrainingWorkload, estimate_training
from llmsizer.measure.settings import MeasureSettings

MODEL = "qwen2.5-0.5b"


def _checkpointing(est) -> tuple[object, bool, str]:
    (a,) = [a for a in est.assumptions if a.name == "grad_checkpointing"]
    return a.value, a.default, a.why


def test_a_copy_with_another_method_takes_that_methods_default() -> None:
    built = TrainingWorkload(method="qlora")
    copied = dataclasses.replace(TrainingWorkload(method="full"), method="qlora")
    assert built.grad_checkpointing == "full"  # peft's k-bit preparation turns it on
    assert copied.grad_checkpointing == "full"  # before: 'none'
    # the copy is estimated as the QLoRA workload built directly: same bytes, same labelled default
    a, b = estimate_training(MODEL, built), estimate_training(MODEL, copied)
    assert a.total_bytes == b.total_bytes
    assert _checkpointing(a) == _checkpointing(b) and "prepare_model_for_kbit_training" in _checkpointing(b)[2]
    # and back: a QLoRA copy made full training has no checkpointing, as full training built directly
    back = dataclasses.replace(built, method="full")
    assert back.grad_checkpointing == "none"
    assert estimate_training(MODEL, back).total_bytes == estimate_training(MODEL, TrainingWorkload()).total_bytes


def test_a_stated_value_survives_a_copy() -> None:
    stated = dataclasses.replace(TrainingWorkload(method="qlora"), grad_checkpointing="none")
    assert stated.grad_checkpointing == "none"
    assert dataclasses.replace(stated, rank=8).grad_checkpointing == "none"
    assert dataclasses.replace(TrainingWorkload(method="qlora", grad_checkpointing="none"),
                               method="lora").grad_checkpointing == "none"


def test_measure_train_follows_the_same_default() -> None:
    from llmsizer.cli.main import build_parser
    from llmsizer.cli.measure_cmd import _settings

    for method in ("qlora", "lora", "full"):
        args = build_parser(["measure", "train", MODEL, "--method", method]).parse_args(
            ["measure", "train", MODEL, "--method", method])
        s = _settings(args)
        assert s.grad_checkpointing == TrainingWorkload(method=method).grad_checkpointing, method  # qlora: was none
    # a copy of measure settings re-resolves too; a stated one is kept
    s = MeasureSettings("training", MODEL, method="full")
    assert dataclasses.replace(s, method="qlora").grad_checkpointing == "full"
    assert MeasureSettings("training", MODEL, method="qlora", grad_checkpointing="none").grad_checkpointing == "none"
