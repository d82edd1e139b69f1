"""Which hardware to run a model on: search device x count x weight format x parallelism over the catalog,
keep the options that fit and meet the constraints, rank them by cost, and say why each was chosen or rejected.

Search (inference):
- candidates: cloud instances (filtered by provider), plus local hardware (Apple silicon configurations,
  desktop GPUs, and devices the user's hardware file marks ``owned``); ``laptop`` keeps laptop devices only,
  ``cloud_only`` keeps instances only;
- per candidate, weight formats from highest quality down (``estimate.formats.format_ladder``: the checkpoint's
  default format on the engine, as ``fit`` and ``infer`` take it, then the smaller rungs of bf16 -> fp8 -> AWQ int4
  on vLLM or F16 -> Q8_0 -> Q6_K -> Q5_K_M -> Q4_K_M -> Q3_K_M -> Q2_K on llama.cpp; a .gguf file: the file as it is
  first), each rung on the engine ``fit --weights RUNG`` runs it on when none is given (``engine_rule``: AWQ on vLLM
  where the unquantized checkpoint gets transformers); the first that fits with the headroom and meets the latency
  limits is taken;
- the devices laid out as ``fit`` lays them (``fit.serving_layout``: tensor parallelism over a candidate's GPUs, a
  llama.cpp split, or several CPUs or Apple chips as replicas of one model each); instances (more copies of the
  option) are added until an aggregate tokens/s target is met;
- rank (``rank_key``, the one rule): the user's own hardware first (devices a hardware file marks ``owned``, as
  ``hardware detect`` writes them: "your hardware"), the best of it chosen where it meets the constraints; then the
  catalog's alternatives by on-demand $/h (owned hardware: power at the user's $/kWh, else unpriced and listed after
  priced ones). Where the user owns hardware, the catalog's local cards (GeForce, Apple, desktop GPUs) are hardware
  "to buy": no hourly price (their power alone is not their cost), listed after the priced ones.

CPU vs GPU follows the seed's reasoning with numbers: small models, low traffic and quantization can serve on
a CPU; large models, high concurrency or low latency need GPUs. The advice quotes the speed each would give.
"""

from __future__ import annotations

import dataclasses
import math
import shlex
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from operator import itemgetter
from pathlib import Path
from typing import Any

from .catalog.hardware import Device, HardwareCatalog, Instance, load_catalog
from .errors import DeviceCannotRunError, FieldError, InputError, NotModelledError
from .estimate import efficiency as E
from .estimate import engines as ENG
from .estimate.duration import (
    PRACTICAL_TRAINING_SECONDS,  # the 90-day practical limit's one home
    flops_per_token,
    recompute_mode,
    recomputed_matmul_modules,
    training_peak,
    with_tp_replicated,
)
from .estimate.engines import newer_release_note
from .estimate.fit import (
    SERVING_GPUS_PER_NODE,
    FitResult,
    MemoryFit,
    devices_text,
    first_token_seconds,
    fit,
    fit_training,
    hourly_price,
    instances_for,
    not_whole_instances,
    per_replica,
    rate_needs_continuous_batching,
    read_request_rate,
    serving_engine_flags,
    serving_layout_text,
    serving_machine_size,
    target_and_count,
    training_fits_at,
    training_layout,
)

# the format-ladder search's public names (fits_at, the reading-speed floor), at home in estimate/format_search.py
from .estimate.format_search import FLOOR_UNCHECKED as FLOOR_UNCHECKED
from .estimate.format_search import (
    READING_FLOOR,
    FormatPick,
    LatencyLimits,
    check_search_workload,
    experts_in_host_at,
    format_name,
    format_on,
    pick_format,
    reading_floor_applies,
    serves_alone,
    walk_ladders,
)
from .estimate.format_search import fits_at as fits_at
from .estimate.format_search import reading_floor_unchecked as reading_floor_unchecked
from .estimate.formats import (
    engine_weights,
    format_ladder,
    format_quality,
    gguf_file_skipped,
    given_format_why,
    rung_bytes,
    weights_asked,
)
from .estimate.framework import with_framework
from .estimate.inference.common import running_and_queued
from .estimate.inference.media import Media, media_in_context
from .estimate.model_warnings import refuse_engine, refuse_unmodelled
from .estimate.rate_capacity import capacity_share, share_words
from .estimate.recommend_layout import (
    EP_PRUNE,
    MAX_SCALE_INSTANCES,
    NEEDS_LEAST,
    SAME_GLOBAL_BATCH,
    SP_SEARCH,
    ScaledLayout,
    fastest_layout,
    search_layout,
    training_flags,
)
from .estimate.training.compose import FSDP_MIXED_PRECISION
from .estimate.verdict import check_headroom, margin_rule, search_margin_assumption
from .formulas.cost import cost_per_million_tokens
from .formulas.params import count_params
from .formulas.training_time import device_hours
from .formulas.weight_formats import normalize_format, stored_format
from .frozen import fast_init
from .models import spec_of
from .numbers import BUDGET, KWH_PRICE, TIME_LIMIT, TOKEN_RATE, TRAIN_TOKENS, Range, check_number
from .result import SCHEMA_VERSION, Assumption, Notes, json_data
from .specs import InferenceWorkload, ModelSpec, TrainingWorkload
from .specs.training import layout_devices, recomputes_whole_layer
from .specs.workload import implied_engine, normalize_engine, read_number
from .suggest import did_you_mean
from .units import compared_usd, format_bytes, format_count, format_rate, format_seconds, format_usd

MAX_REPLICAS = 64
MAX_SEARCH_NODES = 512  # the most machines the training scale-out search grows a layout to
# the words an option on the user's hardware and one on a catalog card the user would buy are labelled with
# (``Option.ownership``): the CLI table, the JSON and the web's compare page show them verbatim
YOURS = "your hardware"
TO_BUY = "to buy"
PURCHASE = "purchase"  # the cost basis of a card to buy: no hourly price (``_device_candidate``)


@dataclass(frozen=True)
class Constraints:
    """What the user requires. Rates in tokens/s, times in seconds, prices in USD/h (or USD for a run)."""

    max_cost_per_hour: float | None = None
    tokens_per_second: float | None = None  # output tokens/s in total at the load (fit's tokens_per_second_total)
    user_tokens_per_second: float | None = None  # minimum decode speed each user sees
    max_ttft: float | None = None  # time to first token limit [s]
    deadline: float | None = None  # training wall-clock limit [s]
    max_cost: float | None = None  # training run budget [USD]
    laptop: bool = False
    cloud_only: bool = False
    providers: tuple[str, ...] = ()
    kwh_price: float | None = None  # USD/kWh for owned hardware
    headroom: float | None = None

    def __post_init__(self) -> None:
        for name, read in _LIMIT_READERS.items():  # as recommend's flags read them: '$5k', '2h', 'abc' refused
            v = getattr(self, name)
            if v is not None:
                object.__setattr__(self, name, _read_limit(name, v, read))
        if self.laptop and self.cloud_only:
            raise InputError("'must run on my laptop' and 'cloud only' exclude each other")
        if self.headroom is not None:  # '20%' read as --headroom reads it, so the answer echoes 0.2 as the CLI's does
            object.__setattr__(self, "headroom", check_headroom(self.headroom))

    def to_dict(self) -> dict[str, Any]:
        return {k: getattr(self, k) for k in self.__dataclass_fields__ if getattr(self, k) not in (None, False, ())}

    def latency(self) -> LatencyLimits:
        """The serving limits a weight format must meet (``estimate/format_search.py`` ``latency_failures``)."""
        return LatencyLimits(self.max_ttft, self.user_tokens_per_second, self.tokens_per_second)

    def for_mode(self, mode: str) -> Constraints:
        """These constraints for a ``serving`` or ``training`` search: a constraint only the other mode checks is
        refused (before, ``recommend --deadline 3d`` ranked serving options as meeting every constraint without
        reading the deadline, exit 0; ``recommend --train --max-ttft 0.5`` likewise)."""
        other = [k for k in MODE_CONSTRAINTS[mode] if getattr(self, k) is not None]
        if other:
            target = "training" if mode == "serving" else "serving"
            flags = ", ".join(f"{k} (--{k.replace('_', '-')})" for k in other)
            raise InputError(f"{flags} appl{'ies' if len(other) == 1 else 'y'} to {target}, not to {mode}"
                             + (" (add --train)" if target == "training" else " (drop --train)"))
        return self


def _money(period: str | None, rng: Range, rates: str = "") -> Callable[[object], float]:
    def read(value: object) -> float:
        from .request.quantities import parse_money
        return parse_money(value, period, rng, rates)
    return read


def _seconds(value: object) -> float:
    if isinstance(value, str):
        from .request.quantities import parse_duration
        value = parse_duration(value)
    return float(check_number(value, "", TIME_LIMIT))


# Constraints' numeric fields -> their reader: the money fields through the one money reader with the CLI flag's
# range and period (request/quantities.py parse_money; cli/common.py money_arg, cli/recommend_cmd.py), the others
# through the one number check with the flag's range (numbers.py) -- before, Constraints(max_cost='$5k') or
# max_cost='abc' raised a bare TypeError ('<=' between str and int)
_LIMIT_READERS: dict[str, Callable[[object], float]] = {
    "max_cost_per_hour": _money("h", BUDGET), "max_cost": _money(None, BUDGET, "the hourly limit is max_cost_per_hour"),
    "kwh_price": _money("kWh", KWH_PRICE),
    "tokens_per_second": lambda v: float(check_number(v, "", TOKEN_RATE)),
    "user_tokens_per_second": lambda v: float(check_number(v, "", TOKEN_RATE)),
    "max_ttft": _seconds, "deadline": _seconds,
}


def _read_limit(name: str, value: object, read: Callable[[object], float]) -> float:
    """``value`` of Constraints field ``name`` read by ``read``, or a FieldError naming the field (the CLI says its
    flag, cli/main.py cli_message; the readers' messages name no field, as argparse adds the flag)."""
    try:
        return read(value)
    except InputError as e:
        raise FieldError(name, f"{name}: {e}") from None


# the constraints a search of one mode cannot check: they belong to the other mode
MODE_CONSTRAINTS = {"serving": ("deadline", "max_cost"),
                    "training": ("tokens_per_second", "user_tokens_per_second", "max_ttft")}


@fast_init
@dataclass(frozen=True)
class Option:
    """One evaluated hardware choice and the reasons it was chosen or rejected."""

    target: str
    name: str
    provider: str
    device: str
    device_kind: str
    count: int
    tensor_parallel: int
    replicas: int
    engine: str
    weights_format: str
    status: str  # chosen | meets | rejected
    reasons: tuple[str, ...]
    price_per_hour: float | None = None
    cost_basis: str = "unknown"
    memory_per_device: int | None = None
    budget_per_device: int | None = None
    ttft_seconds: float | None = None  # at the requested concurrency (fit's loaded TTFT, formulas/serving_queue.py Q9a)
    tokens_per_second_per_user: float | None = None  # at the requested concurrency
    tokens_per_second: float | None = None
    cost_per_million_tokens: float | None = None
    training_seconds: float | None = None
    device_hours: float | None = None
    run_cost: float | None = None
    ttft_idle_seconds: float | None = None  # one prompt's prefill on an idle replica, beside the loaded TTFT
    # serving: the sequences run at once over every replica of the option (the sum of each replica's: the rest wait in
    # the engine's queue, estimate/inference/common.py eq. R1; fit's top-level figure for the same deployment, not one
    # copy's as before p23fix) and a queued request's mean wait before its prefill (formulas/serving_queue.py eq. Q3),
    # as fit gives them
    running_sequences: int | None = None
    queue_wait_seconds: float | None = None
    # at a request rate the wait is for admission (formulas/serving_queue.py eq. Q12) and the TTFT already holds it
    # (estimate/fit.py ``wait_before_ttft``)
    queue_wait_in_ttft: bool = False
    # the machines the option's ``count`` devices are in (fit's ``FitResult.instances``, the one convention): ``count``
    # is every device (fit's ``--count``, ``--gpus``), ``instances`` the catalog instances they make (count / the
    # instance's devices), with those added for a throughput target or a deadline; local devices: the copies of the
    # group, one machine each. ``replicas`` is fit's: the model copies over all ``count`` devices (tensor_parallel x
    # pipeline_parallel x replicas = count for a serving option that is not a split); ``price_per_hour`` is all ``instances``'
    instances: int = 1
    # training: the layout the option's memory and time are for (``estimate/fit.py`` ``training_layout``: the
    # sharding stated or the least-sharded ZeRO stage that fits there, the parallelism the workload states)
    layout: str | None = None
    # training: the FLOPs per token the option's duration counts for its own layout (``fit_training``'s
    # ``duration.flops_per_token``: the work each tensor-parallel rank repeats depends on the TP, EP and sequence
    # parallelism the option runs, the scale-out search's where it chose them)
    flops_per_token: float | None = None
    # serving: the quality cost of ``weights_format`` as ``models --fits-on``'s quality column states it
    # (``estimate.formats.format_quality``, its one home: '+0.66 ppl (below Q4_0)', 'unquantized', 'not rated
    # (re-quantized from mxfp4)'), so that a cheapest option in a lossy format is not read as free (probe24 D3)
    quality: str | None = None
    # serving: the pipeline stages of each replica (fit's ``FitResult.pipeline_parallel``: a replica is
    # tensor_parallel x pipeline_parallel devices), taken where fit's own layout does not fit within one machine
    # and a pipeline layout is faster (``estimate/fit.py`` ``with_pipeline_layouts``); 1 without stages
    pipeline_parallel: int = 1
    # serving: the better rung on the ladder that fits in memory but misses a limit (the reading-speed floor where no
    # limit was given), in its one sentence (estimate/format_search.py ``PassedOver.words``: 'Q4_K_M fits in memory
    # but gives 5.2 tokens/s per user, under the 5.29 tokens/s reading speed'), so that the format named is not read
    # as the best that fits in memory (probe33 D1); None where the option's format is the best that fits
    passed_over: str | None = None
    # serving: the data-parallel ranks of each replica, the routed experts split over all of them (fit's
    # ``FitResult.data_parallel``, ``expert_parallel``: `fit --dp D --enable-expert-parallel`), taken where eq. TP5
    # refuses a degree or tensor parallelism does not fit and the layout is faster (``with_pipeline_layouts``)
    data_parallel: int = 1
    expert_parallel: bool = False
    # serving at a request rate: the rate over the deployment's capacity as fit states it (estimate/rate_capacity.py
    # ``capacity_share``: its near-capacity warning at or above NEAR_CAPACITY_SHARE), said in the scale-out line
    # (probe33 D5: 'below its capacity' beside fit's '98% of it'); None at a concurrency or where fit states none
    capacity_share: float | None = None
    # serving: the pipeline layouts the option's search left out and why, each in fit's words (``FormatPick.stages_left``,
    # estimate/fit.py ``stages_left_line``: vLLM 0.10-0.14 with --async-scheduling), also among its ``reasons``; the
    # one field ``stages_left_warnings`` reads (review41 D8: it matched the reasons' text before)
    stages_left: tuple[str, ...] = ()

    @property
    def is_cpu(self) -> bool:
        return self.device_kind == "cpu"

    @property
    def ownership(self) -> str | None:
        """Whose the hardware is: ``YOURS`` (a device the user's hardware file marks owned), ``TO_BUY`` (a catalog
        card, where the user owns other hardware: ``_device_candidate``), else None (a cloud instance, or a local
        card when the user named no hardware of their own)."""
        return YOURS if self.provider == "owned" else TO_BUY if self.cost_basis == PURCHASE else None

    @property
    def layout_flags(self) -> str | None:
        """The flags that lay a pipeline option out as it was sized (`fit --tp T --pp P`, vLLM's
        --tensor-parallel-size / --pipeline-parallel-size, SGLang's --tp-size / --pp-size): what the CLI table, the
        JSON and the web pages show beside it; None for an option without pipeline stages."""
        if self.data_parallel > 1:
            return (f"--tp {self.tensor_parallel} --dp {self.data_parallel}"
                    + (" --enable-expert-parallel" if self.expert_parallel else ""))
        if self.pipeline_parallel <= 1:
            return None
        return f"--tp {self.tensor_parallel} --pp {self.pipeline_parallel}"

    @property
    def engine_flags(self) -> str | None:
        """The serving layout's flags of one replica as the engine is started (`--tp T`, or ``layout_flags``' `--tp T
        --pp P`; None at TP 1 without stages): what ``models --fits-on``'s engine column shows after the engine, so
        that the row, copied, starts the layout it was sized at (probe32 D7: `vllm` alone runs TP 1)."""
        if self.pipeline_parallel > 1 or self.data_parallel > 1:
            return self.layout_flags
        return f"--tp {self.tensor_parallel}" if self.tensor_parallel > 1 else None

    @property
    def devices_text(self) -> str:
        """The option's hardware as one line (``fit.devices_text``: '16 x b200 (gcp-a4-highgpu-8g, 2 instances)'),
        what the CLI table, the web's compare page and a plan's alternatives show."""
        return devices_text(self.count, self.device, self.instances,
                            self.target if self.target != self.device else None)

    def to_dict(self) -> dict[str, Any]:
        # every field in order (picked in C: a search answers thousands of options), the reasons as a list
        d = dict(zip(_OPTION_FIELDS, _option_values(self.__dict__), strict=True))
        d["reasons"] = list(self.reasons)
        d["devices_text"] = self.devices_text
        d["ownership"] = self.ownership
        d["layout_flags"] = self.layout_flags
        if self.data_parallel > 1:  # the layout in words and the engine's own flags (fit's one home of both)
            d["layout"] = serving_layout_text(self.tensor_parallel, self.pipeline_parallel, self.data_parallel,
                                              self.expert_parallel)
            d["serving_flags"] = serving_engine_flags(self.engine, self.tensor_parallel, self.pipeline_parallel,
                                                      self.data_parallel, self.expert_parallel)
        return d


