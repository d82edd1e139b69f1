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
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor import Shard, distribute_tensor
    from torch.testing._internal.distributed.fake_pg import FakeStore

    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from inductor_nodes import inductor_nodes
    from tp_llama_block import tp_llama_block

    tp, h, i, heads, b, s = (case[k] for k in ("tp", "hidden", "inter", "heads", "batch", "seq"))
    dist.init_process_group("fake", store=FakeStore(), rank=0, world_size=tp)
    torch.manual_seed(0)
    torch.set_num_threads(1)

    mesh = init_device_mesh("cpu", (tp,))
    block = tp_llama_block(h, i, heads, mesh, torch.bfloat16)
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
