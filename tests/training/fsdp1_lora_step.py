"""Measured truth for FSDP1 LoRA as torchtune's 2024 distributed LoRA recipe wrapped it: a small random-weight
transformers Llama with PEFT LoRA adapters, wrapped by ``FullyShardedDataParallel`` with every LoRA A and B matrix its
own unit and every decoder layer another (the policy of torchtune's ``lora_fsdp_wrap_policy``, torchtune/utils/
_distributed.py @ 0217d44c2 lines 212-242, and of PEFT's ``fsdp_auto_wrap_policy``: a module whose weight requires
grad, or a decoder layer), the root holding the rest; ``use_orig_params`` left False, ``mixed_precision=None``,
FULL_SHARD (recipes/lora_finetune_distributed.py @ 0217d44c2 lines 332-350), everything in bf16 (the recipe's
``model.to(torch.bfloat16)``). With ``wrap: "layers"`` instead, the adapters stay in their decoder layer's unit
(``use_orig_params=True``, one flat parameter mixing frozen and trained elements). Without ``lora`` in the case, a
full fine-tune as torchtune's 2024-05 full recipe wrapped it (recipes/full_finetune_distributed.py @ 0217d44c2 lines
293-303: ``ModuleWrapPolicy({TransformerDecoderLayer})``, FULL_SHARD, ``mixed_precision=None``, FSDP1's defaults
otherwise: ``BACKWARD_PRE`` prefetch).

Two steps on the CPU over gloo, one process per rank (``accumulate`` micro-batches of forward, the loss taken
outside the model on the upcast logits as torchtune's recipe does, backward; an AdamW step;
``zero_grad(set_to_none=True)``), ``grad_ckpt``: transformers' non-reentrant checkpointing of each decoder layer.
Followed by ``measure_step.AllocatorBytes`` (torch.profiler's records of every CPU allocation and free, entered
before the model is built, so FSDP1's storage resizes of its unsharded flat parameters are seen): rank 0 prints the
peak live bytes of the second step, the bytes live before it, the sharded flat gradients' bytes after its backward,
the flat parameters' bytes, and (``unsharded``) the unsharded flat parameter bytes of each unit after every
all-gather and at the loss backward of its last micro-batch, and (``collectives``) every all-gather and reduce-scatter payload of the second step by pass (ranks.py
``count_collectives``). Nothing here imports llmsizer.

Which units are unsharded at the step's peak is not read from the allocator records: a reduce-scatter's unsharded
gradient (one block's bytes) is freed by whichever thread drops it last, the rank's or gloo's worker, and a free on
the worker goes unseen (``AllocatorBytes``), so the live bytes after it stay a block too high for the rest of the
step, in some runs and not others, and the stretch between two all-gather/reshard marks that holds the highest
count moves between layer 1's backward (root and two blocks) and layer 0's (root and one block). ``unsharded`` is
FSDP's own state at each all-gather, the same in every run.
"""

from __future__ import annotations

import functools
import gc
from typing import Any


