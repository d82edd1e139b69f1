"""A machine size given to fit (``--gpus-per-node``, ``gpus_per_node=``) is checked in its one home,
estimate/fit.py ``serving_machine_size`` (review18 D2, D4), so fit, fit --train, the search and the web (which runs
fit's CLI answer) refuse alike:

- D2: it contradicts the instance named (an instance is one machine of its own devices). Independent truth: Microsoft's
  NC A100 v4 series page, "Standard_NC96ads_A100_v4 ... 4 GPUs" (A100 80GB PCIe); AWS's P4d page, p4d.24xlarge has 8
  A100 40GB. Before, ``--gpus-per-node 8`` on 2 NC96ads VMs treated TP 8 as within one machine and dropped the
  spanning warning, exit 0.
- D4: the devices do not fill whole machines of that size: 8 GPUs over machines of 3 (8 / 3 is not whole), the
  shape a request file's ``resources: {count: 3, nodes: 2}`` is refused for. Both refusals are worded by one function
  (specs/training.py ``uneven_machines``). Before, fit took it, exit 0, "tensor parallel 4 spans 2 machines of 3".
  A plan of bare GPUs without resources.nodes leaves the size to fit (12 GPUs: 8 + 4, not refused):
  tests/plan/test_bare_machines_as_fit.py.
"""

from __future__ import annotations

import pytest

from cli_capture import run
from llmsizer.errors import FieldError, InputError
from llmsizer.estimate.fit import fit, fit_training
from llmsizer.plan import make_plan
from llmsizer.request import parse_request
from llmsizer.specs.training import uneven_machines

NC96 = "azure-standard_nc96ads_a100_v4"  # Microsoft: NC A100 v4 series, NC96ads_A100_v4 = 4 x A100 80GB PCIe
NC96_GPUS = 4
P4D = "aws-p4d.24xlarge"  # AWS: p4d.24xlarge = 8 x A100 40GB
P4D_GPUS = 8


def _one_line(code: int, err: str) -> str:
    lines = [ln for ln in err.strip().splitlines() if ln]
    assert code == 2 and len(lines) == 1, (code, err)
    return lines[0]


def test_gpus_per_node_contradicting_the_instance_is_refused_naming_both() -> None:
    with pytest.raises(FieldError) as e:
        fit("llama-3.1-8b", NC96, 8, engine="vllm", gpus_per_node=2 * NC96_GPUS)
    assert e.value.field == "gpus_per_node"
    assert f"gpus_per_node {2 * NC96_GPUS}" in str(e.value) and f"{NC96_GPUS} devices" in str(e.value)
    code, _, err = run("fit", "qwen3-235b-a22b", "--device", NC96, "--count", "8", "--weights", "bf16", "--engine",
                       "vllm", "--context", "8k", "--concurrency", "8", "--gpus-per-node", str(2 * NC96_GPUS))
    line = _one_line(code, err)
    assert f"--gpus-per-node {2 * NC96_GPUS}" in line and NC96 in line and f"{NC96_GPUS} devices" in line


def test_gpus_per_node_equal_to_the_instance_changes_nothing() -> None:
    given = fit("llama-3.1-8b", NC96, 8, engine="vllm", context=8192, concurrency=8, gpus_per_node=NC96_GPUS)
    left_out = fit("llama-3.1-8b", NC96, 8, engine="vllm", context=8192, concurrency=8)
    assert (given.tensor_parallel, given.replicas, given.warnings) == (left_out.tensor_parallel, left_out.replicas,
                                                                       left_out.warnings)


