"""recommend --train: an option scaled out to meet the practical limit quotes the memory of the layout it chose
(the instances it adds shard ZeRO's optimizer states further), not the one-instance evaluation's (probe8 defect 4)."""

from __future__ import annotations

import re

from llmsizer.estimate.fit import fit_training
from llmsizer.recommend import Constraints, recommend_training


def test_scaled_out_option_quotes_its_own_memory() -> None:
    rec = recommend_training("llama-3.1-8b", tokens=1e12, seq_len=8192, constraints=Constraints(max_cost=2e6))
    chosen = next(o for o in rec.options if o.status == "chosen")
    assert chosen.instances is not None and chosen.instances > 1  # 1T tokens: one instance is past 90 days
    needs = next(r for r in chosen.reasons if r.startswith("needs "))
    quoted = float(re.match(r"needs ([0-9.]+) GiB", needs).group(1))  # type: ignore[union-attr]
    assert abs(quoted - chosen.memory_per_device / 2**30) < 0.006
    one = fit_training("llama-3.1-8b", chosen.target, None, seq_len=8192, fits_at=False)
    many = fit_training("llama-3.1-8b", chosen.target, chosen.count, seq_len=8192, fits_at=False)
    # ZeRO's optimizer shard over twice the devices: the scaled-out layout needs less, and that is the one quoted
    assert many.memory_per_device < one.memory_per_device
    assert abs(quoted - many.memory_per_device / 2**30) < 0.006
    assert abs(quoted - one.memory_per_device / 2**30) > 1.0
