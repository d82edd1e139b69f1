"""Measured truth for DeepSpeed ZeRO-3's collective volume: the bytes real training steps hand to
``torch.distributed`` under ``deepspeed.initialize`` (ZeRO-3, bf16 or fp32) on the CPU accelerator over gloo, one
process per rank.

Before DeepSpeed builds its communication backend (which binds ``torch.distributed.all_gather_into_tensor`` and
``reduce_scatter_tensor`` when it starts: deepspeed/comm/torch.py), ``torch.distributed``'s all-gathers,
reduce-scatters and all-reduces are wrapped (ranks.py ``count_collectives``, plus ``all_reduce``): every call's
payload (the all-gather's output, the reduce-scatter's input, the all-reduce's tensor: every rank's elements) is
recorded with the step and the phase it ran in: ``forward``, ``backward`` (``engine.backward``) or ``step``
(``engine.step``, DeepSpeed's re-gather of its persistent parameters after the update). Rank 0 prints one JSON
object: ``{"steps": [{phase: {op: bytes}}, ...]}``. Nothing here imports llmsizer.

``case``: ``config`` (a transformers config dict), ``batch``, ``seq``, ``steps`` (default 3), ``precision``
('bf16' or 'fp32'), ``zero`` (extra ``zero_optimization`` keys), ``lora`` (PEFT LoraConfig keys: the base frozen).
DeepSpeed's CPU shared-memory extension is switched off as in deepspeed_step.py: gloo does the collectives.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from deepspeed_step import default_rank_env, zero3_setup


def main(case: dict[str, Any]) -> dict[str, Any] | None:
    default_rank_env()
    import torch
    import torch.distributed as dist
    import transformers
    from ranks import count_collectives

    where = ["init"]
    sent = count_collectives(lambda: where[0])
    all_reduce = dist.all_reduce

    def counted_all_reduce(tensor: Any, *args: Any, **kwargs: Any) -> Any:
        sent.append([where[0], "all_reduce", int(tensor.numel() * tensor.element_size())])
        return all_reduce(tensor, *args, **kwargs)
    dist.all_reduce = counted_all_reduce

    import deepspeed

    conf, ds_config = zero3_setup(case)
    deepspeed.init_distributed(dist_backend="gloo")
    torch.manual_seed(0)
    model = transformers.AutoModelForCausalLM.from_config(conf)
    if case.get("lora"):
        import peft

        model = peft.get_peft_model(model, peft.LoraConfig(**case["lora"]))
    engine, _, _, _ = deepspeed.initialize(model=model, config=ds_config,
                                           model_parameters=[p for p in model.parameters() if p.requires_grad])
    ids = torch.randint(0, conf.vocab_size, (case["batch"], case["seq"]))
    steps = []
    for _ in range(case.get("steps", 3)):
        start = len(sent)
        where[0] = "forward"
        loss = engine(input_ids=ids, labels=ids).loss
        where[0] = "backward"
        engine.backward(loss)
        where[0] = "step"
        engine.step()
        where[0] = "idle"
        del loss
        out: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
        for phase, op, nbytes in sent[start:]:
            out[phase][op] += nbytes
        steps.append({p: dict(ops) for p, ops in out.items()})
    rank = dist.get_rank()
    return {"steps": steps} if rank == 0 else None


if __name__ == "__main__":
    from ranks import rank_main

    rank_main(main)
