"""llama.cpp auto-fit: the context, ``-ngl``, ``--tensor-split`` and ``--n-cpu-moe`` that fit each GPU's free memory
with a stated margin, printed as the exact llama.cpp flags.

It follows the order of llama.cpp's own ``--fit`` (common/fit.cpp ``common_params_fit_impl``, llama.cpp
ggml-org/llama.cpp@0c1e57098 as vendored by llama-cpp-python 0.3.36; the defaults are in common/common.h:478-483;
``--fit`` gives up when the user set ``-ngl`` (common/fit.cpp:464) or asked for ``-sm row`` (:477-478), so
the flags printed end with ``-fit off``):

1. Projected use (common/fit.cpp:261-371) with the defaults (every layer offloaded, split by free memory) against ``free - margin`` on
   each device; nothing changes when it fits. The margin is ``--fit-target``, 1024 MiB per device by default
   (common/common.h:483); it is the margin of every llama.cpp verdict on a GPU (estimate/verdict.py ``margin_rule``,
   eq. 1'), so ``fit`` of the flags printed gives the same verdict; a headroom given instead keeps that share of
   each GPU's free memory, as ``fit --headroom`` does. The context, when not given, starts at the model's training
   context (n_ctx_train).
2. (common/fit.cpp:373-460) Reduce the context, when it was not given, down to at least ``--fit-ctx`` 4096 (common/common.h:480), aligned
   to 256 tokens ("round down context for CUDA backend"). llama.cpp interpolates linearly between two
   measurements; memory is linear in the context here, so the largest aligned context that fits is solved for.
3. (common/fit.cpp:488-733) Fill the GPUs back to front with whole layers, the last GPU taking the output layer ("the last device has the
   output layer, which cannot be a partial layer"): each GPU gets as many of the remaining last layers as fit
   its target; the per-GPU layer counts become ``--tensor-split`` (fit.cpp ``set_ngl_tensor_split_tbo`` writes
   tensor_split[id] = n_layer, :556) and their sum ``-ngl``.
4. (common/fit.cpp:615-650, 735-) For a MoE model, layers are first filled with their expert tensors in host memory ("dense-only" layers);
   when all of them fit, experts are brought back onto the GPUs until they are full.

One difference, stated with every answer: llama.cpp moves the experts of the *last* layers of each GPU to the CPU
through ``-ot`` buffer overrides; this fit expresses the result as ``--n-cpu-moe N`` (the experts of the *first*
N layers, common/arg.cpp:2766-2775), the flag users type, which needs the same memory when the layers are alike.
Every candidate is sized by ``estimate_inference`` (the one composition core), so the answer is what ``infer``
reports for the same flags.
"""

from __future__ import annotations

import warnings as _warnings
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from types import SimpleNamespace
from typing import Any

from ..catalog.hardware import Device
from ..errors import InputError
from ..models import spec_of
from ..numbers import DEVICE_MEMORY, MAX_GPUS
from ..result import SCHEMA_VERSION, Assumption, Estimate, json_data, merged_assumptions
from ..specs import ModelSpec
from ..specs.workload import check_fit_target, read_number
from ..units import comma_values, format_bytes
from .device import apple_host_memory, gpu_runtime, host_holds_weights, is_own_host, says_apple_own_host, usable_memory
from .inference import estimate_inference
from .search import largest_true, smallest_true
from .verdict import (
    HOST_FIT_TARGET,
    LLAMACPP_FIT_TARGET,
    Margin,
    host_fit_target_assumption,
    host_memory_verdict,
    margin_rule,
    memory_verdict,
    unchecked_host_verdict,
)

FIT_TARGET = LLAMACPP_FIT_TARGET  # common/common.h:483: fit_params_target, 1024 MiB per device (estimate/verdict.py)
FIT_MIN_CTX = 4096  # common/common.h:480: fit_params_min_ctx
CTX_ALIGN = 256  # common/fit.cpp: "round down context for CUDA backend" (align = 256 x n_streams)
FIT_SOURCE = "llama.cpp common/fit.cpp common_params_fit_impl (ggml-org/llama.cpp@0c1e57098)"


