"""Measured truth for the blocks FSDP2's reduce-scatter leaves behind: real training steps of a small random-weight
transformers model under ``fully_shard(..., mp_policy=MixedPrecisionPolicy(param_dtype=bf16, reduce_dtype=fp32))``
on the CPU over gloo (each decoder layer one unit, the root module another, as torchtitan wraps them).

After the last step's backward, rank 0 reads every parameter's sharded gradient: the storage it is a view of
(``foreach_reduce`` makes them ``as_strided`` views of one flat reduce-scatter output per unit) and each storage's
bytes; then, after ``optimizer.zero_grad(set_to_none=True)``, which parameters' storages are still alive (weak
references). It also follows every all-gather output (``foreach_all_gather``'s flat buffer, allocated on the
all-gather copy-in stream on a GPU): its bytes, and the bytes of the earlier ones still alive when it is made (CPU
order, which is the order the caching allocator sees). Run as a script with RANK / WORLD_SIZE / MASTER_ADDR / MASTER_PORT set; rank 0 prints one JSON object.
Nothing here imports llmsizer.
"""

from __future__ import annotations

import gc
import weakref
from typing import Any


def main(case: dict[str, Any]) -> dict[str, Any] | None:
    import torch
    import torch.distributed.fsdp._fully_shard._fsdp_param_group as param_group
    from ranks import end_rank, rank_model
    from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard

    conf, model = rank_model(case)
    mp = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
    for layer in model.model.layers:
        fully_shard(layer, mp_policy=mp)
    fully_shard(model, mp_policy=mp)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, foreach=False)
    ids = torch.randint(0, conf.vocab_size, (case["batch"], case["seq"]))
    gathers: list[tuple[str, int, list[int]]] = []  # (pass, bytes, bytes of the earlier ones still alive)
    outputs: list[tuple[weakref.ref[torch.Tensor], int]] = []
    where = ["forward"]
    all_gather = param_group.foreach_all_gather

    def followed(*args: Any, **kwargs: Any) -> Any:
        result = all_gather(*args, **kwargs)
        if result is not None:
            out = result.all_gather_output
            alive = [n for r, n in outputs if r() is not None]
            outputs.append((weakref.ref(out), out.numel() * out.element_size()))
            gathers.append((where[0], outputs[-1][1], alive))
        return result

    param_group.foreach_all_gather = followed  # FSDPParamGroup.unshard calls it by this module-level name
    storages: dict[int, int] = {}
    grad_bytes = views = 0
    refs: dict[str, weakref.ref[torch.Tensor]] = {}
    for step in range(2):
        gathers.clear()
        for _ in range(case.get("accumulate", 1)):
            where[0] = "forward"
            loss = model(input_ids=ids, labels=ids).loss
            where[0] = "backward"
            loss.backward()
            del loss
        if step == 1:
            for name, p in model.named_parameters():
                local = p.grad._local_tensor
                storages[local.untyped_storage().data_ptr()] = local.untyped_storage().nbytes()
                grad_bytes += local.numel() * local.element_size()
                if local._base is not None:
                    views += 1
                    refs[name] = weakref.ref(local._base)
        opt.step()
        opt.zero_grad(set_to_none=True)
    gc.collect()
    return end_rank({"storage_bytes": sorted(storages.values()), "grad_bytes": grad_bytes, "views": views,
                     "params": len(list(model.parameters())), "all_gathers": gathers,
                     "alive_after_zero_grad": sorted(n for n, r in refs.items() if r() is not None)})


if __name__ == "__main__":
    from ranks import rank_main

    rank_main(main)
