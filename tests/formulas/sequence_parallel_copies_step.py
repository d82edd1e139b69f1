"""Measured truth for eq. (E14) of formulas/elementwise_traffic.py: inductor's own byte count
(``GraphLowering.count_bytes``, through tests/formulas/inductor_nodes.py) of the compiled forward and backward of a
torchtitan-style Llama block (RMSNorm, separate q/k/v, SDPA, o, residual, RMSNorm, SwiGLU gate/up/down, residual;
no rotary) in bf16 on the CPU, tensor-parallel with PyTorch's styles as torchtitan @820504e ``parallelize_llama.py``
``apply_tp`` lines 178-203 applies them (sequence parallel), on rank 0 of a fake process group of ``tp`` ranks
(torch.testing's ``FakeStore``: collectives return at once, the graph and its kernels are the real ones). Prints one
JSON line: the bytes of the generated (non-extern) kernels. Nothing here imports llmsizer.
Usage: python sequence_parallel_copies_step.py '{"tp": 8, "hidden": 512, "inter": 1024, "heads": 8, "batch": 2,
"seq": 256}'
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any


def main(case: dict[str, Any]) -> dict[str, Any]:
    import torch
    import torch.distributed as dist
    import torch.nn.functional as F
    from torch import nn
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor import Replicate, Shard, distribute_tensor
    from torch.distributed.tensor.parallel import (
        ColwiseParallel,
        PrepareModuleInput,
        RowwiseParallel,
        SequenceParallel,
        parallelize_module,
    )
    from torch.testing._internal.distributed.fake_pg import FakeStore

    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from inductor_nodes import inductor_nodes

    tp, h, i, heads, b, s = (case[k] for k in ("tp", "hidden", "inter", "heads", "batch", "seq"))
    d = h // heads
    dist.init_process_group("fake", store=FakeStore(), rank=0, world_size=tp)
    torch.manual_seed(0)
    torch.set_num_threads(1)

    class Attention(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.wq, self.wk, self.wv = (nn.Linear(h, h, bias=False) for _ in range(3))
            self.wo = nn.Linear(h, h, bias=False)

        def forward(self, x: Any) -> Any:
            bs, sl, _ = x.shape
            q, k, v = (m(x).view(bs, sl, -1, d).transpose(1, 2) for m in (self.wq, self.wk, self.wv))
            o = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            return self.wo(o.transpose(1, 2).reshape(bs, sl, -1))

    class FeedForward(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.w1, self.w3 = nn.Linear(h, i, bias=False), nn.Linear(h, i, bias=False)
            self.w2 = nn.Linear(i, h, bias=False)

        def forward(self, x: Any) -> Any:
            return self.w2(F.silu(self.w1(x)) * self.w3(x))

    class Block(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.attention_norm, self.ffn_norm = nn.RMSNorm(h), nn.RMSNorm(h)
            self.attention, self.feed_forward = Attention(), FeedForward()

        def forward(self, x: Any) -> Any:
            x = x + self.attention(self.attention_norm(x))
            return x + self.feed_forward(self.ffn_norm(x))

    block = Block().to(torch.bfloat16)
    mesh = init_device_mesh("cpu", (tp,))
    parallelize_module(block, mesh, {
        "attention_norm": SequenceParallel(),
        "attention": PrepareModuleInput(input_layouts=(Shard(1),), desired_input_layouts=(Replicate(),)),
        "attention.wq": ColwiseParallel(), "attention.wk": ColwiseParallel(), "attention.wv": ColwiseParallel(),
        "attention.wo": RowwiseParallel(output_layouts=Shard(1)),
        "ffn_norm": SequenceParallel(),
        "feed_forward": PrepareModuleInput(input_layouts=(Shard(1),), desired_input_layouts=(Replicate(),)),
        "feed_forward.w1": ColwiseParallel(), "feed_forward.w3": ColwiseParallel(),
        "feed_forward.w2": RowwiseParallel(output_layouts=Shard(1)),
    })
    x = distribute_tensor(torch.randn(b, s, h, dtype=torch.bfloat16), mesh, [Shard(1)]).to_local()
    x.requires_grad_(True)
    compiled = torch.compile(block)

    def run() -> None:
        y = compiled(x)
        (y.to_local() if hasattr(y, "to_local") else y).float().sum().backward()

    nodes = inductor_nodes(run)
    total = sum(n for node, n in nodes if type(node).__name__ != "ExternKernelSchedulerNode")
    return {"bytes": total}


if __name__ == "__main__":
    print(json.dumps(main(json.loads(sys.argv[1]))))