@dataclass(frozen=True)
class LlamaCppFit:
    """The flags that fit, the memory each device then holds, and the steps taken."""

    model: str
    free: tuple[int, ...]  # free memory per GPU [bytes]
    margins: tuple[int, ...]  # bytes kept free on each GPU (--fit-target, or the headroom's share of its free memory)
    context: int
    n_gpu_layers: int
    n_layer: int
    tensor_split: tuple[int, ...]  # layers per GPU (empty on one GPU)
    n_cpu_moe: int
    fits: bool
    estimate: Estimate
    steps: tuple[str, ...]
    assumptions: tuple[Assumption, ...] = ()
    warnings: tuple[str, ...] = ()
    host_memory: int | None = None
    details: dict[str, Any] = field(default_factory=dict)
    # the default format does not fit: the best rung of llama.cpp's ladder whose auto-fit does (``auto_fits_at``)
    fits_at: dict[str, Any] | None = None
    # the decode of the printed flags as ``fit`` with them times it (``with_speed``); None: not timed
    speed: dict[str, Any] | None = None

    @property
    def margin(self) -> int:
        """Deprecated (since the one llama.cpp margin rule, dc1227b3): the one margin every GPU keeps [bytes], the
        former field's meaning; read ``margins`` (one per GPU). Margins that differ by GPU (a headroom share of
        unequal free memory, which the former field could not hold) have no one number: refused."""
        _warnings.warn("LlamaCppFit.margin is deprecated: read LlamaCppFit.margins, the margin of each GPU",
                       DeprecationWarning, stacklevel=2)
        if len(set(self.margins)) != 1:
            raise InputError("LlamaCppFit.margin: the GPUs keep different margins "
                             f"({', '.join(map(str, self.margins))} bytes); read LlamaCppFit.margins")
        return self.margins[0]

    @property
    def full_offload(self) -> bool:
        return self.n_gpu_layers >= self.n_layer + 1

    def flags(self) -> list[str]:
        """The llama.cpp arguments (llama-server / llama-cli), ``-fit off`` so llama.cpp keeps them as given."""
        concurrency = int(self.details.get("concurrency", 1))
        # -c is the KV cells of all slots together; -np N gives each of N slots -c / N (llama-server)
        out = ["-c", str(self.context * concurrency), "-ngl", str(self.n_gpu_layers)]
        # several GPUs and a layer on them: the split. With -ngl 0 nothing is split, and an all-zero -ts would mean
        # llama.cpp's default split by free memory (src/llama-model.cpp load_tensors, "calculate the split points")
        if len(self.free) > 1 and self.n_gpu_layers > 0:
            out += ["-sm", "layer", "-ts", ",".join(map(str, self.tensor_split))]
        if self.n_cpu_moe:
            out += ["--n-cpu-moe", str(self.n_cpu_moe)]
        if concurrency > 1:
            # -np N alone keeps one KV stream per sequence (common/common.h:575); the unified layout sized needs -kvu
            out += ["-np", str(concurrency)] + (["-kvu"] if self.details.get("kv_unified") else [])
        return out + ["-fit", "off"]

    def flag_fields(self) -> dict[str, Any]:
        """The workload fields of ``flags()`` (-c per sequence, -ngl, -sm/-ts, --n-cpu-moe): what ``fit`` with the
        printed flags is given (``with_speed``); -np and -kvu are the workload's own concurrency and kv_unified."""
        out: dict[str, Any] = {"context": self.context, "n_gpu_layers": self.n_gpu_layers}
        if len(self.free) > 1 and self.n_gpu_layers > 0:
            out.update(split_mode="layer", tensor_split=tuple(float(c) for c in self.tensor_split))
        if self.n_cpu_moe:
            out["n_cpu_moe"] = self.n_cpu_moe
        return out

    def devices(self) -> list[dict[str, Any]]:
        rows = []
        for dev in self.estimate.details["split"]["devices"]:
            row = dict(dev)
            if dev["device"] != "host":
                i = int(dev["device"][3:])
                row["free"], row["target"] = self.free[i], self.free[i] - self.margins[i]
                row["left"] = self.free[i] - dev["total"]
            elif self.host_memory is not None:
                row["free"], row["target"] = self.host_memory, self.host_memory - HOST_FIT_TARGET
                row["left"] = self.host_memory - dev["total"]
            rows.append(row)
        return rows

    @property
    def all_assumptions(self) -> tuple[Assumption, ...]:
        """The auto-fit's own assumptions (its margins, the context searched), then its estimate's (the weights,
        kv_dtype, concurrency... each default named), each name once, as ``FitResult.all_assumptions``."""
        return merged_assumptions(self.assumptions, self.estimate.assumptions)

    def to_dict(self) -> dict[str, Any]:
        return json_data({"schema_version": SCHEMA_VERSION, "kind": "llamacpp-fit", "model": self.model, "fits": self.fits,
                "full_offload": self.full_offload, "flags": self.flags(), "command": " ".join(self.flags()),
                "context": self.context, "n_gpu_layers": self.n_gpu_layers, "tensor_split": list(self.tensor_split),
                "n_cpu_moe": self.n_cpu_moe, "margin": list(self.margins), "free": list(self.free),
                "host_memory": self.host_memory, "devices": self.devices(), "steps": list(self.steps),
                "assumptions": [a.to_dict() for a in self.assumptions], "warnings": list(self.warnings),
                "memory": self.estimate.to_dict(), "details": self.details, "fits_at": self.fits_at,
                "speed": self.speed})

    def __str__(self) -> str:
        from ..render.fit_text import render_llamacpp_fit
        return render_llamacpp_fit(self)


