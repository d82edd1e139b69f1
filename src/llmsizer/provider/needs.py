"""What each job of a planned request needs from a provider: a :class:`~.placement.JobNeed` per job, read from the
plan's figures (devices, nodes, memory, duration, storage with checkpoints) and the request (start, deadline,
access, maintenance windows). Routing only."""

from __future__ import annotations

import datetime as _dt
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from ..plan.result import JobPlan, Plan
from ..request.spec import Request
from ..units import compared_bytes
from .placement import ONGOING_END, DeviceFit, JobNeed, Quantized, Replanner, moment_after


def _day(d: _dt.date | None) -> _dt.datetime | None:
    return _dt.datetime(d.year, d.month, d.day) if d is not None else None


def _timer(job: Any, hardware_files: Sequence[str | Path]) -> Callable[[str, int, int], float | None]:
    """``job``'s wall-clock seconds on (device, devices, nodes): plan/training.py ``run_seconds``, the one
    duration rule (estimate/duration.py)."""
    from ..catalog.hardware import load_catalog
    from ..plan.training import run_seconds

    def seconds_on(device: str, devices: int, nodes: int) -> float | None:
        return run_seconds(job, load_catalog(hardware_files).device(device), devices, nodes)
    return seconds_on


def _quantizer(job: Any, jp: JobPlan, hardware_files: Sequence[str | Path]
               ) -> Callable[[str, int, int], Quantized | None] | None:
    """The service ``job`` re-estimated at a smaller weight format on (device, devices, RAM per device of the node):
    plan/inference.py ``quantized_fit`` (the format recommend's chooser picks, sized by ``fit``), its memory said
    as ``fit`` says it (render/fit_text.py ``memory_line``), with the layout it was sized at where the request
    pins a tensor-parallel degree (plan/inference.py ``at_jobs_degree``). The memory given: a CPU's, the RAM per
    device of the inventory's node (which the placement holds); a GPU's, the request's ``resources.memory`` on the
    job's own device, else the catalog's. Each question asked once. None when the plan names no weight format (nothing to compare
    a format with)."""
    from ..catalog.hardware import load_catalog
    from ..plan.inference import quantized_fit
    from ..render.fit_text import memory_line

    plan_format = jp.facts.get("weights_format")
    if not plan_format:
        return None
    answers: dict[tuple[str, int, int], Quantized | None] = {}

    def at(device: str, devices: int, ram: int) -> Quantized | None:
        key = (device, devices, ram)
        if key not in answers:
            dev = load_catalog(hardware_files).device(device)
            memory = _cpu_memory(dev.kind, ram) or (job.resources.memory if device == jp.hardware.device else None)
            alt = quantized_fit(job, str(plan_format), device, devices, memory=memory, hardware_files=hardware_files)
            r = alt.fit if alt is not None else None
            answers[key] = None if alt is None or r is None or r.memory_per_device is None else Quantized(
                r.weights_format, r.engine, dev.kind, r.memory_per_device, memory_line(r), alt.layout,
                _verdict_need(r, dev.kind), alt.passed_over)
        return answers[key]
    return at


def _verdict_need(r: Any, kind: str) -> int:
    """What fit's verdict compared per device (estimate/fit.py ``verdict_need``: a pool engine's workload share of its
    pool), for an answer that has a serving verdict; else (a training run) its memory per device, what it compared."""
    from ..estimate.fit import verdict_need
    est = r.estimate
    if est is not None and "memory_budget" in est.details:
        return verdict_need(est, kind == "cpu")[0]
    return int(r.memory_per_device)


def _cpu_memory(kind: str, ram: int) -> int | None:
    """The memory an alternative on a device of ``kind`` is sized with: a CPU holds the job in its node's RAM per
    device (inventory.py ``Node.ram_per_device``, what the placement holds of it); a GPU has its own (None: the
    catalog's)."""
    return ram if kind == "cpu" and ram else None


