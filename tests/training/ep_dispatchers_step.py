"""Measured truth for the allgather and flex MoE token dispatchers: one MoE layer's forward and backward on CPU ranks
over gloo, random top-k routing, every collective's bytes to or from the other ranks recorded.

- 'allgather' (NVIDIA/Megatron-LM @d98e8a64 megatron/core/transformer/moe/token_dispatcher.py
  ``MoEAllGatherTokenDispatcher``, lines 233-303 and 365): every rank all-gathers all ranks' routing map ([T, E]
  bool, under no_grad, lines 287-292), probabilities ([T, E], with autograd, line 296) and tokens (lines 299-301),
  runs its local experts on the tokens routed to them, and reduce-scatters the outputs back. The autograd functions are Megatron's
  pair (megatron/core/tensor_parallel/mappings.py ``_GatherFromSequenceParallelRegion``: forward all-gather, backward
  reduce-scatter; ``_ReduceScatterToSequenceParallelRegion``: the reverse). Gloo has no reduce-scatter, so it runs as
  an all-to-all of the P chunks and a sum, which moves the same bytes per rank as a ring reduce-scatter.
- 'flex' (DeepEP / HybridEP, token_dispatcher.py ``MoEFlexTokenDispatcher`` lines 1809-1860): each token goes once
  to each rank that holds at least one of its experts (not once per expert), and that rank returns one row for it,
  its local experts' weighted sum. Torch's autograd all-to-all (``all_to_all_single``, backward the transposed one).
  The routing weights for the receiver's local experts travel in a side all-to-all of ``local`` floats per row,
  not counted (only tensors of the hidden width are).

Per rank the script also counts, from the same routing draws, the distinct other machines (ranks // per_machine)
holding one of each token's experts: the network copies of DeepEP's hierarchical dispatch.

Rank 0 returns one JSON object (``ranks.rank_main`` prints it): per rank, the bytes of each counted collective in
call order, and the machine copies.
Nothing here imports llmsizer.
"""

from __future__ import annotations

from typing import Any


def main(case: dict[str, Any]) -> dict[str, Any] | None:
    import torch
    import torch.distributed as dist
    from torch.distributed.nn.functional import all_to_all_single as a2a

    dist.init_process_group("gloo")
    rank, ranks = dist.get_rank(), dist.get_world_size()
    tokens, experts, topk, hidden = case["tokens"], case["experts"], case["topk"], case["hidden"]
    local = experts // ranks
    moved: list[int] = []
    original = dist.all_to_all_single

    def counted(output: Any, input: Any, output_split_sizes: Any = None, input_split_sizes: Any = None,
                group: Any = None, async_op: bool = False) -> Any:
        if input.is_floating_point() and input.dim() == 2:
            rows = input_split_sizes or [input.shape[0] // ranks] * ranks
            moved.append((input.shape[0] - rows[rank]) * hidden * input.element_size())
        return original(output, input, output_split_sizes, input_split_sizes, group=group, async_op=async_op)

    dist.all_to_all_single = counted

    def all_gather(x: Any) -> Any:
        parts = [torch.empty_like(x) for _ in range(ranks)]
        dist.all_gather(parts, x.contiguous())
        moved.append((ranks - 1) * x.numel() * x.element_size())  # received from the others
        return torch.cat(parts)

    def reduce_scatter(x: Any) -> Any:
        got = torch.empty_like(x)
        dist.all_to_all_single(got, x.contiguous())  # chunk j to rank j (counted above), then summed
        return got.reshape(ranks, -1, x.shape[1]).sum(0)

    class Gather(torch.autograd.Function):
        @staticmethod
        def forward(ctx: Any, x: Any) -> Any:
            return all_gather(x)

        @staticmethod
        def backward(ctx: Any, g: Any) -> Any:
            return reduce_scatter(g)

    class Scatter(torch.autograd.Function):
        @staticmethod
        def forward(ctx: Any, x: Any) -> Any:
            return reduce_scatter(x)

        @staticmethod
        def backward(ctx: Any, g: Any) -> Any:
            return all_gather(g)

    torch.manual_seed(4321 + rank)
    x = torch.randn(tokens, hidden, requires_grad=True)
    w = torch.nn.Parameter(torch.randn(local, hidden, hidden) / hidden ** 0.5)
    scores = torch.rand(tokens, experts, requires_grad=True)
    probs, chosen = scores.topk(topk, dim=1)
    owner = chosen // local  # the rank holding each chosen expert
    machine = owner // case["per_machine"]
    mine = rank // case["per_machine"]
    machine_copies = sum(len(set(m.tolist()) - {mine}) for m in machine)

    if case["dispatcher"] == "allgather":
        # the bool map as its 1-byte uint8 (gloo has no bool all-gather)
        routing_map = torch.zeros(tokens, experts, dtype=torch.uint8).scatter(1, chosen, 1)
        with torch.no_grad():
            all_map = all_gather(routing_map).bool()
        all_probs = Gather.apply(torch.zeros(tokens, experts).scatter(1, chosen, probs))
        every = Gather.apply(x)
        out = torch.zeros_like(every)
        for e in range(local):
            rows = all_map[:, rank * local + e]
            out = out.index_add(0, rows.nonzero()[:, 0], (every[rows] @ w[e]) * all_probs[rows, rank * local + e, None])
        y = Scatter.apply(out)
    else:
        dest = [[t for t in range(tokens) if (owner[t] == r).any()] for r in range(ranks)]
        order = torch.tensor([t for r in range(ranks) for t in dest[r]], dtype=torch.long)
        splits = [len(d) for d in dest]
        counts = torch.tensor(splits)
        theirs = torch.empty_like(counts)
        original(theirs, counts)
        back_splits = theirs.tolist()
        weights = torch.zeros(tokens, experts).scatter(1, chosen, probs).reshape(tokens, ranks, local)
        side = torch.cat([weights[dest[r], r] for r in range(ranks)])  # [rows, local] for the receiver's experts
        got_w = torch.empty(sum(back_splits), local)
        original(got_w, side, back_splits, splits)
        got = a2a(torch.empty(sum(back_splits), hidden), x[order], back_splits, splits)
        out = sum((got @ w[e]) * got_w[:, e:e + 1] for e in range(local))
        back = a2a(torch.empty(len(order), hidden), out, splits, back_splits)
        y = torch.zeros(tokens, hidden).index_add(0, order, back)
    y.square().sum().backward()
    dist.all_to_all_single = original
    everyone: list[Any] = [None] * ranks
    dist.all_gather_object(everyone, {"moved": moved, "machine_copies": machine_copies})
    return {"ranks": everyone} if rank == 0 else None  # the group stays up: rank_main leaves it (ranks.leave_ranks)


if __name__ == "__main__":
    from ranks import rank_main

    rank_main(main)
