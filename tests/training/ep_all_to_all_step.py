"""Measured truth for the expert-parallel token exchange: one MoE layer's forward and backward on CPU ranks over gloo,
the routed tokens dispatched and combined with torch's autograd all-to-all (``torch.distributed.nn.functional.
all_to_all_single``, whose backward is the transposed all-to-all) in the alltoall dispatcher's arithmetic
(NVIDIA/Megatron-LM @d98e8a64 megatron/core/transformer/moe/token_dispatcher.py: ``input_splits`` = the local
tokens per expert summed over each EP rank's local experts, lines 563-565; the copies permuted by expert, the output
splits from the exchanged counts; combine with the splits swapped, line 864), random top-k routing.

Every ``torch.distributed.all_to_all_single`` call of floating-point data is recorded: the bytes the rank sends to
the other ranks (its input less the split it keeps). Rank 0 returns one JSON object (``ranks.rank_main`` prints
it): per rank, the list of those bytes in call order. Nothing here imports llmsizer.
"""

from __future__ import annotations

from typing import Any


def main(case: dict[str, Any]) -> dict[str, Any] | None:
    import torch
    import torch.distributed as dist
    from torch.distributed.nn.functional import all_to_all_single as a2a
    from torch.utils.checkpoint import checkpoint

    dist.init_process_group("gloo")
    rank, ep = dist.get_rank(), dist.get_world_size()
    tokens, experts, topk, hidden = case["tokens"], case["experts"], case["topk"], case["hidden"]
    local = experts // ep
    sent: list[int] = []
    original = dist.all_to_all_single

    def counted(output: Any, input: Any, output_split_sizes: Any = None, input_split_sizes: Any = None,
                group: Any = None, async_op: bool = False) -> Any:
        if input.is_floating_point():
            rows = input_split_sizes or [input.shape[0] // ep] * ep
            sent.append((input.shape[0] - rows[rank]) * input[0].numel() * input.element_size())
        return original(output, input, output_split_sizes, input_split_sizes, group=group, async_op=async_op)

    dist.all_to_all_single = counted  # torch.distributed.nn.functional calls it as dist.all_to_all_single
    torch.manual_seed(1234 + rank)
    x = torch.randn(tokens, hidden, requires_grad=True)
    w = torch.nn.Parameter(torch.randn(local, hidden, hidden) / hidden ** 0.5)

    def layer(x: Any) -> Any:
        scores = torch.rand(tokens, experts)
        probs, chosen = scores.topk(topk, dim=1)
        routing = torch.zeros(tokens, experts, dtype=torch.bool).scatter_(1, chosen, True)
        per_expert = routing.sum(0)
        input_splits = per_expert.reshape(ep, local).sum(1)
        counts = torch.empty_like(per_expert)
        original(counts, per_expert)  # [ep x local] each rank's count for my local experts (integers: not counted)
        mine = counts.reshape(ep, local)
        output_splits = mine.sum(1)
        token_idx = routing.T.nonzero()[:, 1]  # the copies grouped by expert, as Megatron's permute orders them
        weights = (probs.new_zeros(tokens, experts).scatter(1, chosen, probs)).T[routing.T]
        got = a2a(torch.empty(int(output_splits.sum()), hidden), x[token_idx], output_splits.tolist(),
                  input_splits.tolist())
        # the received copies come rank by rank, each rank's grouped by my local experts
        outs, start = [], 0
        for r in range(ep):
            for e in range(local):
                n = int(mine[r, e])
                outs.append(got[start:start + n] @ w[e])
                start += n
        back = a2a(torch.empty(len(token_idx), hidden), torch.cat(outs), input_splits.tolist(),
                   output_splits.tolist())
        return torch.zeros(tokens, hidden).index_add(0, token_idx, back * weights[:, None])

    out = checkpoint(layer, x, use_reentrant=case["reentrant"]) if case["recompute"] else layer(x)
    out.square().sum().backward()
    dist.all_to_all_single = original
    everyone: list[Any] = [None] * ep
    dist.all_gather_object(everyone, sent)
    return {"sent": everyone} if rank == 0 else None  # the group stays up: rank_main leaves it (ranks.leave_ranks)


if __name__ == "__main__":
    from ranks import rank_main

    rank_main(main)
