"""Measured truth for when FSDP2 stages all-gather in a pipeline step, and what the pipeline fill waits for: real
steps of torch.distributed.pipelining over 4 gloo ranks on the CPU as PP 2 x FSDP 2, each stage module (a few
residual blocks) wrapped by one ``fully_shard(stage, reshard_after_forward=False, mp_policy=MixedPrecisionPolicy(
bf16, fp32))`` (torchtitan's setting under PP), under ``Schedule1F1B`` and ``ScheduleGPipe`` (one stage a rank) and
``ScheduleInterleaved1F1B`` (two stages a rank, r and r + 2: torchtitan's 'loop' placement).

The data-parallel link is made slow and the compute long so that the waits are visible: each stage's all-gather is
FSDP2's own (``FSDPModule.set_custom_all_gather`` with torch's ``DefaultAllGather``, the real gloo collective) and
completes the run's delay after it is issued, one at a time per rank (a serial link: a second all-gather issued
while one is in flight completes a delay after the first); each block's forward sleeps the run's stage forward
seconds / blocks (the case's ``runs``: name -> [schedule, stage forward seconds, all-gather delay seconds]). Both only in the measured (second)
step: the first runs the stages' shape inference. An all-gather issued with ``async_op=True`` records its completion
when it is waited for.

Recorded on every rank against the system-wide monotonic clock: the step's start (after a barrier), each all-gather's
issue and completion (the stage that issued it), each stage forward's start (a forward pre-hook on the stage module,
registered after ``fully_shard``: it runs once FSDP2's pre-forward has its parameters unsharded) and end. Nothing
here imports llmsizer.
"""

from __future__ import annotations

import time
from typing import Any


def main(case: dict[str, Any]) -> dict[str, Any] | None:
    import torch
    import torch.distributed as dist
    from ranks import end_rank
    from torch import nn
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard
    from torch.distributed.fsdp._fully_shard._fsdp_collectives import DefaultAllGather
    from torch.distributed.pipelining import (
        PipelineStage,
        Schedule1F1B,
        ScheduleGPipe,
        ScheduleInterleaved1F1B,
    )

    dist.init_process_group("gloo")
    torch.manual_seed(0)
    torch.set_num_threads(1)
    pp, m, width, blocks = case["pp"], case["microbatches"], case["width"], case["blocks"]
    mesh = init_device_mesh("cpu", (pp, dist.get_world_size() // pp), mesh_dim_names=("pp", "dp"))
    rank = mesh["pp"].get_local_rank()
    mp = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
    active = [False]  # the slow link and the long compute: the measured step only
    compute, delay = [0.0], [0.0]  # a stage forward's seconds and an all-gather's in this run
    events: list[list[Any]] = []
    link = [0.0]  # when this rank's data-parallel link is next free

    def clock() -> float:
        return time.monotonic()

    class Block(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.up, self.down = nn.Linear(width, 2 * width), nn.Linear(2 * width, width)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            if active[0]:
                time.sleep(compute[0] / blocks)
            return x + self.down(torch.relu(self.up(x)))

    class Late(dist.Work):  # type: ignore[misc]
        """The real gloo work of an all-gather issued with ``async_op=True``, done no earlier than ``at``."""

        def __init__(self, inner: Any, at: float, stage: int) -> None:
            super().__init__()
            self.inner, self.at, self.stage = inner, at, stage

        def wait(self, timeout: Any = None) -> bool:
            self.inner.wait()
            time.sleep(max(0.0, self.at - clock()))
            events.append(["gather_done", self.stage, clock()])
            return True

    class SlowAllGather(DefaultAllGather):  # type: ignore[misc]
        def __init__(self, stage: int) -> None:
            super().__init__()
            self.stage = stage

        def __call__(self, output_tensor: Any, input_tensor: Any, group: Any, async_op: bool = False) -> Any:
            now = clock()
            events.append(["gather_issued", self.stage, now, async_op])
            at = max(now, link[0]) + delay[0] if active[0] else now
            link[0] = at
            work = super().__call__(output_tensor, input_tensor, group, async_op)
            if async_op:
                return Late(work, at, self.stage)
            time.sleep(max(0.0, at - clock()))
            events.append(["gather_done", self.stage, clock()])
            return None

    def build(virtual: int) -> list[Any]:
        stages = []
        for s in range(virtual):
            index = rank + s * pp
            mod = nn.Sequential(*(Block() for _ in range(blocks)))
            fully_shard(mod, mesh=mesh["dp"], mp_policy=mp, reshard_after_forward=False)
            mod.set_custom_all_gather(SlowAllGather(index))
            mod.register_forward_pre_hook(lambda _m, _a, _i=index: events.append(["forward", _i, clock()]))
            mod.register_forward_hook(lambda _m, _a, _o, _i=index: events.append(["forward_end", _i, clock()]))
            stages.append(PipelineStage(mod, index, pp * virtual, torch.device("cpu"), group=mesh["pp"].get_group()))
        return stages

    def loss(out: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        return ((out.float() - target) ** 2).mean()

    runs: dict[str, Any] = {}
    for run, (name, compute[0], delay[0]) in case["runs"].items():
        if name == "Interleaved1F1B":
            stages = build(case["virtual"])
            schedule: Any = ScheduleInterleaved1F1B(stages, n_microbatches=m, loss_fn=loss)
            last = pp * case["virtual"] - 1
        else:
            stages = build(1)
            schedule = (Schedule1F1B if name == "1F1B" else ScheduleGPipe)(stages[0], n_microbatches=m, loss_fn=loss)
            last = pp - 1
        x = torch.randn(case["batch"], case["seq"], width)
        target = torch.zeros(case["batch"], case["seq"], width)
        for measured in (False, True):
            dist.barrier()
            events.clear()
            active[0] = measured
            start = clock()
            if rank == 0:
                schedule.step(x)
            elif any(s.stage_index == last for s in stages):
                schedule.step(target=target)
            else:
                schedule.step()
            active[0] = False
        every: list[Any] = [None] * dist.get_world_size()
        dist.all_gather_object(every, {"pp_rank": rank, "dp_rank": mesh["dp"].get_local_rank(), "start": start,
                                       "events": list(events)})
        runs[run] = every
    return end_rank({"runs": runs})


if __name__ == "__main__":
    from ranks import rank_main

    rank_main(main)