def check_gpu_count(gpus: int) -> None:
    """Refuse an auto-fit over more GPUs than llama.cpp's ``-ts`` names: the flags give one share per GPU, and
    common/arg.cpp refuses llama_max_devices() = MAX_GPUS + 1 shares or more (numbers.py MAX_GPUS). The one check of
    ``gpu_free`` (the command line's and the web's count) and ``fit_llamacpp``'s list of free sizes."""
    if gpus > MAX_GPUS:
        raise InputError(f"llama.cpp's -ts names at most {MAX_GPUS} GPUs (common/arg.cpp refuses "
                         f"llama_max_devices() = {MAX_GPUS + 1} shares or more; numbers.py MAX_GPUS), and the "
                         f"auto-fit gives one per GPU, not {gpus}: give machines of at most {MAX_GPUS} GPUs "
                         "(--gpus-per-node, --count)")


def gpu_free(device: Device, count: int, free: Sequence[int] | None = None, memory: int | None = None) -> list[int]:
    """The free memory of each GPU the auto-fit fills [bytes]: ``free`` as given (one per GPU), else the device's
    memory on each of ``count`` GPUs. The device's memory is ``memory`` when given, else the catalog's; a GPU cannot
    have more free than it has, so a larger ``free`` is refused: a typo, or a larger card than the one named (with
    mixed cards the device named is the largest, whose memory bounds them all)."""
    check_gpu_count(len(free) if free else count)
    usable, _ = usable_memory(device, memory, record=False)
    if not free:
        if usable is None:
            raise InputError(f"{device.id} has no sourced memory size; give --free (e.g. 22GiB) or --memory")
        return [usable] * count
    if usable is not None:
        for i, f in enumerate(free):
            if f > usable:
                raise InputError(f"free memory of GPU{i} ({format_bytes(f)}) is more than the {format_bytes(usable)} "
                                 f"{device.id} has" + ("" if memory is not None else
                                                       "; with mixed cards name the largest (--device)"))
    return list(free)


def copies_note(count: int, gpus: int, copies: int, per_copy: int, concurrency: int,
                apart: str | None = None) -> Assumption:
    """What ``fit --auto`` on GPUs of several machines says of its answer: one copy's, over one machine's ``gpus``
    (estimate/fit.py ``llamacpp_copy``, the layout fit sizes), at its share ``per_copy`` of ``concurrency``; the
    ``copies`` machines run the same flags, each a replica (llama.cpp reaches another machine's GPUs only through its
    RPC backend, specs/training.py ``llamacpp_split_gpus``). ``apart``: why each device is a replica of its own
    (estimate/device.py ``llamacpp_split_apart_why``: MIG devices, Apple chips), said in place of machines."""
    if apart is not None:
        return Assumption("llamacpp_split", f"{copies} replicas of 1 device", True,
                          f"{apart}: the {count} devices are {copies} replicas, each running these flags at its "
                          f"{per_copy} of the {concurrency} sequences; this auto-fit is one copy's")
    return Assumption("llamacpp_split", f"{copies} machines of {gpus} GPU{'s' if gpus > 1 else ''}", True,
                      f"llama.cpp holds one copy of the model within one machine (specs/training.py "
                      f"llamacpp_split_gpus): the {count} GPUs are {copies} machines of {gpus} GPU"
                      f"{'s' if gpus > 1 else ''}, each a replica running these flags at its {per_copy} of the "
                      f"{concurrency} sequences; this auto-fit is one copy's")


def unequal_free_note(free: Sequence[int]) -> str:
    """What ``fit --auto`` on GPUs of unequal free memory says of the plain ``fit`` of its flags: the auto-fit checks
    each GPU against its own free memory (common/fit.cpp: targets = free - margins, per device), while ``fit`` takes
    one memory for every GPU (inference/compose.py ``_check_fit``'s split rule: ``--memory``, else the device's), so
    the two verdicts and headrooms differ; the plain fit's reason says the one memory it took (``ONE_MEMORY_SAID``)."""
    return (f"the GPUs' free memory differs ({', '.join(format_bytes(f) for f in free)}): this verdict checks each "
            "GPU against its own; `fit` with these flags takes one memory for every GPU (--memory, else the "
            "device's), so its verdict and headroom are the fullest GPU's against that one memory, not these")