_OPTION_FIELDS = tuple(Option.__dataclass_fields__)
_option_values = itemgetter(*_OPTION_FIELDS)


@dataclass(frozen=True)
class Recommendation:
    """Ranked hardware options (``options[0]`` is chosen), the rejections with reasons, advice, assumptions, warnings."""

    kind: str
    model: str
    workload: dict[str, Any]
    constraints: Constraints
    options: tuple[Option, ...]  # meeting every constraint, best first; options[0] is chosen
    rejected: tuple[Option, ...]
    advice: tuple[str, ...] = ()
    quantization: tuple[str, ...] = ()
    assumptions: tuple[Assumption, ...] = ()
    warnings: tuple[str, ...] = ()
    # why the search answered with no candidate sized (a request rate past every candidate's ceiling,
    # ``rate_past_every_copy``): a constraint that fails, exit 1 as a search with no option; None otherwise
    refusal: str | None = None
    # the answer-level lines of the pipeline layouts the options' searches left out (``stages_left_warnings``, also
    # among ``warnings``): what the plan's search copies into a job's warnings
    stages_left: tuple[str, ...] = ()

    @property
    def chosen(self) -> Option | None:
        return self.options[0] if self.options else None

    def to_dict(self) -> dict[str, Any]:
        return json_data({"schema_version": SCHEMA_VERSION, "kind": f"recommend-{self.kind}", "model": self.model, "workload": self.workload,
                "constraints": self.constraints.to_dict(), "chosen": self.chosen.to_dict() if self.chosen else None,
                "options": [o.to_dict() for o in self.options], "rejected": [o.to_dict() for o in self.rejected],
                "advice": list(self.advice), "quantization": list(self.quantization),
                "assumptions": [a.to_dict() for a in self.assumptions], "warnings": list(self.warnings),
                **({"refusal": self.refusal} if self.refusal is not None else {})})

    def __str__(self) -> str:
        from .render.notebook import recommendation_text
        return recommendation_text(self)

    def _repr_html_(self) -> str:
        from .render.notebook import recommendation_html
        return recommendation_html(self)


@dataclass
class _Candidate:
    target: str
    name: str
    provider: str
    device: Device
    count: int
    instance: Instance | None
    price: float | None
    cost_basis: str
    memory: int | None = None  # RAM of a CPU instance
    notes: list[str] = field(default_factory=list)


def _instance_candidate(inst: Instance) -> _Candidate:
    mem = int(inst.memory.base) if inst.device.kind == "cpu" and inst.memory is not None else None
    price, basis, _ = hourly_price(inst.device, inst.device_count, inst)
    cand = _Candidate(inst.id, inst.name, inst.provider, inst.device, inst.device_count, inst, price, basis, mem)
    if inst.price is not None:
        cand.notes.append(f"price {inst.price.raw} USD/h in {inst.region} ({inst.price.source}, "
                          f"{inst.price.date})" + (f", {inst.price.confidence.upper()} confidence"
                                                   if inst.price.confidence else ""))
    return cand


def _device_candidate(d: Device, c: Constraints, count: int = 1, to_buy: bool = False) -> _Candidate:
    """``count`` x ``d`` as a candidate, priced by ``fit.hourly_price`` (a given price; owned hardware: its power at
    ``c.kwh_price``). ``to_buy``: the user owns other hardware (``_candidates``) and ``d`` is a catalog card they
    would buy: the power it draws is not its cost, so it has no hourly price (cost basis ``PURCHASE``) and ranks
    after the priced options (``rank_key``), its launch price named where the catalog gives one."""
    if to_buy and not d.owned and d.price is None:
        launch = (f" (launch price ${float(d.launch_price.base):,.0f}, {d.launch_price.source})"
                  if d.launch_price is not None else "")
        note = (f"to buy: not among your hardware (the devices your --hardware-file marks owned){launch}; its power "
                "alone is not its cost, so it has no hourly price")
        return _Candidate(d.id, d.name, "local", d, count, None, None, PURCHASE, notes=[note])
    price, basis, _ = hourly_price(d, count, None, c.kwh_price)
    return _Candidate(d.id, d.name, "owned" if d.owned else "local", d, count, None, price, basis)


def rank_key(o: Option) -> tuple[bool, bool, float, float]:
    """The order recommend lists options in, the one rule (serving: the options that meet and the rejections; the
    CPU-or-GPU advice's best of each kind): the user's own hardware first (``Option.ownership`` ``YOURS``: what they
    passed their machine for, and what costs them at most its power), then by $/h, cheapest first, unpriced last
    (a card to buy, owned hardware with no --kwh-price), then by output tokens/s, fastest first."""
    return (not mine_first(o), o.price_per_hour is None, o.price_per_hour or 0.0, -(o.tokens_per_second or 0.0))


def mine_first(o: Option) -> bool:
    """Whether ``o`` runs on the user's own hardware (a device their --hardware-file marks owned): the first term of
    every ordering recommend makes (``rank_key``, the training search's sort by run cost)."""
    return o.provider == "owned"


def budget_unmeasured(provider: str, price: float | None) -> str | None:
    """The one rule for a cost budget (``max_cost_per_hour``, ``max_cost``) and an option with no price: the user's
    own hardware (``provider`` "owned") is already paid for and costs at most its power, so a budget in dollars
    cannot be measured against it and does not reject it -- the reason returned says so and names --kwh-price, which
    prices it by its TDP and then checks it against the budget (review21 D1: it was rejected with "no hourly price
    to compare with the budget" and a cloud CPU at Q2_K with a 4.2 min TTFT was chosen over the user's H100). None
    where the budget applies as to any option (a priced option; an unpriced catalog option is rejected)."""
    if provider != "owned" or price is not None:
        return None
    return (f"{YOURS} with no price: the budget cannot be measured against it (it costs at most its power), so it "
            "is not rejected by it; --kwh-price prices it by its TDP and checks it against the budget")


def _with_devices(cand: _Candidate, devices: int, c: Constraints) -> _Candidate | str:
    """``cand`` as ``devices`` devices (``recommend --train --gpus N``): a bare device N times; an instance as the
    whole instances that make N (fit's rule, ``fit.not_whole_instances``: 2 x a 1-GPU instance for 2, never part of
    an 8-GPU one), priced as that many (``fit.hourly_price``); else why it cannot give N, for its skipped entry."""
    inst = cand.instance
    if inst is None:
        return dataclasses.replace(_device_candidate(cand.device, c, devices, cand.cost_basis == PURCHASE),
                                   memory=cand.memory, notes=list(cand.notes))
    why = not_whole_instances(inst.id, inst.device_count, devices)
    if why is not None:
        return why
    price, basis, _ = hourly_price(inst.device, devices, inst)
    return dataclasses.replace(cand, count=devices, price=price, cost_basis=basis, notes=list(cand.notes))


def _more_cards_asked(cand: _Candidate, opt: Option) -> bool:
    """Whether recommend asks more cards of ``cand``: a local GPU (a desktop card, an owned or a hardware file's GPU:
    not a laptop's one, not an instance, whose count is its own) on one of which no weight format fits (``opt`` has
    no fit behind it)."""
    d = cand.device
    return (cand.instance is None and cand.count == 1 and d.kind == "gpu" and d.form_factor != "laptop"
            and opt.status != "meets" and opt.tokens_per_second is None)


Evaluated = tuple[Option, tuple[str, ...], int]  # recommend's evaluation: the option, fit's warnings, copies


def _fewest_cards(short: Sequence[_Candidate], c: Constraints, evaluated_for: Callable[[_Candidate], Evaluated],
                  per_node: int = SERVING_GPUS_PER_NODE) -> list[tuple[_Candidate, Evaluated]]:
    """For each local GPU one card of which holds no format (``_more_cards_asked``), the fewest of the same card, up
    to one machine's GPUs (``per_node``: fit's machine, ``serving_machine_size``; ``recommend --gpus-per-node``
    where given, else SERVING_GPUS_PER_NODE), on which one does, as ``fit --count N`` and ``models --fits-on --count
    N`` lay them out (tensor parallelism on vLLM / SGLang, a llama.cpp split): that many cards as a candidate, priced
    as that many (``_with_devices``), with its evaluation (``evaluated_for``, recommend's for any candidate); none
    where even that many hold no format. The fewest: a card more costs more, and copies for a load are ``_priced``'s;
    a count that holds a format only on a pipeline layout (fit's ``with_pipeline_layouts``: 6 cards at TP 2 x PP 3
    where 6 divides no head count) and misses a limit does not end the search (it ends, as before, at a count that
    meets, or holds a format without stages): a larger count that meets is not hidden by it; none met, the fewest
    that held a format is the rejection shown.
    Every count from 2 up is asked, in order: whether a format fits is not monotone in the count (vLLM and SGLang lay
    a model out at a tensor-parallel degree that divides its heads: 70B at 2, 4 or 8 cards, never 5-7), so no count
    is skipped by a bound (review19 D1).

    A device the user's hardware file marks ``owned`` says nothing of how many they own (a device entry has no
    count), so such an option says that its count is this search's (probe20 C5: "rtx-4090 (your hardware): 2 x
    rtx-4090" read as the file's count)."""
    found: list[tuple[_Candidate, Evaluated]] = []
    for cand in short:
        held: tuple[_Candidate, Evaluated] | None = None  # the fewest on which a format fits but misses a limit
        for k in range(2, per_node + 1):
            more = _with_devices(cand, k, c)
            assert not isinstance(more, str)  # a bare device: any count
            if cand.device.owned:  # before the evaluation, whose reasons carry the candidate's notes
                more.notes.append(f"{k} x {cand.device.id}: the count is this search's, the fewest of these cards "
                                  f"on which a format fits; your --hardware-file marks {cand.device.id} owned, not "
                                  "how many you have")
            evaluated = evaluated_for(more)
            opt = evaluated[0]
            if opt.status == "meets":
                found.append((more, evaluated))
                break
            if opt.tokens_per_second is not None and opt.pipeline_parallel == 1:  # holds one without stages
                found.append(held or (more, evaluated))
                break
            if opt.tokens_per_second is not None and held is None:
                held = (more, evaluated)
        else:
            if held is not None:
                found.append(held)
    return found


def _candidates(cat: HardwareCatalog, c: Constraints, training: bool) -> tuple[list[_Candidate], list[Option]]:
    out: list[_Candidate] = []
    skipped: list[Option] = []
    providers = {p.lower() for p in c.providers}
    known = sorted({inst.provider for inst in cat.instances.values()})
    for p in sorted(providers - set(known)):  # a typo would answer "no option" (exit 1) as if none qualified
        raise InputError(f"unknown provider {p!r}{did_you_mean(p, known)} (the catalog's: {', '.join(known)})")
    if not c.laptop:
        for inst in cat.instances.values():
            if providers and inst.provider not in providers:
                continue
            out.append(_instance_candidate(inst))
    if c.cloud_only or providers:
        return out, skipped
    # the user's own hardware (a hardware file's owned devices): the catalog's local cards are then ones to buy
    to_buy = any(d.owned and (not c.laptop or d.form_factor == "laptop") for d in cat.devices.values())
    for d in cat.devices.values():
        local = d.owned or d.kind == "apple" or d.form_factor in ("desktop", "laptop") or d.origin != "catalog"
        if c.laptop and d.form_factor != "laptop":
            continue
        if not local:
            continue
        if d.memory_bytes is None:
            skipped.append(_rejected_stub(d, "memory size unknown (add it with --hardware-file)",
                                          PURCHASE if to_buy and d.origin == "catalog" else "unknown"))
            continue
        out.append(_device_candidate(d, c, to_buy=to_buy and d.origin == "catalog"))
    return out, skipped


