"""What the user compares against: the metric of a memory estimate, and the caching allocator's reserve.

Three figures a GPU user reads, each a superset of the one before:

    allocated  = live tensor bytes at the peak (torch.cuda.max_memory_allocated)                           (1)
    reserved   = allocated + the caching allocator's cached, unused blocks (max_memory_reserved)           (2)
               = persistent + dynamic x rho,  rho = (reserved - persistent) / (allocated - persistent) of measured
                 runs (``pair_ratio``; reserved / allocated where a published run does not split its bytes)
    nvidia-smi = reserved + the CUDA context, kernels and library workspaces (the process's NVML memory)   (3)

(1) is what the formulas compute; the allocator's block rounding to 512 B and its 2 MiB / 20 MiB segments are
exact (formulas/caching_allocator.py) but small next to fragmentation, which is not: freed blocks that later
allocations of other sizes cannot reuse (variable sequence lengths, recomputation, caches grown by torch.cat).
Only memory that is freed and allocated again fragments: the *persistent* tensors, allocated once when the model
and optimizer are built and never freed (``PERSISTENT``: weights, adapters, fp32 masters, optimizer states), hold
their blocks exactly; the *dynamic* rest (activations, gradients, which zero_grad(set_to_none=True) frees every
step, transients, growing KV caches) is scaled by the calibrated ratio rho, as a range (``RESERVE``): low and high
hold every named row of
``validation/allocator_pairs.csv`` of that phase (their full span, so those rows' own device totals are inside by
construction and count as calibration rows, not as evidence), expected is their median. tests/estimate/test_allocator.py re-derives the constants from the file. (3) adds the CUDA context
span (estimate/engines.py ``CUDA_CONTEXT``, ``CUDA_CONTEXT_TRAINING`` for a training run: measured on an H200).

The fixed context a device holds beside the tensors is the device's runtime's (``device_context``, the one place it
is added): the CUDA context on an NVIDIA GPU (``gpu_runtime`` 'cuda'); none on an Apple chip (Metal: no CUDA
context, and Metal's own command queues and compiled kernels are not modelled, named as the ``device_context``
assumption); none on a CPU, whose process is the ``host_runtime`` item. An AMD GPU (ROCm/HIP), an Intel Gaudi (its
SynapseAI runtime) and a TPU (XLA) hold a runtime context too, but no figure was measured for any of them: they get
the CUDA span as a stand-in, in the same ``cuda_context`` item, and the ``device_context`` assumption says so
(``STAND_IN_WHY``). The default metric's words say the same.

Segments are returned to the driver only by ``torch.cuda.empty_cache()`` (or an out-of-memory retry): what was
reserved while the model was built (a QLoRA quantizer's transient, formulas/nf4_quantization.py) stays reserved, and
``reset_peak_memory_stats`` resets the reserved peak to that current figure. So a training step's reserved memory is
at least the 'model init' phase's bytes (``floor``), for runs that do not empty the cache after building the model
(torchtune's single-device recipes @ 0217d44c2 call no ``empty_cache``; its distributed recipes do, through
``cleanup_before_training``, lora_finetune_distributed.py line 520).

Default (``metric=None``): the device total, live tensors + the CUDA context + the allocator's reserve where it is
calibrated. transformers inference on a GPU expects the calibrated reserve of eq. (2), ``reserve_item``, as under
``nvidia-smi``: every CUDA run llmsizer measured kept 0.16-4.1 GiB reserved beyond its allocated peak
(validation/measured/gpu-h200-2026-12-04.jsonl, 23 of 23, even with the same shapes every step), and an
out-of-memory error is decided by what the allocator can reserve, not by the live tensors, so a device total
without it is below every measured one. PyTorch training keeps 0 expected, with eq. (2)'s calibrated high end,
``training_default_reserve`` (eq. 2h: the training ratio does not hold checkpointed and other runs alike, so no
expected value: ``RESERVE``'s comment; on Metal, uncalibrated, up to one more activation peak); vLLM
and SGLang (KV pool sized at start-up from the memory budget) and llama.cpp (ggml buffers: reserved = allocated)
keep their own totals. Recorded as the ``metric`` assumption.

Fixed shapes (``batch_shapes='fixed'``: the same tensor shapes every step, e.g. torchtitan's packed fixed-length
sequences, ``torchtitan/datasets/hf_datasets.py`` @9dec370 lines 111-127 yield every row as exactly ``seq_len + 1``
tokens): nothing fragments from step to step, and the reserve is what the per-stream pools hold beyond the
allocated peak, eq. (R1) of formulas/caching_allocator.py, exact instead of the calibrated ratio. The side-stream
blocks modelled are FSDP2's reduce-scatter outputs: ``foreach_reduce`` allocates each unit's flat output on the
reduce-scatter stream (torch 2.13 ``distributed/fsdp/_fully_shard/_fsdp_collectives.py`` lines 611-616, the
``reduce_scatter_comm.allocate`` under ``device_handle.stream(reduce_scatter_stream)``), the sharded gradients are
``as_strided`` views of it (lines 704-710, 748-754; "The RS output is allocated in the RS stream and used in the
default stream", line 763), and ``optimizer.zero_grad()`` (set_to_none) frees them before the next forward: they
stay cached in that stream's pool, which the default stream's activations cannot use. With the units' layout
traced (``fsdp2_units`` other than 'largest-two', formulas/fsdp2_units.py) also FSDP2's all-gather inputs and
outputs on the all-gather copy-in stream (lines 336-356, freed after the copy-out into default-stream tensors),
whose allocations and frees are replayed (eq. 4'). In the default stream's own pool: the hole the eager
cross-entropy's [t, V] tensors leave at the loss backward (formulas/loss_allocations.py eq. L1, or L1p under torch's
loss_parallel on the rank's [t, V / tp] shard, replayed in order: eq. 4'', the H(p) of eq. R1). Not modelled (so the
fixed-shape reserve is a lower bound): the copy-in stream under 'largest-two', FSDP1's post-backward stream (torch
``fsdp/_runtime_utils.py`` lines 755, 848), and other holes inside the default stream's own pool -- except on one GPU
without FSDP, offloading or compilation, with no or full recomputation, where those holes are eq. (R2): a calibrated
share of the dynamic bytes (``FIXED_STEP_RESERVE``, on llmsizer's own H200 runs).

A KV cache grown by concatenation (transformers' DynamicCache during ``generate``: ``ConcatGrowth``) reserves the
segments of eq. (C1') of formulas/caching_allocator.py, the sum of a growing sequence; under 'reserved' and
'nvidia-smi' the cache's part of the reserve is eq. (G2) (``concat_reserve_item``) over eq. (G1)
(``concat_kv_reserve``), instead of the calibrated share alone. Those segments hold no live block, so a failing
cudaMalloc releases them: they are in neither the default's device total nor any fit verdict
(``releasable_growth``). For the same reason max_memory_reserved and nvidia-smi never pass the device's memory:
where the memory is known, eq. (G3) (``cap_growth``, ``cap_growth_at_memory``) cuts the growth's part so that the
metric's total and its calibrated range stay under it (nvidia-smi: the memory; reserved: the memory less the CUDA
context); without a memory the figure stays uncapped and the growth's warning says where it stops.

llama.cpp does not use PyTorch's allocator: its ggml buffers are allocated once at their full size, so allocated
and reserved are the same bytes and only the CUDA context separates them from nvidia-smi.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from ..errors import InputError
from ..formulas.caching_allocator import (
    cross_stream_reserve,
    stream_pool_bytes,
    stream_trace_hole_bytes,
    stream_trace_pool_bytes,
)
from ..result import Assumption, Estimate, Item, Location
from ..specs.workload import MEMORY_METRICS
from ..suggest import unknown_choice
from ..units import format_bytes
from . import engines as E
from . import ranges as R

METRICS = MEMORY_METRICS
ALLOCATOR_ITEMS = ("allocator_cache", "allocator_reserve")
CONTEXT_ITEM = "cuda_context"
NOT_TENSORS = ALLOCATOR_ITEMS + (CONTEXT_ITEM,)
PERSISTENT = ("weights", "adapter_weights", "master_weights", "optimizer_states", "paged_optimizer_states")
TRAINING, INFERENCE = "training", "inference"
NATIVE = "native"  # a context_span phase: a process without PyTorch (llama.cpp)
PAIRS_FILE = "validation/allocator_pairs.csv"


@dataclass(frozen=True)
class ReserveRatio:
    """max_memory_reserved / max_memory_allocated of the named rows of one phase."""

    phase: str
    low: float
    expected: float
    high: float
    rows: tuple[str, ...]


def pair_ratio(allocated: float, reserved: float, persistent: float = 0.0) -> float:
    """The reserve ratio of one row of ``PAIRS_FILE``, over the bytes it scales (``reserve_item``: the dynamic ones):
    (reserved - persistent) / (allocated - persistent). ``persistent``: the bytes allocated once (weights,
    optimizer states), known for llmsizer's own measured rows; 0 where a published row does not say (then the ratio
    is over all allocated bytes, a lower bound of the dynamic one)."""
    if not 0 <= persistent < allocated <= reserved:
        raise InputError(f"a reserve pair needs 0 <= persistent < allocated <= reserved, got {persistent}, "
                         f"{allocated}, {reserved}")
    return (reserved - persistent) / (allocated - persistent)


def derive(ratios: list[float]) -> tuple[float, float, float]:
    """(low, expected, high) of reserved / allocated ratios: the rows' full span for the ends (a ratio below 1 is
    impossible, so no interval extrapolated from a handful of rows), the median expected; rounded outwards (ends)
    and to 4 decimals."""
    if not ratios:
        raise InputError("a reserve ratio needs at least one row")
    import statistics  # only re-deriving a ratio needs it (kept off the start-up of every command)

    lo, hi = min(ratios), max(ratios)
    return (math.floor(lo * 1e4) / 1e4, round(statistics.median(ratios), 4), math.ceil(hi * 1e4) / 1e4)


# Derived from validation/allocator_pairs.csv (tests/estimate/test_allocator.py re-derives them).
RESERVE = {
    TRAINING: ReserveRatio(TRAINING, 1.0566, 1.4659, 1.7951, ("AL03", "AL04", "AL05", "AL06", "AL07")),
    INFERENCE: ReserveRatio(INFERENCE, 1.0926, 1.1925, 1.3879, ("GP02", "GP03", "GP10", "GP11", "GP12", "GP13", "GP14",
                                                                "GP15", "GP21", "GP22")),
}
# The GP rows are llmsizer's own CUDA runs (validation/measured/gpu-h200-2026-12-04.jsonl line N = GP N); their
# device totals are calibration rows of these ratios (validation_cases.RESERVE_CALIBRATION). Line 1 (Qwen2.5-0.5B,
# one sequence of 1024) is not a row: its dynamic bytes (91 MB) are smaller than the 0.15-0.33 GiB every inference
# run keeps reserved beside its weights (the holes of the model build's segments, which empty_cache cannot release
# while a weight lives in them), so its ratio (3.74) measures that fixed part, not fragmentation of dynamic bytes;
# it stays a validation row. AL01 and AL02 are listed (phase 'inference, not calibrating') but feed no ratio: neither
# splits its persistent bytes, so their ratio is over all bytes (``pair_ratio``: a lower bound of the dynamic ratio this
# one scales; with them the low end was 1.0085), and AL02 is a vLLM run, which gets no reserve by default. Because the
# GP rows set the span, their device totals are inside the printed range by construction: they are judged, but
# excluded from the summary (CALIBRATION); the evidence for a new run is the leave-one-out coverage
# (tests/estimate/test_calibrated_need.py: each row judged by the ratio of the other nine) and the non-calibration
# runs (GP01, the scored training runs). The training runs' pairs feed no ``RESERVE`` ratio (half of them feed
# ``FIXED_STEP_RESERVE``, phases 'training fixed ...'; the rest are 'training, not calibrating'): they split by recomputation, 1.05-1.13 without checkpointing (GP04, 06, 08, 16, 18) and 1.25-1.55 with
# full checkpointing (GP05, 07, 09, 17, 20, 23; GP19 1.05, its peak at the optimizer step), so one training ratio
# cannot hold both: with them the median falls 1.4659 -> 1.2521 and the independent Unsloth max-context rows
# (tests/validation/test_unsloth_context.py, nvidia-smi) overshoot by 12-22 %; without them the non-checkpointed
# runs' device totals would be 21-33 % high. So the default expects no training reserve (below) until the reserve
# of recomputation is modelled; its high end is the training ratio's (eq. 2h, ``training_default_reserve``), which
# holds every measured training run's reserved - allocated (tests/training/test_allocator_reserve_pairs.py). A fixed-shape step on one GPU (the measured runs' own shapes) gets eq. (R1) + (R2)
# instead (``FIXED_STEP_RESERVE`` below), by recomputation.

# Eq. (R2): a fixed-shape training step on one GPU (no FSDP, no side streams) keeps more reserved than eq. (R1)'s
# modelled holes. The rest is the default stream's other holes -- blocks the forward freed that the backward's
# requests of other sizes cannot reuse, and, with full recomputation, each layer's recomputed activations and (full
# fine-tuning) its weight gradients, which stay until zero_grad, allocated into the places the loss's [t, V] tensors
# and the previous layer's recompute freed -- which no trace of the step's thousands of allocations models here.
# It is scaled like eq. (2): the dynamic bytes (live tensors - ``PERSISTENT``) x (rho - 1),
#     rho = (reserved - R1 - persistent) / (allocated - persistent)                                          (R2)
# of measured runs (``fixed_pair_ratio``), by recomputation ('none'; 'full': every decoder layer recomputed), since
# rho - 1 differs by 4x between them: without recomputation eq. (R1)'s loss hole is 58-73 % of reserved -
# allocated, with it 0-56 % (GP19's peak is its optimizer step, where no loss hole stands). Calibrated on NAMED rows
# of validation/allocator_pairs.csv (llmsizer's own H200 runs, line N of validation/measured/gpu-h200-2026-12-04.jsonl
# = GP N), chosen by a fixed rule, not by their ratios: every other row of each kind in file order, from the first,
# so GP06, GP16 (none) and GP07, GP17, GP20 (full) are scored, not fitted (GP17, a full fine-tune, keeps rho 1.39,
# above the range: its weight gradients, allocated layer by layer between the recomputes, are not modelled). Their device totals are calibration rows (validation_cases.reserve_calibration).
# tests/estimate/test_allocator.py re-derives the constants (eq. R1 recomputed by the estimator, the measured
# allocated, reserved and persistent bytes read from the records). Selective recomputation, several GPUs and
# offloading were not measured: they keep eq. (R1) alone, a lower bound.
FIXED_STEP_RESERVE = {
    "none": ReserveRatio("training fixed no recomputation", 1.0145, 1.0358, 1.0473, ("GP04", "GP08", "GP18")),
    "full": ReserveRatio("training fixed full recomputation", 1.0482, 1.156, 1.2527, ("GP05", "GP09", "GP19",
                                                                                       "GP23")),
}


def fixed_pair_ratio(allocated: float, reserved: float, persistent: float, modelled: float) -> float:
    """Eq. (R2)'s rho of one measured run: (reserved - ``modelled`` - persistent) / (allocated - persistent), with
    ``modelled`` the run's eq. (R1) reserve (the holes the estimate replays); ``pair_ratio`` of the rest."""
    if not 0 <= modelled <= reserved - allocated:
        raise InputError(f"the modelled reserve {modelled} must lie in 0..{reserved - allocated} (reserved - "
                         "allocated)")
    return pair_ratio(allocated, reserved - modelled, persistent)


