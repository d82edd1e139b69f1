"""The plan of a whole request: each job planned separately (training first, so a service can serve a trained
model), the totals, the checks, and the plan-wide charts. Routing only."""

from __future__ import annotations

import datetime as _dt
import re
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from ..errors import FieldError, InputError
from ..request.reader import RequestError, load_request
from ..request.spec import InferenceJob, Job, Request, TrainingJob
from ..result import Assumption
from ..specs import InferenceWorkload, TrainingWorkload
from .checks import engine_rule_errors, run_checks
from .common import Sec
from .hardware import PlanContext
from .inference import plan_inference
from .result import Chart, JobPlan, Plan, Section, Series
from .training import plan_training

GENERAL_NOTES = (
    "Training and inference are sized separately: full training needs several times the memory of serving the "
    "same model (weights + gradients + optimizer states + activations), parameter-efficient fine-tuning a little "
    "more than serving.",
)


def make_plan(request: Request, *, hardware_files: Sequence[str | Path] = (), today: _dt.date | None = None,
              alternatives: bool = True) -> Plan:
    """Plan every job of ``request`` and run the checks. ``alternatives=False`` skips the catalog search for
    other hardware (the cost-per-option comparison) for jobs whose resources are named.

    >>> from llmsizer.request import parse_request
    >>> req = parse_request('''
    ... jobs:
    ...   - {name: chat, kind: inference, model: {name: qwen2.5-0.5b}, resources: {device: l4},
    ...      traffic: {concurrency: {typical: 2, peak: 8}, context: {typical: 2k, peak: 4k}}}
    ... ''')
    >>> plan = make_plan(req)
    >>> plan.job("chat").facts["fits"]
    True
    """
    if not isinstance(request, Request):  # make_plan({"version": 1}): one line naming the argument (probe13 D6)
        raise InputError(f"request: expected a Request (llmsizer.load_request(path) or request.parse_request(text)), "
                         f"got {type(request).__name__}")
    errors = engine_rule_errors(request)  # the estimate's engine rules: bad input, as `request check` refuses them
    if errors:
        raise RequestError(errors)
    ctx = PlanContext(hardware_files=tuple(hardware_files), today=today or _dt.date.today(), alternatives=alternatives)
    plans: dict[str, JobPlan] = {}
    trained = {j.name: j for j in request.jobs if isinstance(j, TrainingJob)}
    for job in request.jobs:  # training first, so a service can serve a trained model
        if isinstance(job, TrainingJob):
            plans[job.name] = plan_job(request, job, ctx, trained)
    for job in request.jobs:
        if isinstance(job, InferenceJob):
            plans[job.name] = plan_job(request, job, ctx, trained)
    ordered = tuple(plans[j.name] for j in request.jobs)
    checks = run_checks(request, plans)
    totals = _totals(request, ordered)
    charts = (_memory_chart(ordered),)
    title = request.title or Path(request.source).stem
    return Plan(title, request.source, ordered, totals, checks, charts, GENERAL_NOTES, tuple(ctx.notes),
                request.to_dict())


def plan_job(request: Request, job: Job, ctx: PlanContext, trained: dict[str, TrainingJob] | None = None) -> JobPlan:
    """One job of ``request`` planned as :func:`make_plan` plans it. A job's plan reads only the job, the request's
    own fields and (a service) the request's training jobs, whose adapters it may serve (``trained``: those jobs by
    name, read from the request when not given), never another job's plan; so the plan of one job with other
    resources (provider/needs.py: the capacity check sizing a job on an inventory's device type) is this, not the
    whole request planned again. Input errors name the file, line and job."""
    with _about(request, job):
        if isinstance(job, TrainingJob):
            return plan_training(job, request, ctx)
        if trained is None:
            trained = {j.name: j for j in request.jobs if isinstance(j, TrainingJob)}
        assert isinstance(job, InferenceJob)
        return plan_inference(job, request, ctx, trained)


@contextmanager
def _about(request: Request, job: Job) -> Iterator[None]:
    """Name the file, line and job in an input error raised while planning (e.g. a TP degree that does not
    divide the model's heads, found only once the model is known): a RequestError of that one line, the shape the
    checks before planning give (``engine_rule_errors``; the web's errors[]), whichever found it."""
    try:
        yield
    except FieldError as e:  # about one field: its own line and key path, as the reader's field errors say, each
        # field written as the file's own key for it (``tp`` where the file says ``tp``; the CLI writes ``--tp``)
        def key_path(field: str) -> str | None:
            return next((p for p in map(lambda n: field_path(request, job, n), _spellings(field)) if p), None)

        path = key_path(e.field)
        line = request.line_of(job, path) if path else job.line
        message = e.renamed(lambda f: (key_path(f) or f).rsplit(".", 1)[-1])
        if path:  # the key path before the message, once: a message that opens with the field's key gets the path there
            key = path.rsplit(".", 1)[-1]
            message = (path + message[len(key):] if re.match(rf"{re.escape(key)}(?![\w-])", message)
                       else f"{path}: {message}")
        raise RequestError([f"{request.source}:{line}: job '{job.name}' ({job.kind}): {message}"]) from None
    except InputError as e:
        raise RequestError([f"{request.source}:{job.line}: job '{job.name}' ({job.kind}): {e}"]) from None


