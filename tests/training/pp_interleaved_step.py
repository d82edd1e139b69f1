"""Measured truth for FSDP2 stages under torch's ``ScheduleInterleaved1F1B`` (torch.distributed.pipelining): 4 gloo
ranks on the CPU as PP 2 x FSDP 2, two stages a pp rank (stages r and r + 2, torchtitan's 'loop' placement), each a
few residual blocks wrapped as torchtitan wraps them under PP (``fully_shard(block, reshard_after_forward=False,
mp_policy=MixedPrecisionPolicy(bf16, fp32))``, then the stage module), the last stage with a loss. At every backward
the schedule runs (a probe on each stage's ``backward_one_chunk``, before it runs) it records the stage, the
micro-batches each local stage has forwarded and not backwarded (its forward cache) and the unsharded gradient bytes
each local stage holds (FSDP2's ``unsharded_accumulated_grad`` and unsharded ``.grad``). Nothing here imports
llmsizer.
"""

from __future__ import annotations

from typing import Any


def main(case: dict[str, Any]) -> dict[str, Any] | None:
    import torch
    import torch.distributed as dist
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

    seen: list[dict[str, Any]] = []
    for local, stage in enumerate(stages):
        original = stage.backward_one_chunk

        def probe(bwd_chunk_id: int, *args: Any, _local: int = local, _orig: Any = original, **kwargs: Any) -> Any:
            seen.append({"stage": _local, "held": [len(s.fwd_cache) for s in stages],
                         "grad_bytes": [grad_bytes(mod) for mod in modules]})
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
    every: list[Any] = [None] * dist.get_world_size()
    dist.all_gather_object(every, {"pp_rank": rank, "dp_rank": mesh["dp"].get_local_rank(), "backwards": seen})
    first = dist.get_rank() == 0
    dist.destroy_process_group()
    return {"ranks": every} if first else None


if __name__ == "__main__":
    from ranks import rank_main

    rank_main(main)
