"""Measured truth for FSDP2 stages under torch's ``ScheduleInterleaved1F1B`` (torch.distributed.pipelining): 4 gloo
ranks on the CPU as PP 2 x FSDP 2, two stages a pp rank (stages r and r + 2, torchtitan's 'loop' placement), each a
few residual blocks wrapped as torchtitan wraps them under PP (``fully_shard(block, reshard_after_forward=False,
mp_policy=MixedPrecisionPolicy(bf16, fp32))``, then the stage module), the last stage with a loss. At every backward
the schedule runs (a probe on each stage's ``backward_one_chunk``, before it runs) it records the stage, the
micro-batches each local stage has forwarded and not backwarded (its forward cache), the unsharded gradient bytes
each local stage holds (FSDP2's ``unsharded_accumulated_grad`` and unsharded ``.grad``) and the bytes of the
activations autograd keeps saved for each local stage's forwards (``torch.autograd.graph.saved_tensors_hooks``
around each stage module's forward: every saved tensor that is not a parameter, one count per storage, alive until
autograd drops it), and those left saved after the step. Nothing here imports llmsizer.
"""

from __future__ import annotations

import gc
from typing import Any


def main(case: dict[str, Any]) -> dict[str, Any] | None:
    import torch
    import torch.distributed as dist
    from ranks import end_rank
    from torch import nn
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard
    from torch.distributed.fsdp._fully_shard._fsdp_state import _get_module_fsdp_state
    from torch.distributed.pipelining import PipelineStage, ScheduleInterleaved1F1B

    dist.init_process_group("gloo")
    torch.manual_seed(0)
    torch.set_num_threads(1)
    pp, v, m, width = case["pp"], case["virtual"], case["microbatches"], case["width"]
    mesh = init_device_mesh("cpu", (pp, dist.get_world_size() // pp), mesh_dim_names=("pp", "dp"))
    rank = mesh["pp"].get_local_rank()
    mp = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)

    class Block(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.up, self.down = nn.Linear(width, 2 * width), nn.Linear(2 * width, width)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return x + self.down(torch.relu(self.up(x)))

    stages, modules = [], []
    for s in range(v):
        index = rank + s * pp
        mod = nn.Sequential(*(Block() for _ in range(case["blocks"])))
        for b in mod:
            fully_shard(b, mesh=mesh["dp"], mp_policy=mp, reshard_after_forward=False)
        fully_shard(mod, mesh=mesh["dp"], mp_policy=mp, reshard_after_forward=False)
        modules.append(mod)
        stages.append(PipelineStage(mod, index, pp * v, torch.device("cpu"), group=mesh["pp"].get_group()))

    def grad_bytes(mod: nn.Module) -> int:
        total = 0
        for b in [*mod, mod]:
            group = _get_module_fsdp_state(b)._fsdp_param_group
            for p in (group.fsdp_params if group else []):
                for g in (p.unsharded_accumulated_grad, getattr(p._unsharded_param, "grad", None)):
                    total += g.numel() * g.element_size() if g is not None else 0
        return total

    # live saved activations per local stage: storage -> [times saved, bytes]; a saved tensor's holder leaves the
    # table when autograd frees it (after its node's backward)
    saved: list[dict[int, list[int]]] = [{} for _ in stages]

    class Held:
        def __init__(self, t: torch.Tensor, table: dict[int, list[int]]) -> None:
            self.t, self.table, self.key = t, table, t.untyped_storage().data_ptr()
            entry = table.setdefault(self.key, [0, t.untyped_storage().nbytes()])
            entry[0] += 1

        def __del__(self) -> None:
            entry = self.table[self.key]
            entry[0] -= 1
            if entry[0] == 0:
                del self.table[self.key]

    def storage(t: torch.Tensor) -> int | None:
        """The data pointer of a tensor's storage; None for one without (the stage's shape inference on the meta
        device, a sharded parameter's freed storage)."""
        try:
            return None if t.device.type == "meta" else t.untyped_storage().data_ptr()
        except RuntimeError:
            return None

    for local, mod in enumerate(modules):
        forward = mod.forward

        def hooked(*args: Any, _mod: nn.Module = mod, _fwd: Any = forward, _table: Any = saved[local]) -> Any:
            def pack(t: torch.Tensor) -> Any:
                # the parameters registered now (a block's unsharded ones while it runs), read at each save: a set
                # read at the stage's start held the data pointers of storages FSDP2 freed since, and an activation
                # allocated at one of them read as a parameter (once, under CPU load: 1,024 B short)
                key = storage(t)
                return t if key is None or key in {storage(p) for p in _mod.parameters()} else Held(t, _table)

            def unpack(h: Any) -> torch.Tensor:
                return h.t if isinstance(h, Held) else h

            with torch.autograd.graph.saved_tensors_hooks(pack, unpack):
                return _fwd(*args)

        mod.forward = hooked  # type: ignore[method-assign]

    seen: list[dict[str, Any]] = []
    for local, stage in enumerate(stages):
        original = stage.backward_one_chunk

        def probe(bwd_chunk_id: int, *args: Any, _local: int = local, _orig: Any = original, **kwargs: Any) -> Any:
            gc.collect()  # (as for ``idle`` below: only the holders autograd still references are counted)
            seen.append({"stage": _local, "held": [len(s.fwd_cache) for s in stages],
                         "grad_bytes": [grad_bytes(mod) for mod in modules],
                         "saved_bytes": [sum(b for _, b in table.values()) for table in saved]})
            return _orig(bwd_chunk_id, *args, **kwargs)

        stage.backward_one_chunk = probe  # type: ignore[method-assign]
    schedule = ScheduleInterleaved1F1B(stages, n_microbatches=m,
                                       loss_fn=lambda out, target: ((out.float() - target) ** 2).mean())
    x = torch.randn(case["batch"], case["seq"], width)
    for _ in range(2):  # the second step: the accumulators of the first were freed by its reduce-scatters
        seen.clear()
        if rank == 0:
            schedule.step(x)
        elif rank == pp - 1:
            schedule.step(target=torch.zeros(case["batch"], case["seq"], width))
        else:
            schedule.step()
    # what stays saved with nothing in flight (seen on the chain's first stage only, whose shape inference at the
    # first step runs its module on real tensors: stage.py _forward_metadata_inference)
    gc.collect()  # a holder kept by a reference cycle until the collector runs would read as saved (flaky +512 B)
    idle = [sum(b for _, b in table.values()) for table in saved]
    every: list[Any] = [None] * dist.get_world_size()
    dist.all_gather_object(every, {"pp_rank": rank, "dp_rank": mesh["dp"].get_local_rank(), "backwards": seen,
                                   "idle_saved_bytes": idle})
    return end_rank({"ranks": every})


if __name__ == "__main__":
    from ranks import rank_main

    rank_main(main)
