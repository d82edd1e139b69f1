"""Measured truth for torch.autocast's weight-cast cache: one forward of a small random-weight fp32 transformers model
with non-reentrant checkpointing of every decoder layer (unless ``ckpt`` is false) under ``torch.autocast('cpu', dtype=torch.bfloat16)``, on the
CPU over gloo, one process per rank, the model either plain (its weights are leaf ``nn.Parameter`` s), wrapped by
FSDP1 (``FullyShardedDataParallel``: each weight a view into its unit's flat parameter) or sharded by FSDP2
(``fully_shard`` without a mixed-precision policy: each unsharded weight an ``nn.Parameter``), each decoder layer one
unit and the root another. A ``TorchDispatchMode`` follows every fp32 -> bf16 copy of a 2-D weight (``_to_copy`` of a
tensor shaped like one) by a weak reference to its storage; rank 0 prints the bytes of those copies still alive when
the forward has computed the loss (inside autocast, before its cache is cleared), the largest such total during the
forward and during the backward that follows, and the bytes of one bf16 copy of every 2-D weight. Nothing here imports llmsizer.

``float8``: the model first converted by torchao's real ``convert_to_float8_training`` (every linear but lm_head, as
torchtitan's float8 converter applies it; with FSDP2 ``enable_fsdp_float8_all_gather=True``, torchtitan's default).
Then the float8 copies of weights (a float8 tensor shaped like a 2-D weight or its transpose: ``to_fp8_saturated``'s
plain ``_data``) are followed the same way and their bytes at forward end reported too. Only plain tensors are
followed: a ``Float8TrainingTensor`` wrapper owns no storage of its own (its ``_data`` is followed where it is made).
torchao's ``Float8Linear.forward`` casts its input to the autocast dtype only under CUDA autocast
(``torch.is_autocast_enabled()``); under CPU autocast its input stays fp32, which changes no weight cast.
"""

from __future__ import annotations

import functools
import weakref
from typing import Any


def main(case: dict[str, Any]) -> dict[str, Any] | None:
    import torch
    from ranks import end_rank, rank_model
    from torch.utils._python_dispatch import TorchDispatchMode

    conf, model = rank_model(case)  # fp32 weights
    if case.get("float8"):
        from torchao.float8 import Float8LinearConfig, convert_to_float8_training

        config = Float8LinearConfig(enable_fsdp_float8_all_gather=case["wrap"] == "fsdp2")
        convert_to_float8_training(model, config=config, module_filter_fn=lambda mod, fqn: fqn != "lm_head")
    if case.get("ckpt", True):
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    shapes = {tuple(p.shape) for p in model.parameters() if p.dim() == 2}
    fp8_shapes = shapes | {s[::-1] for s in shapes}
    embedding = model.get_input_embeddings().weight  # an embedding lookup is not cast
    weight_copies = sum(p.numel() * 2 for p in model.parameters() if p.dim() == 2 and p is not embedding)
    layer_cls = type(model.get_decoder().layers[0])
    if case["wrap"] == "fsdp1":
        from torch.distributed.fsdp import FullyShardedDataParallel as FSDP
        from torch.distributed.fsdp.wrap import lambda_auto_wrap_policy

        policy = functools.partial(lambda_auto_wrap_policy, lambda_fn=lambda m: isinstance(m, layer_cls))
        model = FSDP(model, auto_wrap_policy=policy, use_orig_params=case.get("use_orig_params", False),
                     device_id=torch.device("cpu"))
    elif case["wrap"] == "fsdp2":
        from torch.distributed.fsdp import fully_shard

        for layer in model.get_decoder().layers:
            fully_shard(layer)
        fully_shard(model)

    live: dict[int, int] = {}
    refs: dict[int, Any] = {}
    live8: dict[int, int] = {}
    top = [0, 0]  # the largest bf16 copy total so far, the largest float8 weight total in the forward

    def drop(key: int) -> Any:
        return lambda _ref: (live.pop(key, None), live8.pop(key, None), refs.pop(key, None))

    def follow(out: Any, into: dict[int, int]) -> None:
        st = out.untyped_storage()
        if st._cdata not in into:
            into[st._cdata] = st.nbytes()
            refs[st._cdata] = weakref.ref(st, drop(st._cdata))

    class WeightCasts(TorchDispatchMode):
        def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
            out = func(*args, **(kwargs or {}))
            if (func is torch.ops.aten._to_copy.default and type(out) is torch.Tensor
                    and isinstance(args[0], torch.Tensor) and args[0].dtype == torch.float32):
                if out.dtype == torch.bfloat16 and tuple(out.shape) in shapes:
                    follow(out, live)
                    top[0] = max(top[0], sum(live.values()))
                elif out.dtype == torch.float8_e4m3fn and tuple(out.shape) in fp8_shapes:
                    follow(out, live8)
                    top[1] = max(top[1], sum(live8.values()))
            return out

    ids = torch.randint(0, conf.vocab_size, (case["batch"], case["seq"]))
    with WeightCasts():
        with torch.autocast("cpu", dtype=torch.bfloat16):
            loss = model(input_ids=ids, labels=ids).loss
            at_forward_end = sum(live.values())
            fp8_at_forward_end = sum(live8.values())
        forward_max, fp8_forward_max = top
        top[0] = sum(live.values())  # autocast's cache is cleared: what autograd still holds
        loss.backward()  # a checkpointed layer's recomputation re-enters autocast and casts again
    return end_rank({"forward_end_copy_bytes": at_forward_end, "forward_max_copy_bytes": forward_max,
                     "backward_max_copy_bytes": top[0], "all_weight_copy_bytes": weight_copies,
                      "forward_end_float8_weight_bytes": fp8_at_forward_end, "forward_max_float8_weight_bytes": fp8_forward_max})


if __name__ == "__main__":
    from ranks import rank_main

    rank_main(main)
