"""Plan one training / fine-tuning job: memory per device and the hardware it fits, storage, network, duration and
cost with the checkpoint/resume risk. Routing only: every number comes from ``llmsizer.estimate.training``, the hardware
modules or a formula module (``formulas/storage.py``, ``formulas/network.py``, ``formulas/training_time.py``,
``formulas/cost.py``, ``plan/pricing.py``)."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ..catalog.hardware import Device, Instance
from ..errors import InputError, LlmsizerError
from ..estimate.device import target_memory, training_device_fields
from ..estimate.duration import (
    Duration,
    comm_bound_message,
    comm_bound_remedy,
    comm_bound_warning,
    training_duration_for,
)
from ..estimate.fit import (
    FitResult,
    fit_training,
    training_fits_at,
    training_fits_if_changed,
    training_on_device,
    training_on_memory,
    vm_share_device,
    zero_chosen,
)
from ..estimate.inference import inference_sized
from ..estimate.training.compose import INFERENCE_SIZED, training_workload
from ..estimate.training.levers import inference_comparable, memory_levers
from ..estimate.training.setup import refuse_attention_kernel
from ..estimate.verdict import check_headroom, high_end
from ..formulas import network as N
from ..formulas import storage as S
from ..formulas.cost import run_cost
from ..formulas.dtypes import DTYPE_BYTES
from ..formulas.lora import lora_params
from ..formulas.mtp import stored_file_bytes
from ..formulas.params import count_params
from ..formulas.training_states import recipe, state_bytes_per_param
from ..formulas.training_time import device_hours
from ..formulas.weight_formats import GROUP_SIZE_DEFAULT, file_weight_bytes, stored_format, weight_bytes
from ..models import load_model
from ..recommend import PRACTICAL_TRAINING_SECONDS, Constraints, recommend_training
from ..request.spec import Request, TrainingJob
from ..result import Assumption, Estimate
from ..specs import ModelSpec, TrainingWorkload
from ..specs.training import uneven_machines
from ..units import format_bits, format_bytes, format_count
from . import pricing as P
from .common import NOT_FITTING, JobNotes, Sec, deadline_seconds, geometric_points
from .hardware import PlanContext, from_option, none_hardware, option_dict, requested
from .result import Chart, Hardware, JobPlan, Series

TEXT_FORMATS = ("jsonl", "json", "csv", "text", "parquet", "arrow")
# what a plan's alternatives search varies: the devices and how many (resources), never a setting the request states
SEARCHED = ("gpus", "gpus_per_node")


def _assumed(est: Estimate, name: str, default: Any) -> Any:
    for a in est.assumptions:
        if a.name == name:
            return a.value
    return default


def workload_fields(job: TrainingJob, gpus: int, per_node: int) -> dict[str, Any]:
    """TrainingWorkload keyword fields from the request (``TrainingJob.workload_fields``; defaults are the
    workload's, recorded by the estimate) on ``gpus`` devices, ``per_node`` per machine."""
    fields = job.workload_fields()
    fields["gpus"] = max(1, gpus)
    if gpus > 1 and not uneven_machines(gpus, per_node=max(1, per_node)):
        fields["gpus_per_node"] = max(1, per_node)
    # (bare devices that do not fill whole machines, 12 as 8 + 4 as fit lays them out, plan/hardware.py machine_size:
    # the machine size is the workload's default of 8, not stated, so the estimate does not refuse them as it
    # refuses a stated uneven machine size, estimate/training/compose.py)
    return fields


def _estimate(spec: ModelSpec, fields: dict[str, Any]) -> Estimate:
    from ..estimate.training import estimate_training
    return estimate_training(spec, **fields)


def _tokens(job: TrainingJob, seq_len: int, notes: JobNotes) -> tuple[int | None, int | None, str]:
    """(tokens per epoch, tokens to train on, how they were obtained)."""
    d, s = job.dataset, job.settings
    per_epoch: int | None = d.tokens
    how = "dataset.tokens"
    if per_epoch is None and d.examples is not None:
        per_epoch = d.examples * seq_len
        how = f"dataset.examples x seq_len ({format_count(d.examples)} x {seq_len}, each padded to seq_len)"
        notes.assumptions.append(Assumption("dataset.tokens", per_epoch, True, how + "; give dataset.tokens"))
    if per_epoch is None and d.size is not None and (d.format or "jsonl") in TEXT_FORMATS:
        per_epoch = int(d.size / S.TEXT_BYTES_PER_TOKEN)
        how = f"dataset.size / {S.TEXT_BYTES_PER_TOKEN:g} B per token (OpenAI: ~4 characters per token)"
        notes.assumptions.append(Assumption("dataset.tokens", per_epoch, True, how + "; give dataset.tokens"))
    if s.train_tokens is not None:
        return per_epoch, s.train_tokens, "settings.train_tokens"
    if per_epoch is None:
        return None, None, "unknown"
    epochs = notes.assume("epochs", 1.0, s.epochs, "one pass over the dataset")
    return per_epoch, int(per_epoch * float(epochs)), f"{how} x {float(epochs):g} epochs"


def run_seconds(job: TrainingJob, device: Device, devices: int, nodes: int = 1) -> float | None:
    """Wall-clock seconds of ``job`` on ``devices`` x ``device`` over ``nodes`` machines: the same tokens, settings,
    utilization and ZeRO stage (the one the memory takes there, ``device_fit``) as :func:`plan_training`, through the
    one duration rule (``estimate/duration.py``). None when
    the tokens are unknown or the device has no sourced peak. Used to time an alternative device (provider check)."""
    spec = load_model(str(job.model.name))
    seq_len = job.settings.seq_len or TrainingWorkload.seq_len
    _, tokens, _ = _tokens(job, seq_len, JobNotes())
    if not tokens:
        return None
    fields = workload_fields(job, devices, math.ceil(devices / max(1, nodes)))
    sized = device_fit(job, device, devices, nodes) if "fsdp" not in fields else None
    zero = zero_chosen(sized.estimate) if sized is not None and sized.estimate is not None else None
    if zero is not None:  # the ZeRO stage the memory takes on these devices is the run timed (as plan_training)
        fields["zero"] = zero.value
    if nodes > 1 and job.resources.network:  # resources.network, read by fit's reader (as plan_training times it)
        fields["network"] = job.resources.network
    return training_duration_for(spec, device, devices, tokens, fields, job.settings.utilization).seconds


def device_fit(job: TrainingJob, device: str | Device, devices: int, nodes: int = 1, *, memory: int | None = None,
               hardware_files: Sequence[str | Path] = ()) -> FitResult | None:
    """``job`` on ``devices`` x ``device`` over ``nodes`` machines as ``fit --train`` sizes it (``estimate/fit.py``
    ``fit_training``: the request's workload fields, ``workload_fields``, and its headroom; on several devices with
    no sharding named, the least-sharded ZeRO stage that fits, the one rule the plan takes): the numbers ``llmsizer
    fit MODEL --train --device DEVICE --count N --gpus-per-node P`` gives. ``memory``: overrides the catalog's
    memory per device. None when the device cannot take the workload at all (``fit_training`` refuses it: no sourced
    memory, a layout the count does not allow)."""
    spec = load_model(str(job.model.name))
    fields = workload_fields(job, devices, math.ceil(devices / max(1, nodes)))
    try:
        return fit_training(spec, device, devices, headroom=job.resources.headroom, memory=memory,
                            hardware_files=hardware_files, fits_at=False, **fields)
    except InputError:
        return None


def _fits_at(job: TrainingJob, spec: ModelSpec, target: Device | Instance, gpus: int, per_node: int,
             ctx: PlanContext, notes: JobNotes) -> None:
    """The settings ``fit --train`` names when the run does not fit (``training_fits_at``: the request's own kept),
    as a fact and a line of advice with the request keys to set."""
    from ..render.fit_text import fits_at_line, fits_if_changed_lines, training_setting_words
    fields = workload_fields(job, gpus, per_node)
    try:
        at = training_fits_at(spec, target, gpus, fields, headroom=job.resources.headroom,
                              memory=job.resources.memory, hardware_files=ctx.hardware_files)
        changed = [] if at is not None else training_fits_if_changed(
            spec, target, gpus, fields, headroom=job.resources.headroom, memory=job.resources.memory,
            hardware_files=ctx.hardware_files)
    except InputError:  # the devices refuse the workload: the fit's own error says so
        return
    if changed:  # nothing keeping the request's settings fits: what does with them changed, marked so
        notes.facts["fits_if_changed"] = changed
        notes.advice.append("; ".join(fits_if_changed_lines(changed, rerun=False)))
    if at is not None:
        notes.facts["fits_at"] = at
        notes.advice.append(f"{fits_at_line(at, rerun=False)}; in the request: "
                            f"{training_setting_words(at['changes'], rerun=False)}")


def plan_training(job: TrainingJob, req: Request, ctx: PlanContext) -> JobPlan:
    notes = JobNotes()
    spec = load_model(str(job.model.name))
    pc = count_params(spec)
    s = job.settings
    seq_len = s.seq_len or TrainingWorkload.seq_len
    micro = s.micro_batch or TrainingWorkload.micro_batch
    accum = s.grad_accumulation or 1
    per_epoch, tokens, tokens_how = _tokens(job, seq_len, notes)
    deadline = deadline_seconds(job, req, ctx.today, notes)

    # ---- hardware: what the request names, or a suggestion ----
    hw, device, instance = requested(job.resources, ctx)
    options: list[dict[str, Any]] = []
    rec = None
    budget = job.budget.total
    if tokens and (ctx.alternatives or hw is None):
        # the request's own settings, its layout included (zero, fsdp, tp, offload...: `recommend --train` with the
        # same flags, as a serving job's pinned tensor_parallel); the devices are what the search varies, and a
        # layout field the request leaves out is chosen per option (fit --train's least-sharded ZeRO stage)
        base_fields = {k: v for k, v in job.workload_fields().items() if k not in SEARCHED}
        try:
            rec = ctx.search(recommend_training, spec, tokens=tokens, utilization=s.utilization,  # once per question
                             constraints=Constraints(deadline=deadline, max_cost=budget,
                                                     headroom=job.resources.headroom),
                             hardware_files=ctx.hardware_files, catalog=ctx.cat(), training_fields=base_fields)
        except LlmsizerError as e:
            notes.warnings.append(f"no alternatives searched: {e}")
    if rec is not None:
        timed = "the default utilization" if s.utilization is None else f"utilization {s.utilization:g}"
        options = [option_dict(o, f"memory and time as `fit --train` on these devices with the request's settings, "
                               f"layout {o.layout or 'unknown'}; time at {timed}") for o in rec.options[:6]]
    if hw is None:
        if rec is not None and rec.chosen is not None:
            hw, device, instance = from_option(rec.chosen, job.resources, ctx)
            notes.advice.append(f"no resources named: planned on {hw.label}, the cheapest option `llmsizer "
                                f"recommend --train` finds that fits and meets the deadline and budget")
        else:
            hw = none_hardware(job.resources)
            if rec is not None and deadline is None:  # the practical limit stood in for the deadline (recommend.py)
                slow = [o for o in rec.rejected if (o.training_seconds or 0) > PRACTICAL_TRAINING_SECONDS]
                if slow:
                    notes.facts["practical_limit_rejected"] = len(slow)
    gpus = hw.count or 1
    fields = workload_fields(job, gpus, hw.per_node)
    if device is not None:
        fields.update(training_device_fields(device))
    usable = hw.memory_per_device
    # the one rule (estimate/fit.py training_on_device): on several devices with no sharding named, the
    # least-sharded ZeRO stage that fits, as train --device and fit --train take it, with the device's named notes
    if usable and device is not None:
        _, device_notes = target_memory(device, instance, job.resources.memory)
        est = training_on_device(spec, fields, usable, job.resources.headroom, device, device_notes)
    else:
        if device is not None:  # no memory known for it: the kernel its GPU cannot run is still refused (as fit's)
            refuse_attention_kernel(spec, training_workload(fields), device)
        est = training_on_memory(spec, fields, usable, job.resources.headroom) if usable else _estimate(spec, fields)
    if usable:
        taken = zero_chosen(est) if "fsdp" not in fields else None
        fields = dict(fields, zero=taken.value) if taken is not None else fields
    w_prec = str(fields.get("precision", TrainingWorkload.precision))

    # ---- memory: the training estimate's verdict (estimate/verdict.py) ----
    mem = Sec("memory", "Memory per device")
    need_lo, need, items_hi = est.total("device")
    # one high end, the verdict's (estimate/verdict.py high_end: the calibrated high end where higher), the one
    # train / fit --train print and this plan's warning quotes; the items' summed ranges' high under its own name
    need_hi, high_name = high_end(items_hi, est.details.get("calibrated_range"))
    mem.add("need", "training needs per device (expected)", need, "B", "peak over the moments of a step: model states "
            "+ activations + transients (llmsizer.estimate.training)", "estimate/training/compose.py")
    mem.add("need_high", f"training needs per device ({high_name})", need_hi, "B",
            "the high end the verdict quotes: the larger of the items' summed ranges and the calibrated band's high",
            "estimate/verdict.py high_end")
    mem.add("need_items_high", "  the items' summed ranges, high", items_hi, "B", "upper end of the items' ranges")
    budget_dev = est.details.get("memory_budget") if usable else None
    # the verdict's headroom; with no memory known (no verdict), the core's rule for the request's own (review32 N3:
    # before, DEFAULT_HEADROOM here, whatever resources.headroom said)
    headroom = est.details.get("headroom")
    if headroom is None:
        headroom = check_headroom(job.resources.headroom)
    mem.add("usable", "memory of one device", usable, "B",
            "resources.memory" if job.resources.memory else
            "catalog: driver-reported size where sourced, else the vendor figure read as binary (MEMORY_CONVENTION)")
    mem.add("budget", "budget per device", budget_dev, "B", f"device memory x (1 - {headroom:g} headroom)",
            "estimate/verdict.py eq. (1)")
    # no budget (a device of unknown memory): unknown, as train --device says (details.fits null) and the serving
    # job's facts say; not False, which would read as "does not fit"
    fits = bool(est.details["fits"]) if budget_dev is not None else None
    mem.add("fits", "fits", fits, "bool")
    wl = training_workload(fields)
    if hw.origin != "none":  # the layout as `fit --train --json` reports it: TP, and replicas = gpus / (tp x pp x cp)
        hw = dataclasses.replace(hw, tensor_parallel=wl.tp, replicas=wl.dp)
    # as train's warning: only where each device holds all the weights, as serving on one device does (levers.py)
    inf_need = inference_sized(spec, micro, seq_len, str(fields.get("device", "gpu")),
                               str(fields.get("gpu_runtime", "cuda"))) if inference_comparable(wl) else None
    mem.add("inference_need", "the same model sized for inference", inf_need, "B",
            f"estimate_inference: bf16 weights, {micro} sequence(s) of {seq_len} tokens (what a serving "
            "estimate would ask for)")
    mem_ratio = need / inf_need if inf_need else None
    mem.add("ratio", "training / inference memory", mem_ratio, "ratio")
    # "of which": the parts of the need above, the estimate's device items at the peak (the memory table's cells,
    # one field); a state's full size (details.model_states: e.g. every gradient, after the backward) under its own
    # label where it differs, so one label never carries two numbers (probe14 D4)
    states = est.details.get("model_states", {})
    at_peak: dict[str, int] = {}
    for i in est.items:
        if i.location == "device":
            at_peak[i.name] = at_peak.get(i.name, 0) + i.bytes
    for k in ("weights", "adapter_weights", "master_weights", "gradients", "optimizer_states"):
        what = k.replace('_', ' ')
        if at_peak.get(k):
            mem.add(f"state_{k}", f"  of which {what} (at the peak)", at_peak[k], "B",
                    f"per device, live at the peak ({est.details.get('peak_phase') or 'the peak'}): the item {k}")
        if states.get(k) and states[k] != at_peak.get(k, 0):
            mem.add(f"state_{k}_full", f"  {what} at full size (not all live at the peak)", states[k], "B",
                    "per device, every one of them held at once (details.model_states)")
    if est.details.get("peak_phase"):
        mem.note(f"peak at: {est.details['peak_phase']}")
    # fit's names (docs/nomenclature.md): a training run's verdict compares its memory per device with the budget;
    # memory_need / memory_budget: deprecated aliases, kept for one release
    notes.facts.update({"memory_per_device": need, "budget_per_device": budget_dev, "verdict_need_per_device": need,
                        "verdict_budget_per_device": budget_dev, "memory_need": need, "memory_budget": budget_dev,
                        "inference_need": inf_need, "fits": fits, "memory_levers": memory_levers(wl)})
    if fits is False and device is not None:  # fit --train's hint, the one rule (estimate/fit.py training_fits_at)
        _fits_at(job, spec, instance or device, gpus, hw.per_node, ctx, notes)

    # ---- duration ----
    dur = Sec("duration", "Duration")
    dp = wl.dp  # data-parallel replicas: gpus / (tp x pp x cp), TrainingWorkload.dp
    tokens_per_step = micro * seq_len * accum * dp
    dur.add("tokens", "tokens to train on", tokens, "tokens", tokens_how)
    secs = None
    d: Duration | None = None
    if tokens and device is not None:
        if hw.nodes > 1 and job.resources.network and "network" not in fields:  # as fit --network reads it
            fields = dict(fields, network=job.resources.network)
        elif hw.nodes > 1 and hw.node_bandwidth and "network" not in fields:  # the instance's, per machine
            fields = dict(fields, network=format_bits(hw.node_bandwidth, "Gb/s"))
        d = training_duration_for(spec, vm_share_device(device, instance), gpus, tokens, fields,  # the one duration rule
                                  s.utilization, instance, ctx.hardware_files, hw.link_bandwidth)
        secs = d.seconds
        notes.assumptions.extend(d.assumptions)
        # the duration's communication-bound warning is the plan's 'network-bound' check (plan/checks.py), said once
        bound = comm_bound_warning(d.step)
        notes.warnings.extend(w for w in d.warnings if w != bound)
        if bound:
            notes.facts["comm_bound"] = comm_bound_message(d.step)
            notes.facts["comm_bound_remedy"] = comm_bound_remedy(d.step)
        dur.add("flops_per_token", "FLOPs per token", d.flops_per_token, "FLOP", d.flops_formula, d.flops.source)
    dur.add("seconds", "wall-clock (estimated)", secs, "s", *wall_clock_how(d, gpus))
    steps = math.ceil(tokens / tokens_per_step) if tokens else None
    dur.add("tokens_per_step", "tokens per optimizer step", tokens_per_step, "tokens",
            f"micro_batch {micro} x seq_len {seq_len} x grad_accumulation {accum} x data-parallel {dp}")
    dur.add("steps", "optimizer steps", steps, "steps", "ceil(tokens / tokens per step)")
    # the estimate's own step time (StepTime.step_seconds): the wall clock covers tokens / tokens per step steps,
    # a fraction of the last one included, so wall-clock / ceil(steps) would understate it
    step_s = d.step.step_seconds if d is not None and d.step is not None else None
    dur.add("step_seconds", "time per step", step_s, "s", "one optimizer step's time (the duration estimate)")
    dh = device_hours(secs, gpus) if secs else None
    dur.add("device_hours", "device-hours", dh, "count", f"{gpus} devices x hours", "formulas/training_time.py eq. (3)")
    # the MFU this wall clock implies, the duration's own (Duration.mfu), as train and fit --train state it (probe19 D6)
    dur.add("mfu", "MFU (model FLOPs utilization)", d.mfu if d is not None else None, "share",
            f"{d.model_flops_formula} per token, no recomputation, over the wall clock at the {d.peak_name}"
            if d is not None and d.mfu is not None else "Duration.mfu", "estimate/duration.py Duration.mfu")
    dur.add("expected", "expected duration (request)", job.expected_duration, "s", "expected_duration")
    if deadline is not None:
        dur.add("deadline", "time until the deadline", deadline, "s", "deadline - start")

    # checkpoint / resume risk
    ck = job.checkpoints
    interval_s = None
    if ck.interval is not None:
        interval_s = ck.interval.seconds if ck.interval.seconds is not None else (
            ck.interval.steps * step_s if step_s and ck.interval.steps else None)
    dur.add("checkpoint_interval", "checkpoint interval", interval_s, "s",
            "checkpoints.interval" + (f" ({ck.interval.steps} steps x step time)" if ck.interval and ck.interval.steps
                                      else ""))
    resume = ck.resume
    if resume is False or interval_s is None:
        lost = secs
        lost_how = "no resumable checkpoint: an interruption restarts the run"
    else:
        lost = min(interval_s, secs) if secs else interval_s
        lost_how = "progress since the last checkpoint: at most one checkpoint interval (half on average)"
    dur.add("lost_per_interruption", "progress lost per interruption (worst case)", lost, "s", lost_how)
    price = hw.price_per_hour
    lost_cost = run_cost(price, lost) if price is not None and lost else None
    dur.add("lost_cost", "cost of one interruption (worst case)", lost_cost, "USD",
            "price per hour x progress lost", "formulas/cost.py eq. (1)")
    saves = S.checkpoints_written(secs, interval_s) if secs and interval_s else None
    dur.add("checkpoints_written", "checkpoints written during the run", saves, "count", "floor(wall-clock / interval)",
            "formulas/storage.py eq. (7)")
    notes.facts.update({"seconds": secs, "deadline_seconds": deadline, "interval_seconds": interval_s,
                        "steps": steps, "step_seconds": step_s})

    # ---- storage ----
    st, series, _ = _storage(job, spec, est, pc.total, tokens, per_epoch, steps, secs, interval_s, saves, w_prec,
                             gpus, notes, wl)
    # ---- network ----
    net = _network(job, spec, hw, gpus, d, tokens, secs, notes)
    # ---- cost ----
    cost = _cost(job, req, hw, secs, notes)

    charts = _charts(job, spec, fields, seq_len, budget_dev, series, st, hw, cost, options, fits)
    sections = (mem.build(), st.build(), net.build(), dur.build(), cost.build())
    summary = (f"{job.method} {'training' if job.method == 'full' else 'fine-tuning'} of {spec.name} "
               f"({format_count(pc.total)} params) on {hw.label}")
    _advice(job, spec, inf_need, need, notes)
    # the memory section's ratio line states the estimate's "sized with inference numbers" warning (same numbers)
    said = tuple(w for w in est.warnings if getattr(w, "kind", None) == INFERENCE_SIZED) \
        if mem_ratio is not None else ()
    return JobPlan(job.name, "training", spec.name, summary, hw, sections, est,
                   tuple(notes.assumptions) + tuple(est.assumptions), tuple(notes.warnings) + tuple(est.warnings),
                   tuple(notes.advice), charts, tuple(options), dict(notes.facts), said)


def _checkpoint_size(job: TrainingJob, spec: ModelSpec, est: Estimate, params: int, precision: str,
                     notes: JobNotes) -> tuple[int, str, int]:
    """(bytes of one checkpoint, formula text, trained params)."""
    rec_states = recipe(precision)
    opt = str(_assumed(est, "optimizer", "adamw"))
    sdt = str(_assumed(est, "optimizer_state_dtype", rec_states.default_state_dtype))
    ob = state_bytes_per_param(opt, DTYPE_BYTES.get(sdt, 4))
    save_opt = job.checkpoints.save_optimizer is not False
    if not save_opt:
        ob = 0.0
    if job.method == "full":
        trained, wb, mb = params, float(rec_states.model_bytes), float(rec_states.master_bytes if save_opt else 0)
        what = f"{format_count(params)} params x ({wb:g} weights + {mb:g} fp32 master + {ob:g} {opt} states) B"
    else:
        targets = job.peft.targets or ("q", "k", "v", "o", "gate", "up", "down")
        trained = lora_params(spec, job.peft.rank or TrainingWorkload.rank, targets, dora=job.method == "dora").total
        ad = str(_assumed(est, "adapter_dtype", "fp32"))
        wb, mb = float(DTYPE_BYTES.get(ad, 4)), 0.0
        what = (f"{format_count(trained)} adapter params x ({wb:g} {ad} adapter + {ob:g} {opt} states) B; the frozen "
                "base is not saved")
    return S.checkpoint_bytes(trained, wb, mb, ob), what, trained


def _checkpoint_per_rank(job: TrainingJob, est: Estimate, one: int, wl: TrainingWorkload, gpus: int
                         ) -> tuple[int, str] | None:
    """(bytes the most loaded rank writes of one checkpoint, formula text), or None where one process writes it all
    (one device; DDP / HF Trainer with no sharding: rank 0's torch.save). ``wl``: the workload the estimate sized,
    its ZeRO stage the one the memory took (``TrainingWorkload.shard_stage``: FSDP's modes read as their stage).

    The rank's own shard is the estimate's (one home): its per-device model states that the data-parallel sharding
    splits (``details.model_states``: optimizer states and fp32 master from ZeRO-1 / Megatron's distributed
    optimizer up, the weights too at ZeRO-3 / FSDP full or hybrid shard), already divided by TP, PP and EP there.
    Megatron (dist-ckpt, every rank writes) and FSDP (torch.distributed.checkpoint) spread the rest over all
    ``gpus`` ranks (eq. (5)). DeepSpeed (deepspeedai/DeepSpeed @edaa7221 deepspeed/runtime/engine.py) has every
    rank write its ZeRO partition file, ``zero_pp_rank_{dp}_mp_rank_{mp}_optim_states.pt`` (``_save_zero_checkpoint``
    lines 5409-5424, its name lines 4197-4210: the optimizer's state_dict, its own shard), and below ZeRO-3 the data-
    parallel rank 0 of each model-parallel rank also writes ``mp_rank_{mp}_model_states.pt``, the module's
    state_dict (``_save_checkpoint`` lines 5239-5266: ``module_state_dict`` line 5252, written where
    ``save_non_zero_checkpoint``, set for the data-parallel writer in ``_configure_checkpointing`` lines 1583-1589,
    runtime/checkpoint_engine/checkpoint_engine.py lines 47-48: dp_rank == 0): that rank writes its partition plus
    the per-device weights (an adapter method: the adapters, the frozen base left out as ``checkpoint_one``
    counts it)."""
    stage = wl.shard_stage
    megatron = wl.precision.startswith("megatron-")
    if gpus <= 1 or not (stage or megatron):
        return None
    states = est.details.get("model_states", {})
    saved = ("master_weights", "optimizer_states") if job.checkpoints.save_optimizer is not False else ()
    kinds = [k for k in saved if stage >= 1] + (["weights", "adapter_weights"] if stage >= 3 else [])
    own = int(sum(states.get(k) or 0 for k in kinds))
    what = " + ".join(k.replace("_", " ") for k in kinds if states.get(k))
    if megatron or wl.fsdp is not None:
        fw = "Megatron dist-ckpt" if megatron else "torch.distributed.checkpoint"
        return (S.checkpoint_shard_bytes(one, gpus, own),
                f"{fw}: each tensor written once, replicas spread evenly: one checkpoint / {gpus} ranks"
                + (f", at least the rank's own shard ({what} per device, {format_bytes(own, binary=False)})"
                   if own else ""))
    if not own:
        return None
    if stage >= 3:
        return own, f"DeepSpeed ZeRO-{stage}: each data-parallel rank's partition files, its {what} per device"
    module = "adapter_weights" if wl.adapters else "weights"
    model_file = int(states.get(module) or 0)
    return (own + model_file,
            f"DeepSpeed ZeRO-{stage}: data-parallel rank 0 writes its partition file ({what} per device, "
            f"{format_bytes(own, binary=False)}) and the model file ({module.replace('_', ' ')} per device, "
            f"{format_bytes(model_file, binary=False)}); the other ranks their partition file only")


def _storage(job: TrainingJob, spec: ModelSpec, est: Estimate, params: int, tokens: int | None,
             per_epoch: int | None, steps: int | None, secs: float | None, interval_s: float | None,
             saves: int | None, precision: str, gpus: int, notes: JobNotes, wl: TrainingWorkload
             ) -> tuple[Sec, list[Series], int]:
    st = Sec("storage", "Storage")
    d, ck, ho = job.dataset, job.checkpoints, job.handover
    parts: dict[str, int] = {}
    if job.purpose == "pretraining":
        base = 0
        st.add("base_model", "base model files", 0, "B_disk", "pre-training starts from random weights")
    else:
        if spec.file_weights is not None:
            base = file_weight_bytes(spec).total
            how = f"weight files read from {spec.file_weights.path}"
        else:
            fmt, _, why = stored_format(spec)
            base, mtp = stored_file_bytes(spec, fmt, GROUP_SIZE_DEFAULT)
            how = f"weights in the published format {fmt} ({why})" + (
                f", with the checkpoint's {spec.mtp_layers} multi-token-prediction layer(s), "
                f"{format_bytes(mtp, binary=False)}" if mtp else "")
        st.add("base_model", "base model files", base, "B_disk", how,
               "formulas/weight_formats.py" + (", formulas/mtp.py eq. (2)" if spec.mtp_layers else ""))
    parts["base_model"] = base
    if d.size is not None:
        raw, raw_how = d.size, "dataset.size"
    elif per_epoch is not None:
        raw = S.raw_text_bytes(per_epoch)
        raw_how = f"{format_count(per_epoch)} tokens x {S.TEXT_BYTES_PER_TOKEN:g} B (no dataset.size given)"
        notes.assumptions.append(Assumption("dataset.size", raw, True, raw_how))
    else:
        raw, raw_how = 0, "unknown: give dataset.size"
    st.add("dataset_raw", "dataset as delivered", raw, "B_disk", raw_how, "formulas/storage.py eq. (3)")
    parts["dataset_raw"] = raw
    tok = 0
    if per_epoch is not None and d.format != "megatron-bin":
        tok = S.tokenized_dataset_bytes(per_epoch, spec.vocab_size, d.examples or 0)
        st.add("dataset_tokenized", "dataset tokenized", tok, "B_disk",
               f"{format_count(per_epoch)} tokens x {S.token_id_bytes(spec.vocab_size)} B per id (vocab "
               f"{spec.vocab_size:,})" + (f" + index of {format_count(d.examples)} documents" if d.examples else ""),
               "formulas/storage.py eqs. (1)-(2) (Megatron-LM indexed dataset)")
    parts["dataset_tokenized"] = tok
    one, one_how, trained = _checkpoint_size(job, spec, est, params, precision, notes)
    st.add("checkpoint_one", "one checkpoint", one, "B_disk", one_how, "formulas/storage.py eq. (4)")
    base_file = weight_bytes(spec, "bf16").total
    st.add("checkpoint_vs_model", "one checkpoint / bf16 model file", one / base_file if base_file else None, "ratio")
    shard = _checkpoint_per_rank(job, est, one, wl, gpus)
    if shard is not None:
        st.add("checkpoint_shard", "written by the most loaded rank", shard[0], "B_disk", shard[1], "formulas/storage.py eq. (5)")
    keep = ck.keep
    if keep is None and interval_s is not None:
        keep_n = saves or 1
        notes.assumptions.append(Assumption("checkpoints.keep", "all", True, "no checkpoints.keep: none deleted"))
        kept = keep_n * one
        kept_how = f"{keep_n} checkpoints written, none deleted"
    elif keep is None:
        kept, kept_how = 0, "no checkpoints planned"
    else:
        kept = S.kept_checkpoints_bytes(one, keep)
        kept_how = f"({keep} kept + 1 being written) x one checkpoint"
    st.add("checkpoints", "checkpoints (peak)", kept, "B_disk", kept_how, "formulas/storage.py eq. (6)")
    parts["checkpoints"] = kept
    arts = tuple(a.lower() for a in (ho.artifacts or ()))
    if job.method == "full":
        final, final_how = weight_bytes(spec, "bf16").total, "the trained model in bf16"
    else:
        ad = str(_assumed(est, "adapter_dtype", "fp32"))
        final = S.adapter_bytes(trained, DTYPE_BYTES.get(ad, 4))
        final_how = f"adapter: {format_count(trained)} params x {DTYPE_BYTES.get(ad, 4)} B ({ad})"
        if "merged-model" in arts or "merged" in arts:
            final += weight_bytes(spec, "bf16").total
            final_how += " + the merged model in bf16"
    st.add("final_model", "final model files", final, "B_disk", final_how, "formulas/storage.py eq. (9)")
    parts["final_model"] = final
    logs = S.log_bytes(steps or 0, S.TRAINING_LOG_BYTES_PER_STEP)
    st.add("logs", "training logs", logs, "B_disk", f"{steps or 0:,} steps x {S.TRAINING_LOG_BYTES_PER_STEP} B "
           "(policy default)", "formulas/storage.py eq. (10)")
    parts["logs"] = logs
    subtotal = sum(parts.values())
    st.add("subtotal", "subtotal", subtotal, "B_disk", " + ".join(k for k, v in parts.items() if v))
    total = S.with_headroom(subtotal)
    st.add("total", "storage to provision", total, "B_disk", f"subtotal x (1 + {S.DISK_HEADROOM:g} headroom)",
           "formulas/storage.py eq. (11)")
    st.add("requested", "storage requested (resources.storage)", job.resources.storage, "B_disk")
    st.add("checkpoint_requested", "checkpoint storage requested (checkpoints.storage)", ck.storage, "B_disk")
    fixed = subtotal - kept
    cap_ckpt = ck.storage if ck.storage is not None else (
        job.resources.storage - fixed if job.resources.storage is not None else None)
    fill = None
    if cap_ckpt is not None and interval_s and one:
        n_fail, t_fail = S.disk_full_at(cap_ckpt, 0, one, interval_s)
        if secs is not None and t_fail <= secs:
            fill = (n_fail, t_fail)
    st.add("fills_at_checkpoint", "unpruned: the disk fills at checkpoint", fill[0] if fill else None, "count",
           "floor((capacity - other files) / checkpoint) + 1", "formulas/storage.py eq. (8)")
    st.add("fills_after", "unpruned: the disk fills after", fill[1] if fill else None, "s", "that checkpoint x interval")
    notes.facts.update({"storage_total": total, "checkpoint_bytes": one, "checkpoints_bytes": kept,
                        "storage_fixed": fixed, "checkpoint_capacity": cap_ckpt, "disk_fill": fill,
                        "storage_subtotal": subtotal})
    series = _storage_series(secs, interval_s, fixed, one, keep, saves)
    return st, series, fixed


def _storage_series(secs: float | None, interval_s: float | None, fixed: int, one: int, keep: int | None,
                    saves: int | None) -> list[Series]:
    if not secs or not interval_s or not saves:
        return []
    n_pts = min(saves, 48)
    pruned, unpruned = [(0.0, float(fixed))], [(0.0, float(fixed))]
    for k in range(1, n_pts + 1):
        n = round(k * saves / n_pts)
        t = n * interval_s / 3600
        unpruned.append((t, float(fixed + n * one)))
        kept = n if keep is None else min(n, keep)
        pruned.append((t, float(fixed + kept * one)))
    end = secs / 3600
    unpruned.append((end, unpruned[-1][1]))
    pruned.append((end, pruned[-1][1]))
    out = [Series("checkpoints not pruned", tuple(unpruned))]
    if keep is not None:
        out.insert(0, Series(f"keeping {keep}", tuple(pruned)))
    return out


SYNC_KIND = {"ddp": "DDP gradient all-reduce", "zero1": "ZeRO-1 gradient all-reduce + updated-weight all-gather",
             "zero2": "ZeRO-2 gradient all-reduce every micro-step + updated-weight all-gather",
             "full": "parameter all-gathers + gradient reduce-scatter (ZeRO-3 / FSDP full)",
             "grad_op": "parameter all-gather + gradient reduce-scatter (FSDP grad_op)",
             "hybrid": "FSDP within each machine + gradient all-reduce across machines (HSDP)",
             "megatron-ddp": "Megatron-Core grad-buffer all-reduce once per optimizer step",
             "megatron-distopt": ("Megatron-Core grad-buffer reduce-scatter once per optimizer step + updated-"
                                  "parameter all-gather (distributed optimizer)")}


def _network(job: TrainingJob, spec: ModelSpec, hw: Hardware, gpus: int, d: Duration | None,
             tokens: int | None, secs: float | None, notes: JobNotes) -> Sec:
    """The Network section: the traffic and its time are the duration's own (``estimate/duration.py`` ``StepTime``:
    data-parallel, formulas/training_time.py eqs. (7c)-(8''); tensor/pipeline-parallel, ``StepTime.model_parallel``,
    formulas/model_parallel_time.py eqs. (T1)-(P6)), what ``train --tokens`` and ``fit --train --tokens`` print."""
    net = Sec("network", "Network")
    s = job.settings
    tp, pp = s.tp or 1, s.pp or 1
    dp = max(1, gpus // (tp * pp))
    accum = s.grad_accumulation or 1
    micro = s.micro_batch or TrainingWorkload.micro_batch
    seq = s.seq_len or TrainingWorkload.seq_len
    net.add("devices", "devices / machines", f"{gpus} on {hw.nodes}", "text",
            f"data-parallel {dp} x tensor-parallel {tp} x pipeline {pp}")
    if gpus <= 1:
        net.note("one device: no traffic between devices")
        _data_rate(net, job, spec, tokens, secs)
        return net
    st = d.step if d is not None else None
    counted = st is not None and bool(st.sharding)
    net.add("link_bandwidth", "link between devices in a machine", hw.link_bandwidth, "B/s",
            "resources.interconnect, else the instance's or device's interconnect (per direction)")
    net.add("node_bandwidth", "network of each machine", hw.node_bandwidth, "B/s",
            "resources.network or the instance's network")
    if st is not None and counted:
        kind = SYNC_KIND[st.sharding] + (", reduced once per optimizer step" if st.grad_sync == "optimizer-step"
                                         and st.sharding == "ddp" and accum > 1 else "")
        net.add("dp_bytes", f"data-parallel traffic per step and device ({kind})", st.comm_bytes_per_step, "B_disk",
                f"{dp} ranks, {accum} micro-batches per step", "formulas/training_time.py eqs. (7c)-(7e)")
        net.add("bus_bandwidth", "collective bus bandwidth", st.bus_bandwidth, "B/s",
                "the link in a machine; across machines min(link, machine network)", "formulas/network.py eq. (11)")
        net.add("comm_seconds", "communication per step (traffic time)", st.comm_seconds_per_step, "s",
                "bytes / bus bandwidth per collective, as `train --tokens` counts them",
                "formulas/training_time.py eqs. (7c)-(7e)")
        net.add("exposed_comm_seconds", "communication per step not hidden by compute",
                st.exposed_comm_seconds * st.micro_steps, "s", "overlap by phase (FSDP prefetch, DDP buckets)",
                "formulas/training_time.py eqs. (8'), (8'')")
        net.add("compute_seconds", "compute per step", st.compute_seconds * st.micro_steps, "s",
                "from the duration estimate")
        net.add("comm_share", "share of a step spent in communication compute does not hide", st.comm_share,
                "share", "exposed communication / step time (the step estimate's comm_share)",
                "formulas/training_time.py eq. (8'')")
        notes.facts["comm_share"] = st.comm_share
    elif st is not None and st.topology not in ("model-parallel",):
        notes.facts["network_unknown"] = ["data-parallel traffic"]
    mp = st.model_parallel if st is not None else None
    if st is not None and mp is not None:
        k = mp.micro_batches
        net.add("tp_bytes", "tensor-parallel traffic per step and device", mp.tp_bytes_per_step, "B_disk",
                f"{k} micro-batches x 4 all-reduces per layer (+2 per recomputed layer) of {micro} x {seq} x "
                f"{spec.hidden_size} activations", "formulas/model_parallel_time.py eq. (T1)")
        net.add("tp_seconds", "tensor-parallel communication per step", mp.tp_seconds_per_step, "s",
                (f"at {mp.tp_bandwidth / 1e9:.4g} GB/s" if mp.tp_bandwidth != float("inf") else "no link bandwidth")
                + ("; overlaps the GEMMs" if mp.tp_overlap else "; not overlapped"),
                "formulas/model_parallel_time.py eqs. (T2)-(T3')")
        net.add("pp_bytes", "pipeline point-to-point traffic per step and device", mp.p2p_bytes_per_step, "B_disk",
                f"{k} micro-batches x activations forward + gradients backward per model chunk, 1/{tp} per device",
                "formulas/model_parallel_time.py eq. (P1)")
        net.add("pp_seconds", "pipeline point-to-point time per step (blocking)", mp.p2p_seconds_per_step, "s",
                "bytes / link", "formulas/model_parallel_time.py eq. (P2)")
        net.add("bubble", "pipeline bubble (share of the micro-batches' time)", mp.bubble, "share",
                "(p - 1) / (v m)", "Narayanan et al. 2021 section 2.2; formulas/model_parallel_time.py eq. (P4)")
        net.add("bubble_seconds", "pipeline bubble per step", mp.bubble_seconds, "s", "idle stages",
                "formulas/model_parallel_time.py eq. (P4)")
        if mp.fsdp:
            net.add("mp_dp_bytes", "FSDP all-gathers + reduce-scatters between replicas per step and device",
                    mp.dp_bytes, "B_disk", f"{dp} replicas, each device's tensor-parallel shard of its stage's units",
                    "formulas/model_parallel_time.py eq. (P7)")
            net.add("mp_dp_seconds", "FSDP collective time per step (overlapped by phase)", mp.dp_seconds, "s",
                    f"bytes / bus bandwidth; {mp.dp_exposed_seconds:.3g} s of it not hidden",
                    "formulas/model_parallel_time.py eq. (P7)")
        else:
            net.add("mp_dp_bytes", "gradient all-reduce between replicas per step and device", mp.dp_bytes,
                    "B_disk", f"{dp} replicas, each device's 1/(tp x pp) of the gradients",
                    "formulas/model_parallel_time.py eq. (P5)")
            net.add("mp_dp_seconds", "gradient all-reduce time per step (after the backward)", mp.dp_seconds, "s",
                    "bytes / bus bandwidth", "formulas/model_parallel_time.py eq. (P5)")
        net.add("compute_seconds", "compute per step (slowest stage)", mp.compute_seconds_per_step, "s",
                "from the duration estimate")
        net.add("comm_share", "share of a step spent in communication compute does not hide", st.comm_share,
                "share", "tensor-parallel + point-to-point + data-parallel time not hidden / step time (the step "
                "estimate's comm_share)", "formulas/model_parallel_time.py eq. (P6)")
        notes.facts["comm_share"] = st.comm_share
    if st is not None and st.ring_bytes:
        net.add("cp_ring_bytes", "context-parallel ring attention exchange per step and device",
                st.ring_bytes * st.micro_steps, "B_disk",
                f"{st.micro_steps} micro-batches x each layer's K/V (and dK/dV) passed around the ring",
                "formulas/context_parallel.py eqs. (CP1)/(CP3)")
        net.add("cp_ring_seconds", "ring attention exchange time per step (overlapped with the attention)",
                st.ring_seconds * st.micro_steps, "s",
                f"{st.ring_exposed_seconds * st.micro_steps:.3g} s of it not hidden, counted in the compute",
                "formulas/context_parallel.py eq. (CP2)")
    if tp > hw.per_node >= 1:
        notes.warnings.append(f"tensor parallelism {tp} spans machines ({hw.per_node} devices each): keep TP "
                              "within one machine's fast links")
    if hw.nodes > 1 and d is not None and not any(a.name == "inter_node_network" for a in d.assumptions) \
            and counted:
        notes.facts["network_unknown"] = ["data-parallel traffic between machines"]
    _data_rate(net, job, spec, tokens, secs)
    return net


def _data_rate(net: Sec, job: TrainingJob, spec: ModelSpec, tokens: int | None, secs: float | None) -> None:
    rate = tokens / secs * S.token_id_bytes(spec.vocab_size) if tokens and secs else None
    net.add("data_read_rate", "dataset read rate needed", rate, "B/s", "tokens/s x bytes per token id")
    net.add("data_read_speed", "dataset read speed (request)", job.dataset.read_speed, "B/s", "dataset.read_speed")
    if job.dataset.size and job.dataset.read_speed:
        net.add("staging_seconds", "time to read the dataset once", N.transfer_seconds(job.dataset.size,
                job.dataset.read_speed), "s", "dataset.size / dataset.read_speed", "formulas/network.py eq. (6)")


def _cost(job: TrainingJob, req: Request, hw: Hardware, secs: float | None, notes: JobNotes) -> Sec:
    cost = Sec("cost", "Cost")
    price = hw.price_per_hour
    cost.add("price_per_hour", "price per hour", price, "USD/h", hw.price_basis)
    hourly = run_cost(price, secs) if price is not None and secs else None
    cost.add("hourly_total", "run cost, paid by the hour", hourly, "USD", "price x wall-clock",
             "formulas/cost.py eq. (1)")
    pr = job.pricing
    model = pr.model or req.pricing.model or "undecided"
    discount = pr.reserved_discount if pr.reserved_discount is not None else req.pricing.reserved_discount
    term = pr.reserved_term if pr.reserved_term is not None else req.pricing.reserved_term
    cost.add("pricing_model", "pricing (request)", model, "text")
    if secs:
        period_h = max(secs, term or 0) / 3600
        u = P.busy_share(secs / 3600, period_h)
        cost.add("busy_share", "busy share of a reservation", u, "share",
                 "run hours / reserved hours" + ("" if term else " (reserving exactly the estimated run)"),
                 "plan/pricing.py eq. (1)")
        cost.add("break_even_discount", "reservation pays off above a discount of", P.break_even_discount(u),
                 "share", "1 - busy share", "plan/pricing.py eq. (4)")
        if discount is not None and price is not None:
            cost.add("reserved_total", "run cost, reserved", P.reserved_cost(price, discount, period_h), "USD",
                     f"price x (1 - {discount:.0%}) x {period_h:,.0f} h", "plan/pricing.py eq. (3)")
    cost.add("budget", "budget (job)", job.budget.total, "USD", "budget.total")
    notes.facts.update({"cost_total": hourly, "price_per_hour": price})
    return cost


def _charts(job: TrainingJob, spec: ModelSpec, fields: dict[str, Any], seq_len: int, budget_dev: int | None,
            series: list[Series], st: Sec, hw: Hardware, cost: Sec, options: list[dict[str, Any]],
            fits: bool | None = None) -> tuple[Chart, ...]:
    charts: list[Chart] = []
    pts = []
    top = max(2 * seq_len, 4096)
    if spec.max_position_embeddings:
        top = min(top, spec.max_position_embeddings)
    for sl in geometric_points(512, top, seq_len, 7):
        try:
            e = _estimate(spec, {**fields, "seq_len": sl})
        except InputError:
            continue
        pts.append((float(sl), float(e.total("device")[1])))
    markers = (("device budget", float(budget_dev)),) if budget_dev else ()
    charts.append(Chart(f"{job.name}-memory-seq", f"{job.name}: memory per device vs sequence length", "lines",
                        "sequence length", "memory per device", "B", (Series("training, expected", tuple(pts)),),
                        "tokens", markers=markers, job=job.name,
                        note=f"micro_batch {fields.get('micro_batch', 1)}; request: {seq_len} tokens"))
    if series:
        caps: list[tuple[str, float]] = []
        if job.resources.storage is not None:
            caps.append(("storage requested", float(job.resources.storage)))
        ck_store, fixed = job.checkpoints.storage, st.value("subtotal", 0) - st.value("checkpoints", 0)
        if ck_store is not None:
            caps.append(("checkpoint space", float(fixed + ck_store)))
        charts.append(Chart(f"{job.name}-storage", f"{job.name}: storage over the run", "lines", "hours",
                            "disk used", "B_disk", tuple(series), "h", markers=tuple(caps), job=job.name,
                            note="datasets, base model, logs and final files, plus the checkpoints on disk"))
    cats, vals = [], []
    nofit = NOT_FITTING if fits is False else ""  # the plan's memory check (section memory, 'fits'), not redone here
    price_run = next((f.value for f in cost.figures if f.key == "hourly_total"), None)
    if price_run:
        cats.append(f"request: {hw.label} (hourly{nofit})")
        vals.append(float(price_run))
    reserved = next((f.value for f in cost.figures if f.key == "reserved_total"), None)
    if reserved:
        cats.append(f"request: {hw.label} (reserved{nofit})")
        vals.append(float(reserved))
    for o in options:
        if o.get("run_cost") is not None:
            cats.append(o["hardware"])  # the option's devices_text (estimate/fit.py), as the options list names it
            vals.append(float(o["run_cost"]))
    if cats:
        charts.append(Chart(f"{job.name}-cost", f"{job.name}: cost of the run per option", "bars", "option",
                            "run cost", "USD", (Series("run cost", tuple((float(i), v) for i, v in enumerate(vals))),),
                            categories=tuple(cats), job=job.name,
                            note="alternatives from `llmsizer recommend --train` with the request's settings, its "
                                 "layout included (on-demand prices)"))
    return tuple(charts)


def _advice(job: TrainingJob, spec: ModelSpec, inf_need: int | None, need: int, notes: JobNotes) -> None:
    if job.purpose == "pretraining" or spec.encoder_decoder is not None:  # an encoder-decoder: no serving estimate
        return
    why = {"knowledge": "Knowledge that changes or must be cited is usually better served by retrieval over the "
                        "documents than by training it into the weights.",
           "style": "Tone and style are often reachable with instructions and a few examples in the prompt.",
           "format": "Output formats are often reachable with instructions, examples and constrained decoding."}
    # the two needs only where they compare (each device holds all the weights: levers.py inference_comparable)
    # the needs clause argues that training costs more memory than serving: said only where it does; where serving
    # the base (bf16, inference_sized) needs more, e.g. a QLoRA run's 4-bit base, that is said instead (probe20 D5)
    needs = (f": serving it needs about {format_bytes(inf_need)} per device against {format_bytes(need)} to train it"
             if inf_need is not None and inf_need < need else "")
    line = (f"Is training needed? Many cases are met by {spec.name} as it is, with prompt design and retrieval"
            f"{needs}. Validate with inference first and fine-tune only if that falls short.")
    if inf_need is not None and inf_need >= need:
        line += (f" (Serving the base model in bf16 needs about {format_bytes(inf_need)} per device, more than the "
                 f"{format_bytes(need)} this {job.method} run needs"
                 + (": its base is held in 4 bits" if job.method == "qlora" else "") + ".)")
    if job.purpose in why:
        line += " " + why[job.purpose]
    notes.advice.append(line)


def wall_clock_how(d: Duration | None, gpus: int) -> tuple[str, str]:
    """(how, source) of the plan's training wall clock, ``Duration.seconds``: tokens over the step's tokens/s, each
    optimizer step what ``step_time`` sums (its ``StepTime`` read, nothing recomputed): the micro-steps' compute (the
    GEMMs at the utilization of the peak, eq. (6), with the memory-bound kernels, attention and the kernel launches)
    and the communication it does not hide (eqs. (8'), (8'')), or a model-parallel step (eq. (P6)); then
    the optimizer update, the gradient accumulation and any paging (review32 N3: the text said tokens x F / (n R u),
    eq. (3), which leaves out all but the GEMMs)."""
    source = "estimate/duration.py step_time; formulas/training_time.py eqs. (6), (8'), (8'')"
    st = d.step if d is not None else None
    if d is None or st is None:
        return "not estimated (no device, no tokens, or no sourced peak)", source
    k = st.micro_steps
    mp = st.model_parallel
    parts = ([f"model-parallel step {mp.step_seconds:.3g} s (the stages' compute, tensor-parallel and point-to-point "
              "communication, the bubble, the data-parallel reduction not hidden; formulas/model_parallel_time.py "
              "eq. (P6))"] if mp is not None else
             [f"{k} micro-step{'s' if k != 1 else ''} x (compute {st.compute_seconds:.3g} s"
              + (f" + communication not hidden {st.exposed_comm_seconds:.3g} s" if st.exposed_comm_seconds else "")
              + ")"])
    parts += [f"{what} {t:.3g} s" for what, t in (
        ("optimizer update", st.optimizer_seconds), ("gradient accumulation", (k - 1) * st.accumulation_seconds),
        ("paging", st.paging_seconds)) if t]
    return (f"tokens / {st.tokens_per_second:,.0f} tokens/s on {gpus} device{'s' if gpus != 1 else ''}: per "
            f"optimizer step of {st.step_seconds:.3g} s, " + " + ".join(parts) + "; compute is the GEMMs at "
            f"{d.utilization:g} utilization of the {d.peak_name} with the memory-bound kernels, attention and kernel "
            "launches"), source

