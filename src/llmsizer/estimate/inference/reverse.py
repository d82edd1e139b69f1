"""The reverse questions: the largest context, or concurrency, that fits a memory budget.

Memory is non-decreasing in context and in concurrency (every term of ``inference.estimate_inference``
is), so the largest value that fits is found by bisection over whole tokens / sequences (estimate/search.py
``largest_true``). "Fits" is the estimate's own verdict (estimate/verdict.py: memory x (1 - headroom), or what
vLLM's KV pool admits).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from ...errors import InputError
from ...models import spec_of
from ...numbers import CONCURRENCY, DEVICE_MEMORY, TOKENS
from ...result import Estimate
from ...specs import InferenceWorkload, ModelSpec
from ...specs.workload import ENGINE_NAMES, read_number
from ..context_window import engine_window
from ..search import largest_true
from ..verdict import binding_pool
from . import estimate_inference
from .compose import inference_workload


def _fits(spec: ModelSpec, w: InferenceWorkload, level: int, all_run: bool = False) -> bool:
    """The verdict of estimate/verdict.py at the chosen end of the range (vLLM: what its pool admits); ``all_run``:
    and every sequence runs at once (none waits in the engine's queue above its cap: common.py eq. R1)."""
    est = estimate_inference(spec, w)
    if all_run and int(est.details.get("running_sequences", w.concurrency)) < w.concurrency:
        return False
    if w.engine == "vllm" or level == 1:
        return bool(est.details["fits"])
    loc = "host" if w.device == "cpu" else "device"
    return est.total(loc)[level] <= int(est.details["memory_budget"])  # type: ignore[arg-type]


def _largest(spec: ModelSpec, w: InferenceWorkload, field: str, upper: int, level: int, lowest: int = 1) -> int:
    """Largest value in [lowest, upper] that fits, or 0 when ``lowest`` itself does not (asked first)."""
    def fits(k: int) -> bool:
        changes: dict[str, Any] = {field: k}
        return _fits(spec, replace(w, **changes), level, field == "concurrency")
    return largest_true(fits, lowest, upper) if fits(lowest) else 0


def _prepare(model: ModelSpec | str, memory: int | None, kwargs: dict[str, Any]) -> tuple[ModelSpec, InferenceWorkload]:
    """The model and the workload the reverse question grows: ``memory`` when given, else a named ``device``'s
    (estimate/device.py workload_on_device, as `infer --device ... --max-context` takes it), with the engine the
    estimate would choose there."""
    fields = dict(kwargs)
    if memory is not None:
        fields["memory"] = int(read_number(memory, "memory", DEVICE_MEMORY))  # "24GiB" from Python: one line, not a TypeError
    elif fields.get("device") in (None, "gpu", "cpu"):
        raise InputError("a memory budget is needed: memory=... in bytes or a device=... of known memory (on the "
                         "command line --memory 24GiB or --device NAME)")
    spec = spec_of(model)
    w = inference_workload(fields, "estimate_inference", spec)[0]
    if w.memory is None:
        raise InputError(f"{fields.get('device')} has no sourced memory size: give memory=... (--memory 64GiB)")
    return spec, w


def max_context(model: ModelSpec | str, memory: int | None = None, *, level: str = "expected", **kwargs: Any) -> int:
    """Largest context (tokens per sequence) that fits ``memory`` bytes (None: the memory of ``device=``, a catalog
    device or instance, as ``infer --device --max-context``); 0 if even the shortest context does not.

    The shortest context is the stated output tokens (a context holds its output: specs/workload.py), at least 1.
    ``level`` picks which end of the range must fit: 'low', 'expected' or 'high'.
    """
    spec, w = _prepare(model, memory, kwargs)
    # the search runs up to the largest context any input may state (numbers.TOKENS), so the answer is the memory's
    # limit, never a search ceiling; past max_position_embeddings the CLI says so. A pool engine refuses a context
    # past the model's window (estimate/context_window.py, the estimate's verdict): the search stops there, unless
    # its override is assumed (allow_long_context)
    lowest = max(1, w.output_tokens or 0)
    upper = int(TOKENS.high)
    window = engine_window(spec, str(w.engine))
    if window is not None and not w.allow_long_context:
        if window.tokens < lowest:
            return 0
        upper = window.tokens
    return _largest(spec, w, "context", max(upper, lowest), _level(level), lowest)


def max_concurrency(model: ModelSpec | str, memory: int | None = None, *, level: str = "expected",
                    **kwargs: Any) -> int:
    """Largest number of concurrent sequences of ``context`` tokens that fits ``memory`` bytes (None: the memory of
    ``device=``, as ``infer --device --max-concurrency``) and runs at once: above vLLM's max_num_seqs or SGLang's
    max_running_requests more requests fit only as a queue (estimate/inference/common.py eq. R1)."""
    spec, w = _prepare(model, memory, kwargs)
    return _largest(spec, w, "concurrency", int(CONCURRENCY.high), _level(level))


def _allowed(est: Estimate) -> bool:
    """Whether the estimate assumed the engine's override of the model's window (allow_long_context)."""
    return any(a.name == "allow_long_context" and a.value for a in est.assumptions)


def _level(level: str) -> int:
    levels = {"low": 0, "expected": 1, "high": 2}
    if level not in levels:
        raise InputError(f"level must be one of {', '.join(levels)}, got {level!r}")
    return levels[level]


def reverse_notes(spec: ModelSpec, est: Estimate, reverse: dict[str, int]) -> list[str]:
    """What the reverse answers ``reverse`` (``max_context``, ``max_concurrency``) mean beyond their number, for
    ``est``, the estimate of the workload they were asked for: the one home of these notes, which `infer` prints
    and its ``--json`` (and so the web API) carries as ``reverse_notes``."""
    notes = []
    context = reverse.get("max_context")
    media = est.details.get("media_tokens")
    if context and media:  # media.py: the images' / video's tokens sit in every sequence beside the text
        kinds = " and ".join(k for k, key in (("image", "image_tokens_each"), ("video", "video_tokens"))
                             if key in est.details)
        notes.append(f"the largest context that fits counts text tokens: each sequence also holds {int(media):,} "
                     f"{kinds} tokens, {context + int(media):,} tokens in all (estimate/inference/media.py)")
    if context:
        if context >= TOKENS.high:  # the search's upper end (the largest context an input may state), not memory's
            notes.append(f"the largest context that fits ({context:,} tokens) is the largest context an input may "
                         f"state ({int(TOKENS.high):,}, numbers.TOKENS): memory would allow more")
        refused = est.details.get("context_window")
        if isinstance(refused, dict) and context == refused["tokens"] and not _allowed(est):
            notes.append(f"the largest context that fits ({context:,} tokens) is the model's window, "
                         f"{ENGINE_NAMES[str(refused['engine'])]}'s derived {refused['setting']} "
                         f"({refused['derivation']}): the engine refuses a longer one unless {refused['override']} is "
                         "set (--allow-long-context)")
        window = spec.max_position_embeddings
        if window and context > window:
            notes.append(f"the largest context that fits ({context:,} tokens) is past the model's "
                         f"max_position_embeddings ({window:,}): memory allows it, the model was not trained for it")
    refusal = est.details.get("engine_refusal_reason")
    if refusal is not None and reverse.get("max_concurrency") == 0:  # the engine's refusal, not memory, says no
        notes.append(f"no concurrency runs at this context, whatever the memory: {refusal}")
    no_pool = est.details.get("sglang_too_small") or est.details.get("sglang_no_pool") or est.details.get("vllm_no_pool")
    if no_pool and reverse.get("max_concurrency") == 0:  # no pool: not a running cap of 0 (sglang.py eq. 4, vllm.py)
        notes.append(f"no concurrency runs on this memory: {no_pool}")
    d = est.details
    if binding_pool(d) is not None and reverse.get("max_concurrency") == d.get("max_concurrency_at_context"):
        notes.append(f"the largest concurrency that fits ({reverse['max_concurrency']:,}) is what SGLang's MambaPool "
                     f"admits: max_mamba_cache_size {d['max_mamba_cache_size']:,} // {d['mamba_requests_ratio']} state "
                     "slots per running request (estimate/inference/sglang.py eq. 4b), fewer than its token pool's "
                     f"{d['token_pool_room']:,}; a larger --mamba-full-memory-ratio or --max-mamba-cache-size, more "
                     "memory or a smaller weight format raises it")
    cap = est.details.get("running_cap")
    if cap and reverse.get("max_concurrency") == cap:
        notes.append(f"the largest concurrency that fits ({cap:,}) is the engine's {est.details.get('running_cap_name')}"
                     ", the sequences it runs at once; more requests wait in its queue (--max-num-seqs / "
                     "--max-running-requests raises it)")
    return notes
