"""Does a workload fit on N x device, with a stated headroom? Memory per device and the verdict come from the
estimators (``estimate_inference`` / ``estimate_training`` given the device's memory and the headroom: the one
rule in ``estimate/verdict.py``), and the speed it would run at from ``performance.estimate_speed``.

Usable memory is the catalog's device memory (``Device.memory_bytes``). Apple GPUs may use only the Metal
working-set share of unified memory (``efficiency.apple_gpu_working_set``: 2/3 up to 32 GB, 3/4 above); CPUs use
RAM, which must not spill into swap.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import partial
from itertools import filterfalse, repeat
from operator import attrgetter, methodcaller
from pathlib import Path
from typing import Any, NamedTuple

from ..catalog.hardware import Device, Instance, Value, catalog_key, load_catalog
from ..errors import FieldError, InputError
from ..formulas.cost import cost_per_million_tokens, power_price_per_hour
from ..formulas.model_parallel_time import serving_pipeline_micro_batch
from ..formulas.network import NCCL_TUNING_SOURCE, cross_machine_send_latency, device_share_of_node_bandwidth
from ..formulas.serving_expert_parallel import moe_split, uneven_experts_refusal
from ..formulas.serving_queue import OverCapacityError, queue_wait_seconds
from ..formulas.speed import OP_OFFLOAD_MIN_BATCH, PhaseTime, op_offload_source
from ..formulas.tensor_parallel import (
    FP8_BLOCK_ENGINES,
    QUANT_SHARD_FORMATS,
    heads_refusal,
    quant_block_refusal,
    serving_tensor_parallel_refusal,
    transformers_tensor_parallel_refusal,
    width_refusal,
)
from ..formulas.weight_formats import GROUP_SIZE_DEFAULT, OTHER_BYTES_DEFAULT
from ..frozen import fast_init, replace_fields
from ..models import spec_of
from ..numbers import CONCURRENCY, COUNT, KWH_PRICE, LLAMACPP_GPUS, MACHINE_GPUS, REQUEST_RATE, check_number
from ..request.quantities import parse_money, parse_network
from ..result import SCHEMA_VERSION, Assumption, Estimate, Notes, json_data, merged_assumptions
from ..specs import InferenceWorkload, ModelSpec, TrainingWorkload
from ..specs.training import (
    check_whole_machines,
    default_grad_checkpointing,
    llamacpp_split_gpus,
    tensor_split_refusal,
)
from ..specs.workload import (
    DATA_PARALLEL_ENGINES,
    DEFAULT_ATTENTION,
    ENGINE_SETTINGS,
    INFERENCE_NUMBERS,
    PIPELINE_ENGINES,
    async_pipeline_refusal,
    normalize_engine,
    prompt_and_output,
    read_number,
)
from ..units import format_bits, format_bytes
from . import efficiency as E
from . import engines as ENG
from . import ranges as R
from .allocator import verdict_need_range
from .context_window import window_fits_at
from .device import (
    APPLE_OWN_HOST_WARNING,
    apple_host_memory,
    check_engine_on_device,
    cuda_memory,
    detected_machine,
    engine_assumption,
    gpu_runtime,
    hardware_decides,
    host_holds_weights,
    host_link,
    host_part,
    inference_device_fields,
    is_apple_own_host,
    named_device_notes,
    numa_assumption,
    nvlink_mesh_for,
    one_replica_per_device,
    peer_to_peer,
    refuse_pipeline_apart,
    refuse_split_apart,
    refuse_tensor_parallel_apart,
    refuse_training_apart,
    resolve_target,
    target_memory,
    training_device_fields,
    workload_device_kind,
)
from .engines import LLAMACPP_N_UBATCH, llamacpp_layer_split
from .formats import check_engine_runs, engine_dtype_note, engine_weights, nvfp4_kernel_note
from .inference import estimate_inference
from .inference.common import running_and_queued
from .inference.compose import vllm_fits_at, with_serving_notes
from .model_warnings import one_device_serving
from .rate_capacity import over_capacity, rate_warnings
from .serving_load import (
    SLOT_TAIL,
    SLOTS_FROM_CONCURRENCY,
    RateCapacityError,
    admission_over_capacity,
    admission_wait,
    at_rate,
    burst_over_pool,
    closed_throughputs,
    in_flight_said,
    rate_fixed_point,
    slots_for,
    sustained_rate,
    under_load,
)
from .speed import SpeedEstimate, SpeedLayout, estimate_speed, for_device, speed_model, split_decode, split_prefill
from .speed_layout import pipelined
from .speed_setup import MachineNetwork
from .training import estimate_training
from .training.compose import ZERO_NONE_FITS_WHY, ZERO_WHY, training_needs, training_workload, with_device_notes
from .training.setup import refuse_attention_kernel
from .verdict import (
    check_headroom,
    fits_budget,
    headroom_assumption,
    host_fit_target_assumption,
    host_memory_verdict,
    margin_rule,
    memory_budget,
)

# Devices of one machine when the target is a device name, not an instance (an instance is one machine of its own
# devices): an HGX/DGX board's 8, the training layout's default too (specs/training.py ``gpus_per_node``)
SERVING_GPUS_PER_NODE = TrainingWorkload.gpus_per_node


def serving_machine_size(instance: Instance | None, gpus_per_node: int | None = None,
                         count: int | None = None, count_field: str = "count") -> int:
    """The devices of one machine that ``fit``'s serving layout reads (its tensor-parallel options within a machine,
    the spanning warning): ``gpus_per_node`` where given (``fit --gpus-per-node``; a plan's bare devices over
    ``resources.nodes`` machines), else an instance's own device count, else ``SERVING_GPUS_PER_NODE``: the
    precedence the training fit gives its ``gpus_per_node`` (``fit_training``: the field given, else the
    instance's). One rule, so the same machines get one layout however they are named. A ``gpus_per_node`` that
    contradicts the instance's own devices (an instance is one machine of them), or ``count`` devices that do not
    fill whole machines of it (specs/training.py ``uneven_machines``, the rule a plan's ``resources.nodes`` is
    checked by), is bad input: one line, exit 2, naming ``count_field``, the field the devices were given in."""
    if gpus_per_node is None:
        return instance.device_count if instance is not None and instance.device_count else SERVING_GPUS_PER_NODE
    per_node = int(check_number(gpus_per_node, "gpus_per_node", MACHINE_GPUS))  # numbers.py, one home
    if instance is not None and instance.device_count and per_node != instance.device_count:
        raise FieldError("gpus_per_node", f"gpus_per_node {per_node} contradicts {instance.id}, one machine of "
                         f"{instance.device_count} devices: leave it out or give {instance.device_count}")
    if count is not None:
        check_whole_machines(count, per_node, count_field)
    return per_node


def default_machine_size(device: Device, count: int) -> tuple[int, str] | None:
    """The machine size ``count`` bare ``device`` GPUs could be placed on when no machine size is given (no
    ``--gpus-per-node``, no instance) and the catalog states a larger NVLink domain than the HGX board's
    ``SERVING_GPUS_PER_NODE`` (``Device.nvlink_domain``: a GB200 / GB300 NVL72 rack, 72 GPUs on NVSwitch, aiconfigurator
    gb200.yaml / gb300.yaml ``num_gpus_per_rack: 72``), and the warning that says so. NOT applied as a default
    (review39 D1/D2/D4): ``gpus_per_node`` is also the host every per-machine rule reads (FSDP1 hybrid sharding over one
    host's ``device_count()``, host RAM per machine), a GB200 host is a 4-GPU compute tray, and the catalog's gb200 row
    covers NVL4 systems too; so the run keeps machines of 8 and the warning names the flag (probe31: ``--device gb200``
    over 64+ GPUs swings ~2x with it). ``count`` up to the domain: the domain; past it, the largest size of at most one
    domain that fills whole racks evenly (specs/training.py ``uneven_machines``: 256 GPUs are 4 racks of 64). None: no
    larger domain stated, 8 devices or fewer, or no even split of at least 8 a rack. (size, warning)."""
    dom = device.nvlink_domain
    if dom is None or not dom.base or count <= SERVING_GPUS_PER_NODE or int(dom.base) <= SERVING_GPUS_PER_NODE:
        return None
    d = int(dom.base)
    size = d if count <= d else max(k for k in range(1, d + 1) if count % k == 0)
    if size < SERVING_GPUS_PER_NODE:
        return None
    return size, (f"{device.id}: the catalog states {d} GPUs in one NVLink domain (an NVL72 rack; nvlink_domain, source "
                  f"{dom.source}); sized on machines of {SERVING_GPUS_PER_NODE} as for any bare GPU (the row covers "
                  f"other GB200 systems too): on NVL72 racks give --gpus-per-node {size} to time the collectives over "
                  "the rack's NVLink (per-machine rules, such as FSDP hybrid sharding and host RAM, then read it too)")


def serving_domain_warning(device: Device, count: int, copy: int, copies: int, per_node: int) -> str | None:
    """The warning that a bare ``device``'s larger NVLink domain (``default_machine_size``: an NVL72 rack) would
    change ``fit``'s serving answer, or None where it would not (review39 D6). Serving keeps the HGX machine of
    ``per_node`` (``serving_machine_size``); a copy of the model (``copy`` devices: its tensor-parallel degree times
    its pipeline stages; ``copies`` of them in rank order, ``worst_copy_machines``) that stays inside one such
    machine sends nothing between machines, so ``--gpus-per-node`` the domain times the same collectives and the
    warning would be noise. It is said where the layout chosen crosses machines of ``per_node`` (its degree taken
    among those spanning machines, ``tensor_parallel_options``; its all-reduces or stage sends timed over the network
    between them, eqs. (11), (13'), (14)) and every copy would sit inside one domain-sized machine
    (``--gpus-per-node`` the size: the degrees within it ranked by speed, the collectives on the rack's NVLink). (Called with ``per_node`` of fit's
    default only: no ``--gpus-per-node``, no instance; llama.cpp holds a copy within one machine, no warning.)"""
    domain = default_machine_size(device, count)
    if domain is None:
        return None
    size = domain[0]
    if worst_copy_machines(copy, per_node, copies) < 2 or worst_copy_machines(copy, size, copies) > 1:
        return None
    dom = int(device.nvlink_domain.base) if device.nvlink_domain is not None else size
    return (f"{device.id}: {dom} GPUs share one NVLink domain (catalog nvlink_domain); each copy of the model "
            f"({copy} devices) spans machines of {per_node} (fit's serving default): on an NVL72 rack give "
            f"--gpus-per-node {size} to lay it out and time its collectives inside the rack's NVLink domain")


def machines_spanned(devices: int, per_node: int) -> int:
    """The machines a group of ``devices`` (one copy of the model: a tensor-parallel degree) spans on machines of
    ``per_node`` devices: ceil(devices / per_node). Past 1 its collectives cross the network between machines, so
    they need one shared fabric (provider/placement.py ``JobNeed.one_fabric``)."""
    return -(-max(1, devices) // max(1, per_node))


def worst_copy_machines(devices: int, per_node: int, copies: int) -> int:
    """The most machines any of ``copies`` copies of ``devices`` devices each spans when they are laid out in rank
    order on machines of ``per_node`` devices (copy i on devices i d .. (i + 1) d - 1): :func:`machines_spanned` for a
    copy that starts on a machine's first device, more where a copy straddles (TP 4 copies on machines of 6: the
    second copy takes 2 + 2 devices of two machines). The provider books ``ceil(count / nodes)`` per node, which need
    not be the plan's machine size (12 bare GPUs: fit's 8 + 4, booked 6 + 6)."""
    d, p = max(1, devices), max(1, per_node)
    return max(((i + 1) * d - 1) // p - (i * d) // p + 1 for i in range(max(1, copies)))


def tensor_parallel_options(spec: ModelSpec, count: int, per_node: int, engine: str = "vllm",
                            weights: str | None = None, group_size: int | None = None, data: int = 1,
                            expert_parallel: bool = False) -> list[int]:
    """The tensor-parallel degrees ``fit`` may take for ``spec`` on ``count`` devices, in the order it sizes them.
    Each t divides ``count`` (the other count / t devices run replicas, data parallel) and is one vLLM/SGLang shards
    ``spec`` over (``formulas/tensor_parallel.serving_tensor_parallel_refusal``: the attention heads divide by t,
    the KV heads split or replicate evenly; ``weights`` the format ``engine`` runs: fp8-block's shards whole blocks,
    a group format's whole groups of ``group_size``, else the checkpoint's, ``quant_block_refusal``; on vLLM and
    SGLang every feed-forward width divides by the ways it is split, eq. TP6 ``width_refusal``: the routed experts'
    by t x ``data`` ranks, or whole under ``expert_parallel``, ``layout_expert_tp``; another engine: the head rules
    alone, ``heads_refusal``, vLLM's as the stand-in). First those
    within one machine of ``per_node`` devices, largest first
    (the largest needs the least memory per device of those on one machine's links; ``fit`` takes the fastest of
    them that fits, ``fastest_first``); then those spanning machines, smallest first (their all-reduces cross the
    network every layer), for a model one machine does not hold: ``fit`` takes the first of them that fits. A model
    served on one device only (an encoder-decoder, ``model_warnings.one_device_serving``): 1, replicas."""
    if one_device_serving(spec):
        return [1]
    def refused(t: int) -> str | None:
        if engine not in FP8_BLOCK_ENGINES:
            return heads_refusal(spec, t)
        return serving_tensor_parallel_refusal(spec, t, engine, weights, group_size,
                                               layout_expert_tp(t, data, expert_parallel))

    ways = [t for t in range(1, min(count, spec.num_heads) + 1) if count % t == 0 and refused(t) is None] or [1]
    return [t for t in reversed(ways) if t <= per_node] + [t for t in ways if t > per_node]


class ServingLayout(NamedTuple):
    """How ``fit`` lays out ``count`` devices serving one model on an engine (``serving_layout``)."""

    apart: bool  # each device a replica of its own, one model each (device.py ``one_replica_per_device``)
    split: bool  # one llama.cpp model spread over the GPUs of one machine, no TP (engines.py ``llamacpp_layer_split``)
    engine: str = ""  # the serving engine (transformers has no tensor-parallel plan for some model types)
    # llama.cpp: the GPUs one copy of the model is split over (``llamacpp_split_gpus``: those of one machine), the
    # machines replicas of it; 1 for another engine (its devices per replica are the tensor-parallel degree)
    split_gpus: int = 1
    # pipeline stages of each replica (vLLM, SGLang: estimate/inference/pipeline.py), each of the tensor-parallel
    # degree's devices: a replica takes tp x pipeline devices (given, with or without a degree; else fit and the
    # hardware searches try the stages of ``pipeline_options`` through ``with_pipeline_layouts``)
    pipeline: int = 1
    # data-parallel engine ranks of each replica (vLLM --data-parallel-size, SGLang --attn-dp-size: given), each of
    # the tensor-parallel degree's devices, an MoE's routed experts split over all of them
    # (formulas/serving_expert_parallel.py): a replica takes tp x data devices
    data: int = 1

    def tensor_parallel_options(self, spec: ModelSpec, count: int, per_node: int, weights: str | None = None,
                                group_size: int | None = None, expert_parallel: bool = False) -> list[int]:
        """The degrees ``fit`` may take on this layout: 1 for replicas apart or llama.cpp (a split over one
        machine's GPUs, or one GPU a copy: it runs no tensor parallelism) or a model transformers has no
        tensor-parallel plan for (``formulas/tensor_parallel.transformers_tensor_parallel_refusal``), else
        ``tensor_parallel_options`` (``weights``: the format the engine runs, ``served_format``; this layout's
        ``data`` ranks and ``expert_parallel``: the ways each routed expert is split, ``layout_expert_tp``)."""
        if self.apart or self.split or self.engine == "llamacpp" or (
                self.engine == "transformers" and transformers_tensor_parallel_refusal(spec) is not None):
            return [1]
        return tensor_parallel_options(spec, count, per_node, self.engine, weights, group_size, self.data,
                                       expert_parallel)

    def replicas(self, count: int, tp: int) -> int:
        """Copies of the model on ``count`` devices at tensor parallelism ``tp``: count / the GPUs of one llama.cpp
        split (one per machine), else count / tp (every device a copy where apart: tp 1)."""
        return max(1, count // (self.split_gpus if self.split else max(1, tp) * self.pipeline * self.data))

    def ranks(self, count: int, tp: int) -> int:
        """The engine ranks on ``count`` devices, each timed alone at its own share of the load: the replicas x each
        one's ``data`` ranks (formulas/serving_expert_parallel.py eq. EP3: a rank's ceil(C / D) of a replica's C
        sequences is ceil(C / (replicas x D)) of all of them)."""
        return self.replicas(count, tp) * self.data


def served_format(spec: ModelSpec, engine: str, weights: str | None) -> str | None:
    """The weight format ``engine`` runs ``spec`` in (formats.py ``engine_weights``: ``weights`` given, else the
    checkpoint's) where a tensor-parallel degree depends on it (``FP8_BLOCK_ENGINES``: fp8-block's whole blocks, a
    group format's whole groups), else None."""
    return engine_weights(spec, engine, weights).fmt if engine in FP8_BLOCK_ENGINES else None


def layout_expert_tp(tp: int, data: int, expert_parallel: bool) -> int | None:
    """The ways each routed expert is split on a layout of ``data`` ranks of ``tp`` devices (formulas/
    serving_expert_parallel.py eq. EP1, ``moe_split``), or None (``tp`` itself) for plain tensor parallelism."""
    return moe_split(tp, data, expert_parallel)[0] if data > 1 or expert_parallel else None


def block_skipped(spec: ModelSpec, count: int, engine: str, weights: str | None, group_size: int | None = None,
                  data: int = 1, expert_parallel: bool = False) -> str | None:
    """The line ``fit`` says where eq. TP6 (``width_refusal``: a feed-forward width the degree does not divide, any
    format) or eq. TP5 (``quant_block_refusal``) takes a degree out of ``tensor_parallel_options`` (the largest one
    the heads' rules allow on ``count`` devices, the refusal's own words), else None."""
    if engine not in FP8_BLOCK_ENGINES or one_device_serving(spec):
        return None
    for t in range(min(count, spec.num_heads), 1, -1):
        if count % t == 0 and heads_refusal(spec, t, engine) is None:
            etp = layout_expert_tp(t, data, expert_parallel)
            why = width_refusal(spec, t, engine, etp) or (
                quant_block_refusal(spec, t, engine, weights, group_size, etp) if weights in QUANT_SHARD_FORMATS
                else None)
            if why is not None:
                return f"{why} (layouts of tensor_parallel {t} skipped)"
    return None


def pipeline_options(spec: ModelSpec, layout: ServingLayout, count: int) -> list[int]:
    """The pipeline stages P > 1 a hardware search (recommend, ``models --fits-on``, the plan's search: through
    ``format_search.pick_format``) tries on ``count`` devices laid out as ``layout``, each `fit --pp P` (fit choosing
    each stage's tensor-parallel degree among those of count / P): on the engines that run serving pipeline
    parallelism (``PIPELINE_ENGINES``: vLLM --pipeline-parallel-size, SGLang --pp-size), a layout that shards (not
    devices apart, not a llama.cpp split), P dividing the count (each replica T x P devices) and at most the model's
    decoder layers (estimate/inference/pipeline.py ``pipeline_refusal``'s bound; its other refusals, a model mixing
    cache kinds, are the estimate's: the search skips that P). Empty where none applies."""
    if layout.engine not in PIPELINE_ENGINES or layout.apart or layout.split or one_device_serving(spec):
        return []
    return [p for p in range(2, min(count, spec.num_layers) + 1) if count % p == 0]


def most_tokens(r: FitResult) -> float:
    """``with_pipeline_layouts``' ranking of a layout at a concurrency (the least first): the output tokens/s of
    all replicas together at the load (``FitResult.tokens_per_second_total``, what ``fastest_first`` ranks degrees
    by), negated."""
    return -(r.tokens_per_second_total or 0.0)


def rate_request_seconds(r: FitResult) -> float:
    """``with_pipeline_layouts``' ranking of a layout at a request rate (the least first): its answer's mean request
    seconds (TTFT + the wait + the output's steps, Little's law: the figure ``rate_layout_seconds`` ranks the
    tensor-parallel degrees by), infinite where it does not fit or has no load."""
    load = r.speed.load if r.speed is not None else None
    return float(load["request_seconds"]) if r.fits and load and "request_seconds" in load else math.inf


def expert_options(spec: ModelSpec, layout: ServingLayout, count: int, per_node: int) -> list[int]:
    """The data-parallel degrees D > 1 a search tries with expert parallelism (`fit --dp D --enable-expert-parallel`,
    fit choosing each rank's tensor-parallel degree T among those of count / D; the experts split over D x T ranks,
    formulas/serving_expert_parallel.py eq. EP1) on ``count`` devices laid out as ``layout``: vLLM (its
    --data-parallel-size / --enable-expert-parallel, the layout MiniMax's and DeepSeek's vLLM recipes give) or
    SGLang (--tp-size D x T --attn-dp-size D --ep-size D x T, sized and timed by its own split and exchange, eqs.
    EP1s, EP4s), a model with routed experts, a layout that shards (not devices apart, not a llama.cpp split), D
    dividing the count and within one machine of ``per_node`` (eqs. EP4 / EP4s time the exchange over the machine's
    link); on SGLang only a D for which some rank degree T (dividing count / D) splits the routed experts evenly
    over D x T (``uneven_experts_refusal``, eq. EP2: SGLang refuses E % ep != 0 at load). Empty where none applies."""
    if layout.engine not in DATA_PARALLEL_ENGINES or not spec.is_moe or layout.apart or layout.split \
            or one_device_serving(spec):
        return []
    experts = spec.moe.num_experts if spec.moe else 1

    def loads(d: int) -> bool:
        return any(uneven_experts_refusal(experts, d * t, layout.engine) is None
                   for t in range(1, count // d + 1) if (count // d) % t == 0)
    return [d for d in range(2, min(count, per_node) + 1) if count % d == 0 and loads(d)]


def with_pipeline_layouts(first: MemoryFit | None, per_node: int, stages: Sequence[int],
                          staged: Callable[[int], MemoryFit], experts: Sequence[int] = (),
                          expert_fit: Callable[[int], MemoryFit] | None = None,
                          rank: Callable[[FitResult], float] = most_tokens) -> MemoryFit | None:
    """The layout a hardware search takes of one format on one deployment, pipeline layouts considered: ``first``
    (fit's own answer, tensor parallelism only) where it fits within one machine of ``per_node`` devices -- fit's
    rule takes the fastest degree within a machine that fits, and goes across machines only where none does --
    else, of ``first`` and each `fit --pp P` (``staged(P)``, P in ``stages``: ``pipeline_options``) that fits,
    the one with the most output tokens/s in total at the load (``FitResult.tokens_per_second_total``, the figure
    fit ranks its layouts within a machine by, ``fastest_first``, and recommend's ``rank_key`` orders one price's
    options by), a tie to the fewest stages (no pipeline first). vLLM's docs advise tensor parallelism within a
    machine and pipeline parallelism between machines (fit's warning on a degree that spans machines names
    ``--tp --pp``); a stage count the estimate refuses (``InputError``: pipeline.py ``pipeline_refusal``) is
    skipped. ``first`` where no pipeline layout fits (its own verdict and reasons); ``first`` None (the search
    did not size it: its degrees cannot hold the weights) and none fits: the first stage count's answer (its
    verdict), None where every one was refused. ``rank``: the figure the fitting layouts are ordered by, the least
    first (``most_tokens`` at a concurrency; at a request rate, where every layout carries the same rate, the mean
    request seconds, ``rate_request_seconds``: `fit --request-rate`'s own ranking of its degrees).
    Expert-parallel layouts (``experts``: ``expert_options``' D, each ``expert_fit(D)``, `fit --dp D
    --enable-expert-parallel`) join the same ranking where tensor parallelism does not fit within a machine or
    eq. TP5 took a degree out of it (``first.tp_refused``: a checkpoint's quantization blocks do not split at that
    degree, formulas/tensor_parallel.py ``quant_block_refusal``; vLLM's and SGLang's answer is expert parallelism);
    a tie to the fewest stages, then no data parallelism; only those whose replica (D x T devices) is within one
    machine (eq. EP4's exchange is timed over the machine's link: across machines it would be an under-estimate)."""
    refused = first is not None and first.tp_refused and bool(experts)
    if first is not None and ((not stages and not experts) or first.refusal is not None
                              or (first.fits and first.tensor_parallel <= per_node and not refused)):
        return first
    fitting = [first] if first is not None and first.fits else []
    missed: MemoryFit | None = None
    tries = [(partial(staged, p), 1) for p in stages] + (
        [(partial(expert_fit, d), d) for d in experts] if expert_fit else [])
    for sized, ranks in tries:
        try:
            m = sized()
        except InputError:  # the estimate's refusal of these stages (pipeline.py) or ranks on this model
            continue
        if ranks > 1 and m.tensor_parallel * ranks > per_node:
            continue  # an expert-parallel replica across machines: eq. EP4's exchange is timed on the machine's link
        if m.fits and m.refusal is None:
            fitting.append(m)
        elif missed is None:
            missed = m
    if len(fitting) < 2:
        return fitting[0] if fitting else first if first is not None else missed
    answers = [(m, m.result(True)) for m in fitting]
    return min(answers, key=lambda a: (rank(a[1]), a[1].pipeline_parallel, a[1].data_parallel))[0]


def serving_layout(engine: str, device: Device, count: int, per_node: int = SERVING_GPUS_PER_NODE) -> ServingLayout:
    """The layout of ``count`` x ``device`` (machines of ``per_node``: ``serving_machine_size``) serving on
    ``engine``: several CPUs or Apple chips are replicas, one model each (``one_replica_per_device``); several GPUs
    under llama.cpp hold one model spread over the GPUs of one machine (layer/row split, ``llamacpp_split_gpus``),
    each machine a replica; else tensor-parallel replicas. The one rule ``fit`` lays its answer out by and recommend,
    ``models --fits-on`` and the plan (so the capacity check) read through it."""
    apart = count > 1 and one_replica_per_device(device)
    gpus = 1 if apart or engine != "llamacpp" else llamacpp_split_gpus(count, per_node)
    return ServingLayout(apart, llamacpp_layer_split(engine, gpus) and not apart, engine, gpus)


def llamacpp_copy(device: Device, count: int, instance: Instance | None = None,
                  gpus_per_node: int | None = None) -> tuple[int, int]:
    """(GPUs one llama.cpp copy is split over, copies) for ``count`` x ``device``: ``serving_layout``'s split over
    ``serving_machine_size``'s machine, the layout ``fit`` sizes. llama.cpp's auto-fit (estimate/llamacpp_fit.py:
    ``fit --auto``, fit's host-memory hint, ``models --fits-on``) fits one copy on these GPUs at its share of the
    load (``per_replica``), so the flags it prints, rerun through ``fit`` on the same ``count``, are sized alike."""
    layout = serving_layout("llamacpp", device, count, serving_machine_size(instance, gpus_per_node, count))
    return layout.split_gpus, layout.replicas(count, 1)


def choose_tensor_parallel(spec: ModelSpec, count: int, per_node: int | None = None) -> int:
    """The largest tensor parallelism ``fit`` may take for ``spec`` on ``count`` devices (the largest of
    ``tensor_parallel_options``): the one that needs the least memory per device, for a search's necessary
    condition (recommend's weights-alone check)."""
    return max(tensor_parallel_options(spec, count, per_node or SERVING_GPUS_PER_NODE))


def fastest_first(tokens_per_second: dict[int, float | None]) -> list[int]:
    """Tensor-parallel degrees ordered by the output tokens/s of their layouts (each degree's replicas at the stated
    load, ``replicas_tokens_per_second``), fastest first, a tie to the smaller degree; ``fit`` takes the first that
    fits (a tied larger degree instead when only that one fits at its high end, ``fits_high``). Without every speed (a device the speed model cannot time) the largest degree first: the least memory
    per device."""
    if any(v is None for v in tokens_per_second.values()):
        return sorted(tokens_per_second, reverse=True)
    return sorted(tokens_per_second, key=lambda t: (-float(tokens_per_second[t] or 0.0), t))


def per_replica(concurrency: int, replicas: int) -> int:
    """Sequences one replica serves when ``concurrency`` is spread evenly over ``replicas``: ceil(c / r), so the
    fullest replica's memory and speed are the ones reported (fit, recommend's replicas for a throughput target and
    the plan read this one rule)."""
    return max(1, math.ceil(concurrency / max(1, replicas)))


def need_per_device(est: Estimate, on_cpu: bool = False) -> tuple[int, int]:
    """(expected, high) bytes ``est`` needs on one device: the total at its location less what the metric shows but a
    run does not need (``allocator.verdict_need_range``, the inference verdict's rule), or with a llama.cpp split the
    fullest GPU's (estimate/inference/llamacpp_split.py places layers, KV and compute per GPU)."""
    split = est.details.get("split")
    per_gpu = [dv for dv in split["devices"] if dv["device"] != "host"] if split and not on_cpu else []
    if len(per_gpu) > 1:
        return max(int(dv["total"]) for dv in per_gpu), max(int(dv["total_high"]) for dv in per_gpu)
    _, mid, hi, _ = verdict_need_range(est, "host" if on_cpu else "device")  # the verdict's need (allocator.py)
    return int(mid), int(hi)


def verdict_need(est: Estimate, on_cpu: bool = False) -> tuple[int, int]:
    """(need, budget) per device that ``est``'s verdict compared (``details["fits"]``): for an engine that reserves a
    pool (vLLM, SGLang: ``verdict_basis`` '...-admission') what the workload needs of the pool and what the pool offers
    it (``workload_bytes``, ``workload_budget_bytes``: estimate/inference/vllm.py, sglang.py); else the expected
    memory per device (``need_per_device``) and the device budget (``memory_budget``: estimate/verdict.py eq. 1)."""
    d = est.details
    if str(d.get("verdict_basis", "")).endswith("-admission") and "workload_budget_bytes" in d:
        return int(d["workload_bytes"]), int(d["workload_budget_bytes"])
    return need_per_device(est, on_cpu)[0], int(d["memory_budget"])


def hint_memory(r: FitResult) -> dict[str, int | None]:
    """The memory a hint (``FitResult.fits_at``) quotes for the run it names: ``memory_per_device`` and
    ``budget_per_device`` (the answer's own keys), and under a pool engine (vLLM, SGLang: the verdict compares the
    workload's share with what the pool offers, ``verdict_need``) what the verdict compared and the pool reserved,
    so the line says the need against what the pool offers, as fit's memory line does (probe24 C1: the hint quoted
    the reserved pool against the device memory)."""
    out: dict[str, int | None] = {"memory_per_device": r.memory_per_device, "budget_per_device": r.budget_per_device}
    est = r.estimate
    if est is not None and str(est.details.get("verdict_basis", "")).endswith("-admission") \
            and "workload_budget_bytes" in est.details:
        need, offered = verdict_need(est)
        out.update({"verdict_need_per_device": need, "verdict_budget_per_device": offered, **pool_reserved(est)})
    return out


def pool_reserved(est: Estimate) -> dict[str, int]:
    """What a pool engine (vLLM, SGLang) holds per device once started and, where it does not start, by how much its
    weights, activations and overhead exceed its pool (``reserved_bytes``, ``pool_shortfall_bytes``:
    estimate/inference/vllm.py, sglang.py) as the answer's ``reserved_per_device`` / ``pool_shortfall_per_device``;
    nothing for another engine. The device total (``memory_per_device``) is the pool only where the engine starts."""
    d = est.details
    out = {"reserved_per_device": int(d["reserved_bytes"])} if "reserved_bytes" in d else {}
    if d.get("pool_shortfall_bytes"):
        out["pool_shortfall_per_device"] = int(d["pool_shortfall_bytes"])
    return out


def verdict_high(est: Estimate, on_cpu: bool = False) -> int | None:
    """The high end of the need ``est``'s verdict quotes per device (``verdict_high``, estimate/verdict.py: the
    components' or the calibrated high end, whichever is higher; with a llama.cpp split, the fullest GPU's if
    higher); None for an engine judged by its pool's admission (vLLM, SGLang: the pool is reserved whole,
    ``verdict_need``) or an estimate without one."""
    d = est.details
    if str(d.get("verdict_basis", "")).endswith("-admission") or "verdict_high" not in d:
        return None
    return max(int(d["verdict_high"]), need_per_device(est, on_cpu)[1] if d.get("split") else 0)


def fits_high(est: Estimate, on_cpu: bool = False) -> bool:
    """Whether ``est`` fits at the high end of its need too (``verdict_high`` within the device budget); a pool
    engine's verdict holds whenever it fits."""
    high = verdict_high(est, on_cpu)
    return bool(est.details.get("fits")) and (high is None or high <= int(est.details["memory_budget"]))


def busy_replicas(concurrency: int, replicas: int) -> int:
    """Replicas that serve a sequence when ``concurrency`` sequences are spread evenly over ``replicas``, each
    holding at most ``per_replica`` of them: ceil(c / ceil(c / r)), never more than c (one user on a thousand
    replicas keeps one busy; the others add no tokens/s)."""
    per = per_replica(concurrency, replicas)
    return min(replicas, math.ceil(max(1, concurrency) / per))


def replicas_tokens_per_second(speed: SpeedEstimate | None, replicas: int,
                               concurrency: int | None = None) -> float | None:
    """Output tokens/s of ``replicas`` replicas each running at ``speed`` (one replica at its share of the load,
    ``speed.concurrency`` sequences; None without a speed): ``FitResult.tokens_per_second_total``. With
    ``concurrency`` (all replicas' sequences), only the sequences there are produce tokens: min(replicas,
    concurrency / per replica) replicas' worth, so one user on a thousand replicas is one replica's tokens/s, and
    20 users on 8 replicas of 3 are 20 users' at the fullest replica's speed per user (None: every replica full).
    At a request rate (``speed.load`` of serving_load.at_rate) the steady state puts out what arrives: each replica
    its share of the rate x the output tokens (Little's law's flow balance, eq. Q10), so the replicas together the
    rate x output tokens, not rescaled by the rounded requests in flight."""
    if speed is None or speed.tokens_per_second is None:
        return None
    if speed.load and "request_rate_per_replica" in speed.load:
        return float(speed.load["output_tokens_per_second"]) * replicas
    if concurrency is None:
        return speed.tokens_per_second * replicas
    return speed.tokens_per_second * min(replicas, max(1, concurrency) / max(1, speed.concurrency))


@fast_init
@dataclass(frozen=True)
class FitResult:
    """Whether a workload fits on ``count`` x ``device``; memory per device against the budget, and speed."""

    kind: str
    model: str
    target: str
    device: str
    count: int
    tensor_parallel: int
    replicas: int
    engine: str
    weights_format: str
    fits: bool
    memory_per_device: int | None
    memory_high_per_device: int | None
    budget_per_device: int | None
    headroom: float
    estimate: Estimate | None
    speed: SpeedEstimate | None
    training_time: dict[str, Any] | None = None
    reasons: tuple[str, ...] = ()
    assumptions: tuple[Assumption, ...] = ()
    warnings: tuple[str, ...] = ()
    details: dict[str, Any] = field(default_factory=dict)
    duration: Any = None  # training: the Duration behind ``training_time`` (estimate/duration.py), for rendering
    # the target's hourly price: serving, with its cost per million output tokens (``serving_cost``); training,
    # with the run's cost (``training_cost``: training_time's price and cost, the same numbers)
    cost: dict[str, Any] | None = None
    # what does fit when this does not: serving, the weight format (format_search.py ``fits_at``); training, the
    # settings changed (``training_fits_at``). None: it fits, a format or the settings were given, or nothing fits
    fits_at: dict[str, Any] | None = None
    # training, when ``fits_at`` is None: what fits if the caller's own settings change (``training_fits_if_changed``:
    # the ladder's first step that fits with them changed, the smallest device count that fits), each marked so
    fits_if_changed: tuple[dict[str, Any], ...] = ()
    # the machines the ``count`` devices are in: count / an instance's devices (:func:`instances_for`: 2 for 16 on an
    # 8-GPU instance), 1 for devices named bare. The one convention of fit, recommend and ``models --fits-on``:
    # ``count`` every device, ``instances`` the machines they are, priced as that many (:func:`hourly_price`)
    instances: int = 1
    # serving: the data-parallel engine ranks of each replica (vLLM --data-parallel-size; ``ServingLayout.data``),
    # ``speed`` one rank's at its share of the load
    data_parallel: int = 1
    # serving: the routed experts split over every rank of a replica (vLLM --enable-expert-parallel)
    expert_parallel: bool = False

    @property
    def ranks(self) -> int:
        """Serving: the engine ranks of all replicas, each timed alone at its own share of the load (the
        ``replicas`` x each one's ``data_parallel`` ranks, ``ServingLayout.ranks``: formulas/serving_expert_parallel.py
        eq. EP3): the units a request rate is split over, ``speed`` one rank's at its share."""
        return self.replicas * self.data_parallel

    @property
    def layout_text(self) -> str:
        """The serving layout of one replica in words (``serving_layout_text``): 'TP 4', 'TP 2 x PP 2',
        'TP 1 x DP 8 (EP 8)'."""
        return serving_layout_text(self.tensor_parallel, self.pipeline_parallel, self.data_parallel,
                                   self.expert_parallel)

    @property
    def engine_flags(self) -> str | None:
        """The engine's own flags that start one replica in this layout (``serving_engine_flags``), None where the
        layout has no data-parallel ranks (the layouts fit has always named by ``--tp``/``--pp``)."""
        if self.kind != "inference" or self.data_parallel <= 1:
            return None
        return serving_engine_flags(self.engine, self.tensor_parallel, self.pipeline_parallel, self.data_parallel,
                                    self.expert_parallel)

    @property
    def devices_text(self) -> str:
        """The answer's hardware as one line (:func:`devices_text`, as recommend and ``models --fits-on`` name it):
        '16 x h100-sxm (aws-p5.48xlarge, 2 instances)', '3 x rtx-4090', 'h100-sxm'."""
        return devices_text(self.count, self.device, self.instances,
                            self.target if self.target != self.device else None)

    @property
    def layer_split(self) -> bool:
        """Whether this serving answer is one llama.cpp model split over its ``count`` devices (one replica, no
        tensor parallelism; ``engines.llamacpp_layer_split``, the rule ``fit`` laid it out by), not TP replicas: the
        rule on one replica's devices (several CPUs or Apple chips are replicas of one device each, never split)."""
        return self.kind == "inference" and llamacpp_layer_split(self.engine, self.count // max(1, self.replicas))

    @property
    def refused_window(self) -> dict[str, Any] | None:
        """The model's window the engine refuses this context past (W2, W4: context_window.py ``window_fits_at`` of
        the estimate's ``engine_refusal_reason``): {engine, tokens, override, reason: that refusal in words}; None
        when the engine starts. No memory, device count or weight format changes it: only a context within ``tokens``
        or the override does."""
        at = window_fits_at(self.estimate.details) if self.estimate is not None else None
        if not at or self.estimate is None:
            return None
        return {**dict(at["window"]), "reason": self.estimate.details["engine_refusal_reason"]}  # type: ignore[call-overload]

    @property
    def binding(self) -> str | None:
        """What the verdict is bound by when it does not fit, the basis every surface words its reason and remedy
        from: 'context window' (the engine will not start: ``refused_window``), 'rate' (a stated request rate past
        what the devices carry: ``details['rate_capacity']``), else 'memory'; None when it fits."""
        if self.fits:
            return None
        if self.refused_window is not None:
            return "context window"
        return "rate" if "rate_capacity" in self.details else "memory"

    @property
    def tokens_per_second_total(self) -> float | None:
        """Output tokens/s of all ``replicas`` together, each of its ``data_parallel`` ranks (the speed estimate is one
        rank's, at its share of the load): what a price per hour of the whole target buys, so the one input of its
        cost per million tokens."""
        conc = self.details.get("concurrency")
        return replicas_tokens_per_second(self.speed, self.replicas * self.data_parallel,
                                          int(conc) if conc is not None else None)

    @property
    def all_assumptions(self) -> tuple[Assumption, ...]:
        """Every assumption behind the answer, each name once: the fit's own (headroom, device memory, the defaults
        that size the workload), then those of the memory estimate and of the speed estimate that the fit does not
        name already. A name one list repeats (the images and the video of one prompt, two ``media`` lines of the
        estimate) keeps every entry of that list. The text and the notebook print these; the JSON keeps each list in
        its own object."""
        return merged_assumptions(self.assumptions, self.estimate.assumptions if self.estimate else (),
                                  self.speed.assumptions if self.speed else ())

    @property
    def all_warnings(self) -> tuple[str, ...]:
        """Every warning behind the answer, each once, in the order ``fit`` prints them: the speed estimate's
        (serving), the fit's own with its memory estimate's, then the training duration's (``fit --train
        --tokens``). What a search that chose this answer (``recommend``) says of its choice."""
        dur = self.duration.warnings if self.duration is not None else ()
        return tuple(dict.fromkeys((*(self.speed.warnings if self.speed else ()), *self.warnings, *dur)))

    @property
    def budget_left_bytes(self) -> int | None:
        """The budget per device the memory per device leaves, budget - need [bytes] (negative: does not fit); None
        when either is unknown. (Not the headroom, the share of the device kept free before the budget.)"""
        if self.memory_per_device is None or self.budget_per_device is None:
            return None
        return self.budget_per_device - self.memory_per_device

    @property
    def headroom_bytes(self) -> int | None:
        """Deprecated name of ``budget_left_bytes`` (the same number; it never held the headroom), kept for one
        release."""
        return self.budget_left_bytes

    @property
    def pipeline_parallel(self) -> int:
        """The pipeline stages of each replica (estimate/inference/pipeline.py: the estimate's ``pipeline_stages``);
        1 without pipeline parallelism."""
        stages = self.estimate.details.get("pipeline_stages") if self.estimate is not None else None
        return len(stages) if stages else 1

    def to_dict(self) -> dict[str, Any]:
        return json_data({
            "schema_version": SCHEMA_VERSION, "kind": f"fit-{self.kind}", "model": self.model, "target": self.target,
            "device": self.device, "count": self.count, "instances": self.instances,
            "devices_text": self.devices_text, "tensor_parallel": self.tensor_parallel,
            **({"pipeline_parallel": self.pipeline_parallel} if self.pipeline_parallel > 1 else {}),
            **({"data_parallel": self.data_parallel, "expert_parallel": self.expert_parallel,
                "layout": self.layout_text, "engine_flags": self.engine_flags} if self.data_parallel > 1 else {}),
            "replicas": self.replicas, "engine": self.engine, "weights_format": self.weights_format,
            "tokens_per_second_total": self.tokens_per_second_total,
            "fits": self.fits, "memory_per_device": self.memory_per_device,
            # a pool engine's reservation once started, and by how much it does not start (pool_reserved)
            **(pool_reserved(self.estimate) if self.estimate is not None and self.kind == "inference" else {}),
            "memory_high_per_device": self.memory_high_per_device, "budget_per_device": self.budget_per_device,
            "headroom": self.headroom, "budget_left_bytes": self.budget_left_bytes,
            "headroom_bytes": self.budget_left_bytes,  # deprecated name of budget_left_bytes, kept for one release
            "reasons": list(self.reasons),
            "memory": self.estimate.to_dict() if self.estimate else None,
            "speed": self.speed.to_dict() if self.speed else None, "training_time": self.training_time,
            "assumptions": [a.to_dict() for a in self.assumptions], "warnings": list(self.warnings),
            "details": self.details, "fits_at": self.fits_at,
            **({"fits_if_changed": list(self.fits_if_changed),
                # the lines the text answer prints under them (render/fit_text.py, their one home), as CLI flags
                "fits_if_changed_text": self._fits_if_changed_text()} if self.kind == "training" else {}),
            "cost": self.cost,
            **({"running_sequences": self.details.get("running_sequences")} if self.kind == "inference" else {}),
        })

    def _fits_if_changed_text(self) -> list[str]:
        from ..render.fit_text import fits_if_changed_lines
        return fits_if_changed_lines(self.fits_if_changed)

    def __str__(self) -> str:
        from ..render.fit_text import render_fit
        return render_fit(self)

    def _repr_html_(self) -> str:
        from ..render.notebook import fit_html
        return fit_html(self)


def target_and_count(hardware: str | Device | Instance, count: int | None,
                     hardware_files: Sequence[str | Path] = (), instances: bool = False
                     ) -> tuple[Device, int, str, Instance | None]:
    """(device, devices, target id, instance): ``count`` when given, else the instance's count, else 1. An instance is
    one machine of its own count; with ``instances`` (``fit`` and ``fit --train``: serving replicas, or a training run
    whose collectives cross machines over the instance's network, as a request's resources.instance + count) a whole
    multiple of it is that many instances (:func:`instances_for`)."""
    device, inst_count, target, instance = resolve_target(hardware, hardware_files)
    if count is not None:
        count = int(read_number(count, "count", COUNT))
    n = count or inst_count or 1
    if n < 1:
        raise InputError(f"count must be at least 1, got {n}")
    if inst_count and count and count != inst_count:
        if not instances:
            raise InputError(f"{target} has {inst_count} device{'s' if inst_count != 1 else ''}; drop --count or use "
                             "the device name")
        not_whole = not_whole_instances(target, inst_count, count)
        if not_whole is not None:
            whole = sorted({max(1, count // inst_count), -(-count // inst_count)})
            opts = " or ".join(f"{k * inst_count} ({k} instance{'s' if k > 1 else ''})" for k in whole)
            raise InputError(f"{not_whole}; give {opts}, or the device name {device.id} for {count} devices")
    return device, n, target, instance


def not_whole_instances(target: str, inst_count: int, count: int) -> str | None:
    """Why ``count`` devices of an instance of ``inst_count`` devices are not a whole number of instances (the
    rule ``target_and_count`` applies to a training count: several instances, their collectives over the instance's
    network), or None when they are (``count`` a multiple of ``inst_count``: 2 x a 1-GPU instance, 1 x an 8-GPU one
    for 8). ``recommend --train --gpus N`` lists an instance refused by it as skipped."""
    if count % inst_count:
        return f"{target} has {inst_count} devices: {count} devices are not whole instances"
    return None


def instances_for(count: int, instance: Instance | None) -> int:
    """Instances ``count`` devices of ``instance`` take: count / the instance's devices (a whole multiple, as
    ``target_and_count`` and a plan's resources.nodes require), 1 for a device or a single instance."""
    if instance is None or not instance.device_count:
        return 1
    return max(1, -(-count // instance.device_count))


def devices_text(count: int, device: str, instances: int = 1, instance: str | None = None,
                 copies: bool = True) -> str:
    """The devices of an answer as one line, the one text ``models --fits-on``'s header, the web's "what fits" page
    and ``recommend``'s options (CLI, JSON, web, plan) name their hardware by: ``count`` every device, ``instances``
    the machines they are (:func:`instances_for`; local devices: copies of the group), ``instance`` the catalog
    instance id (None: devices named bare). '16 x h100-sxm (aws-p5.48xlarge, 2 instances)', '8 x h100-sxm
    (aws-p5.48xlarge)', '4 x h100-sxm', '3 x rtx-4090 (3 copies)', a single device by its id alone. ``copies``
    False: the machines do not each hold a copy of the model (one training job over all of them, a plan's
    resources.nodes), so they are named as machines: '64 x h100-sxm (8 machines)'."""
    if instance is not None:
        return f"{count} x {device} ({instance}" + (f", {instances} instances)" if instances > 1 else ")")
    text = device if count == 1 else f"{count} x {device}"
    return text + (f" ({instances} {'copies' if copies else 'machines'})" if instances > 1 else "")


def node_network(instance: Instance | None, network: str | float | None, per_node: int,
                 hardware_files: Sequence[str | Path] = ()) -> tuple[float, str] | None:
    """The network of each machine to the others [B/s] and its words, for the serving traffic that crosses
    machines: ``network`` as ``fit --network`` and a request's resources.network read it (request/quantities.py
    ``parse_network``, the one reader: a catalog port times the ``per_node`` devices of a machine, or a bandwidth per
    machine), else the instance's catalog network, else None (no network known)."""
    if network is not None:
        bw, what = parse_network(network, per_node, hardware_files)
        # (a bandwidth per machine is said once, by the rate that follows the words; a catalog network by its name)
        return bw, "the given network" + ("" if what.endswith("per machine (given)") else f", {what}")
    if instance is not None and instance.network is not None:
        return float(instance.network.base), f"{instance.id}'s network (catalog)"
    return None


def machine_rate(bytes_per_second: float, digits: int = 0) -> str:
    """A network's rate as fit's serving text says it: GB/s from 1 GB/s up (a catalog instance's), else in bits
    (units.py ``format_bits``: a slow fabric's 1 Gb/s is not '0 GB/s')."""
    if bytes_per_second >= 1e9:
        return f"{bytes_per_second / 1e9:.{digits}f} GB/s"
    return format_bits(bytes_per_second)


def machine_network(net: tuple[float, str] | None, tp: int, per_node: int) -> MachineNetwork | None:
    """The network a tensor-parallel group of ``tp`` devices crosses on machines of ``per_node``: the machines it
    spans (:func:`machines_spanned`) and the network of each machine (:func:`node_network`); None within one machine
    or without a known network (then its all-reduces are timed on the link inside a machine, and fit warns)."""
    if tp <= per_node or net is None:
        return None
    return MachineNetwork(machines_spanned(tp, per_node), net[0], net[1])


def pipeline_hop_bandwidth(device: Device, net: tuple[float, str] | None, per_node: int, tp: int, pp: int,
                           link: float | None) -> tuple[float | None, str, float]:
    """One device's bandwidth for a serving pipeline's sends between stages, its words, and each send's latency [s]:
    within one machine the link between its devices (latency not counted); across machines the device's share of
    its machine's network (:func:`node_network`; formulas/network.py eq. (8), as training's point-to-point:
    estimate/model_parallel.py) and one network step of NCCL's tuning model (eq. (14)), without one known the link
    inside a machine (a lower bound of the time, said)."""
    inside = f"the link inside a machine ({link / 1e9:.0f} GB/s)" if link else "no link known (not counted)"
    if tp * pp <= per_node:
        return link, inside, 0.0
    if net is not None:
        share = device_share_of_node_bandwidth(net[0], per_node)
        hop = cross_machine_send_latency()
        return share, (f"one device's share of {net[1]}, {machine_rate(net[0])} / {per_node} "
                       f"({machine_rate(share, 1)}, formulas/network.py eq. 8), "
                       f"{hop * 1e6:.1f} us a send across machines (eq. 14: one network step of NCCL's tuning model, "
                       f"{NCCL_TUNING_SOURCE})"), hop
    return link, (inside + ": the stages span machines and no network between them is known (give an instance "
                  "with one, or a network: --network, resources.network), a lower bound of the sends' time"), 0.0


def link_bandwidth_for(device: Device, instance: Instance | None, hardware_files: Sequence[str | Path] = ()) -> float | None:
    """Per-direction bandwidth between the devices of one replica: the instance's interconnect, else the device's."""
    cat = load_catalog(hardware_files)
    if instance is not None and instance.interconnect:
        ic = cat.interconnect(instance.interconnect)
        if ic is not None:
            return float(ic.bandwidth.base)
    if device.interconnect_bandwidth is not None:
        return float(device.interconnect_bandwidth.base)
    ic = cat.interconnect(device.interconnect)
    return float(ic.bandwidth.base) if ic else None


_SPEED_MEMO: dict[tuple[Any, ...], SpeedEstimate] = {}
# fit_memory's speed.speed_model per (model, device, workload): (the spec and device it was built for, the model)
_SPEED_MODELS: dict[tuple[Any, ...], tuple[ModelSpec, Device, SpeedLayout]] = {}


# _device_speed_key's answers, by the device object they were read from (identity: a Device is frozen, and the memo
# keeps it alive; vm_share_device hands one object per (device, instance) pair): (the device, its key)
_DEVICE_SPEED_KEYS: dict[int, tuple[Device, tuple[Any, ...]]] = {}


def _device_speed_key(device: Device) -> tuple[Any, ...]:
    """What of ``device`` estimate_speed reads, as ``_speed_cached``'s key holds it: its kind, memory bandwidth and
    peak FLOP/s (after the VM share, vm_share_device); the vendor, architecture, compute capability and SM clock
    (llama.cpp's kernel path, stream cap and Hopper mma share) and whether it is a GPU without peer-to-peer (the
    all-reduce path, and the source its assumption quotes): two devices alike in the numbers but not in these are two
    estimates; so are a detected machine of several sockets and a catalog part of the same numbers (a 2-socket 8488C
    under numa isolate has one catalog socket's bandwidth and FLOP/s): its estimate names the numa mode
    (numa_assumption). A function of the frozen device alone: read once per device object (a catalog search times
    each candidate at many loads)."""
    hit = _DEVICE_SPEED_KEYS.get(id(device))
    if hit is not None and hit[0] is device:
        return hit[1]
    p2p = device.peer_to_peer
    key = (device.kind, device.bandwidth, tuple(sorted((k, v.base) for k, v in device.flops.items())), device.vendor,
           device.architecture, device.capability, device.sm_cycles_per_second, peer_to_peer(device),
           (p2p.source, p2p.date) if p2p is not None else None, numa_assumption(device))
    if len(_DEVICE_SPEED_KEYS) >= 1024:
        _DEVICE_SPEED_KEYS.clear()
    _DEVICE_SPEED_KEYS[id(device)] = (device, key)
    return key


def _speed_cached(spec: ModelSpec, device: Device, tp: int, fmt: str, prompt: int, out: int, conc: int, kvd: str,
                  mla: str, link: float | None, states: tuple[str, str] = ("fp32", "fp32"),
                  ubatch: int | None = None, kv_unified: bool | None = None,
                  identical: bool = False, engine: str | None = None,
                  engine_version: str | None = None, nvlink_mesh: bool | None = None,
                  model: Callable[[], SpeedLayout] | None = None,
                  group_size: int = GROUP_SIZE_DEFAULT, other_bytes: int = OTHER_BYTES_DEFAULT,
                  encoder_flops: float = 0.0, attention: str = "sdpa",
                  network: MachineNetwork | None = None, async_scheduling: bool = False,
                  data_parallel: int = 1, expert_parallel: bool = False) -> SpeedEstimate:
    """estimate_speed memoized on what it reads: speed does not depend on memory size, so the memory
    configurations of one Apple chip (and instances sharing a device) share one estimate. ``model``: the
    ``speed.speed_model`` of these arguments but the layout (tp, conc, link, nvlink_mesh), which answers a miss
    as estimate_speed would (fit's candidates share its layout-independent part)."""
    # a serving engine's decode band (and the assumption naming it) depends on the device (ranges.serving_band)
    scope = device.id if engine in R.SERVING_ENGINES else None
    key = (spec, _device_speed_key(device), tp, fmt, prompt, out, conc, kvd, mla, link, states, ubatch,
           kv_unified, identical, engine, engine_version, scope, nvlink_mesh, group_size, other_bytes, encoder_flops,
           attention, network, async_scheduling, data_parallel, expert_parallel)
    hit = _SPEED_MEMO.get(key)
    if hit is None or hit.device != device.id:
        if hit is None:
            if len(_SPEED_MEMO) > 4096:
                _SPEED_MEMO.clear()
            hit = model()(tp, None, conc, link, nvlink_mesh, False, network, data_parallel, expert_parallel) \
                if model is not None else estimate_speed(
                spec, device, tp, weights_format=fmt, prompt_tokens=prompt, output_tokens=out, concurrency=conc,
                kv_dtype=kvd, mla_mode=mla, link_bandwidth=link, state_dtypes=states, ubatch=ubatch,
                kv_unified=kv_unified, identical_sequences=identical, engine=engine, engine_version=engine_version,
                nvlink_mesh=nvlink_mesh, group_size=group_size, other_bytes=other_bytes, encoder_flops=encoder_flops,
                attention=attention, network=network, async_scheduling=async_scheduling,
                data_parallel=data_parallel, expert_parallel=expert_parallel)
            _SPEED_MEMO[key] = hit
        else:  # the texts that name the device (peak_dtype, the stream limits, warnings) name this one
            hit = for_device(hit, device.id)
    return hit


# ``pipelined``'s answers, by the tensor-parallel speed object they were made from (identity: ``_speed_cached``'s,
# which the memo keeps alive) and the rest of its arguments
_PIPELINED_MEMO: dict[tuple[Any, ...], tuple[SpeedEstimate, SpeedEstimate]] = {}


def _pipelined_cached(sp: SpeedEstimate, concurrency: int, pp: int, hidden: int, bandwidth: float | None,
                      bandwidth_why: str, hop_latency: float) -> SpeedEstimate:
    """speed_layout.py ``pipelined`` memoized: one object per answer, so that the memos keyed on a speed's identity
    (``closed_speed_load``, ``layout_grid``: eq. Q13's X(k)) find a pipeline layout's speed again at each step of a
    rate's climb (a new object per call made them recompute every closed load of every pipeline layout)."""
    key = (id(sp), concurrency, pp, hidden, bandwidth, bandwidth_why, hop_latency)
    hit = _PIPELINED_MEMO.get(key)
    if hit is not None and hit[0] is sp:
        return hit[1]
    out = pipelined(sp, concurrency, pp, hidden, bandwidth, bandwidth_why, hop_latency)
    if len(_PIPELINED_MEMO) > 4096:
        _PIPELINED_MEMO.clear()
    _PIPELINED_MEMO[key] = (sp, out)
    return out


def hourly_price(device: Device, count: int, instance: Instance | None = None,
                 kwh_price: float | None = None) -> tuple[float | None, str, str]:
    """(USD per hour, basis, how) of ``count`` x ``device``: an instance's on-demand price; else the device's given
    price x count (a hardware file's ``price``); else, for owned hardware with ``kwh_price``, the power of its TDP
    at full load (formulas/cost.py); else unknown. The one rule fit (serving and training) and recommend price a
    target by; basis is ``on-demand``, ``given``, ``power`` or ``unknown``."""
    if instance is not None:
        price, k = instance.price_per_hour, instances_for(count, instance)
        if price is None:
            return None, "unknown", ""
        return price * k, "on-demand", f"on-demand {instance.region}" + (f", {k} instances" if k > 1 else "")
    if device.price is not None:
        return float(device.price.base) * count, "given", "given"
    if kwh_price is not None and device.tdp is not None:
        return (power_price_per_hour(float(device.tdp.base), kwh_price, count), "power",
                f"power: {device.tdp.raw} W x {count} at ${kwh_price}/kWh")
    return None, "unknown", ""


def vm_share_device(device: Device, instance: Instance | None, assumptions: list[Assumption] | None = None) -> Device:
    """A CPU instance's device with its memory bandwidth and peak FLOP/s scaled to the VM's share of the socket's
    physical cores (efficiency.vm_bandwidth_share: vCPUs / threads_per_core over the socket's cores); the device
    unchanged when there is no instance, it is not a CPU or a number is missing. Speed and training duration on an
    instance are always computed on this device."""
    if instance is None:
        return device
    bw, cores, vcpus = device.memory_bandwidth, device.cores, instance.vcpus
    if device.kind != "cpu" or bw is None or cores is None or vcpus is None:
        return device
    tpc_v = instance.threads_per_core
    tpc = float(tpc_v.base) if tpc_v is not None else 1.0
    share = E.vm_bandwidth_share(float(vcpus.base), float(cores.base), tpc)
    if assumptions is not None:
        how = (f"{tpc:g} threads per core ({tpc_v.source})" if tpc_v is not None
               else "threads_per_core not given: one vCPU counted as one core")
        assumptions.append(Assumption(E.VM_BANDWIDTH_SHARE_NAME, share, True,
                                      f"{vcpus.raw:g} vCPUs, {how}, of a {cores.raw:g}-core socket; "
                                      + E.VM_BANDWIDTH_SHARE_SOURCE))
    if share >= 1.0:
        return device
    hit = _VM_SHARE.get((id(device), id(instance)))
    if hit is not None and hit[0] is device and hit[1] is instance:  # both frozen: the same pair, the same share
        return hit[2]
    why = (f"x {share:.4g} share of the socket's cores ({vcpus.raw:g} vCPUs / {tpc:g} threads per core / "
           f"{cores.raw:g} cores)")

    def part(v: Value) -> Value:
        return replace(v, base=float(v.base) * share, source="derived", derived=f"{v.raw:g} {v.unit} ({v.source}) "
                       + why, note=E.VM_BANDWIDTH_SHARE_SOURCE)

    # Peak FLOP/s is per core x cores: a VM computes with its own cores only (SMT siblings share one core's units).
    shared = replace(device, memory_bandwidth=part(bw), flops={k: part(v) for k, v in device.flops.items()})
    if len(_VM_SHARE) >= 1024:
        _VM_SHARE.clear()
    _VM_SHARE[(id(device), id(instance))] = (device, instance, shared)
    return shared


# vm_share_device's devices, by the (device, instance) pair they were derived from (identity: both are frozen, and
# the memo keeps them alive): one Device per VM, not a new copy per fit of a catalog search or plan
_VM_SHARE: dict[tuple[int, int], tuple[Device, Instance, Device]] = {}


def fit(model: ModelSpec | str, hardware: str | Device | Instance, count: int | None = None, *,
        headroom: float | None = None, engine: str | None = None, weights: str | None = None,
        context: int | None = None, concurrency: int | None = None, output_tokens: int | None = None,
        memory: int | None = None,
        kv_dtype: str | None = None, hardware_files: Sequence[str | Path] = (), speed: bool = True,
        host_device: str | Device | None = None, engine_version: str | None = None, kwh_price: float | None = None,
        tensor_parallel: int | None = None, fits_at: bool | None = None, host_memory: int | str | None = None,
        request_rate: float | None = None, rate_bound: list[float] | None = None, refusal_only: bool = False,
        climb_stops: bool = True, miss: Callable[[FitResult], bool] | None = None,
        iterates: dict[int, FitResult] | None = None, search_stages: bool = True, **workload: Any) -> FitResult:
    """Fit an inference workload on ``count`` x ``hardware`` (a device or instance name; an instance brings its
    own count; ``"detected"`` or a ``Detection``: the detected machine's device, ``device.detected_machine``). ``memory`` overrides the device memory (e.g. the RAM of a CPU machine). The memory, the weight
    format and the verdict are the inference estimate's (``estimate_inference`` with ``memory`` and ``headroom``),
    so ``fit`` and ``infer`` give one answer. A llama.cpp split over several GPUs or with layers or experts on the
    CPU also gets its own decode time (``speed.split_decode``, eq. 8): ``host_device`` (a CPU from the catalog)
    gives the host's memory bandwidth. ``engine_version`` (vllm, sglang): the release whose host work per decode
    step the speed follows (``engines.step_host``; None: the current release). ``host_memory`` (llama.cpp on GPUs):
    the host RAM, checked against the part llama.cpp keeps on the host (-ngl below all layers, --n-cpu-moe: verdict.py
    ``host_memory_verdict``, the check of ``fit --auto``); it does not fit when that part does not. ``speed`` False: no speed estimate
    (``FitResult.speed`` None). ``tensor_parallel``: the degree each replica runs (None: fit's choice, the fastest
    layout that fits at ``concurrency``, ``fit_memory``; with no ``pipeline_parallel`` and no rate either, the
    pipeline layouts too where that does not fit within one machine, ``_fit_at``). The two stages are
    ``fit_memory`` (the verdict) and its
    ``result`` (the speed). When the answer does not fit, ``FitResult.fits_at`` names the format that does
    (estimate/format_search.py ``fits_at``, the one rule, with this fit's workload and ``host_device``: a llama.cpp
    rung with layers on the CPU is timed at that host's bandwidth, as ``fit --weights RUNG`` times it), searched
    when ``fits_at`` is None (the default) and neither ``weights`` nor ``tensor_parallel`` was given (a format the
    user named is answered as asked); True: searched whatever the weights (a plan whose format is not pinned);
    False: not searched (a caller that sizes many candidates). ``request_rate`` [requests/s]: requests arriving at
    random at that rate (a Poisson process, formulas/serving_queue.py eq. Q10) instead of ``concurrency`` in flight:
    the requests in flight are then derived (Little's law, eq. Q10c), the memory sized and the decode step timed at
    them (estimate/serving_load.py ``rate_fixed_point``; llama.cpp's slots at the tail of them, ``slots_for``); each
    replica takes its share of the rate; where vLLM / SGLang admit a bounded number at once, the wait for
    admission (a load-dependent server, eq. Q13, ``admission_queued``) is in the TTFT and the requests in flight. A rate at or above the
    server's capacity (eq. Q10a), past the decode's (no fixed point of eq. Q10c: ``sustained_rate`` named) or at or
    above what the admitted sequences serve (X(c), eq. Q13) is refused (FieldError on request_rate: no steady
    state, no mean). With no ``tensor_parallel`` at a rate the layout is the quickest of those within a machine at its
    own answer (``rate_layout_seconds``), its climb that layout's own, so the answer is ``fit --tp``'s for it; where
    every layout refuses the rate, the refusal on the one that carries the most (``most_carried``). ``request_rate`` is read as the CLI reads it ('16' as 16: ``read_request_rate``).
    ``rate_bound``: a caller's list that, where the rate is refused by the server's capacity (eq. Q10a) already at one
    request in flight, gets that capacity [requests/s, all replicas] appended: on a layout that does not depend on the
    rate (one tensor-parallel degree), every rate at or above it is refused alike, since the fit at one request in
    flight differs only in the rate (the copies search of ``recommend`` skips the shares past it, format_search.py
    ``pick_format``). Where llama.cpp's slots (``slots_for``) at the fixed point do not fit though one request's
    do, the rate is refused by the memory's ceiling (``memory_refusal``), with its capacity and remedy as every
    other refusal of a rate (rate_capacity.py ``over_capacity``), not with the plain memory verdict.
    ``refusal_only`` (a search that reads a refusal of the rate only as one, never its text: recommend's copies
    below MAX_REPLICAS): a rate this deployment does not carry raises its RateOverloadError instead of the answer
    with its ceilings (rate_capacity.py ``over_capacity``, not computed), and, with ``climb_stops`` (a caller whose
    deployment has one tensor-parallel degree: the layout, and so the admitted count, read no C), the climb to eq.
    Q10c's fixed point stops at its first iterate where the admitted sequences are certain to refuse the rate (eq.
    Q13's X(c) at or below each replica's share, which reads no C: ``_admission_certain``), whatever the replicas.
    ``miss``
    (with ``refusal_only`` and ``climb_stops``): a test of an answer that, once true at some C, is true at every larger C (memory that does not
    fit, a per-user decode speed below a floor: both worsen with the sequences in flight); where it holds at a C
    known to be at or below the fixed point, with more requests in flight than replicas and no admission bound,
    RateMissCertain carries that answer instead of the climb's end: the answer at the fixed point misses too (or the
    rate is refused: no fixed point). ``iterates``: a caller's empty dict that gets every fit at the rate the climb
    made (C in flight in all -> the fit at C: its iterates, admission's fit at A), each before any stop:
    ``rate_layout_seconds`` keeps each layout's, whose first iterate ``_refused_on_every_layout`` reads, and whose
    fits the unpinned climb takes in place of its own where it takes that layout (``replay``); handed back pre-filled
    by ``most_carried`` to that layout's full pinned fit (the same fits: no climb made anew).
    ``search_stages`` False: tensor parallelism only where no stages are given (the layout rule's first answer,
    ``with_pipeline_layouts``' ``first``); True (the default), with no degree and no stages given, the pipeline
    layouts are tried by that one rule where tensor parallelism does not fit within a machine, at a concurrency
    (``_fit_at``) and at a request rate alike (``_rate_with_stages``)."""
    hardware, count, hardware_files = detected_machine(hardware, count, hardware_files)  # 'detected', a Detection
    kw: dict[str, Any] = dict(headroom=headroom, engine=engine, weights=weights, context=context, output_tokens=output_tokens,
              memory=memory, kv_dtype=kv_dtype, hardware_files=hardware_files, host_device=host_device,
              engine_version=engine_version, kwh_price=kwh_price, tensor_parallel=tensor_parallel,
              host_memory=host_memory, fits_at=fits_at)
    if request_rate is None:
        return _fit_at(model, hardware, count, speed, concurrency, None, workload, **kw, search_stages=search_stages)
    rate = read_request_rate(request_rate)
    if concurrency is not None:
        raise rate_and_concurrency()
    if not speed:
        raise FieldError("request_rate", "request_rate needs the speed estimate (the requests in flight follow "
                         "from the time each is served)")
    if search_stages and tensor_parallel is None and workload.get("pipeline_parallel") is None:
        plan = rate_stage_options(model, hardware, count, rate, workload, kw)
        if plan is not None:  # fit's own layout at the rate: the pipeline layouts by the one rule, as without a rate
            return _rate_with_stages(model, hardware, count, rate, workload, kw, plan, dict(
                rate_bound=rate_bound, refusal_only=refusal_only, climb_stops=climb_stops, miss=miss,
                iterates=iterates))

    def in_flight(r: FitResult) -> float | None:
        """The slots the answer's load needs in all (eq. Q10c's mean in flight, or its tail where the engine's
        slots are sized from it: ``serving_load.slots_for``)."""
        load = r.speed.load if r.speed is not None else None
        if not load or "in_flight" not in load:
            raise no_rate_load(r)
        return slots_for(r.engine, float(load["in_flight"])) * r.ranks

    def served(r: FitResult) -> float | None:  # the rate the answer's C in all sustain (the refusal's capacity),
        x = sustained_rate(r.speed, r.engine, sized=True)  # on the statistic ``in_flight`` sizes (slots_for)
        return None if x is None else x * r.ranks

    # the pinned fits of the layout this climb takes (``rate_layout_seconds``' quickest that carries the rate,
    # ``rate_take``: taken at every C, whether or not it fits there): its fit at each C is the pinned one's layout,
    # estimate and speed, so its requests in flight, its admission and its stops read the same as that fit's; the
    # climb reads those in place of its own fits, and makes its own only where it answers (``stood``)
    replay: dict[int, FitResult] = {}
    stood: dict[int, int] = {}  # id of a pinned fit read in place of this climb's -> its C
    layouts = None
    climbs: dict[int, dict[int, FitResult]] = {}  # each layout's pinned climb (every layout within)
    if tensor_parallel is None:  # the layout: the quickest at its own fixed point (``rate_layout_seconds``)
        layouts = rate_layout_seconds(model, hardware, count, rate, workload, kw, climbs)
        if layouts is not None and any(math.isfinite(w) for w in layouts.values()):
            kw["rate_layouts"] = layouts
            if miss is None:  # the quickest layout's pinned fits, each the one this climb makes at its C
                replay = climbs.get(quickest_first(layouts)[0], {})
        elif layouts is not None:  # refused on every layout: where admission refuses whatever layouts the climb
            # takes, that climb is not run (its refusal is certain); its answer is then the refusal (refusal_only) or
            # ``most_carried`` (the except below), which reads nothing of the climb
            refused = _refused_on_every_layout({t: c[1] for t, c in climbs.items() if 1 in c}, rate)
            if refused is not None:
                if refusal_only:
                    raise refused
                return most_carried(model, hardware, count, rate, workload, kw, layouts, climbs)
    # C in flight -> the fit at the rate (the climb's, admission's)
    fitted: dict[int, FitResult] = iterates if iterates is not None else {}
    # C at or below every C rate_fixed_point may answer at (an f(C') <= C' with f monotone): 1, and f of each such C
    # (Kleene's iterates from the bottom)
    below = {1}

    def at(c: int) -> FitResult:
        if c not in fitted:
            fitted[c] = _fit_at(model, hardware, count, speed, c, rate, workload, **kw)
        return fitted[c]

    def run(c: int) -> FitResult:
        known = replay.get(c)
        if known is not None and c not in fitted:
            r = known
            stood[id(r)] = c
        else:
            try:
                r = at(c)
            except RateOverloadError as e:  # (rate_fixed_point's first run is at one request in flight)
                if rate_bound is not None and c == 1 and e.server_capacity is not None:
                    rate_bound.append(e.server_capacity)
                raise
        if refusal_only and climb_stops and c in below:
            flight = in_flight(r)
            if flight is not None and math.isfinite(flight):
                below.add(max(1, math.ceil(flight)))
            if c == 1:  # the climb's first iterate: admission's refusal reads no C (``_admission_certain``)
                refused = _admission_certain(r, rate, miss is None)
                if refused is not None:
                    raise refused
            if miss is not None and c > r.ranks and _admission_bound(r) is None and miss(r):
                raise RateMissCertain(r)
        return r

    try:
        try:
            r = rate_fixed_point(run, in_flight, rate, served, said=lambda r: in_flight_said(r.engine))
        except RateCapacityError as e:
            raise RateOverloadError(str(e), e.capacity, e.in_flight, kind="decode") from None
        if id(r) in stood:  # the answer: this climb's own fit at that C
            r = at(stood[id(r)])
        r = admission_queued(r, rate, at)
        if _holds_none(r):
            # a pool engine whose pools hold no sequence serves no rate, whatever its running cap queues (a fixed
            # point behind SGLang's eq. 4 cap, 2048, is no steady state: nothing runs)
            raise pool_holds_none(r)
        if not r.fits and r.engine in SLOTS_FROM_CONCURRENCY and at(1).fits:
            raise memory_refusal(r, rate)
    except RateOverloadError as e:  # an answer about the hardware: it does not carry the rate (exit 1, not 2)
        if refusal_only:  # refused; its ceilings and text unread
            raise
        if layouts is not None and "rate_layouts" not in kw:  # refused on every layout: the one carrying the most
            return most_carried(model, hardware, count, rate, workload, kw, layouts, climbs)
        # (tensor parallelism only, as the rate's own layouts: ``rate_layout_seconds``)
        pinned: dict[str, Any] = {**kw, "fits_at": False, "search_stages": False}
        done: dict[int, FitResult] = {}

        def closed(c: int, timed: bool) -> FitResult:  # the deployment at c in flight, no rate (its ceilings)
            if c not in done or timed and done[c].speed is None:  # (a timed fit serves an untimed ask)
                done[c] = _fit_at(model, hardware, count, timed, c, None, workload, **pinned)
            if pinned.get("tensor_parallel") is None and done[c].count > 1:  # every ceiling of the one layout
                pinned["tensor_parallel"] = done[c].tensor_parallel  # the first fit took (one device: one layout)
            return done[c]
        return over_capacity(rate, e, closed)
    r = _rate_queue_details(_derived_concurrency(r, rate))
    said = rate_warnings(r, rate)
    return replace_fields(r, warnings=(*r.warnings, *said.values()), details={**r.details, "rate_warnings": said}) \
        if said else r


class RateOverloadError(FieldError):
    """A request rate this deployment cannot carry (no steady state: eq. Q10a's server capacity, the decode's
    capacity of eq. Q10c, or the engine's admission): ``capacity`` [requests/s] of all replicas (None: unknown) and the
    ``in_flight`` requests of all replicas the memory is shown at. ``fit`` answers it as not fitting (rate_capacity.py ``over_capacity``),
    as a memory that does not fit, never as bad input."""

    def __init__(self, message: str, capacity: float | None, in_flight: int, server: bool = False,
                 kind: str = "admission") -> None:
        super().__init__("request_rate", f"request_rate: {message}")
        self.detail, self.capacity, self.in_flight = message, capacity, in_flight
        # which ceiling refused it (estimate/rate_capacity.py): server (eq. Q10a), decode (eq. Q10c), admission (Q12)
        self.kind = "server" if server else kind
        # eq. Q10a's bound (1 / max(prefill, s H) per replica): the capacity every rate at or above which is refused
        # alike by the same answer; None for the decode's capacity and the engine's admission (load-dependent)
        self.server_capacity = capacity if server else None


def memory_refusal(r: FitResult, rate: float) -> RateOverloadError:
    """The refusal of a rate whose slots do not fit though one request's do (an engine that sizes its slots from the
    requests in flight, ``SLOTS_FROM_CONCURRENCY``: llama-server gives each of its -np slots its own KV stream, and a
    request that finds every slot busy waits, tools/server/server-context.cpp process_single_task "no slot is
    available, defer task"): the rate needs ``r``'s slots, more than the device holds, so it is the memory's ceiling
    of the rate (rate_capacity.py), shown at those slots, not the plain memory verdict."""
    slots = int(r.details.get("concurrency", 1))
    return RateOverloadError(f"at {rate:g} requests/s the {in_flight_said(r.engine)} it needs ({slots:,} in all) do "
                             "not fit in memory", None, slots, kind="memory")


class RateMissCertain(Exception):  # noqa: N818 (an answer, not an error: fit's ``miss``)
    """``fit(miss=)``'s answer: ``result``, an answer at a C at or below the fixed point that already misses, with
    more requests in flight than replicas; the fixed point's answer misses too, or the rate is refused."""

    def __init__(self, result: FitResult) -> None:
        super().__init__("misses at the rate")
        self.result = result


def _admission_bound(r: FitResult) -> int | None:
    """The sequences a replica admits at once that ``admission_queued`` reads (eq. R1's bounds: the running cap,
    the pool's room), None where it has none (or a pool of none, the memory verdict's)."""
    return admitted_per_replica(r.estimate.details) if r.estimate is not None else None


def _holds_none(r: FitResult) -> bool:
    """Whether ``r``'s pools hold no sequence of its context (eq. R1's room 0: the verdict's, a pool engine's)."""
    return r.estimate is not None and r.estimate.details.get("max_concurrency_at_context") == 0


def pool_holds_none(r: FitResult) -> RateOverloadError:
    """The refusal of any rate on a deployment whose pools hold no sequence (``_holds_none``)."""
    return RateOverloadError("its pool admits no sequence", 0.0, r.ranks)


def _admission_certain(r: FitResult, rate: float, unmissed: bool = True) -> RateOverloadError | None:
    """The refusal by the admitted sequences (eq. Q13) that ``fit`` at ``rate`` is certain to end in, read off
    ``r``, any iterate of its climb to eq. Q10c's fixed point (``rate_fixed_point``) on a deployment whose layout
    reads no C (one tensor-parallel degree: ``fit``'s ``climb_stops``); None where it is not certain. For any number
    of replicas R:

    1. Every fit of the climb, at any C, has the same engine, R, A (``_admission_bound``: the running cap and the
       pool's room, eq. R1's bounds, sized from the engine's settings and the memory, not from the sequences in
       flight) and X(k) at eq. Q13's grid (``closed_throughputs`` in its load: ``fit_memory``'s ``layout_grid``, one
       replica's closed load at exactly k running, k up to A, read from the layout, format, prompt, KV dtype and
       prefill chunk, none of them C).
    2. ``admission_queued`` on the climb's answer r* times the wait on r*, or past A on the fit at A; either way it
       refuses exactly where eq. Q13 on that grid at each replica's share rate / R does (``admission_queue`` reads
       the grid and the rate only: ``admission_over_capacity``). That refusal is returned here, in r's words (the
       caller reads a refusal only as one, never its text: ``refusal_only``).
    3. Where the climb does not reach ``admission_queued``, it is refused before: a later iterate past eq. Q10a's
       server capacity, or no fixed point (the decode's capacity). A later iterate has a load too (its prefill and
       decode exist on the device whatever C: ``q5_inputs``) and an A (1.), so neither ``no_rate_load`` nor
       ``miss`` (which needs no A) ends it.

    So the fit is refused whatever C* the climb would reach: every iterate after ``r`` is redundant (this replaces
    a stop at ceil(mean in flight) > A, one replica only, which read the same X(c) from the fit at A). Likewise
    where the pools hold no sequence (``_holds_none``: the room of 1., no A, so ``admission_queued`` passes the
    answer and ``fit`` refuses it after the climb, ``pool_holds_none``), provided ``unmissed``: no ``miss`` asked,
    which with no A could end the climb first. An engine whose slots are the tail of the requests in flight
    (``SLOTS_FROM_CONCURRENCY``) is left out: its memory is sized at them."""
    if r.engine in SLOTS_FROM_CONCURRENCY or r.speed is None or not r.speed.load:
        return None
    if _holds_none(r):
        return pool_holds_none(r) if unmissed else None
    admitted = _admission_bound(r)
    closed = r.speed.load.get("closed_throughputs")
    if admitted is None or not closed:
        return None
    over = admission_over_capacity(closed, rate / r.ranks)
    return None if over is None else admission_refusal(r, admitted, over)


def no_rate_load(r: FitResult) -> FieldError:
    """Why a fit at a request rate has no open load to follow: the engine does not batch continuously, or its
    speed has no prefill or decode (a llama.cpp split's decode needs the host's memory bandwidth: host_device)."""
    sp = r.speed
    if r.engine in ENG.PREFILL_SCHEDULING and sp is not None and sp.output_tokens and sp.decode is None:
        return FieldError("request_rate", "request_rate needs the decode speed, and this llama.cpp layout (layers "
                          "or experts on the CPU) has none without the host's memory bandwidth: give host_device "
                          "(a CPU from the catalog, whose memory bandwidth times those layers)", ("host_device",))
    return rate_needs_continuous_batching(f"this answer runs {r.engine}")


def rate_needs_continuous_batching(why: str) -> FieldError:
    """The one wording of a request rate refused on an engine that does not batch continuously (not in
    ``ENG.PREFILL_SCHEDULING``, read here so an engine added there is named by every surface): ``fit``'s
    (:func:`no_rate_load`) and recommend's (``engine_serves_no_rate``), ``why`` the answer's own words."""
    return FieldError("request_rate", f"request_rate needs an engine that batches continuously "
                      f"({', '.join(ENG.PREFILL_SCHEDULING)}) with a prefill and decode estimate; {why}")


def _rate_target(model: ModelSpec | str, hardware: str | Device | Instance, count: int | None, rate: float,
                 workload: dict[str, Any], kw: dict[str, Any]) -> tuple[ModelSpec, str, Device, int, int] | None:
    """What ``rate_layout_seconds`` and ``rate_stage_options`` choose among at ``rate``: (the model, the engine it
    takes (``_rate_engine``), the device, the device count, the machine size), or None where there is no choice (one
    device) or no engine (the climb refuses that with its own line)."""
    device, n, _, instance = target_and_count(hardware, count, kw.get("hardware_files", ()), instances=True)
    if n < 2:
        return None
    spec = spec_of(model)
    eng = _rate_engine(spec, hardware, count, rate, workload, kw)
    if eng is None:
        return None
    return spec, eng, device, n, serving_machine_size(instance, workload.get("gpus_per_node"), n)


def rate_layout_seconds(model: ModelSpec | str, hardware: str | Device | Instance, count: int | None, rate: float,
                        workload: dict[str, Any], kw: dict[str, Any],
                        climbs: dict[int, dict[int, FitResult]] | None = None) -> dict[int, float] | None:
    """At a request rate with no degree given, each tensor-parallel layout within one machine
    (``tensor_parallel_options``) timed at its own answer: the fit pinned to it at the rate (its least fixed point of
    eq. Q10c, ``rate_fixed_point``, and the wait for admission, eq. Q13) and that answer's mean request seconds
    (TTFT + the wait + the output's steps: in flight / rate, Little's law); infinite where it does not fit or the rate
    is refused on it. ``fit`` then climbs ranking the layouts by these (``quickest_first``), so the layout it takes is
    the quickest at the load it will carry, and its answer is the one ``fit --tp`` gives for that layout: ranking
    each layout at the climb's C instead (its own f(C) at another layout's iterate) made the unpinned climb pass
    through other layouts' iterates and stop above the taken layout's least fixed point (probe15 D4: Qwen3-235B-A22B
    fp8, 8 x H100, 32k, 1 request/s took TP 4 x 2 at 5 in flight, 75.3 tokens/s per user, where TP 4 x 2 pinned
    holds at 4, 97.3). Every layout infinite: the rate is refused on each, and ``fit`` answers the refusal on the one
    that carries the most (``most_carried``). The layouts are those within a machine even where only one is (N
    one-device instances: N replicas, review35 D1), so a degree across machines is taken only where every layout
    within refuses the rate (the unpinned climb, or ``most_carried``'s rate-less choice): the unpinned climb took TP 2..8 across the instances
    at each iterate where TP 1 did not fit there, and answered with an in-flight count from that other layout
    (llama-3.1-8b fp8, 8 x aws-g6e.xlarge, 20 requests/s: DOES NOT FIT, "concurrency given as 472", where TP 1 x 8
    fits at 340), so recommend's copies of one instance (``_rate_copies``) and ``fit --count N`` on them answered
    two layouts. None where there is no choice (one degree at all, a llama.cpp split, one device).
    ``climbs``: a caller's dict that gets, where every degree of ``tensor_parallel_options`` is within a machine,
    each degree's pinned fits at the rate (``fit``'s ``iterates``: C in flight -> the fit at C)."""
    target = _rate_target(model, hardware, count, rate, workload, kw)
    if target is None:
        return None  # (the climb below refuses a rate no engine carries with its own line)
    spec, eng, device, n, per_node = target
    layout = serving_layout(eng, device, n, per_node)
    if layout.split:
        return None
    # stages (data-parallel ranks) given: each degree's replicas of t x pp (x dp) devices, as ``_make_fit_setup``
    # chooses among (a data-parallel fit at a rate offered every degree of the count: TP 4 x DP 4 on 8 devices)
    pp = int(workload.get("pipeline_parallel") or 1) * int(workload.get("data_parallel") or 1)
    if n % pp:
        return None  # (fit refuses it with its own line)
    options = layout.tensor_parallel_options(spec, n // pp, per_node, served_format(spec, eng, kw.get("weights")),
                                             workload.get("group_size"), bool(workload.get("expert_parallel")))
    within = [t for t in options if t <= per_node]
    if len(options) < 2:
        return None
    every = len(within) == len(options)  # (fit's climb takes a degree across machines only where none within fits)
    seconds: dict[int, float] = {}
    for t in within:
        its: dict[int, FitResult] = {}
        if climbs is not None and every:
            climbs[t] = its
        try:
            r = fit(spec, hardware, count, **{**kw, "tensor_parallel": t, "fits_at": False}, request_rate=rate,
                    refusal_only=True, iterates=its, **workload)
        except (RateOverloadError, RateMissCertain):
            seconds[t] = math.inf
            continue
        load = r.speed.load if r.speed is not None else None
        seconds[t] = (float(load["request_seconds"]) if r.fits and load and "request_seconds" in load
                      else math.inf)
    return seconds  # (refused on every layout, all infinite: ``fit`` answers on the one carrying most, ``most_carried``)


def most_carried(model: ModelSpec | str, hardware: str | Device | Instance, count: int | None, rate: float,
                 workload: dict[str, Any], kw: dict[str, Any], layouts: dict[int, float],
                 climbs: dict[int, dict[int, FitResult]] | None = None) -> FitResult:
    """``fit``'s answer at a rate that every layout within a machine refuses (``rate_layout_seconds`` all infinite):
    the refusal on the layout whose capacity (the least of its ceilings, rate_capacity.py ``over_capacity``) is the
    most, a tie to the smaller degree, as ``fit --tp`` answers for that layout, its degree stated as chosen. Taking
    the climb's first layout instead showed a smaller capacity than another layout has (probe22 D4: llama-3.1-8b,
    1024 x H100 at 1e7 requests/s refused on TP 8 x 128, 4.46e3 requests/s, where TP 1 x 1024 carries 6.94e3).
    Where no layout carries any rate (every capacity 0 or unknown: the memory fits on none), capacity ranks nothing,
    so the layout is the one ``fit`` takes without a rate (``fit_memory``: none fits, the largest degree, the least
    memory each device holds), as ``fit --tp`` answers for it at the rate; the tie to the smaller degree took TP 1,
    the furthest from fitting (review30 D1: llama-3.1-405b on aws-p5.48xlarge at 1 request/s answered TP 1 x 8, over
    by 689.57 GiB, where the rate-less fit and ``--tp 8`` are over by 28.53 GiB).
    ``climbs``: each layout's pinned fits at the rate that ``rate_layout_seconds`` made (the same fits, pinned to that
    layout with ``fits_at`` False: its refusal-only climb differs only in where it stops), handed to that layout's
    fit here (``fit``'s ``iterates``) so that it climbs them again without making them anew."""
    pinned = {**kw, "fits_at": False}
    answers = {t: fit(model, hardware, count, **{**pinned, "tensor_parallel": t}, request_rate=rate,
                      iterates=dict((climbs or {}).get(t, {})), **workload) for t in sorted(layouts)}

    def carried(t: int) -> float:
        cap = answers[t].details.get("rate_capacity")
        return -1.0 if cap is None else float(cap)
    n = count_of(answers[min(answers)])
    pp = int(workload.get("pipeline_parallel") or 1)  # the stages of each replica (layout_words)
    dp, ep = int(workload.get("data_parallel") or 1), bool(workload.get("expert_parallel"))  # its ranks
    rateless: str | None = None  # fit's own why of its rate-less layout, where it decides
    if any(carried(t) > 0 for t in answers):
        tp = max(answers, key=lambda t: (carried(t), -t))
        others = "; ".join(f"{layout_words(t, n, pp, dp, ep)}: " + (f"{carried(t):.3g}" if carried(t) >= 0 else "unknown")
                           for t in sorted(answers, key=lambda t: (-carried(t), t)) if t != tp)
        how = (f"{layout_words(tp, n, pp, dp, ep)}: carries the most of the layouts, about {carried(tp):.3g} requests/s, though "
               f"not {rate:g} (every layout refuses it; each one's capacity, requests/s: {others}); ") if others else (
               f"{layout_words(tp, n, pp, dp, ep)}: the one layout within a machine, about {carried(tp):.3g} requests/s, not "
               f"{rate:g} (at a rate fit takes the layouts within a machine; a degree across machines only where "
               "every layout within refuses the rate); ")
    else:  # fits on no layout: fit's rate-less choice of layout (its memory verdict alone decides)
        free = fit(model, hardware, count, **pinned, **workload, search_stages=False)  # (its degree is pinned below)
        tp = free.tensor_parallel
        if tp not in answers:
            answers[tp] = fit(model, hardware, count, **{**pinned, "tensor_parallel": tp}, request_rate=rate,
                              **workload)
        rateless = next((a.why for a in free.assumptions if a.name == "tensor_parallel"), "")
        how = (f"{layout_words(tp, n, pp, dp, ep)}: no layout carries any rate, so none carries {rate:g} (each one's capacity "
               f"is 0 or unknown: it fits on none); the layout fit takes without a rate, ")
    r = answers[tp]
    said = tuple(replace(a, default=True, why=how + (a.why.removeprefix("given; ") if rateless is None else rateless))
                 if a.name == "tensor_parallel" else a for a in r.assumptions)
    return replace(r, assumptions=said)


class RateLayouts(NamedTuple):
    """The layouts ``fit`` at a request rate may take beyond tensor parallelism where its layout is its own choice
    (``rate_stage_options``), as ``fit_memory`` offers them to a rate-less fit (``MemoryFit``): the pipeline stages
    (``pipeline_options``), the data-parallel degrees with expert parallelism (``expert_options``), the machine size
    they are judged by and eq. TP5's line where it took a tensor-parallel degree out (``block_skipped``, else empty):
    all read by ``with_pipeline_layouts``, the one rule."""

    stages: tuple[int, ...]
    experts: tuple[int, ...]
    per_node: int
    tp_refused: str = ""


def rate_stage_options(model: ModelSpec | str, hardware: str | Device | Instance, count: int | None, rate: float,
                       workload: dict[str, Any], kw: dict[str, Any]) -> RateLayouts | None:
    """The layouts ``fit`` at ``rate`` may take beyond tensor parallelism (``RateLayouts``) where its layout is its
    own choice: of the layout on the engine it takes (``_rate_engine``), the stages and (no data-parallel ranks or
    expert parallelism given) the expert-parallel degrees ``fit_memory`` offers a rate-less fit (``MemoryFit.stages``,
    ``MemoryFit.experts``, ``tp_refused``), so the rate path and the concurrency path try the same layouts by the one
    rule (``with_pipeline_layouts``); None where there are none. Before, the rate tried no data-parallel layout:
    MiniMax-M2.7 on 8 x H100 (vLLM, eq. TP5 refusing TP 8) took TP 4 x 2 at any rate where at 64 in flight fit
    takes TP 2 x DP 4 (EP 8)."""
    target = _rate_target(model, hardware, count, rate, workload, kw)
    if target is None:
        return None  # (the climb refuses a rate no engine carries with its own line)
    spec, eng, device, n, per_node = target
    layout = serving_layout(eng, device, n, per_node)
    stages = tuple(pipeline_options(spec, layout, n))
    own_ranks = workload.get("data_parallel") is None and workload.get("expert_parallel") is None
    experts = tuple(expert_options(spec, layout, n, per_node)) if own_ranks else ()
    if not stages and not experts:
        return None
    skipped = None if layout.apart or layout.split else block_skipped(
        spec, n, eng, served_format(spec, eng, kw.get("weights")), workload.get("group_size"))
    return RateLayouts(stages, experts, per_node, skipped or "")


def _rate_with_stages(model: ModelSpec | str, hardware: str | Device | Instance, count: int | None, rate: float,
                      workload: dict[str, Any], kw: dict[str, Any], plan: RateLayouts,
                      asks: dict[str, Any]) -> FitResult:
    """``fit`` at ``rate`` with no degree and no stages given: the layout rule of a fit without a rate
    (``with_pipeline_layouts``, ``_fit_at``), its ``first`` the tensor-parallel answer at the rate (``fit`` with
    ``search_stages`` False: ``rate_layout_seconds``' quickest degree), each stage count P of ``plan``
    (``rate_stage_options``) `fit --pp P --request-rate R` and each expert-parallel degree D `fit --dp D
    --enable-expert-parallel --request-rate R` (where eq. TP5 took a degree out or tensor parallelism does not fit
    within a machine, as without a rate), the fitting ones ranked by their mean request seconds
    (``rate_request_seconds``), each data-parallel layout timed per rank at its share of the rate with its own KV
    room per rank (eq. EP3: ``FitResult.ranks``). Before, the rate path tried tensor parallelism only, so Qwen3.5-122B-A10B FP8 on
    2 x H100 at 256k was DOES NOT FIT at any rate (TP 1 x 2 replicas) where `fit` without a rate takes TP 1 x PP 2.
    ``asks``: the caller's ``rate_bound``, ``refusal_only``, ``climb_stops``, ``miss`` and ``iterates``, which
    the tensor-parallel answer takes; a stage count is asked ``refusal_only`` alike (its refusal raised, skipped
    here as a refusal of that layout), and where the tensor-parallel answer is refused (``refusal_only``) and no
    stage count fits, that refusal is raised. Where async_scheduling takes the stages out (vLLM 0.10-0.14), an
    answer that does not fit says so (``async_stages_note``), as without a rate."""
    stages, experts, per_node, tp_refused = plan
    args = {**kw, **workload, "speed": True, "request_rate": rate}
    refused: Exception | None = None
    try:
        tp_only = fit(model, hardware, count, **args, **asks, search_stages=False)
    except (RateOverloadError, RateMissCertain) as e:  # (refusal_only: the refusal itself, its text unread)
        tp_only, refused = None, e
    first = answered(tp_only, per_node)._replace(tp_refused=tp_refused) if tp_only is not None else None

    tried: list[MemoryFit] = []  # each stage count's answer at the rate, as with_pipeline_layouts asked it

    def staged(p: int, fields: dict[str, Any] = args) -> MemoryFit:
        m = answered(fit(model, hardware, count, **{**fields, "fits_at": False, "pipeline_parallel": p},
                         refusal_only=bool(asks["refusal_only"]), climb_stops=False), per_node)
        if fields is args:
            tried.append(m)
        return m
    def expert_fit(d: int) -> MemoryFit:
        m = answered(fit(model, hardware, count, **{**args, "fits_at": False, "data_parallel": d,
                                                     "expert_parallel": True},
                         refusal_only=bool(asks["refusal_only"]), climb_stops=False), per_node)
        tried.append(m)
        return m
    mem = with_pipeline_layouts(first, per_node, stages, staged, experts, expert_fit, rank=rate_request_seconds)
    if mem is None or mem is not first and not mem.fits:
        if refused is not None:
            raise refused
    ranked = "has the shortest mean request time at this rate"
    if mem is not None and not mem.fits and refused is None:
        # no layout carries the rate: the one whose memory fits with the most capacity (``most_carried``'s rule,
        # across the stage counts too), so the answer names the rate, not the memory, as what stops it (review41 D2:
        # Qwen3.5-122B-A10B FP8, 2 x H100, 256k at 0.2 requests/s said "fix the memory first" of TP 2 where
        # TP 1 x PP 2 starts and carries about 0.069 requests/s)
        pool = [m for m in ([first] if first is not None else []) + tried if m.refusal is None]
        best = max(pool, key=lambda m: (_capacity(m.result(True)), -m.result(True).pipeline_parallel,
                                        -m.result(True).data_parallel), default=None)
        if best is not None and _capacity(best.result(True)) > 0 and best is not mem:
            mem, ranked = best, (f"carries the most of the layouts, about {_capacity(best.result(True)):.3g} "
                                 f"requests/s, though not {rate:g} (every layout refuses the rate)")
    r = mem.result(True) if mem is not None else None
    if r is None:  # (every stage count refused by the estimate, and the tensor-parallel answer raised: above)
        raise FieldError("request_rate", "no layout answers this rate")
    if mem is not first and (r.pipeline_parallel > 1 or r.data_parallel > 1):
        r = stages_chosen(r, per_node, ranked, tp_refused=tp_refused)
    why = async_pipeline_refusal(r.engine, kw.get("engine_version")) if workload.get("async_scheduling") else None
    if why is not None and not r.fits:
        plain = {**args, "async_scheduling": False}
        r = async_stages_note(r, stages, why, with_pipeline_layouts(
            None, per_node, stages, lambda p: staged(p, plain), rank=rate_request_seconds))
    return r


def _capacity(r: FitResult) -> float:
    """The requests/s ``r``'s layout carries at most (rate_capacity.py ``over_capacity``'s least ceiling, the figure
    ``most_carried`` ranks layouts by), 0 where its memory fits no request or it is not known."""
    cap = r.details.get("rate_capacity")
    return float(cap) if cap is not None else 0.0


def answered(r: FitResult, per_node: int) -> MemoryFit:
    """A finished answer ``r`` as the memory stage ``with_pipeline_layouts`` ranks (its verdict, the engine's
    refusal, its degree; ``result`` gives ``r`` back)."""
    refusal = r.estimate.details.get("engine_refusal_reason") if r.estimate is not None else None
    return MemoryFit(r.fits, lambda _speed: r, refusal, r.tensor_parallel, (), per_node)


def count_of(r: FitResult) -> int:
    """The devices of ``r``'s deployment (its replicas x tensor-parallel degree x pipeline stages x data-parallel
    ranks)."""
    return r.replicas * r.tensor_parallel * r.pipeline_parallel * r.data_parallel


def _rate_engine(spec: ModelSpec, hardware: str | Device | Instance, count: int | None, rate: float,
                 workload: dict[str, Any], kw: dict[str, Any]) -> str | None:
    """The engine ``fit`` at ``rate`` takes (its memory stage at one request, ``fit_memory``: its checks and engine
    rule), None where that stage refuses (InputError). The rate reaches that stage only through the layouts' ranking
    (``rate_seconds``, which answers any InputError of the rate as infinite seconds) and the assumption naming it, so
    the engine and the refusal are the same at every rate: kept per (model, hardware, count, fields) for the process
    (``_RATE_ENGINE``, cleared by ``clear_caches``), one stage for the rates a copies search asks of one deployment
    (recommend's ``_rate_copies``: 414 stages -> 79 at 20/s on the bench)."""
    args = {k: v for k, v in kw.items() if k != "fits_at"}
    key: tuple[Any, ...] | None
    try:  # hardware_files keyed as load_catalog keys them (paths and modification times: an edited file is read
        # again; a list, the CLI's, was unhashable and kept every CLI search off the memo)
        key = (id(spec), hardware if isinstance(hardware, str) else id(hardware), count,
               tuple((k, catalog_key(v) if k == "hardware_files" else v) for k, v in args.items()),
               tuple(map(type, args.values())), tuple(workload.items()), tuple(map(type, workload.values())))
        hit = _RATE_ENGINE.get(key)
    except TypeError:  # an unhashable field: no memo
        key, hit = None, None
    if hit is not None and hit[0] is spec and (hit[1] is hardware or isinstance(hardware, str)):
        return hit[2]
    try:
        eng: str | None = fit_memory(spec, hardware, count, **args, concurrency=1, request_rate=rate,
                                     **workload).result(False).engine
    except InputError:
        eng = None
    if key is not None:
        if len(_RATE_ENGINE) > 4096:
            _RATE_ENGINE.clear()
        _RATE_ENGINE[key] = (spec, hardware, eng)
    return eng


# ``_rate_engine``'s answers (the spec and hardware kept alive and compared by identity)
_RATE_ENGINE: dict[tuple[Any, ...], tuple[ModelSpec, Any, str | None]] = {}


def _refused_on_every_layout(firsts: dict[int, FitResult], rate: float) -> RateOverloadError | None:
    """The refusal by the admitted sequences (eq. Q13) that ``fit`` at ``rate`` with no degree given is certain to
    end in, where every layout was refused pinned (``rate_layout_seconds`` all infinite) and ``firsts`` holds each layout's
    first iterate (every degree fit may take: all within one machine); None where it is not certain. The unpinned
    climb takes at each C some degree t, whose fit at C has t's replicas R_t, admitted count A_t and X(k) grid as
    t's first iterate has them (``_admission_certain`` 1.: none of them reads C). It ends in one of:

    1. a refusal at an iterate (eq. Q10a's server capacity, or no fixed point: the decode's capacity), or
    2. ``admission_queued`` on its answer r* (degree t*): eq. Q13 at r*'s share rate / R_t* on the grid of t* (the
       wait on r*) or, past A_t*, of the degree t' the fit at A_t* R_t* takes (``admission_wait``; a pool of none,
       ``_holds_none``, needs an A of 0, which no first iterate here has).

    Where ``admission_over_capacity`` (the very test ``admission_queue`` makes) refuses the share rate / R_a on the
    grid of b for every pair of degrees (a, b), case 2 is refused whatever t* and t' are, and case 1 is a refusal:
    every iterate of the climb is redundant. Under vLLM the pairs with b <= a suffice: each degree refuses its own
    share (b = a), so at every C each layout's mean request seconds (``rate_seconds``: eq. Q13 on its grid at its
    share) is infinite, fit_memory ranks them smallest degree first (``quickest_first``'s tie) and takes the
    smallest that fits at C (the largest, ``within[0]``, where none does); t* fits at A_t* R_t* (its share there is
    A_t* = min(cap, room): eq. 3, ``vllm_fits_at``) unless it is the largest, so t' <= t*. The refusal returned is
    raised only where the caller reads a refusal only as one (``refusal_only``: its text unread); otherwise ``fit``
    answers with ``most_carried``, as after the climb's refusal (each layout's pinned answer: no climb read). This replaces the climb ratecut2 left running
    after every pinned layout was refused (tests/estimate/test_unpinned_rate_climb.py: the full climb's outcome)."""
    if not firsts:
        return None
    grids: dict[int, tuple[FitResult, int, list[list[float]]]] = {}
    for t, r in firsts.items():
        if r.engine in SLOTS_FROM_CONCURRENCY or r.speed is None or not r.speed.load or not r.fits:
            return None
        admitted, closed = _admission_bound(r), r.speed.load.get("closed_throughputs")
        if admitted is None or not closed:
            return None
        grids[t] = (r, admitted, closed)
    lower = all(r.engine == "vllm" for r in firsts.values())  # (the pairs b <= a suffice: the ranking above)
    refusal: RateOverloadError | None = None
    for a, first in firsts.items():
        for b, (r, admitted, closed) in grids.items():
            if lower and b > a:
                continue
            over = admission_over_capacity(closed, rate / first.ranks)
            if over is None:
                return None
            refusal = refusal or admission_refusal(r, admitted, over)
    return refusal


def admission_queued(r: FitResult, rate: float, run: Callable[..., FitResult]) -> FitResult:
    """``r`` (the open load at ``rate``, eq. Q10, as if every request in flight ran) with the wait for admission of
    formulas/serving_queue.py eq. Q13 where the engine admits a bounded A sequences per replica (vLLM's KV pool or
    max_num_seqs, SGLang's pool or max_running_requests: eq. R1's bounds): the replica a load-dependent server
    completing X(min(k, A)) requests/s with k present, X(k) the closed load's at k running (eq. Q7, the
    ``closed_throughputs`` ``result`` puts in the load of ``run(C)``: the fit at C in flight in all)
    (``serving_load.admission_wait``), its mean wait in the TTFT and the requests in flight; where more than A would
    be in flight, the fit at A (the open load timed at A running). ``r`` unchanged where the engine has no such bound
    or the wait is too rare to count. Refused (RateOverloadError, naming both counts) where the rate reaches X(A),
    what the A admitted serve: the queue grows without bound. A pool that holds none is the memory verdict's."""
    if r.estimate is None or r.speed is None or not r.speed.load:
        return r
    d = r.estimate.details
    mean = float(r.speed.load["in_flight"])  # the mean in flight per replica (eq. Q10c)
    admitted = admitted_per_replica(d)
    if admitted is None:
        return r
    base = r if math.ceil(mean) <= admitted else run(admitted * r.ranks)  # the open load at A running
    try:
        queued = admission_wait(base.speed, r.engine, rate / r.ranks)
    except OverCapacityError as e:
        raise admission_refusal(r, admitted, e) from None
    return r if queued is None else replace_fields(base, speed=queued)


def admission_refusal(r: FitResult, admitted: int, e: OverCapacityError) -> RateOverloadError:
    """The refusal of a rate the ``admitted`` sequences per replica of ``r``'s deployment cannot serve (``e``: eq.
    Q13's, its capacity X(c) per replica), said with ``r``'s mean in flight per replica (eq. Q10c)."""
    mean = float(r.speed.load["in_flight"]) if r.speed is not None and r.speed.load else 0.0
    cap = r.estimate.details.get("running_cap_name", "running cap") if r.estimate is not None else "running cap"
    return RateOverloadError(
        f"about {mean:.1f} requests are in flight per replica as if all ran (Little's law, "
        f"formulas/serving_queue.py eq. Q10c), but {r.engine} admits {admitted} per replica (its KV pool or "
        f"{cap}); with {admitted} running it serves at most about {e.capacity:.3g} requests/s per replica (each "
        "replaced as it finishes, formulas/serving_queue.py eq. Q7): the rest wait for admission, and the queue "
        "grows without bound (eq. Q13); lower the rate, add replicas or shorten the context",
        e.capacity * r.ranks, admitted * r.ranks)


def _rate_queue_details(r: FitResult) -> FitResult:
    """``r`` at a request rate with its queue keys from the wait for admission (eq. Q12, serving_load.admission_wait,
    read from its load): ``queue_wait_seconds`` the mean wait, ``queued_sequences`` the mean number waiting over all
    replicas (a real number: lambda W_q, Little's law) and ``queue_wait_in_ttft`` True (the TTFT holds the wait,
    ``wait_before_ttft``). ``r`` unchanged where no wait is counted (none, or rarer than ADMISSION_WAIT_FLOOR)."""
    load = r.speed.load if r.speed is not None else None
    if not load or "admission_wait_seconds" not in load:
        return r
    return replace_fields(r, details={**r.details, "queue_wait_seconds": float(load["admission_wait_seconds"]),
                                      "queued_sequences": float(load["waiting"]) * r.ranks,
                                      "queue_wait_in_ttft": True})


def rate_and_concurrency() -> FieldError:
    """The refusal of a request rate given with a concurrency (fit's and recommend's one line)."""
    return FieldError("request_rate", "request_rate derives the requests in flight (Little's law): give "
                      "request_rate or concurrency, not both", ("concurrency",))


def _derived_concurrency(r: FitResult, rate: float) -> FitResult:
    """``r`` with its concurrency said as derived from the request rate (fit passed it to the estimate as given)."""
    tail = r.engine in SLOTS_FROM_CONCURRENCY
    why = (f"derived: the requests in flight at {rate:g} requests/s (Little's law over the time each is served, "
           "formulas/serving_queue.py eq. Q10c), " + (
               f"sized as {r.engine}'s slots for the {SLOT_TAIL:.0%} tail of the requests in flight (Poisson of "
               "that mean: formulas/arrival_tail.py eq. T1, estimate/serving_load.py SLOT_TAIL; an arrival finds "
               f"every slot busy at most {1 - SLOT_TAIL:.0%} of the time), the decode step timed with all busy"
               if tail else "rounded up"))
    load = r.speed.load if r.speed is not None else None
    if load and "admitted" in load and r.speed is not None and r.speed.concurrency == load["admitted"] \
            and float(load["in_flight"]) > float(load["admitted"]):
        why += (f", at most the {load['admitted']} {r.engine} admits at once per replica (the others wait in its "
                "queue: formulas/serving_queue.py eq. Q12)")

    def said(group: tuple[Assumption, ...]) -> tuple[Assumption, ...]:
        return tuple(Assumption(a.name, a.value, True, why) if a.name == "concurrency" else a for a in group)

    est = r.estimate.but(assumptions=said(r.estimate.assumptions)) if r.estimate is not None else None
    return replace_fields(r, estimate=est, assumptions=said(r.assumptions))


def read_request_rate(value: Any) -> float:
    """A request rate [requests/s] in numbers.REQUEST_RATE (FieldError on request_rate otherwise)."""
    try:  # the one reader of a numeric field: '16' and '1.5k' as the CLI and request files read them
        return float(read_number(value, "request_rate", REQUEST_RATE))
    except InputError as e:
        raise FieldError("request_rate", str(e)) from None


def _fit_at(model: ModelSpec | str, hardware: str | Device | Instance, count: int | None, speed: bool,
            concurrency: int | None, request_rate: float | None, workload: dict[str, Any], *,
            headroom: float | None, engine: str | None, weights: str | None, context: int | None,
            output_tokens: int | None, memory: int | None, kv_dtype: str | None,
            hardware_files: Sequence[str | Path], host_device: str | Device | None, engine_version: str | None,
            kwh_price: float | None, tensor_parallel: int | None, host_memory: int | str | None,
            fits_at: bool | None, rate_layouts: dict[int, float] | None = None,
            search_stages: bool = True) -> FitResult:
    """``fit`` at ``concurrency`` (``request_rate``: the rate whose load the speed takes, eq. Q10, else the closed
    load of eqs. Q4-Q9). Where the layout is fit's own choice (no degree, no stages, no rate: ``MemoryFit.stages``)
    and tensor parallelism does not fit within one machine, the pipeline layouts are tried by the one rule the
    hardware searches take (``with_pipeline_layouts``: recommend, ``models --fits-on``, the plan's search), so fit's
    verdict on a deployment is theirs: `fit --tp T --pp P` where that is the layout they name (probe32 D2).
    ``search_stages`` False: tensor parallelism only (a rate's refusal sizing its ceilings on the rate's layouts)."""
    def memory_at(fields: dict[str, Any] = workload, **stages: Any) -> MemoryFit:
        return fit_memory(model, hardware, count, headroom=headroom, engine=engine, weights=weights, context=context,
                          concurrency=concurrency, output_tokens=output_tokens, memory=memory, kv_dtype=kv_dtype,
                          hardware_files=hardware_files, host_device=host_device, engine_version=engine_version,
                          kwh_price=kwh_price, tensor_parallel=tensor_parallel, host_memory=host_memory,
                          request_rate=request_rate, rate_layouts=rate_layouts, **fields, **stages)
    first = memory_at()
    mem = first if not (search_stages and (first.stages or first.experts)) else with_pipeline_layouts(
        first, first.per_node, first.stages, lambda p: memory_at(pipeline_parallel=p), first.experts,
        lambda d: memory_at(data_parallel=d, expert_parallel=True)) or first
    r = mem.result(speed)
    if mem is not first:  # stages fit chose, not given: said so (the estimate records the stages it is passed as given)
        r = stages_chosen(r, first.per_node, tp_refused=first.tp_refused)
    why = async_pipeline_refusal(r.engine, engine_version) if workload.get("async_scheduling") else None
    if why is not None and search_stages and first.stages and not r.fits:  # the flag took the stages out: said
        plain = {**workload, "async_scheduling": False}
        r = async_stages_note(r, first.stages, why, with_pipeline_layouts(
            None, first.per_node, first.stages, lambda p: memory_at(plain, pipeline_parallel=p)))
    if r.fits or not (fits_at if fits_at is not None else weights is None and tensor_parallel is None):
        return r
    window = window_fits_at(r.estimate.details) if r.estimate is not None else None
    if window is not None:  # the engine refuses the context, whatever the format: the hint names the window
        return replace(r, fits_at=window)
    from .format_search import fits_at as format_fits_at  # the ladder search sizes each rung by this module's fit
    spec = spec_of(model)
    at = format_fits_at(
        spec, hardware, count, headroom=headroom, engine=engine, context=context, concurrency=concurrency,
        output_tokens=output_tokens, memory=memory, kv_dtype=kv_dtype, hardware_files=hardware_files,
        engine_version=engine_version, host_device=host_device,
        **({"host_memory": host_memory} if host_memory is not None else {}), **workload)
    if request_rate is None and weights is None and tensor_parallel is None:
        keep = engine_settings_fit(spec, hardware, count, r, concurrency, workload, dict(
            headroom=headroom, engine=engine, context=context, output_tokens=output_tokens, memory=memory,
            kv_dtype=kv_dtype, hardware_files=hardware_files, engine_version=engine_version, host_device=host_device,
            host_memory=host_memory))
        if keep:  # settings of the engine that fit with the weights kept come first; the format search's answer after
            at = {**(at or {}), "engine_settings": keep}
    return replace(r, fits_at=at)


def stages_left_line(stages: Sequence[int], why: str) -> str:
    """The one sentence every layout search (``fit``, recommend, the plan's search: ``format_search.pick_format``)
    says where the pipeline layouts ``stages`` were left out of it, ``why`` (specs/workload.py
    ``async_pipeline_refusal``'s words)."""
    return f"{STAGES_LEFT} ({', '.join(f'PP {p}' for p in stages)}): {why}"


# how ``stages_left_line`` opens: a search that gathers its options' lines into one answer-level warning finds them by it
STAGES_LEFT = "pipeline layouts not tried"


def async_stages_left(engine: str, fields: Mapping[str, Any], stages: Sequence[int]) -> str | None:
    """``stages_left_line`` where the workload ``fields`` (async_scheduling, engine_version) take the pipeline
    layouts ``stages`` out of a search on ``engine`` (vLLM 0.10-0.14 with --async-scheduling stops at start with
    stages: ``async_pipeline_refusal``), else None."""
    why = async_pipeline_refusal(engine, fields.get("engine_version")) if fields.get("async_scheduling") else None
    return stages_left_line(stages, why) if why is not None and stages else None


def async_stages_note(r: FitResult, stages: Sequence[int], why: str, plain: MemoryFit | None) -> FitResult:
    """``r``, fit's answer that does not fit, where async_scheduling took the pipeline layouts (``stages``:
    ``pipeline_options``) out of its search (``why``: specs/workload.py ``async_pipeline_refusal``, vLLM 0.10-0.14):
    a line naming the layouts left out and why, and where one of them fits without the flag (``plain``: the search
    of ``with_pipeline_layouts`` without it) on these devices, that layout in place of the estimate's advice of
    more devices (vllm.py ``no_pool_remedy``) (review40 D7: fit answered "does not fit" with nothing naming the
    flag, and advised more devices where dropping it fits)."""
    line = stages_left_line(stages, why)
    result = plain.result(False) if plain is not None and plain.fits and plain.refusal is None else None
    if result is None:
        return replace_fields(r, warnings=(*r.warnings, line))
    layout = f"TP {result.tensor_parallel} x PP {result.pipeline_parallel}"
    nearer = (f"drop async_scheduling (--async-scheduling): without it {layout} fits on these {r.count} devices "
              f"(--pp {result.pipeline_parallel}), or use a smaller weight format or a higher gpu_memory_utilization")
    remedy = r.estimate.details.get("vllm_no_pool_remedy") if r.estimate is not None else None

    def advised(text: str) -> str:
        return text.replace(str(remedy), nearer) if remedy else text
    return replace_fields(r, reasons=tuple(map(advised, r.reasons)),
                          warnings=(*map(advised, r.warnings), f"{line}; without it {layout} fits on these "
                                    f"{r.count} devices"))


def stages_chosen(r: FitResult, per_node: int, ranked: str = "gives the most output tokens/s",
                  tp_refused: str = "") -> FitResult:
    """``r``, a pipeline or expert-parallel layout ``fit`` chose (``with_pipeline_layouts``), its
    ``pipeline_parallel`` (``data_parallel``, ``expert_parallel``) assumption said as fit's choice, in its own
    assumptions and its estimate's (the estimate records the stages it is passed as given, as it does a degree:
    ``as_fit_chose``). ``ranked``: what the chosen layout is best at (the ranking ``with_pipeline_layouts`` took).
    ``tp_refused``: the tensor-parallel search's eq. TP5 warning (``block_skipped``) where it took a degree out, kept
    among ``r``'s warnings (the chosen layout's own search has no such degree to skip)."""
    ranks = r.data_parallel > 1
    whole = (f"a tensor-parallel degree is refused by the checkpoint's quantization blocks (eq. TP5) or tensor "
             f"parallelism alone does not fit within a machine of {per_node} devices" if tp_refused else
             f"tensor parallelism alone does not fit within a machine of {per_node} devices")
    why = (f"fit's choice: {whole}, and of the "
           + ("pipeline and expert-parallel" if ranks or tp_refused else "pipeline")
           + f" layouts that fit this one {ranked} (estimate/fit.py with_pipeline_layouts, "
           "the rule recommend and models --fits-on take); "
           + ("give --dp 1 for tensor parallelism only" if ranks else "give --pp 1 for tensor parallelism only"))
    names = ("data_parallel", "expert_parallel") if ranks else ("pipeline_parallel",)

    def said(a: Assumption) -> Assumption:
        return Assumption(a.name, a.value, True, why) if a.name in names else a
    est = r.estimate.but(assumptions=tuple(map(said, r.estimate.assumptions))) if r.estimate is not None else None
    kept = (tp_refused,) if tp_refused and tp_refused not in r.warnings else ()
    return replace_fields(r, assumptions=tuple(map(said, r.assumptions)), estimate=est,
                          warnings=(*kept, *r.warnings))


def _assumed(r: FitResult, name: str) -> Any:
    """The value fit's answer ``r`` took for setting ``name`` (its assumption), None where it states none."""
    return next((a.value for a in r.all_assumptions if a.name == name), None)


def engine_settings_fit(spec: ModelSpec, hardware: str | Device | Instance, count: int | None, r: FitResult,
                        concurrency: int | None, workload: dict[str, Any], kw: dict[str, Any]) -> list[dict[str, Any]]:
    """The engine settings that make a serving answer ``r`` that does not fit fit while its weights stay as they are
    (probe24 D4: gpt-oss-120b, released in MXFP4, on one H100 under vLLM at 8k x 8 was told to re-quantize to awq-int4,
    while 7.46 GiB of vLLM's pool is its sampler profile for ``max_num_seqs`` 1,024 sequences, vllm/v1/worker/
    gpu_model_runner.py ``_dummy_sampler_run``, and a KV cache in fp8 halves each token's bytes). Each candidate is
    this module's own ``fit_memory`` verdict with one setting changed, the weights unchanged: ``max_num_seqs`` (an
    engine that reads it, ``specs.workload.ENGINE_SETTINGS``), the largest power of two below the value ``r`` took
    that fits and still admits ``concurrency`` sequences (the least change: no sequence the workload runs is refused);
    ``kv_dtype`` fp8 where ``r``'s KV cache is wider (the weights kept, the KV cache's own precision halved: vLLM's
    ``--kv-cache-dtype fp8``); both together only where neither fits alone. Each with the memory and budget per
    device of its fit; an empty list where none fits, or the engine takes neither setting (llama.cpp, transformers).
    """
    if r.engine not in ENGINE_SETTINGS.get("max_num_seqs", ()) or r.estimate is None:
        return []
    args = {k: v for k, v in kw.items() if v is not None or k == "engine"}
    args["engine"] = r.engine
    need = max(1, concurrency or 1)

    def fits(change: dict[str, Any]) -> FitResult | None:
        try:
            f = fit_memory(spec, hardware, count, concurrency=concurrency, weights=r.weights_format,
                           tensor_parallel=r.tensor_parallel, **{**args, **workload, **change}).result(False)
        except InputError:  # a setting the engine or device refuses: not a hint
            return None
        return f if f.fits else None

    out: list[dict[str, Any]] = []

    def said(change: dict[str, Any], f: FitResult) -> None:
        out.append({"changes": change, **hint_memory(f)})

    seqs = _assumed(r, "max_num_seqs")
    seq_fit: tuple[dict[str, Any], FitResult] | None = None
    if isinstance(seqs, int) and seqs > need:
        n = 1 << ((seqs - 1).bit_length() - 1)  # the largest power of two below the value taken
        while n >= need and seq_fit is None:
            f = fits({"max_num_seqs": n})
            seq_fit = ({"max_num_seqs": n}, f) if f is not None else None
            n //= 2
        if seq_fit is None and need < seqs:  # the workload's own concurrency, the smallest that admits it
            f = fits({"max_num_seqs": need})
            seq_fit = ({"max_num_seqs": need}, f) if f is not None else None
    if seq_fit is not None:
        said(*seq_fit)
    kv = str(_assumed(r, "kv_dtype") or "")
    if kv and not kv.startswith("fp8"):
        f = fits({"kv_dtype": "fp8"})
        if f is not None:
            said({"kv_dtype": "fp8"}, f)
        elif not out and isinstance(seqs, int) and seqs > need:
            f = fits({"kv_dtype": "fp8", "max_num_seqs": need})
            if f is not None:
                said({"max_num_seqs": need, "kv_dtype": "fp8"}, f)
    return out


class _FitSetup(NamedTuple):
    """``fit_memory``'s setup of one deployment: every check and choice it makes before the estimate (the target
    and count, the engine, the layout and its tensor-parallel options, the usable memory, the device's notes), none
    of which reads the concurrency or the request rate (``_fit_setup``)."""

    kwh_price: float | None
    device: Device
    n: int
    target: str
    instance: Instance | None
    hr: float
    eng: str
    host_device: Device | None
    host_memory: int | None
    per_node: int
    layout: ServingLayout
    split: bool
    pinned: int | None
    usable: int
    est_notes: Notes  # read only (the estimate's device notes, ``with_serving_notes``)
    on_cpu: bool
    dev: dict[str, Any]
    warnings: tuple[str, ...]  # (each fit copies these three and adds to its copy)
    assumptions: tuple[Assumption, ...]
    workload: dict[str, Any]  # the workload fields as the setup leaves them (engine_version, gpus, cuda_memory)
    tp_options: tuple[int, ...]
    tp_refused: str = ""  # eq. TP5 took a degree out of ``tp_options``: ``block_skipped``'s warning, else empty


def _fit_setup(spec: ModelSpec, hardware: str | Device | Instance, count: int | None, headroom: float | None,
               engine: str | None, weights: str | None, memory: int | None, hardware_files: Sequence[str | Path],
               host_device: str | Device | None, engine_version: str | None, kwh_price: float | None,
               tensor_parallel: int | None, host_memory: int | str | None, gpus_per_node: int | None,
               workload: dict[str, Any]) -> _FitSetup:
    """``fit_memory``'s setup (``_FitSetup``) of ``spec`` on ``count`` x ``hardware`` with those settings and
    ``workload``'s fields. A rate's climb asks ``fit_memory`` at many C of one deployment and a copies search at
    many rates (recommend's ``_rate_copies``), each the same setup: it is kept per (spec, hardware, settings,
    workload) for the process (``_FIT_SETUPS``, cleared by ``clear_caches``; the spec and a hardware or host
    object compared by identity, every other value with its type). Not kept: a refusal (raised anew each time),
    hardware files (read from disk), a detected machine, an unhashable field."""
    key: tuple[Any, ...] | None = None
    if not hardware_files and hardware != "detected" and host_device != "detected" \
            and "detected" not in workload.values():
        vals = (hardware if isinstance(hardware, str) else id(hardware), count, headroom, engine, weights, memory,
                host_device if host_device is None or isinstance(host_device, str) else id(host_device),
                engine_version, kwh_price, tensor_parallel, host_memory, gpus_per_node, *workload.keys(),
                *workload.values())
        key = (id(spec), vals, tuple(map(type, vals)))
        try:
            hit = _FIT_SETUPS.get(key)
        except TypeError:  # an unhashable value: not kept
            key, hit = None, None
        if hit is not None and hit[0] is spec and hit[1] is hardware and hit[2] is host_device:
            return hit[3]
    workload = dict(workload)  # (the setup's own: it leaves the fields it adds in its answer)
    setup = _make_fit_setup(spec, hardware, count, headroom, engine, weights, memory, hardware_files, host_device,
                            engine_version, kwh_price, tensor_parallel, host_memory, gpus_per_node, workload)
    if key is not None:
        if len(_FIT_SETUPS) > 4096:
            _FIT_SETUPS.clear()
        _FIT_SETUPS[key] = (spec, hardware, host_device, setup)
    return setup


# ``_fit_setup``'s answers (the spec, hardware and host device kept alive and compared by identity)
_FIT_SETUPS: dict[tuple[Any, ...], tuple[ModelSpec, Any, Any, _FitSetup]] = {}


def _make_fit_setup(spec: ModelSpec, hardware: str | Device | Instance, count: int | None, headroom: float | None,
                    engine: str | None, weights: str | None, memory: int | None, hardware_files: Sequence[str | Path],
                    host_device: str | Device | None, engine_version: str | None, kwh_price: float | None,
                    tensor_parallel: int | None, host_memory: int | str | None, gpus_per_node: int | None,
                    workload: dict[str, Any]) -> _FitSetup:
    """``_fit_setup`` made (``workload``: its own dict, which it changes)."""
    kwh_price = read_kwh_price(kwh_price)
    device, n, target, instance = target_and_count(hardware, count, hardware_files, instances=True)
    hardware_decides(device, workload)  # device=, gpu_runtime= are the hardware's: the same dropped, another refused
    hr = check_headroom(headroom)
    warnings: list[str] = []
    where = target if instance is not None or n == 1 else f"{n} x {target}"
    # the settings given, which name their engine when none is (specs/workload.py implied_engine: host_device is
    # llama.cpp's)
    settings = {**workload, "engine_version": engine_version, "host_device": host_device, "host_memory": host_memory}
    eng, engine_note = engine_assumption(normalize_engine(engine) if engine else None, device, n, weights, where,
                                          spec, settings)
    if engine_version is not None:  # a workload field: the estimate checks and records it, the speed reads it
        workload["engine_version"] = engine_version
    # SGLang keeps no headroom (its pool is mem_fraction_static of the memory), nor vLLM given its
    # gpu_memory_utilization (its pool is that share; the verdict's headroom is 1 - it): no headroom assumption there;
    # the others the margin the estimate's verdict keeps (estimate/verdict.py margin_rule: llama.cpp on a GPU its
    # --fit-target, the margin fit --auto keeps)
    own_pool = eng == "sglang" or (eng == "vllm" and workload.get("gpu_memory_utilization") is not None)
    assumptions: list[Assumption] = [] if own_pool else [
        margin_rule(eng, workload_device_kind(device), headroom, workload.get("fit_target")).assumption()]
    assumptions.append(engine_note)
    check_engine_on_device(eng, device)
    # llama.cpp's host CPU and RAM, checked up front (estimate/device.py host_part, the search's check too)
    host_device, host_memory = host_part(eng, device, host_device, host_memory, hardware_files)
    per_node = serving_machine_size(instance, gpus_per_node, n)
    layout = serving_layout(eng, device, n, per_node)
    split = layout.split
    if split and layout.split_gpus > LLAMACPP_GPUS.high:  # --count is its GPUs here: said in fit's words
        raise FieldError("count", f"llama.cpp splits one model over at most {LLAMACPP_GPUS.high} GPUs "
                         f"(llama_max_devices(), numbers.py LLAMA_MAX_DEVICES), not one machine's {layout.split_gpus}: "
                         f"give machines of {LLAMACPP_GPUS.high} GPUs or fewer (gpus_per_node), or engine vllm "
                         "(tensor parallel, the other devices replicas)", also=("engine", "gpus_per_node"))
    if split:  # one copy over one machine's GPUs (llamacpp_split_gpus), the other machines replicas of it
        workload.setdefault("gpus", layout.split_gpus)
    ts = workload.get("tensor_split")
    if eng == "llamacpp" and ts is not None:  # one rule with a request's (tensor_split_refusal)
        shares = len(ts) if isinstance(ts, (list, tuple)) else len(str(ts).replace("/", ",").split(","))
        refuse_split_apart(device, shares, "tensor_split")  # replicas of one device each (device.py), first
        why = None if layout.apart else tensor_split_refusal(shares, n, per_node)
        if why is not None:
            raise FieldError("tensor_split", f"tensor_split {why}", also=("count",))
    pinned = None  # a degree given (a plan times its typical load on the layout chosen for its peak)
    if tensor_parallel is not None:
        pinned = int(check_number(tensor_parallel, "tensor_parallel", COUNT))
        # 1 is these layouts' own degree (the answer's tensor_parallel): given, it changes nothing
        if split and pinned != 1:
            raise FieldError("tensor_parallel", f"tensor_parallel {pinned}: llama.cpp splits the model over the "
                             f"{layout.split_gpus} GPUs of a machine, it runs no tensor parallelism (give 1 or leave "
                             "it out)")
        refuse_tensor_parallel_apart(device, pinned)  # a CPU, Apple chip or MIG device, one or several
        if n % pinned:
            raise FieldError("tensor_parallel", f"tensor_parallel {pinned} does not divide the {n} devices (the others "
                             "run replicas of it): give a divisor of the count, or leave it out for fit's choice")
    pp = int(workload.get("pipeline_parallel") or 1)
    refuse_pipeline_apart(device, pp)  # MIG devices: no NCCL group over them
    if pp > 1:  # (the engine and the model are checked by the estimate: estimate/inference/pipeline.py)
        if pinned is not None and n % (pinned * pp):
            raise FieldError("pipeline_parallel", f"tensor_parallel {pinned} x pipeline_parallel {pp} does not divide "
                             f"the {n} devices (the others run replicas of it)", also=("tensor_parallel", "count"))
        if n % pp:
            raise FieldError("pipeline_parallel", f"pipeline_parallel {pp} does not divide the {n} devices (each "
                             f"replica is its {pp} stages times each stage's tensor-parallel devices, the others "
                             "replicas of it)", also=("count",))
        layout = layout._replace(pipeline=pp)
    dp = int(workload.get("data_parallel") or 1)
    if dp > 1:  # (the engine and the model are checked by the workload and the estimate: compose.py)
        refuse_tensor_parallel_apart(device, dp)
        if n % (dp * (pinned or 1)):
            raise FieldError("data_parallel", f"data_parallel {dp}" + (f" x tensor_parallel {pinned}" if pinned else "")
                             + f" does not divide the {n} devices (each replica is its data-parallel ranks times "
                             "each rank's tensor-parallel devices, the others replicas of it)",
                             also=("count",) + (("tensor_parallel",) if pinned else ()))
        layout = layout._replace(data=dp)
        pp = pp * dp  # the degrees fit chooses among fill count / (pp x dp) devices
    # the stages given without a degree: fit chooses each stage's among those whose replicas of t x pp devices fill
    # the count (the options of count / pp: t divides it exactly when t x pp divides the count), by its one rule
    runs = served_format(spec, eng, weights)
    expert_parallel = bool(workload.get("expert_parallel"))  # the routed experts whole per device (eq. EP1)
    given_group = workload.get("group_size")  # a group format's group given (else the checkpoint's)
    tp_options = ([pinned] if pinned is not None
                  else layout.tensor_parallel_options(spec, n // pp, per_node, runs, given_group, expert_parallel))
    skipped = (block_skipped(spec, n // pp, eng, runs, given_group, layout.data, expert_parallel)
               if pinned is None and not (layout.apart or split) else None)
    if skipped is not None:
        warnings.append(skipped)
    if instance is not None:
        device = vm_share_device(device, instance, assumptions)
    usable, notes = target_memory(device, instance, memory)
    assumptions.extend(notes.assumptions)
    warnings.extend(notes.warnings)  # the device's first, as infer says them
    if usable is None:
        raise InputError(f"{device.id} has no sourced memory size; give one with --memory (e.g. 64GiB; "
                         "memory= in Python, resources.memory in a request file)")
    cuda = cuda_memory(device, memory)  # CUDA's total of the catalog's memory, as estimate_inference(device=) reads
    if cuda is not None and workload.get("cuda_memory") is None:
        workload["cuda_memory"] = cuda
    if host_memory is None and eng == "llamacpp":  # on an Apple chip the CPU part's memory is the unified memory
        host_memory, apple_note = apple_host_memory(device, memory)  # outside the working set, as fit --auto
        if apple_note is not None:                                    # checks it (llamacpp_fit.py fit_llamacpp)
            assumptions.append(apple_note)
    # the estimate names the device, its memory and the engine's default as estimate_inference(device=) does (so
    # `infer --device`): the device's notes (named_device_notes), its warnings first, through the one path
    est_notes = named_device_notes(device, notes, hardware)
    if engine is None:
        est_notes.assumptions.append(engine_note)
    on_cpu = workload_device_kind(device) == "cpu"
    dev = inference_device_fields(device)
    return _FitSetup(kwh_price, device, n, target, instance, hr, eng, host_device, host_memory, per_node, layout,
                     split, pinned, usable, est_notes, on_cpu, dev, tuple(warnings), tuple(assumptions), workload,
                     tuple(tp_options), skipped or "")


class MemoryFit(NamedTuple):
    """``fit``'s first stage: the memory verdict made, the speed not yet estimated. ``result(speed)`` is the
    FitResult ``fit(..., speed=speed)`` returns (each call its own: the speed stage adds to copies of the
    assumptions and warnings). A search that takes the speed only of a format that fits (``recommend``) reads
    ``fits`` and then asks ``result`` once, instead of calling ``fit`` twice for the same memory estimate."""

    fits: bool
    result: Callable[[bool], FitResult]
    # the engine's refusal to start whatever the weights (a context past the model's window, vLLM/SGLang:
    # estimate/context_window.py ``refusal_reason``), None where it starts; a format search stops on it
    refusal: str | None = None
    # the tensor-parallel degree the fit took (``result``'s), read by ``with_pipeline_layouts`` without the answer
    tensor_parallel: int = 1
    # the pipeline stages ``fit`` may try when this layout is its own choice (no degree, no stages, no rate given:
    # ``pipeline_options``), and the machine size they are judged by (``with_pipeline_layouts``' ``per_node``)
    stages: tuple[int, ...] = ()
    per_node: int = SERVING_GPUS_PER_NODE
    # the data-parallel degrees ``fit`` may try with expert parallelism on its own layout (``expert_options``), and
    # whether eq. TP5 took a tensor-parallel degree out of this layout's options (``block_skipped``): both read by
    # ``with_pipeline_layouts``
    experts: tuple[int, ...] = ()
    tp_refused: str = ""  # (block_skipped's warning; empty where no degree was taken out)


_NAME = attrgetter("name")
_PER_DEVICE_NOTE = methodcaller("startswith", "memory is per device")  # the estimate's note fit's own text replaces


def fit_memory(model: ModelSpec | str, hardware: str | Device | Instance, count: int | None = None, *,
               headroom: float | None = None, engine: str | None = None, weights: str | None = None,
               context: int | None = None, concurrency: int | None = None, output_tokens: int | None = None,
               memory: int | None = None, kv_dtype: str | None = None, hardware_files: Sequence[str | Path] = (),
               host_device: str | Device | None = None, engine_version: str | None = None,
               kwh_price: float | None = None, tensor_parallel: int | None = None,
               host_memory: int | str | None = None, request_rate: float | None = None,
               rate_layouts: dict[int, float] | None = None, gpus_per_node: int | None = None,
               network: str | float | None = None, **workload: Any) -> MemoryFit:
    """``fit``'s memory stage (its arguments but ``speed``): every check, the estimate and the verdict; the speed
    is estimated by the returned ``MemoryFit.result(True)``. Serving on several devices (not a llama.cpp split), the
    tensor-parallel degree of each replica is, unless ``tensor_parallel`` gives one: of the degrees vLLM shards the
    model over (``tensor_parallel_options``), within one machine the layout with the most output tokens/s at
    ``concurrency`` that fits (each degree's replicas at their share of the load, ``replicas_tokens_per_second``;
    a tie to the smaller degree, ``fastest_first``, while it fits at its high end too, ``fits_high``), else the
    smallest across machines that fits. ``gpus_per_node``: the devices of one machine (``serving_machine_size``;
    None: an instance's own count, else ``SERVING_GPUS_PER_NODE``). ``network``: the network of each machine to the
    others, as ``fit --network`` reads it (:func:`node_network`; None: the instance's, else none known), which times
    a replica's traffic that crosses machines: a tensor-parallel group's all-reduces (formulas/network.py eqs. (11),
    (13')) and a pipeline's sends between stages (eqs. (8), (14))."""
    spec = spec_of(model)
    # text quantities ('8k', '24GiB') read as the CLI reads them, by the workload's one reader (specs/workload.py)
    ranges = dict(INFERENCE_NUMBERS)
    context, output_tokens, memory = (v if v is None else int(read_number(v, n, ranges[n])) for v, n in
                                      ((context, "context"), (output_tokens, "output_tokens"), (memory, "memory")))
    # context and concurrency reach the estimate only when given, so that a default is named there as one
    given: dict[str, Any] = {}
    if context is not None:
        given["context"] = context
    if concurrency is not None:
        given["concurrency"] = concurrency
    context = InferenceWorkload.context if context is None else context
    # checked here: the estimate sees only one replica's share (max 1), so concurrency=-1 was taken as 1
    concurrency = InferenceWorkload.concurrency if concurrency is None else int(read_number(concurrency,
                                                                                              "concurrency",
                                                                                              CONCURRENCY))
    setup = _fit_setup(spec, hardware, count, headroom, engine, weights, memory, hardware_files, host_device,
                       engine_version, kwh_price, tensor_parallel, host_memory, gpus_per_node, workload)
    (kwh_price, device, n, target, instance, hr, eng, host_device, host_memory, per_node, layout, split, pinned,
     usable, est_notes, on_cpu, dev) = setup[:17]
    node_net = node_network(instance, network, per_node, hardware_files)  # read (and refused) once, not per layout
    # this fit's own: the stages below add to them (the setup's are shared by every fit of the same deployment)
    warnings, assumptions, workload, tp_options = list(setup.warnings), list(setup.assumptions), dict(setup.workload), \
        list(setup.tp_options)

    def sharded(t: int) -> dict[str, Any]:
        """The degree the fit chose, passed only when it shards (the estimate names a tensor_parallel it is given
        as the user's)."""
        return {"tensor_parallel": t} if t > 1 else {}

    def sized(t: int, share: int | None = None) -> Estimate:
        """The memory estimate of one replica at tensor parallelism ``t`` (its share of the load; ``share``: at that
        many sequences instead)."""
        per = per_replica(concurrency, layout.replicas(n, t)) if share is None else share  # the fullest replica's:
        # its memory and speed are reported
        return with_serving_notes(estimate_inference(
            spec, **{**given, **({"concurrency": per} if "concurrency" in given else {})}, output_tokens=output_tokens,
            weights=weights, engine=eng, device=dev["device"], gpu_runtime=dev["gpu_runtime"],
            gpu_capability=dev["gpu_capability"], **sharded(t),
            kv_dtype=kv_dtype, memory=usable, headroom=headroom, **workload), est_notes)

    models: dict[tuple[Any, ...], SpeedLayout] = {}  # speed.speed_model per workload (the same at every t)
    attention = str(workload.get("attention") or DEFAULT_ATTENTION)  # transformers' attn_implementation (hf_cache_traffic H2-H3)
    expert_parallel = bool(workload.get("expert_parallel"))  # vLLM --enable-expert-parallel (with layout.data ranks)
    asynch = bool(workload.get("async_scheduling"))  # vLLM --async-scheduling (engines.step_host: the host step overlapped)
    links: list[float | None] = []

    def speed_work(det: dict[str, Any]) -> tuple[Any, ...]:
        """The engine's format, prompt with media, KV and state dtypes and batching of the estimate details ``det``
        (the workload's, the same at every t): what speed_at times."""
        conv_d, ssm_d = det.get("state_dtypes") or ("fp32", "fp32")  # the engine's, from the estimate (one answer)
        return (str(det.get("weights_format")), prompt + int(det.get("media_tokens", 0)),
                str(det.get("kv_dtype", "bf16")), (str(conv_d), str(ssm_d)), det.get("n_ubatch"),
                det.get("kv_unified"), bool(det.get("identical_sequences", False)),
                int(det.get("group_size", GROUP_SIZE_DEFAULT)),  # a grouped format's group, as the memory sized it
                int(det.get("other_bytes", OTHER_BYTES_DEFAULT)),  # its unquantized tensors' bytes, likewise
                float(det.get("vision_encoder_flops", 0.0)))  # the vision tower's work on a prompt's media

    def speed_at(t: int, work: tuple[Any, ...], running: int | None = None, exact: int | None = None) -> SpeedEstimate:
        """One replica's speed at tensor parallelism ``t`` of the workload ``work`` (speed_work), at the sequences it
        runs at once (``running``: at most its share of the load; the others queue; ``exact``: that many, whatever
        the load: the closed loads of the wait for admission, eq. Q13)."""
        wf, pr, kvd, states, ub, kvu, same, group, other, enc = work

        def model() -> SpeedLayout:
            m = models.get(work)
            if m is None:
                # one speed model per (model, device, workload) for the process: a rate's climb calls fit_memory
                # once per C, each asking the same model (its inputs are all in the key; the device compared whole,
                # since an instance's share of a device is a new object each call)
                key = (id(spec), device.id, work, out, eng, engine_version, attention, asynch)
                hit = _SPEED_MODELS.get(key)
                if hit is not None and hit[0] is spec and (hit[1] is device or hit[1] == device):
                    m = models[work] = hit[2]
                    return m
                m = models[work] = speed_model(spec, device, weights_format=wf, prompt_tokens=pr, output_tokens=out,
                                               kv_dtype=kvd, mla_mode="latent", state_dtypes=states, ubatch=ub,
                                               kv_unified=kvu, identical_sequences=same, engine=eng,
                                               engine_version=engine_version, group_size=group, other_bytes=other,
                                               encoder_flops=enc, attention=attention, async_scheduling=asynch)
                if len(_SPEED_MODELS) > 1024:
                    _SPEED_MODELS.clear()
                _SPEED_MODELS[key] = (spec, device, m)
            return m

        if (t > 1 or layout.pipeline > 1 or layout.data > 1) and not links:
            links.append(link_bandwidth_for(device, instance, hardware_files))
        link = links[0] if t > 1 or layout.data > 1 else None  # (data-parallel ranks exchange an MoE's tokens over it)
        mesh = nvlink_mesh_for(device, instance, t, hardware_files) if t > 1 else None
        net = machine_network(node_net, t, per_node)
        per = per_replica(concurrency, layout.ranks(n, t))  # one engine rank's: a replica's data-parallel ranks each
        per = per if running is None else max(1, min(per, running))
        per = per if exact is None else exact
        if layout.pipeline > 1:  # the whole model at one micro-batch, then the stages in turn (eqs. PP3-PP4)
            micro = serving_pipeline_micro_batch(per, layout.pipeline)
            sp = _speed_cached(spec, device, t, wf, pr, out, micro, kvd, "latent", link, states, ub, kvu, same, eng,
                               engine_version, mesh, model, group, other, enc, attention, net, asynch)
            bw, why, hop_latency = pipeline_hop_bandwidth(device, node_net, per_node, t, layout.pipeline,
                                                          links[0] if links else None)
            return _pipelined_cached(sp, per, layout.pipeline, spec.hidden_size, bw, why, hop_latency)
        return _speed_cached(spec, device, t, wf, pr, out, per, kvd, "latent", link, states, ub, kvu, same, eng,
                             engine_version, mesh, model, group, other, enc, attention, net, asynch, layout.data,
                             expert_parallel)

    def layout_grid(t: int, work: tuple[Any, ...], admitted: int | None,
                    chunk: int | None) -> list[list[float]] | None:
        """Eq. Q13's X(k) of one replica at tensor parallelism ``t`` admitting ``admitted`` (None: no bound, no
        grid): the closed load at exactly k running (``closed_speed_load``) at each k of its grid."""
        if admitted is None:
            return None
        full = speed_at(t, work, exact=admitted)  # memoized on it: every step of the fixed point asks again
        key = (id(full), eng, chunk)
        hit = _GRID_MEMO.get(key)
        if hit is None or hit[0] is not full:
            if len(_GRID_MEMO) > 4096:
                _GRID_MEMO.clear()
            hit = _GRID_MEMO[key] = (full, closed_throughputs(
                lambda k: closed_speed_load(full if k == admitted else speed_at(t, work, exact=k), eng, chunk),
                admitted))
        return hit[1]

    # within one machine: the fastest layout that fits at this load; across machines only when none within fits,
    # the smallest that fits. The largest within is sized first (the least memory per device). When it fits, every
    # degree within is ranked (its output tokens/s at this load) and sized down the ranking only to the first
    # that fits; when it does not, the others are sized first (a smaller degree may still fit: the KV heads replicated
    # beyond their count hold more per device) and only those that fit are ranked.
    within = [t for t in tp_options if t <= per_node] or tp_options  # (a degree given: that one, wherever it is)
    across = [t for t in tp_options if t not in within]
    # vLLM at a rate with layouts to rank: a layout's admitted count, running cap, verdict at any share (compose.py
    # ``vllm_fits_at``) and what the ranking reads of the largest (its format, prompt tokens, KV dtype, batch: speed_work,
    # prefill_chunk_tokens) read no concurrency, so each layout is sized at one sequence (one estimate at every C and
    # rate of a search), its verdict at its share derived (``derived``), and sized at its share only to be taken
    derived: dict[int, bool] = {}
    probe = request_rate is not None and eng == "vllm" and len(within) > 1
    tried = {within[0]: sized(within[0], 1 if probe else None)}
    check_engine_runs(eng, str(tried[within[0]].details.get("weights_format")), device, spec)
    prompt, out = prompt_and_output(context, output_tokens)  # image/video tokens join the prompt (speed_at)
    if probe:
        if vllm_fits_at(tried[within[0]], per_replica(concurrency, n // within[0])):
            derived[within[0]] = True
        else:  # not fitting at its share (or not derivable): every degree sized at its share, as without a rate
            tried[within[0]] = sized(within[0])
    if not (derived.get(within[0]) or tried[within[0]].details["fits"]):
        tried.update((t, sized(t)) for t in within[1:])
    rankable = [t for t in within if t not in tried or derived.get(t) or tried[t].details["fits"]]
    layout_tps: dict[int, float | None] = {}
    layout_w: dict[int, float] = {}  # at a request rate: each layout's mean request seconds (eq. Q10)
    if len(rankable) > 1:
        first = speed_work(tried[within[0]].details)
        cap = tried[within[0]].details.get("running_cap")  # each layout ranked at the sequences it runs at once
        chunk = prefill_chunk_tokens(tried[within[0]])
        if request_rate is None:
            # each layout's output at this load, as fit reports the one it takes: its prompts' prefill competing with
            # its decode where the engine batches continuously (under_load, formulas/serving_queue.py eqs. Q5b, Q7)
            layout_tps = {t: replicas_tokens_per_second(under_load(speed_at(t, first, cap), eng, chunk),
                                                        layout.ranks(n, t), concurrency)
                          for t in rankable}
        else:
            # at a rate every stable layout puts out the same tokens/s (rate x output tokens): each is ranked by its
            # mean request seconds with its replicas at their share of the rate (open arrivals, eq. Q10), the wait for
            # the sequences its pool admits included (eq. Q13, as ``admission_queued`` adds it to the answer), past
            # its capacity last (``rate_seconds``)
            for t in rankable:  # each layout's admitted count (vLLM: at one sequence, its verdict derived)
                if t not in tried:
                    tried[t] = sized(t, 1 if probe else None)
                    at_share = vllm_fits_at(tried[t], per_replica(concurrency, layout.replicas(n, t))) if probe \
                        else None
                    if at_share is None:
                        tried[t] = sized(t)
                    else:
                        derived[t] = at_share
            if rate_layouts is not None:  # fit's rate path: each layout at its own answer (rate_layout_seconds),
                # which ranks them in place of their seconds at this C: those are not computed
                layout_w = {t: rate_layouts.get(t, math.inf) for t in rankable}
            for t in rankable if rate_layouts is None else ():
                admitted = admitted_per_replica(tried[t].details)
                running = cap if admitted is None else admitted
                layout_w[t] = rate_seconds(speed_at(t, first, running), eng, request_rate / layout.ranks(n, t), chunk,
                                           layout_grid(t, first, admitted, chunk))
    order = quickest_first(layout_w) if layout_w else fastest_first(layout_tps) if layout_tps else rankable
    tp = within[0] if not across else across[-1]  # none fits: the largest degree shown (as before this choice)
    # fit's rate path: the layout is the quickest at its own fixed point (``rate_layout_seconds``, finite only where
    # that layout's pinned climb fits and is not refused), taken at every C of the climb whether or not it fits there:
    # the climb is then that layout's own (``fit --tp``'s), so it bisects back to that layout's least fixed point.
    # Passing at an iterate to the next layout that fits there made f(C) jump layouts and the climb overshoot
    # (probe22 D4: llama-3.1-8b, 8 x H100, 50 requests/s: TP 1 fits at C = 469..485, not at the doubled 938, where
    # TP 4 took over and the climb ended refused on TP 8, while TP 1 x 8 pinned fits at 485)
    take = rate_take(rate_layouts, within) if request_rate is not None else None
    if take is not None and rate_layouts is not None:
        if take in derived or take not in tried:  # (a derived verdict's estimate is at one sequence: sized now)
            derived.pop(take, None)
            tried[take] = sized(take)
        order, across, tp = [], [], take
        layout_w = {t: rate_layouts.get(t, math.inf) for t in within}  # (the ranking the assumption states)
    for t in (*order, *across):
        if t in derived:  # its verdict at its share known: sized there only to be taken
            if not derived[t]:
                continue
            tried[t] = sized(t)
            del derived[t]
        if t not in tried:
            tried[t] = sized(t)
        if tried[t].details["fits"]:
            tp = t
            break
    # a tie (the same tokens/s: host-bound decode gives every degree one step time) goes to the smaller degree only
    # while it fits at its high end too; else to the smallest tied degree that does (more room, the same speed)
    if layout_tps.get(tp) is not None and not fits_high(tried[tp], on_cpu):
        for t in fastest_first(layout_tps):
            if t > tp and layout_tps[t] == layout_tps[tp]:
                if t not in tried:
                    tried[t] = sized(t)
                if tried[t].details["fits"] and fits_high(tried[t], on_cpu):
                    tp = t
                    break
    # each layout the answer lists (those ranked by speed) is sized: its memory per device and verdict are stated
    # beside its tokens/s, so a faster layout passed over says why (it does not fit) and one not taken says it fits
    ranked_by_speed = bool(layout_tps) and None not in layout_tps.values()
    if ranked_by_speed:
        tried.update((t, sized(t)) for t in within if t not in tried)
    est = tried[tp]
    replicas = layout.replicas(n, tp)
    per_rep = per_replica(concurrency, replicas)
    # the engine ranks timed, each alone at its share (a replica's data-parallel ranks: ``ServingLayout.ranks``;
    # else the replicas), and the fullest one's share
    ranks = layout.ranks(n, tp)
    per_rank = per_replica(concurrency, ranks)
    # the sequences one rank runs at once now (0 where its pool holds none) and those it is timed at: what it runs
    # (a pool that holds fewer than its share is timed at those it holds); where it runs none, at the load it would
    # run if it fit (running_per_replica)
    run_now = min(per_rank, int(est.details.get("running_sequences", per_rank)))
    fitted = {t: derived[t] if t in derived else bool(e.details["fits"]) for t, e in tried.items()}
    spread = (f"{replicas} replicas, the load split evenly ({per_rep} of {concurrency} sequences on the fullest)"
              if replicas > 1 else "no replicas")
    est = as_fit_chose(est, pinned is not None, concurrency if "concurrency" in given else None, replicas)
    if pinned is not None:
        assumptions.append(Assumption("tensor_parallel", tp, False, f"given; {spread}"))
    elif len(tp_options) > 1 and layout_w and tp in layout_w and fitted.get(tp):
        assumptions.append(Assumption("tensor_parallel", tp, True, rate_layout_why(
            tp, n, per_node, request_rate or 0.0, layout_w, fitted, layout.pipeline, layout.data, expert_parallel)
            + "; " + spread))
    elif len(tp_options) > 1:
        assumptions.append(Assumption("tensor_parallel", tp, True, tensor_parallel_why(
            tp, n, per_node, concurrency, within, across, layout_tps, fitted,
            f"each degree divides the {n} devices and the {spec.num_heads} attention heads, the {spec.num_kv_heads} KV "
            "heads split or replicated evenly (vLLM's rule)" + (
                f", times the {layout.pipeline} pipeline stages given dividing them" if layout.pipeline > 1 else ""),
            layout.pipeline, layout.data, expert_parallel) + "; " + spread))
    elif tp > 1:  # the one degree the devices allow: the fit's, not the user's (the estimate was passed it)
        assumptions.append(Assumption("tensor_parallel", tp, True, f"the one degree the {n} devices allow; {spread}"))
    # each layout ranked, fastest first (the choice above): the text's line; none where there was no ranking (one
    # degree, or a device the speed model cannot time). Each key means what the answer's own key of that name means
    # (``memory_per_device``, ``budget_per_device``: the device total and the budget, a pool engine's reserved pool
    # and the device memory), and ``verdict_need_per_device`` / ``verdict_budget_per_device`` are what its verdict
    # compared (``verdict_need``: a pool engine's workload share and what its pool offers; else the same two numbers)
    layouts = []
    for t in (*fastest_first(layout_tps), *(t for t in within if t not in layout_tps)) if ranked_by_speed else ():
        need, offered = verdict_need(tried[t], on_cpu)
        layouts.append({"tensor_parallel": t, **({"pipeline_parallel": layout.pipeline} if layout.pipeline > 1 else {}),
                        **({"data_parallel": layout.data, "expert_parallel": expert_parallel} if layout.data > 1
                           else {}),
                        # the full layout in words (``layout_words``: a data-parallel layout's ranks named too)
                        "layout": layout_words(t, n, layout.pipeline, layout.data, expert_parallel),
                        "replicas": layout.replicas(n, t), "tokens_per_second": layout_tps.get(t),
                        "fits": fitted[t], "memory_per_device": need_per_device(tried[t], on_cpu)[0],
                        "budget_per_device": int(tried[t].details["memory_budget"]),
                        "verdict_need_per_device": need, "verdict_budget_per_device": offered,
                        # the high end its verdict quotes (the components' or calibrated, estimate/verdict.py) and
                        # whether it fits there too: the tie rule's test (``fits_high``); None under a pool engine
                        "verdict_high_per_device": verdict_high(tried[t], on_cpu),
                        "fits_at_high_end": fits_high(tried[t], on_cpu),
                        **pool_reserved(tried[t])})
    if gpus_per_node is None and instance is None and eng != "llamacpp":  # a bare NVL72 device: said where it matters
        rack = serving_domain_warning(device, n, tp * layout.pipeline, replicas, per_node)
        if rack is not None:
            warnings.append(rack)
    if layout.data > 1 and spec.moe is not None and tp * layout.data > per_node:
        warnings.append(f"{layout.data} data-parallel ranks x TP {tp} span {machines_spanned(tp * layout.data, per_node)} "
                        f"machines of {per_node} devices: the MoE layers' token exchange is timed over the in-machine "
                        "link (formulas/serving_expert_parallel.py eq. EP4), not the network: an under-estimate")
    if tp > per_node:
        spans = machine_network(node_net, tp, per_node)
        warnings.append(f"tensor parallel {tp} spans {machines_spanned(tp, per_node)} machines of {per_node} devices: its "
                        "all-reduces cross the network every layer, "
                        + (f"timed over {spans.what}, {machine_rate(spans.bandwidth)} per machine, with NCCL's "
                           "latency across machines (formulas/network.py eqs. (11), (13'))" if spans is not None else
                           "timed over the link inside a machine (no network between the machines known: a lower "
                           "bound of their time; give a network: --network, resources.network)")
                        + " (vLLM's docs advise tensor parallelism inside a "
                        "machine and pipeline parallelism between machines: "
                        + (f"--tp {per_node} --pp {tp // per_node})" if tp % per_node == 0 and eng in ("vllm", "sglang")
                           else "--tp and --pp)"))
    elif node_net is not None and network is not None and tp * layout.pipeline <= per_node:
        warnings.append(f"{node_net[1]} times nothing here: each copy ({tp * layout.pipeline} devices) stays inside "
                        f"one machine of {per_node}, so no serving traffic crosses machines")
    d = est.details
    # the defaults that size this workload, named where the fit's own assumptions are read (the text's line)
    sizing = {"context", "concurrency"} - given.keys()  # (the set once, not once per assumption; none when both given)
    if sizing:
        assumptions.extend(a for a in est.assumptions if a.default and a.name in sizing)
    # a given one as given: the workload's (the estimate's concurrency is one replica's share of it)
    read = {"context": context, "concurrency": concurrency}  # as read ("8k" -> 8192)
    assumptions.extend(Assumption(k, read[k], False, "given") for k in given)
    if "media_tokens" in d:
        assumptions.append(Assumption("media_tokens", d["media_tokens"], False, "image/video tokens per sequence, "
                                      f"added to the {context} text tokens (estimate/inference/media.py)"))
        # llama.cpp's --image-min/max-tokens as the estimate applied them (estimate/inference/media.py token_bounds)
        assumptions.extend(a for a in est.assumptions if a.name in ("image_min_tokens", "image_max_tokens"))
    fmt = str(d.get("weights_format"))  # (refused or not: checked on the first estimate sized, the same format at every t)
    est_names = list(map(_NAME, est.assumptions))  # (picked in C: fit_memory runs once per rung of a catalog search)
    dtype_note = engine_dtype_note(eng, fmt, str(est.assumptions[est_names.index("dtype")].value) if "dtype" in est_names else "",
                                   device)
    fits, budget = bool(d["fits"]), int(d["memory_budget"])
    # the headroom the verdict applied (estimate/verdict.py): the one given, or a pool engine's own (vLLM 1 -
    # gpu_memory_utilization; SGLang 1 - mem_fraction_static), so the answer states one headroom
    verdict_headroom = float(d.get("headroom", hr))
    mid, hi = need_per_device(est, on_cpu)
    mem_used = mid
    reasons = [str(d["verdict"])]
    if host_memory is not None:  # the host part (mid of its range, the host row of the placement), as fit --auto
        placement = est.details.get("split") or {}
        held = next((str(d["layers"]) for d in placement.get("devices", ()) if d.get("device") == "host"), "token embd")
        short = host_memory_verdict(est.total("host")[1], host_memory, held)
        assumptions.append(host_fit_target_assumption())
        if short is not None:
            fits = False
            reasons.append(short)
    if eng == "llamacpp" and not layout.apart and replicas > 1:  # GPUs of several machines: a copy on each
        g = layout.split_gpus  # one machine's GPUs (specs/training.py llamacpp_split_gpus): the machine size
        machines = f"{replicas} machines of {g} GPU{'s' if g > 1 else ''}"
        rpc = ("llama.cpp reaches another machine's GPUs only through its RPC backend (--rpc; ggml-org/llama.cpp "
               "tools/rpc/README.md @339453e: a proof of concept), whose transfers between machines are not timed here")
        if fits:
            assumptions.append(Assumption("llamacpp_split", machines, True, "llama.cpp holds one copy of the model "
                                          "within one machine (specs/training.py llamacpp_split_gpus): the "
                                          f"{n} devices are {machines}, each a replica; {rpc}"))
        else:
            reasons.append(f"llama.cpp holds one copy of the model within one machine, and it does not fit there: the "
                           f"{n} devices are {machines}, each a replica, not one split; {rpc}")
    if dtype_note is not None:  # last, where estimate_inference(device=) says it (it was sized on the device's kind)
        est = est.but(warnings=(*est.warnings, dtype_note))
    nvfp4_note = nvfp4_kernel_note(eng, fmt, device)
    if nvfp4_note is not None:  # the same place, the same order
        est = est.but(warnings=(*est.warnings, nvfp4_note))
    # (the device's warnings, which the estimate says first, are said above already)
    warnings.extend(filterfalse(_PER_DEVICE_NOTE, est.warnings[len(est_notes.warnings):]))

    def result(speed: bool) -> FitResult:
        named, said = list(assumptions), list(warnings)  # this result's own: the speed stage adds to them
        sp = idle = None
        run = running_per_replica(per_rank, d)
        # the engine's chunk and the workload the speed times, read once (pure reads of this fit's estimate, which
        # nothing below changes)
        chunk = prefill_chunk_tokens(est) if speed else None
        if speed:
            if output_tokens is None:
                named.append(Assumption("output_tokens", out, True, "not given: min(256, context / 2) generated "
                                        "tokens, the rest of the context is the prompt the TTFT is timed on "
                                        "(specs/workload.py default_output_tokens)"))
            # (the layout-independent part computed once with the ranking's decodes), at the sequences run at once
            work = speed_work(d)
            sp = speed_at(tp, work, running=run)
            if run_now < 1 and sp is not None:  # nothing runs: the speed is the one if it fit, at the load named
                named.append(Assumption("speed_sequences", run, True, f"the speed if it fit: {run} sequences at once "
                                        f"per replica, what the engine would run with memory for them (min(its "
                                        f"share {per_rank} of the load, the engine's cap)); its pool holds none, so "
                                        "no sequence runs"))
            # image/video tokens are prompt tokens too (estimate/inference/media.py)
            sp = _split_speed(spec, est, device, host_device, hardware_files, instance, fmt,
                              prompt + int(d.get("media_tokens", 0)), out, run, sp, said)
            # every running request's prompt competes with the decode (formulas/serving_queue.py eqs. Q4-Q9)
            # (at a request rate: the open load of eq. Q10, each replica at its share of the rate)
            idle = sp  # (at the sequences run at once: a burst past them passes through those, eq. Q14)
            sp = under_load(sp, eng, chunk) if request_rate is None else \
                _at_rate(sp, eng, request_rate / ranks, chunk, ranks,
                         layout_grid(tp, work, admitted_per_replica(d), chunk))
        queue = queue_details(concurrency, ranks, per_rank, run_now, sp)
        burst = burst_figure(idle, eng, per_rank, run_now, chunk) if speed and request_rate is None else None
        if burst is not None:
            said.append(burst_warning(burst, ranks))
        if queue["queued_sequences"] and fits:  # (one that does not fit says why: the verdict)
            named.append(queue_note(queue, per_rank, run, d))
        slow = slow_first_token(sp, concurrency, queue["queue_wait_seconds"]) if fits and request_rate is None \
            else None  # (at a rate: rate_capacity.py rate_warnings says it, with the rate's remedy)
        if slow is not None:
            said.append(slow)
        return FitResult("inference", spec.name, target, device.id, n, tp, replicas, eng, fmt, fits, mem_used,
                         hi if eng not in ("vllm", "sglang") else mem_used, budget, verdict_headroom, est, sp, None,
                         tuple(reasons),
                         tuple(named), tuple(said),
                         {"usable_memory_per_device": usable, "context": context, "concurrency": concurrency,
                          "busy_replicas": busy_replicas(concurrency, replicas), **queue,
                          **({"data_parallel_ranks": ranks, "sequences_per_rank": per_rank} if layout.data > 1 else {}),
                          **({"slow_first_token": slow} if slow is not None else {}),
                          **({"burst": burst} if burst is not None else {}),
                          **({"tensor_parallel_layouts": layouts} if layouts else {})},
                         cost=serving_cost(device, n, instance, kwh_price, replicas_tokens_per_second(sp, ranks, concurrency)),
                         instances=instances_for(n, instance), data_parallel=layout.data,
                         expert_parallel=expert_parallel)

    # fit's own layout (no degree, no stages, no rate given): the pipeline layouts it may take where tensor
    # parallelism does not fit within a machine (``_fit_at``: ``with_pipeline_layouts``, the hardware searches' rule)
    own = pinned is None and workload.get("pipeline_parallel") is None and request_rate is None
    own_ranks = own and workload.get("data_parallel") is None and workload.get("expert_parallel") is None
    return MemoryFit(fits, result, d.get("engine_refusal_reason"), tp,
                     tuple(pipeline_options(spec, layout, n)) if own else (), per_node,
                     tuple(expert_options(spec, layout, n, per_node)) if own_ranks else (),
                     setup.tp_refused)


def as_fit_chose(est: Estimate, tp_given: bool, concurrency: int | None, replicas: int) -> Estimate:
    """The estimate of the layout fit took, its assumptions saying whose each value is: ``sized`` passes the
    estimate fit's degree and one replica's share of the load, which estimate_inference records as given. A degree
    fit chose is its default ("fit's choice"; given only when ``tp_given``), and a replica's share of the
    ``concurrency`` given over ``replicas`` (``per_replica``: ceil(c / r), the fullest replica's) is given
    as that concurrency ('given as N; ...', Assumption.mark). The items and details are the estimate's (``but``)."""
    def fit_chose(a: Assumption) -> Assumption:
        if a.name == "tensor_parallel" and not tp_given:
            return Assumption(a.name, a.value, True, "fit's choice (the answer's tensor_parallel says why)")
        if a.name == "concurrency" and concurrency is not None and a.value != concurrency:
            return Assumption(a.name, a.value, False, f"given as {concurrency}; one replica's share over {replicas} "
                              "replicas (the fullest's: the load split evenly)")
        return a
    if not any(a.name == "tensor_parallel" and not tp_given or a.name == "concurrency" and concurrency is not None
               for a in est.assumptions):
        return est
    return est.but(assumptions=tuple(map(fit_chose, est.assumptions)))


def running_per_replica(per: int, details: dict[str, Any]) -> int:
    """Sequences one replica is timed at of the ``per`` it is given: its estimate's ``running_sequences``
    (estimate/inference/common.py eq. R1: the engine's cap, the KV pool), what it runs. Where that is 0 (a pool that
    holds no sequence: nothing runs, it does not fit), the speed is the one "if it fit", at the sequences the engine
    would run with memory for them, ``need_sequences`` = min(per, its running cap) (eq. R1 without the pool's bound;
    the share itself where no cap is known, as SGLang's with no pool), never one sequence in place of the load."""
    running = int(details.get("running_sequences", per))
    if running < 1:
        need = details.get("need_sequences")
        return max(1, min(per, int(need))) if need else max(1, per)
    return min(per, running)


# the engines that keep the requests past what they admit in a waiting queue, admitted as slots free (vLLM
# Scheduler.schedule, vllm/v1/core/sched/scheduler.py @00024d31; SGLang's waiting_queue): a burst past the pool
BURST_ENGINES = ("vllm", "sglang")


def burst_figure(idle: SpeedEstimate | None, engine: str, per: int, running: int,
                 chunk: int | None) -> dict[str, Any] | None:
    """The burst figure of a serving fit whose ``per`` requests on one replica exceed the ``running`` its engine
    admits at once (estimate/inference/common.py eq. R1: the running cap, the KV pool's sequences of the full
    context): the ``per`` sent at once pass through the ``running`` slots (estimate/serving_load.py
    ``burst_over_pool``, formulas/serving_queue.py eq. Q14, the one function the validation's serving-load rows
    call), ``idle`` the speed at ``running``. Its TTFT expected (eq. Q14a: each slot handed on as a request
    finishes) and upper bound (eq. Q14b: waves in lockstep), its requests/s of each; None where all are admitted,
    none runs (a pool that holds no sequence), the engine is not a pool engine or no closed load is known."""
    if engine not in BURST_ENGINES or idle is None or running < 1 or per <= running:
        return None
    b = burst_over_pool(idle, engine, per, chunk)
    load = b.load if b is not None else None
    if load is None or "admitted" not in load:
        return None
    admitted, waiting = running_and_queued(per, int(load["admitted"]))  # eqs. R1-R2
    return {"requests": per, "admitted": admitted, "waiting": waiting,
            "ttft_seconds": float(load["ttft_seconds"]), "ttft_upper_seconds": float(load["ttft_burst_seconds"]),
            "admission_wait_seconds": float(load["admission_wait_seconds"]), "waves": int(load["waves"]),
            "requests_per_second": float(load["requests_per_second"]),
            "requests_per_second_waves": float(load["requests_per_second_burst"]),
            "source": "estimate/serving_load.py burst_over_pool: formulas/serving_queue.py eqs. Q14a, Q14b"}


def burst_warning(burst: dict[str, Any], replicas: int) -> str:
    """The warning of a fit's ``burst_figure``: what a burst of the stated concurrency gets, sent at once."""
    each = " on each replica" if replicas > 1 else ""
    return (f"sent at once, the {burst['requests']:,} requests{each} run {burst['admitted']:,} at a time (the rest "
            f"wait for a free slot): first token after {burst['ttft_seconds']:.1f} s on average (eq. Q14a), at most "
            f"{burst['ttft_upper_seconds']:.1f} s ({burst['waves']} waves in lockstep, eq. Q14b), "
            f"{burst['requests_per_second']:.3g} requests/s{each} (formulas/serving_queue.py eq. Q14)")


def prefill_chunk_tokens(est: Estimate) -> int | None:
    """The prompt tokens the engine of ``est`` schedules per step, as its memory estimate applied them (vLLM's
    max_num_batched_tokens, SGLang's chunked_prefill_size); None where the estimate names none (llama.cpp: its
    n_batch default, estimate/serving_load.py)."""
    for a in est.assumptions:
        if a.name in ("max_num_batched_tokens", "chunked_prefill_size") and isinstance(a.value, int):
            return a.value
    return None


def queue_details(concurrency: int, replicas: int, per: int, running: int,
                  sp: SpeedEstimate | None) -> dict[str, Any]:
    """The queue of a serving fit: the sequences all replicas run at once (min(concurrency, running x replicas)), those
    waiting, and, with a speed, the mean wait of a queued request on the fullest replica (formulas/serving_queue.py
    eq. Q3 over its ``per`` in flight, ``running`` slots each held one request's time: the speed's
    ``request_seconds``, formulas/network.py eq. 9)."""
    total, queued = running_and_queued(concurrency, running * replicas)  # estimate/inference/common.py eqs. R1-R2
    held = sp.request_seconds if sp is not None else None
    # none running (a pool that holds no sequence): nothing is served, no wait to state
    wait = queue_wait_seconds(per, running, held) if held is not None and running >= 1 else None
    return {"running_sequences": total, "queued_sequences": queued, "queue_wait_seconds": wait}


def wait_before_ttft(details: dict[str, Any]) -> float | None:
    """The queue wait a fit's ``details`` state that its TTFT does not hold: ``queue_wait_seconds`` (eq. Q3, a
    queued request's wait above the engine's running cap at a concurrency), None at a request rate, where
    ``queue_wait_seconds`` is the wait for admission (eq. Q12) already in the TTFT (``queue_wait_in_ttft``)."""
    return None if details.get("queue_wait_in_ttft") else details.get("queue_wait_seconds")


def first_token_seconds(ttft: float | None, wait: float | None) -> float | None:
    """A request's time to its first token at the load, the one figure every latency limit is checked against
    (recommend, format_search, plan's latency-ttft check): its TTFT once running (``SpeedEstimate.ttft_seconds``)
    plus its mean wait for a running slot where requests queue above the engine's cap (``queue_details``'s
    ``queue_wait_seconds``: formulas/serving_queue.py eq. Q3; None or 0 where none waits). None without a TTFT."""
    return None if ttft is None else ttft + (wait or 0.0)


def slow_first_token(sp: SpeedEstimate | None, concurrency: int, wait: float | None) -> str | None:
    """The warning of a deployment whose request waits past efficiency.ATTENTION_LIMIT_SECONDS (Nielsen 1993) for
    its first token at ``concurrency`` requests in flight (``first_token_seconds``: the TTFT at that load plus ``wait``,
    a queued request's wait for a running slot, eq. Q3), the one warning fit, infer on a device, fit --auto and plan
    give for it (at a request rate, rate_capacity.py ``rate_warnings``); None within it or without a speed."""
    past = E.past_attention_limit(first_token_seconds(sp.ttft_seconds, wait)) if sp is not None else None
    if past is None or sp is None:
        return None
    return (f"at concurrency {concurrency} this deployment {past}"
            + (f" ({wait:.1f} s of it waiting for a running slot, formulas/serving_queue.py eq. Q3)" if wait else "")
            + f"; alone it answers in {sp.ttft_idle_seconds or 0.0:.2f} s; shorter prompts, fewer requests at once, "
            "more replicas or faster devices lower it")


def queue_note(queue: dict[str, Any], per: int, running: int, details: dict[str, Any]) -> Assumption:
    """The assumption that names the queue and its effect on time to first token and throughput."""
    wait = queue["queue_wait_seconds"]
    cap = details.get("running_cap_name", "its cap")
    effect = (f"a queued request waits {wait:.2f} s on average before its prefill (W x (C / R - 1), C {per} in flight "
              f"and R {running} running per replica)" if wait is not None else "its wait is unknown (no speed)")
    return Assumption("queue", queue["queued_sequences"], True,
                      f"{queue['queued_sequences']} requests wait for a running slot ({cap} {running} per replica): "
                      f"{effect}; the time to first token shown is the running request's, the tokens/s the "
                      f"{running} running sequences' (queued ones add none): formulas/serving_queue.py eqs. Q1-Q3, "
                      "Little's law")


def rate_seconds(sp: SpeedEstimate | None, engine: str, rate: float, chunk: int | None,
                 grid: list[list[float]] | None = None) -> float:
    """A layout's mean request seconds (TTFT + the output's steps, eq. Q10) with each replica at ``rate`` arrivals
    per second (serving_load.at_rate), the wait for the sequences it admits added where ``grid`` gives its X(k)
    (eq. Q13, serving_load.admission_wait); infinite past its capacity (eq. Q10a or X(c): no steady state) or with
    no speed. Memoized on ``sp`` and ``grid`` themselves (``_speed_cached``'s estimate and ``layout_grid``'s X(k),
    each kept alive by the memo and the hit checked to be the same objects): a rate's climb ranks every layout at each
    requests-in-flight count it visits, and where a layout runs the same sequences at two counts (its admitted or
    capped share) it asks the same question again."""
    key = (id(sp), engine, rate, chunk, id(grid))
    hit = _RATE_SECONDS_MEMO.get(key)
    if hit is not None and hit[0] is sp and hit[1] is grid:
        return hit[2]
    try:
        out = at_rate(sp, engine, rate, chunk, closed=grid)
        out = admission_wait(out, engine, rate) or out
    except InputError:
        seconds = math.inf
    else:
        load = out.load if out is not None else None
        seconds = float(load["request_seconds"]) if load and "request_seconds" in load else math.inf
    if len(_RATE_SECONDS_MEMO) > 4096:
        _RATE_SECONDS_MEMO.clear()
    _RATE_SECONDS_MEMO[key] = (sp, grid, seconds)
    return seconds


# ``rate_seconds`` of one layout's speed and X(k) grid at a per-replica rate (keyed on the objects' ids, which the
# values keep alive)
_RATE_SECONDS_MEMO: dict[tuple[Any, ...], tuple[SpeedEstimate | None, list[list[float]] | None, float]] = {}


def admitted_per_replica(details: dict[str, Any]) -> int | None:
    """The sequences a pool engine admits at once per replica (eq. R1's bounds: its running cap, its KV pool's room;
    ``admission_queued``'s A); None where it has neither."""
    bounds = [int(b) for b in (details.get("running_cap"), details.get("max_concurrency_at_context")) if b is not None]
    return min(bounds) if bounds and min(bounds) >= 1 else None


_CLOSED_MEMO: dict[tuple[int, str, int | None], tuple[SpeedEstimate, dict[str, Any] | None]] = {}
# eq. Q13's X(k) grid of one layout (``_fit_at``'s ``layout_grid``), keyed like _CLOSED_MEMO on the speed at c
_GRID_MEMO: dict[tuple[int, str, int | None], tuple[SpeedEstimate, list[list[float]] | None]] = {}


def closed_speed_load(sp: SpeedEstimate, engine: str, chunk: int | None) -> dict[str, Any] | None:
    """The closed load (``under_load``, eq. Q7) of the idle speed ``sp`` at its concurrency; None without one.
    Memoized on ``sp`` itself (``_speed_cached``'s estimate, kept alive by its memo; the hit checked to be the same
    object), since every step of the rate's fixed point asks each layout for the same closed loads (eq. Q13's X)."""
    key = (id(sp), engine, chunk)
    hit = _CLOSED_MEMO.get(key)
    if hit is not None and hit[0] is sp:
        return hit[1]
    closed = under_load(sp, engine, chunk)
    load = closed.load if closed is not None and closed.load else None
    if len(_CLOSED_MEMO) > 4096:
        _CLOSED_MEMO.clear()
    _CLOSED_MEMO[key] = (sp, load)
    return load


def rate_take(rate_layouts: dict[int, float] | None, within: list[int]) -> int | None:
    """The tensor-parallel degree ``fit`` takes at a request rate: the first of ``quickest_first`` over the layouts
    within a machine whose own answer carries the rate (finite mean request seconds, ``rate_layout_seconds``); None
    where none does or there was no ranking (the climb then takes the first layout that fits at each C)."""
    if not rate_layouts:
        return None
    return next((t for t in quickest_first({t: rate_layouts.get(t, math.inf) for t in within})
                 if math.isfinite(rate_layouts.get(t, math.inf))), None)


def quickest_first(seconds: dict[int, float]) -> list[int]:
    """Tensor-parallel degrees ordered by their layouts' mean request seconds at a rate (``rate_seconds``), the
    quickest first, a tie to the smaller degree; ``fit`` takes the first that fits."""
    return sorted(seconds, key=lambda t: (seconds[t], t))


def serving_layout_text(tp: int, pp: int = 1, dp: int = 1, ep: bool = False) -> str:
    """One replica's serving layout in words, the one home of fit's header, recommend's options and the plan:
    'TP t', 'TP t x PP p', 'TP t x DP d' with data-parallel ranks, '... (EP d*t)' where the routed experts split
    over all of them (formulas/serving_expert_parallel.py eq. EP1: ep = dp x tp)."""
    return (f"TP {tp}" + (f" x PP {pp}" if pp > 1 else "") + (f" x DP {dp}" if dp > 1 else "")
            + (f" (EP {dp * tp})" if ep else ""))


def serving_engine_flags(engine: str, tp: int, pp: int = 1, dp: int = 1, ep: bool = False) -> str:
    """The engine's own flags that start one replica of this layout: vLLM 0.19.1 engine/arg_utils.py:836,849,874,925
    (``--tensor-parallel-size``, ``--pipeline-parallel-size``, ``--data-parallel-size``,
    ``--enable-expert-parallel``); SGLang 0.5.23 arg_groups/fields/parallel.py:45-51, 81-90, 281-288 (``--tp-size``
    over all of a replica's ranks, ``--attn-dp-size`` splitting its attention, ``--ep-size``; :192-194 and
    arg_groups/parallel_hook.py:39-62: the deprecated ``--dp-size D --enable-dp-attention`` resolves to it)."""
    if engine == "sglang":
        return (f"--tp-size {tp * dp}" + (f" --pp-size {pp}" if pp > 1 else "")
                + (f" --attn-dp-size {dp}" if dp > 1 else "") + (f" --ep-size {tp * dp}" if ep else ""))
    return (f"--tensor-parallel-size {tp}" + (f" --pipeline-parallel-size {pp}" if pp > 1 else "")
            + (f" --data-parallel-size {dp}" if dp > 1 else "") + (" --enable-expert-parallel" if ep else ""))


def layout_words(t: int, count: int, pp: int = 1, dp: int = 1, ep: bool = False) -> str:
    """A serving layout on ``count`` devices as fit's words name it: one replica's layout (``serving_layout_text``)
    x the replicas: 'TP 8 x 2', 'TP 8 x PP 2 x 1' with pipeline stages, 'TP 2 x DP 4 (EP 8) x 1' with data-parallel
    ranks (each replica t x pp x dp devices: ``ServingLayout.replicas``), so a degree ranked inside a data-parallel
    layout is named with its ranks, not as the bare 'TP 2 x 1' of one rank."""
    return f"{serving_layout_text(t, pp, dp, ep)} x {max(1, count // (t * pp * dp))}"


def rate_layout_why(tp: int, count: int, per_node: int, rate: float, seconds: dict[int, float],
                    fits: dict[int, bool], pp: int = 1, dp: int = 1, ep: bool = False) -> str:
    """Why ``fit`` took ``tp`` at a request rate: the quickest layout that fits (``quickest_first``), each other
    degree's mean request seconds beside it (``pp``, ``dp``, ``ep``: each replica's stages and data-parallel ranks,
    ``layout_words``)."""
    def said(t: int) -> str:
        w = seconds[t]
        return (f"{layout_words(t, count, pp, dp, ep)}: " + (f"{w:.3g} s a request" if math.isfinite(w) else "past its capacity")
                + (", fits" if fits.get(t) else ", does not fit" if t in fits else ", not sized"))
    others = "; ".join(said(t) for t in quickest_first(seconds) if t != tp)
    if not others:  # one degree within a machine (one-device instances): no degree across machines at a rate
        return (f"{layout_words(tp, count, pp, dp, ep)}: {seconds[tp]:.3g} s a request at {rate:g} requests/s, the one layout "
                f"within a machine of {per_node} (at a rate fit takes the layouts within a machine, each at its own "
                f"answer, ``rate_layout_seconds``: a degree across machines only where every layout within refuses the "
                f"rate)")
    return (f"{layout_words(tp, count, pp, dp, ep)}: {seconds[tp]:.3g} s a request at {rate:g} requests/s, the quickest that fits "
            f"within a machine of {per_node} (the rule at a rate: every stable layout puts out the rate's tokens/s, so "
            f"the least mean request time, TTFT + the wait for admission + the output's steps, each replica at its "
            f"share of the rate, formulas/serving_queue.py eqs. Q10, Q13; {others})")


def tensor_parallel_why(tp: int, count: int, per_node: int, concurrency: int, within: list[int], across: list[int],
                        layout_tps: dict[int, float | None], fits: dict[int, bool], rule: str, pp: int = 1,
                        dp: int = 1, ep: bool = False) -> str:
    """Why ``fit`` took tensor parallelism ``tp`` (its ``tensor_parallel`` assumption): the fastest layout that fits
    within one machine, each other degree's tokens/s beside it (fastest first; 'does not fit' where it was sized and
    does not), or the smallest across machines that fits, or none fits; then ``rule``."""
    seqs = f"{concurrency} sequence{'s' if concurrency != 1 else ''}"
    if tp in within and fits.get(tp) and len(within) > 1 and layout_tps.get(tp) is not None:
        best = float(layout_tps[tp] or 0)
        others = "; ".join([f"{layout_words(t, count, pp, dp, ep)}: {float(layout_tps[t] or 0):,.0f} tokens/s, "
                            + ("fits" if fits.get(t) else "does not fit" if t in fits else "not sized")
                            + (" (a tie: the smaller degree taken)" if fits.get(t) and t > tp
                               and float(layout_tps[t] or 0) == best else "")
                            + (" (a tie: fits at the expected need only, so the degree that fits at its high end "
                               "taken)" if fits.get(t) and t < tp and float(layout_tps[t] or 0) == best else "")
                            for t in fastest_first(layout_tps) if t != tp]
                           + [f"{layout_words(t, count, pp, dp, ep)} does not fit" for t in within if t not in layout_tps])
        how = (f"{layout_words(tp, count, pp, dp, ep)}: {best:,.0f} output tokens/s at {seqs}, the fastest that fits within a "
               f"machine of {per_node} (the rule: the most output tokens/s of all replicas together among the "
               f"layouts that fit, a tie to the smaller degree that fits at its high end too; {others}): each layout's tokens/s at this load from "
               "the speed model, idle replicas adding none")
    elif tp in within and fits.get(tp):
        how = (f"the only degree within a machine of {per_node}" if len(within) == 1 else
               f"the only one of {', '.join(map(str, within))} within a machine of {per_node} that fits"
               if not layout_tps else
               f"the largest that fits of {', '.join(map(str, within))} within a machine of {per_node} (no speed "
               "estimate to rank them by)")
    elif fits.get(tp):
        how = (f"none of {', '.join(map(str, within))} within a machine of {per_node} fits: the first that fits of "
               f"{', '.join(map(str, across[:across.index(tp) + 1]))} across machines, smallest first")
    else:
        how = f"none of {', '.join(map(str, within + across))} fits: the largest degree shown"
    return f"{how}; {rule}"


def read_kwh_price(kwh_price: object) -> float | None:
    """``kwh_price`` read by the --kwh-price flag's reader and range (numbers.KWH_PRICE, request/quantities.py
    parse_money), so that Python's fit and fit_training refuse what the CLI and the web refuse, naming the field."""
    if kwh_price is None:
        return None
    try:
        return parse_money(kwh_price, "kWh", KWH_PRICE)
    except InputError as e:
        raise FieldError("kwh_price", f"kwh_price: {e}") from None


def serving_cost(device: Device, count: int, instance: Instance | None, kwh_price: float | None,
                 tokens_per_second: float | None) -> dict[str, Any]:
    """The hourly price of ``count`` x ``device`` (``hourly_price``: an instance's on-demand price, a given price, or
    owned hardware's power at ``kwh_price``) and, with a speed, its cost per million output tokens
    (formulas/cost.py eq. (2) over every replica's tokens/s: the price is the whole target's). The one home of a
    serving fit's cost: ``fit --json``, the web API's /fit and the Python API's ``fit(...).cost`` read it."""
    price, kind, how = hourly_price(device, count, instance, kwh_price)
    return {"price_per_hour": price, "basis": how or kind,
            "per_million_tokens": cost_per_million_tokens(price, tokens_per_second)
            if price is not None and tokens_per_second else None}


def training_cost(device: Device, count: int, instance: Instance | None, kwh_price: float | None,
                  timing: dict[str, Any] | None) -> dict[str, Any]:
    """A training fit's top-level cost: the target's hourly price by the rule ``serving_cost`` prices a serving fit
    by (``hourly_price``) and, with a run timed, its cost in USD (``run``): ``timing`` is ``training_time``
    (``duration.training_time_on``), whose price and cost are read here, not computed again, so ``fit --train
    --json``'s ``cost`` and ``training_time`` carry one number."""
    price, kind, how = hourly_price(device, count, instance, kwh_price)
    if timing is not None:
        price = timing["price_per_hour"]
    return {"price_per_hour": price, "basis": how or kind, "run": timing["cost"] if timing is not None else None}


def _split_speed(spec: ModelSpec, est: Estimate, device: Device, host_device: str | Device | None,
                 hardware_files: Sequence[str | Path], instance: Instance | None, fmt: str, prompt: int, out: int,
                 concurrency: int, sp: SpeedEstimate, warnings: list[str]) -> SpeedEstimate:
    """The decode of a llama.cpp split (eq. 8) in place of the one-device decode, for one sequence."""
    split = est.details.get("split")
    if not split or device.kind == "cpu":
        return sp
    host_holds = host_holds_weights(split)
    gpus = sum(1 for d in split["devices"] if d["device"] != "host" and d["n_layers"])
    if not host_holds and gpus <= 1:
        return sp
    host = host_device if isinstance(host_device, Device) else None  # resolved and checked by fit
    if host is None and host_holds:
        warnings.append("layers or experts run on the CPU: give --host-device (a CPU from the catalog: `llmsizer "
                        "hardware list --kind cpu`) for the decode speed of the split")
    if host_holds and is_apple_own_host(host):
        bw = host.bandwidth if host is not None else None
        warnings.append(APPLE_OWN_HOST_WARNING.format(chip=device.id, bw=f"{bw / 1e9:.4g} GB/s" if bw else "unknown"))
    # on a Mac the host part is the same unified memory: its transfers are copies within it (device.host_link), no PCIe
    own = is_apple_own_host(host)
    link = host_link(device)[0] if own else link_bandwidth_for(device, instance, hardware_files)
    if host_holds and sp.prefill is not None:  # eq. 8p: each ubatch copies the host's weights to the GPU
        sp = _split_prefill_speed(spec, split, sp, prompt, est, host, host_link(device), warnings,
                                  gpu_runtime(device))
    res = split_decode(spec, split, device, host, sp.weights_format, prompt + out // 2, int(est.details.get("n_ctx", prompt + out)),
                       link)
    warnings.extend(res.get("warnings", []))
    res["link"] = "unified-memory copy" if own else "PCIe"
    if res.get("seconds") is None:
        return replace(sp, decode=None, decode_single=None, roofline_decode=None,
                       assumptions=_without(sp.assumptions, "decode_range_band")) if host_holds else sp
    t = PhaseTime(res["seconds"], 0.0, res["memory_seconds"], res["transfer_seconds"], res["overhead_seconds"])
    # host-held layers or experts: no validation row measures such a decode, so no calibrated range (decode_band)
    details = dict(sp.details, split_decode=res, **({"split_decode_on_host": True} if host_holds else {}))
    if host_holds:
        sp = replace(sp, assumptions=_without(sp.assumptions, "decode_range_band"))
    if "exchange_seconds" in res:  # -sm row: the named latency of its exchanges (eq. 8r), stated like every default
        a = E.LLAMACPP_ROW_EXCHANGE
        sp = replace(sp, assumptions=(*sp.assumptions, Assumption(a.name, res["exchange_seconds"], True,
                                                                  f"{a.source}; range {a.low:g}-{a.high:g} s, the "
                                                                  "decode range does not span it")))
    if concurrency > 1:
        warnings.append("the split's decode time (eq. 8) is for one sequence; the decode of several sequences at "
                        "once assumes every layer on one device")
        return replace(sp, decode_single=t, details=details)
    return replace(sp, decode=t, decode_single=t, details=details)



def _split_prefill_speed(spec: ModelSpec, split: dict[str, Any], sp: SpeedEstimate, prompt: int, est: Estimate,
                         host: Device | None, host_link: tuple[float, str], warnings: list[str],
                         runtime: str = "cuda") -> SpeedEstimate:
    """``sp`` with the prefill of a split whose host holds weights (``speed.split_prefill``, eq. 8p) in place of
    the all-on-GPU one, the host's weights copied over the GPU's host link (``host_link``: estimate/device.py
    host_link's figure and words, not the link between GPUs); no calibrated prefill range
    (``SpeedEstimate.prefill_band``: no row measured a split); ``runtime``: the GPU's (device.gpu_runtime), whose
    llama.cpp backend the threshold's source is (``formulas.speed.op_offload_source``)."""
    assert sp.prefill is not None
    link, link_why = host_link
    ubatch = int(est.details.get("n_ubatch") or LLAMACPP_N_UBATCH)
    res = split_prefill(spec, split, sp.prefill, prompt, ubatch, host, sp.weights_format, link,
                        int(est.details.get("n_ctx") or prompt))
    if res["host_seconds"] == float("inf"):
        warnings.append(f"the prompt's last ubatch is under {OP_OFFLOAD_MIN_BATCH} tokens and runs on the CPU: give "
                        "--host-device (a CPU from the catalog) for its time")
        return replace(sp, prefill=None, roofline_prefill=None, details=dict(sp.details, split_prefill=res),
                       assumptions=_without(sp.assumptions, "prefill_range_band"))
    p = sp.prefill
    t = PhaseTime(res["seconds"], p.compute_seconds, p.memory_seconds + res["host_seconds"],
                  p.comm_seconds + res["transfer_seconds"], p.overhead_seconds, p.attention_seconds, p.host_seconds,
                  p.elementwise_seconds)
    backend, offload_op = op_offload_source(runtime)
    a = Assumption("op_offload_min_batch", OP_OFFLOAD_MIN_BATCH, True,
                   f"llama.cpp's {backend} offload threshold: each ubatch of {OP_OFFLOAD_MIN_BATCH} tokens or more (here "
                   f"{res['ubatches']} of n_ubatch {ubatch}) copies the host's "
                   f"{(res['host_layer_bytes'] + res['host_expert_bytes']) / 2**30:.2f} GiB of weights (the experts "
                   f"it routes to) and the host layers' K/V cells it attends over the host link ({link_why}) to "
                   "the GPU, which runs "
                   f"their products and attention ({offload_op}, {OP_OFFLOAD_MIN_BATCH} tokens and more; "
                   "formulas/speed.py eq. 8p); a larger -ub copies them fewer times; the link's pinned rate (under "
                   "llama.cpp's default mmap the host weights are pageable, slower: a lower bound); no calibrated "
                   "prefill range (no validation row measures a split)")
    return replace(sp, prefill=t, assumptions=(*_without(sp.assumptions, "prefill_range_band"), a),
                   details=dict(sp.details, split_prefill=res))


def _without(assumptions: tuple[Assumption, ...], name: str) -> tuple[Assumption, ...]:
    """``assumptions`` less the one named ``name``: a split's range has no band (SpeedEstimate.prefill_band,
    decode_band), so the band the all-on-GPU estimate named (ranges.llamacpp_band) is not its."""
    return tuple(a for a in assumptions if a.name != name)


_TRAINING_CACHE: dict[tuple[int, tuple[tuple[str, type, Any], ...]], Any] = {}


def _training_estimate(spec: ModelSpec, fields: dict[str, Any]) -> Estimate:
    """estimate_training memoised per (spec, fields): per-device training memory does not depend on the device
    type, so a catalog-wide search evaluates each (device count, ZeRO stage, memory) once, not once per device.
    Keyed on each field's value and its type (micro_batch 1 and True are two questions, the second refused:
    tests/consistency/test_training_memo_types.py)."""
    types = tuple(map(type, fields.values()))
    if any(map(issubclass, types, repeat(list))):
        key = (id(spec), tuple(sorted((k, type(v), tuple(v) if isinstance(v, list) else v) for k, v in fields.items())))
    else:  # no list among the values: the same (name, type, value) triples, zipped in C (the names are distinct)
        key = (id(spec), tuple(sorted(zip(fields, types, fields.values(), strict=True))))
    hit = _TRAINING_CACHE.get(key)
    if hit is None or hit[0] is not spec:
        if len(_TRAINING_CACHE) > 4096:
            _TRAINING_CACHE.clear()
        hit = (spec, estimate_training(spec, **fields))
        _TRAINING_CACHE[key] = hit
    return hit[1]  # type: ignore[no-any-return]


def training_on_memory(spec: ModelSpec, fields: dict[str, Any], memory: int, headroom: float | None) -> Estimate:
    """``estimate_training`` on devices of ``memory`` bytes (memoised for catalog-wide searches): with several devices
    and no sharding given, its least-sharded ZeRO stage that fits (``training/compose.py`` ``sharded_workload``, the
    one rule) is taken and recorded as the ``zero`` assumption (none is chosen when
    ``grad_sync``, a DDP setting, is given)."""
    return _training_estimate(spec, dict(fields, memory=memory, headroom=headroom))


def training_on_device(spec: ModelSpec, fields: dict[str, Any], memory: int, headroom: float | None, device: Device,
                       notes: Notes, typed: object = None) -> Estimate:
    """``training_on_memory`` on ``device`` (``memory``: its usable bytes, ``notes``: ``target_memory``'s notes behind
    them), with the device's named notes first (estimate/device.py ``named_device_notes``: the device, a runtime
    stand-in, where its memory came from, and their warnings): the one path of `fit --train` (``fit_training``) and
    the training plan, so both say the same assumptions. An attention kernel ``device`` cannot run is refused here,
    memory asked or not (training/setup.py ``refuse_attention_kernel``), as the duration refuses it."""
    # the workload the estimate builds (training_workload: one object for both)
    refuse_attention_kernel(spec, training_workload(dict(fields, memory=memory, headroom=headroom)), device)
    return with_device_notes(training_on_memory(spec, fields, memory, headroom), named_device_notes(device, notes,
                                                                                                    typed))


def zero_chosen(est: Estimate) -> Assumption | None:
    """The ZeRO stage ``training_on_memory`` chose for ``est`` (its ``zero`` assumption with ``ZERO_WHY`` or
    ``ZERO_NONE_FITS_WHY``); None where the stage was given, or none was needed. The one reading of "the stage the
    memory took", at which the run is timed (fit --train, the plan, the provider's alternatives) and which the
    reverse questions keep."""
    return next((a for a in est.assumptions if a.name == "zero" and a.why in (ZERO_WHY, ZERO_NONE_FITS_WHY)), None)


def refuse_unknown_memory(device: Device, usable: int | None) -> int:
    """A training run on ``device`` is judged against its memory (the budget): a device whose memory no source
    gives is refused with how to give one, the one rule of ``fit --train``, ``train --device``, the web's /fit and
    /train and ``fit_training`` / ``estimate_training(device=)`` (a device known only by its kind, ``cpu`` /
    ``gpu``, is the caller's to allow: ``train`` sizes for it with no verdict)."""
    if usable is None:
        raise InputError(f"{device.id} has no sourced memory size; give one with --memory (e.g. 80GiB; "
                         "memory= in Python, resources.memory in a request file)")
    return usable


def training_layout(fields: dict[str, Any], est: Estimate, count: int, searched: Sequence[str] = ()) -> str:
    """The layout a training run on ``count`` devices takes, in words: the sharding (``fields``' fsdp, or the ZeRO
    stage: the one stated, else the one ``training_on_memory`` chose, ``zero_chosen``), tensor / pipeline / expert /
    context parallelism and offload as ``fields`` state them (``searched``: the degrees ``recommend --train``'s
    scale-out search chose, read so; sequence parallelism named with them, on or, where the search chose it off,
    off). What a search's option names
    (``recommend --train`` and a plan's alternatives: each option's memory is this layout's)."""
    taken = zero_chosen(est)
    parts: list[str] = []
    if fields.get("fsdp"):
        parts.append(f"FSDP {fields['fsdp']} (stated)")
    elif count > 1:
        zero = int(taken.value) if taken is not None else int(fields.get("zero") or 0)
        kind = f"ZeRO-{zero}" if zero else "DDP (ZeRO-0, no sharding)"
        why = ("the least-sharded stage that fits" if taken is not None and taken.why == ZERO_WHY else
               "no stage fits: the one needing least memory" if taken is not None else
               "stated" if fields.get("zero") is not None else "no sharding needed")
        parts.append(f"{kind} ({why})")
    for key, name in (("tp", "TP"), ("pp", "PP"), ("ep", "EP"), ("context_parallel", "CP")):
        if int(fields.get(key) or 1) > 1:
            parts.append(f"{name} {fields[key]} ({'searched' if key in searched else 'stated'})")
        if key == "tp" and int(fields.get("tp") or 1) > 1:  # it changes the activations and the time (TP's own split)
            if "sequence_parallel" in searched:  # on or off, as recommend_layout's SP_SEARCH chose
                parts.append("sequence parallel (searched)" if fields.get("sequence_parallel")
                             else "no sequence parallelism (searched)")
            elif fields.get("sequence_parallel"):
                parts.append("sequence parallel (stated)")
    if "grad_accumulation" in searched:  # scaled to keep the memory-first layout's global batch (recommend_layout)
        parts.append(f"grad accumulation {fields['grad_accumulation']} (searched: the same global batch)")
    if fields.get("etp") is not None:
        parts.append(f"ETP {fields['etp']} (stated)")
    if fields.get("offload", "none") != "none":
        parts.append(f"offload {fields['offload']} (stated)")
    return ", ".join(parts) if parts else "one device, no sharding"


def fit_training(model: ModelSpec | str, hardware: str | Device | Instance, count: int | None = None, *,
                 headroom: float | None = None, memory: int | None = None,
                 hardware_files: Sequence[str | Path] = (), tokens: float | None = None,
                 utilization: float | None = None, kwh_price: float | None = None, fits_at: bool = True,
                 **training_fields: Any) -> FitResult:
    """Fit a training workload (keyword fields of TrainingWorkload) on ``count`` x ``hardware`` (``"detected"`` or a
    ``Detection``: the detected machine's device, as ``fit``): the per-device
    memory and verdict are ``estimate_training``'s with the device's memory and the headroom, so ``fit --train``
    and ``train --memory`` give one answer. With several devices and no sharding given, the least-sharded ZeRO
    stage that fits is taken (less communication first: 0 -> 1 -> 2 -> 3) and recorded. With ``tokens``, the
    run's wall clock, hourly price and cost (``training_time``: ``duration.training_time_on``, the rule
    ``fit --train --tokens`` and ``train --device --tokens`` print). When it does not fit, ``FitResult.fits_at``
    names the settings that do (``training_fits_at``); ``fits_at`` False: not searched (a search over candidates)."""
    spec = spec_of(model)
    kwh_price = read_kwh_price(kwh_price)
    hardware, count, hardware_files = detected_machine(hardware, count, hardware_files)  # 'detected', a Detection
    p = _training_placement(hardware, count, headroom, memory, hardware_files, training_fields)
    device, n, target, instance, hr, usable, notes, fields = p
    assumptions = [headroom_assumption(headroom), *notes.assumptions]
    # the device and its memory named by the estimate (which `train --device` renders), its warnings first, as
    # estimate_training(device=) names and says them
    est = training_on_device(spec, fields, usable, headroom, device, notes, hardware)
    taken = zero_chosen(est)
    chosen = [taken] if taken is not None else []
    assumptions += chosen
    d = est.details
    lo, need, hi = est.total("device")
    fits, reasons = bool(d["fits"]), [str(d["verdict"])]
    if any(i.bytes for i in est.items if i.location == "host" and i.name != "host_runtime"):  # offloaded, paged
        host = training_host(p, est.total("host")[1])
        fits = fits and host["short"] is None
        reasons.append(host["short"] or host["words"])
        if host["ram"] is None:
            assumptions.append(Assumption("host_memory", "not checked", True, host["words"]))
        else:  # the margin host_memory_verdict kept free of the instance's RAM, named as fit's llama.cpp check names it
            assumptions.append(host_fit_target_assumption())
    tp = int(fields.get("tp", 1))
    dur, timing = None, None
    if tokens is not None:
        from .duration import training_time_on  # duration.py imports this module
        timed = {k: v for k, v in training_fields.items() if v is not None}
        if chosen:  # the stage the memory took is the run that is timed (as the plan times it)
            timed["zero"] = chosen[0].value
        dur, price, cost = training_time_on(spec, hardware, n, tokens, timed, utilization, kwh_price, hardware_files,
                                            limit_warning=fits_at)  # a search (recommend) applies the limit itself
        timing = {**dur.to_dict(), "price_per_hour": price, "cost": cost}
    at = None
    changed: tuple[dict[str, Any], ...] = ()
    if fits_at and not fits:
        at = training_fits_at(spec, hardware, count, training_fields, headroom=headroom, memory=memory,
                              hardware_files=hardware_files)
        if at is None:  # nothing that keeps the caller's settings fits: what does with them changed, so marked
            changed = tuple(training_fits_if_changed(spec, hardware, count, training_fields, headroom=headroom,
                                                     memory=memory, hardware_files=hardware_files))
    # the high end is the verdict's (verdict.py high_end: the calibrated high end where it is higher), the one
    # `fit --train` and `train` print; the items' summed ranges' high, kept under its own name
    # replicas: the data-parallel degree, gpus / (tp x pp x cp) (TrainingWorkload.dp), not gpus / tp (probe15 D6)
    dp = training_workload(dict(fields, memory=usable, headroom=headroom)).dp  # (the estimate's workload)
    return FitResult("training", spec.name, target, device.id, n, tp, dp, "", "", fits, need,
                     verdict_high(est) or hi, int(d["memory_budget"]), hr, est, None, timing, tuple(reasons),
                     tuple(assumptions), tuple(est.warnings),
                     {"usable_memory_per_device": usable, "components_high_per_device": hi}, dur, fits_at=at,
                     fits_if_changed=changed, instances=instances_for(n, instance),
                     cost=training_cost(device, n, instance, kwh_price, timing))


def training_estimate(fr: FitResult) -> Estimate:
    """``fr``'s estimate (a ``fit_training`` result) with ``fr``'s verdict: the device memory's and, where offload=
    keeps states in host RAM, the machine's RAM (``training_host``, the one host check), its words after the
    device's. ``train --device INSTANCE`` (estimate/training/compose.py ``_on_instance``) and the web training tab
    answer with it, so they and ``fit --train`` give one verdict (probe28 D2)."""
    est = fr.estimate
    assert est is not None  # (a training fit always has its estimate)
    if len(fr.reasons) < 2:  # no host part checked: the estimate's own verdict is fit's
        return est
    details = {**est.details, "fits": fr.fits, "verdict": "; ".join(fr.reasons)}
    return est.but(details=details)


class _Placement(NamedTuple):
    """Where ``fit_training`` puts a training run: the device, its count, the target's name, the instance (None: a
    device), the headroom in force, the usable memory per device, its notes, and the workload fields on it."""

    device: Device
    n: int
    target: str
    instance: Instance | None
    headroom: float
    usable: int
    notes: Notes
    fields: dict[str, Any]


def _training_placement(hardware: str | Device | Instance, count: int | None, headroom: float | None,
                        memory: int | None, hardware_files: Sequence[str | Path], training_fields: dict[str, Any]
                        ) -> _Placement:
    """``fit_training``'s device, count, memory and workload fields (the one reading, which its ladder's steps,
    ``training_fits_at``, share)."""
    gpus = training_fields.get("gpus")
    if count is not None and gpus is not None and gpus != count:
        raise InputError(f"count ({count}) and gpus ({gpus}) name different numbers of devices; give one")
    named = "count" if count is not None else "gpus"  # the field the devices were given in: the one a refusal names
    count = count if count is not None else gpus  # the workload's devices are the target's (one count)
    device, n, target, instance = target_and_count(hardware, count, hardware_files, instances=True)
    refuse_training_apart(device, n, named)  # several MIG devices: no NCCL group over them (device.py, one rule)
    hr = check_headroom(headroom)
    usable, notes = target_memory(device, instance, memory)
    usable = refuse_unknown_memory(device, usable)
    fields = {k: v for k, v in training_fields.items() if v is not None}
    if n > 1 or count is not None:  # the devices the hardware names; one device unnamed is the workload's default
        fields.setdefault("gpus", n)
    if instance is not None and n > 1:  # an instance is one machine (hybrid sharding, collectives across machines)
        # (a gpus_per_node given that contradicts it, or machines it does not fill: refused, serving's one rule)
        fields["gpus_per_node"] = serving_machine_size(instance, fields.get("gpus_per_node"), n, named)
    elif fields.get("gpus_per_node") is not None:  # bare devices in machines of that size: whole machines, as serving
        serving_machine_size(None, fields["gpus_per_node"], int(fields.get("gpus") or n), named)
    elif instance is None and (domain := default_machine_size(device, int(fields.get("gpus") or n))) is not None:
        # bare GPUs of a larger NVLink domain than the default machine of 8 (an NVL72 rack): said, not assumed
        notes.warnings.append(domain[1])
    hardware_decides(device, fields)  # device=, gpu_runtime= are the hardware's (another: one line, not CPU rules)
    for k, v in training_device_fields(device).items():
        fields.setdefault(k, v)
    return _Placement(device, n, target, instance, hr, usable, notes, fields)


def training_host(p: _Placement, host_per_rank: int) -> dict[str, Any]:
    """A training run's host RAM per machine: each training process's host part (``host_per_rank``:
    ``est.total("host")[1]``, what offload= keeps pinned in host RAM and the host runtime; ZeRO partitions it over
    the ranks, Ren et al. 2021 section 4) times the processes on one machine (min(count, devices per machine: an
    instance's own, else the workload's gpus_per_node)), against the instance's RAM where the catalog gives it
    (``host_memory_verdict``, the one check of a host part, HOST_FIT_TARGET kept free); a bare device's host is not known.
    ``host_per_machine``, ``ram`` (None: not known), ``short`` (the verdict's words when it does not fit, else
    None), ``words`` (the need stated)."""
    per_node = (p.instance.device_count if p.instance is not None else
                int(p.fields.get("gpus_per_node") or TrainingWorkload.gpus_per_node))
    ranks = min(p.n, per_node)
    host = host_per_rank * ranks
    ram = int(p.instance.memory.base) if p.instance is not None and p.instance.memory is not None else None
    each = f"{ranks} training processes x {format_bytes(host_per_rank)}" if ranks > 1 else "one training process"
    short = None if ram is None else host_memory_verdict(
        host, ram, f"the states {each} offload{'s' if ranks == 1 else ''}", "pinned, and the host runtime")
    words = (f"host RAM: {format_bytes(host)} per machine ({each}: offloaded states and the host runtime) "
             + (f"of {format_bytes(ram)} ({p.instance.id if p.instance else ''} RAM)" if ram is not None else
                "not checked: give an instance (its RAM is checked)"))
    return {"host_per_machine": host, "ram": ram, "short": short, "words": words}


# The settings fit --train tries when a training run does not fit, least change to the run first: the same training
# recomputing each decoder layer's forward in the backward (the same result; one more forward, 4/3 of the step's
# FLOPs at forward:backward = 1:2: Chen et al. 2016, "Training Deep Nets with Sublinear Memory Cost"), then, under
# FSDP, FSDP's own mixed precision in place of torch.autocast (precision 'fsdp-bf16-mixed': FSDP2
# MixedPrecisionPolicy(param_dtype=bf16), as torchtitan and torchtune train; the matmuls get the same bf16 cast of
# the fp32 weights, all-gathered per unit and freed after instead of autocast's copies held until the backward,
# estimate/training/compose.py ``_fsdp_precision_hint``; full fine-tuning kept and no host traffic added: before
# offload; every other run refuses the precision, specs/training.py, so the step is skipped), then the same
# training with its optimizer states, master weights and gradients in host RAM (DeepSpeed ZeRO-Offload, Ren et al.
# 2021: the same result, a slower step), then its parameters too (ZeRO-3 parameter offload, ZeRO-Infinity:
# Rajbhandari et al. 2021; DeepSpeed's offload_param is valid with stage 3 only, which the memory's stage choice
# takes, estimate/training/compose.py ``sharded_workload``; FSDP's CPUOffloadPolicy), under FSDP then with its own
# mixed precision too, then LoRA adapters on a frozen base (Hu et al. 2021),
# then QLoRA's 4-bit base (Dettmers et al. 2023), each still checkpointing. A setting the caller gave is never
# changed by ``training_fits_at`` (a step that would change it keeps the caller's); a step its devices refuse
# (offload on an Apple GPU or a CPU, a stage given below 3 for parameter offload) is skipped.
TRAINING_LADDER: tuple[dict[str, str], ...] = (
    {"grad_checkpointing": "full"},
    {"grad_checkpointing": "full", "precision": "fsdp-bf16-mixed"},
    {"grad_checkpointing": "full", "offload": "optimizer"},
    {"grad_checkpointing": "full", "offload": "params"},
    {"grad_checkpointing": "full", "offload": "params", "precision": "fsdp-bf16-mixed"},
    {"method": "lora", "grad_checkpointing": "full"},
    {"method": "qlora", "grad_checkpointing": "full"},
)


def _in_effect(fields: dict[str, Any], key: str) -> Any:
    """The value of training field ``key`` a run of ``fields`` has: the one given, else TrainingWorkload's default
    (grad_checkpointing's from the method in effect: ``default_grad_checkpointing``, 'full' for QLoRA)."""
    if fields.get(key) is not None:
        return fields[key]
    if key == "grad_checkpointing":
        return default_grad_checkpointing(str(_in_effect(fields, "method")))
    return getattr(TrainingWorkload, key, None)


def _step_changes(training_fields: dict[str, Any], changes: dict[str, Any]) -> dict[str, Any]:
    """``changes`` (a ``TRAINING_LADDER`` step) less the settings already in effect in the run the step's other
    changes make (``_in_effect``: a hint never names a setting the run has, as QLoRA's default 'full'
    checkpointing), with what the step makes meaningless dropped (value None): a step that sets grad_checkpointing
    other than 'selective' drops a given ``recompute_modules``, Megatron-Core's list of what selective recompute
    recomputes (TrainingWorkload refuses it under any other mode), so the step is tried, not refused."""
    changes = {k: v for k, v in changes.items()
               if v != _in_effect({**training_fields, **{j: u for j, u in changes.items() if j != k}}, k)}
    if (changes.get("grad_checkpointing") not in (None, "selective")
            and training_fields.get("recompute_modules") is not None):
        return {**changes, "recompute_modules": None}
    return changes


def training_fits_at(spec: ModelSpec, hardware: str | Device | Instance, count: int | None,
                     training_fields: dict[str, Any], *, headroom: float | None = None, memory: int | None = None,
                     hardware_files: Sequence[str | Path] = ()) -> dict[str, Any] | None:
    """What ``fit_training`` names when the run does not fit: the first step of ``TRAINING_LADDER`` (the caller's own
    settings kept) whose run fits the same devices, its ``changes`` (field -> value) and memory per device against
    the budget; None when no step changes anything or none fits. Each step is ``fit_training``'s placement and
    memory need (``training_need``: the estimate's need without its words), so the ZeRO stage it takes on several
    devices is its own."""
    given = {k for k, v in training_fields.items() if v is not None}
    steps = (_step_changes(training_fields, {k: v for k, v in step.items() if k not in given})
             for step in TRAINING_LADDER)
    return _first_fitting(spec, hardware, count, training_fields, steps, headroom, memory, hardware_files)


def training_fits_if_changed(spec: ModelSpec, hardware: str | Device | Instance, count: int | None,
                             training_fields: dict[str, Any], *, headroom: float | None = None,
                             memory: int | None = None, hardware_files: Sequence[str | Path] = ()
                             ) -> list[dict[str, Any]]:
    """What fits when nothing that keeps the caller's settings does (``training_fits_at`` None): the first step of
    the same ``TRAINING_LADDER`` with the caller's settings changed where the step names them (``changes``, and
    ``changes_given``: the fields the caller gave that it changes), and the smallest device count that fits with
    every setting kept (``count``; an instance target: whole instances). Each with its memory per device against
    the budget; an empty list when neither fits. ``FitResult.fits_if_changed``: a key of its own, as ``fits_at``
    keeps the caller's settings."""
    given = {k for k, v in training_fields.items() if v is not None}
    steps = (_step_changes(training_fields, {k: v for k, v in step.items() if training_fields.get(k) != v})
             for step in TRAINING_LADDER)
    out = []
    at = _first_fitting(spec, hardware, count, training_fields, steps, headroom, memory, hardware_files)
    if at is not None:
        out.append({**at, "changes_given": sorted(k for k in at["changes"] if k in given)})
    out.extend(_more_devices(spec, hardware, count, training_fields, given, headroom, memory, hardware_files))
    return out


def _more_devices(spec: ModelSpec, hardware: str | Device | Instance, count: int | None,
                  training_fields: dict[str, Any], given: set[str], headroom: float | None, memory: int | None,
                  hardware_files: Sequence[str | Path]) -> list[dict[str, Any]]:
    """``training_fits_if_changed``'s count alternative: the smallest count (``_fewest_devices``) with the first
    ``TRAINING_LADDER`` step's defaults taken where the caller did not give them (activation checkpointing: the
    same training, one more forward; without it a 70B full fine-tuning on H100s asks 248 devices, with it 24), the
    changes marked, and the machines it spans (``machines``: count / ``gpus_per_node``, the workload's devices per
    machine: an instance's own, else the field's, TrainingWorkload's default 8) when past one: the count then
    rounded up to whole machines (17 H100s -> 24 = 3 x 8; a request's resources.count must split evenly over its
    resources.nodes, request/reader.py), its need taken again at that count."""
    defaults = _step_changes(training_fields, {k: v for k, v in TRAINING_LADDER[0].items() if k not in given})
    more = _fewest_devices(spec, hardware, count, {**training_fields, **defaults}, headroom, memory, hardware_files)
    if more is None:
        return []
    n = int(more["changes"]["count"])
    more["changes"] = {**more["changes"], **{k: v for k, v in defaults.items() if training_fields.get(k) != v}}
    try:
        p = _training_placement(hardware, n, headroom, memory, hardware_files,
                                {k: v for k, v in training_fields.items() if k != "gpus"})
    except InputError:
        return [more]
    per_node = int(p.fields.get("gpus_per_node") or TrainingWorkload.gpus_per_node)
    if n > per_node:  # past one machine: whole machines (a request's count splits evenly over its nodes)
        machines = -(-n // per_node)
        if machines * per_node != n:
            at = _training_step_need(spec, hardware, machines * per_node,
                                     {**{k: v for k, v in training_fields.items() if k != "gpus"}, **defaults},
                                     headroom, memory, hardware_files)
            if at is None or not at[0]:
                return []
            more.update(memory_per_device=at[1], budget_per_device=at[2], **at[3])
            more["changes"] = {**more["changes"], "count": machines * per_node}
        more.update(machines=machines, gpus_per_node=per_node)
    return [more]


def _first_fitting(spec: ModelSpec, hardware: str | Device | Instance, count: int | None,
                   training_fields: dict[str, Any], steps: Iterable[dict[str, Any]], headroom: float | None,
                   memory: int | None, hardware_files: Sequence[str | Path]) -> dict[str, Any] | None:
    """The first of ``steps`` (field -> value changes; an empty one or one tried already skipped) whose run fits
    ``count`` devices of ``hardware``: its changes, memory per device and budget; None when none does."""
    tried: list[dict[str, Any]] = []
    for changes in steps:
        if not changes or changes in tried:
            continue
        tried.append(changes)
        need = _training_step_need(spec, hardware, count, {**training_fields, **changes}, headroom, memory,
                                   hardware_files)
        if need is not None and need[0]:
            return {"changes": changes, "memory_per_device": need[1], "budget_per_device": need[2], **need[3]}
    return None


def _training_step_need(spec: ModelSpec, hardware: str | Device | Instance, count: int | None,
                        fields: dict[str, Any], headroom: float | None, memory: int | None,
                        hardware_files: Sequence[str | Path]) -> tuple[bool, int, int, dict[str, Any]] | None:
    """(fits, memory per device, budget per device, the host RAM where offload= puts states there:
    ``host_per_machine`` and ``host_ram``, else empty) of ``fields`` on ``count`` devices: ``fit_training``'s
    placement and need, its host part against an instance's RAM (``training_host``: a step the machine's RAM
    cannot hold does not fit); None when the workload or the devices refuse it (QLoRA under fp32 precision)."""
    try:
        p = _training_placement(hardware, count, headroom, memory, hardware_files, fields)
        refuse_attention_kernel(spec, training_workload(dict(p.fields, memory=p.usable, headroom=headroom)),
                                p.device)  # as training_on_device (the workload training_needs builds)
        need, host_per_rank = training_needs(spec, **p.fields, memory=p.usable, headroom=headroom)
    except InputError:
        return None
    fits = fits_budget(need, p.usable, p.headroom)  # eq. 2, verdict.py
    host: dict[str, Any] = {}
    if p.fields.get("offload") not in (None, "none"):
        h = training_host(p, host_per_rank)
        fits = fits and h["short"] is None
        host = {"host_per_machine": h["host_per_machine"], "host_ram": h["ram"]}
    return fits, need, memory_budget(p.usable, p.headroom), host


# The most devices the smallest-count search tries: this search's own bound, not numbers.COUNT (a caller may give up
# to 2^20 devices); past 1024 devices the answer is a cluster plan, not a lever. The search tests this count itself
# before it gives up, so a caller at 600 devices is told of 700 (or of 1024) when that fits.
FEWEST_DEVICES_MAX = 1024


def _fewest_devices(spec: ModelSpec, hardware: str | Device | Instance, count: int | None,
                    training_fields: dict[str, Any], headroom: float | None, memory: int | None,
                    hardware_files: Sequence[str | Path]) -> dict[str, Any] | None:
    """The smallest device count above the present one whose run, every setting kept, fits (the need per device
    falls as ZeRO/FSDP shards over more devices; a run that does not shard never fits by adding devices): doubling
    to the first count that fits, then bisection below it (the need per device does not rise with the count). An
    instance target counts whole instances. None when none up to ``FEWEST_DEVICES_MAX`` fits."""
    try:
        p = _training_placement(hardware, count, headroom, memory, hardware_files, training_fields)
    except InputError:
        return None
    step = p.instance.device_count if p.instance is not None else 1
    fields = {k: v for k, v in training_fields.items() if k != "gpus"}
    seen: dict[int, tuple[bool, int, int, dict[str, Any]] | None] = {}

    def need_at(k: int) -> tuple[bool, int, int, dict[str, Any]] | None:
        if k not in seen:
            seen[k] = _training_step_need(spec, hardware, k * step, fields, headroom, memory, hardware_files)
        return seen[k]

    top = FEWEST_DEVICES_MAX // step  # the most instances (devices) tried
    lo, hi = p.n // step, max(1, p.n // step)
    if lo >= top:
        return None
    while True:  # doubling, the last try clamped to ``top``: lo does not fit, hi the next try
        hi = min(hi * 2, top)
        r = need_at(hi)
        if r is not None and r[0]:
            break
        if hi == top:
            return None
        lo = hi
    while hi - lo > 1:  # bisection: lo does not fit, hi does
        mid = (lo + hi) // 2
        r = need_at(mid)
        if r is not None and r[0]:
            hi = mid
        else:
            lo = mid
    r = seen[hi]
    assert r is not None
    return {"changes": {"count": hi * step}, "changes_given": ["count"] if count is not None else [],
            "memory_per_device": r[1], "budget_per_device": r[2], **r[3]}


def _at_rate(sp: Any, engine: str, rate: float, chunk: int | None, replicas: int = 1,
             closed: list[list[float]] | None = None) -> Any:
    """serving_load.at_rate, its refusal of a rate at or above the capacity said as the request_rate field's."""
    try:
        return at_rate(sp, engine, rate, chunk, replicas, closed)
    except OverCapacityError as e:  # eq. Q10a's bound: the hardware does not carry the rate (fit answers it)
        raise RateOverloadError(str(e), e.capacity * replicas, sp.concurrency * replicas, server=True) from None
    except InputError as e:
        raise FieldError("request_rate", f"request_rate: {e}") from None