# the runtimes without a measured context of their own (specs/workload.py GPU_RUNTIMES): their names for the words
STAND_INS = {"rocm": "AMD ROCm (HIP)", "hpu": "Intel Gaudi (SynapseAI)", "xla": "Google TPU (XLA)"}
STAND_IN_WHY = ("no measured context of this runtime: the span of estimate/engines.py CUDA_CONTEXT (CUDA tools' "
                "constants) stands in for its context, kernels and library handles; measure the runtime's own with "
                "its SMI tool (rocm-smi, hl-smi) before relying on the last few hundred MiB")

METRIC_WHY = ("what the figure is compared with: allocated = torch.cuda.max_memory_allocated, reserved = "
              "max_memory_reserved, nvidia-smi = reserved + CUDA context (--metric)")
# what the default metric's device total holds (the words of its ``metric`` assumption), by who allocates it: the
# serving engines that size their own pool or buffers (estimate/inference/vllm.py, sglang.py, llamacpp.py) and
# PyTorch's caching allocator under transformers inference (its calibrated reserve, ``apply_metric``) or training
HELD = {"vllm": "vLLM's start-up pool (gpu_memory_utilization x CUDA's total: weights, profiled activations, non-torch "
                "allocations, CUDA graphs, KV cache)",
        "sglang": "SGLang's pool at mem_fraction_static (weights, KV cache: its token pool) + its runtime reserve for "
                  "activations and CUDA graphs",
        "llamacpp": "ggml buffers allocated once at full size (weights, KV cache, compute buffer: no allocator "
                    "reserve)",
        INFERENCE: "live tensors + allocator reserve (transformers inference)",
        TRAINING: "live tensors + allocator reserve (none expected in training: its measured range only)"}


