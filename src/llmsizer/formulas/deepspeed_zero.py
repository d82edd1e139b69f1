"""DeepSpeed ZeRO-3's own buffers: what a rank holds beyond the ZeRO paper's partitioned model states.

Read from DeepSpeed (deepspeedai/DeepSpeed at commit edaa722, 2026-08-22):

- **Config defaults** (``deepspeed/runtime/zero/config.py``): ``reduce_bucket_size`` 5e8 elements (line 113),
  ``allgather_bucket_size`` 5e8 (line 132, ZeRO-1/2 only), ``sub_group_size`` 1e9 (line 175),
  ``stage3_prefetch_bucket_size`` 5e7 (line 215), ``stage3_param_persistence_threshold`` 1e5 (line 221),
  ``stage3_max_live_parameters`` 1e9 (line 238), ``stage3_max_reuse_distance`` 1e9 (line 244),
  ``contiguous_gradients`` True (line 102).
- **IPG bucket** (``deepspeed/runtime/zero/stage3.py`` lines 731-735): with ``contiguous_gradients`` the
  optimizer allocates, at initialisation and for the whole run, ``torch.empty(reduce_bucket_size)`` in each
  gradient communication dtype: 5e8 x 2 B = 1 GB for bf16 gradients, 2 GB for fp32, whatever the model size.
- **Gradient partitions** (lines 742-744): ``grad_partitions_flat_buffer = torch.zeros(sum of partition
  numel)``, allocated at initialisation (on the host with optimizer offload): the rank's gradient shard exists
  in every phase, the forward included (``zero_grad`` does not free it).
- **Step** (``_prepare_fp32_grad_for_sub_group``, lines 2398-2408): for each sub-group of up to
  ``sub_group_size`` elements the gradient partition is flattened and cast to the fp32 master dtype, a new
  tensor alive while that sub-group is updated: min(sub_group_size, shard elements) x 4 B.
- **Gathered parameters** (``deepspeed/runtime/zero/partitioned_param_coordinator.py``): after a module runs,
  its parameters are released only if they are not used again within ``max_reuse_distance`` elements of the
  recorded module order (``__params_to_release``, lines 634-665; the order spans forward and backward).
  Between a layer's forward and its backward run the forward of every later module and the backward of the
  same modules, so a module stays gathered through the loss when twice the elements after it are fewer than
  1e9: the last layers and the head of every model, *the whole model* below about 0.5 B parameters.
  Ahead of each module up to ``prefetch_bucket_size`` elements are fetched (lines 452-470, bounded by
  ``max_live_parameters``). Parameters under ``param_persistence_threshold`` elements (norm weights, biases)
  are never partitioned.
- **Live window** (same file, ``fetch_sub_module``, lines 446-476 at 0.19.8; identical at v0.8.1 lines 329-350):
  once the trace is complete (from the second step), every module's fetch prefetches up to
  ``prefetch_bucket_size`` more elements, bounded by ``max_live_parameters - n_available`` (``n_available``
  counts every gathered element, the held ones included); a module's parameters are released after it runs. A
  decoder layer fires a fetch per submodule (about a dozen), so the prefetch outruns the release and the gathered
  elements settle at ``max_live_parameters`` (1e9: 2 GB of bf16, 4 GB of fp32 parameters) whenever the model is
  larger. The prefetch adds whole parameters while the running count is under the bound, so when it reaches the
  lm_head (one matrix, often the largest single parameter) the count overshoots to about ``max_live_parameters``
  + the lm_head, until the layers ahead of it have run and been released. DeepSpeed's documentation of
  ``stage3_max_live_parameters``: "Smaller values use less memory". Checked against DeepSpeed 0.19.8 on the CPU
  (tests/training/test_deepspeed_zero3.py): the step's peak grows by the window in parameter bytes.
- **Gather copy** (offloaded parameters): the gather allocates the parameter buffer, then copies the rank's
  host partition to the device as the all-gather's input (``_all_gather_sequential``, partition_parameters.py at
  0.19.8 lines 1388-1402; v0.8.1 lines 839-856): both live together, 1/N of the parameter beyond the gathered
  one. A single rank: since v0.9.0 (commit 4d27225, ``_no_gather_coalesced``) the device copy *is* the
  parameter, nothing more; before, it went through the same gather: the whole parameter again.
"""

