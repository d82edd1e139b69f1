"""The communication-bound warning has one home, the duration (estimate/duration.py ``comm_bound_warning``, threshold
COMM_BOUND_SHARE), so every surface that times a training run says it alike (review32 D2).

Before: only the plan warned ("network-bound", its own 0.5 in plan/checks.py); `fit --train`, `train` and
`recommend --train` of the same run gave the same 9.0 years and no such warning. The case is review32's: the
multi-node pre-training example with grad accumulation 1, ZeRO-3 and a 10 Gb/s network per machine.

The truth the surfaces are held to is the step's own figures, not the message: communication not hidden by compute
over the step's wall clock (StepTime.exposed_comm_seconds x micro_steps / step_seconds) against the threshold."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import yaml

from cli_capture import run
from llmsizer.estimate.duration import (
    COMM_BOUND_ACROSS,
    COMM_BOUND_HEAD,
    COMM_BOUND_REMEDY,
    COMM_BOUND_SHARE,
    comm_bound_message,
    comm_bound_warning,
)
from llmsizer.plan import plan_file

ROOT = Path(__file__).resolve().parents[2]
FIT = ("fit", "llama-3.1-8b", "--device", "p5.48xlarge", "--count", "64", "--train", "--method", "full",
       "--precision", "deepspeed-bf16", "--batch", "1", "--seq", "1k", "--grad-accumulation", "1",
       "--grad-checkpointing", "full", "--attention", "flash", "--zero", "3", "--tokens", "500B")


def _request(tmp_path: Path, network: str) -> Path:
    req = yaml.safe_load((ROOT / "examples" / "pretraining-multinode.yaml").read_text())
    job = copy.deepcopy(req["jobs"][0])
    job["settings"].update(micro_batch=1, seq_len="1k", grad_accumulation=1, grad_checkpointing="full",
                           attention="flash", zero=3)
    job["resources"]["network"] = network
    req["jobs"] = [job]
    path = tmp_path / "net.yaml"
    path.write_text(yaml.safe_dump(req, sort_keys=False))
    return path


def _fit(network: str) -> dict:
    code, out, err = run(*FIT, "--network", network, "--json")
    assert code == 0, err
    return json.loads(out)


def test_fit_train_and_plan_say_the_same_communication_bound_warning(tmp_path) -> None:
    fit = _fit("10Gb/s")
    step = fit["training_time"]["step"]
    share = step["exposed_comm_seconds"] * step["micro_steps"] / step["step_seconds"]  # the step's own figures
    assert share > COMM_BOUND_SHARE and step["comm_share"] == share, step
    said = [w for w in fit["training_time"]["warnings"] if w.startswith(COMM_BOUND_HEAD)]
    assert len(said) == 1, fit["training_time"]["warnings"]
    code, text, err = run(*FIT, "--network", "10Gb/s")  # fit's text says it as a warning line
    assert code == 0 and f"warning: {said[0]}" in text.splitlines(), (err, text[-2000:])
    plan = plan_file(_request(tmp_path, "10 Gb/s"))
    job = plan.job("pretrain-8b")
    assert job.facts["comm_share"] == share  # the same run on both surfaces
    check = next(c for c in plan.checks if c.id == "network-bound")
    assert said[0] == f"{COMM_BOUND_HEAD}{check.message} ({check.advice})", (said, check)
    # 64 GPUs on 8 machines: the collectives cross machines, so fewer machines is a remedy (probe25 C5)
    assert check.advice == COMM_BOUND_ACROSS + COMM_BOUND_REMEDY and f"takes {share:.0%} of each step" in check.message
    assert said[0] not in job.warnings  # said once in the plan: as its check
    # train, the same run on the same devices: the same line
    code, out, err = run("train", *FIT[1:3], "h100-sxm", "--gpus", "64", "--gpus-per-node", "8", *FIT[7:],
                         "--network", "10Gb/s")
    assert code == 0 and f"warning: {said[0]}" in out.splitlines(), (err, out[-2000:])


def test_a_fast_network_is_not_communication_bound_anywhere(tmp_path) -> None:
    fit = _fit("3200Gb/s")
    step = fit["training_time"]["step"]
    assert step["exposed_comm_seconds"] * step["micro_steps"] / step["step_seconds"] <= COMM_BOUND_SHARE, step
    assert not [w for w in fit["training_time"]["warnings"] if w.startswith(COMM_BOUND_HEAD)]
    plan = plan_file(_request(tmp_path, "3200 Gb/s"))
    assert not [c for c in plan.checks if c.id == "network-bound"]


def test_below_the_threshold_no_words() -> None:
    class Step:
        comm_share = COMM_BOUND_SHARE
    assert comm_bound_message(Step()) is None and comm_bound_warning(Step()) is None  # type: ignore[arg-type]
    Step.comm_share = 0.75
    Step.topology = "host-staged"  # type: ignore[attr-defined]  # one machine (2 x RTX 4090 over PCIe): no machine to drop
    assert comm_bound_warning(Step()) == f"{COMM_BOUND_HEAD}{comm_bound_message(Step())} ({COMM_BOUND_REMEDY})"  # type: ignore[arg-type]
    assert "fewer machines" not in COMM_BOUND_REMEDY
    Step.topology = "multi-node"  # type: ignore[attr-defined]
    assert comm_bound_warning(Step()).endswith(f"({COMM_BOUND_ACROSS}{COMM_BOUND_REMEDY})")  # type: ignore[arg-type, union-attr]
