"""Measured truth for FSDP2 beside tensor or pipeline parallelism: a real training step of a small random-weight
transformers Llama on a 2 x 2 device mesh of four gloo ranks on the CPU, every ``torch.distributed`` all-gather and
reduce-scatter of the second step recorded with the ranks of its group (ranks.py ``count_collectives``).

- ``tp``: tensor parallelism 2 over the mesh's inner dimension with PyTorch's own styles as torchtitan applies them
  without sequence parallelism (``parallelize_module``: q/k/v and gate/up ``ColwiseParallel``, o and down
  ``RowwiseParallel``, the token embedding ``RowwiseParallel(input_layouts=Replicate())``, lm_head
  ``ColwiseParallel(output_layouts=Replicate())``; torchtitan @9dec370 ``parallelize_llama.py`` ``apply_tp``), then
  FSDP2 ``fully_shard`` over the outer (data-parallel) dimension, each decoder layer a unit and the root another,
  pure bf16 (no MixedPrecisionPolicy), torch's default resharding.
- ``pp``: two pipeline stages over the outer dimension (``torch.distributed.pipelining`` ``PipelineStage`` +
  ``Schedule1F1B``, ``microbatches`` micro-batches), each stage's module (stage 0: the embedding and the first half
  of the layers; stage 1: the rest, the final norm and lm_head) under FSDP2 over the inner (data-parallel)
  dimension as torchtitan wraps a stage when PP is on: every unit ``reshard_after_forward=False`` (torchtitan
  ``get_fsdp_reshard_after_forward_policy`` 'default'). The schedule itself sets what each micro-batch's backward
  runs with (stage.py ``backward_maybe_with_nosync``) and reduces once at the end (``perform_reduce_grad``).

Both run in one launch, the ``pp`` case on a fresh model. Rank 0 prints ``{"tp": {"collectives": ..., "local_elements":
...}, "pp": {"ranks": [{"stage": ..., "collectives": ...} for every rank]}}``, each collective [pass, op, payload
bytes, group ranks] (pass 'step' under the pipeline, whose forwards and backwards interleave). Nothing here imports
llmsizer.
"""

from __future__ import annotations

from typing import Any


def _stage_module(model: Any, first: bool, layers: list[Any]) -> Any:
    """A pipeline stage of the HF Llama: its decoder layers (with the rotary table every layer needs), the embedding
    on the first stage, the final norm and lm_head on the last (logits out)."""
    import torch
    from torch import nn

    class Stage(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.embed_tokens = model.model.embed_tokens if first else None
            self.layers = nn.ModuleList(layers)
            self.rotary_emb = model.model.rotary_emb
            self.norm = None if first else model.model.norm
            self.lm_head = None if first else model.lm_head

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            h = self.embed_tokens(x) if self.embed_tokens is not None else x
            pos = torch.arange(h.shape[1]).unsqueeze(0)
            rope = self.rotary_emb(h, pos)
            for layer in self.layers:
                out = layer(h, position_embeddings=rope, position_ids=pos)
                h = out[0] if isinstance(out, tuple) else out
            return h if self.lm_head is None else self.lm_head(self.norm(h))

    return Stage()


def main(case: dict[str, Any]) -> dict[str, Any] | None:
    """Both runs in one launch (the ranks' start-up is most of the time): the ``tp`` case, then the ``pp`` case on a
    fresh model of the same seed."""
    import torch
    import transformers
    from ranks import end_rank, rank_model

    conf, model = rank_model(case, torch.bfloat16)
    out = {"tp": run(case, "tp", conf, model)}
    torch.manual_seed(0)
    out["pp"] = run(case, "pp", conf, transformers.AutoModelForCausalLM.from_config(conf, dtype=torch.bfloat16))
    return end_rank(out)


def run(case: dict[str, Any], mode: str, conf: Any, model: Any) -> dict[str, Any]:
    """One case on the four ranks; every rank returns its record."""
    import torch
    import torch.distributed as dist
    from ranks import count_collectives
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard

    outer, inner = ("dp", "tp") if mode == "tp" else ("pp", "dp")
    mesh = init_device_mesh("cpu", (2, 2), mesh_dim_names=(outer, inner))
    ids = torch.randint(0, conf.vocab_size, (case["batch"], case["seq"]))
    where = ["forward"]
    if mode == "tp":
        from torch.distributed.tensor import Replicate
        from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module

        tp = mesh["tp"]
        parallelize_module(model, tp, {"model.embed_tokens": RowwiseParallel(input_layouts=Replicate()),
                                       "lm_head": ColwiseParallel(output_layouts=Replicate())})
        for layer in model.model.layers:
            parallelize_module(layer, tp, {
                "self_attn.q_proj": ColwiseParallel(), "self_attn.k_proj": ColwiseParallel(),
                "self_attn.v_proj": ColwiseParallel(), "self_attn.o_proj": RowwiseParallel(),
                "mlp.gate_proj": ColwiseParallel(), "mlp.up_proj": ColwiseParallel(),
                "mlp.down_proj": RowwiseParallel()})
        for layer in model.model.layers:
            fully_shard(layer, mesh=mesh["dp"])
        fully_shard(model, mesh=mesh["dp"])
        local = sum(p.to_local().numel() if hasattr(p, "to_local") else p.numel() for p in model.parameters())
        opt = torch.optim.AdamW(model.parameters(), lr=1e-4, foreach=False)
        sent = count_collectives(lambda: where[0], groups=True)
        for _ in range(2):
            sent.clear()
            where[0] = "forward"
            loss = model(input_ids=ids, labels=ids).loss
            where[0] = "backward"
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
        return {"collectives": list(sent), "local_elements": local}
    from torch.distributed.pipelining import PipelineStage, Schedule1F1B

    stage_index = mesh["pp"].get_local_rank()
    half = len(model.model.layers) // 2
    first = stage_index == 0
    mod = _stage_module(model, first, list(model.model.layers)[:half] if first else list(model.model.layers)[half:])
    del model
    for layer in mod.layers:
        fully_shard(layer, mesh=mesh["dp"], reshard_after_forward=False)
    fully_shard(mod, mesh=mesh["dp"], reshard_after_forward=False)
    stage = PipelineStage(mod, stage_index, 2, torch.device("cpu"), group=mesh["pp"].get_group())

    def loss_fn(logits: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        return torch.nn.functional.cross_entropy(logits.flatten(0, 1).float(), target.flatten())

    schedule = Schedule1F1B(stage, n_microbatches=case["microbatches"], loss_fn=loss_fn)
    opt = torch.optim.AdamW(mod.parameters(), lr=1e-4, foreach=False)
    where[0] = "step"
    sent = count_collectives(lambda: where[0], groups=True)  # (wrapping the TP run's wrappers: counted once)
    for _ in range(2):
        sent.clear()
        if first:
            schedule.step(ids)
        else:
            schedule.step(target=ids)
        opt.step()
        opt.zero_grad(set_to_none=True)
    every: list[Any] = [None] * dist.get_world_size()
    dist.all_gather_object(every, {"stage": stage_index, "collectives": list(sent)})
    return {"ranks": every}


if __name__ == "__main__":
    from ranks import rank_main

    rank_main(main)