from __future__ import annotations

from collections.abc import Sequence

REDUCE_BUCKET_SIZE = 500_000_000  # zero/config.py line 113, elements
SUB_GROUP_SIZE = 1_000_000_000  # line 175
PREFETCH_BUCKET_SIZE = 50_000_000  # line 215 (stage3_prefetch_bucket_size)
PARAM_PERSISTENCE_THRESHOLD = 100_000  # line 221
MAX_LIVE_PARAMETERS = 1_000_000_000  # line 238
MAX_REUSE_DISTANCE = 1_000_000_000  # line 244


def ipg_bucket_bytes(grad_bytes: int, bucket_elements: int = REDUCE_BUCKET_SIZE) -> int:
    """The ZeRO-3 contiguous-gradient (IPG) bucket: ``reduce_bucket_size`` elements of the gradient dtype,
    allocated at initialisation (stage3.py lines 731-735).

    >>> ipg_bucket_bytes(2)
    1000000000
    """
    return bucket_elements * grad_bytes


def step_grad_copy_bytes(shard_elements: int, master_bytes: int = 4, sub_group: int = SUB_GROUP_SIZE) -> int:
    """The fp32 copy of one sub-group's gradient partition made for the optimizer step (stage3.py 2398-2408)."""
    return min(sub_group, shard_elements) * master_bytes


def held_after_forward(unit_elements: Sequence[int], max_reuse: int = MAX_REUSE_DISTANCE) -> list[bool]:
    """For units (embedding, layers, head) in forward order: True when the unit stays gathered from its forward
    to its backward, i.e. the elements of the modules run in between (the later units' forward and backward,
    2 x their sum) are fewer than ``max_reuse`` (partitioned_param_coordinator.py ``__params_to_release``).

    >>> held_after_forward([300_000_000, 200_000_000, 200_000_000, 300_000_000])
    [False, False, True, True]
    """
    out = []
    after = sum(unit_elements)
    for n in unit_elements:
        after -= n
        out.append(2 * after < max_reuse)
    return out


def live_window_elements(unit_elements: Sequence[int], head_is_single_matrix: bool,
                         max_live: int = MAX_LIVE_PARAMETERS) -> tuple[int, int, int]:
    """The gathered elements of a complete trace (see the module doc), for units in forward order:
    (steady: while the layers run, forward or backward; reach: when the prefetch reaches the last unit, added whole
    past the bound when it is one matrix; units ahead: how many units before the last the window spans then).

    >>> live_window_elements([100, 400, 400, 400, 300], True, max_live=1000)
    (1000, 1300, 2)
    >>> live_window_elements([100, 200, 300], True, max_live=1000)  # smaller than the window: all of it
    (600, 600, 2)
    """
    total = sum(unit_elements)
    if total <= max_live or not unit_elements:
        return total, total, max(0, len(unit_elements) - 1)
    last = unit_elements[-1]
    ahead, span = 0, 0
    for n in reversed(unit_elements[:-1]):  # the units the window holds when the last one is next in the queue
        if ahead + n > max_live:
            break
        ahead += n
        span += 1
    reach = min(total, max_live + last) if head_is_single_matrix else max_live
    return max_live, reach, span


def gather_copy_bytes(param_bytes: int, ranks: int, pre_0_9: bool = False) -> int:
    """The partition's device copy alive beside the gathered buffer while an offloaded parameter of
    ``param_bytes`` is gathered over ``ranks`` (see the module doc).

    >>> gather_copy_bytes(4_000, 4), gather_copy_bytes(4_000, 1), gather_copy_bytes(4_000, 1, pre_0_9=True)
    (1000, 0, 4000)
    """
    if ranks <= 1 and not pre_0_9:
        return 0
    return -(-param_bytes // max(1, ranks))


def prefetch_bytes(unit_elements: Sequence[int], elem_bytes: int, prefetch: int = PREFETCH_BUCKET_SIZE) -> int:
    """Bytes fetched ahead of the running module: up to ``prefetch_bucket_size`` elements, at least one module's
    parameters (the coordinator prefetches whole parameters until the bucket is full); bounded by the largest
    unit here (modules are smaller than decoder layers)."""
    if not unit_elements:
        return 0
    return min(prefetch, max(unit_elements)) * elem_bytes
