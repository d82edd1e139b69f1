"""Measured truth for FSDP2 mixed precision: real training steps of a small random-weight transformers model under
``fully_shard(..., mp_policy=MixedPrecisionPolicy(param_dtype=bf16, reduce_dtype=fp32))`` on the CPU over gloo, one
process per rank, measured by PyTorch's own ``torch.distributed._tools.fsdp2_mem_tracker.FSDPMemTracker`` (which
follows sharded and unsharded parameters, all-gather and reduce-scatter buffers, gradients, optimizer states and
activations of an FSDP2 model, including the storages FSDP2 frees by resizing them to zero).

Run as a script with RANK / WORLD_SIZE / MASTER_ADDR / MASTER_PORT set; rank 0 prints one JSON object: the peak of
the second step by category. Nothing here imports llmsizer. Each decoder layer is one FSDP unit and the root module
another, as torchtitan and torchtune wrap them.
"""

from __future__ import annotations

from typing import Any


def main(case: dict[str, Any]) -> dict[str, Any] | None:
    import torch
    from ranks import end_rank, rank_model
    from torch.distributed._tools.fsdp2_mem_tracker import FSDPMemTracker
    from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard

    conf, model = rank_model(case)
    if case.get("grad_ckpt"):
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    mp = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
    for layer in model.model.layers:
        fully_shard(layer, mp_policy=mp)
    fully_shard(model, mp_policy=mp)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, foreach=False)
    ids = torch.randint(0, conf.vocab_size, (case["batch"], case["seq"]))
    tracker = FSDPMemTracker(model, opt)
    tracker.track_inputs((ids,))
    with tracker:
        for step in range(2):
            loss = model(input_ids=ids, labels=ids).loss
            loss.backward()
            del loss
            opt.step()
            opt.zero_grad(set_to_none=True)
            if step == 0:
                tracker.reset_mod_stats()
    peak = tracker.get_tracker_snapshot("peak")
    return end_rank({str(k).split(".")[-1]: int(v) for dev, d in peak.items() if str(dev) == "cpu" for k, v in d.items()})


if __name__ == "__main__":
    from ranks import rank_main

    rank_main(main)
