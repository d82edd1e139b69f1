"""Measured truth for context parallelism: torch's own ring attention (``_templated_ring_attention`` and its backward,
torch/distributed/tensor/experimental/_context_parallel/_attention.py, the functions torchtitan's CP dispatches SDPA
to) on CPU ranks over gloo, with the CPU flash kernel (``aten._scaled_dot_product_flash_attention_for_cpu`` and its
backward) as the per-block op, head-tail load balancing and the default all-gather K/V rotation, as on CUDA.

Rank 0 prints one JSON object: for every rank (head-tail load balancing gives the ranks different block shapes,
so different peaks), the bytes of each storage live at the peak of live tensor bytes (``measure_step.LiveTensorBytes``)
during the forward and during the backward that is not an input (q, k, v, grad_out; out, lse) nor one of the op's own
results (none exists yet at either peak). The live set is recorded at the peak itself: a result made after it, or a
buffer freed before it, does not enter. torch's ``AsyncCollectiveTensor`` (the wrapper ``ft_c.all_gather_single`` and
``permute_tensor`` return until waited) counts 0 B: it owns no memory (``LiveTensorBytes`` skips wrapper subclasses
whose storage has no data pointer); the collective's result inside it is counted. gloo's own staging copies are made
on its worker thread, on the untracked copies below.
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


def _tracker(inputs: list[Any]) -> Any:
    """A LiveTensorBytes that records, at each new peak, every live storage (a weak reference to it) and its bytes;
    ``inputs`` tracked from the start."""
    from measure_step import LiveTensorBytes

    tracker = LiveTensorBytes(lambda live: [(tracker._refs[key], n) for key, n in live.items()])
    for t in inputs:
        tracker.track(t)
    return tracker


def _extra_at_peak(tracker: Any, known: list[Any]) -> list[int]:
    """The bytes of each storage live at the tracker's peak that is none of ``known`` (the inputs, and the op's
    results if they exist yet; told by the storage object itself, not by an address a freed storage may have
    handed on), largest first: what ring attention holds at its peak beyond its inputs."""
    storages = [t.untyped_storage() for t in known]
    return sorted((n for ref, n in tracker.peak_breakdown if not any(ref() is st for st in storages)), reverse=True)


def main(case: dict[str, Any]) -> dict[str, Any] | None:
    import torch
    import torch.distributed as dist
    from ranks import end_rank
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

    inputs = [q, k, v, go]
    tracker = _tracker(inputs)
    with copies.mode, tracker.mode:
        out, lse = _templated_ring_attention(group, 2, fwd_op, q, k, v, is_causal=True)[:2]
    fwd = _extra_at_peak(tracker, inputs + [out, lse])
    out, lse = out.to(dt), lse
    inputs += [out, lse]
    tracker = _tracker(inputs)
    with copies.mode, tracker.mode:
        dq, dk, dv = _templated_ring_attention_backward(group, 2, bwd_op, go, "grad_out", q, k, v, out, lse, True,
                                                        dropout_p=0.0)[:3]
    bwd = _extra_at_peak(tracker, inputs + [dq, dk, dv])
    ranks: list[Any] = [None] * dist.get_world_size()
    dist.all_gather_object(ranks, {"forward_extra_at_peak": fwd, "backward_extra_at_peak": bwd})
    return end_rank({"ranks": ranks})


if __name__ == "__main__":
    from ranks import rank_main

    rank_main(main)