def best_option_on(model: ModelSpec | str, hardware: str | Device | Instance, count: int | None = None, *,
                   context: int = InferenceWorkload.context, concurrency: int = InferenceWorkload.concurrency,
                   output_tokens: int | None = None, weights: str | None = None,
                   constraints: Constraints | None = None, hardware_files: Sequence[str | Path] = (),
                   engine: str | None = None, memory: int | None = None, **workload: Any) -> Option:
    """The evaluation ``recommend`` makes of one candidate: the highest-quality weight format on the engine's ladder
    that fits ``count`` x ``hardware`` (an instance brings its count; a whole multiple of it is that many instances,
    as ``fit`` takes it: the option is fit's answer, its count the devices, priced as the instances) and meets the
    constraints, or why none does.
    ``engine`` (None: the candidate's default engine) and ``**workload`` (any other InferenceWorkload field, e.g.
    engine_version, kv_dtype) reach ``fit`` as in ``recommend_inference``, checked up front the same way;
    ``memory`` (bytes per device, None: the catalog's, or a CPU instance's RAM) and ``constraints.headroom`` reach
    ``fit`` as its ``memory`` and ``headroom`` (``fit --memory --headroom``).
    ``llmsizer models --fits-on`` asks it for every catalog model."""
    spec = spec_of(model)
    c = (constraints or Constraints()).for_mode("serving")
    # the ladder walk with the search's checks and the reading-speed floor (estimate/format_search.py format_on)
    pick, unchecked = format_on(spec, hardware, count, context=context, concurrency=concurrency,
                                output_tokens=output_tokens, weights=weights, limits=c.latency(), headroom=c.headroom,
                                hardware_files=hardware_files, engine=engine, memory=memory, **workload)
    device, n, _, instance = target_and_count(hardware, count, hardware_files, instances=True)
    cand = _instance_candidate(instance) if instance is not None else _device_candidate(device, c, n)
    if instance is not None and n != instance.device_count:  # whole instances (fit's rule), priced as that many
        k = instances_for(n, instance)
        many = _with_devices(cand, n, c)
        if isinstance(many, str):  # (target_and_count refuses it first, with fit's line)
            raise InputError(many)
        cand = many
        cand.notes.insert(0, f"{k} instances of {instance.device_count} device"
                             f"{'s' if instance.device_count > 1 else ''} (count {n}), priced as {k}")
    if memory is not None:  # what fit(memory=...) is given: the same number, so the same usable memory and verdict
        cand.memory = int(memory)
    fields: dict[str, Any] = {k: v for k, v in workload.items() if v is not None}
    opt = _priced(_option_from_pick(cand, pick), cand, c, concurrency, context, output_tokens, spec, hardware_files,
                  c.headroom, fields)
    if unchecked is not None and opt.status == "meets":
        opt = _replace(opt, reasons=(*opt.reasons, unchecked))
    return opt


def _search_constraints(fields: dict[str, Any], c: Constraints, training: bool = False) -> Constraints:
    """The workload keywords a search cannot take as fit takes them, settled once, up front (bad input: one line,
    exit 2). ``headroom`` is the Constraints' (``recommend --headroom``): a keyword ``headroom=0.2`` (or '20%', read
    as ``--headroom`` reads it) is taken as it, refused only when ``constraints`` gives another. ``device``,
    ``gpu_runtime`` and ``memory`` are each candidate's (the search ranges over the catalog's devices, each with its
    kind, runtime and memory; the CLI's ``recommend`` has none of these flags): refused with a line naming the fit
    that sizes one device (``fit_training`` for a training search). ``fields`` loses the headroom; returns the
    constraints searched with."""
    fit_call, fit_cli = ("fit_training", "llmsizer fit --train") if training else ("fit", "llmsizer fit")
    for name in ("device", "gpu_runtime"):
        if fields.get(name) is not None:
            v = fields[name]
            raise InputError(f"{name} {v!r}: recommend searches every device in the catalog (each candidate brings "
                             f"its own device kind and runtime); to size one device use {fit_call}(model, DEVICE) "
                             f"({fit_cli} --device DEVICE)")
    if fields.get("memory") is not None:
        raise InputError(f"memory: recommend searches every device in the catalog, each with its own memory; to "
                         f"size one device with a memory you give use {fit_call}(model, device, memory=...) "
                         f"({fit_cli} --device NAME --memory SIZE), or add the device to a hardware file "
                         "(--hardware-file)")
    if fields.get("headroom") is None:
        fields.pop("headroom", None)
        return c
    hr = check_headroom(fields.pop("headroom"))  # the range and reader of --headroom (Constraints' is read already)
    if c.headroom is not None and c.headroom != hr:
        raise InputError(f"headroom given twice: {hr:g} as a keyword and {c.headroom:g} in constraints=; give it "
                         "once")
    return dataclasses.replace(c, headroom=hr)


def _rejected_stub(d: Device, why: str, cost_basis: str = "unknown") -> Option:
    return Option(d.id, d.name, "local", d.id, d.kind, 1, 1, 1, "", "", "rejected", (why,), cost_basis=cost_basis)


def _price_text(p: float | None, basis: str) -> str:
    if p is None:
        return "no hourly price"
    return f"${p:.2f}/h" + (" (power)" if basis == "power" else "")


def _llamacpp_media(spec: ModelSpec, w: InferenceWorkload) -> Media | None:
    """The media of ``w`` as llama.cpp's own preprocessing sizes them, for recommend's assumption when no engine is
    stated (None where llama.cpp refuses the model's images: its options are rejected with that reason)."""
    try:
        return media_in_context(spec, dataclasses.replace(w, engine="llamacpp"), Notes())
    except InputError:
        return None


def recommend_inference(model: ModelSpec | str, *, context: int = InferenceWorkload.context,
                        concurrency: int = InferenceWorkload.concurrency,
                        output_tokens: int | None = None, weights: str | None = None,
                        constraints: Constraints | None = None, hardware_files: Sequence[str | Path] = (),
                        catalog: HardwareCatalog | None = None, quantization_advice: bool = True,
                        engine: str | None = None, media: Mapping[str, Any] | None = None,
                        kv_unified: bool | None = None, request_rate: float | None = None,
                        **workload: Any) -> Recommendation:
    """Rank hardware for serving ``model`` at ``concurrency`` sequences of ``context`` tokens (on ``engine``, or
    each candidate's default engine, ``estimate.fit.default_engine``; ``media``: the InferenceWorkload image/video
    fields, whose tokens add to each prompt; ``kv_unified`` and ``**workload``: any other InferenceWorkload field,
    e.g. kv_dtype, dtype, metric, max_num_seqs, n_gpu_layers). Every candidate is judged by ``fit`` with all of
    these fields, so an option's memory, verdict and speed are the ones ``fit`` gives for the same flags. Text is read
    as fit reads it (``context="8k"`` is 8192 tokens, ``concurrency="4"``); ``headroom=`` is the constraints'
    headroom, ``device=`` and ``memory=`` are each candidate's and refused (``_search_constraints``).
    ``request_rate`` [requests/s]: requests arriving at random at that rate (open arrivals, formulas/serving_queue.py
    eq. Q10) in place of ``concurrency``: each option is the fewest copies of a candidate whose each copy, at its
    equal share of the rate, fits and meets the limits (``_rate_copies``; fit's rate path, the in flight derived),
    answered as ``fit`` answers those copies' devices at the whole rate (``_deployment_copies``: the busiest replica
    timed; one more copy where it misses)."""
    spec = spec_of(model)
    refuse_unmodelled(spec, training=False, search=True)  # one line for the model, not one rejection per candidate
    media = dict(media or {})
    # the workload fields every fit of a candidate gets: media, KV dtype, engine settings, metric, ...
    fields: dict[str, Any] = {**media, **{k: v for k, v in workload.items() if v is not None}}
    if kv_unified is not None:
        fields["kv_unified"] = kv_unified
    # fit's machine size (estimate/fit.py serving_machine_size; not a workload field): the machines the bare devices
    # are, told to each of their fits as `fit --gpus-per-node`; an instance is its own machine (the plan's rule)
    per_node = fields.pop("gpus_per_node", None)
    c = _search_constraints(fields, (constraints or Constraints()).for_mode("serving"))
    limited = [k for k, v in (("cloud_only", c.cloud_only), ("provider", c.providers)) if v]
    if per_node is not None and limited:  # it sizes bare devices only, and these searches have none
        raise FieldError("gpus_per_node", f"gpus_per_node sizes the machines of bare devices (your own and local "
                         f"cards); {' and '.join(limited)} search{'es' if len(limited) == 1 else ''} only cloud "
                         "instances, each one machine of its own devices: give one or the other", also=tuple(limited))
    if request_rate is not None:
        request_rate = read_request_rate(request_rate)
        if c.tokens_per_second is not None:  # (at a rate the output tokens/s are the rate's: rate x output tokens)
            raise FieldError("request_rate", "request_rate sets the output tokens/s (rate x output tokens): give "
                             "request_rate or tokens_per_second, not both", ("tokens_per_second",))
    w = check_search_workload(fields, context, concurrency, output_tokens, engine, c.headroom)
    context, concurrency, output_tokens = w.context, w.concurrency, w.output_tokens  # text read as fit reads it
    implied = implied_engine(fields) if engine is None else None  # a setting one engine reads: every candidate's
    engine = implied[0] if implied is not None else engine
    found = media_in_context(spec, w, Notes())
    if engine is not None:  # the stated engine refuses the model itself (an encoder-decoder off transformers): one
        refuse_engine(spec, normalize_engine(engine))  # line, exit 2, not one rejection per candidate device
    if request_rate is not None and engine is not None:  # an engine that serves no rate, on any hardware: one line
        refused_engine = engine_serves_no_rate(normalize_engine(engine))  # (review30 D3), before any candidate
        if refused_engine is not None:
            raise refused_engine
    if engine is not None and weights is not None:  # a format the stated engine does not run, on any hardware
        engine_weights(spec, normalize_engine(engine), weights)
    # a .gguf file the stated engine will not load on any device: said once (or refused when no rung is left)
    file_skipped = gguf_file_skipped(spec, normalize_engine(engine), weights) if engine is not None else None
    reading_floor = reading_floor_applies(c.latency(), output_tokens)
    if reading_floor:  # no speed limit given: each user gets at least reading speed (efficiency.py)
        c = dataclasses.replace(c, user_tokens_per_second=READING_FLOOR)
    cat = catalog or load_catalog(hardware_files)
    check_headroom(c.headroom)  # checked once; each option's margin is its engine's (estimate/verdict.py margin_rule)
    hr = c.headroom
    cands, rejected = _candidates(cat, c, training=False)
    if request_rate is not None and cands:  # refused before any candidate is sized when none could carry it
        most = max(max(cand.count for cand in cands), serving_machine_size(None, per_node))  # (_fewest_cards' too)
        refused = rate_past_every_copy(request_rate, most)
        if refused is not None:  # a constraint no candidate meets: answered with no option (exit 1), not bad input
            return Recommendation("inference", spec.name, {"context": context, "concurrency": concurrency,
                                  "request_rate": request_rate, "output_tokens": output_tokens, "weights": weights},
                                  c, (), (), refusal=str(refused))
    meets: list[Option] = []
    memo: dict[tuple[Any, ...], tuple[Option, tuple[str, ...], int]] = {}  # (option, fit's warnings, copies)
    said: dict[int, tuple[str, ...]] = {}  # a meeting option (by id) -> the warnings of the fit behind it

    def fields_of(cand: _Candidate) -> dict[str, Any]:
        """The fields of ``cand``'s fits: with the machine size given, for bare devices only."""
        return fields if per_node is None or cand.instance is not None else {**fields, "gpus_per_node": per_node}

    def evaluated_for(cand: _Candidate) -> tuple[Option, tuple[str, ...], int]:
        inst = cand.instance  # the key holds everything the evaluation reads (the VM share needs vCPUs and SMT)
        key = (cand.device.id, cand.count, cand.memory, inst.interconnect if inst else None,
               inst.vcpus.raw if inst and inst.vcpus else None,
               inst.threads_per_core.raw if inst and inst.threads_per_core else None, inst is None)
        evaluated = memo.get(key)
        if evaluated is None:
            evaluated = ((*_evaluate(spec, cand, context, concurrency, output_tokens, weights, c, hr,
                                     hardware_files, engine, fields_of(cand)), 1) if request_rate is None else
                         _rate_copies(spec, cand, request_rate, context, output_tokens, weights, c, hr,
                                      hardware_files, engine, fields_of(cand)))
            memo[key] = evaluated
        return evaluated

    def add(cand: _Candidate, evaluated: tuple[Option, tuple[str, ...], int]) -> None:
        opt = _priced(evaluated[0], cand, c, concurrency, context, output_tokens, spec, hardware_files, hr,
                      fields_of(cand), evaluated[2], request_rate)
        if opt.status == "meets":
            said[id(opt)] = evaluated[1]
        (meets if opt.status == "meets" else rejected).append(opt)

    short: list[_Candidate] = []  # the local GPUs one card of which holds no format (_fewest_cards)
    for cand in cands:
        evaluated = evaluated_for(cand)
        add(cand, evaluated)
        if _more_cards_asked(cand, evaluated[0]):
            short.append(cand)
    # the fewest of each that hold one, within one of the machines the bare devices are (fit's machine size)
    for cand, more in _fewest_cards(short, c, evaluated_for, serving_machine_size(None, per_node)):
        add(cand, more)
    meets.sort(key=rank_key)
    # the chosen option's warnings are fit's for it (an MoE's, a recurrent layer's approximation, the high end of
    # the range past the budget...): `fit` on the chosen target says them; none chosen: none
    chosen_said = said.get(id(meets[0]), ()) if meets else ()
    if meets:
        first = meets[0]
        others = sum(o.ownership != YOURS for o in meets)
        why = (f"{YOURS} (marked owned in --hardware-file): fits and meets every constraint "
               f"({_price_text(first.price_per_hour, first.cost_basis)}); {others} catalog option"
               f"{'s' if others != 1 else ''} follow{'s' if others == 1 else ''}, cheapest first"
               if first.ownership == YOURS else
               f"cheapest option that fits and meets every constraint ({_price_text(first.price_per_hour, first.cost_basis)})"
               if first.price_per_hour is not None else "fits and meets every constraint; no option with a price does")
        meets[0] = _replace(first, status="chosen", reasons=(why, *first.reasons))
    rejected.sort(key=lambda o: rank_key(o)[:3])
    assumptions = [search_margin_assumption(c.headroom, fields.get("fit_target")),
                   Assumption("context", context, False, "tokens per sequence (prompt + output)"),
                   Assumption("concurrency", concurrency, False, "sequences served at once") if request_rate is None
                   else Assumption("request_rate", f"{request_rate:g} requests/s", False,
                                   "requests arriving at random (a Poisson process) over each option's copies; "
                                   "the requests in flight derived (Little's law, formulas/serving_queue.py eq. "
                                   "Q10c) and split over the replicas, the busiest timed, as `fit --count N "
                                   "--request-rate` answers the option's devices")]
    if implied is not None:
        assumptions.append(Assumption("engine", implied[0], True, implied[1]))
    if per_node is not None:
        assumptions.append(Assumption("gpus_per_node", serving_machine_size(None, per_node), False,
                                      "devices per machine of the bare devices: each one's cards searched up to one "
                                      "machine, each fit's `--gpus-per-node`; an instance is its own machine"))
    if weights is not None:  # a given format, and the alias it resolved from ('int4' -> gptq-int4)
        assumptions.append(Assumption("weights", normalize_format(weights), False, given_format_why(weights)))
    if found is not None:
        # each engine's own image rules (estimate/inference/media.py image_rules): llama.cpp's options may differ
        own = _llamacpp_media(spec, w) if w.engine is None and not w.pan_and_scan else None
        differs = own is not None and own.tokens != found.tokens
        assumptions.append(Assumption("media_tokens", found.tokens, False, "image/video tokens per sequence, added "
                                      "to the context and the prompt (estimate/inference/media.py)"
                                      + (f"; {own.tokens} on llama.cpp, whose own preprocessing sizes images and video "
                                         "(formulas/vision_tokens.py LLAMACPP_MTMD)" if differs and own else "")))
    if output_tokens == 0 and not c.max_ttft:
        assumptions.append(Assumption(
            "user_tokens_per_second", "none (prefill only)", True, "output_tokens 0 (prefill only): no token is read, so no reading-"
            "speed floor; any speed counts (give --max-ttft to limit the prefill)"))
    if reading_floor:
        assumptions.append(Assumption(
            "user_tokens_per_second", c.user_tokens_per_second, True,
            "no speed or latency limit given: at least human reading speed per user (Brysbaert 2019: 238 words/min "
            "x 4/3 tokens per word)"))
    advice = _cpu_gpu_advice(spec, meets, rejected, c, concurrency, request_rate)
    # GGUF formats on llama.cpp: advice for a request that names no engine or llama.cpp, none for one that pinned
    # vLLM, SGLang or transformers (whose formats are not GGUF files)
    gguf_engine = engine is None or normalize_engine(engine) == "llamacpp"
    quant = _quantization_advice(spec, cat, context, concurrency, hr, fields) \
        if quantization_advice and gguf_engine and request_rate is None else ()  # (sized at a concurrency)
    warnings = [*chosen_said, file_skipped] if file_skipped else list(chosen_said)
    stages_left = stages_left_warnings([*meets, *rejected])
    warnings.extend(stages_left)
    slow = slow_first_token_warning(meets, c)
    if slow:
        warnings.append(slow)
    if not any(o.price_per_hour is not None for o in meets + rejected):
        warnings.append("no candidate has an hourly price; ranking is by throughput")
    unpriced = unpriced_yours(meets + rejected, c)
    if unpriced:
        warnings.append(unpriced)
    newer = newer_release_note(normalize_engine(engine), fields.get("engine_version")) if engine else None
    if newer:  # fit's warning for a release newer than the data: every option was timed by the newest rule
        warnings.append(newer)
    meets, rejected = _with_quality(spec, meets), _with_quality(spec, rejected)
    return Recommendation("inference", spec.name, {"context": context, "concurrency": concurrency,
                          **({"request_rate": request_rate} if request_rate is not None else {}),
                          "output_tokens": output_tokens, "weights": weights}, c, tuple(meets), tuple(rejected),
                          tuple(advice), tuple(quant), tuple(assumptions), tuple(dict.fromkeys(warnings)),
                          stages_left=tuple(stages_left))