def default_metric_text(device: str, engine: str | None, phase: str) -> str:
    """The default metric's words on ``device`` ('cuda', 'metal', 'cpu' or a runtime of ``STAND_INS``) for the
    serving ``engine`` (None: PyTorch's allocator, transformers or training) in ``phase``: what the total holds
    (``HELD``) and the runtime context beside it (``device_context``)."""
    if device == "cpu":
        return "host total: tensors in RAM + the process (host_runtime)"
    held = HELD.get(engine or "", HELD.get(phase, HELD[INFERENCE]))
    if device == "metal":  # no CUDA context, so no calibrated reserve either (``apply_metric``)
        return (f"device total: {held} (Apple Metal: no device context modelled)" if engine in HELD else
                "device total: live tensors (Apple Metal: no device context modelled), no allocator reserve expected")
    stand_in = STAND_INS.get(device)
    return f"device total: {held} + " + ("CUDA context" if stand_in is None else
                                         f"the {stand_in} context (CUDA's span as a stand-in)")


METAL_CONTEXT_WHY = ("an Apple chip runs Metal, not CUDA: no CUDA context is added; Metal's own command queues and "
                     "compiled kernels are not modelled (no measurement: every constant of estimate/engines.py "
                     "CUDA_CONTEXT is a CUDA tool's), and the process's own memory is the host_runtime item")


def context_span(gpu_runtime: str, phase: str = INFERENCE) -> E.Span:
    """The fixed context one GPU of ``gpu_runtime`` holds beside the tensors (specs/workload.py GPU_RUNTIMES): the
    CUDA context's span of ``phase`` (a training run has loaded its backward and optimizer kernels too, estimate/
    engines.py ``CUDA_CONTEXT_TRAINING``; ``NATIVE``: a process without PyTorch, llama.cpp, ``CUDA_CONTEXT_NATIVE``;
    also the stand-in of the runtimes of ``STAND_INS``), or nothing on Metal
    (``METAL_CONTEXT_WHY``)."""
    if gpu_runtime == "metal":
        return E.Span(0, 0, 0, METAL_CONTEXT_WHY)
    return {TRAINING: E.CUDA_CONTEXT_TRAINING, NATIVE: E.CUDA_CONTEXT_NATIVE}.get(phase, E.CUDA_CONTEXT)


