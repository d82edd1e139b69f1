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

**Collective volume** (``zero3_collective_elements``: what a steady training step hands to the collectives, read
by the step time; line numbers at DeepSpeed 0.19.8, the release the tests run):

- **Persistent parameters.** ``mark_persistent_parameters`` (runtime/zero/parameter_offload.py lines 317-335) marks
  every parameter of at most ``stage3_param_persistence_threshold`` elements (1e5, config.py line 228; up to
  ``stage3_model_persistence_threshold``, default sys.maxsize, line 235) ``ds_persist``: once gathered it is never
  released (``__params_to_release`` skips it, partitioned_param_coordinator.py line 640), so no forward or
  backward gathers it. The optimizer step partitions every parameter (stage3.py ``step`` line 2878,
  ``_partition_all_parameters``) and ``_post_step`` all-gathers the persistent ones again (lines 2839-2841): once
  per optimizer step, not per micro-step. Their gradients are reduced like every other (below).
- **Forward.** Every other parameter is all-gathered when its module runs (``fetch_sub_module``, line 310, or
  ahead of it by the prefetch, lines 452-478), in its own dtype, each rank's ceil(n / N) partition:
  ``_all_gather_dtype`` (partition_parameters.py lines 1329-1362) gathers ``partition_sz x world_size`` elements,
  N ceil(n / N) per parameter.