def stages_left_warnings(options: Sequence[Option]) -> list[str]:
    """One answer-level warning per distinct line of the options whose search left pipeline layouts out
    (estimate/fit.py ``stages_left_line``, fit's words: each such option's ``stages_left``), naming those options: the
    text shows a few rejections only, and the search must not leave the layouts out silently."""
    on: dict[str, list[str]] = {}
    for o in options:
        for line in o.stages_left:
            on.setdefault(line, []).append(o.target if o.target != o.device else f"{o.count} x {o.device}")
    return [f"{', '.join(dict.fromkeys(names))}: {line}" for line, names in on.items()]


def unpriced_yours(options: Sequence[Option], c: Constraints) -> str | None:
    """The line for the user's own hardware left with no hourly price (``rank_key`` lists it first all the same):
    without ``kwh_price``, that it can be priced by its power draw; with it, which devices have no power figure (TDP)
    to price by. None where every one is priced."""
    names = list(dict.fromkeys(o.device for o in options if o.ownership == YOURS and o.price_per_hour is None))
    if not names:
        return None
    if c.kwh_price is None:
        return (f"{YOURS} ({', '.join(names)}) has no hourly price, so it is listed first unpriced and no cost "
                "budget rejects it: give kwh_price "
                "(--kwh-price, USD per kWh, e.g. 0.15) to price it by its power draw (its TDP at full load) against "
                "the catalog's options")
    return (f"{YOURS} ({', '.join(names)}) has no power figure (tdp) to price it by at ${c.kwh_price:g}/kWh: add its "
            "tdp to the hardware file")


def _with_quality(spec: ModelSpec, options: Sequence[Option]) -> list[Option]:
    """``options`` each with its weight format's quality (``format_quality`` of the format against the model's
    stored one, as ``models --fits-on`` rates it); an option with no format (a rejection before any rung) keeps None."""
    stored = stored_format(spec)[0]
    rated: dict[str, str] = {}
    return [_replace(o, quality=rated.setdefault(o.weights_format, format_quality(o.weights_format, stored)))
            if o.weights_format and o.weights_format != "file" else o for o in options]


def _replace(o: Option, **kw: Any) -> Option:
    """``dataclasses.replace(o, **kw)`` without rebuilding every field through ``__init__``: an Option is a frozen
    record with no ``__post_init__``, so the copy of its fields with ``kw`` changed is the same object; a name that
    is not a field is a TypeError, as replace raises (tests/consistency/test_fast_copies.py)."""
    if not kw.keys() <= Option.__dataclass_fields__.keys():
        raise TypeError(f"Option has no field {sorted(kw.keys() - Option.__dataclass_fields__.keys())}")
    new = object.__new__(Option)
    new.__dict__.update(o.__dict__, **kw)
    return new


def _evaluate(spec: ModelSpec, cand: _Candidate, context: int, concurrency: int, output_tokens: int | None,
              weights: str | None, c: Constraints, hr: float | None, hardware_files: Sequence[str | Path],
              engine_given: str | None = None,
              fields: Mapping[str, Any] | None = None) -> tuple[Option, tuple[str, ...]]:
    """Best weight format for one device x count (price-independent part; estimate/format_search.py
    ``walk_ladders``: the engine ladders ``models --fits-on`` and ``fit``'s hint walk, the next engine's where no
    engine is named and the first ends with no rung that meets); status meets/rejected; with the warnings of the fit
    a meeting option is (``FitResult.all_warnings``; none for a rejection)."""
    pick = walk_ladders(spec, cand.device, cand.count, cand.instance, cand.memory, context=context,
                        concurrency=concurrency, output_tokens=output_tokens, weights=weights, limits=c.latency(),
                        headroom=hr, hardware_files=hardware_files, engine_given=engine_given, fields=fields)
    return _option_from_pick(cand, pick), pick.warnings


# a share skipped as past eq. Q10a's capacity (``_rate_copies``): a miss the search reads only as one (never said),
# and the relative margin the share keeps above that capacity, so that the skip holds whatever the rounding of the
# per-replica share fit compares (rate / replicas >= capacity per replica)
_PAST_BOUND = FormatPick("rejected", "", 0, "", ("past the server's capacity",), past_capacity=True)
_ROUNDING = 1e-9


def rate_ceiling(devices: int) -> float:
    """An upper bound [requests/s] on the rate any MAX_REPLICAS copies of ``devices`` devices carry, on any engine
    that serves a rate (``ENG.PREFILL_SCHEDULING``: the continuous batchers ``fit --request-rate`` times). Each copy
    runs at most ``devices`` replicas (each at least one device), and each replica at most eq. Q10a's capacity with
    eq. Q11's serial share, 1 / max(D, s H) <= 1 / (s H) (formulas/serving_queue.py ``open_capacity``; H
    ``ENG.API_SERVER_SECONDS``, s ``ENG.API_SERVER_SERIAL_SHARE``), the least s H of those engines taken. Infinite
    where an engine has no serial server time (no such bound)."""
    serial = min(ENG.API_SERVER_SECONDS.get(e, 0.0) * ENG.API_SERVER_SERIAL_SHARE.get(e, 1.0)
                 for e in ENG.PREFILL_SCHEDULING)
    return math.inf if serial <= 0 else MAX_REPLICAS * devices / serial


def engine_serves_no_rate(engine: str) -> FieldError | None:
    """The refusal of a request rate on ``engine`` where it does not batch continuously (not in
    ``ENG.PREFILL_SCHEDULING``: transformers' generate has no open load, formulas/serving_queue.py eqs. Q4-Q10), in
    the words of ``fit``'s refusal (estimate/fit.py ``no_rate_load``): no candidate of a search on it serves a rate,
    so it is said once (exit 2), not as every candidate's rejection nor as the rate ceiling's (whose serial API
    server time is a continuous batcher's)."""
    if engine in ENG.PREFILL_SCHEDULING:
        return None
    return rate_needs_continuous_batching(f"{engine}, the engine given, serves no request rate")


def rate_past_every_copy(rate: float, devices: int) -> FieldError | None:
    """The refusal of a ``rate`` at or above ``rate_ceiling`` of the search's largest candidate (``devices``): every
    candidate's every count of copies (``_rate_copies``, up to MAX_REPLICAS) is past the server's capacity, so the
    search answers at once instead of sizing each (probe22 C8: 1e9 requests/s took 24 s of the web's 30), with no
    option and this line as its ``Recommendation.refusal`` (exit 1: a constraint that fails, as ``fit`` answers a
    rate its deployment cannot carry; probe23 C3)."""
    ceiling = rate_ceiling(devices)
    if rate < ceiling * (1 + _ROUNDING):
        return None
    per = ceiling / (MAX_REPLICAS * devices)
    return FieldError("request_rate", f"request_rate: {rate:g} requests/s is past what any candidate carries: at most "
                      f"{MAX_REPLICAS} copies of the largest ({devices} devices), each device at most one replica of "
                      f"at most {per:.3g} requests/s (1 / the API server's serial seconds per request, "
                      f"formulas/serving_queue.py eqs. Q10a, Q11), about {ceiling:,.0f} requests/s in all; lower the "
                      "rate or split it over several deployments")


def _rate_copies(spec: ModelSpec, cand: _Candidate, rate: float, context: int, output_tokens: int | None,
                 weights: str | None, c: Constraints, hr: float | None, hardware_files: Sequence[str | Path],
                 engine_given: str | None, fields: Mapping[str, Any]) -> tuple[Option, tuple[str, ...], int]:
    """The fewest copies k of ``cand`` (1..MAX_REPLICAS) whose each copy carries rate / k arrivals per second and,
    as ``pick_format(request_rate=rate / k)`` walks its formats (``fit --request-rate``, eq. Q10: the memory and the
    step at the requests in flight it derives), fits and meets the limits: its option, fit's warnings, and k. A
    copy past its capacity (eq. Q10a: no steady state), or missing a limit or its memory at the requests in flight
    its share derives, takes more copies (a smaller share: fewer in flight, a shorter queue, eq. Q10); k doubles
    until one meets, then the fewest between is searched (the load of each copy falls with k, so whether it meets
    only turns from no to yes). A miss more copies cannot mend (no format fits its memory at one request, or one
    request in flight at a time already misses a limit) is the candidate's rejection as it is.
    The search asks only the counts whose answer it does not know: each rung's memory at one request is sized once
    (no rate reaches it: ``pick_format``'s ``sized_memo``), and a share at or above a past-capacity pick's
    ``rate_bound`` (eq. Q10a's capacity of every rung, the same at every share) is past capacity without asking
    (below MAX_REPLICAS, whose pick's reason is said): the counts tried and the answer are the same. Below
    MAX_REPLICAS a past-capacity pick's reason is never said, so those picks ask ``refusal_only`` (the refusal without
    the deployment's ceilings, the climb stopped once refusal is certain): the same status at every count. Where one
    copy is past capacity, MAX_REPLICAS copies are asked next: past capacity there too, every count between is (a
    rung refused at a share is refused at every larger one: a deployment's ceilings do not depend on the rate asked),
    so the doubling would walk them all to MAX_REPLICAS's pick, the answer given at once
    (tests/estimate/test_rate_copies_jump.py asks each count between)."""
    picks: dict[int, FormatPick] = {}
    sized: dict[tuple[str, str, int | None], MemoryFit] = {}
    bound: list[float] = []  # eq. Q10a's capacity of one copy, every rung refused at or above it

    def at(k: int) -> FormatPick:
        if k not in picks:
            if bound and k < MAX_REPLICAS and rate / k >= bound[0] * (1 + _ROUNDING):
                return _PAST_BOUND
            picks[k] = pick_format(spec, cand.device, cand.count, cand.instance, cand.memory, context=context,
                                   concurrency=1, output_tokens=output_tokens, weights=weights, limits=c.latency(),
                                   headroom=hr, hardware_files=hardware_files, engine_given=engine_given,
                                   fields=fields, request_rate=rate / k, sized_memo=sized,
                                   refusal_only=k < MAX_REPLICAS)
            found = picks[k].rate_bound
            if found is not None and not bound:
                bound.append(found)
        return picks[k]

    # a share refused on every rung at MAX_REPLICAS copies (the smallest asked) is refused at every larger share:
    # each rung's refusal is monotone in the rate (its ceilings do not depend on it), so where one copy and
    # MAX_REPLICAS copies are both past capacity the doubling below walks every count to MAX_REPLICAS's pick
    k = MAX_REPLICAS if at(1).past_capacity and at(MAX_REPLICAS).past_capacity else 1
    while at(k).status != "meets":
        pick = at(k)
        alone = pick.fit is not None and serves_alone(pick.fit)
        if k == MAX_REPLICAS or not pick.past_capacity and (pick.fit is None or alone):
            # the most copies tried and still refused: the row says so, and that its figures and price are one
            # copy's at that share (the deployment it stands for is refused; review35 N4)
            why = (f"refused at {rate:g} requests/s: even {MAX_REPLICAS} copies (the most tried, "
                   f"{MAX_REPLICAS * cand.count} devices) at {rate / k:.3g} requests/s each do not carry it: "
                   f"{pick.reasons[0]}; the figures and price shown are one copy's ({cand.count} device"
                   f"{'s' if cand.count != 1 else ''}) at that share"
                   if k == MAX_REPLICAS and k > 1 else pick.reasons[0])
            return _option_from_pick(cand, dataclasses.replace(pick, reasons=(why, *pick.reasons[1:]))), (), 1
        k = min(2 * k, MAX_REPLICAS)
    low, high = k // 2, k  # at(low) misses (or low is 0), at(high) meets
    while high - low > 1:
        mid = (low + high) // 2
        low, high = (low, mid) if at(mid).status == "meets" else (mid, high)
    if high == 1:
        return _option_from_pick(cand, at(high)), at(high).warnings, high
    return _deployment_copies(spec, cand, rate, at(high), high, context, output_tokens, c, hr, hardware_files,
                              fields)


