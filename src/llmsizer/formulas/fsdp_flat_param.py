"""FSDP1 (``FullyShardedDataParallel``) flat-parameter buffers, where they differ from FSDP2 (``fully_shard``).

FSDP1 flattens the parameters of each wrapped unit into one ``FlatParameter`` (torch 2.13
``torch/distributed/fsdp/_flat_param.py``); FSDP2 keeps one DTensor shard per parameter. The differences in a
step's memory:

- one flat parameter has one dtype and one ``requires_grad``: with ``use_orig_params=True`` a unit may mix frozen
  and trained parameters (``fsdp1_lora_wrap='with-layers'``: the adapters in their decoder layer's unit), and the flat parameter then requires grad if *any* of them does (lines 804-836:
  ``flat_param_requires_grad = flat_param_requires_grad or tensor.requires_grad``; lines 2454-2474). Its gradient
  is one flat tensor over *every* element of the unit, frozen ones included (zeros), both unsharded before the
  reduce-scatter and as the sharded ``flat_param.grad`` kept until the optimizer step. For LoRA this makes the
  gradient as large as the frozen base; FSDP2 allocates gradients only for the trained parameters;
- the flat parameter is padded to a multiple of the world size (lines 762-776), each rank's shard equal;
- with ``MixedPrecision(param_dtype=...)`` the sharded flat parameter is cast into ``_mp_shard`` (a low-precision
  copy of the shard, lines 1271-1276, 1340-1357) before the all-gather and freed after it (lines 1536-1547);
- during forward and backward every original parameter is a view into the unsharded flat parameter
  (``_use_unsharded_views`` lines 1949-2040 sets ``split(...)[i].view(shape)`` from ``_get_unflat_views_*``, lines
  1876-1946): not a leaf and a view, so ``torch.autocast`` never caches its half-precision casts
  (formulas/training_states.py ``autocast_cache_holds``); FSDP2 registers each unsharded parameter as an
  ``nn.Parameter`` of its all-gather output (``_fully_shard/_fsdp_param.py`` lines 666-679), a leaf that is not a
  view, whose casts autocast caches as for a plain module;
- the root unit is not resharded after forward (``_runtime_utils.py`` lines 494-499), as FSDP2 also does for its
  root (``_fully_shard/_fsdp_state.py`` lines 203-207), and ``limit_all_gathers`` allows two all-gathers in flight
  (``_limiter_utils.py``), the current unit and one prefetched, as FSDP2's default prefetch;
- under ``no_sync()`` (gradient accumulation without a reduce-scatter per micro-batch: HF accelerate's
  ``accumulate``, Lightning Fabric's ``no_backward_sync``, whose ``_FSDPBackwardSyncControl`` returns
  ``module.no_sync()``, lightning/fabric/strategies/fsdp.py) the post-backward hook reshards the parameter and
  returns before the reduce-scatter (torch 2.13 ``_runtime_utils.py`` lines 742-746: ``if not
  state._sync_gradients: ... return``), so every unit's *unsharded* flat gradient stays in ``flat_param.grad``
  and the next micro-batches accumulate into it until the sync micro-batch (``fully_sharded_data_parallel.py``
  ``no_sync`` lines 1034-1050: 'FSDP will accumulate the full model gradients (instead of gradient shards)')::

      G_no_sync = sum over the units with a trained element of n_unit x b_grad      per rank              (N1)

  where n_unit counts every element of the unit (frozen ones included, as above), unpadded;
- each original parameter being a view of the flat parameter, autograd brings a unit's gradient to it through the
  views' ``SplitWithSizesBackward``: the node's input buffer keeps each view's gradient until the unit's last one
  arrives, then ``split_with_sizes_backward`` concatenates them into one new flat gradient. Inside a layer unit
  that is brief; the root unit (embedding, final norm, lm_head) gets the lm_head's gradient at the loss backward
  and the embedding's at the very end, so at the end of a full fine-tune's backward one rank holds the root's view
  gradients and their concatenation at once::

      T_root = 2 x n_root x b_grad      (n_root: the root unit's elements, unsharded)                         (N2)

  Measured (tests/training/test_fsdp1_flat_param.py): a real FSDP1 full fine-tune on two gloo ranks, Llama-shaped,
  vocabulary 16000, untied (root 8.19e6 elements, bf16): an accumulating micro-batch peaks 32.77 MB above the bytes
  held before it; N2 plus the embedding's residual gradient gives 32.80 MB (+0.1 %). Applied to full fine-tuning
  (a LoRA root's trained views are the adapters only: not modelled).
- **LoRA wrapped adapters apart** (``fsdp1_lora_wrap='adapters-apart'``): torchtune's 2024 distributed LoRA recipe
  wraps with ``lora_fsdp_wrap_policy`` (torchtune/utils/_distributed.py @ 0217d44c2 lines 212-242: a module whose
  ``weight.requires_grad``, i.e. every LoRA A and B ``nn.Linear``, is a unit of its own, "to work around FSDP
  allocating extra gradient memory when wrapped with other modules"; then every decoder layer; the root holds the
  embedding, final norm and output), ``use_orig_params`` left False, ``mixed_precision=None``, FULL_SHARD
  (recipes/lora_finetune_distributed.py @ 0217d44c2 lines 332-350); PEFT's ``fsdp_auto_wrap_policy`` wraps the same
  way. The decoder-layer and root units then hold only frozen parameters: their flat parameters do not require
  grad and never get one. One rank's gradients::

      G_apart = sum over the adapter units u of padded(n_u) / world x b_grad                                 (W1)

  (the adapters' own, sharded; llmsizer shards their sum: the padding, under world size elements per unit, is
  not counted). The unsharded flat parameters (torch 2.13 ``_runtime_utils.py``): the root is not resharded after
  its forward (lines 494-499) and, frozen, gets a reshard-only hook on its inputs (lines 1473-1517), which need no
  gradient (token ids): it stays unsharded until the step's final callback. Every block is resharded after its
  forward and all-gathered again by its pre-backward hook; its reshard-only hook fires when the gradient of its input
  arrives. With the loss outside the model (torchtune), at each moment::

      forward, block i: R + B;   loss backward: R;   backward, block i: R + B                                  (W2)

  the layout of formulas/fsdp2_units.py 'torchtune' (eqs. U1-U4), each unit a whole flat parameter beside the rank's
  shard. At a block boundary of the backward the next block's pre-backward hook (registered first on the tensor the
  two share) gathers it before the one just run is resharded, so R + 2B is held for a moment when that block's
  transients are gone: not counted. Measured (tests/training/test_fsdp1_flat_param.py, two gloo ranks, CPU allocator
  records of a whole step): sharded gradients equal to W1 to the byte, the unsharded units of W2 at every all-gather
  and at the loss backward, the step peak within 2 %.
- **Full fine-tuning**, each decoder layer a unit and the root the rest (torchtune's 2024-05 full recipe: recipes/
  full_finetune_distributed.py @ 0217d44c2 lines 293-303, ``ModuleWrapPolicy({TransformerDecoderLayer})`` from
  ``get_full_finetune_fsdp_wrap_policy``, torchtune/utils/_distributed.py @ 0217d44c2 lines 245-269, with
  ``memory_efficient_fsdp_wrap`` False as llama2/7B_full.yaml line 66 leaves it; FULL_SHARD, ``mixed_precision=None``,
  the loss outside the model, lines 479-488; litgpt's and fms-fsdp's block-wise wrapping is the same layout). The
  root is not resharded after its forward (as above) and, trained, is resharded by its post-backward hook only when
  its whole flat gradient is assembled, after the embedding's (N2): it stays unsharded from its forward to the
  backward's end. Every block is resharded after its forward. FSDP1's default ``backward_prefetch=BACKWARD_PRE``
  (fully_sharded_data_parallel.py line 404): a unit's pre-backward hook all-gathers it, then prefetches the unit
  before it in post-forward order (``_runtime_utils.py`` lines 673-693, ``_exec_order_utils.py`` lines 88-107): the
  root's (at the logits' gradient) the last block, each block's the block below it. At each moment, blocks B_i in
  forward order::

      forward, block i: R + B_i;   loss backward: R;   backward, block i: R + B_i + B_(i-1)   (B_(-1) = 0)       (W3)

  (with LoRA wrapped adapters apart the unit before a block in post-forward order is one of its adapters: W2).
  Measured (tests/training/test_fsdp1_flat_param.py, a real FSDP1 full fine-tune on two gloo ranks, CPU allocator
  records of a whole step): the unsharded units of W3 at every all-gather and at the loss backward, and the step's
  peak above the bytes held before it within 1 %, where the two-largest-units gathering misses it by 5 %.
"""

