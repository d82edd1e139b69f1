"""The reverse questions for training: the largest micro-batch, or sequence length, that fits a memory budget.

"Fits" is the one rule of estimate/verdict.py: the chosen end of the range within memory x (1 - headroom).

Per-device memory is non-decreasing in micro-batch and in sequence length (every activation term of
``formulas/training_activations.py`` grows with tokens; model states do not depend on them), so the largest
value that fits is found by bisection (estimate/search.py ``largest_true``).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from ...errors import InputError
from ...numbers import COUNT, DEVICE_MEMORY, TOKENS
from ...specs import ModelSpec, TrainingWorkload
from ...specs.workload import read_number
from ..device import workload_on_device
from ..framework import with_framework
from ..search import largest_true
from ..verdict import check_headroom, memory_budget
from .compose import _load, estimate_training, sharded_workload
from .setup import refuse_attention_kernel

LEVELS = {"low": 0, "expected": 1, "high": 2}


def _fits(spec: ModelSpec, w: TrainingWorkload, memory: int, level: int) -> bool:
    return estimate_training(spec, w).total("device")[level] <= memory


def _largest(spec: ModelSpec, w: TrainingWorkload, field: str, upper: int, memory: int, level: int,
             step: int = 1) -> int:
    """The largest multiple of ``step`` up to ``upper`` whose workload fits (0: none does; 0 itself is not asked)."""
    def fits(k: int) -> bool:
        changes: dict[str, Any] = {field: k * step}
        return _fits(spec, replace(w, **changes), memory, level)
    return largest_true(fits, 0, upper // step) * step


def _prepare(model: ModelSpec | str, memory: int | None, level: str,
             kwargs: dict[str, Any]) -> tuple[ModelSpec, TrainingWorkload, int, int]:
    """The model, the workload the question grows, the budget and the level. ``memory`` when given, else a named
    ``device``'s (estimate/device.py workload_on_device, the one resolver, as ``estimate_training(device=)`` and
    `train --device --max-batch` take it); a named device also decides where the step runs (a CPU: in RAM, no CUDA
    context; an Apple chip: Metal), as the estimate it answers for does."""
    if level not in LEVELS:
        raise InputError(f"level must be one of {', '.join(LEVELS)}, got {level!r}")
    if memory is not None:  # "24GiB" or 24 from Python: one line naming the field, as the estimate's own check
        memory = int(read_number(memory, "memory", DEVICE_MEMORY))
    device = None
    if kwargs.get("device") is not None:
        kwargs, device, _, _ = workload_on_device({**kwargs, "memory": memory}, "estimate_training")
        memory = kwargs.get("memory")
    if memory is None:
        raise InputError("a memory budget is needed: memory=... in bytes or a device=... of known memory (on the "
                         "command line --memory 80GiB or --device NAME)")
    kwargs.pop("memory", None)
    headroom = kwargs.pop("headroom", None)
    budget = memory_budget(memory, check_headroom(headroom))
    spec = _load(model)
    # the ZeRO stage estimate_training takes on this memory (compose.py sharded_workload, the one rule), then
    # held while the micro-batch or sequence grows (what `train --max-batch` does with the stage it reports)
    # the framework profile's defaults first (estimate/framework.py), as estimate_training applies them
    spec, given = with_framework(spec, TrainingWorkload(**kwargs, memory=memory, headroom=headroom))
    if device is not None:  # an attention kernel the device cannot run (as estimate_training(device=) refuses it)
        refuse_attention_kernel(spec, given, device)
    w = sharded_workload(spec, given)
    return spec, replace(w, memory=None, headroom=None), budget, LEVELS[level]


def max_micro_batch(model: ModelSpec | str, memory: int | None = None, *, level: str = "expected",
                    **kwargs: Any) -> int:
    """Largest micro-batch (sequences per device per forward) of ``seq_len`` tokens that fits ``memory`` bytes
    per device (less the headroom; None: the memory of ``device=``, a catalog device or instance, as `train --device
    --max-batch`); 0 if even one sequence does not fit.

    >>> max_micro_batch("qwen2.5-0.5b", 80 * 2**30, seq_len=2048) > 1
    True
    """
    spec, w, mem, lv = _prepare(model, memory, level, kwargs)
    return _largest(spec, w, "micro_batch", int(COUNT.high), mem, lv)  # the largest --batch takes: no search ceiling


def max_seq_len(model: ModelSpec | str, memory: int | None = None, *, level: str = "expected",
                **kwargs: Any) -> int:
    """Longest sequence (tokens) at ``micro_batch`` sequences that fits ``memory`` bytes per device (None: the memory
    of ``device=``, as `train --device --max-seq`); 0 if none."""
    spec, w, mem, lv = _prepare(model, memory, level, kwargs)
    # the largest any input may state (no search ceiling), in whole steps of the 2 x cp chunks context parallelism
    # splits a sequence into (specs/training.py: any other length is refused)
    step = seq_len_step(w.context_parallel)
    return _largest(spec, w, "seq_len", int(TOKENS.high), mem, lv, step)


def seq_len_step(context_parallel: int) -> int:
    """The step (and shortest length) of :func:`max_seq_len`'s search: 2 x cp under context parallelism, else 1."""
    return 2 * context_parallel if context_parallel > 1 else 1


def reverse_notes(spec: ModelSpec, reverse: dict[str, int]) -> list[str]:
    """What the reverse answers ``reverse`` (``max_micro_batch``, ``max_seq_len``) mean beyond their number: the one
    home of these notes, which `train` prints and its ``--json`` (and so the web API) carries as ``reverse_notes``
    (the inference questions' are estimate/inference/reverse.py ``reverse_notes``)."""
    notes = []
    seq = reverse.get("max_seq_len")
    window = spec.max_position_embeddings
    if seq and window and seq > window:
        notes.append(f"the longest sequence that fits ({seq:,} tokens) is past the model's max_position_embeddings "
                     f"({window:,}): memory allows it, the model was not trained for it")
    return notes