def _deployment_copies(spec: ModelSpec, cand: _Candidate, rate: float, share: FormatPick, k: int, context: int,
                       output_tokens: int | None, c: Constraints, hr: float | None,
                       hardware_files: Sequence[str | Path],
                       fields: Mapping[str, Any]) -> tuple[Option, tuple[str, ...], int]:
    """The option of ``k`` copies of ``cand`` (and more, one at a time, where it misses) as ``fit`` answers that
    deployment at the whole ``rate``: its layout (the format, engine and tensor-parallel degree of ``share``, one
    copy's pick at rate / k) over k x the candidate's devices, timed as fit times it, on its busiest replica (fit
    splits the requests in flight over the replicas, the busiest taking the rounded-up share: it can run one more
    than a copy alone at rate / k) with ``running_sequences`` over every replica (probe23 D1: recommend's option
    and `fit --count` for the same deployment differed). The option is given per copy (count, instances, replicas
    and tokens/s divided by the copies, which ``_priced`` multiplies back); its speed and queue are fit's."""
    pick = share
    # bare devices: each copy a machine of the candidate's devices (fit's --gpus-per-node), unless a size was given
    per_node = {} if cand.instance is not None or "gpus_per_node" in fields else {"gpus_per_node": cand.count}
    for copies in range(k, MAX_REPLICAS + 1):
        pick = pick_format(spec, cand.device, cand.count * copies, cand.instance, cand.memory, context=context,
                           concurrency=1, output_tokens=output_tokens, weights=share.weights_format,
                           limits=c.latency(), headroom=hr, hardware_files=hardware_files,
                           engine_given=share.engine, request_rate=rate,
                           fields={**fields, **per_node, "tensor_parallel": share.tensor_parallel})
        if pick.status == "meets" and pick.fit is not None:
            r = pick.fit
            opt = _option_from_pick(cand, pick)
            per_copy = r.replicas // copies if r.replicas % copies == 0 else share.fit.replicas if share.fit else 1
            return (_replace(opt, count=cand.count, instances=instances_for(cand.count, cand.instance),
                             replicas=per_copy, tokens_per_second=None if opt.tokens_per_second is None
                             else opt.tokens_per_second / copies), pick.warnings, copies)
    return _option_from_pick(cand, pick), (), 1


def _option_from_pick(cand: _Candidate, pick: FormatPick) -> Option:
    """``cand``'s option from the ladder walk's pick: fit's answer behind it where a rung fits, else the rejection."""
    dev = cand.device
    stub: dict[str, Any] = dict(target=cand.target, name=cand.name, provider=cand.provider, device=dev.id,
                                device_kind=dev.kind, count=cand.count, tensor_parallel=pick.tensor_parallel,
                                replicas=1, engine=pick.engine, instances=instances_for(cand.count, cand.instance),
                                stages_left=pick.stages_left)
    if pick.fit is not None:
        opt = _option_from_fit(stub, pick.fit, pick.status, list(pick.reasons))
        if pick.status == "meets" and pick.passed_over is not None:
            opt = _replace(opt, passed_over=pick.passed_over.words())
        return opt
    return Option(**stub, weights_format=pick.weights_format, status=pick.status, reasons=pick.reasons,
                  memory_per_device=pick.memory_per_device, budget_per_device=pick.budget_per_device)


def _first_token_seconds(o: Option) -> float | None:
    """An option's time to the first token of a request: its TTFT plus the mean wait for a running slot (eq. Q3)."""
    return first_token_seconds(o.ttft_seconds, None if o.queue_wait_in_ttft else o.queue_wait_seconds)


def slow_first_token_warning(meets: Sequence[Option], c: Constraints) -> str | None:
    """When no latency limit was given (``max_ttft``), the one line of the search's options whose first token comes
    after ``efficiency.ATTENTION_LIMIT_SECONDS``: the chosen option (``meets[0]``), with the cheapest meeting option
    that answers within it (none: said), and how many of the other meeting options do (review34 N4: `recommend
    --request-rate 20` listed L4 and T4 options answering after 9.4 and 3.7 min as "meets" with no line saying so; each
    option's reasons already said it, ``_option_from_fit``, but the table shows no reasons). Not a constraint: the
    choice stands, the user decides with ``--max-ttft``."""
    if c.max_ttft is not None or not meets:
        return None
    limit = E.ATTENTION_LIMIT_SECONDS
    first = _first_token_seconds(meets[0])
    slow = [(o, s) for o in meets[1:] if (s := _first_token_seconds(o)) is not None and s > limit]
    others = ""
    if slow:
        worst, worst_s = max(slow, key=lambda p: p[1])
        others = (f"{len(slow)} of the other {len(meets) - 1} options that meet the constraints answer a request's "
                  f"first token after more than the {limit:g} s attention limit (the "
                  f"slowest, {worst.target}, after {format_seconds(worst_s)}), meeting only the limits given")
    if E.past_attention_limit(first) is None:
        return (f"{others}: no latency limit was given (--max-ttft), so none was applied; give --max-ttft "
                f"{limit:g} to rule them out") if others else None
    quick = next((o for o in meets[1:] if (s := _first_token_seconds(o)) is not None and s <= limit), None)
    alt = (f"the cheapest option within {limit:g} s: {quick.target} ({_price_text(quick.price_per_hour, quick.cost_basis)}, "
           f"first token in {format_seconds(_first_token_seconds(quick) or 0.0)})" if quick is not None
           else f"no option found here answers within {limit:g} s")
    # the first token past the limit is the chosen fit's own warning, said above it (estimate/fit.py
    # slow_first_token, rate_capacity.py rate_warnings): this line adds the search's part only
    return (f"the chosen {meets[0].target} answers a request's first token after {format_seconds(first or 0.0)} "
            f"(above): no latency limit was given (--max-ttft), so none was applied; {alt}"
            + (f"; {others}" if others else ""))


def _option_from_fit(stub: dict[str, Any], r: FitResult, status: str, reasons: list[str]) -> Option:
    sp = r.speed
    if status == "meets":  # fit's own warning of a first token past the attention limit (estimate/fit.py
        # slow_first_token; at a rate rate_capacity.py rate_warnings): a meeting option states it, a limit only when
        # given (--max-ttft; efficiency.ATTENTION_LIMIT_SECONDS is no constraint)
        slow = r.details.get("slow_first_token") or (r.details.get("rate_warnings") or {}).get("slow_first_token")
        if slow:
            reasons = [*reasons, f"meets only the limits given (no --max-ttft): {slow}"]
    return Option(**{**stub, "tensor_parallel": r.tensor_parallel, "replicas": r.replicas, "engine": r.engine,
                     "count": r.count, "instances": r.instances, "pipeline_parallel": r.pipeline_parallel,
                     "data_parallel": r.data_parallel, "expert_parallel": r.expert_parallel},
                  weights_format=r.weights_format,
                  status=status, reasons=tuple(reasons), memory_per_device=r.memory_per_device,
                  budget_per_device=r.budget_per_device,
                  ttft_seconds=sp.ttft_seconds if sp else None,
                  ttft_idle_seconds=sp.ttft_idle_seconds if sp else None,
                  tokens_per_second_per_user=sp.tokens_per_second_per_user if sp else None,
                  tokens_per_second=r.tokens_per_second_total,
                  running_sequences=r.details.get("running_sequences"),
                  queue_wait_seconds=r.details.get("queue_wait_seconds"),
                  queue_wait_in_ttft=bool(r.details.get("queue_wait_in_ttft")),
                  capacity_share=_capacity_share(r))


def _capacity_share(r: FitResult) -> float | None:
    """fit's share of its capacity at the request rate it was asked (``capacity_share``); None at a concurrency."""
    rate = r.speed.load.get("request_rate") if r.speed is not None and r.speed.load else None
    bound = capacity_share(r, float(rate)) if rate is not None and r.fits else None
    return bound[1] if bound is not None else None


def _priced(base: Option, cand: _Candidate, c: Constraints, concurrency: int, context: int,
            output_tokens: int | None, spec: ModelSpec, hardware_files: Sequence[str | Path], hr: float | None,
            fields: Mapping[str, Any] | None = None, copies: int = 1, rate: float | None = None) -> Option:
    """Attach the candidate's identity and price, add replicas for a throughput target, apply the budget.
    ``copies``: the candidate's copies a request ``rate`` is shared over (``_rate_copies``; ``base`` is one copy's
    answer at its share)."""
    opt = _replace(base, target=cand.target, name=cand.name, provider=cand.provider, price_per_hour=cand.price,
                   cost_basis=cand.cost_basis)
    if opt.status != "meets":
        return opt
    reasons = list(opt.reasons)
    instances = copies  # copies of the candidate's devices added for the throughput target (or a request rate)
    tps = opt.tokens_per_second * copies if opt.tokens_per_second is not None else None
    if copies > 1 and rate is not None:
        reasons.append(f"{copies} instances to carry {rate:g} requests/s ({rate / copies:.3g}/s each, "
                       f"{share_words(opt.capacity_share)}; within the limits: formulas/serving_queue.py eq. Q10)")
    if c.tokens_per_second is not None and tps is not None and tps < c.tokens_per_second:
        instances, tps, per_user, queue = _replicas_for(spec, cand, opt, c.tokens_per_second, concurrency, context,
                                                        output_tokens, hardware_files, hr, fields)
        if tps is None or tps < c.tokens_per_second:
            return _replace(opt, status="rejected", reasons=(
                f"{opt.tokens_per_second:.0f} tokens/s per instance; even {MAX_REPLICAS} instances fall short "
                f"of {c.tokens_per_second:g}",))
        reasons.append(f"{instances} instances to reach {c.tokens_per_second:g} tokens/s ({tps:.0f})")
        opt = _replace(opt, tokens_per_second_per_user=per_user, **queue)
    price = cand.price * instances if cand.price is not None else None
    cpm = cost_per_million_tokens(price, tps) if price is not None and tps else None
    opt = _replace(opt, count=opt.count * instances, instances=opt.instances * instances,
                   replicas=opt.replicas * instances, tokens_per_second=tps,
                   price_per_hour=price, cost_per_million_tokens=cpm, reasons=tuple(reasons + cand.notes))
    if c.max_cost_per_hour is not None:
        unmeasured = budget_unmeasured(cand.provider, price)
        if unmeasured is not None:
            return _replace(opt, reasons=(*opt.reasons, unmeasured))
        if price is None:
            return _replace(opt, status="rejected", reasons=("no hourly price to compare with the budget",))
        if price > c.max_cost_per_hour:
            said, budget = compared_usd(price, c.max_cost_per_hour)
            return _replace(opt, status="rejected", reasons=(f"{said}/h exceeds the {budget}/h budget", *reasons))
    return opt


def _replicas_for(spec: ModelSpec, cand: _Candidate, opt: Option, target: float, concurrency: int, context: int,
                  output_tokens: int | None, hardware_files: Sequence[str | Path], hr: float | None,
                  fields: Mapping[str, Any] | None) -> tuple[int, float | None, float | None, dict[str, Any]]:
    """Smallest replica count whose output tokens/s in total at the load (fit's loaded total) reach ``target``
    (concurrency split evenly), its tokens/s, per user, and its queue (the sequences all replicas run at once, a queued request's wait).
    Each replica's speed is ``fit``'s, with the option's engine and format and the same workload (KV dtype,
    media, link, engine settings): one answer with ``fit`` at the per-replica concurrency."""
    guess = max(2, math.ceil(target / (opt.tokens_per_second or 1.0)))
    # an instance as fit takes it: its own count (None), or the whole instances the candidate's count is
    fit_target = cand.instance or cand.device
    count = None if cand.instance is not None and cand.count == cand.instance.device_count else cand.count
    # the option's pipeline stages, fit choosing each stage's degree at each replica's share (`fit --pp P`)
    staged: dict[str, Any] = {"pipeline_parallel": opt.pipeline_parallel} if opt.pipeline_parallel > 1 else {}
    if opt.data_parallel > 1:  # the option's expert-parallel ranks, as fit chose them (`fit --dp D`)
        staged = {"data_parallel": opt.data_parallel, "expert_parallel": opt.expert_parallel}
    for r in range(guess, MAX_REPLICAS + 1):
        per = per_replica(concurrency, r)
        one = fit(spec, fit_target, count, headroom=hr, engine=opt.engine, weights=opt.weights_format,
                  context=context, concurrency=per, output_tokens=output_tokens, memory=cand.memory,
                  hardware_files=hardware_files, **(fields or {}), **staged)
        sp, one_total = one.speed, one.tokens_per_second_total
        if sp is None or one_total is None:
            return r, None, None, {}
        # each instance is fitted at ``per`` sequences; instances beyond the users' add no tokens/s
        total = one_total * min(r, max(1, concurrency) / per)
        if total >= target:
            running = running_and_queued(concurrency, int(one.details.get("running_sequences", per)) * r)[0]
            # the layout, memory and first token are those of the fit whose speed is quoted (each instance at
            # ``per`` sequences may take another tensor-parallel layout than one instance at the whole load)
            return r, total, sp.tokens_per_second_per_user, {
                "running_sequences": running, "queue_wait_seconds": one.details.get("queue_wait_seconds"),
                "tensor_parallel": one.tensor_parallel, "replicas": one.replicas,
                "memory_per_device": one.memory_per_device, "budget_per_device": one.budget_per_device,
                "ttft_seconds": sp.ttft_seconds, "ttft_idle_seconds": sp.ttft_idle_seconds,
                "queue_wait_in_ttft": bool(one.details.get("queue_wait_in_ttft"))}
    return MAX_REPLICAS, None, None, {}


