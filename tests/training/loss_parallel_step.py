"""Measured truth for PyTorch's ``loss_parallel`` (torch/distributed/tensor/parallel/loss.py): torchtitan's head and
loss on the CPU over gloo, one process per rank, each rank's lm_head a ``ColwiseParallel`` linear whose output stays a
DTensor sharded on the vocabulary (torchtitan parallelize_llama.py @ 9dec370 lines 138-141: ``output_layouts=Shard(-1),
use_local_output=not loss_parallel``), its input either replicated or, as with torchtitan's sequence parallelism
(``input_layouts=Shard(1)``, line 139), this rank's share of the sequence, all-gathered by DTensor before the matmul
(``parallel-sp``); then torchtitan's step lines under ``loss_parallel()`` (train.py @ 9dec370 lines 131-134 and 302-308)::

    pred = model(input_ids)
    loss = cross_entropy(pred.flatten(0, 1).float(), labels.flatten(0, 1))
    del pred
    loss.backward()

The control (``plain``) runs the same lines on a plain linear with this rank's share of the vocabulary
(V / ranks outputs), where ``F.cross_entropy`` takes aten's fused kernels.

What is measured is every allocation the CPU allocator makes, from the profiler's allocation events
(``torch.profiler.profile(profile_memory=True)``: one event per allocation and free with its address and bytes,
reported by c10's allocator itself, so the temporaries inside loss_parallel's DTensor handlers count too): rank 0 returns the largest
live total above what existed before the forward, over the forward and the loss, and over ``loss.backward()``, for
each path, dtype and vocabulary size, the bytes of the lm_head input autograd keeps (a saved-tensors hook on
every tensor saved for the backward whose last dimension is the hidden size), and the allocations and frees of the
loss's [t, V / ranks]-sized tensors in order (``loss_events``). Nothing here imports llmsizer.
"""

from __future__ import annotations

import contextlib
import gc
from typing import Any


def _peaks(prof: Any) -> tuple[int, int]:
    """(forward peak, backward peak) of the bytes allocated within the trace and still live, from the allocation
    events (a free counts only for a block the trace saw allocated: nothing made earlier can lower the count)."""
    from torch._C._profiler import _EventType

    def walk(events: Any) -> Any:
        for e in events:
            yield e
            yield from walk(e.children)

    tree = list(walk(prof.profiler.kineto_results.experimental_event_tree()))
    start_bwd = min(e.start_time_ns for e in tree if e.name == "loss.backward")
    allocations = sorted(((e.start_time_ns, e.extra_fields.ptr, e.extra_fields.alloc_size) for e in tree
                          if e.tag == _EventType.Allocation), key=lambda x: x[0])
    sizes: dict[int, int] = {}
    live = fwd = bwd = 0
    for at, ptr, nbytes in allocations:
        if nbytes > 0:
            sizes[ptr] = nbytes
            live += nbytes
        else:
            live -= sizes.pop(ptr, 0)
        if at < start_bwd:
            fwd = max(fwd, live)
        else:
            bwd = max(bwd, live)
    return fwd, bwd


def _loss_events(prof: Any, tv: int, least: int) -> list[list[Any]]:
    """The allocations and frees of blocks of a whole number of bytes per element of [t, V / ranks] (``tv`` elements)
    and at least ``least`` bytes, in the order the profiler saw them (time, then the event tree's own order), as
    ``["alloc", bytes]`` and ``["free", k]`` (k: the index of the alloc whose block it frees)."""
    from torch._C._profiler import _EventType

    def walk(events: Any) -> Any:
        for e in events:
            yield e
            yield from walk(e.children)

    raw = [(e.start_time_ns, e.extra_fields.ptr, e.extra_fields.alloc_size)
           for e in walk(prof.profiler.kineto_results.experimental_event_tree()) if e.tag == _EventType.Allocation]
    raw.sort(key=lambda x: x[0])  # stable: ties keep the tree's order
    out: list[list[Any]] = []
    live: dict[int, int] = {}
    n = 0
    for _, ptr, nbytes in raw:
        if abs(nbytes) < least or abs(nbytes) % tv:
            continue
        if nbytes > 0:
            live[ptr] = n
            out.append(["alloc", nbytes])
            n += 1
        elif ptr in live:
            out.append(["free", live.pop(ptr)])
    return out


def main(case: dict[str, Any]) -> dict[str, Any] | None:
    import torch
    import torch.distributed as dist
    import torch.nn.functional as F
    from ranks import end_rank
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor import Replicate, Shard
    from torch.distributed.tensor.parallel import ColwiseParallel, loss_parallel, parallelize_module
    from torch.profiler import ProfilerActivity, profile, record_function

    dist.init_process_group("gloo")
    torch.manual_seed(0)
    torch.set_num_threads(1)
    ranks = dist.get_world_size()
    b, s, h = case["batch"], case["seq"], case["hidden"]
    mesh = init_device_mesh("cpu", (ranks,))
    out: dict[str, Any] = {}
    for path in ("parallel", "parallel-sp", "plain"):
        parallel = path != "plain"
        for dtype_name in case["dtypes"]:
            dtype = getattr(torch, dtype_name)
            for vocab in case["vocabs"]:
                if parallel:
                    head = torch.nn.Linear(h, vocab, bias=False, dtype=dtype)
                    parallelize_module(head, mesh, ColwiseParallel(
                        input_layouts=Shard(1) if path == "parallel-sp" else Replicate(), output_layouts=Shard(-1),
                        use_local_output=False))
                    ctx: Any = loss_parallel()
                else:
                    head = torch.nn.Linear(h, vocab // ranks, bias=False, dtype=dtype)
                    ctx = contextlib.nullcontext()
                hidden = torch.randn(b, s // ranks if path == "parallel-sp" else s, h, dtype=dtype, requires_grad=True)
                labels = torch.randint(0, vocab if parallel else vocab // ranks, (b, s))
                gc.collect()
                saved: list[int] = []  # bytes of each [.., h] tensor autograd keeps for the backward (this rank's)

                def pack(t: Any, saved: list[int] = saved) -> Any:
                    local = getattr(t, "_local_tensor", t)
                    if local.dim() >= 2 and local.shape[-1] == h:
                        saved.append(local.numel() * local.element_size())
                    return t

                with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof, ctx, \
                        torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
                    pred = head(hidden)
                    loss = F.cross_entropy(pred.flatten(0, 1).float(), labels.flatten(0, 1))
                    del pred
                    with record_function("loss.backward"):
                        loss.backward()
                fwd, bwd = _peaks(prof)
                tv = b * s * (vocab // ranks)
                events = _loss_events(prof, tv, tv * min(4, torch.empty((), dtype=dtype).element_size()))
                out[f"{path} {dtype_name} {vocab}"] = {"forward": fwd, "backward": bwd, "saved_input": max(saved),
                                                       "loss_events": events}
                del head, hidden, labels, loss
    return end_rank(out)


if __name__ == "__main__":
    from ranks import rank_main

    rank_main(main)
