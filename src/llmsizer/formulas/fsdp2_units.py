"""FSDP2 (``fully_shard``): which units hold their parameters unsharded at each moment of a step, and what the
all-gather copy-in stream allocates [bytes].

Read from torch 2.13.0 ``torch/distributed/fsdp/_fully_shard`` (git cf30153c) and torchtitan @ 9dec370 /
e7c0cae ``parallelize_llama.py`` ``apply_fsdp`` (9dec370 lines 322-339, e7c0cae lines 344-367):

- **Units.** torchtitan calls ``fully_shard`` on each transformer block, then on the whole model: the root unit holds
  what no block holds, the token embedding, the final norm and the output projection (one unit of ``R`` bytes).
  Each block is a unit of ``B`` bytes. Unsharded, a unit's parameters are new full-size tensors in the all-gather
  dtype (``param_dtype``, bf16; float8 for torchao's float8 all-gather of Float8Linear weights), allocated on the
  default stream by the copy-out (``_fsdp_collectives.py`` ``foreach_all_gather_copy_out`` lines 447-470,
  ``FSDPParam.alloc_all_gather_outputs``), beside the rank's sharded fp32 parameter.
- **reshard_after_forward.** A block is resharded after its forward, except the last: torchtitan passes
  ``reshard_after_forward=False`` to it ("FSDP would prefetch it immediately", 9dec370 line 333). The root: every
  torch before PR #154704 (June 2025) clamped the root's ``reshard_after_forward`` to False whatever was passed
  ("For the root, do not reshard after forward since for training, the parameters would be freed and
  all-gathered immediately", ``FSDPState._lazy_init``); torch 2.13 keeps that only when the argument is not given
  (``_fully_shard.py`` line 246 ``auto_reshard_after_forward``; ``_fsdp_state.py`` lines 203-207). torchtitan's
  benchmark rows ran on torch 1963fc8 (December 2024) and 2.8.0a0+5228986c39 (May 2025): root kept.
- **torchtune** (``torchtune/training/_distributed.py`` ``shard_model``, @ 30b8519 lines 586-623 and @ bd2a0fc
  lines 661-714; the LoRA recipes shard ``layers.i`` only, ``lora_finetune_distributed.py`` @ 30b8519 lines 227,
  418-435): every block with ``reshard_after_forward=True`` (the recipes' ``fsdp_reshard_after_forward`` default),
  the last one too; the root holds the embedding, final norm and output (configs naming ``custom_sharded_layers``,
  e.g. the full fine-tunes' ``['tok_embeddings', 'output']``, make those two units of their own, not traced here)
  and is kept: @ 30b8519 by the torch clamp above, @ bd2a0fc by ``reshard_after_forward=False`` given (line 711).
  So the last block is gathered again for its backward.
- **Moments** (default stream, one block at a time: a block's backward prefetch only all-gathers into the copy-in
  stream; its copy-out comes after the block before it was resharded by its post-backward hook):

      forward, block i:      R + B                                                                (U1)
      loss (outside the model, forward and backward): R [root kept] + B [the last block, kept;
                             torchtune: resharded, 0]                                             (U2)
      lm_head backward:      R [kept, or re-gathered] + B [the last block; torchtune: 0, its copy-out
                             comes at its own pre-backward]                                       (U3)
      backward, block i:     R [kept, or re-gathered for the output's backward] + B               (U4)

- **Copy-in stream** (``foreach_all_gather`` lines 336-356, under ``all_gather_copy_in_stream``): per unit gathered,
  the rank's shard copied into a flat input (``_get_param_all_gather_inputs``: ``torch.empty`` of the shard in the
  all-gather dtype), the flat output of ``world x shard`` bytes, the input freed. In the forward
  (``FSDPParamGroup.wait_for_unshard``, implicit prefetch) the previous unit's output is freed only after the next
  one's is made ("Defer free to allow for overlap of this copy-out with next all-gather"); in the backward each is
  freed at its own copy-out, before the next is made. The stream's cached pool is eq. (4') of
  formulas/caching_allocator.py over these events; none of them is alive at the loss backward.
- **Under pipeline parallelism** (torchtitan: every unit ``reshard_after_forward=False``, 9dec370 lines 326-339;
  torch's pipeline stage keeps the stage gathered through the step, formulas/parallelism.py eq. PP1): each unit is
  all-gathered once, in the first micro-batch's forward, in the forward order above, and never again in the step:
  the copy-in events are the forward's alone (``copy_in_events(..., backward_gathers=False)``).

Measured on real FSDP2 steps (2 gloo ranks, CPU order; tests/training/test_fsdp2_reduce_scatter_pool.py).
"""

