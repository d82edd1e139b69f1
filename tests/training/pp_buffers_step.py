"""Measured truth for what torch's pipeline stages hold per micro-batch at the stage boundary: a real step of
torch.distributed.pipelining over gloo ranks on the CPU, no data parallelism and no FSDP, each stage a few residual
blocks of a small width, the last with a loss: ``Schedule1F1B`` with one ``PipelineStage`` a rank, or with
``virtual`` > 1 ``ScheduleInterleaved1F1B`` with that many stages a rank (stages r, r + pp, ...: torchtitan's 'loop'
placement). Read from the stages' own objects at every backward of the second step (a probe on each stage's
``backward_one_chunk``, before it pops its forward cache entry): for each of the rank's stages, the micro-batches its
forward cache holds and their stage outputs' bytes, the gradient receive buffers (one per micro-batch, made at the
first step and kept) and the activation receive buffers (one per micro-batch on every stage but the chain's first).
Nothing here imports llmsizer.
"""

from __future__ import annotations

from typing import Any


def _nbytes(tensors: Any) -> int:
    import torch

    return sum(t.untyped_storage().nbytes() for t in tensors if isinstance(t, torch.Tensor))


def main(case: dict[str, Any]) -> dict[str, Any] | None:
    import torch
    import torch.distributed as dist
    from ranks import end_rank
    from torch import nn
    from torch.distributed.pipelining import PipelineStage, Schedule1F1B, ScheduleInterleaved1F1B

    dist.init_process_group("gloo")
    torch.manual_seed(0)
    torch.set_num_threads(1)
    rank, pp = dist.get_rank(), dist.get_world_size()
    width, m, batch, seq = case["width"], case["microbatches"], case["batch"], case["seq"]

    class Block(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.up, self.down = nn.Linear(width, 2 * width), nn.Linear(2 * width, width)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return x + self.down(torch.relu(self.up(x)))

    v = case.get("virtual", 1)
    stages = [PipelineStage(nn.Sequential(*(Block() for _ in range(case["blocks"]))), rank + c * pp, pp * v,
                            torch.device("cpu")) for c in range(v)]

    def held(stage: Any) -> dict[str, int]:
        return {"index": stage.stage_index, "fwd_cache_outputs": len(stage.fwd_cache),
                "fwd_cache_output_bytes": _nbytes(t for out, _ in stage.fwd_cache.values() for t in out),
                "grad_recv_buffers": sum(1 for infos in stage.grad_recv_info.values() for i in infos
                                         if i.buffer is not None),
                "grad_recv_bytes": _nbytes(i.buffer for infos in stage.grad_recv_info.values() for i in infos),
                "act_recv_buffers": sum(1 for infos in stage.args_recv_info.values() for i in infos
                                        if i.buffer is not None),
                "act_recv_bytes": _nbytes(i.buffer for infos in stage.args_recv_info.values() for i in infos)}

    seen: dict[str, Any] = {"backwards": []}
    for local, stage in enumerate(stages):
        original = stage.backward_one_chunk

        def probe(bwd_chunk_id: int, *args: Any, _local: int = local, _orig: Any = original, **kwargs: Any) -> Any:
            seen["backwards"].append({"stage": _local, "stages": [held(s) for s in stages]})
            return _orig(bwd_chunk_id, *args, **kwargs)

        stage.backward_one_chunk = probe  # type: ignore[method-assign]
    def loss(out: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        return ((out - target) ** 2).mean()

    schedule = (ScheduleInterleaved1F1B(stages, n_microbatches=m, loss_fn=loss) if v > 1
                else Schedule1F1B(stages[0], n_microbatches=m, loss_fn=loss))
    x = torch.randn(batch, seq, width)
    for _ in range(2):  # the second step reuses the buffers the first made
        seen["backwards"].clear()
        if rank == 0:
            schedule.step(x)
        elif rank == pp - 1:
            schedule.step(target=torch.zeros(batch, seq, width))
        else:
            schedule.step()
    seen["boundary_bytes"] = batch // m * seq * width * 4  # one micro-batch's [b / m, s, h] fp32 stage output
    every: list[Any] = [None] * pp
    dist.all_gather_object(every, seen)
    return end_rank({"ranks": every})


if __name__ == "__main__":
    from ranks import rank_main

    rank_main(main)