from __future__ import annotations

SOURCE = ("torch/distributed/fsdp/_flat_param.py (FlatParameter: uniform requires_grad lines 804-836, padding "
          "762-776, _mp_shard 1271-1357)")


def padded_numel(numel: int, world_size: int) -> int:
    """Elements of a flat parameter after padding to a multiple of the world size (lines 762-776)."""
    return -(-numel // world_size) * world_size


def flat_grad_elements(unit_elements: int, world_size: int) -> int:
    """Elements of one rank's sharded flat gradient: every element of the unit, frozen ones included."""
    return padded_numel(unit_elements, world_size) // world_size


def mp_shard_bytes(unit_elements: int, world_size: int, param_bytes: int) -> int:
    """The low-precision copy of one unit's shard made before its all-gather [bytes]."""
    return flat_grad_elements(unit_elements, world_size) * param_bytes


def no_sync_grad_bytes(unit_elements: list[int], grad_bytes: int) -> int:
    """Eq. (N1): one rank's unsharded flat gradients accumulated under FSDP1 ``no_sync`` [bytes]: every unit with a
    trained element, whole (``unit_elements``: elements per such unit, frozen ones included)."""
    return sum(unit_elements) * grad_bytes


def root_grad_assembly_bytes(root_elements: int, grad_bytes: int) -> int:
    """Eq. (N2): the root unit's view gradients and their concatenation at the end of the backward [bytes]."""
    return 2 * root_elements * grad_bytes


def backward_prefetch_unsharded_bytes(root: int, blocks: list[int]) -> list[int]:
    """Eq. (W3): the unsharded bytes while each block runs its backward (``blocks``: each block's unsharded bytes in
    forward order, ``root``: the root unit's), the block before it prefetched by ``BACKWARD_PRE``."""
    return [root + b + (blocks[i - 1] if i else 0) for i, b in enumerate(blocks)]