from __future__ import annotations

from ..errors import InputError
from ..specs.training import FSDP2_UNITS  # 'largest-two' (formulas/parallelism.py gathered_layer_bytes, not traced)
from ..suggest import unknown_choice

MOMENTS = ("forward", "loss", "lm_head backward", "backward")


def unsharded_bytes(units: str, moment: str, root: int, block: int) -> int:
    """Eqs. (U1)-(U4): unsharded parameter bytes on the default stream at ``moment`` (``root``: the root unit's
    unsharded bytes, ``block``: one block's) for a traced ``units`` layout."""
    if units not in FSDP2_UNITS[1:]:
        raise InputError(f"no traced FSDP2 layout {units!r}; choose one of: {', '.join(FSDP2_UNITS[1:])}")
    if moment not in MOMENTS:
        raise InputError(unknown_choice("moment", moment, MOMENTS))
    root_kept = units in ("torchtitan", "torchtune")
    last_kept = units != "torchtune"  # torchtitan keeps the last block after the forward, torchtune does not
    if moment == "loss":
        return (root if root_kept else 0) + (block if last_kept else 0)
    if moment == "lm_head backward":
        return root + (block if last_kept else 0)
    return root + block


def backward_gathers_of(units: str, root: int, blocks: list[int]) -> list[int]:
    """Eq. (U5): the units all-gathered again in the backward, in the order gathered (``root`` and ``blocks``: the
    units' unsharded bytes, blocks in forward order), for a traced ``units`` layout: every unit resharded after its
    forward (module doc), i.e. every block but torchtitan's last, and the root only when resharded
    ('torchtitan-resharded', re-gathered for the output's backward, before the blocks)::

        W_b = sum of the blocks [less torchtitan's last] + [R: 'torchtitan-resharded']                     (U5)

    'torchtune' is also torch's own default for a model whose blocks and root are wrapped without a
    ``reshard_after_forward`` argument (every block True, the root kept: ``_fsdp_state.py`` lines 203-207), and
    FSDP1's (the root not resharded after forward, ``_runtime_utils.py`` lines 494-499; every other unit under
    FULL_SHARD is: formulas/fsdp_flat_param.py eqs. W2, W3)."""
    if units not in FSDP2_UNITS[1:]:
        raise InputError(f"no traced FSDP2 layout {units!r}; choose one of: {', '.join(FSDP2_UNITS[1:])}")
    again = list(reversed(blocks if units == "torchtune" else blocks[:-1]))  # torchtitan keeps the last block
    return ([root] if units == "torchtitan-resharded" and root else []) + again


def copy_in_events(units: str, root: int, blocks: list[int], shards: int,
                   backward_gathers: bool = True) -> list[tuple[str, int]]:
    """The all-gather copy-in stream's allocations and frees in one step (module doc), for formulas/
    caching_allocator.py ``stream_trace_pool_bytes``: ``root`` and ``blocks`` are the units' unsharded bytes in
    forward order, ``shards`` the ranks they are gathered from (each rank's input is 1 / shards of its unit);
    ``backward_gathers`` False: no unit is gathered again in the backward (a pipeline stage, module doc)."""
    if shards < 2:
        return []
    ev: list[tuple[str, int]] = []
    n = 0  # allocations made so far

    def gather(size: int) -> int:
        nonlocal n
        ev.extend((("alloc", -(-size // shards)), ("alloc", size), ("free", n)))
        n += 2
        return n - 1  # the output's alloc index

    prev = None
    for size in ([root] if root else []) + list(blocks):
        out = gather(size)
        if prev is not None:
            ev.append(("free", prev))
        prev = out
    if prev is not None:
        ev.append(("free", prev))  # the root's post-forward frees the last one
    if not backward_gathers:
        return ev
    for size in backward_gathers_of(units, root, blocks):
        ev.append(("free", gather(size)))
    return ev
