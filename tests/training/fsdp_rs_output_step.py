"""Measured truth for the blocks FSDP2 leaves behind: real training steps of a small random-weight transformers model
under ``fully_shard(..., mp_policy=MixedPrecisionPolicy(param_dtype=bf16, reduce_dtype=fp32))`` on the CPU over gloo
(each decoder layer one unit, the root module another, as torchtitan wraps them).

After the last step's backward, rank 0 reads every parameter's sharded gradient: the storage it is a view of
(``foreach_reduce`` makes them ``as_strided`` views of one flat reduce-scatter output per unit) and each storage's
bytes; then, after ``optimizer.zero_grad(set_to_none=True)``, which parameters' storages are still alive (weak
references). It also follows every all-gather's input (the rank's shard copied into one flat tensor) and output
(``foreach_all_gather``'s flat buffer), both allocated on the all-gather copy-in stream on a GPU: their bytes, and
the bytes of the earlier outputs still alive when one is made (CPU order, which is the order the caching allocator
sees).

The unsharded parameters (``FSDPParam.all_gather_outputs``, allocated on the default stream by the copy-out and
freed by a reshard) are read from their storages: which units hold them, and how many bytes, after every copy-out
(``FSDPParamGroup.wait_for_unshard``) and when the loss's backward runs. Case options, as torchtitan's
``apply_fsdp`` (parallelize_llama.py @9dec370 lines 322-339): ``loss_outside`` (the model returns logits and the
loss is taken outside it, ``cross_entropy(pred.float())``, train.py lines 131-134), ``last_kept`` (the last block's
``reshard_after_forward=False``), ``root_reshard`` (``fully_shard(model, reshard_after_forward=...)``: None leaves
it unset, so FSDP2 keeps the root unsharded after the forward, as every torch before PR #154704 did for any value),
``lora`` (rank ``r`` LoRA adapters on the ``targets`` linears, injected by PEFT before the wrapping: ``lora_A`` /
``lora_B`` submodules of the block's linears, as torchtune's LoRALinear ``lora_a`` / ``lora_b``; only they train),
``pipeline`` (torchtitan under PP: every unit ``reshard_after_forward=False``, lines 326-339; each micro-batch's
backward but the last with what torch's pipeline stage sets, no reshard after backward and no gradient sync,
stage.py ``backward_maybe_with_nosync``; with ``accumulate`` micro-batches), ``dtype`` (the model's parameters:
'bf16', else fp32), ``mp`` (False: no MixedPrecisionPolicy, each parameter all-gathered in its own dtype), the
adapters' ``lora["dtype"]`` (cast to it after the injection), ``float8`` (torchao's ``convert_to_float8_training`` on
every linear but lm_head with ``enable_fsdp_float8_all_gather=True``, as torchtitan's float8 converter applies it).
Every ``torch.distributed`` all-gather and reduce-scatter of the last step is counted (``collectives``: [pass, op,
payload bytes], ranks.py ``count_collectives``). Run as a script with RANK / WORLD_SIZE / MASTER_ADDR / MASTER_PORT
set; rank 0 prints one JSON object.
Nothing here imports llmsizer.
"""

from __future__ import annotations

import gc
import weakref
from typing import Any


