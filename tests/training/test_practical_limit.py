"""Training with no deadline: the practical limit (recommend.PRACTICAL_TRAINING_SECONDS, 90 days) acts as a deadline
does: instances are added to meet it, and an option that cannot (local hardware) is rejected as too slow, not listed
as meeting every constraint; --deadline replaces the limit. The one home is
recommend_training, which `recommend --train` and a plan's training options (plan/training.py) both call.

The CPU run's length is checked independently of llmsizer's duration model: a 70B full fine-tune on 1B tokens
with full activation checkpointing is >= 8 x 70e9 x 1e9 = 5.6e20 FLOPs (forward 2N, backward 4N, recompute 2N per
token); one AMD EPYC 9654 (96 Zen 4 cores at most 3.7 GHz boost; an upper bound on its BF16 rate: 128 FLOP per core
per cycle, twice what one 512-bit VDPBF16PS a cycle gives, so 45.5 TFLOP/s) needs >= 1.2e7 s = 143 days even at that
bound, past 90 days whatever the utilisation.
"""

from __future__ import annotations

import pytest

from llmsizer.recommend import PRACTICAL_TRAINING_SECONDS, Constraints, recommend_training

FIELDS = {"method": "full", "zero": 3, "micro_batch": 1, "seq_len": 4096, "grad_checkpointing": "full"}
CPU = "gcp-c3d-standard-360"  # 1 x amd-epyc-9654


def _rec(deadline: float | None = None, **extra: str):
    return recommend_training("llama-3.1-70b-instruct", tokens=1e9, training_fields={**FIELDS, **extra},
                              constraints=Constraints(deadline=deadline))


def test_the_cpu_run_scales_out_to_the_limit_without_a_deadline() -> None:
    """The one-instance CPU run is past 90 days (the floor above), so meeting the limit takes more instances, as
    --deadline 90d would add (probe4 defect 2: the limit used to reject the option instead). The catalog gives the
    c3d instance no network, and its one CPU no link: the instances' gradient collectives would have no bandwidth to
    be timed at, so without --network the scaled-out run is rejected (probe28 D3), with one it is timed over it."""
    floor = 8 * 70e9 * 1e9 / (96 * 64 * 2 * 3.7e9)
    assert floor > PRACTICAL_TRAINING_SECONDS  # the independent floor above
    untimed = next(o for o in _rec().rejected if o.target == CPU)
    assert untimed.instances > 1 and "cannot be timed" in untimed.reasons[0]
    rec = _rec(network="200Gbps")
    assert all((o.training_seconds or 0) <= PRACTICAL_TRAINING_SECONDS for o in rec.options)
    cpu = next(o for o in rec.options if o.target == CPU)
    assert cpu.instances >= -(-floor // PRACTICAL_TRAINING_SECONDS)
    assert any("practical limit" in r for r in cpu.reasons)
    assert any(a.name == "practical_training_limit" for a in rec.assumptions)


def test_no_deadline_gives_the_options_of_a_deadline_equal_to_the_limit() -> None:
    none, same = _rec(), _rec(PRACTICAL_TRAINING_SECONDS)
    assert [(o.target, o.count) for o in none.options] == [(o.target, o.count) for o in same.options]
    assert none.options


def test_local_hardware_past_the_limit_is_rejected_with_the_deadline_hint() -> None:
    """Local hardware does not scale out: a 0.5B full run on 1T tokens is >= 6 x 0.49e9 x 1e12 = 2.9e21 FLOPs; an
    Apple M1 Max GPU (32 cores x 128 FP32 lanes x 2 FLOP x 1.3 GHz = 10.6 TFLOP/s, no faster in bf16) needs >= 2.8e8 s
    (9 years) at that bound, past 90 days."""
    assert 6 * 0.49e9 * 1e12 / (32 * 128 * 2 * 1.3e9) > PRACTICAL_TRAINING_SECONDS
    rec = recommend_training("qwen2.5-0.5b", tokens=1e12, training_fields={"method": "full", "seq_len": 2048},
                             constraints=Constraints())
    m1 = next(o for o in rec.rejected if o.target == "apple-m1-max-32gb")
    assert "practical limit" in m1.reasons[0] and "--deadline" in m1.reasons[0]


@pytest.mark.parametrize("deadline", [400 * 30 * 86400.0])
def test_a_given_deadline_replaces_the_limit(deadline: float) -> None:
    """A deadline longer than the CPU run (400 months) is the user's own: the run meets it."""
    rec = _rec(deadline)
    assert any(o.target == CPU for o in rec.options)
    assert not any(a.name == "practical_training_limit" for a in rec.assumptions)
