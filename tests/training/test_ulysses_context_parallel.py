"""cp_kind 'ulysses' (DeepSpeed-Ulysses, Jacobs et al. 2023 arXiv 2309.14509; DeepSpeed @edaa7221
deepspeed/runtime/sequence_parallel/ulysses_sp.py UlyssesSPAttentionHF; formulas/context_parallel.py eqs. U0-U3).

Truth by hand from DeepSpeed's shapes: ``_combine_local_sequences`` all-to-alls q [s/cp, bs, 32 heads, 128] and k, v
[s/cp, bs, 8 heads, 128] (K/V repeated cp / 8 times first when cp > 8, lines 131-135 / 181-184) to [s, bs, heads/cp,
128]; ``_partition_global_sequence`` the output [s, bs, 4096/cp] back. ``_DimZeroAllToAll`` (deepspeed/sequence/
layer.py) keeps 1/cp of its input on the rank and sends the rest: (cp - 1)/cp of each tensor leaves the rank.
Llama 3.1 8B: 32 layers, 32 heads, 8 K/V heads of 128 (q, o 4096 wide; k, v 1024), bf16."""

from __future__ import annotations

import pytest

from llmsizer.catalog.hardware import builtin_catalog
from llmsizer.errors import InputError
from llmsizer.estimate.duration import training_duration_for
from llmsizer.estimate.training import estimate_training
from llmsizer.formulas.context_parallel import ulysses_exchange_bytes, ulysses_kv_width, ulysses_refusal
from llmsizer.models import load_model

BASE = dict(method="full", micro_batch=1, grad_checkpointing="full", precision="bf16", device="h100", zero=3,
            attention="flash")


def test_kv_heads_replicated_when_fewer_than_ranks() -> None:
    # ulysses_sp.py line 132: kv_replication_factor = world_size // kv_head_count, local kv heads 1 (line 134)
    assert ulysses_kv_width(1024, 8, 8) == 1024 and ulysses_kv_width(1024, 8, 4) == 1024
    assert ulysses_kv_width(1024, 8, 32) == 4096  # 8 heads repeated 4x: 32 heads, one a rank


def test_refusals_follow_deepspeed_asserts() -> None:
    assert ulysses_refusal(32, 8, 8) is None and ulysses_refusal(32, 8, 32) is None
    assert "not divisible by context_parallel 3" in str(ulysses_refusal(32, 8, 3))  # line 145-146
    assert "K/V head count 8" in str(ulysses_refusal(48, 8, 12))  # lines 147-150: 8 vs 12, neither divides
    with pytest.raises(InputError, match=r"head count 32 is not divisible by context_parallel 3.*\(DeepSpeed"):
        estimate_training("llama-3.1-8b", **BASE, seq_len=3 * 4096, gpus=3, context_parallel=3,
                          cp_kind="ulysses")  # type: ignore[arg-type]


@pytest.mark.parametrize(("fields", "match"), [
    (dict(context_parallel=1), "context_parallel > 1"),
    (dict(attention="eager"), "lines 461-466"),
    (dict(fsdp="full", zero=0), "ZeRO, not fsdp"),
    (dict(seq_len=8 * 1000 + 4), "seq_len a multiple of context_parallel"),
])
def test_settings_ulysses_does_not_run_are_one_line(fields: dict[str, object], match: str) -> None:
    run = {**BASE, "seq_len": 8192, "gpus": 8, "context_parallel": 8, "cp_kind": "ulysses", **fields}
    with pytest.raises(InputError, match=match):
        estimate_training("llama-3.1-8b", **run)  # type: ignore[arg-type]


def test_exchange_bytes_by_hand() -> None:
    """t = 65,536 / 8 = 8192 tokens a rank; one layer's four all-to-alls carry 8192 x (4096 + 1024 + 1024 + 4096)
    elements of 2 B, 7/8 of them sent: 7 x 8192 x 10240 x 2 / 8 = 146,800,640 B."""
    one = 7 * 8192 * 10240 * 2 // 8
    assert one == 146_800_640
    f, b = ulysses_exchange_bytes(8192, 4096, 1024, 1024, 4096, 8, 2, 32, 32)
    assert f == 32 * one and b == 64 * one  # the backward: the gradients' four, and the recomputed forward's four
    assert ulysses_exchange_bytes(8192, 4096, 1024, 1024, 4096, 1, 2, 32, 32) == (0, 0)


def test_duration_counts_the_all_to_alls_blocking() -> None:
    spec, h100 = load_model("llama-3.1-8b"), builtin_catalog().devices["h100-sxm"]
    run = dict(seq_len=65536, micro_batch=1, grad_checkpointing="full", zero=3, context_parallel=8, cp_kind="ulysses")
    d = training_duration_for(spec, h100, 8, 1e9, run)
    assert d.step is not None
    a = {x.name: x.value for x in d.assumptions}
    assert a["ulysses_all_to_all_bytes"] == 96 * 146_800_640 == d.step.ring_bytes
    assert d.step.ring_exposed_seconds == d.step.ring_seconds > 0  # not hidden behind the attention


def test_memory_is_that_of_seq_over_cp_tokens_with_the_exchange_buffers() -> None:
    # outside the attention a rank holds s / cp tokens: its checkpointed layer inputs are those of 8192 tokens
    s = 65536
    u = estimate_training("llama-3.1-8b", **BASE, seq_len=s, gpus=8, context_parallel=8, cp_kind="ulysses")
    one = estimate_training("llama-3.1-8b", **BASE, seq_len=s // 8, gpus=8)
    # same local tokens, same layer terms (kv heads 8 = cp: no replication)
    assert u.details["layer_terms"] == one.details["layer_terms"]
    # eq. U2: one gradient's send copy and receive buffer, 2 t max(q, k) c, added to the last layer's backward (no
    # replicated K/V excess at kv heads = cp)
    t = s // 8
    extra = 2 * t * 4096 * 2
    assert u.details["phases"]["backward layer 31"] - one.details["phases"]["backward layer 31"] == extra


def test_replicated_kv_is_saved_when_ranks_outnumber_kv_heads() -> None:
    s = 32 * 4096
    u = estimate_training("llama-3.1-8b", **BASE, seq_len=s, gpus=32, context_parallel=32, cp_kind="ulysses")
    terms = {x["name"]: x["bytes"] for x in u.details["layer_terms"]}
    t = s // 32
    assert terms["attention K/V replicated for Ulysses (eq. U0)"] == t * (4096 - 1024) * 2 * 2
