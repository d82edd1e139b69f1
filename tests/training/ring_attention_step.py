"""Measured truth for context parallelism: torch's own ring attention (``_templated_ring_attention`` and its backward,
torch/distributed/tensor/experimental/_context_parallel/_attention.py, the functions torchtitan's CP dispatches SDPA
to) on CPU ranks over gloo, with the CPU flash kernel (``aten._scaled_dot_product_flash_attention_for_cpu`` and its
backward) as the per-block op, head-tail load balancing and the default all-gather K/V rotation, as on CUDA.

Rank 0 prints one JSON object: the peak of live tensor bytes (``measure_step.LiveTensorBytes``) above the inputs
during the forward and during the backward, the op's own results (output, log-sum-exp; dq, dk, dv) taken out, and
the staging copy gloo's all-gather makes of a tensor of the local K/V's size (a CPU-backend artifact).
Nothing here imports llmsizer.

gloo runs each collective on a worker thread that keeps its input and output (``at::Tensor`` copies in the work)
until the thread drops the work, which may come after the rank's wait has returned; a storage Python has already
let go of then stays alive for as long as that thread is descheduled (under CPU load the backward's peak read
+921,600 B once: the dK/dV sent the step before, still held). ``CollectivesOnCopies`` takes the measurement off that
race: every ``_c10d_functional`` collective runs on an untracked copy of its input, is waited at once, and hands
back a tracked copy of its output, so the tensors the tracker counts are held only by Python, each freed when the
ring-attention code lets it go, as NCCL's are. ``hold_collective_tensors`` in the case keeps the copies gloo got
for the whole step (the slowest worker thread there can be): the measurement must not move.
"""

from __future__ import annotations

import json
import sys
from typing import Any


class CollectivesOnCopies:
    """A TorchDispatchMode, entered below the tracker's: each ``_c10d_functional`` collective runs on a copy of its
    input, is waited at once, and returns a copy of its output, both copies made where the tracker does not see them;
    the input itself is kept until the ring-attention code waits the output (as ProcessGroupNCCL keeps a
    collective's input until the work is waited), the output as long as Python holds it. No gloo thread holds a
    tensor the tracker counts. ``hold``: keep gloo's copies to the end (the slowest worker thread there can be)."""

    def __init__(self, hold: bool) -> None:
        import torch
        from torch.utils._python_dispatch import TorchDispatchMode

        held: list[Any] = []
        in_flight: dict[int, Any] = {}  # output storage -> the collective's input, until the output is waited
        ops = torch.ops._c10d_functional
        wait = ops.wait_tensor.default
        passed = {wait, ops._wrap_tensor_autograd.default}  # the wait, and the AsyncCollectiveTensor wrapping
        collectives = {ops.all_gather_into_tensor.default, ops.all_to_all_single.default}  # the K/V, dK/dV rotaters

        class _Mode(TorchDispatchMode):
            def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
                if func is wait:
                    in_flight.pop(args[0].untyped_storage()._cdata, None)
                if func not in collectives:
                    if func.namespace == "_c10d_functional" and func not in passed:
                        raise RuntimeError(f"CollectivesOnCopies does not know the collective {func}")
                    return func(*args, **(kwargs or {}))
                sent = args[0].clone()
                got = wait(func(sent, *args[1:], **(kwargs or {})))
                if hold:
                    held.extend((sent, got))
                out = got.clone()
                in_flight[out.untyped_storage()._cdata] = args[0]
                return out

        self.mode = _Mode()


def main(case: dict[str, Any]) -> dict[str, Any] | None:
    import torch
    import torch.distributed as dist
    from measure_step import LiveTensorBytes
    from torch.distributed.tensor.experimental._context_parallel._attention import (
        _templated_ring_attention,
        _templated_ring_attention_backward,
    )

    dist.init_process_group("gloo")
    torch.manual_seed(dist.get_rank())
    torch.set_num_threads(1)
    b, hq, hkv, s_local, d = case["batch"], case["heads"], case["kv_heads"], case["local_seq"], case["head_dim"]
    dt = torch.bfloat16
    q = torch.randn(b, hq, s_local, d, dtype=dt)
    k = torch.randn(b, hkv, s_local, d, dtype=dt).repeat_interleave(hq // hkv, dim=1)  # SDPA CPU: K/V per head
    v = torch.randn(b, hkv, s_local, d, dtype=dt).repeat_interleave(hq // hkv, dim=1)
    go = torch.randn(b, hq, s_local, d, dtype=dt)
    group = dist.group.WORLD
    fwd_op = torch.ops.aten._scaled_dot_product_flash_attention_for_cpu.default
    copies = CollectivesOnCopies(bool(case.get("hold_collective_tensors")))
    bwd_op = torch.ops.aten._scaled_dot_product_flash_attention_for_cpu_backward.default

    # gloo's all-gather holds its own staging copy ((ranks - 1) x the input on CPU; NCCL gathers into the output):
    # measured alone on a tensor of the local K/V's size, so the caller can tell it from ring attention's buffers
    import torch.distributed._functional_collectives as ft_c

    kv = torch.cat([k.flatten(), v.flatten()])
    ag = LiveTensorBytes(lambda live: {})
    ag.track(kv)
    with copies.mode, ag.mode:
        gathered = ft_c.wait_tensor(ft_c.all_gather_single(kv, gather_dim=0, group=dist.group.WORLD))
    gloo_copy = ag.peak - ag.live[kv.untyped_storage()._cdata] - gathered.untyped_storage().nbytes()
    del gathered, kv

    tracker = LiveTensorBytes(lambda live: {})
    for t in (q, k, v, go):
        tracker.track(t)
    base = tracker.current
    with copies.mode, tracker.mode:
        out, lse = _templated_ring_attention(group, 2, fwd_op, q, k, v, is_causal=True)[:2]
    fwd_peak = tracker.peak - base - out.untyped_storage().nbytes() - lse.untyped_storage().nbytes()
    out, lse = out.to(dt), lse
    tracker2 = LiveTensorBytes(lambda live: {})
    for t in (q, k, v, go, out, lse):
        tracker2.track(t)
    base2 = tracker2.current
    with copies.mode, tracker2.mode:
        dq, dk, dv = _templated_ring_attention_backward(group, 2, bwd_op, go, "grad_out", q, k, v, out, lse, True,
                                                        dropout_p=0.0)[:3]
    results = {x.untyped_storage()._cdata: x.untyped_storage().nbytes() for x in (dq, dk, dv)}  # dk, dv: one storage
    bwd_peak = tracker2.peak - base2 - sum(results.values())
    rank = dist.get_rank()
    dist.destroy_process_group()
    return ({"forward_extra_bytes": fwd_peak, "backward_extra_bytes": bwd_peak, "gloo_all_gather_copy_bytes": gloo_copy}
            if rank == 0 else None)


if __name__ == "__main__":
    result = main(json.loads(sys.argv[1]))
    if result is not None:
        print(json.dumps(result))