def device_context(items: list[Item], assumptions: list[Assumption], gpu_runtime: str, gpus: int = 1,
                   formula: str = "", phase: str = INFERENCE) -> None:
    """Add the device's runtime context for ``gpus`` GPUs of ``gpu_runtime``: the ``cuda_context`` item on CUDA (and,
    as a stand-in named by the ``device_context`` assumption, on the runtimes of ``STAND_INS``), the
    ``device_context`` assumption naming its absence on Metal. The one place a composition adds it."""
    if gpu_runtime == "metal":
        assumptions.append(Assumption("device_context", "none (Metal)", True, METAL_CONTEXT_WHY))
        return
    c = context_span(gpu_runtime, phase)
    stand_in = STAND_INS.get(gpu_runtime)
    if stand_in is not None:
        assumptions.append(Assumption("device_context", f"CUDA's span as a stand-in ({stand_in})", True, STAND_IN_WHY))
    what = formula or "named constant (estimate/engines.py)"
    if stand_in is not None:
        what += f"; stands in for the {stand_in} context"
    items.append(Item(CONTEXT_ITEM, gpus * c.expected, "device", gpus * c.low, gpus * c.high,
                      what + (f" x {gpus} GPUs" if gpus > 1 else ""), c.source))


def check_metric(metric: str | None) -> str | None:
    if metric is not None and metric not in METRICS:
        raise InputError(unknown_choice("metric", metric, METRICS))
    return metric


def tensor_bytes(items: list[Item] | tuple[Item, ...]) -> int:
    """Expected live-tensor bytes on the device: every device item but the allocator's reserve and the context."""
    return sum(i.bytes for i in items if i.location == "device" and i.name not in NOT_TENSORS)


@dataclass(frozen=True)
class SideStreams:
    """Fixed shapes: the blocks side streams keep, and the step's moments, for eq. (R1)."""

    requests: tuple[int, ...]  # bytes of each block live together on the side streams (eq. 4)
    moments: tuple[tuple[int, int], ...]  # (allocated, of it in side-stream blocks) per moment of the step
    what: str  # which blocks, for the formula text
    # the pool of a side stream whose blocks come and go (eq. 4'): FSDP2's all-gather copy-in stream, none of them
    # alive at a moment of the timeline
    copy_in_pool: int = 0
    # H(p) of eq. (R1) per moment (empty: none): the default stream's hole, the eager loss's (eq. 4'' of eq. L1/L1p)
    holes: tuple[int, ...] = ()
    # the hole's loss runs under torch's loss_parallel (eq. L1p on the rank's vocabulary shard), else eq. L1
    loss_parallel: bool = False
    # the key of ``FIXED_STEP_RESERVE`` for the default stream's other holes (eq. R2): a one-GPU step without side
    # streams whose recomputation was measured; None: not calibrated, eq. (R1) alone
    step: str | None = None


@dataclass(frozen=True)
class ConcatGrowth:
    """A KV cache grown by concatenation (transformers' DynamicCache during ``generate``), in the large-block
    regime of formulas/caching_allocator.py eq. (C1'): what its requests make the pool reserve, against the live
    bytes at the estimate's peak. What max_memory_reserved and nvidia-smi show (metric 'reserved', 'nvidia-smi'),
    not what a run needs: every segment the growth leaves behind is whole and free, so a failing cudaMalloc
    releases them and retries (CUDACachingAllocator.cpp @ 001074d ``release_cached_blocks`` in ``malloc``'s retry):
    max_memory_reserved never passes the device's memory, and the default's device total (the fit need) keeps the
    calibrated reserve alone."""

    pool: int  # eq. (C1'): the segments the cache's K/V requests reserve from the prompt to the context
    kv: int  # the KV cache item at the peak (the prompt's at a prefill peak, the context's at a decode peak)
    activations: int  # the activations item at the peak: blocks alive there, which the pool may later reuse
    what: str  # the cache, for the formula text


def releasable_growth(items: list[Item]) -> tuple[int, int, int]:
    """(low, expected, high) of the ``allocator_reserve`` in ``items`` beyond the calibrated reserve of their dynamic
    bytes [bytes]: the part eq. (G2) adds for a cache grown by concatenation, whole free segments that a failing
    cudaMalloc releases (``ConcatGrowth``), so shown under 'reserved' / 'nvidia-smi' but not needed to run: the fit
    verdict leaves it out (estimate/inference/compose.py ``_check_fit``)."""
    here = [i for i in items if i.location == "device"]
    item = next((i for i in here if i.name == "allocator_reserve"), None)
    if item is None:
        return 0, 0, 0
    dynamic = tensor_bytes(here) - sum(i.bytes for i in here if i.name in PERSISTENT)
    plain = reserve_item(dynamic, INFERENCE)
    return tuple(max(0, a - b) for a, b in zip(item.range, plain.range, strict=True))  # type: ignore[return-value]


def releasable_at(est: Estimate, location: Location = "device") -> list[int] | None:
    """The (low, expected, high) bytes of the DynamicCache's grown segments that a failing allocation releases at
    ``location`` (``details["kv_growth_releasable"]``, ``releasable_growth``): device items only, None elsewhere or
    without growth. The one home of that "device only" rule: ``verdict_need_range`` subtracts it and the inference
    verdict's reason names it (estimate/inference/compose.py ``_check_fit``; review25 D5)."""
    return est.details.get("kv_growth_releasable") if location == "device" else None


def verdict_need_range(est: Estimate, location: Location = "device") -> tuple[int, int, int, dict[str, Any] | None]:
    """(low, expected, high) bytes ``est`` needs at ``location`` and its calibrated range (``calibrated_need``, None
    without one): the total there less the DynamicCache's grown segments that a failing allocation releases
    (``releasable_at``: device items only), which the metric shows but a run does not need. The one rule of that
    need: the inference fit verdict (estimate/inference/compose.py ``_check_fit``) and fit's memory per device
    (estimate/fit.py ``need_per_device``) read it (review23b D1, review24 D5). With the growth capped at the device's
    memory (``cap_growth_at_memory``) the difference is the same: the cap cuts the total and the releasable growth
    alike."""
    lo, mid, hi = est.total(location)
    calibrated = est.details.get("calibrated_range")
    released = releasable_at(est, location)
    if released:
        lo, mid, hi = lo - released[0], mid - released[1], hi - released[2]
        if calibrated is not None:
            calibrated = {**calibrated, "low": calibrated["low"] - released[0], "high": calibrated["high"] - released[2]}
    return lo, mid, hi, calibrated