def test_training_fit_refuses_the_same_contradiction() -> None:
    with pytest.raises(FieldError) as e:
        fit_training("llama-3.1-8b", P4D, 16, gpus_per_node=P4D_GPUS // 2)
    assert e.value.field == "gpus_per_node" and f"{P4D_GPUS} devices" in str(e.value)
    assert fit_training("llama-3.1-8b", P4D, 16, gpus_per_node=P4D_GPUS).fits is not None


def test_uneven_machines_refused_as_the_plan_refuses_uneven_nodes() -> None:
    assert 8 % 3 and 3 % 2  # neither shape is whole machines
    with pytest.raises(FieldError) as e:
        fit("llama-3.1-70b", "h100-sxm", 8, engine="vllm", gpus_per_node=3)
    fit_words = str(e.value)
    assert e.value.field == "gpus_per_node" and uneven_machines(8, per_node=3) in fit_words
    code, _, err = run("fit", "llama-3.1-70b", "--device", "h100-sxm", "--count", "8", "--gpus-per-node", "3",
                       "--engine", "vllm")
    assert "8 devices do not split evenly over machines of 3" in _one_line(code, err)
    text = ("version: 1\ntitle: t\njobs:\n- name: j\n  kind: inference\n  model: {name: llama-3.1-8b}\n"
            "  resources: {device: a40, count: 3, nodes: 2}\n  traffic:\n    concurrency: {peak: 2, typical: 1}\n")
    with pytest.raises(InputError) as p:
        make_plan(parse_request(text, source="r.yaml"), alternatives=False)
    assert uneven_machines(3, nodes=2) in str(p.value)
    # the one rule's words, both shapes
    assert fit_words.split(": ", 1)[1].startswith("8 devices do not split evenly over")
    assert uneven_machines(3, nodes=2) == "3 devices do not split evenly over 2 nodes"


def test_whole_machines_and_one_partial_machine_are_taken() -> None:
    assert uneven_machines(8, per_node=4) is None and uneven_machines(2, per_node=8) is None
    r = fit("llama-3.1-70b", "h100-sxm", 8, engine="vllm", gpus_per_node=4)
    assert r.tensor_parallel in (2, 4, 8)
    assert fit("llama-3.1-8b", "h100-sxm", 2, engine="vllm", gpus_per_node=8).tensor_parallel in (1, 2)



def test_training_refuses_uneven_machines_with_or_without_a_device_naming_the_flag_given() -> None:
    """probe18 D4/F1: ``train --gpus 8 --gpus-per-node 3`` ran (exit 0, a full table) without ``--device`` and was
    refused with one; ``fit --train --gpus 8`` was refused but told the user to give a ``--count``. 8 / 3 is not whole
    machines (the plan's own rule, ``uneven_machines``): every path refuses it in one line, naming the flag given."""
    words = uneven_machines(8, per_node=3)
    assert words is not None
    for argv, flag in ((["train", "llama-3.1-8b", "--gpus", "8", "--gpus-per-node", "3"], "--gpus"),
                       (["train", "llama-3.1-8b", "--gpus", "8", "--gpus-per-node", "3", "--device", "h100-sxm"],
                        "--gpus"),
                       (["train", "llama-3.1-8b", "--gpus", "8", "--gpus-per-node", "3", "--fsdp", "hybrid"], "--gpus"),
                       (["fit", "llama-3.1-8b", "--train", "--device", "h100-sxm", "--gpus", "8", "--gpus-per-node",
                         "3"], "--gpus"),
                       (["fit", "llama-3.1-8b", "--train", "--device", "h100-sxm", "--count", "8", "--gpus-per-node",
                         "3"], "--count")):
        code, _, err = run(*argv)
        line = _one_line(code, err)
        assert words in line and f"make {flag} a multiple of 3" in line, (argv, line)
        assert ("--count" if flag == "--gpus" else "--gpus ") not in line, (argv, line)
    assert run("train", "llama-3.1-8b", "--gpus", "9", "--gpus-per-node", "3")[0] == 0  # whole machines: taken


def test_python_estimate_training_refuses_uneven_machines_as_train_does() -> None:
    # probe19 D4: estimate_training(gpus=12, gpus_per_node=8) answered while `train --gpus 12 --gpus-per-node 8`, the
    # web and fit_training refuse it. Truth: 12 / 8 and 8 / 3 are not whole numbers of machines.
    from llmsizer import estimate_training
    for gpus, per_node in ((12, 8), (8, 3)):
        with pytest.raises(FieldError) as e:
            estimate_training("llama-3.1-8b", gpus=gpus, gpus_per_node=per_node)
        code, _, err = run("train", "llama-3.1-8b", "--gpus", str(gpus), "--gpus-per-node", str(per_node))
        line = _one_line(code, err)  # the same words, the fields written as the flags the user gave
        assert e.value.field == "gpus_per_node"
        assert str(e.value).startswith(f"gpus_per_node {per_node}: {uneven_machines(gpus, per_node=per_node)}")
        assert line.endswith(str(e.value).replace("gpus_per_node", "--gpus-per-node").replace("make gpus",
                                                                                                "make --gpus"))
    # the same workload given as a TrainingWorkload (review24 D4: only keyword calls were checked)
    from llmsizer.specs import TrainingWorkload
    with pytest.raises(FieldError):
        estimate_training("llama-3.1-8b", TrainingWorkload(gpus=12, gpus_per_node=8))
    # whole machines, and bare devices with the machine size left unstated (12 as 8 + 4, fit's layout), still answer
    assert estimate_training("llama-3.1-8b", gpus=6, gpus_per_node=3).total("device")[1] > 0
    assert estimate_training("llama-3.1-8b", gpus=12).total("device")[1] > 0