def _cpu_gpu_advice(spec: ModelSpec, meets: list[Option], rejected: list[Option], c: Constraints,
                    concurrency: int, rate: float | None = None) -> list[str]:
    """The seed's CPU-vs-GPU reasoning, with the numbers of the best option of each kind (at ``concurrency``, or
    at a request ``rate``)."""
    load = f"concurrency {concurrency}" if rate is None else f"{rate:g} requests/s"
    def best(opts: list[Option], cpu: bool) -> Option | None:
        pool = [o for o in opts if o.is_cpu == cpu and o.tokens_per_second_per_user]
        pool.sort(key=rank_key)
        return pool[0] if pool else None

    def speed(o: Option) -> str:
        ttft = f", TTFT {format_seconds(o.ttft_seconds)}" if o.ttft_seconds is not None else ""
        return (f"{o.name} at {format_name(o.weights_format)}: {format_rate(o.tokens_per_second_per_user or 0.0)} tokens/s "
                f"per user, {format_rate(o.tokens_per_second or 0)} tokens/s in total at {load}{ttft}, "
                f"{_price_text(o.price_per_hour, o.cost_basis)}")

    n = count_params(spec).total
    cpu_ok, gpu_ok = best(meets, True), best(meets, False)
    cpu_any = cpu_ok or best(rejected, True)
    gpu_any = gpu_ok or best(rejected, False)
    out: list[str] = []
    size = f"{format_count(n)} parameters"
    # the CPU is advised where the one ranking (rank_key) puts it at or before the best GPU: the user's own hardware
    # first, then the cheaper, an unknown price after a known one, then the faster. Before, an unpriced CPU was
    # compared as free and an unpriced GPU as infinitely dear: the user's own Xeon at a 16.2 s TTFT was advised beside
    # their own H100, the option chosen (probe19 D2; probe18 D5 the same for a rented CPU beside an owned GPU)
    if cpu_ok and (not gpu_ok or rank_key(cpu_ok) <= rank_key(gpu_ok)):
        out.append(f"CPU is enough ({size}, {load}): {speed(cpu_ok)}. Small models at low "
                   "traffic, quantized, serve on a CPU; a GPU only pays off with more users or a latency limit.")
        if not (c.user_tokens_per_second or c.tokens_per_second or c.max_ttft):
            out[-1] += (" No speed or latency limit was given, so any speed counts: set --user-tokens-per-second, "
                        "--tokens-per-second or --max-ttft to hold the CPU to one.")
        if gpu_ok:
            first = f"the first GPU option of {YOURS}" if gpu_ok.ownership == YOURS else "the cheapest GPU option"
            out.append(f"For comparison, {first}: {speed(gpu_ok)}.")
    elif gpu_ok and (cpu_any is not None or any(o.is_cpu for o in rejected)):
        if cpu_any is not None:
            cpu_txt = f"the best CPU option reaches {speed(cpu_any)}"
            if cpu_any.status == "rejected":
                cpu_txt += f" ({'; '.join(cpu_any.reasons)})"
        else:
            worst = next(o for o in rejected if o.is_cpu)
            cpu_txt = f"the CPU option {worst.name} is rejected: {'; '.join(worst.reasons)}"
        out.append(f"Use a GPU ({size}, {load}): {speed(gpu_ok)}; {cpu_txt}. Large models, high "
                   "concurrency or low latency need the GPU's memory capacity, bandwidth and compute.")
    elif gpu_ok:
        out.append(f"Best option ({size}, {load}): {speed(gpu_ok)}. No CPU option was evaluated "
                   "(the catalog has no CPU machine with a sourced RAM size and bandwidth): add yours with "
                   "--hardware-file to compare; small models at low traffic, quantized, can serve on a CPU.")
    elif gpu_any or cpu_any:
        out.append("No option meets every constraint; the closest: "
                   + "; ".join(speed(o) for o in (gpu_any, cpu_any) if o is not None and o.tokens_per_second_per_user))
    return out


def _quantization_advice(spec: ModelSpec, cat: HardwareCatalog, context: int, concurrency: int,
                         hr: float | None, fields: Mapping[str, Any] | None = None) -> list[str]:
    """Highest-quality GGUF format per common single-card memory size (e.g. 'fits a 24 GB card at Q4_K_M'), at the
    requested context and concurrency, judged by the one fit rule against the smallest card sold with that label
    (an RTX 4090's 24564 MiB and an L4's 23034 MiB are both "24 GB")."""
    from .estimate.inference import estimate_inference
    smallest: dict[int, int] = {}
    for d in cat.devices.values():
        if d.kind == "gpu" and d.memory is not None and d.memory.unit == "GB" and not d.chip and d.memory_bytes:
            gb = int(d.memory.raw)
            smallest[gb] = min(smallest.get(gb, d.memory_bytes), d.memory_bytes)
    out: list[str] = []
    ctx_txt = f"{context // 1024}k" if context % 1024 == 0 else str(context)
    last = None
    ladder = format_ladder(spec, "llamacpp")
    try:  # llama.cpp's margin on a GPU (estimate/verdict.py margin_rule), the one its estimate's verdict keeps
        margin = margin_rule("llamacpp", "gpu", hr, (fields or {}).get("fit_target"))
    except InputError:
        return []
    for gb, memory in sorted(smallest.items()):
        found = None
        for fmt in ladder:
            if rung_bytes(spec, fmt) > margin.budget(memory):
                continue
            try:
                est = estimate_inference(spec, context=context, concurrency=concurrency, weights=weights_asked(fmt),
                                         engine="llamacpp", memory=memory, headroom=hr, **(fields or {}))
            except InputError:  # a workload llama.cpp cannot run (e.g. KV fp8, a vLLM setting): no GGUF advice
                return []
            if est.details["fits"]:
                found = (fmt, est.total("device")[1], int(est.details["device_memory"]), int(est.details["memory_budget"]))
                break
        if found is None or found[0] == last:
            continue
        last = found[0]
        out.append(f"fits a {gb} GB card at {format_name(found[0])} on llama.cpp with {ctx_txt} context x "
                   f"{concurrency} "
                   f"(needs {format_bytes(found[1])} of a {format_bytes(found[3])} budget: {margin.words(found[2])})")
        if found[0] == ladder[0]:
            break
    return out


# ------------------------------------------------------------------------------------------------- training

def _layout(fields: dict[str, Any], fr: FitResult, scaled: ScaledLayout | None = None) -> str | None:
    """The layout of the run ``fr`` sized (``training_layout``) on its devices; ``scaled``: the degrees the
    scale-out search chose read so, not as stated."""
    searched = tuple(scaled.fields) if scaled is not None else ()
    return training_layout(fields, fr.estimate, fr.count, searched) if fr.estimate is not None else None


def _scale_out(spec: ModelSpec, cands: list[_Candidate], wl: dict[str, Any], c: Constraints,
               hardware_files: Sequence[str | Path], model: str,
               extra: Sequence[str] = (), held: Sequence[str] = (), tokens: float | None = None,
               utilization: float | None = None) -> tuple[list[tuple[_Candidate, ScaledLayout]], list[str],
                                                         list[Assumption]]:
    """When no option meets every constraint (none holds the run, or those that hold it miss the deadline or the
    budget, ``held``: their targets): for each GPU instance type that does not hold it on one instance, the fewest
    instances and a layout on which it fits (``estimate/recommend_layout.py`` ``search_layout``), the options to
    size (instances added to them for the deadline as to any); the advice (what was searched,
    or the closest layout and why it does not fit) and the search's assumptions. One search per (device, devices
    per instance): instances of one kind share the memory answer (their networks time it apart). Instance types
    are searched by device memory, largest first: a device with less memory needs at least the devices one with
    more needed, so its counts start there. ``model`` and ``extra``: the model and the question's flags of the
    ``fit --train`` command each layout is printed as (``ScaledLayout.command``). With ``tokens``, each instance
    type's layout is the fastest of those that fit at that count on its own network (``fastest_layout``, at the
    memory-first layout's global batch), not the memory-first one."""
    gpus = [x for x in cands if x.instance is not None and x.device.kind == "gpu" and x.device.memory_bytes
            and x.target not in held and training_peak(x.device, str(wl.get("precision", TrainingWorkload.precision)),
                              bool(wl.get("tf32", False)))[0] is not None]
    if not gpus:  # local devices only (--laptop) or no GPU instance: nothing scales out, nothing to say
        return [], [], []
    gpus.sort(key=lambda x: (-int(x.device.memory_bytes or 0), -x.count, x.target))
    done: dict[tuple[str, int], ScaledLayout | None] = {}
    found: list[tuple[_Candidate, ScaledLayout]] = []
    closest: tuple[_Candidate, ScaledLayout] | None = None
    floor, calls = 1, 0
    memo: dict[tuple[Any, ...], FitResult | None] = {}
    for cand in gpus:
        inst = cand.instance
        assert inst is not None
        key = (cand.device.id, inst.device_count)
        if key not in done:
            got, near, n = search_layout(spec, inst, wl, headroom=c.headroom, hardware_files=hardware_files,
                                         cap=MAX_SCALE_INSTANCES, min_devices=floor, memo=memo)
            calls += n
            done[key] = got
            floor = max(floor, got.devices if got is not None else MAX_SCALE_INSTANCES * inst.device_count + 1)
            if near is not None and (closest is None or near.load < closest[1].load):
                closest = (cand, near)
        lay = done[key]
        if lay is not None and tokens is not None:  # timed on this instance's own link and network
            lay, n = fastest_layout(spec, inst, wl, lay, tokens, headroom=c.headroom, hardware_files=hardware_files,
                                    utilization=utilization, memo=memo)
            calls += n
        if lay is not None:
            found.append((cand, lay))
    n_held = len(held)
    why = ("no instance holds the run" if not n_held else
           f"no option meets every constraint: the {n_held} instance type{'s' if n_held > 1 else ''} that hold"
           f"{'' if n_held > 1 else 's'} the run miss{'' if n_held > 1 else 'es'} the deadline or the budget even "
           "with instances added, or cannot be timed on several (no bandwidth between them)")
    notes = [Assumption("scale_out_cap", f"{MAX_SCALE_INSTANCES} instances", True,
                        f"{why}: each GPU instance type that does not hold it grown 1, 2, 4, ... instances up to this "
                        "cap until a TP / PP / EP layout fits (estimate/recommend_layout.py: TP within an instance, "
                        f"PP up to 16; {SP_SEARCH}; "
                        f"{NEEDS_LEAST}; {SAME_GLOBAL_BATCH}; {EP_PRUNE}; a device with less memory starts at the devices one with "
                        f"more needed; searched whenever no option meets every constraint, not only when none "
                        "holds the memory: a user with a deadline or a budget would rather run on more instances of "
                        "another type, with a model-parallel layout, than get no answer; the types that hold the run "
                        f"grow by data-parallel instances instead); {calls} layouts sized")]
    if found:
        best = min(found, key=lambda f: (f[1].devices, f[0].target))
        advice = [f"{why}: {len(found)} instance type{'s' if len(found) > 1 else ''} "
                  f"fit{'' if len(found) > 1 else 's'} on several instances with a "
                  f"chosen layout; e.g. {best[0].target}: {best[1].command(model, best[0].target, wl, extra)}"]
    elif closest is not None:
        cand, near = closest
        advice = [f"no layout fits on up to {MAX_SCALE_INSTANCES} instances of any GPU instance type; the closest: "
                  f"{near.devices} x {cand.device.id} ({cand.target}, {near.instances} instances) with "
                  f"{near.flags()}: needs {format_bytes(near.fit.memory_per_device or 0)} per device of a "
                  f"{format_bytes(near.fit.budget_per_device or 0)} budget ({near.command(model, cand.target, wl, extra)} "
                  "says what fits: offload, a smaller micro-batch, recomputation)"]
    else:
        advice = [f"no layout fits on up to {MAX_SCALE_INSTANCES} instances of any GPU instance type, and none of "
                  "the layouts searched is valid for this model and workload"]
    return found, advice, notes


# how many GPU options short of memory by autocast's copies the precision advice re-sizes (most memory first)
FSDP_PRECISION_TRIES = 8


def _fsdp_precision_advice(spec: ModelSpec, short: list[tuple[_Candidate, int | None, dict[str, Any] | None]],
                           c: Constraints, hardware_files: Sequence[str | Path], model: str,
                           extra: Sequence[str]) -> list[str]:
    """Where no GPU option meets on its own devices and some are short of memory with torch.autocast's bf16 weight
    copies under FSDP part of the reason (``short``: the estimate's FSDP_MIXED_PRECISION warning, compose.py
    ``_fsdp_precision_hint``): the first of them (the most device memory, then the cheapest; up to
    FSDP_PRECISION_TRIES) on which fit --train's ladder
    (estimate/fit.py ``training_fits_at``, TRAINING_LADDER: the caller's settings kept, the least change first)
    fits at a step that takes FSDP's own mixed precision (precision fsdp-bf16-mixed), as one advice line with the
    changes and the command that gives its numbers; [] when none does."""
    # the most device memory per option first (the likeliest to hold it), then the cheapest
    ordered = sorted(short, key=lambda x: (-int(x[0].memory or x[0].device.memory_bytes or 0) * x[0].count,
                                           x[0].price is None, x[0].price or 0.0, x[0].target))
    for cand, count, tf in ordered[:FSDP_PRECISION_TRIES]:
        fields = dict(tf or {})
        at = training_fits_at(spec, cand.instance or cand.device, count, fields, headroom=c.headroom,
                              memory=cand.memory, hardware_files=hardware_files)
        if at is None or at["changes"].get("precision") != "fsdp-bf16-mixed":
            continue
        flags = training_flags(at["changes"])
        argv = ["fit", model, "--train", "--device", cand.target, *(["--count", str(count)] if count else []),
                *training_flags(fields), *flags, *extra]
        host = (f" + {format_bytes(at['host_per_machine'])} host RAM per machine" if at.get("host_per_machine")
                else "")
        return [f"{len(short)} GPU option{'s' if len(short) > 1 else ''} short of memory hold torch.autocast's bf16 "
                "copies of the fp32 weights (precision bf16-mixed under FSDP): with FSDP's own MixedPrecisionPolicy "
                f"(as torchtitan and torchtune train), {' '.join(flags)}, one {cand.target} holds the run "
                f"({format_bytes(at['memory_per_device'])} per device of a {format_bytes(at['budget_per_device'])} "
                f"budget{host}; fit --train's least change: {' '.join(map(shlex.quote, argv))})"]
    return []