def _fitter(job: Any, jp: JobPlan, hardware_files: Sequence[str | Path]
            ) -> Callable[[str, int, int, int], DeviceFit | None]:
    """``job`` sized by ``fit`` on (device, devices, nodes, RAM per device of the node): a service through
    plan/inference.py ``device_fit`` (one node: ``fit MODEL --device D --count N`` at the plan's engine, weights and
    peak load), a training run through plan/training.py ``device_fit`` (``fit --train`` over ``nodes`` machines);
    its memory said as ``fit`` says it (render/fit_text.py ``memory_line``), a service's with the layout it was
    sized at where the request pins a tensor-parallel degree (``at_jobs_degree``). The memory given: a CPU's, the RAM
    per device of the inventory's node (which the placement holds); a GPU's, the catalog's. None where it does not
    fit. Each question asked once."""
    from ..catalog.hardware import load_catalog
    from ..plan.inference import device_fit as serving_fit
    from ..plan.training import device_fit as training_fit
    from ..render.fit_text import memory_line

    answers: dict[tuple[str, int, int, int], DeviceFit | None] = {}

    def on(device: str, devices: int, nodes: int, ram: int) -> DeviceFit | None:
        key = (device, devices, nodes, ram)
        if key not in answers:
            dev = load_catalog(hardware_files).device(device)
            memory = _cpu_memory(dev.kind, ram)
            layout = ""
            if jp.kind == "training":
                r = training_fit(job, device, devices, nodes, memory=memory, hardware_files=hardware_files)
            else:
                alt = serving_fit(job, device, devices, memory=memory, hardware_files=hardware_files)
                r, layout = (alt.fit, alt.layout) if alt is not None else (None, "")
            answers[key] = None if r is None or not r.fits or r.memory_per_device is None or \
                r.budget_per_device is None else DeviceFit(dev.kind, r.memory_per_device, memory_line(r), layout,
                                                           _verdict_need(r, dev.kind))
        return answers[key]
    return on


def _replanner(job: Any, request: Request, now: _dt.datetime, hardware_files: Sequence[str | Path],
               ctx: Any = None) -> Replanner:
    """``job`` planned again with its resources naming (device, devices, nodes; and ``network``, a bandwidth per
    machine [B/s], as its resources.network where given: the fabric a run is placed on): plan/compose.py ``plan_job``, the
    plan ``make_plan`` gives that job in the request naming that hardware (a job's plan reads only the job, the
    request's own fields and its training jobs, so the rest of the request is not planned again: once per request,
    not once per job), read into a need by :func:`need_of`. ``ctx``: the plan context the request's replans share
    (its catalog and memoized searches), made on first use when not given. Each question asked once."""
    import dataclasses

    from ..plan.compose import plan_job
    from ..plan.hardware import PlanContext
    answers: dict[tuple[str, int, int, float | None], JobNeed] = {}

    def on(device: str, devices: int, nodes: int, network: float | None = None) -> JobNeed:
        nonlocal ctx
        key = (device, devices, nodes, network)
        if key not in answers:
            if ctx is None:
                ctx = PlanContext(hardware_files=tuple(hardware_files), today=now.date(), alternatives=False)
            res = dataclasses.replace(job.resources, device=device, instance=None, count=devices,
                                      nodes=nodes if nodes > 1 else None)
            if network is not None:  # a bandwidth per machine, as fit --network reads it (request/quantities.py)
                res = dataclasses.replace(res, network=f"{network!r} B/s")
            named = dataclasses.replace(job, resources=res)
            req = dataclasses.replace(request, jobs=tuple(named if j.name == job.name else j for j in request.jobs))
            answers[key] = need_of(plan_job(req, named, ctx), named, req, now, hardware_files, ctx)
        return answers[key]
    return on


def _agreed_windows(job: Any) -> tuple[str, ...]:
    """The service's agreed maintenance windows (``service.maintenance_windows``, then ``interruptible``), as the
    request reader checked them (request/reader.py ``inference_checks``: a text request/windows.py ``parse_window``
    cannot read is refused there, naming the field and its file:line, for request check, plan and capacity alike)."""
    service = getattr(job, "service", None)
    return tuple(w for key in ("maintenance_windows", "interruptible") for w in getattr(service, key, None) or ())