def growth_ceiling(memory: int, metric: str, gpu_runtime: str) -> tuple[int, int, int]:
    """(low, expected, high) of the most the device total of ``metric`` can read on a device of ``memory`` bytes
    [bytes], eq. (G3)'s ceiling: nvidia-smi reads the device's used memory, at most ``memory``; max_memory_reserved
    (``reserved``) reads PyTorch's segments, at most what cudaMalloc can get: ``memory`` less the CUDA context
    (``context_span``; no other device item of a transformers run is outside PyTorch's allocator), the low bound
    less the context's high, the high bound less its low."""
    if metric == "nvidia-smi":
        return memory, memory, memory
    c = context_span(gpu_runtime)
    return memory - c.high, memory - c.expected, memory - c.low


def cap_growth(total: tuple[int, int, int], releasable: tuple[int, int, int],
               ceiling: tuple[int, int, int]) -> tuple[int, int, int]:
    """The cut [bytes] of each bound (low, expected, high) of a device ``total`` that holds a DynamicCache's released
    growth (``releasable_growth``) so that it stays under ``ceiling`` (``growth_ceiling``):

        cut = min(releasable, max(0, total - ceiling))                                                    (G3)

    The growth's old segments are whole and free, so when cudaMalloc fails the allocator releases them and retries
    (CUDACachingAllocator.cpp @ 001074d ``DeviceCachingAllocator::malloc``: ``alloc_block(params, false) ||
    (release_available_cached_blocks(params) && alloc_block(params, false)) || (release_cached_blocks(context) &&
    alloc_block(params, true))``): max_memory_reserved, and so nvidia-smi, never pass the device's memory. Only the
    growth's part is cut: a total over the ceiling without it stays over it (it does not fit)."""
    return tuple(min(r, max(0, t - c)) for t, r, c in zip(total, releasable, ceiling, strict=True))  # type: ignore[return-value]


def capped_growth_item(item: Item, cut: tuple[int, int, int], ceiling: tuple[int, int, int], metric: str) -> Item:
    """The ``allocator_reserve`` ``item`` less eq. (G3)'s ``cut``, its formula saying the cap and why."""
    lo, mid, hi = (a - b for a, b in zip(item.range, cut, strict=True))
    bound = "the device's memory" if metric == "nvidia-smi" else "the device's memory less the CUDA context"
    why = (f"; capped (eq. G3) by {format_bytes(cut[1])} ({format_bytes(cut[0])}-{format_bytes(cut[2])}) so the "
           f"{metric} total stays at most {bound} ({format_bytes(ceiling[1])}"
           + (f", {format_bytes(ceiling[0])}-{format_bytes(ceiling[2])}" if ceiling[0] != ceiling[2] else "")
           + "): a failing cudaMalloc releases the growth's free segments and retries (CUDACachingAllocator.cpp "
           "@ 001074d release_cached_blocks in DeviceCachingAllocator::malloc)")
    return Item(item.name, mid, item.location, lo, hi, item.formula + why, item.source)


def cap_growth_at_memory(items: tuple[Item, ...], details: dict[str, object], memory: int, metric: str,
                         gpu_runtime: str) -> tuple[tuple[Item, ...], dict[str, object]]:
    """``items`` with eq. (G3) applied to the device total of ``metric`` on a device of ``memory`` bytes, and the
    ``details`` that change with it: the calibrated range's low and high capped by the same rule,
    ``kv_growth_releasable`` what remains of the growth in the capped total, ``kv_growth_capped`` the cut. The one
    place the cap is applied (estimate/inference/compose.py, where the memory is known); without a memory the
    figures stay uncapped (the growth's warning says so)."""
    released = details.get("kv_growth_releasable")
    if not released:
        return items, {}
    rel = tuple(int(x) for x in released)  # type: ignore[attr-defined]
    ceiling = growth_ceiling(memory, metric, gpu_runtime)
    here = [i.range for i in items if i.location == "device"]
    total = tuple(sum(r[k] for r in here) for k in range(3))
    cut = cap_growth(total, rel, ceiling)  # type: ignore[arg-type]
    changed: dict[str, object] = {}
    calibrated = details.get("calibrated_range")
    if isinstance(calibrated, dict):  # the same rule on the calibrated range's bounds
        c_cut = cap_growth((calibrated["low"], 0, calibrated["high"]), rel, ceiling)  # type: ignore[arg-type]
        if any(c_cut):
            changed["calibrated_range"] = {**calibrated, "low": calibrated["low"] - c_cut[0],
                                           "high": calibrated["high"] - c_cut[2]}
    if not any(cut):
        return items, changed
    reserve = next(i for i in items if i.location == "device" and i.name == "allocator_reserve")
    lo, mid, hi = (a - b for a, b in zip(reserve.range, cut, strict=True))
    # kept in order (an item's low <= expected <= high): a bound above the next one's capped figure takes it, which
    # only lowers it (its total stays under its ceiling) and never below the calibrated reserve (both bounds hold it)
    mid = min(mid, hi)
    cut = (reserve.range[0] - min(lo, mid), reserve.range[1] - mid, cut[2])
    changed.update(kv_growth_releasable=[r - c for r, c in zip(rel, cut, strict=True)], kv_growth_capped=list(cut))
    return tuple(capped_growth_item(i, cut, ceiling, metric) if i is reserve else i for i in items), changed


def concat_kv_reserve(growth: ConcatGrowth) -> tuple[int, int]:
    """(low, high) of what a cache grown by concatenation keeps reserved beyond its bytes at the peak [bytes]:

        high = pool - kv                                                                                (G1)
        low  = max(0, pool - kv - activations)

    pool eq. (C1') of formulas/caching_allocator.py. High: no block of another tensor serves the growth's requests,
    so all of the pool is reserved beside the peak's activations (their blocks stay cached). Low: the blocks the
    peak's activations free (the prefill's, larger than any K/V block of the cache: hidden >= KV heads x head_dim)
    serve the growth's requests first (best fit takes any cached block large enough), so the pool needs fresh
    segments only past them."""
    high = max(0, growth.pool - growth.kv)
    return max(0, high - growth.activations), high