def main(case: dict[str, Any]) -> dict[str, Any] | None:
    import torch
    import torch.distributed.fsdp._fully_shard._fsdp_param_group as param_group
    from ranks import count_collectives, end_rank, rank_model
    from torch.distributed.fsdp import FSDPModule, MixedPrecisionPolicy, fully_shard

    conf, model = rank_model(case, torch.bfloat16 if case.get("dtype") == "bf16" else None)
    if case.get("float8"):
        from torchao.float8 import Float8LinearConfig, convert_to_float8_training

        convert_to_float8_training(model, config=Float8LinearConfig(enable_fsdp_float8_all_gather=True),
                                   module_filter_fn=lambda mod, fqn: fqn != "lm_head")
    if case.get("lora"):
        from peft import LoraConfig, inject_adapter_in_model

        lora = case["lora"]
        model = inject_adapter_in_model(LoraConfig(r=lora["r"], lora_alpha=lora["r"], target_modules=lora["targets"]),
                                        model)
        for name, p in model.named_parameters():
            p.requires_grad_("lora_" in name)
            if "lora_" in name and lora.get("dtype"):
                p.data = p.data.to(getattr(torch, {"fp32": "float32", "bf16": "bfloat16"}[lora["dtype"]]))
    mp = (MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32) if case.get("mp", True)
          else MixedPrecisionPolicy())
    layers = model.model.layers
    for n, layer in enumerate(layers):
        fully_shard(layer, mp_policy=mp, **({"reshard_after_forward": False}
                                             if case.get("pipeline") or (case.get("last_kept") and n == len(layers) - 1)
                                             else {}))
    root = False if case.get("pipeline") else case.get("root_reshard")
    fully_shard(model, mp_policy=mp, **({} if root is None else {"reshard_after_forward": root}))
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, foreach=False)
    ids = torch.randint(0, conf.vocab_size, (case["batch"], case["seq"]))
    gathers: list[tuple[str, int, list[int]]] = []  # (pass, bytes, bytes of the earlier ones still alive)
    outputs: list[tuple[weakref.ref[torch.Tensor], int]] = []
    where = ["forward"]
    all_gather = param_group.foreach_all_gather
    names = {id(m._get_fsdp_state()): ("root" if m is model else f"layer {list(layers).index(m)}")
             for m in model.modules() if isinstance(m, FSDPModule)}

    def unsharded() -> dict[str, int]:
        """Bytes of unsharded parameter storage each unit holds now."""
        out: dict[str, int] = {}
        for m in model.modules():
            if isinstance(m, FSDPModule):
                st = m._get_fsdp_state()
                n = sum(t.untyped_storage().nbytes() for g in st._fsdp_param_groups for p in g.fsdp_params
                        for t in getattr(p, "all_gather_outputs", []))
                if n:
                    out[names[id(st)]] = n
        return out

    copied_out: list[tuple[str, dict[str, int]]] = []  # (pass, unsharded bytes per unit after each copy-out)
    at_loss_backward: list[dict[str, int]] = []

    def followed(*args: Any, **kwargs: Any) -> Any:
        result = all_gather(*args, **kwargs)
        if result is not None:
            out = result.all_gather_output
            alive = [n for r, n in outputs if r() is not None]
            outputs.append((weakref.ref(out), out.numel() * out.element_size()))
            gathers.append((where[0], outputs[-1][1], alive))
        return result

    import torch.distributed.fsdp._fully_shard._fsdp_collectives as collectives

    inputs: list[int] = []  # bytes of each all-gather's copy-in input (the rank's shard, made on that stream)
    get_inputs = collectives._get_param_all_gather_inputs

    def followed_inputs(*args: Any, **kwargs: Any) -> Any:
        result = get_inputs(*args, **kwargs)
        inputs.append(sum({id(t.untyped_storage()): t.untyped_storage().nbytes() for ts in result for t in ts}
                          .values()))
        return result

    collectives._get_param_all_gather_inputs = followed_inputs  # foreach_all_gather calls it by this name
    wait = param_group.FSDPParamGroup.wait_for_unshard

    def waited(self: Any) -> None:
        had = self._all_gather_result is not None
        wait(self)
        if had:
            copied_out.append((where[0], unsharded()))

    class Probe(torch.autograd.Function):
        @staticmethod
        def forward(ctx: Any, x: torch.Tensor) -> torch.Tensor:
            return x.view_as(x)

        @staticmethod
        def backward(ctx: Any, g: torch.Tensor) -> torch.Tensor:
            at_loss_backward.append(unsharded())
            return g

    param_group.foreach_all_gather = followed  # FSDPParamGroup.unshard calls it by this module-level name
    sent = count_collectives(lambda: where[0])  # every all-gather / reduce-scatter payload, by pass
    param_group.FSDPParamGroup.wait_for_unshard = waited  # type: ignore[method-assign]
    storages: dict[int, int] = {}
    grad_bytes = views = 0
    refs: dict[str, weakref.ref[torch.Tensor]] = {}
    for step in range(2):
        sent.clear()
        gathers.clear()
        inputs.clear()
        copied_out.clear()
        at_loss_backward.clear()
        for k in range(case.get("accumulate", 1)):
            if case.get("pipeline"):  # torch's pipeline stage: only the step's last backward reshards and syncs
                last = k == case.get("accumulate", 1) - 1
                model.set_is_last_backward(last)
                model.set_reshard_after_backward(last)
                model.set_requires_gradient_sync(last)
            where[0] = "forward"
            if case.get("loss_outside"):
                pred = Probe.apply(model(input_ids=ids).logits)
                loss = torch.nn.functional.cross_entropy(pred.flatten(0, 1).float(), ids.flatten())
                del pred
            else:
                loss = model(input_ids=ids, labels=ids).loss
            where[0] = "backward"
            loss.backward()
            del loss
        if step == 1:
            for name, p in model.named_parameters():
                if p.grad is None:  # frozen (LoRA's base)
                    continue
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
                     "params": len(list(model.parameters())), "all_gathers": gathers, "gather_inputs": inputs,
                     "copied_out": copied_out, "collectives": sent,
                     "at_loss_backward": at_loss_backward,
                     "alive_after_zero_grad": sorted(n for n, r in refs.items() if r() is not None)})


if __name__ == "__main__":
    from ranks import rank_main

    rank_main(main)
