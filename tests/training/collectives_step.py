"""Measured truth for the data-parallel collectives under gradient accumulation: real training steps of a small
random-weight transformers model over gloo ranks on the CPU, recording every collective the framework issues and
the micro-step it falls in.

Run as a script (``python collectives_step.py '<case json>'`` with RANK / WORLD_SIZE / MASTER_PORT set); prints one
JSON object: ``runs``, for each variant a list of [phase, op, payload bytes] where phase is the micro-step index
(0 .. k-1) or ``"step"`` (the optimizer step) and the payload is the tensor the collective reduces or gathers (all
ranks' elements), and ``grad_elements`` (the trained parameters). Nothing here imports llmsizer.

- ``ddp``: torch ``DistributedDataParallel``, one optimizer step of a plain loop (variant ``ddp``) and one with every
  micro-step but the last under ``DDP.no_sync()`` (variant ``ddp-no-sync``); each gradient bucket is recorded by a
  communication hook (``register_comm_hook``) that then runs torch's own ``allreduce_hook``.
- ``zero1`` / ``zero2``: ``deepspeed.initialize`` with ZeRO stage 1 or 2, bf16 and ``gradient_accumulation_steps``
  k (DeepSpeed's defaults otherwise); the Python-level ``torch.distributed`` collectives DeepSpeed's torch backend
  calls are wrapped to record them.
"""

from __future__ import annotations

import importlib
import sys
from typing import Any

CALLS: list[list[Any]] = []
PHASE: list[Any] = [None]


def _nbytes(t: Any) -> int:
    return int(t.numel() * t.element_size())


def _wrap_torch_collectives() -> None:
    import torch.distributed as dist

    def wrap(name: str, payload: Any) -> None:
        fn = getattr(dist, name)

        def rec(*args: Any, **kwargs: Any) -> Any:
            CALLS.append([PHASE[0], name, payload(args, kwargs)])
            return fn(*args, **kwargs)
        setattr(dist, name, rec)

    def first(args: tuple[Any, ...], kwargs: dict[str, Any], key: str) -> Any:
        return args[0] if args else kwargs[key]

    wrap("all_reduce", lambda a, k: _nbytes(first(a, k, "tensor")))
    wrap("reduce", lambda a, k: _nbytes(first(a, k, "tensor")))
    # all-gather: the output holds every rank's elements
    wrap("all_gather_into_tensor", lambda a, k: _nbytes(a[0] if a else k["output_tensor"]))
    wrap("all_gather", lambda a, k: sum(_nbytes(t) for t in (a[0] if a else k["tensor_list"])))
    wrap("reduce_scatter_tensor", lambda a, k: _nbytes(a[1] if len(a) > 1 else k["input"]))


def main(case: dict[str, Any]) -> dict[str, Any]:
    import torch
    import torch.distributed as dist
    import transformers

    transformers.logging.set_verbosity_error()
    torch.set_num_threads(1)
    conf = transformers.AutoConfig.for_model(**case["config"])
    conf._attn_implementation = "sdpa"
    k, mode = case["micro_steps"], case["mode"]
    batch, seq = case["batch"], case["seq"]
    if mode.startswith("ddp"):
        from torch.distributed.algorithms.ddp_comm_hooks.default_hooks import allreduce_hook
        from torch.nn.parallel import DistributedDataParallel as DDP

        dist.init_process_group("gloo")
        torch.manual_seed(0)
        model = DDP(transformers.AutoModelForCausalLM.from_config(conf))

        def hook(state, bucket):  # type: ignore[no-untyped-def]  # torch checks the annotations: none or its own
            CALLS.append([PHASE[0], "all_reduce", _nbytes(bucket.buffer())])
            return allreduce_hook(state, bucket)
        model.register_comm_hook(None, hook)
        opt = torch.optim.AdamW(model.parameters(), lr=1e-4, foreach=False)
        ids = torch.randint(0, conf.vocab_size, (batch, seq))
        runs = {}
        for variant in ("ddp", "ddp-no-sync"):  # one optimizer step of k micro-steps each
            CALLS.clear()
            for i in range(k):
                PHASE[0] = i
                ctx = model.no_sync() if variant == "ddp-no-sync" and i < k - 1 else torch.enable_grad()
                with ctx:
                    model(input_ids=ids, labels=ids).loss.backward()
            PHASE[0] = "step"
            opt.step()
            opt.zero_grad()
            runs[variant] = list(CALLS)
        grad_elements = sum(p.numel() for p in model.parameters() if p.requires_grad)
        return {"runs": runs, "grad_elements": grad_elements}
    import deepspeed

    importlib.import_module("deepspeed.comm.torch")
    sys.modules["deepspeed.comm.torch"].build_shm_op = lambda: None  # type: ignore[attr-defined]
    ds_config = {"train_micro_batch_size_per_gpu": batch, "gradient_accumulation_steps": k,
                 "bf16": {"enabled": True}, "zero_optimization": {"stage": int(mode[-1])},
                 "optimizer": {"type": "AdamW", "params": {"lr": 1e-4, "torch_adam": True, "fused": False}}}
    _wrap_torch_collectives()  # before DeepSpeed's backend takes its all-gather function (comm/torch.py line 112)
    deepspeed.init_distributed(dist_backend="gloo")
    torch.manual_seed(0)
    model = transformers.AutoModelForCausalLM.from_config(conf)
    grad_elements = sum(p.numel() for p in model.parameters() if p.requires_grad)
    engine, _, _, _ = deepspeed.initialize(model=model, config=ds_config, model_parameters=model.parameters())
    CALLS.clear()  # initialisation's own broadcasts and gathers
    ids = torch.randint(0, conf.vocab_size, (batch, seq))
    for i in range(k):
        PHASE[0] = i
        loss = engine(input_ids=ids, labels=ids).loss
        engine.backward(loss)
        if i == k - 1:
            PHASE[0] = "step"
        engine.step()  # a no-op but at the accumulation boundary
    return {"runs": {mode: CALLS}, "grad_elements": grad_elements}


if __name__ == "__main__":
    from ranks import rank_main

    rank_main(main)