def fsdp2_reduce_scatter_outputs(layer_grads: dict[int, int], grads: int, shards: int) -> tuple[int, ...]:
    """The flat reduce-scatter output of each FSDP2 unit [bytes]: a decoder layer's unsharded gradient bytes over
    the ``shards`` ranks (``reduce_scatter_output_numel = reduce_scatter_input_numel // world_size``,
    _fsdp_collectives.py line 596), the root unit (embedding, final norm, output) the rest of the ``grads`` shard."""
    layers = tuple(-(-g // max(1, shards)) for g in layer_grads.values())
    root = grads - sum(layers)
    return layers + ((root,) if root > 0 else ())


def training_side_streams(fsdp2: bool, pp: int, grad_accumulation: int, layer_grads: dict[int, int], grads: int,
                          shards: int, moments: list[tuple[int, int]],
                          copy_in: list[tuple[str, int]] | tuple[tuple[str, int], ...] = (),
                          loss_events: list[tuple[str, int]] | tuple[tuple[str, int], ...] = (),
                          loss_moment: int | None = None, loss_parallel: bool = False,
                          step: str | None = None) -> SideStreams:
    """The side-stream blocks of a fixed-shape training step (module docstring). ``moments``: (allocated bytes, the
    gradients part) of each moment of the peak stage's timeline. FSDP2 (``fsdp2``: fully_shard, gradients on the
    device): the units' reduce-scatter outputs, all alive from their reduce-scatter to ``zero_grad``; with gradient
    accumulation each later micro-batch's output is added into the kept shard and freed (``_local_tensor +=
    new_sharded_grad``, _fsdp_collectives.py line 748), one unit's more at a time. The gradients part of a moment is
    in those blocks, except under pipeline parallelism, where the stage's unsharded fp32 accumulators (default
    stream) are the gradients until the step's one reduce-scatter (formulas/parallelism.py eq. PP2).
    ``copy_in``: the all-gather copy-in stream's allocations and frees (formulas/fsdp2_units.py ``copy_in_events``)
    when the units' layout is traced; none of its blocks is alive at a moment of the timeline. ``loss_events``: the
    eager loss's default-stream allocations and frees (formulas/loss_allocations.py eq. L1 or L1p), whose hole
    (eq. 4'') stands at ``loss_moment`` (the index of the loss backward in ``moments``), H(p) of eq. (R1);
    ``loss_parallel``: those events are eq. L1p's (torch's loss_parallel), else eq. L1's. ``step``: the step's key
    of ``FIXED_STEP_RESERVE`` (eq. R2) where the caller has a one-GPU step of a measured recomputation; kept only
    without FSDP2 (with side streams no run was measured)."""
    holes: tuple[int, ...] = ()
    if loss_events and loss_moment is not None:
        hole = stream_trace_hole_bytes(loss_events)
        holes = tuple(hole if k == loss_moment else 0 for k in range(len(moments))) if hole else ()
    if not fsdp2:
        return SideStreams((), tuple((a, 0) for a, _ in moments), "", holes=holes, loss_parallel=loss_parallel,
                           step=step if step in FIXED_STEP_RESERVE else None)
    outputs = fsdp2_reduce_scatter_outputs(layer_grads, grads, shards)
    if grad_accumulation > 1 and pp == 1 and outputs:
        outputs += (max(outputs),)
    side = tuple((a, 0 if pp > 1 else min(a, g)) for a, g in moments)
    what = "FSDP2 reduce-scatter outputs (the sharded gradients' storage, freed by zero_grad) on the reduce-scatter stream"
    copy_in_pool = stream_trace_pool_bytes(copy_in) if copy_in else 0
    if copy_in:
        what += (f" + the all-gather copy-in stream's flat inputs and outputs ({format_bytes(copy_in_pool)} cached, "
                 "eq. 4': formulas/fsdp2_units.py)")
    return SideStreams(outputs, side, what, copy_in_pool, holes, loss_parallel)


def apply_metric(items: list[Item], metric: str | None, phase: str, pytorch: bool = True,
                 kv_pool: bool = False, floor: int = 0, fixed: SideStreams | None = None, *,
                 device: str = "cuda", engine: str | None = None, concat: ConcatGrowth | None = None) -> Assumption:
    """Rewrite ``items`` (in place) to eq. (1), (2) or (3) for ``metric``; None keeps them. ``pytorch``: the engine
    allocates through PyTorch's caching allocator (False: llama.cpp's ggml buffers). ``kv_pool``: the KV cache is
    one pool allocated at start-up (vLLM, SGLang), so persistent; transformers' DynamicCache grows by torch.cat
    every step (transformers cache_utils.py DynamicLayer.update), so dynamic. ``floor``: bytes reserved before the
    step (module docstring), a lower bound on tensors + reserve. ``fixed``: the step has the same shapes every
    time (batch_shapes='fixed'): the reserve is eq. (R1) over these side streams, not the calibrated ratio.
    ``device``: 'cuda', 'metal' (the workload's ``gpu_runtime``) or 'cpu': what the default's words name (only a CUDA
    device holds a CUDA context, ``device_context``). ``engine``: the serving engine whose words the default's
    assumption says (``default_metric_text``). ``concat``: the KV cache grows by concatenation (transformers'
    DynamicCache, eq. C1'): under 'reserved' and 'nvidia-smi' its part of the reserve is eq. (G2) over eq. (G1) (``reserve_item``),
    not in the default's device total: the segments it leaves hold no live block, so the out-of-memory retry
    releases them (``ConcatGrowth``). Returns the assumption."""
    had_context = any(i.name == CONTEXT_ITEM and i.location == "device" for i in items)
    if check_metric(metric) is None:
        if had_context and pytorch and not kv_pool:  # the calibrated reserve (module docstring)
            at = next((n for n, i in enumerate(items) if i.location == "device" and i.name in ALLOCATOR_ITEMS), None)
            if at is not None:
                once = sum(i.bytes for i in items if i.location == "device" and i.name in PERSISTENT)
                tensors = tensor_bytes(items)
                rest = max(0, floor - tensors)
                item = (training_default_reserve(tensors - once, rest) if phase == TRAINING else
                        reserve_item(tensors - once, phase, pytorch, rest))
                items[at] = Item(items[at].name, item.bytes, "device", item.low, item.high, item.formula, item.source)
        return Assumption("metric", default_metric_text(device, engine, phase), True, METRIC_WHY)
    keep = [i for i in items if i.location != "device" or i.name not in NOT_TENSORS
            or (i.name == CONTEXT_ITEM and metric == "nvidia-smi")]
    if metric != "allocated" and had_context:  # a device run: add the reserve (before the context, if kept)
        at = next((n for n, i in enumerate(keep) if i.name == CONTEXT_ITEM), len(keep))
        persistent = PERSISTENT + (("kv_cache",) if kv_pool else ())
        dynamic = tensor_bytes(keep) - sum(i.bytes for i in keep if i.location == "device" and i.name in persistent)
        rest = max(0, floor - tensor_bytes(keep))
        item = reserve_item(dynamic, phase, pytorch, rest, None if kv_pool else concat)
        keep.insert(at, item if fixed is None or not pytorch else fixed_reserve_item(fixed, rest, item.high or 0,
                                                                                    dynamic))
    items[:] = keep
    return Assumption("metric", metric, False, METRIC_WHY)


def reserve_item(tensors: int, phase: str, pytorch: bool = True, floor: int = 0,
                 concat: ConcatGrowth | None = None) -> Item:
    """Eq. (2)'s reserve over ``tensors`` dynamic live bytes: dynamic x (rho - 1), low/expected/high; at least
    ``floor`` (segments kept from the model's initialisation, module docstring). ``concat``: the KV cache grows by
    concatenation: its share of the calibrated term is at least eq. (G1)'s low (low, expected) and its high
    (high), ``concat_reserve_item``."""
    if concat is not None and pytorch:
        return concat_reserve_item(tensors, phase, concat, floor)
    if not pytorch:
        return Item("allocator_reserve", 0, "device", 0, 0,
                    formula="llama.cpp allocates its ggml buffers once at full size: reserved = allocated",
                    source="ggml-backend buffers (ggml_backend_buft_alloc_buffer); no caching allocator")
    r = RESERVE[phase]
    lo, mid, hi = (max(floor, int(tensors * (x - 1))) for x in (r.low, r.expected, r.high))
    kept = (f"; at least {format_bytes(floor)}: the segments reserved while the model was built stay reserved (no "
            "empty_cache)") if floor and floor >= int(tensors * (r.low - 1)) else ""
    return Item("allocator_reserve", mid, "device", lo, hi,
                formula=f"{format_bytes(tensors)} dynamic (not weights or optimizer states) x (reserved/allocated "
                        f"{r.expected:g} - 1); range "
                        f"{r.low:g}-{r.high:g} over {len(r.rows)} measured {phase} runs ({', '.join(r.rows)}): "
                        "fragmentation from variable shapes at the high end; 512 B / 2 MiB / 20 MiB block "
                        "rounding (formulas/caching_allocator.py) included" + kept,
                source=f"{PAIRS_FILE}; PyTorch c10/cuda/CUDACachingAllocator.cpp (round_size, get_allocation_size)")


def training_default_reserve(dynamic: int, floor: int = 0) -> Item:
    """The default metric's training reserve over ``dynamic`` live bytes (not ``PERSISTENT``): 0 low and expected (no
    training ratio holds checkpointed and other runs alike: ``RESERVE``'s comment), high the high end of the item
    metric 'reserved' adds (``reserve_item`` under ``RESERVE[TRAINING]``, at least ``floor``):

        high = max(floor, dynamic x (rho_high - 1)),  rho_high = RESERVE[TRAINING].high                       (2h)

    the most any calibrating training run kept. Not the activations at the peak: with full recomputation they are a
    few hundred MB and every measured recomputed run kept more (validation/allocator_pairs.csv GP05, 07, 09, 17, 19,
    20, 23: 1.5-4.4 GB; tests/training/test_allocator_reserve_pairs.py)."""
    r = RESERVE[TRAINING]
    high = reserve_item(dynamic, TRAINING, True, floor).high or 0
    kept = (f"; at least {format_bytes(floor)}: the segments reserved while the model was built stay reserved (no "
            "empty_cache)") if floor and floor >= int(dynamic * (r.high - 1)) else ""
    return Item("allocator_reserve", 0, "device", 0, high,
                formula="reserved - allocated of a training step: none expected (no training ratio holds runs with "
                        "and without recomputation alike); high: the calibrated training reserve's high end (metric "
                        f"reserved), {format_bytes(dynamic)} dynamic (not weights or optimizer states) x "
                        f"(reserved/allocated {r.high:g} - 1), the most of {len(r.rows)} measured training runs "
                        f"({', '.join(r.rows)}): fragmentation from variable shapes" + kept,
                source=f"{PAIRS_FILE} (eq. 2h); PyTorch c10/cuda/CUDACachingAllocator.cpp (round_size, "
                       "get_allocation_size)")


def concat_reserve_item(tensors: int, phase: str, growth: ConcatGrowth, floor: int = 0) -> Item:
    """The reserve of a run whose KV cache grows by concatenation (module docstring):

        reserve = (dynamic - kv) x (rho - 1) + max(kv x (rho - 1), G1)                                   (G2)

    per bound (rho's low with eq. G1's low, expected with G1's low, high with G1's high). The calibrating runs
    (``RESERVE``: 32 new tokens each) grew their caches by concatenation too, so the calibrated share holds the
    reserve of a short growth; eq. (G1) is the mechanism's own floor and ceiling, which a long growth (many segment
    classes, eq. C1') passes. At least ``floor``."""
    r = RESERVE[phase]
    rest = max(0, tensors - growth.kv)
    c_lo, c_hi = concat_kv_reserve(growth)
    parts = [(int(rest * (x - 1)), max(int(growth.kv * (x - 1)), c)) for x, c in
             ((r.low, c_lo), (r.expected, c_lo), (r.high, c_hi))]
    lo, mid, hi = (max(floor, a + b) for a, b in parts)
    kept = (f"; at least {format_bytes(floor)}: the segments reserved while the model was built stay reserved (no "
            "empty_cache)") if floor and floor >= parts[0][0] + parts[0][1] else ""
    return Item("allocator_reserve", mid, "device", lo, hi,
                formula=f"{format_bytes(rest)} dynamic besides the KV cache x (reserved/allocated {r.expected:g} - 1) "
                        f"+ the KV cache's part, max({format_bytes(growth.kv)} x ({r.expected:g} - 1), eq. G1 "
                        f"{format_bytes(c_lo)}-{format_bytes(c_hi)}): {growth.what}, eq. C1' pool "
                        f"{format_bytes(growth.pool)} against {format_bytes(growth.kv)} of KV at the peak; low "
                        "counts the peak's activation blocks reused by the growth, high none (eq. G2); ratio range "
                        f"{r.low:g}-{r.high:g} over {len(r.rows)} measured {phase} runs ({', '.join(r.rows)})" + kept,
                source=f"{PAIRS_FILE}; formulas/caching_allocator.py eq. C1' (CUDACachingAllocator.cpp @ 001074d "
                       "get_allocation_size, get_free_block); transformers 5.24 cache_utils.py DynamicLayer.update "
                       "lines 136-137 (torch.cat)")


def fixed_reserve_item(side: SideStreams, floor: int = 0, high: int = 0, dynamic: int = 0) -> Item:
    """Eq. (R1) (formulas/caching_allocator.py): the reserve under fixed shapes, at least ``floor``. Low and expected
    are (R1), a lower bound (what it leaves out: module docstring), plus, for a one-GPU step whose recomputation was
    measured (``side.step``), eq. (R2)'s calibrated rest over the ``dynamic`` bytes (``FIXED_STEP_RESERVE``); high
    is ``high``, the calibrated variable-shape reserve's high end (the most any measured run kept), or that sum if
    it is more."""
    pool = stream_pool_bytes(side.requests) + side.copy_in_pool
    r1 = cross_stream_reserve(side.moments, pool, side.holes)
    ratio = FIXED_STEP_RESERVE.get(side.step or "")
    rest = (0, 0, 0) if ratio is None else tuple(int(dynamic * (x - 1)) for x in (ratio.low, ratio.expected,
                                                                                   ratio.high))
    lo, r, hi_r2 = (max(floor, r1 + x) for x in rest)
    what = (f"{side.what}: {len(side.requests)} blocks, {format_bytes(pool)} cached on their stream (eq. 4), of "
            "which the default stream cannot reuse what is not allocated at the peak") if side.requests else \
        "no side-stream blocks modelled for this layout"
    hole = max(side.holes, default=0)
    if hole:
        what += (f"; the eager loss's hole in the default stream's pool, {format_bytes(hole)} at the loss backward "
                 + ("(its [t, V / tp] requests under loss_parallel served from fresh memory at the top of the pool, "
                    "replayed in order: eq. 4'' of eq. L1p, formulas/loss_allocations.py)" if side.loss_parallel else
                    "(its [t, V] requests served from fresh memory at the top of the pool, replayed in order: eq. 4'' "
                    "of eq. L1, formulas/loss_allocations.py)"))
    if ratio is None:
        other = (("" if side.copy_in_pool else "all-gather copy-in buffers (fsdp2_units largest-two) and ")
                 + ("other " if hole else "") + "holes in the default stream's pool (a lower bound)")
    else:
        other = (f"+ the default stream's other holes, eq. R2: {format_bytes(dynamic)} dynamic (not weights or "
                 f"optimizer states) x (rho {ratio.expected:g} - 1), range {ratio.low:g}-{ratio.high:g} over "
                 f"{len(ratio.rows)} measured one-GPU steps ({ratio.phase.removeprefix('training fixed ')}: "
                 f"{', '.join(ratio.rows)}); not modelled: those holes' own sizes (calibrated, not replayed)")
    return Item("allocator_reserve", r, "device", lo, max(r, hi_r2, high),
                formula="batch_shapes=fixed: the same shapes every step, so each CUDA stream reuses its own cached "
                        f"blocks and reserved = the default stream's high-water mark + the side streams' pools "
                        f"(eq. R1); {what}; " + ("" if ratio is not None else "not modelled: ") + other
                        + "; high: the calibrated variable-shape reserve's high end",
                source=(f"{PAIRS_FILE} (eq. R2); " if ratio is not None else "")
                + "formulas/caching_allocator.py eqs. 4, R1 (CUDACachingAllocator.cpp @ 001074d lines 56-57, "
                       "get_free_block, free_block); torch 2.13 _fsdp_collectives.py foreach_reduce lines 611-616, "
                       "704-763" + ("; foreach_all_gather lines 336-356 (formulas/fsdp2_units.py)" if side.copy_in_pool
                                    else "")
                       + ("; torchtitan 9dec370 train.py lines 131-134, 303-308 (formulas/loss_allocations.py"
                          + ("; loss_parallel: torchtitan utils.py lines 196-201, torch 2.13 "
                             "distributed/tensor/parallel/loss.py lines 598-605)" if side.loss_parallel
                             else ")") if hole else ""))


# the items of a need that are not live tensors, whose own low..high the calibrated range adds (``calibrated_need``):
# the allocator's reserve and the CUDA context on a device, the process's runtime (host_runtime: the RSS of the
# imports; a CPU run's device is the host)
NOT_BANDED = NOT_TENSORS + ("host_runtime",)


def calibrated_need(items: list[Item] | tuple[Item, ...], kind: str, engine: str,
                    location: str = "device") -> dict[str, object] | None:
    """The calibrated range of the need at ``location`` (estimate/ranges.py), for the figure the estimate totals there
    (the default metric's device total; a CPU run's process RSS), eq. (C1):

        low  = T x band_low  + sum of the other items' low
        high = T x band_high + sum of the other items' high                                                (C1)

    T the live-tensor bytes (every item at ``location`` but ``NOT_BANDED``), band the measured / predicted of
    ``kind`` and ``engine``, fitted on live-tensor figures only (validation_cases ``BAND_FIGURES``: peak allocated,
    the tracker's peak tensors); the other items (``NOT_BANDED``: CUDA context, allocator reserve, process runtime)
    are not in those figures, so they add their own span (engines.py ``CUDA_CONTEXT*``, ``RESERVE``), not their
    expected value: the range then holds a run whose tensors are inside the band and whose other parts are inside
    their spans. None without a band. Under ``metric`` 'allocated' the other items are gone and (C1) is T x band.
    ``validate`` judges every measured whole-need figure (device total, process RSS) by this range
    (measure/compare.py), the one the CLI, API and plan print and the fit verdict's calibrated high end reads.
    ``coverage``: the band's own statement of the coverage it has (``ranges.Band.coverage``: target, in-sample,
    leave-one-setup-out, setups, rows, and a warning where leave-one-setup-out falls short of the target);
    ``coverage_target``, its former name for ``coverage.target``, is a deprecated alias kept for one release
    (docs/nomenclature.md)."""
    b = R.band_for(kind, engine)
    if b is None:
        return None
    here = [i for i in items if i.location == location]
    t = sum(i.bytes for i in here if i.name not in NOT_BANDED)
    other = [i.range for i in here if i.name in NOT_BANDED]
    return {"low": int(t * b.low) + sum(r[0] for r in other), "high": int(t * b.high) + sum(r[2] for r in other),
            "kind": kind, "engine": engine, "band_low": b.low, "band_high": b.high, "rows": b.rows,
            "setups": b.setups, "coverage": b.coverage(), "coverage_target": R.COVERAGE}