def free_sizes(free: object) -> list[Any]:
    """The free memory of each GPU as ``fit_llamacpp`` takes it: text split as ``--free`` splits it (one size per
    GPU, units.comma_values), a single number or size as one GPU, a list as it is; each item is read (bytes or a
    size as '24GiB') where the auto-fit reads it. Anything else: one line."""
    if isinstance(free, str):
        return list(comma_values(free, what="free", most=MAX_GPUS))
    if isinstance(free, (int, float)) and not isinstance(free, bool):
        return [free]
    if isinstance(free, (list, tuple)):
        check_gpu_count(len(free))
        return list(free)
    raise InputError(f"free: expected the free memory of each GPU, e.g. ['22GiB', '10GiB'] or '22GiB,10GiB' (the "
                     f"command line's --free), got {type(free).__name__}")


def fit_llamacpp(model: ModelSpec | str, free: Sequence[int | str] | str | int | None = None, *, fit_target: int | None = None,
                 headroom: float | None = None, context: int | None = None, min_context: int = FIT_MIN_CTX,
                 host_memory: int | None = None, fits_at: bool = True, device: str | Device | None = None,
                 host_device: str | Device | None = None, hardware_files: Sequence[str] = (),
                 memory: int | str | None = None, **workload: Any) -> LlamaCppFit:
    """Auto-fit llama.cpp on GPUs with ``free`` bytes each (module docstring, steps 1-4), each keeping the margin of
    every llama.cpp verdict (estimate/verdict.py ``margin_rule``): ``fit_target`` bytes, or a ``headroom`` share of its
    free memory; neither: llama.cpp's --fit-target default. ``context`` None: the largest that fits, from the model's
    training context down to ``min_context``; given: kept. When the default format (no ``weights``) does not fit,
    ``LlamaCppFit.fits_at`` names the format that does (``auto_fits_at``; ``fits_at`` False: not searched).
    ``device`` (the GPUs' catalog id or Device; ``host_device``: the host CPU): the decode speed of the printed flags
    as ``fit`` times them (:func:`with_speed`), so ``fit --auto``, the web and Python give one answer; None: memory
    only (``speed`` None). ``free``: a list of sizes (bytes, or text as '24GiB'), or text read as ``fit --auto
    --free`` reads it ('24GiB,12GiB': one size per GPU, :func:`free_sizes`). On an Apple chip (Metal, one device)
    ``free`` is its working set (``usable_memory``), the memory estimated is Metal's (no CUDA context), and the host
    memory is the unified memory (``memory``, else the catalog's) outside it (``apple_host_memory``). ``free`` None
    with a ``device``: its memory (``memory``, else the catalog's) on each GPU of one llama.cpp copy, as ``fit --auto``
    without --free fills it (:func:`device_free`)."""
    free = free_sizes(free) if free is not None else device_free(device, hardware_files, memory)
    apple_note = None
    dev = _named_device(device, hardware_files)
    if dev is not None and dev.kind == "apple":
        if len(free) != 1:
            raise InputError(f"{dev.id} is one Metal device: give one free memory, not {len(free)}")
        if host_memory is not None:
            raise InputError(f"host_memory is the host RAM beside GPUs; on {dev.id} (apple) the CPU part shares the "
                             "unified memory: give that instead (--memory; memory= in Python)")
        workload["gpu_runtime"] = gpu_runtime(dev)
        host_memory, apple_note = apple_host_memory(dev, memory)
    r = _auto_fit(model, free, fit_target=fit_target, headroom=headroom, context=context, min_context=min_context,
                  host_memory=host_memory, **workload)
    if not (r.fits or not fits_at or workload.get("weights") is not None):
        timing = (device, host_device, hardware_files) if device is not None else None
        r = replace(r, fits_at=auto_fits_at(model, free, fit_target=fit_target, headroom=headroom, context=context,
                                            min_context=min_context, host_memory=host_memory, timing=timing,
                                            **workload))
    if apple_note is not None:
        r = replace(r, assumptions=(*r.assumptions, apple_note))
    if device is None:
        return r
    if memory is None and dev is not None and dev.kind != "apple" and usable_memory(dev, None, record=False)[0] is None:
        # a GPU of no sourced memory with --free only: the free memory given is all that is known of it, the memory
        # the printed flags are timed on (fit refuses a device it has no memory for)
        memory = max(free)
    return with_speed(r, model, device, len(free), host_device=host_device, hardware_files=hardware_files,
                      memory=memory, **workload)


