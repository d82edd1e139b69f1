"""probe16 D-B: recommend --train called 8 x H200 (aws-p5en.48xlarge, $298.23, 4.7 h) the "cheapest run that
meets every constraint" while ``fit --train --device aws-p5.48xlarge --count 16`` with the same flags fits at
$266.82 and 2.4 h: an instance type one instance of which is short of memory (p5 at 8 GPUs: 78.29 > 71.68 GiB) was
grown only when no option met. Now each such type is grown to the fewest instances on which the workload's own
layout fits, whatever else meets. The truth: fit_training with the same fields on those devices (the call ``fit
--train --count`` makes), and the printed command run through the CLI's parser."""

from __future__ import annotations

import pytest
from tests.training.test_recommend_scale_out import _run_printed

import llmsizer.recommend as R
from llmsizer.estimate.fit import fit_training
from llmsizer.recommend import recommend_training

TOKENS = 1e9
N1 = dict(method="full", precision="megatron-bf16", micro_batch=1, seq_len=4096, grad_checkpointing="selective",
          tp=2, sequence_parallel=True, ep=8, etp=1, moe_dispatcher="alltoall", ep_comm_overlap=True,
          grad_accumulation=8)


@pytest.fixture(scope="module")
def rec() -> R.Recommendation:
    return recommend_training("qwen3-30b-a3b", tokens=TOKENS, **N1)


def test_the_cheapest_option_is_chosen_and_two_p5_appear_with_fits_numbers(rec: R.Recommendation) -> None:
    one = fit_training("qwen3-30b-a3b", "aws-p5.48xlarge", 8, tokens=TOKENS, fits_at=False, **N1)
    two = fit_training("qwen3-30b-a3b", "aws-p5.48xlarge", 16, tokens=TOKENS, fits_at=False, **N1)
    assert not one.fits and two.fits  # 2 instances are the fewest that hold the stated layout
    assert two.duration is not None and two.duration.seconds is not None
    opt = next(o for o in rec.options if o.target == "aws-p5.48xlarge")  # before: only rejected (8 GPUs)
    assert (opt.count, opt.instances) == (16, 2)
    assert opt.memory_per_device == two.memory_per_device and opt.budget_per_device == two.budget_per_device
    assert opt.training_seconds == pytest.approx(two.duration.seconds, rel=1e-12)
    assert opt.price_per_hour is not None and opt.run_cost is not None
    assert opt.run_cost == pytest.approx(opt.price_per_hour * two.duration.seconds / 3600, rel=1e-12)
    # the chosen option is the cheapest of those listed, and no dearer than the 16-H100 run fit sizes
    chosen = rec.chosen
    assert chosen is not None and chosen.run_cost is not None
    assert chosen.run_cost == min(o.run_cost for o in rec.options if o.run_cost is not None)
    assert chosen.run_cost <= opt.run_cost  # before: $298.23 (8 x H200) > $266.82
    # the option's printed command, through the CLI, gives its numbers (the workload's own layout: nothing searched)
    args, fr = _run_printed(next(r for r in opt.reasons if "the workload's layout fits" in r))
    assert (args.device, args.count, args.tp, args.ep) == ("aws-p5.48xlarge", 16, 2, 8)
    assert fr.fits and fr.memory_per_device == two.memory_per_device
    assert fr.duration is not None and fr.duration.seconds == pytest.approx(opt.training_seconds, rel=1e-12)
    assert "(searched)" not in (opt.layout or "")


def test_the_rule_is_named(rec: R.Recommendation) -> None:
    note = next(a for a in rec.assumptions if a.name == "scale_out_cap")
    assert note.value == f"{R.MAX_SCALE_INSTANCES} instances"
    assert "with the layout the workload states" in note.why and "even when another option meets" in note.why
    assert not rec.advice  # the open layout search (nothing meets) did not run
