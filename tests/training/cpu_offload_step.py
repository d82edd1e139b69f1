"""Measured truth for FSDP2 CPU offload: what ``fully_shard(..., offload_policy=CPUOffloadPolicy())`` copies between
host and device in one training step, counted inside FSDP2's own code paths on real gloo ranks.

The model is a small random-weight transformers Llama wrapped as torchtune's full_finetune_distributed wraps its
models (torchtune @30b8519: each decoder layer, then ``custom_sharded_layers`` tok_embeddings and output, then the
root), on the CPU. On a CPU device the host-to-device copy of FSDP2's ``all_gather_inputs`` is a no-op, so the copies
are counted where FSDP2 makes them: every all-gather's input is its parameters' sharded data, copied to the device
first when ``offload_to_cpu`` (torch ``_fsdp_param.py`` ``all_gather_inputs``), so the bytes of ``_sharded_param_data``
of the offloaded parameters of each ``foreach_all_gather`` call are the H2D bytes; every reduce-scatter's sharded
output is copied to the host (``_fsdp_collectives.py`` ``foreach_reduce``), so the bytes of the sharded gradients
after the backward are the D2H bytes. Counted separately before and after ``loss.backward()``, in the second step.

Run as a script with RANK / WORLD_SIZE / MASTER_ADDR / MASTER_PORT set; rank 0 prints one JSON object. Nothing here
imports llmsizer.
"""

from __future__ import annotations

from typing import Any


def main(case: dict[str, Any]) -> dict[str, Any] | None:
    import torch
    import torch.distributed.fsdp._fully_shard._fsdp_param_group as group_mod
    from ranks import end_rank, rank_model
    from torch.distributed.fsdp import CPUOffloadPolicy, fully_shard

    conf, model = rank_model(case)
    if case.get("grad_ckpt"):
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    kw: dict[str, Any] = dict(offload_policy=CPUOffloadPolicy(pin_memory=False),
                              reshard_after_forward=case["reshard_after_forward"])
    for layer in model.model.layers:
        fully_shard(layer, **kw)
    fully_shard(model.model.embed_tokens, **kw)
    fully_shard(model.lm_head, **kw)
    fully_shard(model, **kw)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=True)

    counts = {"h2d_bytes": 0, "all_gathers": 0, "reduces": 0}
    gather, reduce = group_mod.foreach_all_gather, group_mod.foreach_reduce

    def counted_gather(fsdp_params: Any, *a: Any, **k: Any) -> Any:
        counts["all_gathers"] += 1
        counts["h2d_bytes"] += sum(p._sharded_param_data.numel() * p._sharded_param_data.element_size()
                                   for p in fsdp_params if p.offload_to_cpu)
        return gather(fsdp_params, *a, **k)

    def counted_reduce(*a: Any, **k: Any) -> Any:
        counts["reduces"] += 1
        return reduce(*a, **k)

    group_mod.foreach_all_gather = counted_gather
    group_mod.foreach_reduce = counted_reduce
    ids = torch.randint(0, conf.vocab_size, (case["batch"], case["seq"]))
    out: dict[str, Any] = {}
    for step in range(2):
        for k in counts:
            counts[k] = 0
        loss = model(input_ids=ids, labels=ids).loss
        forward = dict(counts)
        loss.backward()
        d2h = sum(p.grad.to_local().numel() * p.grad.to_local().element_size() for p in model.parameters())
        if step == 1:
            out = {"forward_h2d": forward["h2d_bytes"], "forward_all_gathers": forward["all_gathers"],
                   "backward_h2d": counts["h2d_bytes"] - forward["h2d_bytes"],
                   "backward_all_gathers": counts["all_gathers"] - forward["all_gathers"],
                   "reduces": counts["reduces"], "backward_d2h": d2h,
                   "grad_on_cpu": all(p.grad.to_local().device.type == "cpu" for p in model.parameters()),
                   "params": sum(p.numel() for p in model.parameters()),
                   "param_bytes": sum(p.numel() * p.element_size() for p in model.parameters()),
                   "root_params": sum(p.numel() for n, p in model.named_parameters() if n.startswith("model.norm"))}
        opt.step()
        opt.zero_grad(set_to_none=True)
    return end_rank(out)


if __name__ == "__main__":
    from ranks import rank_main

    rank_main(main)