def device_free(device: str | Device | None, hardware_files: Sequence[str] = (),
                memory: int | str | None = None) -> list[int]:
    """The free memory of each GPU llama.cpp's auto-fit fills when none is given: ``device``'s memory (``memory``,
    else the catalog's; an Apple chip's working set) on each GPU of one copy (estimate/fit.py ``llamacpp_copy``: an
    instance's GPUs of one machine), the rule ``fit --auto`` without --free (cli/fit_cmd.py) and the web's /fit
    apply, so Python needs no ``free`` either. No device: one line asking for either."""
    if device is None:
        raise InputError("free: expected the free memory of each GPU, e.g. ['22GiB', '10GiB'] or '22GiB,10GiB' (the "
                         "command line's --free), or device= to take the device's memory")
    from .fit import llamacpp_copy, target_and_count  # (fit.py reads this module's results: imported when asked)

    dev, count, _, instance = target_and_count(device, None, hardware_files, instances=True)
    gpus, _ = llamacpp_copy(dev, count, instance)
    mem = int(read_number(memory, "memory", DEVICE_MEMORY)) if memory is not None else None
    return gpu_free(dev, gpus, None, mem)


def _named_device(device: str | Device | None, hardware_files: Sequence[str]) -> Device | None:
    """``device`` as a catalog Device (a hardware file's too); None when not given or not one device."""
    if device is None or isinstance(device, Device):
        return device
    from ..catalog.hardware import load_catalog

    found = load_catalog(hardware_files).find(device)
    return found if isinstance(found, Device) else None


def auto_fits_at(model: ModelSpec | str, free: Sequence[int], *,
                 timing: tuple[str | Device, str | Device | None, Sequence[str]] | None = None,
                 **kwargs: Any) -> dict[str, Any] | None:
    """The best rung of llama.cpp's format ladder (estimate/formats.py ``format_ladder``, best first) whose auto-fit
    (``fit_llamacpp`` with ``kwargs``) fits, as fit's ``fits_at`` names a format (format_search.py ``fits_at``): the
    weights, the flags and the memory of the fullest GPU and of the host; None when no rung fits (a GPU too small
    for even the CUDA context and compute buffer, or host RAM too small for the smallest format's CPU share).
    ``timing`` (the GPUs' device, the host CPU, hardware files): each fitting rung is timed as ``fit`` times its
    printed flags (:func:`with_speed`) and the first that also meets recommend's reading-speed floor is named
    (format_search.py ``reading_floor_applies`` / ``latency_failures``, the rule recommend and ``models --fits-on``
    apply); none meeting it, the best rung that fits, its speed stated (``meets_reading_speed`` False). A rung whose
    speed is unknown (layers or experts on a host CPU not named) is named unchecked (None), as recommend judges a
    device of no sourced bandwidth on memory only (format_search.py ``reading_floor_unchecked``)."""
    from .format_search import READING_FLOOR, LatencyLimits, PassedOver, latency_failures, reading_floor_applies
    from .formats import format_ladder, weights_asked

    spec = spec_of(model)
    limits = LatencyLimits()
    if timing is not None and reading_floor_applies(limits, kwargs.get("output_tokens")):
        limits = LatencyLimits(user_tokens_per_second=READING_FLOOR)
    first: dict[str, Any] | None = None
    first_bad: list[str] = []
    for fmt in format_ladder(spec, "llamacpp", None):
        r = fit_llamacpp(spec, free, fits_at=False, **{**kwargs, "weights": weights_asked(fmt)})
        if not r.fits:
            continue
        rows = r.devices()
        fullest = max((d for d in rows if d["device"] != "host"), key=lambda d: d["total"])
        at: dict[str, Any] = {"weights": fmt, "engine": "llamacpp", "same_engine": True, "flags": r.flags(),
                              "memory_per_device": fullest["total"], "budget_per_device": fullest["target"],
                              "host_bytes": sum(d["total"] for d in rows if d["device"] == "host")}
        if timing is None:
            return at
        device, host_device, files = timing
        if (host_device is None and host_holds_weights(r.estimate.details["split"])
                and not is_own_host(_named_device(device, files))):
            # layers or experts on a host CPU not named: fit's speed is None (fit.py _split_speed), so the rung is
            # named unchecked without timing it (the same answer, a full fit less per call)
            at.update(decode_tokens_per_second=None, tokens_per_second_per_user=None,
                      reading_speed=limits.user_tokens_per_second, meets_reading_speed=None)
            return at
        fields = {k: v for k, v in kwargs.items() if k not in ("fit_target", "headroom", "min_context",
                                                               "host_memory")}
        sp = with_speed(r, spec, device, len(free), host_device=host_device, hardware_files=files,
                        **{**fields, "weights": weights_asked(fmt)}).speed
        at["decode_tokens_per_second"] = sp.get("decode_tokens_per_second") if sp else None
        at["tokens_per_second_per_user"] = sp.get("tokens_per_second_per_user") if sp else None
        timed = SimpleNamespace(ttft_seconds=None, tokens_per_second=sp.get("tokens_per_second") if sp else None,
                                tokens_per_second_per_user=at["tokens_per_second_per_user"])
        at["reading_speed"] = limits.user_tokens_per_second
        if timed.tokens_per_second_per_user is None:  # no host CPU named: the floor not checked, as recommend
            at["meets_reading_speed"] = None          # judges a device of unknown bandwidth on memory only
            return at
        bad = latency_failures(timed, limits)
        at["meets_reading_speed"] = not bad
        if at["meets_reading_speed"]:
            if first is not None:  # a better rung fits but decodes under the floor: the answer says so (probe33 D1)
                at["passed_over"] = PassedOver(first["weights"], "llamacpp", first["tokens_per_second_per_user"],
                                               tuple(first_bad), limits.user_tokens_per_second).as_dict()
            return at
        if first is None:
            first, first_bad = at, bad
    return first