# workload fields a request file's job names otherwise, beyond the workloads' OTHER_NAMES (request/fields.py: the
# job's kv_cache_dtype is the workload's kv_dtype, plan/inference.py passes it as such)
REQUEST_NAMES = {"kv_dtype": "kv_cache_dtype"}


def _spellings(field: str) -> tuple[str, ...]:
    """``field`` and the other names the workloads read for it (``OTHER_NAMES``: tensor_parallel / tp) or the
    request file gives it (``REQUEST_NAMES``: kv_dtype / kv_cache_dtype)."""
    names = [field, *([REQUEST_NAMES[field]] if field in REQUEST_NAMES else [])]
    for cls in (InferenceWorkload, TrainingWorkload):
        for a, b in cls.OTHER_NAMES.items():
            names += [b] if a == field else [a] if b == field else []
    return tuple(dict.fromkeys(names))


def field_path(request: Request, job: Job, field: str) -> str | None:
    """The key path inside ``job`` (e.g. 'settings.target_len') where the request file gives the workload field
    ``field``, or None when the file does not give it under that name."""
    prefix = f"jobs[{request.job_position(job)}]."
    if "." in field:  # a key path itself (traffic.requests_per_second.peak), or its parent where the file gives one
        return next((p for p in (field, field.rsplit(".", 1)[0]) if prefix + p in request.lines), None)
    return next((key[len(prefix):] for key in request.lines
                 if key.startswith(prefix) and key.rsplit(".", 1)[-1] == field), None)


def plan_file(path: str | Path, *, hardware_files: Sequence[str | Path] = (), today: _dt.date | None = None,
              alternatives: bool = True) -> Plan:
    """Read, validate and plan a request file."""
    return make_plan(load_request(path, hardware_files=hardware_files), hardware_files=hardware_files, today=today,
                     alternatives=alternatives)


def _totals(req: Request, jobs: tuple[JobPlan, ...]) -> Section:
    t = Sec("totals", "Totals")
    devices: dict[str, int] = {}
    for j in jobs:
        if j.hardware.device:
            devices[j.hardware.device] = devices.get(j.hardware.device, 0) + j.hardware.count
    t.add("devices", "devices", ", ".join(f"{n} x {d}" for d, n in devices.items()) or "none", "text",
          "sum over jobs (jobs on the same pool may share them)")
    t.add("storage", "storage to provision", sum(j.facts.get("storage_total") or 0 for j in jobs), "B_disk",
          "sum of the jobs' storage")
    one_off = [j.facts.get("cost_total") for j in jobs if j.kind == "training"]
    t.add("training_cost", "training runs", sum(x for x in one_off if x) if any(one_off) else None, "USD",
          "sum of run costs (by the hour)")
    monthly = [j.facts.get("cost_month") for j in jobs if j.kind == "inference"]
    t.add("services_month", "services per month", sum(x for x in monthly if x) if any(monthly) else None, "USD",
          "sum of monthly costs (by the hour)")
    svc_total = [j.facts.get("cost_total") for j in jobs if j.kind == "inference"]
    t.add("services_total", "services over their duration",
          sum(x for x in svc_total if x) if any(svc_total) else None, "USD")
    everything = [j.facts.get("cost_total") for j in jobs]
    t.add("total", "total estimated cost", sum(x for x in everything if x) if any(everything) else None, "USD",
          "training runs + services over their duration" + (
              "; unpriced jobs not counted" if any(x is None for x in everything) else ""))
    t.add("budget", "budget (request)", req.budget.total, "USD", "budget.total")
    t.add("budget_month", "monthly budget (request)", req.budget.per_month, "USD", "budget.per_month")
    return t.build()


def _memory_chart(jobs: tuple[JobPlan, ...]) -> Chart:
    """Memory per device of each job as stacked components (at the peak of training, the peak load of serving)."""
    names: list[str] = []
    rows: list[dict[str, float]] = []
    limits: list[tuple[int, float]] = []
    for i, j in enumerate(jobs):
        row: dict[str, float] = {}
        if j.estimate is not None:
            loc: Any = j.estimate.primary_location
            for it in j.estimate.items:
                if it.location == loc and it.bytes > 0:
                    row[it.name] = row.get(it.name, 0.0) + float(it.bytes)
                    if it.name not in names:
                        names.append(it.name)
        rows.append(row)
        budget = j.facts.get("budget_per_device")  # what the bars (the estimate's items) are drawn against
        if budget:
            limits.append((i, float(budget)))
    series = tuple(Series(n, tuple((float(i), r.get(n, 0.0)) for i, r in enumerate(rows))) for n in names)
    cats = tuple(f"{j.name} ({j.kind})" for j in jobs)
    return Chart("memory-breakdown", "Memory per device by job", "stacked-bars", "job", "memory per device", "B",
                 series, categories=cats, limits=tuple(limits),
                 note="training at its peak moment; services at their peak load per replica; ticks: device budget")


__all__ = ["Assumption", "make_plan", "plan_file", "plan_job"]
