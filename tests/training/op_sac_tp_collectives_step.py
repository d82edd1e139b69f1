"""Measured truth for the collectives torchtitan's op-level selective activation checkpointing runs again in the
backward under tensor + sequence parallelism: one forward + backward of a Llama-style block (RMSNorm -> q/k/v ->
SDPA -> o -> residual -> RMSNorm -> SwiGLU gate/up/down -> residual) tensor-parallel over the gloo ranks with
PyTorch's own styles as torchtitan @820504e ``parallelize_llama.py`` ``apply_tp`` lines 178-203 applies them
(``SequenceParallel`` norms, ``PrepareModuleInput`` Shard(1) -> Replicate, column-parallel q/k/v/gate/up,
row-parallel o/down with output Shard(1)), the block under ``torch.utils.checkpoint`` with a selective policy of
the same rule as torchtitan's op SAC (lines 217-270: save mm outputs except every second mm of the block, SDPA
outputs, reduce-scatter outputs and max; recompute everything else) or full recomputation (no policy). A
``TorchDispatchMode`` counts the ``_c10d_functional`` ops of the forward and of the backward on rank 0.
Nothing here imports llmsizer.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any


def main(case: dict[str, Any]) -> dict[str, Any] | None:
    import torch
    import torch.distributed as dist
    from ranks import end_rank
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor import Shard, distribute_tensor
    from torch.utils._python_dispatch import TorchDispatchMode
    from torch.utils.checkpoint import CheckpointPolicy, checkpoint, create_selective_checkpoint_contexts

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "formulas"))
    from tp_llama_block import tp_llama_block

    dist.init_process_group("gloo")
    torch.manual_seed(0)
    torch.set_num_threads(1)
    world = dist.get_world_size()
    h, i, heads, b, s = case["hidden"], case["inter"], case["heads"], case["batch"], case["seq"]

    mesh = init_device_mesh("cpu", (world,))
    block = tp_llama_block(h, i, heads, mesh)
    x = distribute_tensor(torch.randn(b, s, h), mesh, [Shard(1)]).to_local().requires_grad_(True)

    saved = {torch.ops.aten.mm.default, torch.ops.aten._scaled_dot_product_efficient_attention.default,
             torch.ops.aten._scaled_dot_product_flash_attention.default,
             torch.ops.aten._scaled_dot_product_flash_attention_for_cpu.default,
             torch.ops._c10d_functional.reduce_scatter_tensor.default, torch.ops.aten.max.default}

    def context() -> Any:
        counts = {"forward": 0, "recompute": 0}

        def policy(ctx: Any, func: Any, *args: Any, **kwargs: Any) -> Any:
            key = "recompute" if ctx.is_recompute else "forward"
            if func == torch.ops.aten.mm.default:
                counts[key] += 1
            keep = func in saved and not (func == torch.ops.aten.mm.default and counts[key] % 2 == 0)
            return CheckpointPolicy.MUST_SAVE if keep else CheckpointPolicy.PREFER_RECOMPUTE

        return create_selective_checkpoint_contexts(policy)

    # per phase and collective: [calls, payload bytes (the all-gather's output, the reduce-scatter's input)]
    counted: dict[str, dict[str, list[int]]] = {"forward": {}, "backward": {}}
    phase = ["forward"]

    class Collectives(TorchDispatchMode):
        def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
            out = func(*args, **(kwargs or {}))
            name = func.__name__.split(".")[0]
            if func.namespace == "_c10d_functional" and name in ("all_gather_into_tensor", "reduce_scatter_tensor"):
                t = out if name == "all_gather_into_tensor" else args[0]
                c = counted[phase[0]].setdefault(name, [0, 0])
                c[0] += 1
                c[1] += t.numel() * t.element_size()
            return out

    with Collectives():
        if case["mode"] == "op":
            y = checkpoint(block, x, use_reentrant=False, context_fn=context)
        else:
            y = checkpoint(block, x, use_reentrant=False)
        loss = y.float().sum()
        phase[0] = "backward"
        loss.backward()
    return end_rank({"world": world, "collectives": counted})


if __name__ == "__main__":
    from ranks import rank_main

    rank_main(main)