STATED_GROWTH = ("an instance type whose one instance does not hold the run is grown to 2, 4, 8, ... instances up to "
                 "this cap with the layout the workload states (its TP, PP and EP; data-parallel ranks added) even when "
                 "another option meets every constraint, the fewest instances on which fit --train says it fits "
                 "(estimate/recommend_layout.py search_layout: one doubling search per device and devices per "
                 "instance; a device with less memory starts at the devices one with more needed), so the cheapest "
                 "run chosen is the cheapest of the options listed; the instance types "
                 "that hold the run grow by instances only for the deadline")


def _grow_stated(spec: ModelSpec, short: list[_Candidate], wl: dict[str, Any], c: Constraints,
                 hardware_files: Sequence[str | Path]) -> tuple[list[tuple[_Candidate, ScaledLayout]],
                                                                  list[Assumption]]:
    """When some option meets every constraint: for each GPU instance type in ``short`` (one instance sized and
    rejected for memory), the fewest instances (2, 4, ... ``MAX_SCALE_INSTANCES``) on which the run fits with the
    layout the workload states -- ``search_layout`` with every degree pinned (tp, pp, ep, sequence parallelism as
    stated, else TrainingWorkload's defaults), so the option's ``fit --train --count`` command with the workload's
    own flags gives its numbers; the options to size and the ``scale_out_cap`` assumption naming the rule (with the
    count of fits made). One search per (device, devices per instance); none when ``short`` is empty."""
    if not short:
        return [], []
    pinned = {**{k: v for k, v in wl.items() if k != "gpus"},
              **{k: int(wl.get(k) or 1) for k in ("tp", "pp", "ep")},
              "sequence_parallel": bool(wl.get("sequence_parallel", False))}
    done: dict[tuple[str, int], ScaledLayout | None] = {}
    memo: dict[tuple[Any, ...], FitResult | None] = {}
    found: list[tuple[_Candidate, ScaledLayout]] = []
    calls, floor = 0, 1
    # largest device memory first: a device with less memory needs at least the devices one with more needed
    # (_scale_out's bound), so its counts start there
    for cand in sorted(short, key=lambda x: (-int(x.device.memory_bytes or 0), -x.count, x.target)):
        inst = cand.instance
        assert inst is not None
        key = (cand.device.id, inst.device_count)
        if key not in done:
            got, _, n = search_layout(spec, inst, pinned, headroom=c.headroom, hardware_files=hardware_files,
                                      cap=MAX_SCALE_INSTANCES, min_devices=max(floor, 2 * inst.device_count),
                                      memo=memo)
            calls += n
            done[key] = got
            floor = max(floor, got.devices if got is not None else MAX_SCALE_INSTANCES * inst.device_count + 1)
        lay = done[key]
        if lay is not None:
            found.append((cand, lay))
    return found, [Assumption("scale_out_cap", f"{MAX_SCALE_INSTANCES} instances", True,
                              f"{STATED_GROWTH}; {calls} layouts sized")]


