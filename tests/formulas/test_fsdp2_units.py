"""formulas/fsdp2_units.py: the cases the 2-rank FSDP2 runs do not reach (tests/training/
test_fsdp2_reduce_scatter_pool.py compares eqs. U1-U4 and the copy-in events with real steps), and the workload's
refusal of a layout without FSDP2."""

from __future__ import annotations

import pytest

from llmsizer.errors import InputError
from llmsizer.formulas.fsdp2_units import copy_in_events, unsharded_bytes
from llmsizer.specs import TrainingWorkload


def test_unsharded_bytes_refuses_untraced_layout_and_unknown_moment() -> None:
    with pytest.raises(InputError, match="no traced FSDP2 layout"):
        unsharded_bytes("largest-two", "loss", 10, 1)
    with pytest.raises(InputError, match="unknown moment"):
        unsharded_bytes("torchtitan", "optimizer step", 10, 1)


def test_copy_in_events_one_rank_and_no_root() -> None:
    assert copy_in_events("torchtitan", 100, [10, 10], 1) == []  # one rank: FSDP2 copies the shard, no all-gather
    ev = copy_in_events("torchtitan-resharded", 0, [10, 10], 2)  # no root unit (a pipeline stage's middle)
    assert [n for k, n in ev if k == "alloc"] == [5, 10, 5, 10, 5, 10]


def test_fsdp2_units_needs_fsdp2() -> None:
    with pytest.raises(InputError, match="fsdp2_units 'torchtitan' lays out FSDP2 units"):
        TrainingWorkload(gpus=8, fsdp2_units="torchtitan")
    with pytest.raises(InputError, match="fsdp2_units 'torchtitan' lays out FSDP2 units"):
        TrainingWorkload(gpus=8, fsdp="full", fsdp_version=1, fsdp2_units="torchtitan")
    with pytest.raises(InputError, match="unknown fsdp2_units"):
        TrainingWorkload(gpus=8, fsdp="full", fsdp2_units="deepspeed")


def test_torchtune_layout_regathers_the_last_block() -> None:
    # torchtune's shard_model reshards every block after its forward (the 2-rank run measures the loss and the
    # copy-outs); at the lm_head's backward the last block is not yet copied out (its own pre-backward does it)
    assert unsharded_bytes("torchtune", "loss", 100, 10) == 100
    assert unsharded_bytes("torchtune", "lm_head backward", 100, 10) == 100
    assert unsharded_bytes("torchtune", "backward", 100, 10) == unsharded_bytes("torchtitan", "backward", 100, 10)
    outputs = [n for k, n in copy_in_events("torchtune", 100, [10, 20], 2) if k == "alloc"][1::2]
    assert outputs == [100, 10, 20, 20, 10]  # forward root, blocks; backward every block, the last first
