"""Training with no deadline: an option past the practical limit (recommend.PRACTICAL_TRAINING_SECONDS, 90 days)
is rejected as too slow, not listed as meeting every constraint; --deadline replaces the limit. The one home is
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


def _rec(deadline: float | None = None):
    return recommend_training("llama-3.1-70b-instruct", tokens=1e9, training_fields=FIELDS,
                              constraints=Constraints(deadline=deadline))


def test_the_cpu_run_is_too_slow_without_a_deadline() -> None:
    assert 8 * 70e9 * 1e9 / (96 * 64 * 2 * 3.7e9) > PRACTICAL_TRAINING_SECONDS  # the independent floor above
    rec = _rec()
    assert all((o.training_seconds or 0) <= PRACTICAL_TRAINING_SECONDS for o in rec.options)
    cpu = next(o for o in rec.rejected if o.target == CPU)
    assert cpu.reasons[0].startswith("too slow:") and "--deadline" in cpu.reasons[0]
    assert any(a.name == "practical_training_limit" for a in rec.assumptions)


@pytest.mark.parametrize("deadline", [400 * 30 * 86400.0])
def test_a_given_deadline_replaces_the_limit(deadline: float) -> None:
    """A deadline longer than the CPU run (400 months) is the user's own: the run meets it."""
    rec = _rec(deadline)
    assert any(o.target == CPU for o in rec.options)
    assert not any(a.name == "practical_training_limit" for a in rec.assumptions)
