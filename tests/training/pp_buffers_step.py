"""Measured truth for what torch's pipeline stage holds per micro-batch at the stage boundary: a real
``Schedule1F1B`` step (torch.distributed.pipelining) over gloo ranks on the CPU, one ``PipelineStage`` per rank, each
a few residual blocks of a small width, the last with a loss. Read from the stage's own objects when each stage
enters its first micro-batch's backward (``backward_one_chunk``): the stage outputs its forward cache still holds,
the gradient receive buffers (one per micro-batch, made at the first step and kept) and the activation receive
buffers (one per micro-batch on every stage but the first). Nothing here imports llmsizer.
"""

from __future__ import annotations

from typing import Any


def _nbytes(tensors: Any) -> int:
    import torch

    return sum(t.untyped_storage().nbytes() for t in tensors if isinstance(t, torch.Tensor))


def main(case: dict[str, Any]) -> dict[str, Any] | None:
    import torch
    import torch.distributed as dist
    from torch import nn
    from torch.distributed.pipelining import PipelineStage, Schedule1F1B

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

    submod = nn.Sequential(*(Block() for _ in range(case["blocks"])))
    stage = PipelineStage(submod, rank, pp, torch.device("cpu"))
    seen: dict[str, Any] = {}
    first_backward = stage.backward_one_chunk

    def probe(bwd_chunk_id: int, *args: Any, **kwargs: Any) -> Any:
        if not seen:  # the first micro-batch's backward, before it pops its forward cache entry
            seen["fwd_cache_outputs"] = len(stage.fwd_cache)
            seen["fwd_cache_output_bytes"] = _nbytes(t for out, _ in stage.fwd_cache.values() for t in out)
            seen["grad_recv_buffers"] = sum(1 for infos in stage.grad_recv_info.values() for i in infos
                                            if i.buffer is not None)
            seen["grad_recv_bytes"] = _nbytes(i.buffer for infos in stage.grad_recv_info.values() for i in infos)
            seen["act_recv_buffers"] = sum(1 for infos in stage.args_recv_info.values() for i in infos
                                           if i.buffer is not None)
            seen["act_recv_bytes"] = _nbytes(i.buffer for infos in stage.args_recv_info.values() for i in infos)
        return first_backward(bwd_chunk_id, *args, **kwargs)

    stage.backward_one_chunk = probe  # type: ignore[method-assign]
    schedule = Schedule1F1B(stage, n_microbatches=m, loss_fn=lambda out, target: ((out - target) ** 2).mean())
    x = torch.randn(batch, seq, width)
    for _ in range(2):  # the second step reuses the buffers the first made
        seen.clear()
        if rank == 0:
            schedule.step(x)
        elif rank == pp - 1:
            schedule.step(target=torch.zeros(batch, seq, width))
        else:
            schedule.step()
    seen["boundary_bytes"] = batch // m * seq * width * 4  # one micro-batch's [b / m, s, h] fp32 stage output
    every: list[Any] = [None] * pp
    dist.all_gather_object(every, seen)
    dist.destroy_process_group()
    return {"stages": every} if rank == 0 else None


if __name__ == "__main__":
    from ranks import rank_main

    rank_main(main)
