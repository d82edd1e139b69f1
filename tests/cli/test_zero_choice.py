"""The ZeRO stage a multi-device training estimate runs at has one home (estimate/training/compose.py
``sharded_workload``): the Python API (``estimate_training(device=..., gpus=8)``, ``estimate_training(memory=...,
gpus=8)``, ``max_micro_batch``) and ``llmsizer train --device/--memory --gpus 8`` choose the same stage and give the
same numbers. Before, only the CLI chose; the Python API sized ZeRO-0, which cannot fit (below)."""

from __future__ import annotations

import pytest
from cli_run import answer, run, totals

from llmsizer import estimate_training, max_micro_batch
from llmsizer.catalog.hardware import builtin_catalog

PARAMS_8B = 8_030_261_248  # Llama-3.1-8B, the model card's 8.03B (exact count: tests/catalog on the meta device)


def zero_of(assumptions: list) -> int:
    return next(int(a["value"] if isinstance(a, dict) else a.value) for a in assumptions
                if (a["name"] if isinstance(a, dict) else a.name) == "zero")


def test_zero_stage_0_cannot_hold_a_full_8b_fine_tune_on_80gb() -> None:
    # independent expectation, ZeRO paper (Rajbhandari et al. 2020) section 3 / figure 1: mixed-precision Adam holds
    # (2 + 2 + 12) bytes per parameter unsharded; stage 1 shards the 12 optimizer bytes over N_d = 8:
    # (2 + 2 + 12 / 8) bytes per parameter
    memory = builtin_catalog().devices["h100-sxm"].memory_bytes
    assert 16 * PARAMS_8B > memory
    assert (4 + 12 / 8) * PARAMS_8B < memory
    est = estimate_training("llama-3.1-8b", device="h100-sxm", gpus=8)
    assert zero_of(list(est.assumptions)) == 1
    assert est.details["fits"]


@pytest.mark.parametrize("where", [("--device", "h100-sxm"), ("--memory", "80GiB")])
def test_python_api_chooses_the_zero_stage_train_chooses(where: tuple[str, str],
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    code, data = answer(["train", "llama-3.1-8b", *where, "--gpus", "8"], capsys)
    kw = {"device": where[1]} if where[0] == "--device" else {"memory": 80 * 2**30}
    est = estimate_training("llama-3.1-8b", gpus=8, **kw)
    assert zero_of(data["assumptions"]) == zero_of(list(est.assumptions)) == 1
    assert totals(data) == totals(est.to_dict())
    assert code == 0 and est.details["fits"]


def test_max_micro_batch_holds_the_chosen_stage_as_train_does(capsys: pytest.CaptureFixture[str]) -> None:
    _, data = answer(["train", "llama-3.1-8b", "--memory", "80GiB", "--gpus", "8", "--seq", "2048", "--max-batch"],
                     capsys)
    got = max_micro_batch("llama-3.1-8b", 80 * 2**30, gpus=8, seq_len=2048)
    assert got == data["reverse"]["max_micro_batch"] > 0


def test_every_stage_refused_names_the_first_stages_reason(capsys: pytest.CaptureFixture[str]) -> None:
    """review16 defect 5: Megatron-Core refuses an MoE model under tp 2 without sequence parallelism (moe_layer.py
    :636-640 @d98e8a64) at every ZeRO stage, and ZeRO-3 for its own reason too; the search must answer with the
    reason that applies to the run (the one the same input gives without --memory), not the last stage's ZeRO-3."""
    args = ["train", "qwen3-30b-a3b", "--precision", "megatron-bf16", "--gpus", "8", "--tp", "2", "--ep", "4"]
    code, _, err = run([*args, "--memory", "80GiB"], capsys)
    code_plain, _, err_plain = run(args, capsys)
    assert code == code_plain == 2 and err == err_plain
    assert "no --sequence-parallel" in err and "ZeRO-3" not in err
