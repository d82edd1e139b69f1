"""Paged optimizers' time (formulas/training_time.py eq. (12)): bitsandbytes' Paged* optimizers are their unpaged
classes with ``is_paged=True`` (bitsandbytes 0.43.1 optim/adamw.py ``PagedAdamW8bit``: ``AdamW8bit``'s
``Optimizer2State`` with the states from ``get_paged``), so a step whose states stay resident on the device runs the
unpaged optimizer's kernels and nothing else; states that do not fit move in and out each step."""

from __future__ import annotations

import pytest

from llmsizer.catalog.hardware import builtin_catalog
from llmsizer.errors import InputError
from llmsizer.estimate import efficiency as E
from llmsizer.estimate.duration import training_duration_for
from llmsizer.formulas.training_time import paged_step_bytes
from llmsizer.models import load_model

FULL_8BIT = dict(method="full", precision="bf16", micro_batch=2, seq_len=4096, grad_checkpointing="full")


def test_resident_8bit_paged_states_cost_what_the_unpaged_optimizer_costs() -> None:
    """Llama 3.2 3B full fine-tune on an A100 80GB: 6 GB of 8-bit states beside ~8 GiB of weights fit, so
    PagedAdamW8bit's step is AdamW8bit's (no paging term); on a 24 GB RTX 4090 the 8B model's 15 GiB of states
    beside 15 GiB of weights do not, and every byte moves."""
    cat = builtin_catalog().devices
    spec = load_model("llama-3.2-3b")
    paged = training_duration_for(spec, cat["a100-sxm-80gb"], 1, 1e6, dict(FULL_8BIT, optimizer="paged-adamw-8bit"))
    plain = training_duration_for(spec, cat["a100-sxm-80gb"], 1, 1e6, dict(FULL_8BIT, optimizer="adamw-8bit"))
    assert paged.step is not None and plain.step is not None
    assert paged.step.paging_seconds == 0.0
    assert paged.tokens_per_second == pytest.approx(plain.tokens_per_second, rel=1e-12)

    big = training_duration_for(load_model("llama-3.1-8b"), cat["rtx-4090"], 1, 1e6,
                                dict(FULL_8BIT, seq_len=2048, optimizer="paged-adamw-8bit"))
    assert big.step is not None and big.step.paging_seconds > 0
    moved = {a.name: a.value for a in big.assumptions}["paged_bytes_per_step"]
    # 2 x (two uint8 states per element of the 8.03e9 parameters the states page: bitsandbytes get_state_buffer
    # pages tensors of 1e5 elements and more): between 2 x 2 x 8.0e9 and 2 x 2.04 B x 8.03e9
    assert 2 * 2 * 8.0e9 < moved < 2 * 2.04 * 8.03e9
    assert big.step.paging_seconds == pytest.approx(moved / E.HOST_LINK_BANDWIDTH, rel=1e-12)


def test_paged_step_bytes_is_all_or_nothing() -> None:
    assert paged_step_bytes(1e9, 1e9) == 0.0
    assert paged_step_bytes(1e9, 1e9 - 1) == 2e9
    assert paged_step_bytes(1e9, -5e9) == 2e9  # the step alone overfills the device: the states still all move
    with pytest.raises(InputError):
        paged_step_bytes(-1.0, 0.0)


def test_bitsandbytes_state_layout_of_the_paged_optimizers() -> None:
    """Bytes from bitsandbytes 0.43.1's own allocations (optim/optimizer.py): Optimizer2State (PagedAdamW*) keeps
    state1 + state2, Optimizer1State (PagedLion*) state1 alone; 8-bit: uint8 states for tensors of 4096 elements and
    more, an fp32 absmax per block (256 elements in bitsandbytes >= 0.44) and one 256-entry fp32 map per state on the
    device; 32-bit: fp32 states; get_state_buffer pages only tensors of 1e5 elements and more."""
    from llmsizer.formulas.training_states import optimizer_state_bytes_counted, paged_state_bytes_counted

    big, small = (4096, 4096), (4096,)
    n = 4096 * 4096
    counts = {big: 1, small: 1}
    absmax = 4 * n // 256
    expected = {  # (total, paged)
        "paged-adamw": (2 * 4 * n + 2 * 4 * 4096, 2 * 4 * n),
        "paged-adamw-8bit": (2 * (n + absmax) + 2 * (4096 + 4 * 16) + 2 * 1024, 2 * n),
        "paged-lion": (4 * n + 4 * 4096, 4 * n),
        "paged-lion-8bit": ((n + absmax) + (4096 + 4 * 16) + 1024, n),
    }
    for name, (total, paged) in expected.items():
        assert optimizer_state_bytes_counted(counts, name, 2) == total, name
        assert paged_state_bytes_counted(counts, name) == paged, name
    assert paged_state_bytes_counted(counts, "adamw-8bit") == 0