def need_of(jp: JobPlan, job: Any, request: Request, now: _dt.datetime,
            hardware_files: Sequence[str | Path] = (), plan_ctx: Any = None) -> JobNeed:
    """``job``'s need read from its plan ``jp``; ``plan_ctx``: the plan context its replans share (:func:`_replanner`)."""
    hw = jp.hardware
    agreed = _agreed_windows(job)
    f = jp.facts
    start = _day(job.start) or _day(request.start) or now
    ongoing = False
    basis = unknown = ""
    if jp.kind == "training":
        # the plan's duration (estimate/duration.py, the one rule); without one (a device with no sourced peak
        # FLOP/s) the requester's own figure, named as such, else no placement: a window of made-up length would be
        # booked as if it were the run's
        seconds = float(f.get("seconds") or 0.0)
        if not seconds and job.expected_duration:
            seconds = float(job.expected_duration)
            basis = "the request's expected_duration: the plan could not time the run"
        elif not seconds:
            seconds = 0.0
            unknown = (f"the run's duration on {jp.hardware.label} is not known (`llmsizer plan`: duration not "
                       "estimated), so no window can be sized for it; state expected_duration in the request")
    else:
        sv = job.service
        # a service is held for its whole stated duration; with no duration (ongoing) until it is released
        ongoing = bool(sv.ongoing) or not sv.duration
        seconds = float(sv.duration) if sv.duration and not sv.ongoing else (ONGOING_END - start).total_seconds()
    deadline = None  # a service's deadline is when it must be up, not when it ends
    if jp.kind == "training" and job.deadline is not None:
        deadline = _day(job.deadline.date) if job.deadline.date is not None else \
            moment_after(start, float(job.deadline.seconds or 0))
    total = float(f.get("storage_total") or 0)
    sub = float(f.get("storage_subtotal") or total)
    scale = total / sub if sub else 1.0  # the plan's headroom over the sum of parts
    ck = int(f.get("checkpoint_bytes") or 0)
    n_ck = round(float(f.get("checkpoints_bytes") or 0) / ck) if ck else 0
    fixed_raw = f.get("storage_fixed")
    fixed = float(fixed_raw) * scale if fixed_raw is not None else total
    access = getattr(job, "access", None)
    data = getattr(job, "dataset", None)
    return JobNeed(
        name=jp.name, kind=jp.kind, device=hw.device or "", devices=max(1, hw.count), nodes=max(1, hw.nodes),
        seconds=seconds, start=start, deadline=deadline, memory_per_device=int(f.get("memory_per_device") or 0),
        verdict_need_per_device=int(f.get("verdict_need_per_device") or 0),
        device_kind=hw.device_kind or "gpu", storage_fixed=int(fixed), checkpoint_bytes=int(ck * scale),
        checkpoint_file_bytes=ck, disk_headroom=round(scale - 1.0, 6),
        checkpoint_interval=float(f.get("interval_seconds") or 0.0), checkpoints_max=n_ck,
        fixed_address=bool(access and access.fixed_address),
        isolation=access.isolation if access and access.isolation not in (None, "none") else None,
        accepts_maintenance=bool(agreed), maintenance_windows=agreed, sensitivity=getattr(data, "sensitivity", None), offsite_allowed=getattr(data, "offsite_allowed", None),
        run_seconds=_timer(job, hardware_files) if jp.kind == "training" else None,
        quantized=_quantizer(job, jp, hardware_files) if jp.kind == "inference" else None,
        fit_on=_fitter(job, jp, hardware_files),
        pool=job.resources.pool, jurisdiction=job.resources.jurisdiction,
        network=jp.value("network", "node_bandwidth") if hw.nodes > 1 else None, ongoing=ongoing,
        team=request.team, cost=_usd(f.get("cost_total")), cost_per_month=_usd(f.get("cost_month")),
        memory_verdict=_memory_verdict(jp),
        memory_binding=_memory_binding(jp), duration_basis=basis, duration_verdict=unknown,
        warnings=tuple(str(w) for w in jp.warnings),
        hardware_named=job.resources.given,
        # the machines one copy spans as booked: ceil(count / nodes) per node (JobNeed.per_node), which need not be
        # the plan's machine size (12 bare GPUs: 8 + 4 planned, 6 + 6 booked, where a TP-4 copy straddles two)
        copy_nodes=hw.copy_nodes_on(-(-max(1, hw.count) // max(1, hw.nodes))),
        tp_nodes=_tp_nodes(hw), nodes_named=job.resources.nodes is not None, link_bandwidth=hw.link_bandwidth,
        ttft=_seconds_or_none(f.get("ttft_peak")) if jp.kind != "training" else None,
        tokens_per_second_per_user=_seconds_or_none(f.get("tps_user_peak")) if jp.kind != "training" else None,
        replan=_replanner(job, request, now, hardware_files, plan_ctx))


def _tp_nodes(hw: Any) -> int:
    """The most machines one tensor-parallel group spans on the booked layout (``ceil(count / nodes)`` per node, as
    ``copy_nodes``): the count's TP groups laid out in rank order, each ``tensor_parallel`` devices
    (estimate/fit.py ``worst_copy_machines``, the copies' rule applied to the groups)."""
    from ..estimate.fit import worst_copy_machines
    tp = max(1, hw.tensor_parallel)
    return worst_copy_machines(tp, -(-max(1, hw.count) // max(1, hw.nodes)), max(1, hw.count // tp))


def _seconds_or_none(v: Any) -> float | None:
    """A plan fact as a float (a time, a rate), None where the plan has none."""
    return float(v) if v is not None else None


def _usd(v: Any) -> float | None:
    return float(v) if v is not None else None


def _memory_verdict(jp: JobPlan) -> str:
    """The plan's answer when the job does not fit its devices' memory (its facts ``fits``,
    ``verdict_need_per_device``, ``verdict_budget_per_device``: plan/inference.py and plan/training.py), or when the plan could not size it there at all (its
    ``fit_error``: the plan's error check 'Cannot be fitted'), as one line; '' otherwise. A job the plan cannot size
    is not placed: its memory on the devices is unknown."""
    f = jp.facts
    if f.get("fit_error"):
        return (f"{jp.hardware.label} cannot be sized for the job: {f['fit_error']} (`llmsizer plan`: Cannot be "
                "fitted)")
    if f.get("binding") == "context window" and f.get("refused_window"):  # the engine will not start, whatever
        from ..render.fit_text import window_remedy  # the memory: fit's reason and its remedy
        return (f"{jp.hardware.label}: {f['refused_window']['reason']}; give "
                f"{window_remedy(f['refused_window'], rerun=False)} (`llmsizer plan`: Peak load does not fit)")
    if f.get("rate_refusal"):  # fit's answer: the devices do not carry the peak rate (plan/inference.py)
        return f"{jp.hardware.label} {f['rate_refusal']} (`llmsizer plan`: Peak load does not fit)"
    need, budget = f.get("verdict_need_per_device"), f.get("verdict_budget_per_device")
    if f.get("fits") is not False or not need or not budget:
        return ""
    per_device, of_budget = f.get("memory_per_device"), f.get("budget_per_device")
    if jp.kind == "inference" and per_device is not None and of_budget is not None:
        # fit's memory line (render/fit_text.py memory_words), as `fit` and the plan's text print it for the same
        # devices: each figure named (memory per device of the device memory; under vLLM/SGLang the pool reserved
        # and what this workload needs of what the pool offers, the pair the verdict compares)
        from ..render.fit_text import memory_words
        words = memory_words(jp.hardware.engine or "", int(per_device), int(of_budget),
                             jp.estimate.details if jp.estimate is not None else {})
        return f"{jp.hardware.label} does not hold the job: {words} (`llmsizer plan`: memory)"
    need_said, budget_said = compared_bytes(need, budget)
    return (f"{jp.hardware.label} does not hold the job: it needs {need_said} per device, over the "
            f"{budget_said} budget per device (`llmsizer plan`: memory)")


def _memory_binding(jp: JobPlan) -> str:
    """What binds the plan's verdict of :func:`_memory_verdict` (its facts ``binding``, estimate/fit.py
    ``FitResult.binding``): 'context window' where the engine refuses the context, 'rate' where the devices do not
    carry the peak rate, else 'memory'."""
    f = jp.facts
    if f.get("fit_error"):
        return "memory"
    if f.get("binding") == "context window" and f.get("refused_window"):
        return "context window"
    return "rate" if f.get("rate_refusal") else "memory"


def needs_from_plan(plan: Plan, request: Request, now: _dt.datetime | None = None,
                    hardware_files: Sequence[str | Path] = ()) -> list[JobNeed]:
    """One need per job with hardware, in the request's order: a job whose request names none is kept even when
    the plan found no catalog device for it (the check sizes it on the inventory's devices: placement.py
    ``on_inventory``); a job with named hardware the plan could not resolve to a device is skipped."""
    from ..plan.hardware import PlanContext
    now = now or _dt.datetime.now(_dt.timezone.utc).replace(tzinfo=None, microsecond=0)
    jobs = {j.name: j for j in request.jobs}
    ctx = PlanContext(hardware_files=tuple(hardware_files), today=now.date(), alternatives=False)  # the replans'
    return [need_of(jp, jobs[jp.name], request, now, hardware_files, ctx) for jp in plan.jobs
            if jp.hardware.device or not jobs[jp.name].resources.given]
