"""The gradients and gathered_params items of FSDP2 under pipeline parallelism name eqs. PP2 / PP1 only where the
timeline sized them so (estimate/training/timeline.py ``pipeline_fsdp2``: fully sharded, parameters on the device).
grad_op's gradients stay sharded (half of full's over 2 data-parallel ranks here) and, with ``offload params``, the
stage is gathered unit by unit (less than full's whole stage); the items said 'unsharded, accumulated until the
step's one reduce-scatter (eq. PP2)' and 'every unit of the stage stays gathered through the step (eq. PP1)' of
both, because compose.py wrote the condition again without the shard stage and the offload."""

from __future__ import annotations

from llmsizer.estimate.training import estimate_training

RUN = dict(gpus=4, pp=2, fsdp_version=2, grad_accumulation=2)


def _items(**kw: object) -> tuple[int, str, int, str]:
    est = estimate_training("qwen2.5-0.5b", **RUN, **kw)
    g = est.item("gradients")
    gp = next((i for i in est.items if i.name == "gathered_params"), None)
    return g.bytes, g.formula, gp.bytes if gp else 0, (gp.source if gp else "")


def test_pp_labels_follow_the_rule_that_sized_the_items() -> None:
    g_full, f_full, gp_full, s_full = _items(fsdp="full")
    assert "eq. PP2" in f_full and "eq. (PP1)" in s_full  # the case the equations describe
    g_op, f_op, _, s_op = _items(fsdp="grad_op")
    assert 2 * g_op == g_full  # grad_op: sharded over the 2 data-parallel ranks, not eq. PP2's unsharded gradients
    assert "eq. PP2" not in f_op and "eq. (PP1)" not in s_op
    _, f_off, gp_off, s_off = _items(fsdp="full", offload="params")
    assert 0 < gp_off < gp_full  # not the whole stage gathered
    assert "eq. PP2" not in f_off and "eq. (PP1)" not in s_off