- **Backward.** After a module runs, its parameters are released (``release_sub_module``, line 494) unless
  ``__params_to_release`` (lines 634-665) keeps them: a parameter used again by a module reached before
  ``stage3_max_reuse_distance`` elements (1e9, line 251) of the recorded module order (forward then backward,
  every module's parameters counted, persistent ones included) have been traversed, or one whose next use the
  prefetcher has already queued (lines 648-651). A released parameter is gathered again when its module's
  backward runs. The prefetcher pops the trace until ``stage3_prefetch_bucket_size`` (5e7, line 222) elements not
  yet gathered are queued (lines 452-478, within ``stage3_max_live_parameters``): when the partitioned parameters
  total no more than that, the first module's prefetch queues the whole step and nothing is released before its
  last use. Otherwise the queued uses lie within 5e7 elements of the module running, nearer than the reuse
  distance keeps (1e9 spans 2 x 5e8 in forward and backward), and the reuse distance decides alone. A module whose
  backward does not run (a frozen embedding, the frozen layers that read only its output) gathers nothing again.
  The first step records the trace (coordinator ``reset_step`` lines 251-290) and releases every parameter after
  each module, persistent ones too: a one-off, not counted here.
- **Gradients.** Every parameter that requires grad (``create_reduce_and_remove_grad_hooks``, stage3.py lines
  1487-1505; a frozen one has no hook) goes to the reduce bucket and is reduce-scattered every micro-step by
  ``reduce_scatter_coalesced`` (runtime/comm/coalesced_collectives.py lines 81-130: each tensor padded to
  N ceil(n / N)) in ``communication_data_type``.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from typing import NamedTuple

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


@dataclass(frozen=True)
class Zero3Use:
    """One use of a parameter by the module running it, in forward order (module doc, "Collective volume"):
    ``key`` names the parameter (a tied lm_head uses the embedding's key again), ``numel`` its elements."""

    key: Hashable
    numel: int
    elem: int = 2  # bytes per element of the stored (and gathered) parameter
    trained: bool = True  # requires grad: reduce-scattered
    backward: bool = True  # its module's backward runs (and gathers it again if released)


class Zero3Volume(NamedTuple):
    """A steady ZeRO-3 step's collective payloads, every rank's: N ceil(n / N) elements per parameter."""

    forward: int  # bytes all-gathered in each micro-step's forward
    backward: int  # bytes all-gathered again in each micro-step's backward
    reduced: int  # gradient elements reduce-scattered each micro-step (in communication_data_type)
    persistent: int  # bytes of the persistent parameters, all-gathered once after each optimizer step


def padded(numel: int, ranks: int) -> int:
    """Elements a collective moves for a parameter of ``numel`` over ``ranks``: each rank's ceil(n / N) partition
    (partition_parameters.py ``_all_gather_dtype``; coalesced_collectives.py lines 95-100).

    >>> padded(1001, 2), padded(1001, 1)
    (1002, 1001)
    """
    return -(-numel // max(1, ranks)) * max(1, ranks)


def persists(numel: int, threshold: int = PARAM_PERSISTENCE_THRESHOLD) -> bool:
    """Whether DeepSpeed ZeRO-3 keeps a parameter of ``numel`` elements whole on every rank (``ds_persist``): at most
    ``stage3_param_persistence_threshold`` elements (config.py line 221; ``_convert_to_deepspeed_param``,
    partition_parameters.py at 0.19.8 lines 1292-1297, and ``mark_persistent_parameters``, parameter_offload.py lines
    317-335; ``stage3_model_persistence_threshold``, default sys.maxsize, not modelled). The one rule the collective
    volume (:func:`zero3_collective_elements`) and the memory (:func:`persistent_param_bytes`) read.

    >>> persists(100_000), persists(100_001)
    (True, False)
    """
    return numel <= threshold


def persistent_param_bytes(uses: Sequence[Zero3Use], ranks: int,
                           threshold: int = PARAM_PERSISTENCE_THRESHOLD) -> int:
    """Bytes a rank holds for the persistent parameters (:func:`persists`) beyond the partitions every parameter
    has: each whole, in its stored dtype, from its first use on. A persistent parameter keeps its partition
    (``ds_tensor``, made on the local device even when parameters are offloaded: partition_parameters.py lines
    1828-1830) and, once gathered, its ``param.data``, which ``__params_to_release`` never releases
    (partitioned_param_coordinator.py line 640); the optimizer step partitions it and ``_post_step`` gathers it again
    at once (stage3.py lines 2839-2841). Its gradient and optimizer state are partitioned as every other parameter's
    (the reduce hooks, stage3.py lines 1487-1505, do not look at ``ds_persist``). On one rank the partition is the
    parameter (since v0.9.0 a single rank uses it in place): nothing beyond it.

        persistent = sum over distinct persistent parameters of n x elem     (ranks > 1; else 0)        (Z4)

    Measured on two gloo ranks, DeepSpeed 0.19.8 (tests/training/test_deepspeed_zero3.py).

    >>> persistent_param_bytes([Zero3Use("n", 10), Zero3Use("w", 301), Zero3Use("n", 10)], 2, threshold=100)
    20
    """
    if ranks <= 1:
        return 0
    params = {u.key: u for u in uses}
    return sum(u.numel * u.elem for u in params.values() if persists(u.numel, threshold))


def zero3_collective_elements(uses: Sequence[Zero3Use], ranks: int,
                              persistence: int = PARAM_PERSISTENCE_THRESHOLD,
                              max_reuse: int = MAX_REUSE_DISTANCE, prefetch: int = PREFETCH_BUCKET_SIZE,
                              max_live: int = MAX_LIVE_PARAMETERS) -> Zero3Volume:
    """What a steady ZeRO-3 step all-gathers and reduce-scatters for the parameter ``uses`` in forward order, the
    backward running them in reverse (module doc, "Collective volume") [bytes; reduced: elements].

    >>> uses = [Zero3Use("e", 400), Zero3Use("n", 10), Zero3Use("w", 301), Zero3Use("h", 200)]
    >>> zero3_collective_elements(uses, 2, persistence=10, max_reuse=1000, prefetch=0)  # w, h kept: 2 x 200 < 1000
    Zero3Volume(forward=1804, backward=800, reduced=912, persistent=20)
    >>> zero3_collective_elements(uses, 2, persistence=10, max_reuse=1000)  # the prefetch queues all 901: none again
    Zero3Volume(forward=1804, backward=0, reduced=912, persistent=20)
    """
    params = {u.key: u for u in uses}
    persist = {k for k, u in params.items() if persists(u.numel, persistence)}
    trace = list(uses) + [u for u in reversed(uses) if u.backward]
    before = [0]  # elements of the trace before each position (persistent parameters count, line 663)
    for u in trace:
        before.append(before[-1] + u.numel)
    nxt: list[int | None] = [None] * len(trace)
    seen: dict[Hashable, int] = {}
    for t in range(len(trace) - 1, -1, -1):
        nxt[t] = seen.get(trace[t].key)
        seen[trace[t].key] = t
    partitioned = sum(u.numel for k, u in params.items() if k not in persist)
    whole = 0 < prefetch and partitioned <= min(prefetch, max_live)  # the first prefetch queues the whole step
    gathered: set[Hashable] = set()
    moved = [0, 0]
    for t, u in enumerate(trace):
        if u.key in persist:
            continue
        if u.key not in gathered:
            moved[t >= len(uses)] += padded(u.numel, ranks) * u.elem
            gathered.add(u.key)
        n = nxt[t]
        if n is None or (not whole and before[n] - before[t + 1] >= max_reuse):
            gathered.discard(u.key)
    reduced = sum(padded(u.numel, ranks) for u in params.values() if u.trained)
    return Zero3Volume(moved[0], moved[1], reduced, sum(padded(params[k].numel, ranks) * params[k].elem
                                                        for k in persist))
