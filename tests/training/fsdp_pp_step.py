"""Measured truth for FSDP2 inside a pipeline stage: real micro-batch steps of a small random-weight transformers
model under ``fully_shard(..., reshard_after_forward=False, mp_policy=MixedPrecisionPolicy(param_dtype=bf16,
reduce_dtype=fp32))`` (torchtitan's wrapping when PP is on: parallelize_llama.py @ 9dec370 lines 326-339) on the CPU
over gloo, each micro-batch's backward run with the settings torch's pipeline stage gives an FSDP stage
(torch/distributed/pipelining/stage.py ``backward_maybe_with_nosync``: ``set_is_last_backward(False)``,
``set_reshard_after_backward(False)``, ``set_requires_gradient_sync(False)``; ``perform_reduce_grad`` turns them on
again only for the step's end). Measured by PyTorch's ``FSDPMemTracker``: the peak by category over the step. Nothing
here imports llmsizer.
"""

from __future__ import annotations

from typing import Any


def main(case: dict[str, Any]) -> dict[str, Any] | None:
    import torch
    from ranks import end_rank, rank_model
    from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard
    from torch.distributed.fsdp._fully_shard._fsdp_param import ShardedState
    from torch.distributed.fsdp._fully_shard._fsdp_state import _get_module_fsdp_state

    conf, model = rank_model(case)
    mp = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
    for layer in model.model.layers:
        fully_shard(layer, mp_policy=mp, reshard_after_forward=False)
    fully_shard(model, mp_policy=mp, reshard_after_forward=False)
    ids = torch.randint(0, conf.vocab_size, (case["batch"], case["seq"]))
    params = [p for mod in [*model.model.layers, model]
              for p in _get_module_fsdp_state(mod)._fsdp_param_group.fsdp_params]
    out: dict[str, Any] = {}
    for _ in range(case["microbatches"] - 1):  # every micro-batch but the last (stage.py lines 844-847)
        model.set_is_last_backward(False)
        model.set_reshard_after_backward(False)
        model.set_requires_gradient_sync(False)
        model(input_ids=ids, labels=ids).loss.backward()
    out["accumulated_grad_bytes"] = sum(
        g.numel() * g.element_size() for g in (p.unsharded_accumulated_grad for p in params) if g is not None)
    out["accumulated_grad_dtypes"] = sorted({str(p.unsharded_accumulated_grad.dtype) for p in params
                                             if p.unsharded_accumulated_grad is not None})
    out["unsharded_param_bytes"] = sum(p._unsharded_param.untyped_storage().nbytes() for p in params)
    out["all_unsharded"] = all(p.sharded_state == ShardedState.UNSHARDED for p in params)
    out["sharded_param_bytes"] = sum(p.sharded_param._local_tensor.untyped_storage().nbytes() for p in params)
    out["elements"] = sum(p._orig_size.numel() for p in params)
    out["shard_elements"] = sum(p.sharded_param._local_tensor.numel() for p in params)
    # the last micro-batch with the settings perform_reduce_grad restores: the step's one reduce-scatter frees the
    # unsharded accumulators (_fsdp_param_group.py line 626), so the next step's forwards run without them
    model.set_is_last_backward(True)
    model.set_reshard_after_backward(True)
    model.set_requires_gradient_sync(True)
    model(input_ids=ids, labels=ids).loss.backward()
    out["accumulators_after_the_step"] = sum(p.unsharded_accumulated_grad is not None for p in params)
    return end_rank(out)


if __name__ == "__main__":
    from ranks import rank_main

    rank_main(main)
