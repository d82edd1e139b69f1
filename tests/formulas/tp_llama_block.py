"""The torchtitan-style Llama block the tensor-parallel measurement scripts share (sequence_parallel_copies_step.py,
tests/training/op_sac_tp_collectives_step.py): RMSNorm -> separate q/k/v -> SDPA -> o -> residual -> RMSNorm ->
SwiGLU gate/up/down -> residual (no rotary), tensor-parallel with PyTorch's own styles as torchtitan @820504e
``parallelize_llama.py`` ``apply_tp`` lines 178-203 applies them: ``SequenceParallel`` norms, ``PrepareModuleInput``
Shard(1) -> Replicate, column-parallel q/k/v/gate/up, row-parallel o/down with output Shard(1). Imports torch only
when called; nothing here imports llmsizer."""

from __future__ import annotations

from typing import Any


def tp_llama_block(hidden: int, inter: int, heads: int, mesh: Any, dtype: Any = None) -> Any:
    """One such block of width ``hidden``, feed-forward ``inter`` and ``heads`` heads, in ``dtype`` (torch's default
    when None), parallelized over ``mesh``."""
    import torch.nn.functional as F
    from torch import nn
    from torch.distributed.tensor import Replicate, Shard
    from torch.distributed.tensor.parallel import (
        ColwiseParallel,
        PrepareModuleInput,
        RowwiseParallel,
        SequenceParallel,
        parallelize_module,
    )

    h, i, d = hidden, inter, hidden // heads

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

    block = Block() if dtype is None else Block().to(dtype)
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
    return block