def recommend_training(model: ModelSpec | str, *, tokens: float, utilization: float | None = None,
                       constraints: Constraints | None = None, hardware_files: Sequence[str | Path] = (),
                       catalog: HardwareCatalog | None = None, training_fields: dict[str, Any] | None = None,
                       model_name: str | None = None, **fields: Any) -> Recommendation:
    """Rank hardware for training ``model`` on ``tokens`` tokens. The workload is keyword fields of
    TrainingWorkload (``training_fields`` and/or ``**fields``: method, seq_len, micro_batch, grad_checkpointing,
    ...): memory, verdict and time per option from ``fit_training(tokens=...)`` with every field (the call
    ``fit --train --tokens`` and ``train --device --tokens`` make, so an option's memory and time are theirs for the
    same flags), nodes added until the deadline is met, cost from the hourly price. With the workload's ``gpus``
    (``--gpus N``) every candidate is N devices: a bare device N times, an instance as the whole instances that make
    N (``fit.not_whole_instances``, the rule ``fit --train --count`` applies), one that cannot listed as rejected
    with the reason; N is then fixed (no instances added for a deadline). The assumptions are the
    chosen option's duration's (its device's utilisation, collective bandwidth...), the warnings all that
    ``fit --train --tokens`` says of it (memory and duration); with none chosen, none (each option timed states
    its own in ``fit --train --tokens``; the first timed would make the answer depend on the listing order).
    ``model_name``: the model as the question spelled it, in the ``fit --train`` commands a scaled-out option prints
    (the CLI's argument, so the CLI and a Python call with that spelling print one command); default ``model`` when a
    str, else the spec's name."""
    spec = spec_of(model)
    refuse_unmodelled(spec, training=True)
    tokens = read_number(tokens, "tokens", TRAIN_TOKENS)  # the range and line of `--tokens` (fit_training's)
    wl = {**(training_fields or {}), **{k: v for k, v in fields.items() if v is not None}}
    c = _search_constraints(wl, (constraints or Constraints()).for_mode("training"), training=True)
    training_fields = wl
    # the instances' workload: an instance is its own machine, a --gpus-per-node given sizes the local devices only
    # (fit's serving_machine_size refuses one that contradicts an instance)
    on_instances = {k: v for k, v in wl.items() if k != "gpus_per_node"}
    # the model and the question's own flags of the `fit --train` command a scaled-out option prints
    model_arg = model_name or (model if isinstance(model, str) else spec.name)
    extra = [f"--tokens={tokens:.0f}" if tokens == int(tokens) else f"--tokens={tokens!r}",
             *(["--utilization", repr(utilization)] if utilization is not None else []),
             *(["--headroom", repr(c.headroom)] if c.headroom is not None else []),
             *(a for h in hardware_files for a in ("--hardware-file", str(h)))]
    cat = catalog or load_catalog(hardware_files)
    # the run's settings, checked once (bad input: exit 2), and its FLOPs per token as the duration counts them
    known = {k: v for k, v in wl.items() if k in TrainingWorkload.__dataclass_fields__}
    least = layout_devices(known)  # the devices a stated tp / pp / cp / ep needs: the options' counts, not a setting
    w = TrainingWorkload(**({"gpus": least, **known} if least > 1 else known))
    method = w.method
    fl = flops_per_token(spec, w.method, w.seq_len, recompute_mode(w.grad_checkpointing), w.rank, w.targets,
                         w.checkpoint_every, recomputes_whole_layer(w.checkpoint_impl), recomputed_matmul_modules(w))
    # the FLOPs of the layout as stated, with those the tensor-parallel ranks run again on the matrices their
    # framework keeps whole (duration.with_tp_replicated, review12 D5): the headline's only where no option is chosen
    # (an option's own count is fit_training's for its layout, ``Option.flops_per_token``)
    fl = with_tp_replicated(*with_framework(spec, w), fl, [])
    # each timed option's duration notes, by (target, devices): a type may be an option twice when nothing meets
    # (the scale-out search's layout and the stated layout grown)
    timed: dict[tuple[str, int], tuple[tuple[Assumption, ...], tuple[str, ...]]] = {}
    cands, rejected = _candidates(cat, c, training=True)
    gpus = wl.get("gpus")  # --gpus N: every option is N devices (checked by TrainingWorkload above)
    meets: list[Option] = []
    fitted: list[str] = []  # the candidates whose own devices hold the run (grown by instances, not searched)
    short: list[_Candidate] = []  # the GPU instance types one instance of which is short of memory (STATED_GROWTH)
    flops_of: dict[tuple[str, int], tuple[float, str]] = {}  # each timed option's FLOP/token and its formula
    sp_of: dict[tuple[str, int], bool] = {}  # the sequence parallelism the scale-out search chose (SP_SEARCH)
    # the GPU options short of memory with torch.autocast's weight copies under FSDP part of the reason (compose.py
    # _fsdp_precision_hint's warning): (candidate, the count fit_training took, the fields)
    autocast: list[tuple[_Candidate, int | None, dict[str, Any] | None]] = []

    def consider(cand0: _Candidate, scaled: ScaledLayout | None = None) -> None:
        """``cand0`` sized and timed as ``fit --train`` sizes it: its own devices, ``--gpus N``'s or, ``scaled``,
        the instances and layout the scale-out search found; appended to ``meets`` or ``rejected``."""
        tf = training_fields if scaled is None else {**{k: v for k, v in wl.items() if k != "gpus"}, **scaled.fields}
        if cand0.instance is not None and tf and "gpus_per_node" in tf:  # an instance is its own machine: the
            # --gpus-per-node given sizes the local devices (fit's serving_machine_size refuses it on an instance)
            tf = {k: v for k, v in tf.items() if k != "gpus_per_node"}
        dev = cand0.device
        stub: dict[str, Any] = dict(target=cand0.target, name=cand0.name, provider=cand0.provider, device=dev.id,
                                    device_kind=dev.kind, count=cand0.count,
                                    tensor_parallel=int(tf.get("tp", 1)), engine="",
                                    weights_format="nf4-dq" if method == "qlora" else "bf16")
        sized = (cand0 if gpus is None and scaled is None else
                 _with_devices(cand0, scaled.devices if scaled is not None else int(gpus or 0), c))
        if isinstance(sized, str):
            rejected.append(Option(**stub, replicas=1, status="rejected",
                                   reasons=(f"{sized} (--gpus {gpus}: whole instances only)",)))
            return
        cand = sized
        if scaled is None and least > 1 and "gpus" not in wl:  # a layout the option's devices cannot take (tp 8 on 4 devices): rejected
            try:
                TrainingWorkload(**{**known, "gpus": cand.count})
            except InputError as e:
                rejected.append(Option(**stub, replicas=1, status="rejected", reasons=(str(e),)))
                return
        # the instances the option is (--gpus N over several whole instances), before any added for a deadline;
        # an option's count is all its devices and its instances the machines they are (fit's FitResult.instances)
        per_option = instances_for(cand.count, cand.instance)
        stub.update(count=cand.count, instances=per_option)
        peak, key, _, _ = training_peak(dev, str(wl.get("precision", TrainingWorkload.precision)),
                                        bool(wl.get("tf32", False)))
        if peak is None:
            rejected.append(Option(**stub, replicas=1, status="rejected", reasons=(f"no sourced {key} peak FLOP/s",)))
            return
        reasons: list[str] = []
        if dev.memory_bytes is None and cand.memory is None:
            rejected.append(Option(**stub, replicas=1, status="rejected", reasons=("device memory unknown",)))
            return
        try:  # a setting this device cannot run (GPU offload or paged optimizers on a CPU) rejects the option
            fr = fit_training(spec, cand.instance or dev,
                              None if cand.instance is not None and gpus is None and scaled is None else cand.count,
                              headroom=c.headroom, memory=cand.memory, hardware_files=hardware_files,
                              tokens=tokens, utilization=utilization, fits_at=False, **(tf or {}))
        except InputError as e:
            # bad input for every device: exit 2 as before (a CPU or an Apple chip refuses the CUDA-only settings:
            # offload, paging; a GPU the kernel a setting names, DeviceCannotRunError: rejected)
            if dev.kind not in ("cpu", "apple") and not isinstance(e, (DeviceCannotRunError, NotModelledError)):
                raise
            # NotModelledError: a setting the device runs through a stack llmsizer does not size; its message says
            # "not modelled", not that the device cannot run it
            rejected.append(Option(**stub, replicas=1, status="rejected", reasons=(str(e),)))
            return
        if not fr.fits:
            if (scaled is None and gpus is None and cand.instance is not None and dev.kind == "gpu"
                    and cand.memory is None):  # one instance short of memory: grown with the stated layout
                short.append(cand0)
            if (scaled is None and dev.kind == "gpu"
                    and any(getattr(x, "kind", None) == FSDP_MIXED_PRECISION for x in fr.all_warnings)):
                autocast.append((cand, None if cand.instance is not None and gpus is None else cand.count, tf))
            rejected.append(Option(**stub, replicas=1, status="rejected", reasons=fr.reasons,
                                   memory_per_device=fr.memory_per_device, budget_per_device=fr.budget_per_device,
                                   layout=_layout(tf, fr, scaled)))
            return
        if scaled is None:
            fitted.append(cand.target)
        fit_at = slice(len(reasons), len(reasons) + len(fr.reasons))  # the verdict of the layout fr is
        reasons.extend(fr.reasons)
        scaled_at = len(reasons)  # the scale-out line, said again if the deadline adds instances below

        def scaled_line(lay: ScaledLayout, how: str) -> str:
            net = cand.instance.network if cand.instance is not None else None
            return (f"{lay.instances} instances: {how}; {lay.command(model_arg, cand.target, on_instances, extra)} gives "
                    "these numbers; collectives between the instances over "
                    + (f"--network {wl['network']}" if wl.get("network") else
                       f"the instance's {net.raw:g} {net.unit} network" if net is not None else
                       "one machine's link (no network in the catalog), a lower bound"))
        if scaled is not None:  # the scale-out search's instances and layout, with the flags that state them
            reasons.append(scaled_line(scaled, "the fewest of this type on which " + (
                "a layout fits (recommend's scale-out search" if scaled.fields else
                "the workload's layout fits (recommend's instance growth") + f", up to {MAX_SCALE_INSTANCES})"))
        elif per_option > 1 and cand.instance is not None:  # --gpus N over several instances: said, with their link
            net, each = cand.instance.network, cand.count // per_option
            reasons.append(f"{per_option} instances of {each} device{'s' if each > 1 else ''} (--gpus {gpus}), "
                           + (f"collectives between them over --network {wl['network']}" if wl.get("network")
                              else f"collectives between them over the instance's {net.raw:g} {net.unit} network"
                              if net is not None else "no network between them in the catalog: data-parallel "
                              "communication timed as one machine's link, a lower bound (fit --train --count's "
                              "warning; --network to give one)"))
        dur = fr.duration  # fit --train --tokens's own duration (duration.training_time_on, every field)
        timed.setdefault((cand.target, fr.count), (dur.assumptions, fr.all_warnings))
        one = float(dur.seconds or 0.0)
        nodes, secs = 1, one
        # no deadline given: the practical limit acts as one (instances added to meet it, as for --deadline)
        limit = c.deadline if c.deadline is not None else PRACTICAL_TRAINING_SECONDS
        missed = (f"{format_seconds(limit)} deadline" if c.deadline is not None else
                  f"{format_seconds(limit)} practical limit of a run with no deadline (give --deadline for a longer "
                  "one)")
        # MAX_SEARCH_NODES caps the machines of the run, not the multiplier: a candidate already grown to several
        # instances (the stated layout grown, the scale-out search's) multiplies at most up to it (review38 D1: a
        # 32-instance layout x 124 = 3,968 p5en instances was chosen for 2000T tokens)
        base = max(1, cand.count // cand.instance.device_count) if cand.instance is not None else 1
        node_cap = max(1, MAX_SEARCH_NODES // base)
        if one > limit:
            nodes = math.ceil(one / limit)
            if gpus is not None:  # the devices were given: no instances are added
                rejected.append(Option(**stub, replicas=fr.replicas, status="rejected",
                                       training_seconds=one,
                                       reasons=(f"{format_seconds(one)} on {cand.count} devices (--gpus) misses the "
                                                + missed,)))
                return
            if nodes > node_cap or cand.instance is None:
                rejected.append(Option(**stub, replicas=1, status="rejected", training_seconds=one, reasons=(
                    f"{format_seconds(one)} on one {'instance' if cand.instance else 'device'} misses the "
                    + missed + ("" if cand.instance else " (local hardware does not scale out)"),)))
                return
            # several instances: fit --train --count N x the instance's devices (memory, and the duration with the
            # collectives over the instance's network), adding instances while the network keeps it past the deadline
            while True:
                many = fit_training(spec, cand.instance, cand.count * nodes, headroom=c.headroom, memory=cand.memory,
                                    hardware_files=hardware_files, tokens=tokens, utilization=utilization,
                                    fits_at=False, **{k: v for k, v in (tf or {}).items() if k != "gpus"})
                secs = float(many.duration.seconds or 0.0) if many.duration is not None else one / nodes
                if secs <= limit or nodes >= node_cap or not many.fits:
                    break
                nodes = min(node_cap, max(nodes + 1, math.ceil(nodes * secs / limit)))
            if not many.fits or secs > limit:
                rejected.append(Option(**{**stub, "count": many.count, "instances": many.instances},
                                       replicas=many.replicas, status="rejected",
                                       training_seconds=secs,
                                       reasons=many.reasons if not many.fits else (
                                           f"{format_seconds(secs)} on {many.instances} instances misses the "
                                           + missed,)))
                return
            fr = many
            reasons[fit_at] = many.reasons  # the scaled-out layout's memory, not the one instance's
            if scaled is not None:  # the searched layout on the instances the deadline needs: its command reproduces
                reasons[scaled_at] = scaled_line(  # the option (probe15 D5: it said the search's --count)
                    dataclasses.replace(scaled, instances=many.instances, devices=many.count),
                    f"the scale-out search's layout (the fewest instances on which it fits: {scaled.instances}), "
                    "on the instances the time limit needs")
            if many.duration is not None:  # the run the option is: several instances' collectives
                timed[(cand.target, many.count)] = (many.duration.assumptions, many.all_warnings)
            reasons.append(f"{many.instances} instances to meet the " + ("deadline" if c.deadline is not None else
                           f"{format_seconds(limit)} practical limit (no deadline given)")
                           + " (collectives over the instance's network)")
        step = fr.duration.step if fr.duration is not None else None
        if step is not None and step.comm_uncounted:  # several devices with no bandwidth between them (a CPU per
            # instance and no network in the catalog): the time leaves out every collective, so it is no answer
            # (estimate/duration.py StepTime.comm_uncounted, the warning fit --train prints for it)
            rejected.append(Option(**{**stub, "count": fr.count, "instances": fr.instances}, replicas=fr.replicas,
                                   status="rejected", training_seconds=secs, reasons=(
                                       f"{fr.count} x {dev.id}" + (f" on {fr.instances} instances" if fr.instances
                                                                    and fr.instances > 1 else "")
                                       + ": no interconnect or network bandwidth between them in the catalog, so "
                                       "their data-parallel communication cannot be timed (give --network)",)))
            return
        if scaled is not None and "sequence_parallel" in scaled.fields:  # on the devices the option is
            sp_of.setdefault((cand.target, fr.count), bool(scaled.fields["sequence_parallel"]))
        devices = cand.count * nodes
        price = cand.price * nodes if cand.price is not None else None
        total = price * secs / 3600 if price is not None else None
        if fr.duration is not None:  # the FLOP count of this option's own layout (fit_training's), for the headline
            flops_of[(cand.target, fr.count)] = (fr.duration.flops_per_token, fr.duration.flops_formula)
        opt = Option(**{**stub, "count": fr.count, "instances": fr.instances}, replicas=fr.replicas, status="meets",
                     flops_per_token=fr.duration.flops_per_token if fr.duration is not None else None,
                     reasons=tuple(reasons),
                     price_per_hour=price,
                     cost_basis=cand.cost_basis, training_seconds=secs, device_hours=device_hours(secs, devices),
                     run_cost=total, memory_per_device=fr.memory_per_device, budget_per_device=fr.budget_per_device,
                     layout=_layout(tf, fr, scaled))
        unmeasured = budget_unmeasured(cand.provider, price)
        if unmeasured is not None and (c.max_cost is not None or c.max_cost_per_hour is not None):
            opt = _replace(opt, reasons=(*opt.reasons, unmeasured))
        elif c.max_cost is not None and (total is None or total > c.max_cost):
            opt = _replace(opt, status="rejected", reasons=(  # money as units.format_usd: cents below $100
                "no price to compare with the budget" if total is None
                else "run costs {} > {}".format(*compared_usd(total, c.max_cost)),))
        elif c.max_cost_per_hour is not None and (price is None or price > c.max_cost_per_hour):
            opt = _replace(opt, status="rejected", reasons=(
                "no hourly price" if price is None else "{}/h exceeds {}/h".format(*compared_usd(price,
                                                                                            c.max_cost_per_hour)),))
        (meets if opt.status == "meets" else rejected).append(opt)

    for cand0 in cands:
        consider(cand0)
    advice: list[str] = [] if any(o.device_kind == "gpu" for o in meets) else _fsdp_precision_advice(
        spec, autocast, c, hardware_files, model_arg, extra)
    scale_notes: list[Assumption] = []
    # no option meets every constraint (no instance holds the run, or those that do miss the deadline or budget even
    # with instances added): the other instance types' fewest instances and a layout that hold it, then instances
    # added for the deadline as to any option (recfix D7: an instance that held the memory but missed the deadline
    # stopped the search, so the faster types that needed a model-parallel layout were never sized)
    if gpus is None and not meets and cands:
        found, scaled_advice, scale_notes = _scale_out(spec, cands, on_instances, c, hardware_files, model_arg, extra,
                                                       fitted, tokens, utilization)
        advice = [*scaled_advice, *advice]
        for cand0, lay in found:
            consider(cand0, lay)
        # and the stated layout grown by data-parallel instances (as when some option meets): the fewest instances
        # of a model-parallel layout need not be the cheapest run (70B on B200s: TP 8 on one instance, 40.5 h, $3,654;
        # data-parallel on two, 8.7 h, $1,561); one the scale-out search found at the same devices is not sized again
        searched = {(cand0.target, lay.devices) for cand0, lay in found}
        grown, grown_notes = _grow_stated(spec, short, on_instances, c, hardware_files)
        if scale_notes and grown_notes:  # one scale_out_cap: the search's rule, then the growth's
            first = scale_notes[0]
            scale_notes = [dataclasses.replace(first, why=f"{first.why}; then {grown_notes[0].why}"),
                           *scale_notes[1:]]
        else:
            scale_notes = [*scale_notes, *grown_notes]
        for cand0, lay in grown:
            if (cand0.target, lay.devices) not in searched:
                consider(cand0, lay)
    elif gpus is None and meets:  # some option meets: the types one instance cannot hold, on the fewest instances
        # that hold the run with the stated layout (probe16 D-B: 8 x H200 chosen at $298.23 where 2 x p5.48xlarge
        # fit at $266.82), so "cheapest" is over them too
        grown, scale_notes = _grow_stated(spec, short, on_instances, c, hardware_files)
        for cand0, lay in grown:
            consider(cand0, lay)
    # ties broken by name and size, so the ranking does not follow the catalog's or a hardware file's listing order
    # (the user's own hardware first, as rank_key orders a serving search)
    meets.sort(key=lambda o: (not mine_first(o), o.run_cost is None, o.run_cost or 0.0, o.training_seconds or 0.0,
                              o.target, o.count))
    if meets:
        f0 = meets[0]
        cost = (f"{format_usd(f0.run_cost) if f0.run_cost is not None else 'no price'}, "
                f"{format_seconds(f0.training_seconds or 0)}")
        meets[0] = _replace(f0, status="chosen", reasons=(
            f"{YOURS} (marked owned in --hardware-file): meets every constraint ({cost})" if f0.ownership == YOURS
            else f"cheapest run that meets every constraint ({cost})"
            if f0.run_cost is not None else "meets every constraint; no priced option does", *f0.reasons))
    rejected.sort(key=lambda o: (not mine_first(o), o.run_cost is None, o.run_cost or 0.0, o.target, o.count))
    # the chosen option's duration assumptions and fit's warnings for it, memory and duration (another device's
    # collective bandwidth or utilisation would not describe it); none chosen: none (the first option timed would
    # depend on the listing order)
    assumptions, warnings = timed.get((meets[0].target, meets[0].count), ((), ())) if meets else ((), ())
    if meets and (meets[0].target, meets[0].count) in sp_of:  # the chosen option's searched sequence parallelism
        on = sp_of[(meets[0].target, meets[0].count)]
        assumptions = (*assumptions, Assumption(
            "sequence_parallel", on, True, f"derived: the scale-out search's choice for {meets[0].target} "
            f"({'on' if on else 'off'}): {SP_SEARCH}"))
    unpriced = unpriced_yours(meets + rejected, c)  # serving's line for the user's own unpriced hardware
    if unpriced:
        warnings = (*warnings, unpriced)
    if c.deadline is None:
        assumptions = (Assumption("practical_training_limit", format_seconds(PRACTICAL_TRAINING_SECONDS), True,
                                  "no deadline given: it acts as one, instances are added to meet it and an "
                                  "option that cannot is rejected (recommend.PRACTICAL_TRAINING_SECONDS, a policy "
                                  "default: a quarter's "
                                  "lease, about one frontier run's length, Llama 3.1 405B's ~78 days; "
                                  "--deadline replaces it)"), *assumptions)
    # the headline's FLOP/token is the chosen option's, fit_training's for its layout (recfix D8: it was the
    # workload's TP's, 1.080e12 where the option searched TP 2 / EP 2 ran 1.087e12); none chosen: the layout stated
    fpt, formula = (flops_of[(meets[0].target, meets[0].count)] if meets else
                    (fl.effective_per_token(w.micro_batch), fl.effective_formula(w.micro_batch)))
    workload = {"tokens": tokens, **{k: (list(v) if isinstance(v, tuple) else v) for k, v in wl.items()},
                "flops_per_token": fpt, "flops_formula": formula, "total_flops": fpt * tokens}
    return Recommendation("training", spec.name, workload, c, tuple(meets), tuple(rejected), tuple(advice), (),
                          (*assumptions, *scale_notes), tuple(warnings))




def format_that_fits(spec: ModelSpec, hardware: str | Device | Instance, count: int | None = None, *,
                     headroom: float | None = None, **kwargs: Any) -> Option | None:
    """``best_option_on``'s pick on the same hardware and workload with no weight format given (the engine's format
    ladder, ``estimate/formats.py`` ``format_ladder``, best first; the first that fits and meets reading speed), or
    None when no rung does or the device cannot be searched. ``kwargs``: ``best_option_on``'s own (context,
    concurrency, output_tokens, engine, memory, hardware_files and any InferenceWorkload field)."""
    opt = _ladder_pick(spec, hardware, count, headroom, kwargs)
    return opt if opt is not None and opt.status == "meets" else None


def _ladder_pick(spec: ModelSpec, hardware: str | Device | Instance, count: int | None, headroom: float | None,
                 kwargs: dict[str, Any]) -> Option | None:
    """``best_option_on`` with no weight format (met or rejected), None where the search refuses the workload."""
    kwargs = {k: v for k, v in kwargs.items() if k != "weights" and v is not None}  # None: the default
    try:
        return best_option_on(spec, hardware, count, constraints=Constraints(headroom=headroom), **kwargs)
    except InputError:  # a workload the search refuses (fit answered it): no hint rather than a second error
        return None


def experts_in_host(spec: ModelSpec, option: Option, hardware: str | Device | Instance, count: int | None = None, *,
                    context: int = InferenceWorkload.context, concurrency: int = InferenceWorkload.concurrency,
                    memory: int | None = None, headroom: float | None = None, fit_target: int | None = None,
                    host_memory: int | None = None, hardware_files: Sequence[str | Path] = (),
                    **workload: Any) -> dict[str, Any] | None:
    """Where ``best_option_on`` rejects an MoE model on GPUs for memory (every expert on the GPUs, on llama.cpp or
    the engine asked: vLLM's ladder too ends above Q2_K), what ``fit --auto`` answers at the same context with the
    routed experts of some layers in host memory: the one rule (estimate/format_search.py ``experts_in_host_at``),
    which fit's hint (``fits_at``) asks too. None when the option is not such a rejection or no rung fits so."""
    if (option.status != "rejected" or option.device_kind != "gpu"
            or not option.reasons or not option.reasons[0].startswith("does not fit")):
        return None
    return experts_in_host_at(spec, hardware, count, context=context, concurrency=concurrency, memory=memory,
                              headroom=headroom, fit_target=fit_target, host_memory=host_memory,
                              hardware_files=hardware_files, **workload)
    return None