def _auto_fit(model: ModelSpec | str, free: Sequence[int], *, fit_target: int | None = None,
              headroom: float | None = None, context: int | None = None, min_context: int = FIT_MIN_CTX,
              host_memory: int | None = None, **workload: Any) -> LlamaCppFit:
    """``fit_llamacpp`` at the format asked (none: llama.cpp's default), steps 1-4."""
    if "margin" in workload:  # the name before fit_target (one margin rule for fit and fit --auto)
        raise InputError("margin is now fit_target (bytes kept free on each GPU, llama.cpp's --fit-target) or "
                         "headroom (a share)")
    spec = spec_of(model)
    if not free:
        raise InputError(f"free memory must be given for each GPU, got {list(free)}")
    # bytes, as memory= everywhere in Python (numbers.DEVICE_MEMORY): 24 is a forgotten unit, as --free 24 is
    free = [int(read_number(f, "free", DEVICE_MEMORY)) for f in free]
    if host_memory is not None:
        host_memory = int(read_number(host_memory, "host_memory", DEVICE_MEMORY))
    for key in ("gpus", "n_gpu_layers", "tensor_split", "n_cpu_moe", "split_mode", "tensor_parallel", "memory"):
        if workload.get(key) is not None:
            raise InputError(f"{key} is what the auto-fit chooses; drop it (or size those flags with infer/fit)")
    workload.pop("engine", None)
    margin = margin_rule("llamacpp", "gpu", headroom, fit_target)  # the one rule (fit's verdict keeps the same)
    check_fit_target(margin.fixed if fit_target is not None else None, min(free, default=None))  # none kept: refused
    nd, n = len(free), spec.num_layers
    targets = [margin.budget(f) for f in free]
    assumptions = [margin.assumption()]
    steps: list[str] = []
    n_ctx_train = spec.max_position_embeddings or max(context or 0, min_context)  # llama.cpp: n_ctx_train
    ctx_max: int = context if context is not None else n_ctx_train
    if context is None:
        assumptions.append(Assumption("context", f"auto: {min(min_context, n_ctx_train)}..{n_ctx_train}", True,
                                      "not given: the largest that fits, from the training context down to --fit-ctx "
                                      f"{min_context} (common/common.h:480)"))

    def run(ctx: int, counts: Sequence[int], n_cpu_moe: int) -> Estimate:
        ngl = sum(counts)
        return estimate_inference(spec, engine="llamacpp", device="gpu", context=ctx, gpus=nd, n_gpu_layers=ngl,
                                  tensor_split=tuple(float(c) for c in counts) if ngl else None,
                                  n_cpu_moe=n_cpu_moe if spec.is_moe else None, **workload)

    def used(est: Estimate) -> list[int]:
        return [d["total"] for d in est.details["split"]["devices"][:nd]]

    def fill(ctx: int, n_cpu_moe: int) -> list[int]:
        """Step 3: whole layers back to front, each GPU taking the most of the remaining last layers that fit."""
        counts = [0] * nd
        remaining = n + 1
        for i in reversed(range(nd)):
            def ok(k: int, i: int = i) -> bool:
                trial = counts.copy()
                trial[i] = k
                return used(run(ctx, trial, n_cpu_moe))[i] <= targets[i]
            counts[i] = largest_true(ok, 0, remaining, hi_first=True)  # no layer at all: taken as fitting
            remaining -= counts[i]
        return counts

    def all_on(ctx: int, n_cpu_moe: int) -> list[int] | None:
        counts = fill(ctx, n_cpu_moe)
        return counts if sum(counts) == n + 1 else None

    # step 1: the defaults (every layer offloaded, split by free memory)
    default = estimate_inference(spec, engine="llamacpp", device="gpu", context=ctx_max, gpus=nd, n_gpu_layers=n + 1,
                                 tensor_split=tuple(float(f) for f in free), **workload)
    if all(u <= t for u, t in zip(used(default), targets, strict=True)):
        steps.append(f"step 1: every layer offloaded at context {ctx_max} fits each GPU's target: no changes needed")
        counts = [d["n_layers"] for d in default.details["split"]["devices"][:nd]]
        return _result(spec, free, targets, ctx_max, counts, 0, run(ctx_max, counts, 0), steps, assumptions,
                       host_memory, workload, margin)
    steps.append(f"step 1: every layer offloaded at context {ctx_max} exceeds a GPU's target (free - margin)")
    ctx = ctx_max
    counts_found: list[int] | None = None
    if context is None and ctx_max > min_context:
        # step 2: the largest aligned context with every layer offloaded
        lo = max(min_context, CTX_ALIGN) // CTX_ALIGN
        hi = ctx_max // CTX_ALIGN
        best = largest_true(lambda k: k >= lo and all_on(k * CTX_ALIGN, 0) is not None, lo - 1, hi, hi_first=True)
        if best >= lo:
            ctx = best * CTX_ALIGN
            counts_found = all_on(ctx, 0)
            steps.append(f"step 2: context reduced from {ctx_max} to {ctx}: every layer fits")
        else:
            ctx = min(min_context, ctx_max)
            steps.append(f"step 2: even at the minimum context {ctx} not every layer fits; context {ctx}")
    elif context is not None:
        steps.append(f"step 2: context {context} given: kept")
    n_cpu_moe = 0
    if counts_found is None:
        counts = fill(ctx, 0)
        if sum(counts) == n + 1:
            counts_found = counts
        elif not spec.is_moe:
            counts_found = counts
            steps.append(f"step 3: {sum(counts)} of {n + 1} layers (output layer included) fit on the GPUs; "
                         "the rest run on the CPU")
        else:
            dense = fill(ctx, n)
            if sum(dense) < n + 1:
                counts_found, n_cpu_moe = dense, n
                steps.append(f"step 3: with every expert tensor in host memory {sum(dense)} of {n + 1} layers fit")
            else:
                # step 4: bring experts back: the fewest layers whose experts stay in host memory
                n_cpu_moe = smallest_true(lambda m: all_on(ctx, m) is not None, 0, n)  # all_on(ctx, n) fits
                counts_found = all_on(ctx, n_cpu_moe)
                steps.append("step 3: every layer fits with its experts in host memory")
                steps.append(f"step 4: experts of {n - n_cpu_moe} layers moved back to the GPUs; those of "
                             f"{n_cpu_moe} stay in host memory (--n-cpu-moe {n_cpu_moe})")
    assert counts_found is not None
    est = run(ctx, counts_found, n_cpu_moe)
    return _result(spec, free, targets, ctx, counts_found, n_cpu_moe, est, steps, assumptions, host_memory, workload, margin)


