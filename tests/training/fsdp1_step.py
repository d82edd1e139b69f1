"""Measured truth for FSDP1 flat parameters: one LoRA training step of a small random-weight transformers model wrapped
by ``FullyShardedDataParallel`` (``use_orig_params=True``, each decoder layer one unit, the root another, as torchtune's
FSDP1 recipes wrapped them) on the CPU over gloo, one process per rank; without ``lora`` in the case, a full fine-tune,
and with ``no_sync`` the backward of one accumulating micro-batch under ``no_sync()`` (Lightning Fabric's
``no_backward_sync``). After the backward, rank 0 prints one JSON
object: the bytes of every flat parameter's sharded gradient (``flat_param.grad``), the bytes of the trained
parameters, and the bytes of all parameters. Nothing here imports llmsizer.
"""

from __future__ import annotations

import functools
from typing import Any


def main(case: dict[str, Any]) -> dict[str, Any] | None:
    import peft
    import torch
    from ranks import end_rank, rank_model
    from torch.distributed.fsdp import FullyShardedDataParallel as FSDP
    from torch.distributed.fsdp.wrap import lambda_auto_wrap_policy

    dtype = {"fp32": torch.float32, "bf16": torch.bfloat16}[case.get("dtype", "bf16")]
    conf, model = rank_model(case, dtype)
    lora = case.get("lora")
    if lora is not None:
        model = peft.get_peft_model(model, peft.LoraConfig(r=lora["r"], lora_alpha=2 * lora["r"],
                                                           target_modules=lora["targets"], lora_dropout=0.0))
        model = model.to(dtype)  # one dtype per flat parameter: the adapters in the base dtype
        layer_cls = type(model.get_base_model().get_decoder().layers[0])
    else:  # full fine-tuning
        layer_cls = type(model.get_decoder().layers[0])
    policy = functools.partial(lambda_auto_wrap_policy, lambda_fn=lambda m: isinstance(m, layer_cls))
    if case.get("root_peak"):
        return end_rank(_root_peak(model, policy, conf, case))
    fsdp = FSDP(model, auto_wrap_policy=policy, use_orig_params=True, device_id=torch.device("cpu"))
    trained = sum(p.numel() * p.element_size() for p in model.parameters() if p.requires_grad)
    total = sum(p.numel() * p.element_size() for p in model.parameters())
    ids = torch.randint(0, conf.vocab_size, (case["batch"], case["seq"]))
    if case.get("no_sync"):  # one accumulating micro-batch: no reduce-scatter, the unsharded gradients kept
        with fsdp.no_sync():
            fsdp(input_ids=ids, labels=ids).loss.backward()
    else:
        fsdp(input_ids=ids, labels=ids).loss.backward()
    flat = [m._flat_param for m in FSDP.fsdp_modules(fsdp) if getattr(m, "_flat_param", None) is not None]
    grad = sum(f.grad.numel() * f.grad.element_size() for f in flat if f.grad is not None)
    return end_rank({"flat_grad_bytes": grad, "trained_param_bytes": trained, "param_bytes": total, "units": len(flat)})


def _root_peak(model: Any, policy: Any, conf: Any, case: dict[str, Any]) -> dict[str, Any]:
    """Full fine-tune, two micro-batches under ``no_sync()``, every tensor followed from the wrapping on by
    ``measure_step.LiveTensorBytes``: the peak of the second micro-batch above the bytes live before it, and the
    root unit's elements (unsharded)."""
    import torch
    from measure_step import LiveTensorBytes
    from torch.distributed.fsdp import FullyShardedDataParallel as FSDP

    ids = torch.randint(0, conf.vocab_size, (case["batch"], case["seq"]))
    tracker = LiveTensorBytes(lambda live: {})
    with tracker.mode:
        fsdp = FSDP(model, auto_wrap_policy=policy, use_orig_params=True, device_id=torch.device("cpu"))
        for p in fsdp.parameters():
            tracker.track(p)
        flat = [m._flat_param for m in FSDP.fsdp_modules(fsdp) if getattr(m, "_flat_param", None) is not None]
        for f in flat:
            tracker.track(f)
        with fsdp.no_sync():  # the step's first micro-batch: its unsharded gradients stay
            fsdp(input_ids=ids).logits.float().sum().backward()
        for f in flat:
            tracker.track(f.grad)
        before = tracker.peak = tracker.current
        with fsdp.no_sync():
            fsdp(input_ids=ids).logits.float().sum().backward()
    root = next(m for m in FSDP.fsdp_modules(fsdp) if m is fsdp)._flat_param
    return {"peak_over_held": tracker.peak - before, "root_elements": root._unpadded_unsharded_size.numel()}


if __name__ == "__main__":
    from ranks import rank_main

    rank_main(main)