def main(case: dict[str, Any]) -> dict[str, Any] | None:
    import peft
    import torch
    from measure_step import AllocatorBytes
    from ranks import count_collectives, end_rank, rank_model
    from torch.distributed.fsdp import FullyShardedDataParallel as FSDP
    from torch.distributed.fsdp import ShardingStrategy
    from torch.distributed.fsdp.wrap import lambda_auto_wrap_policy

    counter = AllocatorBytes()
    with counter:
        conf, model = rank_model(case, torch.bfloat16)
        lora = case.get("lora")
        if lora is not None:
            model = peft.get_peft_model(model, peft.LoraConfig(r=lora["r"], lora_alpha=2 * lora["r"],
                                                               target_modules=lora["targets"], lora_dropout=0.0))
            model = model.to(torch.bfloat16)  # the recipe's model.to(torch.bfloat16): adapters in bf16 too
        base = model.get_base_model() if lora is not None else model
        if case.get("grad_ckpt"):
            base.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
        layer_cls = type(base.get_decoder().layers[0])
        # without lora, a full fine-tune: ModuleWrapPolicy({decoder layer}), use_orig_params False
        apart = lora is not None and case.get("wrap", "adapters-apart") == "adapters-apart"

        def unit(m: torch.nn.Module) -> bool:
            trained_leaf = (apart and not list(m.children()) and getattr(m, "weight", None) is not None
                            and m.weight.requires_grad)
            return trained_leaf or isinstance(m, layer_cls)

        policy = functools.partial(lambda_auto_wrap_policy, lambda_fn=unit)
        fsdp = FSDP(model, auto_wrap_policy=policy, use_orig_params=lora is not None and not apart, device_id=torch.device("cpu"),
                    sharding_strategy=ShardingStrategy.FULL_SHARD, mixed_precision=None)
        opt = torch.optim.AdamW([p for p in fsdp.parameters() if p.requires_grad], lr=1e-4)
        ids = torch.randint(0, conf.vocab_size, (case["batch"], case["seq"]))
        flat = [m._flat_param for m in FSDP.fsdp_modules(fsdp) if getattr(m, "_flat_param", None) is not None]
        marks = 0

        def mark() -> None:
            nonlocal marks
            counter.mark()
            marks += 1

        layouts = _follow_unsharded(fsdp, layer_cls, mark)
        sent = count_collectives(lambda: "backward" if torch._C._current_graph_task_id() != -1 else "forward")
        grads = 0
        for step in range(2):
            sent.clear()
            gc.collect()  # nothing left in a reference cycle counted as held
            first = marks
            mark()
            for _ in range(case.get("accumulate", 1)):  # micro-batches, each reduce-scattered (no no_sync)
                layouts.clear()
                logits = _Probe.apply(fsdp(input_ids=ids).logits, layouts)  # torchtune: the loss outside the model
                loss = torch.nn.functional.cross_entropy(logits.flatten(0, 1).float(), ids.flatten())
                del logits
                loss.backward()
                del loss
            if step == 1:
                grads = sum(f.grad.numel() * f.grad.element_size() for f in flat if f.grad is not None)
            opt.step()
            opt.zero_grad(set_to_none=True)
        last = marks
        mark()
    units = {"trained": sum(1 for f in flat if f.requires_grad), "frozen": sum(1 for f in flat if not f.requires_grad)}
    return end_rank({"peak": counter.peak(first), "before": counter.level(first), "after": counter.level(last),
                     "flat_grad_bytes": grads, "units": units, "unsharded": layouts,
                     "flat_param_bytes": sum(f.numel() * f.element_size() for f in flat), "collectives": sent})


def _unsharded(fsdp: Any, layer_cls: type) -> dict[str, int]:
    """Bytes of unsharded flat parameter storage each unit holds now: 'root', 'layer i', adapters summed."""
    from torch.distributed.fsdp import FullyShardedDataParallel as FSDP

    out: dict[str, int] = {}
    layers = 0
    for m in FSDP.fsdp_modules(fsdp):
        h = m._handle
        if h is None:
            continue
        padded = getattr(h.flat_param, "_full_param_padded", None)  # made at FSDP's lazy init (the first forward)
        n = 0 if padded is None else padded.untyped_storage().nbytes()
        wrapped = m._fsdp_wrapped_module
        name = ("root" if m is fsdp else f"layer {layers}" if isinstance(wrapped, layer_cls) else "adapters")
        layers += isinstance(wrapped, layer_cls)
        if n:
            out[name] = out.get(name, 0) + n
    return out


def _follow_unsharded(fsdp: Any, layer_cls: type, mark: Any) -> list[tuple[str, dict[str, int]]]:
    """After every ``FlatParamHandle.unshard`` (an all-gather into the unsharded flat parameter, prefetches
    included) and at the loss backward (``_Probe``): (moment, unsharded bytes per unit); ``mark()`` after every
    unshard and every ``FlatParamHandle.reshard``."""
    import torch
    import torch.distributed.fsdp._flat_param as flat_param

    seen: list[tuple[str, dict[str, int]]] = []
    unshard = flat_param.FlatParamHandle.unshard

    def followed(self: Any) -> None:
        unshard(self)
        moment = "backward" if torch._C._current_graph_task_id() != -1 else "forward"
        seen.append((moment, _unsharded(fsdp, layer_cls)))
        mark()

    reshard = flat_param.FlatParamHandle.reshard

    def resharded(self: Any, free_unsharded_flat_param: bool) -> None:
        reshard(self, free_unsharded_flat_param)
        mark()

    flat_param.FlatParamHandle.unshard = followed  # type: ignore[method-assign]
    flat_param.FlatParamHandle.reshard = resharded  # type: ignore[method-assign]
    _Probe.follow = functools.partial(_unsharded, fsdp, layer_cls)
    return seen


class _Probe:
    """Identity on the logits whose backward (the loss backward's end) records the unsharded bytes."""
    follow: Any = None

    @staticmethod
    def apply(x: Any, seen: list[tuple[str, dict[str, int]]]) -> Any:
        import torch

        class Fn(torch.autograd.Function):
            @staticmethod
            def forward(ctx: Any, t: Any) -> Any:
                return t.view_as(t)

            @staticmethod
            def backward(ctx: Any, g: Any) -> Any:
                seen.append(("loss backward", _Probe.follow()))
                return g

        return Fn.apply(x)


if __name__ == "__main__":
    from ranks import rank_main

    rank_main(main)
