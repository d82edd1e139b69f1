"""recfix D7, D8: recommend --train's scale-out search and its FLOP headline.

D7: an instance type that held the run's memory but missed the deadline (even with instances added) stopped the
scale-out search, so a faster type that needs a model-parallel layout over several instances was never sized: no
option, where 4 x an 8-GPU instance at TP 4 finishes in hours. The search now runs whenever no option meets every
constraint, over the types that do not hold the run (those that do grow by data-parallel instances), with its
assumption named. The truth: the printed ``fit --train`` command, run through the CLI's parser and fit_training,
fits and finishes inside the deadline.

D8: the headline's FLOP/token was the workload's TP's, where an option's duration counts the FLOPs its own layout
runs (the matrices torchtitan keeps whole on every TP rank, DeepSeek-V3's MLA down-projections: (tp - 1) x their
share again). Each option now carries fit_training's count for its layout, and the headline is the chosen one's."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from tests.training.test_recommend_scale_out import _run_printed

import llmsizer
from llmsizer.recommend import Constraints, recommend_training

# a slow accelerator with much memory (one holds an 8B full fine-tune) and a fast one with little (8 per instance,
# several instances needed); provider 'recfix' keeps the built-in catalog out of the search
HW = {
    "devices": [
        {"id": "rf-big-slow", "name": "big slow", "kind": "gpu", "form_factor": "datacenter", "memory": "192GiB",
         "memory_bandwidth": "2000 GB/s", "flops": {"bf16": "2 TFLOP/s"}, "interconnect_bandwidth": "300 GB/s",
         "tdp": "400 W"},
        {"id": "rf-small-fast", "name": "small fast", "kind": "gpu", "form_factor": "datacenter", "memory": "16GiB",
         "memory_bandwidth": "2000 GB/s", "flops": {"bf16": "400 TFLOP/s"}, "interconnect_bandwidth": "300 GB/s",
         "tdp": "400 W"},
    ],
    "instances": [
        {"id": "rf-big-1", "name": "big1", "provider": "recfix", "device": "rf-big-slow", "device_count": 1,
         "price": 4.0, "network": "100 Gb/s"},
        {"id": "rf-small-8", "name": "small8", "provider": "recfix", "device": "rf-small-fast", "device_count": 8,
         "price": 32.0, "network": "3200 Gb/s"},
    ],
}
DAY = 86400.0


@pytest.fixture()
def hw(tmp_path: Path) -> str:
    p = tmp_path / "recfix-hardware.json"
    p.write_text(json.dumps(HW), "utf-8")
    return str(p)


def test_a_type_that_holds_the_run_but_misses_the_deadline_does_not_stop_the_search(hw: str) -> None:
    rec = recommend_training("llama-3.1-8b", tokens=1e9, constraints=Constraints(providers=("recfix",), deadline=DAY),
                             hardware_files=[hw])
    # the slow type holds the run on one instance (its memory fits) but cannot meet the day
    big = next(o for o in rec.rejected if o.target == "rf-big-1")
    assert "misses the 24.0 h deadline" in big.reasons[0]
    one = llmsizer.fit_training("llama-3.1-8b", "rf-big-1", None, hardware_files=[hw])
    assert one.fits
    # before: no option (exit 1); now the fast type over several instances with a searched layout
    assert rec.chosen is not None and rec.chosen.target == "rf-small-8", (rec.rejected, rec.advice)
    c = rec.chosen
    assert c.instances > 1 and "(searched)" in (c.layout or "")
    args, fr = _run_printed(next(r for r in c.reasons if "scale-out search" in r))
    assert (args.device, args.count) == ("rf-small-8", c.count)
    assert fr.fits and fr.duration is not None and fr.duration.seconds is not None
    assert fr.duration.seconds <= DAY and fr.duration.seconds == pytest.approx(c.training_seconds, rel=1e-12)
    # the search and why it ran are named
    note = next(a for a in rec.assumptions if a.name == "scale_out_cap")
    assert "no option meets every constraint" in note.why and "holds the run" in note.why
    assert rec.advice and rec.advice[0].startswith("no option meets every constraint: the 1 instance type that holds")


def test_no_layout_searched_when_an_option_meets(hw: str) -> None:
    """A deadline the slow type meets with instances added: an option meets, so no TP / PP / EP layout is searched
    (no advice, no searched layout); the type one instance of which is short of memory is grown only with the
    workload's own layout (recscale), which data parallelism alone does not fit here: fit_training says so at 64
    instances."""
    rec = recommend_training("llama-3.1-8b", tokens=1e7, constraints=Constraints(providers=("recfix",), deadline=DAY),
                             hardware_files=[hw])
    assert rec.chosen is not None and rec.chosen.target == "rf-big-1"
    assert not rec.advice and not any("(searched)" in (o.layout or "") for o in (*rec.options, *rec.rejected))
    note = next(a for a in rec.assumptions if a.name == "scale_out_cap")
    assert "with the layout the workload states" in note.why
    assert not any(o.target == "rf-small-8" for o in rec.options)
    assert not llmsizer.fit_training("llama-3.1-8b", "rf-small-8", 64 * 8, hardware_files=[hw], fits_at=False).fits


TORCHTITAN = dict(framework="torchtitan", precision="bf16-mixed", fsdp="full", seq_len=32768,
                  grad_checkpointing="full")


def test_each_options_flops_per_token_is_fit_trainings_for_its_layout() -> None:
    rec = recommend_training("deepseek-v3", tokens=1e9, constraints=Constraints(providers=("aws",)), **TORCHTITAN)
    assert rec.chosen is not None
    searched_tp = False
    for opt in rec.options:
        args, fr = _run_printed(next(r for r in opt.reasons if "scale-out search" in r))
        assert fr.duration is not None
        assert opt.flops_per_token == pytest.approx(fr.duration.flops_per_token, rel=1e-12)
        searched_tp |= int(args.tp or 1) > 1
    assert searched_tp  # the case D8 is about: a searched TP whose replicated matrices count again
    c = rec.chosen
    assert rec.workload["flops_per_token"] == c.flops_per_token
    assert rec.workload["total_flops"] == pytest.approx(1e9 * (c.flops_per_token or 0), rel=1e-12)
    # the same option at the stated TP (1) counts fewer, the number the headline gave before (1.080e12 for the
    # chosen B200 option's 1.087e12 at its searched TP 2 / EP 2)
    args, _ = _run_printed(next(r for r in c.reasons if "scale-out search" in r))
    if int(args.tp or 1) > 1:
        at_tp1 = llmsizer.fit_training("deepseek-v3", c.target, c.count, tokens=1e9, pp=int(args.pp or 1),
                                       ep=int(args.ep or 1), **TORCHTITAN)
        assert at_tp1.duration is not None
        assert rec.workload["flops_per_token"] > at_tp1.duration.flops_per_token
