"""Plan one inference (serving) job: memory per device at typical and peak load and the hardware it fits, speed,
storage, network in and out, operations, and cost by the hour or reserved. Routing only: memory from
``estimate_inference`` / ``hardware.fit``, alternatives from ``hardware.recommend``, numbers from the formula
modules."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import replace
from fractions import Fraction
from pathlib import Path
from typing import Any, NamedTuple

from ..catalog.hardware import Device
from ..errors import FieldError, InputError, LlmsizerError
from ..estimate.device import (
    default_engine,
    device_weights_capability,
    engine_assumption,
    generic_device,
    inference_device_fields,
)
from ..estimate.engines import llamacpp_layer_split, step_host
from ..estimate.fit import (
    FitResult,
    as_fit_chose,
    first_token_seconds,
    fit,
    need_per_device,
    per_replica,
    pool_reserved,
    verdict_need,
    wait_before_ttft,
)
from ..estimate.formats import given_format_why, rung_bytes, rung_group_size, unquantized_format, weights_asked
from ..estimate.inference import estimate_inference
from ..estimate.inference.common import running_and_queued
from ..estimate.verdict import binding_pool, margin_rule, pool_budget_words
from ..formulas import network as N
from ..formulas import storage as S
from ..formulas.cost import cost_per_million_tokens
from ..formulas.lora import AdaptedModule, lora_params, serving_slot_params
from ..formulas.mtp import stored_file_bytes
from ..formulas.parallelism import serving_stage_layers
from ..formulas.params import count_params
from ..formulas.weight_formats import GROUP_SIZE_DEFAULT, format_alias, normalize_format, stored_format
from ..models import load_model
from ..recommend import Constraints, best_option_on, recommend_inference
from ..request.quantities import HOURS_PER_MONTH
from ..request.spec import UNQUANTIZED, InferenceJob, Request, TrainingJob
from ..result import Assumption, Estimate
from ..specs import InferenceWorkload, ModelSpec
from ..specs.training import DECODER_LINEAR
from ..specs.workload import ENGINE_NAMES, LLAMACPP_SPLIT_FIELDS, implied_engine, prompt_and_output, setting_engines
from ..units import format_bytes, format_count
from . import pricing as P
from .common import NOT_FITTING, JobNotes, Sec, deadline_seconds, geometric_points
from .hardware import PlanContext, from_option, none_hardware, option_dict, owned_hardware, requested
from .result import Chart, Hardware, JobPlan, Series


class _Skip(Exception):
    """No catalog search wanted."""


LORA_DTYPE_BYTES = 2  # vLLM allocates LoRA buffers in the model dtype (bf16/fp16)
VLLM_DEFAULT_MAX_LORAS = 1  # vLLM EngineArgs --max-loras default
VLLM_DEFAULT_MAX_LORA_RANK = 16  # vLLM EngineArgs --max-lora-rank default
# Request logs kept when operations.logs.retention is not given: a named planning default, not a measurement (the
# storage line sized from it is an assumption the plan states, and the request's own retention replaces it).
DEFAULT_LOG_RETENTION = 30 * 86400.0
DEFAULT_LOG_RETENTION_REASON = ("a month of request logs, the span a monthly bill or usage review looks back over; "
                                "state operations.logs.retention for the real policy")


def _fit(spec: ModelSpec, target: Any, count: int | None, job: InferenceJob, fmt: str | None, engine: str | None,
         context: int, concurrency: int, output: int, hardware_files: Sequence[str | Path], memory: int | None,
         layout: FitResult | None = None, speed: bool = True, fits_at: bool | None = False,
         rate: tuple[str, float] | None = None, per_node: int | None = None) -> FitResult:
    """``fit`` of the devices at this load (``per_node``: bare devices' machine size, fit's ``gpus_per_node``); with
    ``layout`` (the peak load's fit) on that fit's tensor parallelism: one deployment serves every load, so the typical load is timed on the layout fit chose for the peak. Without
    it, on the job's ``tensor_parallel`` (the request's pin, fit's ``tensor_parallel``: `fit --tp`), else fit's
    choice. ``fits_at``: fit's hint when it does not fit (``FitResult.fits_at``), asked for the peak load only.
    ``rate``: (level, requests/s of all the devices) of a job whose load is an arrival rate (``open_rates``): fit's
    ``request_rate`` (`fit --request-rate`: open arrivals, eq. Q10, the requests in flight derived) in place of
    ``concurrency``; fit's refusal of a rate at or above the server's capacity is the request's bad input at
    traffic.requests_per_second.LEVEL, fit's own line (``rate_refusal``)."""
    pinned = (layout.tensor_parallel  # (not a llama.cpp split: one copy over one machine's GPUs, no tensor parallelism)
              if layout is not None and layout.count > 1 and not layout.layer_split else
              job.tensor_parallel if layout is None else None)
    try:
        return fit(spec, target, count, engine=engine, weights=fmt, context=context,
                   concurrency=None if rate else concurrency, request_rate=rate[1] if rate else None,
                   output_tokens=output, memory=memory, headroom=job.resources.headroom, kv_dtype=job.kv_cache_dtype,
                   dtype=job.precision, tensor_parallel=pinned, speed=speed or rate is not None, fits_at=fits_at,
                   hardware_files=hardware_files, gpus_per_node=per_node, network=job.resources.network,
                   **job.media.fields(),
                   **pipeline_of(job, layout), **engine_settings(job, engine))
    except FieldError as e:
        if rate is None or e.field != "request_rate":
            raise
        raise rate_refusal(e, rate[0]) from None


def pipeline_of(job: InferenceJob, layout: FitResult | None = None) -> dict[str, Any]:
    """fit's ``pipeline_parallel`` (and ``data_parallel`` / ``expert_parallel``) for the job: the stages and
    data-parallel ranks of each replica of ``layout`` (the peak load's fit, whose deployment every load is timed on),
    else the job's own (`fit --pp`, `--dp`, `--enable-expert-parallel`); nothing without them. fit makes each
    replica ``tensor_parallel`` x ``pipeline_parallel`` x ``data_parallel`` devices (estimate/fit.py
    ``ServingLayout.replicas``, the one home of the devices per replica): the plan reads its replicas and devices
    per replica (count / replicas) from fit's answer, never from the degree alone."""
    pp = layout.pipeline_parallel if layout is not None else job.pipeline_parallel or 1
    dp = layout.data_parallel if layout is not None else job.data_parallel or 1
    ep = layout.expert_parallel if layout is not None else bool(job.expert_parallel)
    return ({"pipeline_parallel": pp} if pp > 1 else {}) | ({"data_parallel": dp} if dp > 1 else {}) | (
        {"expert_parallel": True} if ep else {})


def open_rates(job: InferenceJob) -> tuple[float, float] | None:
    """(typical, peak) requests/s of a job whose load is stated as an arrival rate (traffic.requests_per_second,
    no traffic.concurrency): the plan sizes it as `fit --request-rate` does (open arrivals, formulas/serving_queue.py
    eq. Q10; the requests in flight derived by Little's law, estimate/serving_load.py ``rate_fixed_point``). A
    missing typical rate is the peak's. None where traffic.concurrency is given (the closed model at that
    concurrency; a rate given with it is the network's and is checked against it, ``_network``) or no rate is."""
    t = job.traffic
    if t.concurrency.worst is not None or t.requests_per_second.worst is None:
        return None
    peak = float(t.requests_per_second.worst)
    return float(t.requests_per_second.typical or peak), peak


def rate_refusal(e: FieldError, level: str) -> FieldError:
    """fit's refusal of its ``request_rate`` (no steady state at or above the server's capacity, an engine that
    does not batch continuously) as the request file's: the same line about traffic.requests_per_second.LEVEL."""
    return FieldError(f"traffic.requests_per_second.{level}", e.renamed(lambda f: "").removeprefix(": "))


def derived_concurrency(f: FitResult) -> int:
    """The requests in flight at a rate, as fit derived them over all its replicas (fit's details ``concurrency``,
    ceil(lambda x the time each is served), eq. Q10c)."""
    return int(f.details["concurrency"])


def refuse_bad_input(spec: ModelSpec, job: InferenceJob, fmt: str | None, context: int, concurrency: int,
                     output: int, engine: str, searched: bool) -> None:
    """The one rule for a job's bad input: what the estimate refuses with no hardware named -- ``infer`` of the
    job's workload at peak, on its engine, without ``--device`` (images on a text-only model, a format the engine
    runs on no device, a setting of another engine...) -- is refused on any hardware, so the plan raises it before
    fitting: exit 2 with infer's line, at the job's place (plan/compose.py). What only the hardware refuses (SGLang
    on a CPU, a device without sourced memory) stays the fit's refusal, the plan's error check 'Cannot be fitted'.
    ``engine`` is the one the job is served on (``job_engine``: its own, else fit's default for the devices it
    names), so a KV cache dtype that engine cannot store is this bad input, as `fit --kv-dtype` refuses it (exit 2).
    A job naming neither engine nor devices is checked on the engine ``job_engine`` gives it (``infer``'s without a
    device, the one its plan names when no option fits), but for its KV cache dtype (``searched``): the plan searches hardware,
    each option on its own engine (``recommend``, which refuses the dtype per option, as `recommend --kv-dtype`).
    llama.cpp's placement over the GPUs (``LLAMACPP_SPLIT_FIELDS``: -sm, -ts, --n-cpu-moe) is checked by the fit
    against the GPUs it gets."""
    settings = {k: v for k, v in engine_settings(job, job.engine).items() if k not in LLAMACPP_SPLIT_FIELDS}
    estimate_inference(spec, engine=engine, weights=fmt, context=context, concurrency=max(1, concurrency),
                       output_tokens=output, kv_dtype=None if searched else job.kv_cache_dtype,
                       dtype=job.precision, **job.media.fields(), **settings)


def job_engine(job: InferenceJob, spec: ModelSpec, device: Device | None, hw: Hardware | None,
               fmt: str | None) -> str:
    """The engine a job is served on, the one every check of the job reads: its own ``engine``, else the one
    ``fit`` takes for the devices it names (``estimate/device.py`` ``default_engine``, the rule of fit's
    ``engine_assumption``, for one machine's ``hw.per_node`` devices at the weights ``fmt``, as ``_fit`` asks fit),
    else, naming neither, the one ``infer`` takes without ``--device`` (a GPU known only by its kind): the plan then
    searches hardware, each option sized on the engine fit takes for it, and this one is checked and named only
    when no option fits."""
    if job.engine is not None:
        return job.engine
    if device is None or hw is None:
        return default_engine(generic_device("gpu"), 1, fmt, spec, job.engine_settings.fields())
    return default_engine(device, hw.per_node, fmt, spec, job.engine_settings.fields())


def settings_kept(job: InferenceJob, changes: dict[str, Any], f: FitResult, where: str) -> tuple[InferenceJob,
                                                                                                   Assumption]:
    """The job with the engine settings of fit's hint (``FitResult.fits_at["engine_settings"]``, estimate/fit.py
    ``engine_settings_fit``: ``max_num_seqs``, ``kv_dtype``) on the engine ``f`` ran (the job's, else its devices'
    default, named so the setting reaches it), and the assumption that says so: the request's key for each."""
    settings = {k: v for k, v in changes.items() if k != "kv_dtype"}
    kept = replace(job, engine=job.engine or f.engine, kv_cache_dtype=changes.get("kv_dtype", job.kv_cache_dtype),
                   engine_settings=replace(job.engine_settings, **settings))
    keys = ", ".join(f"{'kv_cache_dtype' if k == 'kv_dtype' else 'engine_settings.' + k}: {v}"
                     for k, v in changes.items())
    said = Assumption("engine_settings", keys, True,
                      f"not given: {f.weights_format} on {f.engine} does not fit {where} at the peak load with the "
                      f"engine's defaults, and does with {keys}, the weights kept (`fit`'s hint, estimate/fit.py "
                      "engine_settings_fit: the engine's settings before a format change); give them, or "
                      "quantization, to pin")
    return kept, said


def engine_settings(job: InferenceJob, engine: str | None) -> dict[str, Any]:
    """The job's engine_settings, engine_version and ``resources.fit_target`` (llama.cpp's margin, as `fit
    --fit-target`) when ``engine`` is the job's own engine (the reader refuses a setting of another engine); none
    for hardware sized on another engine."""
    if engine is None or engine != job.engine:
        return {}
    return {**job.engine_settings.fields(),
            **({"engine_version": job.engine_version} if job.engine_version is not None else {}),
            **({"fit_target": job.resources.fit_target} if job.resources.fit_target is not None else {})}


def on_implied_engine(job: InferenceJob) -> tuple[InferenceJob, Assumption | None]:
    """The job on the engine its engine_settings (and engine_version, resources.fit_target) imply when it names no
    engine (specs/workload.py ``implied_engine``: tensor_split is llama.cpp's, as `fit -ts` without --engine), with
    the assumption that says so; the job as it is otherwise (the reader refused settings of two engines)."""
    if job.engine is not None:
        return job, None
    implied = implied_engine({**job.engine_settings.fields(), "engine_version": job.engine_version,
                              "fit_target": job.resources.fit_target})
    if implied is None:
        return job, None
    return replace(job, engine=implied[0]), Assumption("engine", implied[0], True, implied[1])


def on_default_engine(job: InferenceJob, spec: ModelSpec, device: Device | None, hw: Hardware | None,
                      fmt: str | None) -> tuple[InferenceJob, Assumption | None]:
    """The job on its devices' default engine (``estimate/device.py`` ``engine_assumption``, the rule infer and fit
    apply) when it names no engine and gives settings several engines read (``engine_settings.max_num_seqs``,
    ``engine_version``: vLLM or SGLang, so ``on_implied_engine`` names none): kept where that default reads them
    (vLLM on an H100, said as its default), else refused naming the settings and the engine (a FieldError,
    ``specs/workload.py`` ``refuse_default_not_reading``: one line at the setting's key, plan/compose.py ``_about``).
    Without devices named, the default of a GPU known by its kind (``job_engine``'s). The job as it is otherwise."""
    given = {**job.engine_settings.fields(), "engine_version": job.engine_version}
    if job.engine is not None or not setting_engines(given)[0]:
        return job, None
    on = device if device is not None and hw is not None else generic_device("gpu")
    eng, said = engine_assumption(None, on, hw.per_node if device is not None and hw is not None else 1, fmt, None,
                                  spec, given)
    return replace(job, engine=eng), said


def pinned_weights(job: InferenceJob, spec: ModelSpec, notes: JobNotes) -> str | None:
    """The weight format the job pins, or None when the plan may choose one (no ``quantization`` key: the search
    ranges over formats). ``quantization: none`` means unquantized: the precision given, else the checkpoint's dtype
    (``estimate/formats.py`` ``unquantized_format``); a model file is served as its own bytes."""
    if job.quantization is not None and format_alias(job.quantization):  # 'int4': the format it resolves to, named
        fmt = normalize_format(job.quantization)
        notes.assumptions.append(Assumption("weights", fmt, False, given_format_why(job.quantization)))
        return fmt
    if job.quantization != UNQUANTIZED:
        return job.quantization
    if spec.file_weights is not None:
        return None
    fmt, why = unquantized_format(spec, job.precision)
    notes.assumptions.append(Assumption("weights", fmt, job.precision is None, why))
    return fmt


def peak_load(job: InferenceJob, notes: JobNotes) -> tuple[int, int, int]:
    """(context, concurrency, output tokens) of the job's peak load: traffic's worst, else the defaults (named in
    ``notes``) every estimate takes. The plan sizes its hardware at it, and the provider's quantized alternative
    (``quantized_fit``) re-estimates the same load."""
    t = job.traffic
    context = int(notes.assume("context", InferenceWorkload.context, t.context.worst,
                               f"no traffic.context given: {InferenceWorkload.context} tokens"))
    output = int(notes.assume("output", prompt_and_output(context, None)[1], t.output.worst,
                              "no traffic.output given: min(256, context / 2) tokens (specs/workload.py "
                              "default_output_tokens, the one default of every estimate)"))
    return context, int(t.concurrency.worst or 1), output


class Alternative(NamedTuple):
    """A provider's alternative for a service, sized by ``fit`` (``quantized_fit``, ``device_fit``) and the words
    on the tensor-parallel layout it was sized at (``at_jobs_degree``)."""

    fit: FitResult
    layout: str  # '' where the request pins no degree
    # ``quantized_fit``: the better format that fits in memory but misses the job's limits (reading speed where it
    # states none), the search's one sentence (recommend ``Option.passed_over``); '' where none was passed over
    passed_over: str = ""


def at_jobs_degree(job: InferenceJob, size: Callable[[int | None], FitResult | None]) -> Alternative | None:
    """``size`` (a fit of the job on some devices, given the degree each replica runs; None: fit's choice) at the
    job's ``tensor_parallel`` (the request's pin, `fit --tp`), where fit takes that degree on those devices. Where fit
    refuses it there (a degree that does not divide the devices, a CPU or Apple chip, llama.cpp's split: estimate/
    fit.py ``fit_memory``, its one rule), the alternative is sized at fit's own choice and says so, with fit's
    refusal, instead of vanishing. None where ``size`` answers none."""
    pin = job.tensor_parallel
    why = None
    try:
        r = size(pin)
    except FieldError as e:
        if pin is None or "tensor_parallel" not in e.fields:
            raise
        why, r = str(e), size(None)
    if r is None:
        return None
    if pin is None:
        return Alternative(r, "")
    stages = r.pipeline_parallel
    taken = f"TP {r.tensor_parallel}" + (f" x PP {stages}" if stages > 1 else "")
    if why is None:
        return Alternative(r, f"{taken}, the request's tensor_parallel"
                              + (f" and pipeline_parallel (`--tp {pin} --pp {stages}`)" if stages > 1 else
                                 f" (`--tp {pin}`)"))
    return Alternative(r, f"{taken}, fit's choice: the request's tensor_parallel {pin} does not hold "
                          f"on these devices, fit refuses it: {why}")


def quantized_fit(job: InferenceJob, plan_format: str, device: str, count: int, *, memory: int | None = None,
                  hardware_files: Sequence[str | Path] = ()) -> Alternative | None:
    """The job's peak load (``peak_load``) served on ``count`` x ``device`` at a weight format smaller than the
    plan's ``plan_format``: the format is the one recommend's evaluation of one candidate picks
    (``recommend.best_option_on``: the engine's formats best first, ``estimate/formats.py`` ``format_ladder``; the
    first that fits with the job's headroom and meets its latency limits, or reading speed when it states none), and
    the answer is ``fit`` at that format, the numbers ``llmsizer fit --weights FORMAT`` (and ``infer --weights
    FORMAT --device``) give for the same load. The job's engine, engine settings, KV and compute dtypes and media are
    the plan's (``_fit``); ``memory``: the request's ``resources.memory`` where ``device`` is the job's own. The
    format is chosen and sized at the job's ``tensor_parallel`` where fit takes it on these devices, else at fit's
    own choice, said (``at_jobs_degree``). No price limit: the devices are a provider's own. A request that pins
    its format (``quantization``) is offered it as it is offered another device: an alternative changes the
    request. None (no alternative, never a guessed one) when the
    job serves dynamic LoRA adapters (their slots take memory the search does not hold back) or states its load as a
    request rate (``open_rates``: the format chooser sizes a concurrency, not a rate), no format fits and
    meets the limits, or the one that does is no smaller than the plan's (its own format fits there: nothing to
    quantize)."""
    if job.adapters.mode == "dynamic" or open_rates(job) is not None:  # (recommend's chooser takes no rate yet)
        return None
    job = on_implied_engine(job)[0]
    spec = load_model(str(job.model.name))
    context, concurrency, output = peak_load(job, JobNotes())
    fields: dict[str, Any] = dict(context=context, concurrency=concurrency, output_tokens=output, memory=memory,
                                  kv_dtype=job.kv_cache_dtype, dtype=job.precision, hardware_files=hardware_files,
                                  **job.media.fields(), **engine_settings(job, job.engine))
    limits = Constraints(max_ttft=job.latency.ttft, user_tokens_per_second=job.latency.tokens_per_second_per_user,
                         headroom=job.resources.headroom)

    passed: list[str] = []  # the chosen option's passed-over sentence (its last size call's)

    def size(tp: int | None) -> FitResult | None:  # (a None degree: the search drops it, fit's choice)
        stages = pipeline_of(job)  # the request's stages, at its degree or fit's choice of one (estimate/fit.py)
        option = best_option_on(spec, device, count, constraints=limits, engine=job.engine, tensor_parallel=tp,
                                **fields, **stages)
        if option.status != "meets" or not _smaller(spec, option.weights_format, plan_format, option.engine):
            return None
        passed[:] = [option.passed_over or ""]
        if not stages and option.pipeline_parallel > 1:  # the search's pipeline layout (fit.with_pipeline_layouts):
            stages = {"pipeline_parallel": option.pipeline_parallel}  # fit's answer on those stages, as it chose
        if not stages and option.data_parallel > 1:  # the search's expert-parallel layout (the same rule)
            stages = {"data_parallel": option.data_parallel, "expert_parallel": option.expert_parallel}
        return fit(spec, device, count, weights=weights_asked(option.weights_format), engine=option.engine,
                   headroom=job.resources.headroom, tensor_parallel=tp, **fields, **stages)
    try:
        alt = at_jobs_degree(job, size)
    except InputError:  # the device cannot run the workload at all (no sourced memory, an engine it refuses)
        return None
    return alt._replace(passed_over=passed[0]) if alt is not None and passed else alt


def device_fit(job: InferenceJob, device: str, count: int, *, memory: int | None = None,
               hardware_files: Sequence[str | Path] = ()) -> Alternative | None:
    """The job's peak load (``peak_load``) served on ``count`` x ``device``, one machine, sized as the plan sizes its
    own devices (``_fit``: the job's engine, engine settings, weight format (``pinned_weights``, else its precision),
    KV and compute dtypes, media and headroom): the numbers ``llmsizer fit MODEL --device DEVICE --count N`` gives
    for the same load. The provider's other-device alternative reads ``fits`` and the memory per device. ``memory``:
    the RAM a CPU holds the model in (None: the catalog's memory). No speed estimate (the verdict does not need
    it), but at a request rate (``open_rates``: `fit --request-rate`, whose requests in flight follow from it). At the job's ``tensor_parallel`` where fit takes it on these devices, else at fit's own choice, said
    (``at_jobs_degree``). None (no alternative, never a guessed one) when the job serves dynamic LoRA adapters (their
    slots take memory this does not hold back) or the device cannot run the workload (``fit`` refuses it: no sourced
    memory, an engine it does not run)."""
    if job.adapters.mode == "dynamic":
        return None
    job = on_implied_engine(job)[0]
    spec = load_model(str(job.model.name))
    notes = JobNotes()
    context, concurrency, output = peak_load(job, notes)
    fmt = pinned_weights(job, spec, notes) or job.precision

    rates = open_rates(job)  # a load stated as a rate: fit's open arrivals (which need the speed: the in flight)

    def size(tp: int | None) -> FitResult:
        return _fit(spec, device, count, replace(job, tensor_parallel=tp), fmt, job.engine, context, concurrency,
                    output, hardware_files, memory, speed=False, rate=("peak", rates[1]) if rates else None)
    try:
        return at_jobs_degree(job, size)
    except InputError:
        return None


def _smaller(spec: ModelSpec, fmt: str, than: str, engine: str | None) -> bool:
    """Whether format ``fmt`` holds fewer weight bytes than ``than`` on ``engine`` (the one the option runs on: the
    job's, else the device's default): the measure the format ladder and recommend rank rungs by (``rung_bytes`` at
    ``rung_group_size`` on the engine, whose fused MoE experts a bitsandbytes format may keep in the compute dtype,
    ``serving_fused_experts``; the group is the checkpoint's own GPTQ/AWQ group for its stored format, the default
    group for any other; a model file's own bytes for "file")."""
    def size(f: str) -> int:
        fw = spec.file_weights
        if f == "file" and fw is not None:
            return fw.total_bytes
        return rung_bytes(spec, f, rung_group_size(spec, f, None), engine)
    return fmt != than and size(fmt) < size(than)


def lora_slot_bytes(spec: ModelSpec, rank: int, slots: int, tp: int = 1, pp: int = 1, engine: str = "vllm",
                    fully_sharded: bool = False) -> int:
    """Device memory a server reserves on one device for ``slots`` LoRA adapters of rank ``rank`` on the decoder's
    attention and MLP projections (``DECODER_LINEAR``; vLLM ``LoRAModelManager``: stacked A/B buffers of max_loras x
    max_lora_rank per supported module), in the model dtype, on one of ``tp`` tensor-parallel ranks: formulas/lora.py
    eq. (4) ``serving_slot_params`` per module, by its layer kind (a column-parallel layer keeps lora_a whole and
    splits lora_b, a row-parallel one splits lora_a and keeps lora_b whole; ``fully_sharded``: vLLM's
    ``--fully-sharded-loras`` splits both). At ``tp`` 1 eq. (4) is eq. (1) per module (a file's adapter).

    With ``pp`` pipeline stages each stage builds the buffers of the modules it holds alone: vLLM 0.19.1
    ``vllm/lora/model_manager.py`` ``_create_lora_modules`` (lines 363-365) walks the stage's ``named_modules`` and
    skips every ``PPMissingLayer`` (the layers another stage builds), so a device holds its stage's layers' adapters
    (formulas/parallelism.py ``serving_stage_layers``, the engine's layer split), the stage with the most adapter
    parameters binding; a module outside the decoder layers (none among ``DECODER_LINEAR``'s) is counted on every
    stage."""
    modules = lora_params(spec, rank, DECODER_LINEAR).modules
    tp = max(1, tp)

    def per_rank(ms: Sequence[AdaptedModule]) -> Fraction:  # eq. (4) on one TP rank
        return serving_slot_params(ms, rank, tp, spec.num_kv_heads, spec.num_heads,
                                   replicate_kv_heads=engine != "sglang", fully_sharded=fully_sharded)
    if pp > 1:
        by_layer: list[list[AdaptedModule]] = [[] for _ in range(spec.num_layers)]
        outside: list[AdaptedModule] = []
        for m in modules:
            (by_layer[m.layer] if 0 <= m.layer < spec.num_layers else outside).append(m)
        params = per_rank(outside) + max(per_rank([m for i in layers for m in by_layer[i]])
                                         for layers in serving_stage_layers(spec.num_layers, pp, engine))
    else:
        params = per_rank(modules)
    return math.ceil(slots * params * LORA_DTYPE_BYTES)


def plan_inference(job: InferenceJob, req: Request, ctx: PlanContext, sources: dict[str, TrainingJob]) -> JobPlan:
    notes = JobNotes()
    job, implied = on_implied_engine(job)  # engine_settings of one engine, no engine named: that engine
    if implied is not None:
        notes.assumptions.append(implied)
    spec = load_model(str(job.model.name))
    pc = count_params(spec)
    t = job.traffic
    ctx_peak, conc_peak, out_peak = peak_load(job, notes)
    conc_typ = int(t.concurrency.typical or conc_peak)
    rates = open_rates(job)  # a load stated as requests/s only: fit's open arrivals (eq. Q10), in flight derived
    ctx_typ = int(t.context.typical or ctx_peak)
    out_typ = int(t.output.typical or min(out_peak, ctx_typ // 2))
    pinned = pinned_weights(job, spec, notes)
    fmt = pinned or job.precision
    hw, device, instance = requested(job.resources, ctx)
    job, kept = on_default_engine(job, spec, device, hw, fmt)  # max_num_seqs, no engine: the devices' default
    if kept is not None:
        notes.assumptions.append(kept)
    refuse_bad_input(spec, job, fmt, ctx_peak, conc_peak, out_peak, job_engine(job, spec, device, hw, fmt),
                     searched=job.engine is None and hw is None)
    src = sources.get(job.model.from_job or "")
    deadline_seconds(job, req, ctx.today, notes)

    # ---- hardware and fit at peak ----
    cons = Constraints(max_ttft=job.latency.ttft, user_tokens_per_second=job.latency.tokens_per_second_per_user,
                       max_cost_per_hour=job.budget.per_hour, headroom=job.resources.headroom)
    rec = None
    try:
        if not (ctx.alternatives or hw is None):
            raise _Skip
        # (at a rate: recommend --request-rate, each option the fewest copies that carry the peak rate)
        rec = ctx.search(recommend_inference, spec, context=ctx_peak, concurrency=conc_peak,  # once per question
                         request_rate=rates[1] if rates else None,
                         output_tokens=out_peak, weights=pinned, constraints=cons,
                         hardware_files=ctx.hardware_files, catalog=ctx.cat(), quantization_advice=False,
                         media=job.media.fields(), engine=job.engine, dtype=job.precision,
                         kv_dtype=job.kv_cache_dtype, **engine_settings(job, job.engine))  # every field fit gets
    except _Skip:
        pass
    except LlmsizerError as e:
        notes.warnings.append(f"no alternatives searched: {e}")
        notes.facts["search_error"] = str(e)  # the reason "no hardware" gives when none is named
    if rec is not None:  # the search's pipeline layouts it left out (async_scheduling), in its words: not silently
        notes.warnings.extend(rec.stages_left)
    if rec is not None and rec.refusal is not None:  # answered with no candidate sized (a rate past every one's)
        notes.warnings.append(f"no alternatives searched: {rec.refusal}")
        notes.facts["search_error"] = rec.refusal
    options = [option_dict(o, "on-demand price x service hours") for o in (rec.options[:6] if rec else ())]
    if hw is None and rec is not None and rec.chosen is not None:
        hw, device, instance = from_option(rec.chosen, job.resources, ctx)
        fmt = weights_asked(rec.chosen.weights_format) if rec.chosen.weights_format else fmt
        flags = rec.chosen.layout_flags  # a pipeline option (fit.with_pipeline_layouts): planned on its stages,
        if flags is not None:            # fit choosing each stage's degree, as the search sized it
            job = replace(job, pipeline_parallel=rec.chosen.pipeline_parallel if rec.chosen.pipeline_parallel > 1
                          else None, data_parallel=rec.chosen.data_parallel if rec.chosen.data_parallel > 1 else None,
                          expert_parallel=rec.chosen.expert_parallel or None)
        notes.advice.append(f"no resources named: planned on {hw.label} at {rec.chosen.weights_format or fmt}"
                            + (f" ({flags})" if flags else "") + ", the cheapest option `llmsizer recommend` finds "
                            "that fits the peak load and meets the latency limits")
    f_peak = f_typ = None
    stated_refusal: str | None = None  # fit's answer to a stated peak rate the deployment does not carry
    tp, replicas = 1, 1
    # what the devices are fitted as: the instance (its RAM, VM share and link), or the device
    fit_target: Any = None
    fit_count: int | None = None
    fit_per_node: int | None = None  # bare devices' machine size, fit's gpus_per_node (an instance brings its own)
    if hw is not None and device is not None:
        # every device named is what `fit` is asked about, as `fit --device D --count N` (estimate/fit.py: it
        # chooses the tensor parallelism and the replicas over all of them, a degree spanning machines included,
        # with its warning; CPUs and Apple chips one replica each): one deployment, the load over fit's replicas.
        # Bare devices are machines of hw.per_node (resources.nodes: count / nodes each; else fit's
        # SERVING_GPUS_PER_NODE, plan/hardware.py machine_size), told to fit as its gpus_per_node
        # (estimate/fit.py serving_machine_size): the same machines named as instances get the same layout and verdict
        fit_target = instance if instance is not None else device
        fit_count = hw.count
        # (bare GPUs past one machine with no resources.nodes: fit's own machine size, the same 8, left unstated:
        # 12 fill machines of 8 in order, 8 + 4, which a stated size refuses as uneven, serving_machine_size)
        fit_per_node = None if instance is not None or (job.resources.nodes is None and hw.count > hw.per_node) \
            else hw.per_node
        try:
            # no format pinned (the plan may choose one): what fits when the default does not, fit's hint
            # (at a rate: fit gives each of its replicas its share of the requests/s)
            f_peak = _fit(spec, fit_target, fit_count, job, fmt, job.engine, ctx_peak, conc_peak,
                          out_peak, ctx.hardware_files, job.resources.memory, fits_at=pinned is None,
                          rate=("peak", rates[1]) if rates else None, per_node=fit_per_node)
            at = f_peak.fits_at
            if pinned is None and not f_peak.fits and at and at.get("engine_settings"):
                # fit's hint keeps the weights first (estimate/fit.py engine_settings_fit: the engine's own settings,
                # max_num_seqs then kv_dtype fp8, before a format change): the plan takes its first, as it takes
                # the format below, and names it; one rule for `fit`'s hint and the plan
                kept_job, said = settings_kept(job, at["engine_settings"][0]["changes"], f_peak, hw.label)
                kept_fit = _fit(spec, fit_target, fit_count, kept_job, fmt, kept_job.engine, ctx_peak, conc_peak,
                                out_peak, ctx.hardware_files, job.resources.memory, per_node=fit_per_node)
                if kept_fit.fits:
                    notes.assumptions.append(said)
                    f_peak, job, at = kept_fit, kept_job, None
            if pinned is None and not f_peak.fits and at and "weights" in at and at["same_engine"] \
                    and "experts_in_host" not in at:
                # no quantization key: the plan takes the format fit's one format rule picks on these devices
                # (estimate/format_search.py, the best rung of the engine's ladder that fits), as the request
                # template and docs/plans.md say ("the plan may choose one"); a rung of another engine, or one
                # that fits only with experts in host memory (flags the request cannot state), stays a hint. A rung
                # met on a pipeline layout is taken too: fit given no layout takes those stages itself
                # (estimate/fit.py _fit_at: with_pipeline_layouts), as `fit --weights RUNG` answers
                taken = _fit(spec, fit_target, fit_count, job, str(at["weights"]), job.engine, ctx_peak,
                             conc_peak, out_peak, ctx.hardware_files, job.resources.memory,
                             rate=("peak", rates[1]) if rates else None, per_node=fit_per_node)
                if taken.fits:
                    notes.assumptions.append(Assumption(
                        "weights", taken.weights_format, True, f"no quantization given: {f_peak.weights_format} "
                        f"does not fit {hw.label} at the peak load, so the plan serves {taken.weights_format}, the "
                        "format `fit` names for these devices (its fits_at: estimate/format_search.py, the best "
                        "rung of the engine's ladder that fits); give quantization to pin one"))
                    f_peak, fmt = taken, str(at["weights"])
            f_typ = _fit(spec, fit_target, fit_count, job, fmt, job.engine, ctx_typ, conc_typ, out_typ,
                         ctx.hardware_files, job.resources.memory, f_peak,
                         rate=("typical", rates[0]) if rates else None, per_node=fit_per_node)
        except InputError as e:
            if isinstance(e, FieldError) and (e.field == "tensor_parallel" and job.tensor_parallel is not None
                                              or e.field == "pipeline_parallel" and job.pipeline_parallel is not None
                                              or e.field.startswith("traffic.requests_per_second")):
                raise  # the job's own tensor_parallel / pipeline_parallel (fit's one rule) or rate refused: bad
                # input at its line
            notes.warnings.append(f"cannot fit on {hw.label}: {e}")
            notes.facts["fit_error"] = str(e)
        stated = job.traffic.requests_per_second.worst
        if f_peak is not None and not rates and stated is not None:
            # a rate stated beside the concurrency: whether the deployment carries it at all (eq. Q10a, the
            # decode's capacity, the admission limit: fit's rate path); past it the queue is unbounded, the
            # same error check as a rate alone
            try:
                at_stated = _fit(spec, fit_target, fit_count, job, fmt, job.engine, ctx_peak, 1, out_peak,
                                 ctx.hardware_files, job.resources.memory, f_peak,
                                 rate=("peak", float(stated)), per_node=fit_per_node)
                if "rate_capacity" in at_stated.details:
                    stated_refusal = at_stated.reasons[0]
            except InputError:
                pass
        if f_peak is not None and f_typ is not None and rates:
            conc_peak, conc_typ = derived_concurrency(f_peak), derived_concurrency(f_typ)
            notes.assumptions.append(Assumption(
                "traffic.concurrency", f"typical {conc_typ}, peak {conc_peak} (derived)", True,
                f"derived: the requests in flight at traffic.requests_per_second (typical {rates[0]:g}/s, peak "
                f"{rates[1]:g}/s), as `fit --request-rate` derives them (Little's law over the time each is served, "
                "formulas/serving_queue.py eq. Q10c), rounded up, each replica at its share of the rate"))
        if f_peak is not None:
            # tp: the devices one replica spans (a llama.cpp split: all of the machine's GPUs, as one replica), what
            # the need is sized over; the hardware records fit's own tensor parallelism (a split's is 1: llama.cpp runs
            # none), as `fit --json` reports the layout
            tp, replicas = f_peak.count // f_peak.replicas, f_peak.replicas
            # the layout fit chose, as fit --json names it: a llama.cpp split is tensor parallel 1 over its devices
            hw = Hardware(**{**{k: getattr(hw, k) for k in hw.__dataclass_fields__}, "engine": f_peak.engine,
                             "tensor_parallel": f_peak.tensor_parallel,
                             "pipeline_parallel": f_peak.pipeline_parallel, "data_parallel": f_peak.data_parallel,
                             "expert_parallel": f_peak.expert_parallel, "replicas": replicas})
    if hw is None:
        hw = none_hardware(job.resources)
    # no fit (no hardware, or the devices cannot run it): the engine the one rule gives the devices named, else a
    # GPU known only by its kind (estimate/device.py engine_rule, as `infer` without --device answers)
    engine = f_peak.engine if f_peak else job_engine(job, spec, device, hw, fmt)
    fmt_used = f_peak.weights_format if f_peak else (normalize_format(fmt) if fmt else stored_format(spec)[0])
    on_cpu = hw.device_kind == "cpu"

    # ---- memory ----
    mem = Sec("memory", "Memory per device")
    per_rep_peak = per_replica(conc_peak, replicas)
    # vLLM's batch limits as the fit on the device applied them (the charts' need curves, sized without a device)
    batch = ({a.name: a.value for a in f_peak.estimate.assumptions if a.name in ("max_num_seqs", "max_num_batched_tokens")}
             if f_peak is not None and f_peak.estimate is not None and engine == "vllm" else {})
    # a workload the requested devices cannot run (fit refused it: the 'cannot-fit' check) has no need per device:
    # sized without them it would be the whole model on one device (TP 1), printed as if per device of N
    unfitted = f_peak is None and "fit_error" in notes.facts
    # the one answer: fit's own estimate on the request's devices (its breakdown, totals, assumptions, warnings and
    # calibrated range, as `fit --json` gives them); sized without a device only where there is no fit (no hardware)
    need_est = (None if unfitted else
                f_peak.estimate if f_peak is not None and f_peak.estimate is not None else
                _need(spec, engine, fmt_used, ctx_peak, per_rep_peak, out_peak, tp, job, on_cpu, batch, device))
    if need_est is not None and f_peak is not None:  # its degree and load share are fit's, named so (not as given)
        need_est = as_fit_chose(need_est, job.tensor_parallel is not None, conc_peak, replicas)
    # what fit's verdict compares (estimate/fit.py verdict_need): a pool engine's workload share of its pool
    # (workload_bytes) against what the pool offers it (workload_budget_bytes); else the memory per device
    need = _verdict_need(need_est, on_cpu)
    pool = f_peak is not None and f_peak.estimate is not None and \
        str(f_peak.estimate.details.get("verdict_basis", "")).endswith("-admission")
    # each sequence's tokens: the text context, plus what the request's images and video add (estimate's details)
    media_tokens = _media_tokens(need_est)
    # labels in fit's words (render/fit_text.py memory_words, the summary's line): under a pool engine "this workload
    # needs" (of what the pool offers), else fit's "memory per device"
    need_words = "this workload needs" if pool else "memory per device"
    mem.add("need_peak", f"{need_words} at peak ({per_rep_peak} x {_tokens_words(ctx_peak, media_tokens)} per "
            f"replica{_sized_for(need_est, per_rep_peak)})",
            need, "B",
            ("what the verdict compares, fit's verdict_need_per_device: the workload's share of the engine's pool "
             "(weights + activations + runtime + the KV cache these sequences need)" if pool else
             "weights + KV cache + activations + runtime (estimate_inference); fit's memory_per_device"),
            "estimate/inference/vllm.py, sglang.py (workload_bytes)" if pool else "estimate/inference/compose.py")
    if pool and f_peak is not None and f_peak.estimate is not None:
        mem.add("memory_per_device", "memory per device (the breakdown's total: fit's memory_per_device)",
                f_peak.memory_per_device, "B", "the estimate's device total: the engine's pool + the CUDA context "
                "where it starts (docs/nomenclature.md memory_per_device)", "estimate/fit.py (memory_per_device)")
        if "reserved_bytes" in f_peak.estimate.details:
            mem.add("reserved", f"reserved per device ({ENGINE_NAMES.get(engine, engine)} takes its pool whatever the "
                    "load)", int(f_peak.estimate.details["reserved_bytes"]), "B",
                    "the engine's pool + runtime outside it, once started (reserved_bytes, fit's reserved_per_device: "
                    "never the weights and activations beyond the pool of an engine that does not start)",
                    "estimate/inference/vllm.py, sglang.py")
    typ_est = f_typ.estimate if f_typ is not None and f_typ.estimate is not None else None
    need_typ_est = None if unfitted else typ_est or _need(spec, engine, fmt_used, ctx_typ,
                                                          per_replica(conc_typ, replicas), out_typ, tp, job, on_cpu,
                                                          batch, device)
    need_typ = _verdict_need(need_typ_est, on_cpu)
    per_rep_typ = per_replica(conc_typ, replicas)
    mem.add("need_typical", f"{need_words} at typical load ({per_rep_typ} x {_tokens_words(ctx_typ, media_tokens)}"
            f" per replica{_sized_for(need_typ_est, per_rep_typ)})", need_typ, "B",
            "as at peak, at the typical load on the peak's layout (fit at the typical load)")
    usable = hw.memory_per_device
    # the margin the verdict keeps (estimate/verdict.py margin_rule: llama.cpp on a GPU its --fit-target)
    margin = margin_rule(engine, "cpu" if on_cpu else "gpu", job.resources.headroom,
                         engine_settings(job, engine).get("fit_target"))
    # fit's budget_per_device (the device budget; a pool engine's device memory), what the breakdown is drawn against
    device_budget = f_peak.budget_per_device if f_peak else (margin.budget(usable) if usable else None)
    budget_dev = device_budget
    mem.add("usable", "device memory", usable, "B", "resources.memory" if job.resources.memory else "catalog")
    if pool and f_peak is not None and f_peak.estimate is not None \
            and "workload_budget_bytes" in f_peak.estimate.details:
        # vLLM/SGLang: what the engine's pool offers the workload (the need above is compared with it), not the
        # device memory less the headroom
        budget_dev = f_peak.estimate.details["workload_budget_bytes"]
    mem.add("budget", f"what {ENGINE_NAMES.get(engine, engine)}'s pool offers per device (the budget)" if pool
            else "budget per device", budget_dev, "B",
            pool_budget_words(ENGINE_NAMES.get(engine, engine)) if pool
            else margin.words("device memory"),
            "estimate/inference/vllm.py, sglang.py (workload_budget_bytes)" if pool
            else "estimate/verdict.py eq. (1)" if margin.fixed is None else "estimate/verdict.py eq. (1')")
    # a pipeline's stages each hold their own layers' adapter slots (lora_slot_bytes): tp is the devices of one
    # replica, fit's tensor parallelism x its stages
    adapters = _adapters(job, spec, src, tp, notes, pipeline_of(job, f_peak).get("pipeline_parallel", 1), engine)
    if adapters["mode"] == "dynamic":
        mem.add("adapter_slots", f"LoRA adapter slots ({adapters['slots']} x rank {adapters['rank']})",
                adapters["slot_bytes"], "B", "slots x LoRA params on every linear x 2 B, on one TP rank by layer kind: column layers keep A whole, "
                "row layers keep B whole (formulas/lora.py eq. 4; vLLM --max-loras, --max-lora-rank, "
                "--fully-sharded-loras); with pipeline stages, those of the binding stage's layers", "vLLM lora/models.py LoRAModelManager")
    fits = f_peak.fits if f_peak else None
    if f_peak is not None and adapters["mode"] == "dynamic" and adapters["slot_bytes"] and usable:
        try:
            f_dyn = _fit(spec, fit_target, fit_count, job, fmt_used, engine, ctx_peak, conc_peak,
                         out_peak, ctx.hardware_files, usable - adapters["slot_bytes"], f_peak, per_node=fit_per_node)
            fits = f_dyn.fits
            f_peak = f_dyn
        except InputError:
            pass
    mem.add("fits", "peak load fits", fits, "bool", f_peak.reasons[0] if f_peak and f_peak.reasons else "")
    if f_peak is not None and f_peak.estimate is not None and "max_concurrency_at_context" in f_peak.estimate.details:
        _pool_figures(mem, f_peak.estimate.details, ENGINE_NAMES.get(engine, engine),
                      _tokens_words(ctx_peak, media_tokens), per_replica(conc_peak, replicas))
    split = need_est.details.get("split") if need_est else None
    staged = hw.pipeline_parallel > 1  # each replica TP x PP devices: the estimate answers for its binding stage
    w_dev = (max(int(d["weights"]) for d in split["devices"] if d["device"] != "host") if split else
             need_est.details.get("weights_bytes") if need_est else None)
    mem.add("weights", "weights per device", w_dev, "B",
            f"{fmt_used}" + ((f", the fullest GPU of a {tp}-GPU split" if split else f", / TP {tp}") if tp > 1 and not staged
                             else f", the binding one of {hw.pipeline_parallel} pipeline stages, / TP {hw.tensor_parallel}"
                             if staged else ""))
    # fit's names (docs/nomenclature.md): the estimate's device total and budget, a pool engine's reservation, and what
    # the verdict compared (the workload's need; capacity books memory_per_device, what the engine takes); memory_need / memory_budget: deprecated aliases
    # of the verdict's two, kept for one release
    notes.facts.update({"fits": fits,
                        "memory_per_device": f_peak.memory_per_device if f_peak is not None else need,
                        "budget_per_device": f_peak.budget_per_device if f_peak is not None else device_budget,
                        **(pool_reserved(f_peak.estimate) if f_peak is not None and f_peak.estimate is not None
                           else {}),
                        "verdict_need_per_device": need, "verdict_budget_per_device": budget_dev,
                        # what binds fit's verdict (FitResult.binding) and the window the engine refuses: the basis
                        # of the error check's remedy and the capacity check's binding constraint
                        "binding": f_peak.binding if f_peak is not None and fits is False else None,
                        "refused_window": f_peak.refused_window if f_peak is not None else None,
                        "memory_need": need, "memory_budget": budget_dev, "weights_format": fmt_used,
                        # fit's answer to a peak rate the deployment does not carry (its memory may fit)
                        # fit's warnings of a peak rate (estimate/rate_capacity.py rate_warnings): plan's checks
                        "rate_warnings_peak": dict(f_peak.details.get("rate_warnings") or {}) if f_peak is not None
                        else {},
                        # fit's first token past the attention limit at the peak concurrency (estimate/fit.py
                        # slow_first_token; at a rate: rate_warnings_peak's)
                        "slow_first_token_peak": f_peak.details.get("slow_first_token") if f_peak is not None
                        else None,
                        **({"rate_refusal": f_peak.reasons[0]} if f_peak is not None and
                           "rate_capacity" in f_peak.details else
                           {"rate_refusal": stated_refusal} if stated_refusal else {})})
    if not fits and f_peak is not None and f_peak.fits_at:  # fit's hint, the one rule (recommend.py fits_at)
        from ..render.fit_text import fits_at_line
        notes.facts["fits_at"] = f_peak.fits_at
        # the engine refuses the context: the fix is said once, as the service-does-not-fit check's advice
        # (plan/checks.py _does_not_fit_remedy, the same window_remedy), not again as the job's hint
        if "window" not in f_peak.fits_at:
            # (only engine settings fit, no format: estimate/fit.py engine_settings_fit, the hint's flags alone)
            notes.advice.append(f"{fits_at_line(f_peak.fits_at, rerun=False)}" + (
                f"; in the request: quantization: {f_peak.fits_at['weights'].removeprefix('gguf:')}"
                + (f", engine: {f_peak.fits_at['engine']}" if not f_peak.fits_at["same_engine"] else "")
                if "weights" in f_peak.fits_at else ""))

    # ---- speed ----
    spd = Sec("speed", "Speed")
    sp_peak = f_peak.speed if f_peak else None
    sp_typ = f_typ.speed if f_typ else None
    # each figure is fit's speed estimate: loaded (serving_queue eqs. Q5b-Q9) where fit models the load, else idle
    loaded = sp_typ is not None and sp_typ.load is not None
    spd.add("ttft_typical", "time to first token, typical", sp_typ.ttft_seconds if sp_typ else None, "s",
            *(("requests arriving at random at traffic.requests_per_second (open arrivals, as `fit --request-rate`): "
               "the API server's residence, the wait for a running decode step and the prefill queue",
               "formulas/serving_queue.py eq. (Q10b)") if loaded and rates else
              ("at the typical load, arriving independently: the server's time per request H, the wait w for the "
               "running step and the queue R of every request's prompt (its own prefill included)",
               "formulas/serving_queue.py eqs. (Q6), (Q9a)") if loaded else
              ("prefill of one prompt (roofline)", "formulas/speed.py eqs. (2)-(3)")))
    spd.add("ttft_peak", "time to first token, peak load", sp_peak.ttft_seconds if sp_peak else None, "s")
    spd.add("tps_user_typical", "tokens/s per user, typical", sp_typ.tokens_per_second_per_user if sp_typ else None,
            "tokens/s",
            *(("one token per decode step, the steps stretched by the other requests' prefill chunks: t_d / (1 - u)",
               "formulas/serving_queue.py eq. (Q5b)") if loaded else
              ("decode step time at the typical concurrency", "formulas/speed.py eq. (4)")))
    spd.add("tps_user_peak", "tokens/s per user, peak", sp_peak.tokens_per_second_per_user if sp_peak else None,
            "tokens/s")
    # fit's total over its replicas (replicas beyond the users' add no tokens/s: fit's rule)
    agg_typ = f_typ.tokens_per_second_total if f_typ and f_typ.tokens_per_second_total else None
    spd.add("tps_total_typical", "output tokens/s in total, typical", agg_typ, "tokens/s",
            *(("every replica's requests/s x output tokens, each request's TTFT and stretched steps included",
               "formulas/serving_queue.py eq. (Q7)") if loaded else ()))
    # the engine release's host work per decode step, as fit applied it (estimate/engines.py step_host)
    if sp_peak is not None and any(a.name.endswith("_host_seconds_per_step") for a in sp_peak.assumptions):
        version = job.engine_version if engine == job.engine else None
        rule = step_host(engine, version, bool(job.engine_settings.async_scheduling) and engine == "vllm")
        if rule is not None:
            spd.add("engine_host_seconds_per_step", f"engine host time per decode step ({rule.versions}"
                    + (f", engine_version {version})" if version else ", the current release)"), rule.seconds or 0.0, "s",
                    f"{rule.mode}: " + ("added to every decode step (formulas/speed.py eq. 7)" if rule.mode == "serial"
                                        else "a decode step takes max(device, host) (formulas/speed.py eq. 14)")
                    + ("" if rule.established else "; not established, 0 s used"), "estimate/engines.py STEP_HOST")
    _speed_ranges(spd, sp_peak)
    queued = (f_peak.details.get("queued_sequences") if f_peak is not None and f_peak.fits
              and wait_before_ttft(f_peak.details) is not None else None)  # (at a rate the TTFT holds the wait)
    if queued and f_peak is not None:  # above the engine's running cap the rest of the users wait (fit's queue, one answer)
        spd.add("queue_wait_peak", "wait for a running slot, peak (queued requests)",
                f_peak.details.get("queue_wait_seconds"), "s",
                f"{queued} of {conc_peak} requests per machine above the engine's running cap "
                "(estimate/inference/common.py eq. R1) wait W x (C / R - 1)", "formulas/serving_queue.py eq. (Q3)")
    spd.add("ttft_required", "time to first token required", job.latency.ttft, "s", "latency.ttft")
    spd.add("tps_user_required", "tokens/s per user required", job.latency.tokens_per_second_per_user, "tokens/s")
    # the first token of a request at peak, as recommend checks it: TTFT plus the queued wait (eq. Q3), one helper
    wait_peak = f_peak.details.get("queue_wait_seconds") if queued and f_peak is not None else None
    notes.facts.update({"ttft_peak": sp_peak.ttft_seconds if sp_peak else None,
                        "first_token_peak": first_token_seconds(sp_peak.ttft_seconds if sp_peak else None, wait_peak),
                        "queue_wait_peak": wait_peak,
                        "tps_user_peak": sp_peak.tokens_per_second_per_user if sp_peak else None})

    # ---- network ----
    # the requests in service: above the engine's running cap the others wait and add no requests/s (eq. Q1)
    net = _network(job, sp_typ, sp_peak, conc_typ, conc_peak, ctx_typ, ctx_peak, out_typ, out_peak, notes,
                   {"typical": _in_service(f_typ, conc_typ), "peak": _in_service(f_peak, conc_peak)},
                   need_est)
    if hw is not None and hw.nodes > 1 and hw.copy_nodes > 1 and hw.node_bandwidth is not None:
        # a copy spans machines: its TP all-reduces or pipeline sends cross them, timed over this network (fit's
        # ``network``, estimate/fit.py node_network); the network a placement's fabric must give (provider/needs.py)
        net.add("node_bandwidth", "network of each machine", hw.node_bandwidth, "B/s",
                "resources.network or the instance's network: one copy of the model spans machines")
    # ---- storage ----
    st = _storage(job, spec, fmt_used, adapters, net, notes)
    # ---- cost ----
    cost = _cost(job, req, hw, agg_typ, notes)
    # ---- operations ----
    ops = _operations(job)

    charts = _charts(job, spec, engine, fmt_used, tp, ctx_peak, conc_peak, out_peak, budget_dev, on_cpu, hw, cost,
                     options, batch, device, fits)
    media = _media_figures(job, need_est,
                           ctx_peak, mem)
    summary = (f"serving {spec.name} ({format_count(pc.total)} params, {fmt_used}, {engine}) on {hw.label}; peak "
               f"{conc_peak} request{'' if conc_peak == 1 else 's'}"
               + _rate_flight(f_peak if rates else None, media or f"{ctx_peak} tokens"))
    _advice(job, spec, src, adapters, fmt_used, engine, cost, notes, owned=owned_hardware(hw, job.resources),
            device=device)
    # the plan's own assumptions, then every one of fit's (its own, its memory estimate's and its speed estimate's:
    # FitResult.all_assumptions, as `fit` prints them), each name once: what the request gives (context, ...) is said
    # by the plan; the engine the settings imply is said once, as implied
    own = {a.name for a in notes.assumptions} | ({"output_tokens"} if any(a.name == "output" for a in notes.assumptions)
                                                 else set())  # the plan's `output` is fit's `output_tokens`
    fitted = tuple(a for a in (f_peak.all_assumptions if f_peak else ()) if a.name not in own
                   and not (a.name == "engine" and implied is not None))
    return JobPlan(job.name, "inference", spec.name, summary, hw,
                   (mem.build(), spd.build(), st.build(), net.build(), cost.build(), ops.build()), need_est,
                   tuple(notes.assumptions) + fitted,
                   # the fit's every warning, its speed estimate's too (as fit and recommend print them)
                   tuple(dict.fromkeys(tuple(notes.warnings) + (f_peak.all_warnings if f_peak else ()))),
                   tuple(notes.advice), charts,
                   tuple(options), dict(notes.facts), speed=sp_peak)


def _speed_ranges(spd: Sec, sp: Any) -> None:
    """The peak speed estimate's calibrated ranges (estimate/ranges.py, ``SpeedEstimate.calibrated_ranges``), each with
    the rate it brackets and its coverage in the words `fit` prints under its speed table (render/text.py
    ``coverage_lines``); nothing for a rate without a range."""
    if sp is None:
        return
    from ..render.text import coverage_lines
    cov = sp.range_coverage
    if sp.tokens_per_second is not None:  # the output a replica delivers at the peak load (loaded where modelled)
        spd.add("tokens_per_second_peak", "output tokens/s per replica, peak", sp.tokens_per_second, "tokens/s",
                "fit's speed estimate at the peak load (speed.tokens_per_second"
                + (": requests/s x output tokens, formulas/serving_queue.py eq. Q7)" if sp.load else ")"),
                "estimate/speed.py")
    for key, label, rate, rng, c in (
            ("prefill_tokens_per_second", "prefill", sp.prefill_tokens_per_second, sp.prefill_range,
             cov["prefill_tokens_per_second"]),
            ("decode_tokens_per_second", "decode only (no prompts)", sp.decode_tokens_per_second, sp.decode_range,
             cov["decode_tokens_per_second"])):
        if rng is None or rate is None:
            continue
        spd.add(f"{key}_peak", f"{label} tokens/s per replica, peak", rate, "tokens/s",
                f"fit's speed estimate at the peak load (speed.{key})", "estimate/speed.py")
        spd.add(f"{key}_range_peak", f"{label} tokens/s per replica, peak: calibrated range",
                f"{rng[0]:,.1f}-{rng[1]:,.1f} tokens/s", "text",
                "; ".join(x.strip() for x in coverage_lines(c, f"{label} range")) if c else "",
                "estimate/ranges.py (speed.calibrated_ranges)")


def _pool_figures(mem: Sec, d: dict[str, Any], engine: str, tokens: str, in_flight: int) -> None:
    """A pool engine's two counts at peak, per replica, read from its fit's estimate (the numbers ``infer --json``
    gives in ``details``): the sequences its KV pool has room for (``max_concurrency_at_context``:
    estimate/inference/vllm.py pool / KV per sequence, sglang.py max_total_num_tokens / context) and the sequences it
    runs at once (``running_sequences``: estimate/inference/common.py eq. R1, min(in flight, its running cap, the
    pool's room)); the rest of the ``in_flight`` wait in its queue."""
    room, running, cap = int(d["max_concurrency_at_context"]), int(d["running_sequences"]), d.get("running_cap")
    queued = running_and_queued(in_flight, running)[1]
    mamba = binding_pool(d)  # SGLang's MambaPool binds (sglang.py eq. 4b)
    mem.add("kv_room", f"sequences of {tokens} the {mamba or 'KV pool'} has room for per "
            "replica", room, "count",
            f"{engine} {mamba}: max_mamba_cache_size {d.get('max_mamba_cache_size')} // "
            f"{d.get('mamba_requests_ratio')} state slots per running request, fewer than its token pool's "
            f"{d.get('token_pool_room')}" if mamba else f"{engine} KV pool / KV per sequence",
            "estimate/inference/vllm.py, sglang.py (max_concurrency_at_context)")
    bounds = f"{in_flight} in flight" + (f", {d.get('running_cap_name', 'running cap')} {int(cap)}" if cap is not None
                                         else "") + f", pool room {room}"
    mem.add("running", f"sequences {engine} runs at once per replica at peak"
            + (f" (the other {queued} of {in_flight} wait in its queue)" if queued else ""),
            running, "count", f"min({bounds})", "estimate/inference/common.py eq. R1 (running_sequences)")


def _rate_flight(f: FitResult | None, tokens: str) -> str:
    """' x TOKENS' after the peak's request count, and at a request rate where some wait for admission, that count
    named as those running (fit's ``running_sequences``) and the requests in flight over all replicas split into
    those running and those waiting for admission (``queued_sequences``), in fit's words (render/text.py
    ``in_flight_words``; probe33 D5: 'peak 206 requests x 4096 tokens' read as all 229 in flight)."""
    from ..render.text import in_flight_words  # the sentence fit's rate row says (as coverage_lines, below)
    load = f.speed.load if f is not None and f.speed is not None else None
    waiting = float(f.details.get("queued_sequences") or 0.0) if f is not None else 0.0
    if f is None or not load or "in_flight" not in load or waiting < 0.05:
        return f" x {tokens}"
    where = " over all replicas" if f.replicas > 1 else ""
    return (f" running x {tokens} (" + in_flight_words(float(load["in_flight"]) * f.replicas,
                                                        int(f.details["running_sequences"]), waiting, where) + ")")


def _sized_for(est: Estimate | None, in_flight: int) -> str:
    """Words for a need sized for fewer sequences than are in flight: the engine runs at most its running cap and
    the estimate sizes memory for min(in flight, cap) (its ``need_sequences``, estimate/inference/compose.py; fewer
    than that run when the pool is the limit, which is 'does not fit'); '' when every sequence runs."""
    sized = est.details.get("need_sequences") if est is not None else None
    return f", memory for the {int(sized)} run at once with room" if sized is not None and sized < in_flight else ""


def _media_tokens(est: Estimate | None) -> int | None:
    """The image/video tokens each sequence holds beside its text (estimate/inference/media.py); None: none."""
    return int(est.details["media_tokens"]) if est is not None and "media_tokens" in est.details else None


def _tokens_words(text: int, media: int | None) -> str:
    return f"{text} tokens" if not media else f"({text} text + {media} image/video) tokens"


def _media_figures(job: InferenceJob, est: Estimate | None, ctx_peak: int, mem: Sec) -> str:
    """The peak context split into its text tokens and the tokens the request's images and video add to each
    sequence (estimate/inference/media.py, the estimate's own details), as figures of the memory section and as the
    words the job's summary says them in; '' for a request without media. Without an estimate (no fit) the media
    are named but their tokens are not known."""
    m = job.media
    if not m.images and not m.video_frames:
        return ""
    d = est.details if est is not None else {}
    mem.add("context_text", "text tokens per sequence at peak", ctx_peak, "tokens", "traffic.context")
    parts = []
    if m.images:
        each = d.get("image_tokens_each")
        mem.add("image_tokens", f"image tokens per sequence ({m.images} image(s))",
                m.images * int(each) if each is not None else None, "tokens",
                f"{m.images} x {each} tokens per image" if each is not None else "not sized (no estimate)",
                "estimate/inference/media.py, formulas/vision_tokens.py")
        parts.append(f"{m.images} x {each:,} image" if each is not None else f"{m.images} image(s)")
    if m.video_frames:
        video = d.get("video_tokens")
        mem.add("video_tokens", f"video tokens per sequence ({m.video_frames} frames)", video, "tokens",
                "" if video is not None else "not sized (no estimate)",
                "estimate/inference/media.py, formulas/vision_tokens.py")
        parts.append(f"{video:,} video" if video is not None else f"a video of {m.video_frames} frames")
    total = d.get("context_with_media")
    mem.add("context_with_media", "tokens per sequence the KV cache holds at peak (text + media)", total, "tokens",
            "text + image/video tokens", "estimate/inference/media.py")
    media = " + ".join(parts)
    return (f"({ctx_peak:,} text + {media} tokens = {int(total):,} tokens)" if total is not None
            else f"({ctx_peak:,} text tokens + {media}, their tokens not sized)")


def _in_service(f: FitResult | None, concurrency: int) -> int:
    """The requests the devices serve at once of ``concurrency`` (fit's ``running_sequences``:
    ``running_sequences``: estimate/inference/common.py eq. R1); the rest wait in the engines' queues."""
    running = f.details.get("running_sequences") if f is not None else None
    return running_and_queued(concurrency, None if running is None else int(running))[0]


def _need(spec: ModelSpec, engine: str, fmt: str, context: int, concurrency: int, output: int, tp: int,
          job: InferenceJob, on_cpu: bool, batch: dict[str, Any] | None = None,
          device: Device | None = None) -> Estimate | None:
    """What the workload needs on one device of a replica (no memory budget, so vLLM reports its need).
    ``batch``: vLLM's max_num_seqs / max_num_batched_tokens as the fit on the device applied them (vLLM's defaults
    depend on the GPU's memory, which this estimate is not given); ``device``: the GPU the replica runs on, whose
    runtime and CUDA capability the workload takes as `infer --device` puts them there (estimate/device.py
    ``inference_device_fields``: vLLM's router dtype), its memory not."""
    gpu = ({k: v for k, v in inference_device_fields(device).items() if k in ("gpu_runtime", "gpu_capability")}
           if device is not None and not on_cpu else {})
    try:
        return estimate_inference(spec, engine=engine, weights=fmt, context=context, concurrency=max(1, concurrency),
                                  output_tokens=output, **split_or_tp(engine, tp, on_cpu),
                                  kv_dtype=job.kv_cache_dtype, dtype=job.precision, device="cpu" if on_cpu else "gpu",
                                  **gpu, **job.media.fields(), **{**engine_settings(job, engine), **(batch or {})})
    except InputError:
        return None


def _verdict_need(est: Estimate | None, on_cpu: bool) -> int | None:
    """The need per device ``est``'s verdict compares (estimate/fit.py ``verdict_need``: a pool engine's workload
    share of its pool, else the memory per device), also for an estimate sized without a device (no budget); None
    without an estimate."""
    if est is None:
        return None
    return verdict_need(est, on_cpu)[0] if "memory_budget" in est.details else need_per_device(est, on_cpu)[0]


def split_or_tp(engine: str, devices: int, on_cpu: bool) -> dict[str, Any]:
    """The devices of one replica as the engine uses them: llama.cpp splits the model (gpus), the others shard it."""
    if llamacpp_layer_split(engine, devices) and not on_cpu:
        return {"gpus": devices}
    return {} if engine == "llamacpp" else {"tensor_parallel": devices}


def refuse_fully_sharded(rank: int, tp: int, hidden_size: int) -> None:
    """One line where vLLM's ``--fully-sharded-loras`` cannot split the adapter slots over ``tp`` ranks. vLLM 0.19.1
    divides with ``vllm/distributed/utils.py`` ``divide`` (lines 53-64: ``assert numerator % denominator == 0``, a
    failed start): a column-parallel layer's lora_a rows, ``divide(max_lora_rank, tp_size)``
    (``vllm/lora/layers/base_linear.py`` lines 47-52, ``column_parallel_linear.py`` lines 209-213, the fused experts'
    ``fused_moe.py`` lines 362-366), and a row-parallel layer's lora_b rows, ``divide(output_size, tp_size)``, the
    hidden size of o_proj / down_proj (``base_linear.py`` lines 55-61; the experts' w2, ``fused_moe.py`` 407)."""
    if tp <= 1:
        return
    if rank % tp:
        raise FieldError("fully_sharded", also=("rank",), message=(
            f"fully_sharded: vLLM --fully-sharded-loras splits each adapter's rank over the {tp} tensor-parallel "
            f"ranks, and rank {rank} is not a multiple of {tp} (vllm 0.19.1 lora/layers/base_linear.py lines 47-52: "
            "divide(max_lora_rank, tp_size) asserts it); give a rank that is, or drop fully_sharded"))
    if hidden_size % tp:
        raise FieldError("fully_sharded", message=(
            f"fully_sharded: vLLM --fully-sharded-loras splits o_proj / down_proj adapters' outputs (hidden size "
            f"{hidden_size}) over the {tp} tensor-parallel ranks, and {hidden_size} is not a multiple of {tp} "
            "(vllm 0.19.1 lora/layers/base_linear.py lines 55-61: divide(output_size, tp_size)); drop fully_sharded"))


def _adapters(job: InferenceJob, spec: ModelSpec, src: TrainingJob | None, tp: int, notes: JobNotes, pp: int = 1,
              engine: str = "vllm") -> dict[str, Any]:
    """The job's LoRA adapters: mode, slots and the device bytes of the slots on each of the replica's ``tp``
    devices (``pp`` of them pipeline stages, each sized for its own layers: ``lora_slot_bytes``)."""
    a = job.adapters
    peft_src = src is not None and src.method != "full"
    if a.mode is None and a.count is None and not peft_src:
        return {"mode": None, "slots": 0, "rank": 0, "slot_bytes": 0, "count": 0}
    mode = a.mode or "merged"
    if a.mode is None:
        notes.assumptions.append(Assumption("adapters.mode", "merged", True, "the adapter from the training job is "
                                            "merged into the weights unless adapters.mode says dynamic"))
    rank = a.rank or (src.peft.rank if src is not None and src.peft.rank else VLLM_DEFAULT_MAX_LORA_RANK)
    count = a.count or 1
    slots = a.max_loaded or min(count, VLLM_DEFAULT_MAX_LORAS) if mode == "dynamic" else 0
    sharded = a.fully_sharded  # vLLM --fully-sharded-loras (SGLang has none: refused in the request reader)
    if sharded and mode == "dynamic":
        refuse_fully_sharded(rank, tp // pp, spec.hidden_size)
    slot_bytes = lora_slot_bytes(spec, rank, slots, tp // pp, pp, engine, sharded) if mode == "dynamic" else 0
    return {"mode": mode, "slots": slots, "rank": rank, "slot_bytes": slot_bytes, "count": count,
            # one slot on one device (the advice's "device memory per adapter slot"), and one adapter's file, whole
            # (the stored adapter is not split over the devices that load it: storage's adapter_files)
            "per_adapter_dynamic": lora_slot_bytes(spec, rank, 1, tp // pp, pp, engine, sharded),
            "per_adapter_file": lora_slot_bytes(spec, rank, 1)}


def _inline_images(job: InferenceJob, est: Estimate | None) -> tuple[float | None, str]:
    """(bytes, words) of the images one request carries inline (formulas/network.py eq. 10': base64 JPEG data URLs
    at N.JPEG_BITS_PER_PIXEL), at the size the estimate took (given, or the encoder's input size); (0, '') without
    images; (None, why) when the size is not known (no estimate). Video is not counted, and the words say so."""
    m = job.media
    video = f" (the video's {m.video_frames} frames not counted: a video file's codec is not modelled)" \
        if m.video_frames else ""
    if not m.images:
        return 0.0, video
    d = est.details if est is not None else {}
    if "image_width" not in d:
        return None, f" + {m.images} image(s) not sized (no estimate){video}"
    w, h = int(d["image_width"]), int(d["image_height"])
    each = N.inline_image_bytes(w, h)
    return float(m.images * each), (f" + {m.images} image(s) of {w}x{h} x {each:,} B (base64 JPEG at "
                                    f"{N.JPEG_BITS_PER_PIXEL:g} bits/pixel, eq. 10'){video}")


def _network(job: InferenceJob, sp_typ: Any, sp_peak: Any, conc_typ: int, conc_peak: int, ctx_typ: int,
             ctx_peak: int, out_typ: int, out_peak: int, notes: JobNotes, served: dict[str, int] | None = None,
             est: Estimate | None = None) -> Sec:
    """The network section; ``served``: the requests in service at each level (the rest queue above the engine's
    running cap: ``_in_service``), the in-flight concurrency where not given; ``est``: the estimate whose image size
    the inline images are sized at (``_inline_images``)."""
    served = served or {}
    net = Sec("network", "Network")
    media_bytes, media_words = _inline_images(job, est)
    stream = job.access.stream if job.access.stream is not None else True
    if job.access.stream is None:
        notes.assumptions.append(Assumption("access.stream", True, True, "chat services stream tokens"))
    rates: dict[str, float | None] = {}
    for level, conc, ctxl, out, sp in (("typical", conc_typ, ctx_typ, out_typ, sp_typ),
                                       ("peak", conc_peak, ctx_peak, out_peak, sp_peak)):
        given = getattr(job.traffic.requests_per_second, level)
        # (the closed model: what conc requests carry, at the serving model's request time W, eq. Q7's R: the one
        # W fit's rate path solves Little's law with, formulas/serving_queue.py eq. Q10c)
        w_load = (float(sp.load["request_seconds"]) if sp is not None and sp.load is not None
                  and "request_rate" not in sp.load and sp.load.get("request_seconds") else None)
        carried = N.littles_law_rate(served.get(level, conc), w_load) if w_load else None
        if given is not None and carried is not None and given > carried and not (
                level == "peak" and notes.facts.get("rate_refusal")):  # (past the capacity: the error check says it)
            # both given: the closed model at the stated concurrency, the rate it cannot carry said (Little's law)
            notes.warnings.append(
                f"traffic.requests_per_second.{level} {given:g}/s is more than the {carried:.3g} requests/s "
                f"traffic.concurrency.{level} {conc} carries ({served.get(level, conc)} in service / "
                f"{w_load:.3g} s per request, Little's law over the serving model's request time, "
                f"formulas/serving_queue.py eq. Q7): the plan is sized for {conc} in flight; at {given:g}/s more "
                "would queue. Give the rate alone (no traffic.concurrency) to size the service for it")
        if given is not None:
            rate, how = given, "traffic.requests_per_second"
        elif sp is not None and sp.request_seconds is not None:
            w = sp.request_seconds  # the fit's speed at the sequences each replica runs (estimate/speed.py)
            in_service = served.get(level, conc)  # above the engine's running cap the others wait (eq. Q1)
            rate = N.littles_law_rate(in_service, w)
            batch = f"the prefill of the {sp.concurrency} prompts each replica has in service together, " \
                "estimate/speed.py eq. P1"
            held = (f"no output: {batch}" if not out else
                    f"{batch}, longer than TTFT + {out} tokens at the decode speed" if w == sp.prefill_batch_seconds()
                    else f"TTFT + {out} tokens at the decode speed")
            how = (f"Little's law: {in_service} in service / {w:.3g} s per request ({held})"
                   + (f"; the other {conc - in_service} of {conc} wait in the engine's queue "
                      "(formulas/serving_queue.py eq. Q1)" if in_service < conc else ""))
        else:
            rate, how = None, "unknown: give traffic.requests_per_second"
        rates[level] = rate
        net.add(f"requests_{level}", f"requests per second, {level}", rate, "1/s", how, "formulas/network.py eq. (9)")
        prompt = max(0, ctxl - out)
        net.add(f"ingress_{level}", f"traffic in, {level}",
                N.ingress_bytes_per_second(rate, prompt, media_bytes=media_bytes)
                if rate and media_bytes is not None else None,
                "B/s", f"rate x ({prompt} prompt tokens x {S.TEXT_BYTES_PER_TOKEN:g} B{media_words} + "
                f"{N.REQUEST_OVERHEAD_BYTES} B envelope)", "formulas/network.py eqs. (10), (10')")
        per_tok = N.STREAM_BYTES_PER_TOKEN if stream else S.TEXT_BYTES_PER_TOKEN
        net.add(f"egress_{level}", f"traffic out, {level}",
                N.egress_bytes_per_second(rate, out, stream) if rate else None, "B/s",
                f"rate x ({out} tokens x {per_tok:g} B{' per streamed chunk' if stream else ''} + "
                f"{N.RESPONSE_OVERHEAD_BYTES} B envelope)", "formulas/network.py eq. (10)")
    hours = P.service_hours_per_month(*job.service.hours_up)
    r = rates["typical"]
    if r:
        month_in = (N.ingress_bytes_per_second(r, max(0, ctx_typ - out_typ), media_bytes=media_bytes) * hours * 3600
                    if media_bytes is not None else None)
        month_out = N.egress_bytes_per_second(r, out_typ, stream) * hours * 3600
        net.add("month_in", "traffic in per month (typical)", month_in, "B_disk", f"x {hours:,.0f} service hours")
        net.add("month_out", "traffic out per month (typical)", month_out, "B_disk", f"x {hours:,.0f} service hours")
    notes.facts["requests_per_second"] = r
    a = job.access
    net.add("access_method", "access method", a.method, "text", "access.method")
    net.add("clients", "who connects", a.clients, "text", "access.clients")
    net.add("isolation", "network isolation", a.isolation, "text", "access.isolation")
    net.add("fixed_address", "fixed address needed", a.fixed_address, "bool", "access.fixed_address")
    if a.fixed_address:
        net.note("one fixed address for the service endpoint (a load balancer in front of the replicas), kept "
                 "across maintenance and redeployments")
    if a.allowlist:
        net.add("allowlist", "allowed networks", ", ".join(a.allowlist), "text", "access.allowlist")
    if a.isolation in ("dedicated-network", "air-gapped"):
        net.note(f"isolation '{a.isolation}': model files, images and updates must be brought in without internet "
                 "access" if a.isolation == "air-gapped" else "isolation 'dedicated-network': no shared tenancy on "
                 "the network path")
    return net


def _storage(job: InferenceJob, spec: ModelSpec, fmt: str, adapters: dict[str, Any], net: Sec, notes: JobNotes) -> Sec:
    st = Sec("storage", "Storage")
    parts: dict[str, int] = {}
    stored = stored_format(spec)[0] if spec.file_weights is None else fmt
    w, mtp = stored_file_bytes(spec, fmt, GROUP_SIZE_DEFAULT)
    how_files = f"weights in {fmt}"
    if mtp:
        how_files += (f", with the checkpoint's {spec.mtp_layers} multi-token-prediction layer(s), "
                      f"{format_bytes(mtp, binary=False)}, which serving does not load")
    if fmt != stored and normalize_format(fmt) != normalize_format(stored):  # (a model read from its files: "file")
        # the served format's file, downloaded ready-made (as GGUF / AWQ / GPTQ builds are published); converting it
        # yourself keeps the stored checkpoint on disk while the converter runs, which is not counted
        how_files += (f" (the served file only, downloaded ready-made; converting it here from the {stored} "
                      f"checkpoint also needs that checkpoint, "
                      f"{format_bytes(stored_file_bytes(spec, stored, GROUP_SIZE_DEFAULT)[0], binary=False)}, while the converter runs)")
        notes.assumptions.append(Assumption("storage.model_files", f"the {fmt} file only", True,
                                            f"served in {fmt}, stored as {stored}: the ready-made {fmt} file is "
                                            "downloaded, no conversion on this storage"))
    st.add("model_files", "model files", w, "B_disk", how_files,
           "formulas/weight_formats.py" + (", formulas/mtp.py eq. (2)" if mtp else ""))
    parts["model_files"] = w
    if adapters["mode"] == "dynamic":
        ab = adapters["count"] * adapters["per_adapter_file"]
        st.add("adapter_files", "adapter files", ab, "B_disk", f"{adapters['count']} adapters of rank "
               f"{adapters['rank']}", "formulas/storage.py eq. (9)")
        parts["adapter_files"] = ab
    elif adapters["mode"] == "merged" and adapters["count"] > 1:
        extra = (adapters["count"] - 1) * (w - mtp)  # a merged model saved by transformers holds no MTP layers
        st.add("merged_copies", "further merged models", extra, "B_disk", f"{adapters['count'] - 1} more merged copies")
        parts["merged_copies"] = extra
    rate = notes.facts.get("requests_per_second")
    lg = job.operations.logs
    retention = lg.retention if lg.retention is not None else DEFAULT_LOG_RETENTION
    if lg.retention is None:
        notes.assumptions.append(Assumption("operations.logs.retention", f"{DEFAULT_LOG_RETENTION / 86400:.0f} days", True,
                                            "no retention given: " + DEFAULT_LOG_RETENTION_REASON))
    hours = P.service_hours_per_month(*job.service.hours_up)
    busy = hours / HOURS_PER_MONTH
    per_req = S.REQUEST_LOG_BYTES
    how = f"{S.REQUEST_LOG_BYTES} B metadata per request"
    if lg.content:
        ctx_t = job.traffic.context.typical or job.traffic.context.worst or InferenceWorkload.context
        per_req += int(ctx_t * S.TEXT_BYTES_PER_TOKEN)
        how += f" + {ctx_t:g} tokens of text x {S.TEXT_BYTES_PER_TOKEN:g} B"
    logs = S.log_bytes(rate * retention * busy, per_req) if rate else 0
    st.add("logs", "request logs kept", logs, "B_disk", f"requests/s x retention x busy share x ({how})",
           "formulas/storage.py eq. (10)")
    parts["logs"] = logs
    sub = sum(parts.values())
    st.add("subtotal", "subtotal", sub, "B_disk")
    total = S.with_headroom(sub)
    st.add("total", "storage to provision", total, "B_disk", f"subtotal x (1 + {S.DISK_HEADROOM:g} headroom)",
           "formulas/storage.py eq. (11)")
    st.add("requested", "storage requested (resources.storage)", job.resources.storage, "B_disk")
    notes.facts["storage_total"] = total
    return st


def service_months(job: InferenceJob, notes: JobNotes) -> float:
    if job.service.duration is not None:
        return job.service.duration / 3600 / HOURS_PER_MONTH
    notes.assumptions.append(Assumption("service.duration", "12 months", True, "ongoing or not stated: costs are "
                                        "shown for 12 months"))
    return 12.0


def _cost(job: InferenceJob, req: Request, hw: Hardware, tps_total: float | None, notes: JobNotes) -> Sec:
    cost = Sec("cost", "Cost")
    price = hw.price_per_hour
    cost.add("price_per_hour", "price per hour", price, "USD/h", hw.price_basis)
    hpd, dpw = job.service.hours_up
    hours = P.service_hours_per_month(hpd, dpw)
    cost.add("service_hours_month", "service hours per month", hours, "count",
             f"730 x {hpd:g} h/day x {dpw:g} days/week / 168", "plan/pricing.py eq. (5)")
    months = service_months(job, notes)
    cost.add("months", "months of service", months, "count", "service.duration / 730 h")
    monthly = P.hourly_cost(price, hours) if price is not None else None
    cost.add("monthly_hourly", "per month, paid by the hour", monthly, "USD", "price x service hours",
             "plan/pricing.py eq. (2)")
    total = monthly * months if monthly is not None else None
    cost.add("hourly_total", "whole service, paid by the hour", total, "USD", "per month x months")
    u = P.busy_share(hours, HOURS_PER_MONTH)
    cost.add("busy_share", "busy share of a reservation", u, "share", "service hours / all hours",
             "plan/pricing.py eq. (1)")
    cost.add("break_even_discount", "reservation pays off above a discount of", P.break_even_discount(u), "share",
             "1 - busy share", "plan/pricing.py eq. (4)")
    discount = job.pricing.reserved_discount if job.pricing.reserved_discount is not None \
        else req.pricing.reserved_discount
    if discount is not None and price is not None:
        reserved_month = P.reserved_cost(price, discount, HOURS_PER_MONTH)
        cost.add("monthly_reserved", "per month, reserved", reserved_month, "USD",
                 f"price x (1 - {discount:.0%}) x 730 h", "plan/pricing.py eq. (3)")
        cost.add("reserved_total", "whole service, reserved", reserved_month * months, "USD")
    model = job.pricing.model or req.pricing.model or "undecided"
    cost.add("pricing_model", "pricing (request)", model, "text")
    cpm = cost_per_million_tokens(price, tps_total) if price is not None and tps_total else None
    cost.add("per_million_tokens", "per million output tokens (typical load)", cpm, "USD",
             "price / (tokens/s x 3600) x 10^6", "formulas/cost.py eq. (2)")
    cost.add("budget", "budget (job)", job.budget.total, "USD", "budget.total")
    cost.add("budget_month", "monthly budget (job)", job.budget.per_month, "USD", "budget.per_month")
    notes.facts.update({"cost_total": total, "cost_month": monthly, "price_per_hour": price, "months": months})
    return cost


def _operations(job: InferenceJob) -> Sec:
    ops = Sec("operations", "Service and operations")
    sv, op = job.service, job.operations
    ops.add("duration", "service duration", sv.duration, "s", "service.duration")
    ops.add("ongoing", "ongoing", sv.ongoing, "bool")
    ops.add("hours", "hours", "{:g} h/day, {:g} days/week".format(*sv.hours_up), "text")
    ops.add("availability", "availability target", sv.availability, "text")
    ops.add("interruptible", "interruptible periods", "; ".join(sv.interruptible) if sv.interruptible else None,
            "text")
    ops.add("maintenance_windows", "maintenance windows",
            "; ".join(sv.maintenance_windows) if sv.maintenance_windows else None, "text")
    ops.add("monitoring", "monitoring", op.monitoring, "text")
    ops.add("logs", "logs", f"{op.logs.location or 'location not stated'}"
            + (f", kept {op.logs.retention / 86400:g} days" if op.logs.retention else "")
            + (", prompts and outputs logged" if op.logs.content else ""), "text")
    ops.add("incident_contacts", "incident contacts",
            ", ".join(op.incident_contacts) if op.incident_contacts else None, "text")
    return ops


def _charts(job: InferenceJob, spec: ModelSpec, engine: str, fmt: str, tp: int, ctx_peak: int, conc_peak: int,
            out_peak: int, budget_dev: int | None, on_cpu: bool, hw: Hardware, cost: Sec,
            options: list[dict[str, Any]], batch: dict[str, Any] | None = None,
            device: Device | None = None, fits: bool | None = None) -> tuple[Chart, ...]:
    markers = (("device budget", float(budget_dev)),) if budget_dev else ()
    charts: list[Chart] = []
    top = max(2 * ctx_peak, 4096)
    if spec.max_position_embeddings:
        top = min(top, spec.max_position_embeddings)
    per_rep = per_replica(conc_peak, hw.replicas)
    pts = []
    for c in geometric_points(512, top, ctx_peak, 8):
        e = _need(spec, engine, fmt, c, per_rep, min(out_peak, c // 2), tp, job, on_cpu, batch, device)
        if e is not None:
            pts.append((float(c), float(need_per_device(e, on_cpu)[0])))
    charts.append(Chart(f"{job.name}-memory-context", f"{job.name}: memory per device vs context", "lines",
                        "context (tokens per request)", "memory per device", "B",
                        (Series(f"{per_rep} concurrent requests", tuple(pts)),), "tokens", markers=markers,
                        job=job.name, note=f"{engine}, {fmt}; peak context {ctx_peak}"))
    pts = []
    for n in geometric_points(1, max(2 * per_rep, 8), per_rep, 8):
        e = _need(spec, engine, fmt, ctx_peak, n, out_peak, tp, job, on_cpu, batch, device)
        if e is not None:
            pts.append((float(n), float(need_per_device(e, on_cpu)[0])))
    charts.append(Chart(f"{job.name}-memory-concurrency", f"{job.name}: memory per device vs concurrency", "lines",
                        "concurrent requests per replica", "memory per device", "B",
                        (Series(f"context {ctx_peak} tokens", tuple(pts)),), "requests", markers=markers,
                        job=job.name, note=f"peak concurrency {conc_peak}"))
    cats, vals = [], []
    monthly = cost.value("monthly_hourly")
    hours = cost.value("service_hours_month", HOURS_PER_MONTH)
    nofit = NOT_FITTING if fits is False else ""  # the plan's memory check (section memory, 'fits'), not redone here
    if monthly is not None:
        cats.append(f"request: {hw.label} (hourly{nofit})")
        vals.append(float(monthly))
    if cost.value("monthly_reserved") is not None:
        cats.append(f"request: {hw.label} (reserved{nofit})")
        vals.append(float(cost.value("monthly_reserved")))
    for o in options:
        if o.get("price_per_hour") is not None:
            cats.append(f"{o['hardware']} ({o['weights_format'].removeprefix('gguf:')})")  # devices_text, as training's
            vals.append(float(o["price_per_hour"]) * hours)
    if cats:
        charts.append(Chart(f"{job.name}-cost", f"{job.name}: cost per month per option", "bars", "option",
                            "cost per month", "USD", (Series("per month", tuple((float(i), v)
                                                                                for i, v in enumerate(vals))),),
                            categories=tuple(cats), job=job.name,
                            note="on-demand prices x service hours; alternatives from `llmsizer recommend`"))
    return tuple(charts)


def _advice(job: InferenceJob, spec: ModelSpec, src: TrainingJob | None, adapters: dict[str, Any], fmt: str,
            engine: str, cost: Sec, notes: JobNotes, owned: bool = False, device: Device | None = None) -> None:
    if adapters["mode"] is not None:  # the weights as the option's engine holds them on the device (``_smaller``'s
        w = rung_bytes(spec, fmt, rung_group_size(spec, fmt, None), engine,  # measure, at its CUDA capability)
                       None if device is None else device_weights_capability(device, engine,
                                                                                spec.model_type, fmt))
        n = adapters["count"]
        per = adapters["per_adapter_dynamic"]
        origin = f"the adapter from training job '{src.name}'" if src is not None else "the LoRA adapters"
        notes.advice.append(
            f"Deploying {origin}: merged into the base weights it serves as a plain model ({format_bytes(w)} of "
            f"weights, no extra memory or latency), but each further adapter needs its own copy of the model; loaded "
            f"dynamically (vLLM --enable-lora --max-loras K --max-lora-rank {adapters['rank']}) one copy of the base "
            f"serves every adapter, at {format_bytes(per)} of device memory per adapter slot and some decode speed for "
            f"the LoRA kernels. With {n} adapter(s): merged {format_bytes(n * w)} of weights in total, dynamic "
            f"{format_bytes(w + per * min(n, adapters['slots'] or 1))}. Chosen: {adapters['mode']}.")
    be = cost.value("break_even_discount")
    u = cost.value("busy_share")
    if owned:
        notes.advice.append("Hourly or reserved? The price is the team's own hourly figure for hardware it runs "
                            "itself, so provider pricing does not apply.")
    elif be is not None and u is not None:
        if u >= 0.999:
            notes.advice.append("Hourly or reserved? The service runs around the clock, so any reservation discount "
                                "pays off against hourly prices for the reserved period; hourly keeps the freedom to "
                                "resize or stop. Confirm the discount and term with the provider.")
        else:
            notes.advice.append(f"Hourly or reserved? The service is needed {u:.0%} of the hours: stopping hourly "
                                f"resources outside service hours beats a reservation unless its discount exceeds "
                                f"{be:.0%}.")
