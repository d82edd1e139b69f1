"""The format-ladder search: on one target (a device x count, or an instance), the highest-quality weight format of
the engine's ladder (``formats.format_ladder``, best first) that ``fit`` fits and that meets the latency limits, or
why none does; and ``fits_at``, the one rule for "does not fit; fits at format X" that ``fit`` names when the format
it was asked (none given) does not fit. ``recommend`` walks the same ladder on each candidate of its catalog search
(``recommend._evaluate``, ``best_option_on``) and prices the pick; it sits above this module, which sits beside
``fit`` so that ``fit`` asks it without an upward import.

Each rung runs on the engine ``fit --weights RUNG`` takes for it when none is given (``device.engine_rule``), is
sized by ``fit_memory`` (the memory stage; the speed only for a rung that fits, ``MemoryFit.result``) and checked
against the limits (``latency_failures``); a rung whose weights alone exceed the budget is not sized (a necessary
condition, ``rung_bytes``)."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

from ..catalog.hardware import Device, Instance
from ..errors import FieldError, InputError
from ..formulas.kv_cache import kv_dtype_name
from ..formulas.tensor_parallel import every_degree_refusal
from ..formulas.weight_formats import stored_format, weight_bytes
from ..models import load_model
from ..numbers import CONCURRENCY
from ..specs import InferenceWorkload, ModelSpec
from ..specs.workload import (
    ENGINE_NAMES,
    ENGINE_SETTINGS,
    PIPELINE_ENGINES,
    check_pool_shares,
    engine_setting_given,
    implied_engine,
    normalize_engine,
    read_number,
)
from ..units import compared_rates, compared_seconds, format_bytes, format_limit
from . import efficiency as E
from .device import (
    check_engine_on_device,
    cuda_memory,
    default_engine,
    device_weights_capability,
    fp8_tensor_cores,
    host_part,
    instance_memory,
    target_memory,
    usable_memory,
    workload_device_kind,
)
from .fit import (
    FitResult,
    MemoryFit,
    RateMissCertain,
    RateOverloadError,
    async_stages_left,
    expert_options,
    first_token_seconds,
    fit,
    fit_memory,
    hint_memory,
    llamacpp_copy,
    per_replica,
    pipeline_options,
    serving_layout,
    serving_machine_size,
    target_and_count,
    wait_before_ttft,
    with_pipeline_layouts,
)
from .formats import engine_refuses, format_ladder, quality_warning, rung_bytes, rung_group_size, weights_asked
from .inference.compose import check_engine_kv_dtype
from .model_warnings import ENGINE_LACKS_MODEL
from .verdict import POOL_ENGINES, check_headroom, margin_rule, vllm_pool_bytes, vllm_pool_words


@dataclass(frozen=True)
class LatencyLimits:
    """The latency limits a rung must meet (``recommend.Constraints``' serving limits): the time to first token
    [s], each user's decode speed and the output tokens/s in total at the load [tokens/s]; None: not limited."""

    max_ttft: float | None = None
    user_tokens_per_second: float | None = None
    tokens_per_second: float | None = None


# how reading_floor_unchecked's reason starts: `models --fits-on`'s text reads its warnings for it (one wording)
FLOOR_UNCHECKED = "decode speed unknown"


# recommend's reading-speed floor in tokens/s per user (efficiency.py READING_RATE_TOKENS_PER_SECOND to two decimals,
# as it is stated): the one value recommend, the search (``format_on``, ``models --fits-on``) and fit --auto's hint
# (llamacpp_fit.py ``auto_fits_at``) hold each user to
READING_FLOOR = round(E.READING_RATE_TOKENS_PER_SECOND, 2)


def reading_floor_applies(limits: LatencyLimits, output_tokens: int | None) -> bool:
    """Whether a serving search holds each user to reading speed (efficiency.py READING_RATE_TOKENS_PER_SECOND): when
    no speed or latency limit is given and tokens are generated. A prefill-only workload (``output_tokens`` 0:
    embeddings, scoring) decodes nothing, so a decode-speed limit on it is refused as contradictory input."""
    if output_tokens == 0 and (limits.user_tokens_per_second or limits.tokens_per_second):
        raise InputError("output_tokens 0 generates no token (prefill only), so no decode speed can be asked of it: "
                         "drop the tokens-per-second limit, or give max_ttft (--max-ttft) to limit the prefill")
    return output_tokens != 0 and not (limits.user_tokens_per_second or limits.tokens_per_second or limits.max_ttft)


def reading_floor_unchecked(device: Device) -> str | None:
    """Why ``best_option_on`` (``models --fits-on``) judges ``device`` on memory only, or None when it checks the
    reading-speed floor: a device with no sourced memory bandwidth (``gpu``, ``cpu``, a detected machine) has no decode
    speed to compare with the floor (efficiency.READING_RATE_TOKENS_PER_SECOND), which the caller did not ask for."""
    if device.bandwidth is not None:
        return None
    return (f"{FLOOR_UNCHECKED}: {device.id} has no sourced memory bandwidth, so the reading-speed floor "
            f"({format_limit(READING_FLOOR)} tokens/s per user) is not checked and fit is judged on memory "
            "only; give memory_bandwidth in a hardware file (--hardware-file; `llmsizer hardware detect -o FILE` "
            "writes one for this machine) or name a catalog device")


def check_search_workload(fields: Mapping[str, Any], context: int, concurrency: int, output_tokens: int | None,
                          engine: str | None, headroom: float | None = None) -> InferenceWorkload:
    """Bad input is refused once, up front (exit 2), not as a rejection of every option: the fields a serving
    workload takes (InferenceWorkload's own checks, the KV dtype's name; a headroom SGLang refuses, or given with
    vLLM's gpu_memory_utilization), and an engine setting needs its engine stated, since candidates may each run
    another engine (ENGINE_SETTINGS, refused, not ignored). The workload returned holds ``context``,
    ``concurrency`` and ``output_tokens`` as read (text such as ``context="8k"`` through the field's reader, as
    ``fit`` reads it): the caller searches with those numbers."""
    unknown = sorted(set(fields) - set(InferenceWorkload.__dataclass_fields__))
    if unknown:
        raise InputError(f"not a serving workload field: {', '.join(unknown)}")
    # -5 was taken as 1 (max(1, concurrency) below); "4" is read as fit and estimate_inference read it (the field's
    # reader, specs/workload.py read_number), not refused
    concurrency = int(read_number(concurrency, "concurrency", CONCURRENCY))
    # no engine stated: the one the settings imply (specs/workload.py implied_engine: tensor_split is llama.cpp's),
    # for every candidate; settings of two engines refused there
    implied = implied_engine(fields) if not engine else None
    eng = normalize_engine(engine) if engine else (implied[0] if implied else None)
    for name, owners in ENGINE_SETTINGS.items():  # a stated engine: InferenceWorkload's own message, as fit's
        if engine_setting_given(name, fields.get(name)) and eng is None:  # read by several engines: say which
            # the setting and the engine as fields (FieldError): the CLI (and the web) write the flags, a request file its keys
            raise FieldError(name, also=("engine",), message=(
                f"{name} is a {' or '.join(ENGINE_NAMES[e] for e in owners)} setting, and candidates may each run a "
                f"different one by default: give {' or '.join(f'engine {e}' for e in owners)}"))
    if fields.get("kv_dtype") is not None:
        kv_dtype_name(str(fields["kv_dtype"]))  # an unknown name: the KV table's own message
    check_pool_shares(eng, headroom, fields.get("gpu_memory_utilization"))
    if eng is not None and fields.get("kv_dtype") is not None:  # a KV dtype the stated engine cannot store
        check_engine_kv_dtype(eng, str(fields["kv_dtype"]))
    given: dict[str, Any] = {**fields, **({"engine": eng} if eng else {}),
                             **({"headroom": headroom} if headroom is not None else {})}
    return InferenceWorkload(context=context, concurrency=max(1, concurrency), output_tokens=output_tokens, **given)


def format_name(fmt: str) -> str:
    """A rung as a reason names it: 'the file's own format' for a .gguf file as it is, a GGUF type in capitals."""
    if fmt == "file":
        return "the file's own format"
    return fmt.removeprefix("gguf:").upper() if fmt.startswith("gguf:") else fmt


def latency_failures(sp: Any, limits: LatencyLimits, wait: float | None = None) -> list[str]:
    """The latency limits ``sp`` misses; the time to first token of a queued request counts its ``wait`` for a
    running slot (formulas/serving_queue.py eq. Q3)."""
    bad = []
    if sp is None:
        return ["speed unknown"] if (limits.max_ttft or limits.user_tokens_per_second or limits.tokens_per_second) \
            else []
    if limits.max_ttft is not None:
        if sp.ttft_seconds is None:
            bad.append("TTFT unknown (no sourced peak FLOP/s)")
        elif (first := first_token_seconds(sp.ttft_seconds, wait) or 0.0) > limits.max_ttft:
            said, bound = compared_seconds(first, limits.max_ttft)
            bad.append(f"TTFT {said} > {bound}"
                       + (f" ({wait:.2f} s of it waiting in the engine's queue)" if wait else ""))
    if limits.user_tokens_per_second is not None:
        if sp.tokens_per_second_per_user is None:
            bad.append("decode speed unknown (no sourced bandwidth)")
        elif sp.tokens_per_second_per_user < limits.user_tokens_per_second:
            rate, floor = compared_rates(sp.tokens_per_second_per_user, limits.user_tokens_per_second)
            bad.append(f"{rate} tokens/s per user < {floor}")
    if limits.tokens_per_second is not None and sp.tokens_per_second is None:
        bad.append("decode speed unknown (no sourced bandwidth)")
    return bad


@dataclass(frozen=True)
class PassedOver:
    """A rung above a met pick that fits in memory but misses a limit (``pick_format``'s first such rung): what a
    pick's answer says so that "the best format that fits" is not read as "the best that fits in memory" (probe33
    D1: Q3_K_M named while Q4_K_M fits but decodes under reading speed). ``misses``: ``latency_failures``' words;
    ``reading_floor``: recommend's floor (``READING_FLOOR``) where the search applied it (``format_on``:
    ``reading_floor_applies``), None where the limits were the caller's."""

    weights_format: str
    engine: str
    tokens_per_second_per_user: float | None
    misses: tuple[str, ...]
    reading_floor: float | None = None

    def words(self) -> str:
        """The one sentence every face prints for it (fit's hint, ``models --fits-on``, capacity's alternative)."""
        fmt = format_name(self.weights_format)
        user = self.tokens_per_second_per_user
        if self.reading_floor is not None and user is not None and user < self.reading_floor:
            said, floor = compared_rates(user, self.reading_floor)
            return (f"{fmt} fits in memory but gives {said} tokens/s per user, under the "
                    f"{floor} tokens/s reading speed")
        return f"{fmt} fits in memory but misses " + "; ".join(self.misses)

    def as_dict(self) -> dict[str, Any]:
        """The JSON shape (``fits_at['passed_over']``, an option's ``passed_over``): the fields and the sentence."""
        return {"weights": self.weights_format, "engine": self.engine,
                "tokens_per_second_per_user": self.tokens_per_second_per_user, "misses": list(self.misses),
                "reading_speed": self.reading_floor, "why": self.words()}


@dataclass(frozen=True)
class FormatPick:
    """What the ladder walk (``pick_format``) answers for one target: ``status`` ``meets`` (the rung ``weights_format``
    fits and meets the limits) or ``rejected`` (why in ``reasons``); ``fit``: fit's answer behind a rung that fits
    (met, or the highest-quality one that fits but misses a limit), whose engine, layout, memory and speed an option
    reports; else the engine and tensor parallelism of the layout tried, and the memory and budget per device of
    the smallest rung tried (None where not sized). ``warnings``: fit's for a met rung (``FitResult.all_warnings``)."""

    status: str
    engine: str
    tensor_parallel: int
    weights_format: str
    reasons: tuple[str, ...]
    fit: FitResult | None = None
    memory_per_device: int | None = None
    budget_per_device: int | None = None
    warnings: tuple[str, ...] = ()
    # at a request rate: the rate is at or above every fitting rung's capacity (fit's refusal, eq. Q10a), so a share
    # of it on more replicas may be served (recommend's replica count at a rate, ``recommend.py`` ``_at_rate``)
    past_capacity: bool = False
    # past capacity where every rung asked was refused by the server's capacity (eq. Q10a) at one request in flight
    # on a layout of one tensor-parallel degree: the largest of those capacities [requests/s], at or above which any
    # rate is refused alike (fit's ``rate_bound``); None otherwise
    rate_bound: float | None = None
    # a pick met on the next engine's ladder (``next_ladder_engine``): the engine whose ladder had no rung that
    # meets, and why
    none_on: tuple[str, str] | None = None
    # the engine refuses the context past the model's window (estimate/context_window.py): no format changes that,
    # so no other ladder is walked (fit's hint names the window, ``window_fits_at``)
    past_window: bool = False
    # the pipeline layouts a rung's search left out, each in fit's words (fit.stages_left_line: vLLM 0.10-0.14 with
    # --async-scheduling stops at start with stages), also among ``warnings`` and, rejected, ``reasons``
    stages_left: tuple[str, ...] = ()
    # a met pick below a rung that fits in memory but misses a limit: that rung and why (``PassedOver``)
    passed_over: PassedOver | None = None
    # recommend's reading-speed floor where ``format_on`` held the rungs to it (tokens/s per user), else None
    reading_floor: float | None = None


def serves_alone(r: FitResult) -> bool:
    """Whether a fit at a rate runs at most one request in flight per replica: more copies cannot mend its miss
    (recommend's copies search stops there)."""
    return int(r.details.get("concurrency", 1)) <= r.replicas


def misses_at_every_load(limits: LatencyLimits) -> Callable[[FitResult], bool] | None:
    """``fit(miss=)``'s test where the only limit is each user's decode speed: the memory does not fit, or the
    per-user tokens/s is below the limit; both hold at every larger load once they hold (more sequences in flight:
    more KV memory, a longer decode step, formulas/serving_queue.py eq. Q10's step). None under other limits."""
    floor = limits.user_tokens_per_second
    if floor is None or limits.max_ttft is not None or limits.tokens_per_second is not None:
        return None

    def miss(r: FitResult) -> bool:
        user = r.speed.tokens_per_second_per_user if r.speed is not None else None
        return not r.fits or user is not None and user < floor
    return miss


def pick_format(spec: ModelSpec, device: Device, count: int, instance: Instance | None, memory: int | None, *,
                context: int, concurrency: int, output_tokens: int | None, weights: str | None,
                limits: LatencyLimits, headroom: float | None, hardware_files: Sequence[str | Path] = (),
                engine_given: str | None = None, fields: Mapping[str, Any] | None = None,
                host_device: str | Device | None = None, host_memory: int | None = None,
                request_rate: float | None = None,
                sized_memo: dict[tuple[str, str, int | None], MemoryFit] | None = None,
                refusal_only: bool = False) -> FormatPick:
    """The highest-quality weight format on the engine's ladder that fits ``count`` x ``device`` (``instance``: the
    instance, or the whole instances, they are, sized as fit sizes them; ``memory``: fit's ``memory``) and meets
    ``limits``, or why none does.
    ``engine_given`` None: the device's default engine (``device.default_engine``), each smaller rung on the engine
    fit takes it on; ``host_device`` reaches fit for the rungs llama.cpp runs (its split's decode speed with layers or
    experts on the CPU, which the limits read), and so does ``host_memory`` (fit's check of llama.cpp's host part,
    verdict.py ``host_memory_verdict``). ``request_rate``: requests arriving at that rate instead of ``concurrency``
    in flight: each rung whose memory fits at one request is answered by ``fit(request_rate=)`` (open arrivals,
    formulas/serving_queue.py eq. Q10: the memory and the decode step at the requests in flight it derives, the
    limits read at that load), `fit --weights RUNG --request-rate R`'s answer; a rate at or above a rung's capacity
    is that rung's miss (the next may serve it), and where every fitting rung misses so the pick says
    ``past_capacity`` (with ``rate_bound`` where eq. Q10a's capacity decides every rung). ``sized_memo``: a
    caller's dict of each rung's memory at ``concurrency`` (fit's memory stage, which no rate reaches), shared by the
    calls that differ only in ``request_rate`` (recommend's copies search). ``refusal_only``: a caller that reads a
    past-capacity pick only as one (its ``reasons`` unread: recommend's copies below MAX_REPLICAS), so each rung
    asks ``fit(refusal_only=True)``, which refuses without the deployment's ceilings (any layout: the ceilings are
    read only by the refusal's text) and, on a rung of one tensor-parallel degree (``climb_stops``), stops its climb
    once refusal is certain; the pick's status, rung, ``past_capacity`` and ``rate_bound`` are the
    same, a past-capacity reason is the refusal's bare line. Where the only limit is a per-user decode speed, such a
    rung also stops its climb once it certainly misses (``fit(miss=)``, ``misses_at_every_load``): its answer there
    stands for the fixed point's (more in flight than replicas, as there), or for a refusal of the rate, which this
    caller reads alike unless a later rung's miss is one request per replica (``serves_alone``): then the pick is
    asked again in full. Whatever ``refusal_only``, a rung refused after the first (whose line is the pick's
    ``capacity`` reason) is asked refusal-only too: its text is never read, so its ceilings are not sized."""
    dev, n = device, count
    given = fields or {}
    settings = {**given, "host_device": host_device, "host_memory": host_memory}  # which may name the engine
    engine = normalize_engine(engine_given) if engine_given else default_engine(dev, n, weights, spec, settings)
    ladder = format_ladder(spec, engine, weights, fp8=fp8_tensor_cores(dev))
    # fit's layout (fit.serving_layout): several CPUs or Apple chips are replicas, one whole model each; llama.cpp
    # spreads one model over the GPUs of one machine (layer split; the machines replicas); the others shard it (TP,
    # the widest fit may take). fit_memory's machine size, which both read: fit's gpus_per_node, in ``fields``
    per_node = serving_machine_size(instance, given.get("gpus_per_node"), n)
    layout = serving_layout(engine, dev, n, per_node)
    tp = max(layout.tensor_parallel_options(spec, n, per_node))
    # pipeline layouts (`fit --pp P`, fit choosing each stage's degree: fit.with_pipeline_layouts) where the caller
    # pins no layout (a degree or stages given: fit's answer at them); at a rate fit takes them by the same rule
    # (fit._rate_with_stages), so a rung's weights-alone check reads them there too
    staged = given.get("tensor_parallel") is None and given.get("pipeline_parallel") is None
    # the pipeline layouts a rung's search left out and why (fit.async_stages_left: vLLM 0.10-0.14 with
    # --async-scheduling stops at start with stages), said by the pick in fit's words (review: the searches
    # skipped them silently where fit names them)
    stages_left: list[str] = []

    def stage_spread(eng: str) -> dict[int, int]:
        """Each pipeline layout's stages P on ``eng`` -> the devices of its widest replica (P x the largest degree
        of count / P): the weights-alone check's share of that layout."""
        if not staged or eng not in PIPELINE_ENGINES:  # (pipeline_options' first test, before a layout is made)
            return {}
        lay = serving_layout(eng, dev, n, per_node)
        return {p: p * max(lay.tensor_parallel_options(spec, n // p, per_node)) for p in pipeline_options(spec, lay, n)}

    def expert_reach(eng: str) -> dict[int, int]:
        """Each expert-parallel layout's data-parallel ranks D on ``eng`` (``fit.expert_options``, where the caller
        pins no layout) -> the devices of its widest replica (D x the largest degree of count / D), whose routed
        experts split over all of them: the weights-alone check's share of that layout (a lower bound: attention
        and dense layers are whole per rank)."""
        if not staged or given.get("data_parallel") is not None or given.get("expert_parallel") is not None:
            return {}
        lay = serving_layout(eng, dev, n, per_node)
        return {d: d * max(lay._replace(data=d).tensor_parallel_options(spec, n // d, per_node, expert_parallel=True))
                for d in expert_options(spec, lay, n, per_node)}

    # stage_spread per engine and its widest replica (0: no stages), made where a rung first asks it
    reaches: dict[str, tuple[dict[int, int], int]] = {}

    def reach_of(eng: str) -> tuple[dict[int, int], int]:
        hit = reaches.get(eng)
        if hit is None:
            spreads = stage_spread(eng)
            hit = reaches[eng] = (spreads, max(spreads.values(), default=0))
        return hit

    spread = layout.split_gpus if layout.split else tp  # the devices of one replica at fit's widest layout
    usable, _ = usable_memory(dev, memory, record=False)

    def said(pick: FormatPick) -> FormatPick:
        """``pick`` stating the pipeline layouts the search left out (``stages_left``), where it did."""
        if not stages_left:
            return pick
        lines = tuple(dict.fromkeys(stages_left))
        return dataclasses.replace(pick, stages_left=lines, warnings=(*pick.warnings, *lines),
                                   reasons=(*pick.reasons, *lines))

    def rejected(why: str, fmt: str = "") -> FormatPick:
        return said(FormatPick("rejected", engine, tp, fmt, (why,)))

    if usable is None:
        return rejected("device memory unknown")
    kind = workload_device_kind(dev)
    try:  # the margin fit keeps on this candidate (estimate/verdict.py margin_rule: llama.cpp on a GPU its --fit-target)
        budget = margin_rule(engine, kind, headroom, given.get("fit_target")).budget(usable)
    except InputError as e:
        return rejected(str(e))
    # llama.cpp keeping layers or experts in host memory (-ngl, --n-cpu-moe): the device need not hold every weight
    offloaded = engine == "llamacpp" and (given.get("n_gpu_layers") is not None or given.get("n_cpu_moe") is not None)
    # a necessary condition only: vLLM's pool bounds its weights (gpu_memory_utilization, 1 - headroom unless given,
    # x CUDA's total: verdict.py ``vllm_pool_bytes``, the pool fit's estimate sizes); eq. (1)'s budget another
    # engine's at its default share; a share given (mem_fraction_static) or SGLang's default (above 0.9 on large
    # cards, estimate/inference/sglang.py eq. 1) may hold more, up to the whole device
    own_share = engine == "sglang" or given.get("mem_fraction_static") is not None
    cuda = cuda_memory(dev, memory) or usable  # what vLLM's pool is a share of (the estimate's cuda_total)
    first_fit: FitResult | None = None
    first_reasons: list[str] = []
    passed: PassedOver | None = None  # the first rung that fits in memory but misses a latency limit
    # the smallest format tried that does not fit: (the weights' bytes per device, format, fit's memory stage when
    # fit was asked: its answer is built only for the one reported)
    # (..., the limit the weights passed: its bytes and words, the rung's engine)
    smallest: tuple[int, str, MemoryFit | None, tuple[int, str], str] | None = None
    refused: str | None = None
    # a context past the model's window: the first rung's engine refusal (fit's memory stage, whose answer it is), and
    # the engines that refused it (vLLM, SGLang refuse it at every format: estimate/context_window.py W2, W4)
    window: MemoryFit | None = None
    past_window: set[str] = set()
    capacity: str | None = None  # at a rate: the first fitting rung's refusal of it (fit's line)
    bound: float | None = 0.0  # at a rate: the largest eq. Q10a capacity of the rungs refused (None: not all were)
    # the rung whose climb stopped on a certain miss, where it is the pick's first fitting one (its answer or a
    # refusal: fit's ``miss``)
    unsure = False
    miss = misses_at_every_load(limits) if refusal_only else None

    def in_full() -> FormatPick:  # this pick asked without the certain-miss stop
        return pick_format(spec, device, count, instance, memory, context=context, concurrency=concurrency,
                           output_tokens=output_tokens, weights=weights, limits=limits, headroom=headroom,
                           hardware_files=hardware_files, engine_given=engine_given, fields=fields,
                           host_device=host_device, host_memory=host_memory, request_rate=request_rate,
                           sized_memo=sized_memo)

    for fmt in ladder:
        # each rung on the engine `fit --weights RUNG` runs it on (estimate/device.py engine_rule): a smaller rung
        # may name its own engine (AWQ on vLLM where the device's rule for bf16 is transformers: a hardware file's GPU
        # without form_factor, a GPU known only by its kind), so the option is the answer fit gives for its format
        eng = engine if engine_given or fmt == ladder[0] else default_engine(dev, n, weights_asked(fmt), spec,
                                                                             settings)
        if eng in past_window:  # the same engine refuses the same context at a smaller format
            continue
        why_not = engine_refuses(eng, fmt, dev, spec)
        if why_not is not None:  # the engine will not load this format on this GPU: the next rung may do
            refused = refused or why_not
            continue
        asked = given.get("group_size")
        group = rung_group_size(spec, fmt, asked)  # the checkpoint's own at its own format (infer's and fit's)
        if asked is None:
            asked = InferenceWorkload.group_size  # what the estimate takes when none is passed
        no_degree = every_degree_refusal(spec, eng, fmt, group if group is not None else asked)
        if no_degree is not None:  # vLLM / SGLang load this format at no tensor-parallel degree: the next rung may do
            refused = refused or no_degree
            continue
        try:
            # the experts a bitsandbytes format keeps on eng, as fit counts; the device's dtype of an engine's
            # tensor (vLLM's fp32 gate) and vLLM's MXFP4 backend as fit's estimate reads them
            wb = rung_bytes(spec, fmt, group, eng, device_weights_capability(dev, eng, spec.model_type, fmt))
        except InputError:
            continue
        try:  # the margin fit keeps for this rung's engine (a rung may name another engine)
            margin = margin_rule(eng, kind, headroom, given.get("fit_target"))
        except InputError as e:
            return rejected(str(e), fmt)
        if eng == "vllm" and dev.kind == "gpu" and margin.fixed is None:  # its pool: the share given, else 1 - headroom
            util = float(given.get("gpu_memory_utilization") or 1 - float(margin.share or 0.0))
            weights_limit = vllm_pool_bytes(cuda, util)
            limit_words = f"vLLM's pool, {vllm_pool_words(cuda, util)}"
        elif own_share:
            weights_limit, limit_words = usable, f"the device's {format_bytes(usable)}"
        else:
            weights_limit = margin.budget(usable)
            limit_words = f"the {format_bytes(weights_limit)} budget ({margin.words(usable)})"
        limit = (weights_limit, limit_words)
        # whether fit's own layout (tensor parallelism only) could hold the weights, else the pipeline layouts whose
        # replica's devices could (the same necessary condition, each layout's widest replica: stage_spread)
        own = offloaded or wb / spread <= weights_limit
        widest = max(spread, reach_of(eng)[1], *expert_reach(eng).values()) if not own else spread
        if wb / widest > weights_limit and not own:
            # the weights alone cannot fit on any layout (not asked; fit decides every rung that passes)
            smallest = (int(wb / widest), fmt, None, limit, eng)
            continue
        # the user's headroom (None: the default, which every engine accepts; an explicit one SGLang refuses); the
        # host CPU to the rungs llama.cpp runs (fit refuses it on another engine)
        args: dict[str, Any] = dict(headroom=headroom, engine=eng, weights=weights_asked(fmt), context=context,
                                    concurrency=max(1, concurrency), output_tokens=output_tokens,
                                    memory=memory, hardware_files=hardware_files,
                                    host_device=host_device if eng == "llamacpp" else None,
                                    host_memory=host_memory if eng == "llamacpp" else None,
                                    **{**given, **({"group_size": group} if group != asked else {})})
        # an instance as fit takes it: its own count (None), or the whole instances ``n`` devices are
        # (fit.target_and_count with instances)
        target, cnt = instance or dev, None if instance is not None and n == instance.device_count else n
        try:  # memory decides the rung; the speed is computed only for a rung that fits (fit's two stages, once)
            known = sized_memo.get((fmt, eng, group)) if sized_memo is not None else None
            first = known if known is not None else fit_memory(spec, target, cnt, **args) if own else None
            if sized_memo is not None and first is not None:
                sized_memo[(fmt, eng, group)] = first
        except FieldError as e:  # a degree given that fit refuses on these devices: the caller's input, no rung's
            if "tensor_parallel" in e.fields and given.get("tensor_parallel") is not None:
                raise
            return rejected(str(e), fmt)
        except InputError as e:
            return rejected(str(e), fmt)
        found = first
        ranked = expert_reach(eng)  # expert-parallel layouts (fit.expert_options) where fit's own could take them
        if first is None or first.refusal is None and not (first.fits and first.tensor_parallel <= per_node
                                                           and not (first.tp_refused and ranked)):
            # this rung on a pipeline or expert-parallel layout: fit's own does not fit within one machine (or
            # cannot hold the weights), or eq. TP5 took a degree out of it (the one rule: fit.with_pipeline_layouts)
            stages = [p for p, d in reach_of(eng)[0].items() if wb / d <= weights_limit]
            left = async_stages_left(eng, args, stages)
            if left is not None:  # the engine stops at start with them: not tried, said
                stages_left.append(left)
                stages = []
            ranks = [r for r, d in ranked.items() if wb / d <= weights_limit]
            found = with_pipeline_layouts(first, per_node, stages, partial(_staged_fit, spec, target, cnt, args),
                                          ranks, partial(_expert_fit, spec, target, cnt, args))
        if found is None:  # no layout that could hold the weights answered (fit refused every stage count)
            smallest = (int(wb / max(spread, reach_of(eng)[1])), fmt, None, limit, eng)
            continue
        sized = found
        if sized.refusal is not None:  # the engine will not start at this context: not a matter of the format
            window = window or sized
            past_window.add(eng)
            continue
        if not sized.fits:
            smallest = (int(wb / spread), fmt, sized, limit, eng)
            continue
        if request_rate is None:
            r = sized.result(True)
        else:  # fit's rate path (estimate/fit.py: the in flight derived, eq. Q10c): one answer with fit
            server: list[float] = []  # eq. Q10a's capacity where it refuses the rate at one request in flight
            # rate-independent only where fit ranks no layouts by the rate (one degree: fit_memory's options)
            one_layout = len(serving_layout(eng, dev, n, per_node).tensor_parallel_options(spec, n, per_node)) == 1 \
                and not reach_of(eng)[0]  # (stages: fit may take a pipeline layout at the rate)
            try:  # a refusal after the first (``capacity`` said) is read only as one: its ceilings unasked
                r = fit(spec, target, cnt, request_rate=request_rate, fits_at=False, rate_bound=server,
                        refusal_only=refusal_only or capacity is not None, climb_stops=one_layout,
                        miss=miss if one_layout else None,
                        **{k: v for k, v in args.items() if k != "concurrency"})
            except RateMissCertain as e:  # misses at the fixed point (or is refused there): reasons unread
                if first_fit is None:
                    first_fit, first_reasons, unsure = e.result, ["misses at the rate"], True
                continue
            except RateOverloadError as e:  # (refusal_only: fit's past-capacity answer below, without its ceilings)
                capacity = capacity or f"at {format_name(fmt)}: {e.detail}"
                bound = max(bound, server[0]) if server and one_layout and bound is not None else None
                continue
            except FieldError as e:
                if "request_rate" not in e.fields:
                    raise
                capacity = capacity or f"at {format_name(fmt)}: {str(e).removeprefix('request_rate: ')}"
                bound = None
                continue
            if "rate_capacity" in r.details:  # past its capacity (fit: no steady state at this rate)
                capacity = capacity or f"at {format_name(fmt)}: {r.reasons[0]}"
                bound = max(bound, server[0]) if server and one_layout and bound is not None else None
                continue
            if unsure and not r.fits and serves_alone(r):  # the unsure rung may have been refused: ask in full
                return in_full()
            if not r.fits:  # (at the requests in flight the rate derives: fit's own reason)
                unsure = False
                if first_fit is None:
                    first_fit, first_reasons = r, [f"at {format_name(fmt)}: {r.reasons[0] if r.reasons else 'does not fit'}"]
                continue
        bad = latency_failures(r.speed, limits, wait_before_ttft(r.details))
        if not bad:
            return said(FormatPick("meets", r.engine, r.tensor_parallel, r.weights_format,
                                   (f"fits at {format_name(fmt)}: {r.reasons[0]}",), r, warnings=r.all_warnings,
                                   passed_over=passed))
        if unsure and serves_alone(r):  # the unsure rung may have been refused: ask in full
            return in_full()
        passed = passed or PassedOver(r.weights_format, r.engine,
                                      r.speed.tokens_per_second_per_user if r.speed is not None else None, tuple(bad))
        unsure = False  # (the first fitting rung is this one, or the unsure one and this not alone: alike)
        if first_fit is None:  # a rejection reports the highest-quality format that fits, with its own reason
            first_fit = r
            first_reasons = [f"at {format_name(fmt)}: " + "; ".join(bad) + " (smaller formats on the ladder "
                             "fall short too)"]
    if first_fit is not None:
        return said(FormatPick("rejected", first_fit.engine, first_fit.tensor_parallel, first_fit.weights_format,
                               tuple(first_reasons or ["fails a latency limit"]), first_fit))
    if capacity is not None:
        return said(FormatPick("rejected", engine, tp, "", (capacity,), past_capacity=True,
                               rate_bound=bound or None))
    why = "does not fit"
    need: int | None = None
    budget_shown: int | None = budget
    shown_engine = engine
    if window is not None:  # fit's refusal of the context past the model's window, whatever the format (its numbers)
        failed = window.result(False)
        why = str(window.refusal)
        need, budget_shown, shown_engine = failed.memory_per_device, failed.budget_per_device, failed.engine
    elif smallest is not None and smallest[2] is not None:  # fit's own verdict, reason and numbers (one answer)
        failed = smallest[2].result(False)
        why = f"does not fit at the smallest format tried ({format_name(smallest[1])}): {failed.reasons[0]}"
        need, budget_shown = failed.memory_per_device, failed.budget_per_device
        shown_engine = failed.engine  # the rung's engine, whose numbers these are
    elif smallest is not None:
        # budget_per_device as fit reports it for the rung's engine (verdict.py): a pool engine's (vLLM, SGLang,
        # eq. 3 admission_verdict) the device memory, its pool named apart in the reason; another's eq. (1) budget
        pool_engine = smallest[4] in POOL_ENGINES
        shown_engine = smallest[4]
        budget_shown = usable if pool_engine else smallest[3][0]
        why = (f"does not fit: the weights alone at the smallest format tried ({format_name(smallest[1])}) need "
               f"{format_bytes(smallest[0])} per device, more than {smallest[3][1]}")
    if refused is not None:
        why = refused if smallest is None and window is None else f"{why}; {refused}"
    return said(FormatPick("rejected", shown_engine, tp, "", (why,), None, need, budget_shown,
                           past_window=window is not None))


def _staged_fit(spec: ModelSpec, target: Device | Instance, count: int | None, args: dict[str, Any],
                stages: int) -> MemoryFit:
    """`fit --pp STAGES`'s memory stage of one rung (``args``: the rung's fit arguments): fit chooses each stage's
    tensor-parallel degree (``pick_format``'s pipeline layouts, ``fit.with_pipeline_layouts``)."""
    return fit_memory(spec, target, count, pipeline_parallel=stages, **args)


def _expert_fit(spec: ModelSpec, target: Device | Instance, count: int | None, args: dict[str, Any],
                ranks: int) -> MemoryFit:
    """`fit --dp RANKS --enable-expert-parallel`'s memory stage of one rung (``args``: the rung's fit arguments): fit
    chooses each rank's tensor-parallel degree (``pick_format``'s expert-parallel layouts, ``fit.expert_options``)."""
    return fit_memory(spec, target, count, data_parallel=ranks, expert_parallel=True, **args)


def format_on(spec: ModelSpec, hardware: str | Device | Instance, count: int | None = None, *,
              context: int = InferenceWorkload.context, concurrency: int = InferenceWorkload.concurrency,
              output_tokens: int | None = None, weights: str | None = None, limits: LatencyLimits = LatencyLimits(),
              headroom: float | None = None, hardware_files: Sequence[str | Path] = (), engine: str | None = None,
              memory: int | None = None, host_device: str | Device | None = None, host_memory: int | None = None,
              also_smallest_ladder: bool = False, **workload: Any) -> tuple[FormatPick, str | None]:
    """``pick_format`` on one named target as ``best_option_on`` (``models --fits-on``, the plan) and ``fits_at`` ask
    it, with the search's checks first (bad input raises ``InputError``: ``check_search_workload``, fit's target and
    count rule, a device of no known memory, a speed limit on a device of no known bandwidth, an engine the device
    cannot run) and the reading-speed floor (``reading_floor_applies``) where no limit is given. Returns the pick and,
    for a device of no sourced bandwidth, why the floor was not checked (``reading_floor_unchecked``). No engine
    named and no weight format given (or ``also_smallest_ladder``, fit's hint), a ladder that ends with no rung that
    meets goes on to the next engine's (``next_ladder_engine``): its pick, when one meets, says which engine had none
    (``none_on``)."""
    fields: dict[str, Any] = {k: v for k, v in workload.items() if v is not None}
    per_node = fields.pop("gpus_per_node", None)  # fit's machine size (not a workload field): each rung's fit's
    w = check_search_workload(fields, context, concurrency, output_tokens, engine, headroom)
    if per_node is not None:
        fields["gpus_per_node"] = per_node
    context, concurrency, output_tokens = w.context, w.concurrency, w.output_tokens  # text read as fit reads it
    engine = engine or w.engine  # none stated: the one the settings imply (check_search_workload), else None
    # fit's rule for a target and a count (an instance brings its own; a whole multiple of it is that many instances,
    # the model's replicas over them, as `fit --count` takes it; another count is refused with fit's line)
    device, n, _, instance = target_and_count(hardware, count, hardware_files, instances=True)
    # fit's memory rule (estimate/device.py): ``memory`` checked as fit checks it, else a CPU instance's RAM, else
    # the catalog's
    if target_memory(device, instance, memory)[0] is None:  # fit refuses it too: no model can be said to fit or not
        raise InputError(f"{device.id} has no sourced memory size, so no model can be said to fit on it; give it "
                         "with --memory (e.g. 64GiB; memory= in Python) or in a hardware file (--hardware-file; "
                         "`llmsizer hardware detect -o FILE` writes one for this machine)")
    if device.bandwidth is None and (limits.user_tokens_per_second or limits.tokens_per_second):
        # a decode speed the caller asked for: no bandwidth can answer it (each model would be "no: speed unknown")
        raise InputError(f"{device.id} has no sourced memory bandwidth, so no model's decode speed can be checked "
                         f"against {format_limit(limits.user_tokens_per_second or limits.tokens_per_second or 0)} "
                         "tokens/s; give its "
                         "memory_bandwidth in a hardware file (--hardware-file; `llmsizer hardware detect -o FILE` "
                         "writes one for this machine) or name a catalog device")
    if engine is not None:  # fit's refusal (a GPU-serving engine on a CPU or Apple), once, not once per model
        check_engine_on_device(normalize_engine(engine), device)
    # llama.cpp's host CPU and RAM read and checked once, as fit checks them (estimate/device.py host_part); no engine
    # stated: they imply llama.cpp for every rung (pick_format's settings)
    host_device, host_memory = host_part(normalize_engine(engine) if engine else None, device, host_device,
                                         host_memory, hardware_files)
    unchecked = reading_floor_unchecked(device) if output_tokens != 0 else None
    floor_held = unchecked is None and reading_floor_applies(limits, output_tokens)
    if floor_held:
        # the same floor as recommend; a device of unknown bandwidth is judged on memory only (the note says so)
        limits = dataclasses.replace(limits, user_tokens_per_second=READING_FLOOR)
    check_headroom(headroom)  # checked once; each rung's margin is its engine's (estimate/verdict.py margin_rule)
    # a memory given is fit's memory; else a CPU instance's RAM, as recommend sizes its candidates
    mem = instance_memory(device, instance, int(memory) if memory is not None else None)
    pick = walk_ladders(spec, device, n, instance, mem, context=context, concurrency=concurrency,
                        output_tokens=output_tokens, weights=weights, limits=limits, headroom=headroom,
                        hardware_files=hardware_files, engine_given=engine, fields=fields, host_device=host_device,
                        host_memory=host_memory, also_smallest_ladder=also_smallest_ladder)
    if floor_held:  # the floor this search held each user to: the pick's answer names it (fits_at, options)
        pick = dataclasses.replace(pick, reading_floor=READING_FLOOR, passed_over=pick.passed_over and (
            dataclasses.replace(pick.passed_over, reading_floor=READING_FLOOR)))
    return pick, unchecked


def walk_ladders(spec: ModelSpec, device: Device, count: int, instance: Instance | None, memory: int | None, *,
                 context: int, concurrency: int, output_tokens: int | None, weights: str | None,
                 limits: LatencyLimits, headroom: float | None, hardware_files: Sequence[str | Path] = (),
                 engine_given: str | None = None, fields: Mapping[str, Any] | None = None,
                 host_device: str | Device | None = None, host_memory: int | None = None,
                 also_smallest_ladder: bool = False) -> FormatPick:
    """``pick_format`` on the asked engine's ladder, then, where no engine is named and no weight format given (or
    ``also_smallest_ladder``: fit's hint) and that ladder ends with no rung that meets, on the next engine's
    (``next_ladder_engine``): the one walk of the engine ladders that ``format_on`` (``models --fits-on``, the web's
    fits page, the plan, fit's hint) and recommend's catalog search (``recommend.py`` ``_evaluate``) ask, so each
    candidate gets one verdict and format from every surface. The next ladder's pick is taken where it meets, or
    where it fits but misses a limit and no rung of the asked ladder fits; it then says which engine had none
    (``none_on``) and why."""
    given = dict(fields or {})
    pick = pick_format(spec, device, count, instance, memory, context=context, concurrency=concurrency,
                       output_tokens=output_tokens, weights=weights, limits=limits, headroom=headroom,
                       hardware_files=hardware_files, engine_given=engine_given, fields=given,
                       host_device=host_device, host_memory=host_memory)
    walk = (engine_given is None or also_smallest_ladder) and weights is None
    nxt = next_ladder_engine(device, pick, spec) if walk else None
    if nxt is None:
        return pick
    # the asked ladder ended with no rung that meets: the one that goes further down, with the settings that engine
    # reads (the asked engine's own, gpu_memory_utilization, max_num_seqs..., left out)
    other_fields = {k: v for k, v in given.items() if nxt in ENGINE_SETTINGS.get(k, (nxt,))}
    try:
        if other_fields.get("kv_dtype") is not None:
            check_engine_kv_dtype(nxt, str(other_fields["kv_dtype"]))
        margin_rule(nxt, workload_device_kind(device), headroom, other_fields.get("fit_target"))
    except InputError:  # a setting that engine refuses: the asked engine's answer stands
        return pick
    other = pick_format(spec, device, count, instance, memory, context=context, concurrency=concurrency,
                        output_tokens=output_tokens, weights=None, limits=limits, headroom=headroom,
                        hardware_files=hardware_files, engine_given=nxt, fields=other_fields,
                        host_device=host_device, host_memory=host_memory)
    # met there; or, none fitting the asked ladder's memory, the next ladder's rung that fits but misses a limit
    if other.status == "meets" or other.fit is not None and pick.fit is None:
        why = pick.reasons[0] if pick.reasons else "no rung fits"
        return dataclasses.replace(other, none_on=(pick.engine, why), reasons=(
            *other.reasons, f"no rung of {ENGINE_NAMES.get(pick.engine, pick.engine)}'s ladder meets: {why}"))
    return pick


def next_ladder_engine(device: Device, pick: FormatPick, spec: ModelSpec | None = None) -> str | None:
    """The one rule for the engine ladders a search walks when the first ends with no rung that meets: on a GPU,
    after a vLLM or SGLang ladder (whose smallest rung is a 4-bit AWQ checkpoint), llama.cpp's
    (``SMALLEST_LADDER_ENGINE``: GGUF continues to Q3_K_M and Q2_K). Walked by ``format_on`` when no engine is named
    (``models --fits-on``, the web's fits page, the plan) and by ``fits_at`` (fit's hint) whether or not one is;
    None: no further ladder, or none for ``spec``'s family (model_warnings.ENGINE_LACKS_MODEL: no mllama GGUF)."""
    if pick.status == "meets" or device.kind != "gpu" or pick.engine == SMALLEST_LADDER_ENGINE or pick.past_window:
        return None
    if spec is not None and spec.model_type in ENGINE_LACKS_MODEL.get(SMALLEST_LADDER_ENGINE, {}):
        return None
    return SMALLEST_LADDER_ENGINE


# the engine whose ladder goes furthest down (GGUF's 2- to 8-bit formats) when the asked engine's ladder ends
# higher (vLLM's and SGLang's smallest rung is a 4-bit AWQ checkpoint): where fits_at looks next
SMALLEST_LADDER_ENGINE = "llamacpp"


def _pick_or_none(spec: ModelSpec, hardware: str | Device | Instance, count: int | None, headroom: float | None,
                  kwargs: dict[str, Any]) -> FormatPick | None:
    """``format_on`` with no weight format (met or rejected), None where the search refuses the workload."""
    kwargs = {k: v for k, v in kwargs.items() if k != "weights" and v is not None}  # None: the default
    try:
        return format_on(spec, hardware, count, headroom=headroom, **kwargs)[0]
    except InputError:  # a workload the search refuses (fit answered it): no hint rather than a second error
        return None


def fits_at(spec: ModelSpec | str, hardware: str | Device | Instance, count: int | None = None, *,
            headroom: float | None = None, engine: str | None = None, host_device: str | Device | None = None,
            **kwargs: Any) -> dict[str, Any] | None:
    """The one rule for "does not fit; fits at format X" (``FitResult.fits_at``: fit's answer on every surface, the
    CLI text and JSON, Python, the web and the plan), asked when the default weight format (none given) does not fit.

    First the same engine (``engine``, None: the device's default, as fit takes it): the highest-quality rung of
    its format ladder that fits and meets reading speed (``format_on``), ``same_engine`` True; ``host_device``: fit's
    host CPU, whose bandwidth times a llama.cpp split with layers or experts on it. A user who named vLLM or SGLang
    wants that engine's formats first. When none does, on a GPU: the same search on llama.cpp
    (``SMALLEST_LADDER_ENGINE``), whose GGUF ladder continues below the smallest vLLM/SGLang rung (awq-int4, about
    4.25 bits per weight, to Q3_K_M and Q2_K), ``same_engine`` False and ``none_on`` naming the engine whose ladder
    had no rung that fits and why. Settings of the asked engine that llama.cpp has no counterpart for
    (``ENGINE_SETTINGS``: gpu_memory_utilization, max_num_seqs...) are left out of that search. None: no rung of
    either ladder fits (or the search refuses the workload). ``kwargs``: ``format_on``'s own."""
    spec = load_model(spec) if isinstance(spec, str) else spec
    asked = _pick_or_none(spec, hardware, count, headroom, {**kwargs, "engine": engine, "host_device": host_device,
                                                              "also_smallest_ladder": True})
    if asked is None:
        return None
    if asked.status == "meets":
        if asked.none_on is None:
            return {**_fits_at_dict(asked, True), **_met_speed(asked)}
        return {**_fits_at_dict(asked, False), **_met_speed(asked),
                "none_on": {"engine": asked.none_on[0], "why": asked.none_on[1]}}
    kind = target_and_count(hardware, count, kwargs.get("hardware_files", ()), instances=True)[0].kind
    if kind != "gpu" or spec.model_type in ENGINE_LACKS_MODEL.get(SMALLEST_LADDER_ENGINE, {}):
        return _below_floor(asked, {})
    other_fields = {k: v for k, v in kwargs.items()
                    if SMALLEST_LADDER_ENGINE in ENGINE_SETTINGS.get(k, (SMALLEST_LADDER_ENGINE,))}
    first = asked.none_on or (asked.engine, asked.reasons[0] if asked.reasons else "")  # the asked engine's ladder
    none_on = {"none_on": {"engine": first[0], "why": first[1]}} if first[0] != SMALLEST_LADDER_ENGINE else {}
    # no rung fits on the GPUs alone: models --fits-on's answer, llama.cpp's auto-fit with the experts of some layers
    # in host memory (experts_in_host_at, the one rule), its flags named; the layer placement is the auto-fit's own
    fields = {k: v for k, v in other_fields.items()
              if k not in ("n_cpu_moe", "n_gpu_layers", "host_device")}  # (gpus_per_node: the copy's machine)
    host = experts_in_host_at(spec, hardware, count, headroom=headroom, **fields)
    if host is None:
        return _below_floor(asked, none_on)
    return {"weights": host["weights"], "engine": SMALLEST_LADDER_ENGINE,
            "same_engine": asked.engine == SMALLEST_LADDER_ENGINE, "memory_per_device": host["memory_per_device"],
            "budget_per_device": None, "experts_in_host": host, **none_on}


def experts_in_host_at(spec: ModelSpec, hardware: str | Device | Instance, count: int | None = None, *,
                       context: int | None = None, concurrency: int | None = None, memory: int | None = None,
                       headroom: float | None = None, fit_target: int | None = None, host_memory: int | None = None,
                       hardware_files: Sequence[str | Path] = (), gpus_per_node: int | None = None,
                       **workload: Any) -> dict[str, Any] | None:
    """What ``fit --auto`` answers for an MoE model no format of which fits on the GPUs alone: with ``host_memory``,
    the first format on llama.cpp's ladder (``format_ladder``, best first), else its smallest (the least host RAM) --
    or, of the rungs above it that store the routed experts alike (``_expert_bytes``: the host side the same), the
    best, a smaller file then saving only GPU bytes at a quality cost --
    that llama.cpp's auto-fit (``estimate/llamacpp_fit.py`` ``fit_llamacpp``, steps 1-4) fits with the routed experts
    of some layers in host memory (``--n-cpu-moe``), its flags and the bytes each side holds. The one rule
    ``models --fits-on`` (``recommend.experts_in_host``) and fit's hint (``fits_at``) answer with. None for a dense
    model, a target that is not GPUs, a workload the auto-fit refuses, or when no rung fits so. The auto-fit sizes
    one copy over one machine's GPUs at its share of ``concurrency`` (estimate/fit.py ``llamacpp_copy``: the layout
    fit sizes, machines of ``gpus_per_node`` / the instance's / 8, the machines replicas), so its flags rerun through
    fit on the same count give its verdict. Host RAM is checked only when ``host_memory`` is given (fit --auto
    --host-memory); the decode speed of the split is not judged. The answer names its ``format_rule`` and carries fit --auto's ``warnings`` (``quality_warning``: the
    format's own, if any). ``context``/``concurrency`` None: fit's defaults."""
    from .llamacpp_fit import fit_llamacpp, gpu_free  # the auto-fit sizes each layer by the estimate (fit's layer)

    if spec.moe is None:
        return None
    device, n, _, instance = target_and_count(hardware, count, hardware_files, instances=True)
    if device.kind != "gpu":
        return None  # host memory beside GPUs
    context = InferenceWorkload.context if context is None else context
    concurrency = InferenceWorkload.concurrency if concurrency is None else concurrency
    fields = {k: v for k, v in workload.items() if v is not None and k not in ("engine", "weights")}
    try:
        gpus, copies = llamacpp_copy(device, n, instance, gpus_per_node)  # one copy: one machine's GPUs
        concurrency = per_replica(concurrency, copies)
        free = gpu_free(device, gpus, None, memory)
        ladder = format_ladder(spec, "llamacpp", None, fp8=fp8_tensor_cores(device))

        def split(fmt: str) -> Any:
            r = fit_llamacpp(spec, free, fit_target=fit_target, headroom=headroom, context=context,
                             host_memory=host_memory, concurrency=concurrency, weights=weights_asked(fmt), **fields)
            return r if r.fits and r.n_cpu_moe > 0 else None

        # host RAM given: the best rung that fits both sides; not given: the smallest rung, the least host RAM ...
        pick = next(((f, r) for f in (ladder if host_memory is not None else reversed(ladder))
                     if (r := split(f)) is not None), None)
        if pick is None:
            return None
        rule = "highest-quality format that fits both sides" if host_memory is not None else \
            "smallest format: least host RAM"
        if host_memory is None:  # ... unless a better rung stores the routed experts (what goes to host RAM) alike
            experts = _expert_bytes(spec, pick[0])
            better = next(((f, r) for f in ladder[:ladder.index(pick[0])]
                           if _expert_bytes(spec, f) == experts and (r := split(f)) is not None), None)
            if better is not None:
                pick, rule = better, ("best format whose routed experts are stored as at "
                                      f"{pick[0].removeprefix('gguf:').upper()}, the smallest (the same expert bytes "
                                      "in host RAM)")
        fmt, r = pick
        rows = r.devices()
        return {"weights": fmt, "format_rule": rule,
                "quality_warning": quality_warning(fmt, stored_format(spec)[0]), "warnings": list(r.warnings),
                "n_cpu_moe": r.n_cpu_moe, "flags": r.flags(),
                "memory_per_device": max(d["total"] for d in rows if d["device"] != "host"),
                "host_bytes": sum(d["total"] for d in rows if d["device"] == "host"),
                "host_memory_checked": host_memory is not None}
    except InputError:  # a workload the auto-fit refuses: no claim rather than a second error
        return None


def _expert_bytes(spec: ModelSpec, fmt: str) -> tuple[int, ...]:
    """Each layer's routed-expert bytes at rung ``fmt`` (formulas/weight_formats.py ``weight_bytes`` at the rung's
    defaults, as ``rung_bytes``): the tensors ``--n-cpu-moe`` keeps in host RAM. Two rungs with equal tuples store
    the experts alike (gpt-oss: MXFP4 in every GGUF file type, weight_formats.py ``gguf_tensor_type`` and its sources), so
    the smaller saves only GPU-side bytes, at its quality cost."""
    return weight_bytes(spec, fmt).layer_expert_bytes


def _below_floor(pick: FormatPick, none_on: dict[str, Any]) -> dict[str, Any] | None:
    """``fits_at``'s answer where a rung fits in memory but none reaches the reading-speed floor (``format_on``'s
    ``READING_FLOOR``, the rule ``models --fits-on`` holds a row to): the highest-quality rung that fits, its decode
    speed per user and ``meets_reading_speed`` False, as fit --auto's hint states it (llamacpp_fit.py
    ``auto_fits_at``), so the rejection row and the hint say the same thing. None: no rung fits in memory, or its
    speed is unknown (a split whose host CPU is not named: no speed to compare, fit says so at that rung)."""
    r = pick.fit
    if r is None or not r.fits:
        return None
    user = r.speed.tokens_per_second_per_user if r.speed is not None else None
    if user is None or user >= READING_FLOOR:  # speed unknown (a split's host CPU not named), or another limit
        return None
    same = not none_on
    return {**_fits_at_dict(pick, same), **none_on, "reading_speed": READING_FLOOR, "meets_reading_speed": False,
            "decode_tokens_per_second": r.speed.tokens_per_second if r.speed is not None else None,
            "tokens_per_second_per_user": user}


def _met_speed(pick: FormatPick) -> dict[str, Any]:
    """A met pick's speed words for ``fits_at`` (either ladder, ``same_engine`` or not): where ``format_on`` held the
    rungs to the reading-speed floor, the floor, ``meets_reading_speed`` True and the rung's decode speed per user (as
    ``_below_floor`` and fit --auto's hint carry them, render/fit_text.py ``_reading_words``); and the rung above it
    that fits in memory but missed (``passed_over``: its sentence, ``PassedOver.words``). Empty where neither holds."""
    out: dict[str, Any] = {}
    sp = pick.fit.speed if pick.fit is not None else None
    if pick.reading_floor is not None and sp is not None and sp.tokens_per_second_per_user is not None:
        out.update(reading_speed=pick.reading_floor, meets_reading_speed=True,
                   decode_tokens_per_second=sp.decode_tokens_per_second,
                   tokens_per_second_per_user=sp.tokens_per_second_per_user)
    if pick.passed_over is not None:
        out["passed_over"] = pick.passed_over.as_dict()
    return out


def _fits_at_dict(pick: FormatPick, same_engine: bool) -> dict[str, Any]:
    """``fits_at``'s answer for a met rung: its format, engine and fit's memory and budget per device."""
    r = pick.fit
    return {"weights": pick.weights_format, "engine": pick.engine, "same_engine": same_engine,
            # a rung met on a pipeline layout (fit.with_pipeline_layouts): the layout it was sized at (`--tp --pp`)
            **({"tensor_parallel": r.tensor_parallel, "pipeline_parallel": r.pipeline_parallel}
               if r is not None and r.pipeline_parallel > 1 else {}),
            **(hint_memory(r) if r is not None else {"memory_per_device": pick.memory_per_device,
                                                     "budget_per_device": pick.budget_per_device})}