def _result(spec: ModelSpec, free: Sequence[int], targets: Sequence[int], ctx: int, counts: Sequence[int], n_cpu_moe: int,
            est: Estimate, steps: list[str], assumptions: list[Assumption], host_memory: int | None,
            workload: dict[str, Any], margin: Margin) -> LlamaCppFit:
    nd = len(free)
    devs = est.details["split"]["devices"]
    warnings = [w for w in est.warnings if not w.startswith("MoE: every expert")]
    fits = all(d["total"] <= t for d, t in zip(devs[:nd], targets, strict=True))
    if fits:  # the chosen flags' verdict as `fit` with them gives it (estimate/verdict.py eqs. 1'-2 on the fullest
        # GPU, inference/compose.py _check_fit's split rule, with its free memory and margin): llama.cpp chooses at
        # the expected need, so a high end past the target is warned as fit warns it
        if len(set(free)) == 1:  # one memory for every GPU, as fit takes it: the fullest GPU, the highest high end
            i = min(range(nd), key=lambda k: targets[k] - devs[k]["total"])
            warnings += memory_verdict(devs[i]["total"], max(d["total_high"] for d in devs[:nd]), free[i],
                                       margin).warnings
        else:  # each GPU's high end against its own free memory: the GPU it leaves least room on
            i = min(range(nd), key=lambda k: targets[k] - devs[k]["total_high"])
            warnings += memory_verdict(devs[i]["total"], devs[i]["total_high"], free[i], margin).warnings
    if len(set(free)) > 1:
        warnings.append(unequal_free_note(free))
    if not fits:
        warnings.append("not even the CUDA context and compute buffer fit a GPU's target; lower --fit-target or "
                        "--headroom, or use a smaller model or format")
    host = devs[-1]
    host_short = host_memory_verdict(host["total"], host_memory, host["layers"]) if host_memory is not None else \
        unchecked_host_verdict(host["total"], host["layers"]) if host["n_layers"] or host.get("experts") else None
    if host_memory is not None:
        assumptions = [*assumptions, host_fit_target_assumption()]
    if host_short is not None:
        fits = False
        warnings.append(host_short)
    elif host_memory is None and (host["n_layers"] or host.get("experts")):  # unchecked: say what it must hold
        warnings.append(f"the host holds {format_bytes(host['total'])} ({host['layers']}, with its KV cells, "
                        "buffers and runtime) and its RAM is not checked: give --host-memory")
    if n_cpu_moe:
        warnings.append("llama.cpp's own --fit moves the experts of each GPU's last layers to the CPU (-ot overrides); "
                        f"--n-cpu-moe {n_cpu_moe} moves those of the first {n_cpu_moe} layers, the same memory when "
                        "the layers are alike")
    if sum(counts) < spec.num_layers + 1:
        warnings.append(f"{spec.num_layers + 1 - sum(counts)} layer(s) run on the CPU: decode speed is bound by host "
                        "memory bandwidth for them")
    return LlamaCppFit(spec.name, tuple(free), tuple(f - t for f, t in zip(free, targets, strict=True)), ctx,
                       sum(counts), spec.num_layers,
                       tuple(counts) if nd > 1 else (), n_cpu_moe, fits, est, tuple(steps), tuple(assumptions),
                       tuple(warnings), host_memory,
                       {"source": FIT_SOURCE, "concurrency": workload.get("concurrency", 1),
                        "kv_unified": bool(est.details.get("kv_unified"))})


