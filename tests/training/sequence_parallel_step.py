"""Measured truth for sequence parallelism's memory-bound kernels: one forward + backward of a GPT-style pre-norm
block (LayerNorm -> attention-like column/row linears -> residual add -> LayerNorm -> GeLU MLP -> residual add) in
bf16 on the CPU, either on one rank or tensor-parallel over the gloo ranks with PyTorch's own tensor-parallel styles
as torchtitan applies them with sequence parallelism (``parallelize_module``: ``SequenceParallel()`` on the norms,
``PrepareModuleInput`` Shard(1) -> Replicate before each block, ``ColwiseParallel`` into it, ``RowwiseParallel``
with ``output_layouts=Shard(1)`` out of it; torchtitan @9dec370 ``parallelize_llama.py`` ``apply_tp``). A
``TorchDispatchMode`` adds up, per aten op kind, the bytes of the local tensors each op reads and writes; rank 0
prints the bytes of the hidden-width kernels (the layer norms and their backward, the residual adds) and of the GeLU.
Nothing here imports llmsizer.
"""

from __future__ import annotations

from typing import Any

HIDDEN_OPS = ("native_layer_norm", "native_layer_norm_backward", "add")  # the sequence-parallel region's kernels
WIDE_OPS = ("gelu", "gelu_backward")  # the intermediate width: split by tensor parallelism already


def main(case: dict[str, Any]) -> dict[str, Any] | None:
    import torch
    import torch.distributed as dist
    from ranks import end_rank
    from torch import nn
    from torch.utils._python_dispatch import TorchDispatchMode
    from torch.utils._pytree import tree_flatten

    dist.init_process_group("gloo")
    torch.manual_seed(0)
    torch.set_num_threads(1)
    world = dist.get_world_size()
    h, i, b, s = case["hidden"], case["inter"], case["batch"], case["seq"]

    class Block(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.norm1, self.norm2 = nn.LayerNorm(h), nn.LayerNorm(h)
            self.attn = nn.Sequential()
            self.attn.add_module("wq", nn.Linear(h, h, bias=False))
            self.attn.add_module("wo", nn.Linear(h, h, bias=False))
            self.mlp = nn.Sequential()
            self.mlp.add_module("w1", nn.Linear(h, i, bias=False))
            self.mlp.add_module("act", nn.GELU())
            self.mlp.add_module("w2", nn.Linear(i, h, bias=False))

        def forward(self, x: Any) -> Any:
            x = x + self.attn(self.norm1(x))
            return x + self.mlp(self.norm2(x))

    block = Block().to(torch.bfloat16)
    x = torch.randn(b, s, h, dtype=torch.bfloat16)
    if case["tp"]:
        from torch.distributed.device_mesh import init_device_mesh
        from torch.distributed.tensor import Replicate, Shard, distribute_tensor
        from torch.distributed.tensor.parallel import (
            ColwiseParallel,
            PrepareModuleInput,
            RowwiseParallel,
            SequenceParallel,
            parallelize_module,
        )

        mesh = init_device_mesh("cpu", (world,))
        parallelize_module(block, mesh, {
            "norm1": SequenceParallel(), "norm2": SequenceParallel(),
            "attn": PrepareModuleInput(input_layouts=(Shard(1),), desired_input_layouts=(Replicate(),)),
            "attn.wq": ColwiseParallel(), "attn.wo": RowwiseParallel(output_layouts=Shard(1)),
            "mlp": PrepareModuleInput(input_layouts=(Shard(1),), desired_input_layouts=(Replicate(),)),
            "mlp.w1": ColwiseParallel(), "mlp.w2": RowwiseParallel(output_layouts=Shard(1)),
        })
        # the residual stream is each rank's local [b, s/t, h] shard, as torchtitan's token embedding
        # (RowwiseParallel, output Shard(1)) hands it to the first block
        x = distribute_tensor(x, mesh, [Shard(1)]).to_local()
    x.requires_grad_(True)

    def local(t: Any) -> Any:
        return t.to_local() if hasattr(t, "to_local") else t

    totals: dict[str, int] = {}

    class Bytes(TorchDispatchMode):
        def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
            out = func(*args, **(kwargs or {}))
            name = func.__name__.split(".")[0]
            if name in HIDDEN_OPS + WIDE_OPS:
                tensors = [local(t) for t in tree_flatten((args, kwargs, out))[0] if isinstance(t, torch.Tensor)]
                # the hidden-width tensors only: a layer norm's weight and bias gradients are reduced inside it
                totals[name] = totals.get(name, 0) + sum(t.numel() * t.element_size() for t in tensors
                                                         if t.dim() >= 2)
            return out

    with Bytes():
        y = block(x)
        local(y).float().sum().backward()
    out = {"world": world, "totals": totals}
    return end_rank(out)


if __name__ == "__main__":
    from ranks import rank_main

    rank_main(main)