def with_speed(r: LlamaCppFit, model: ModelSpec | str, hardware: str | Device, count: int, *,
               host_device: str | Device | None = None, hardware_files: Sequence[str] = (),
               memory: int | str | None = None, **workload: Any) -> LlamaCppFit:
    """``r`` with the decode speed of its printed flags (``LlamaCppFit.speed``), as ``fit`` on ``count`` x
    ``hardware`` with those flags times it (estimate/fit.py ``fit``, its speed stage: estimate/speed.py, the split's
    eq. 8 with ``host_device``'s bandwidth for the layers and experts on the CPU): one answer for ``fit --auto`` and
    ``fit`` with the flags it prints. ``workload``: the auto-fit's own fields (weights, concurrency, ...), without
    context and the split flags, which come from ``r``. No speed (None) where fit has none (a warning says why).
    The ``count`` GPUs are one copy, one machine's (fit's ``gpus_per_node``: estimate/fit.py ``llamacpp_copy``, the
    GPUs the auto-fit was given), the workload its share of the load. ``memory``: each GPU's memory where the auto-fit
    was given one (``fit --auto --memory``), the device's in ``fit`` as in the auto-fit (None: the catalog's)."""
    from .fit import fit  # (fit sits beside this module and composes the speed; imported when a speed is asked)

    fields = {k: v for k, v in workload.items() if k not in ("context", "n_gpu_layers", "split_mode", "engine",
                                                             "tensor_split", "n_cpu_moe", "gpus", "gpu_runtime",
                                                             "gpus_per_node")}
    mem = int(read_number(memory, "memory", DEVICE_MEMORY)) if memory is not None else None
    timed = fit(model, hardware, count, engine="llamacpp", host_device=host_device, hardware_files=hardware_files,
                fits_at=False, gpus_per_node=count, memory=mem, **fields, **r.flag_fields())
    sp = timed.speed
    if sp is None or sp.decode is None:
        why = next((w for w in timed.warnings if "host-device" in w or "speed" in w), "no speed estimate")
        return replace(r, speed={"tokens_per_second": None, "tokens_per_second_per_user": None, "why": why})
    # tokens_per_second: fit's output rate, under its modelled serving load (each request's TTFT counted,
    # estimate/serving_load.py) where ``loaded``; decode_tokens_per_second: the decode steps alone, idle. The first
    # token past the attention limit is fit's warning of these flags (estimate/fit.py ``slow_first_token``)
    slow = timed.details.get("slow_first_token") if r.fits else None
    said = [w for w in timed.warnings if says_apple_own_host(w)]  # an Apple chip as its own host
    said += [slow] if slow else []
    return replace(r, warnings=(*r.warnings, *said), speed={"tokens_per_second": sp.tokens_per_second,
                             "tokens_per_second_per_user": sp.tokens_per_second_per_user,
                             "decode_tokens_per_second": sp.decode_tokens_per_second, "loaded": sp.load is not None,
                             "concurrency": sp.concurrency, "decode_seconds": sp.decode.seconds,
                             "bound": sp.decode.bound,
                             "source": "fit with the printed flags (estimate/fit.py fit, estimate/speed.py)"})
