"""The checks a careful reviewer runs on a request, each with a severity and a message that says what to change.

The seed's four classic mistakes come first: (1) training sized with inference numbers, (2) checkpoint storage
missing or too small, (3) training and serving on the same resources, (4) no hand-over at the end of training.
Then the rest: sensitive data with no location or access stated, no maintenance window for a long-running
service, peak load missing, a deadline the estimate cannot meet, a budget it exceeds, and smaller ones.

Severity: ``error`` must be fixed before resources can be agreed; ``warning`` should be addressed; ``info`` is
advice. Checks only read the request and the job plans; they compute nothing of their own beyond comparisons.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from ..errors import InputError
from ..estimate.duration import comm_bound_remedy
from ..estimate.inference.compose import check_engine_kv_dtype
from ..recommend import PRACTICAL_TRAINING_SECONDS
from ..request.spec import InferenceJob, Job, Request, TrainingJob
from ..units import compared_bytes, format_bytes, format_seconds, format_usd
from .hardware import owned_hardware
from .result import Check, JobPlan

SENSITIVE = ("confidential", "restricted")
LONG_SERVICE_SECONDS = 30 * 86400  # a service running a month or more needs agreed maintenance windows
# Warning thresholds of the checks below: named thresholds, not measurements (each check is a warning or a
# stated rule, never a change to the estimate).
# model.size is a rounded, published size ("8B" for Llama-3.1-8B's counted 8.03B, "70B" for 70.6B, "7B" for
# Mistral-7B's 7.24B); more than this fraction from the counted parameters is another model or a typo, not rounding.
MODEL_SIZE_TOLERANCE = 0.15
# a training run without checkpoints, or an interval between them, longer than this loses more than half a working
# day's device time to one interruption: an error (no checkpoints) or a warning (a longer interval).
LONG_INTERVAL_SECONDS = 4 * 3600


def engine_rule_errors(req: Request) -> list[str]:
    """The estimate's engine rules on each inference job that names its engine, one line per problem in the
    request reader's form (file:line: job: field: message), the message the estimate itself raises: a KV cache dtype
    the engine does not store (estimate/inference/compose.py ``check_engine_kv_dtype``, the rule ``infer`` applies).
    The reader (below the core) checks the name; `request check` adds these, so it refuses what ``infer`` refuses."""
    out = []
    for j in req.jobs:
        if isinstance(j, InferenceJob) and j.engine is not None and j.kv_cache_dtype is not None:
            try:
                check_engine_kv_dtype(j.engine, j.kv_cache_dtype)
            except InputError as e:
                out.append(f"{req.source}:{req.line_of(j, 'kv_cache_dtype')}: job '{j.name}' ({j.kind}): "
                           f"kv_cache_dtype: {e}")
    return out


def fmt_time(seconds: float | None) -> str:
    return "?" if seconds is None else format_seconds(seconds)


def fmt_disk(n: float | None) -> str:
    return "?" if n is None else format_bytes(n, binary=False)


class _Ctx:
    def __init__(self, req: Request, plans: dict[str, JobPlan]) -> None:
        self.req, self.plans = req, plans

    def check(self, id: str, severity: str, title: str, message: str, job: Job | None = None, field: str = "",
              advice: str = "") -> Check:
        line = self.req.line_of(job, field) if job is not None or field else None
        return Check(id, severity, title, message, job.name if job is not None else None, field or None, line,
                     advice)


CheckFn = Callable[[_Ctx], Iterator[Check]]
CHECKS: list[CheckFn] = []


def check(fn: CheckFn) -> CheckFn:
    CHECKS.append(fn)
    return fn


def _training(c: _Ctx) -> Iterator[tuple[TrainingJob, JobPlan]]:
    for j in c.req.jobs:
        if isinstance(j, TrainingJob):
            yield j, c.plans[j.name]


def _inference(c: _Ctx) -> Iterator[tuple[InferenceJob, JobPlan]]:
    for j in c.req.jobs:
        if isinstance(j, InferenceJob):
            yield j, c.plans[j.name]


# ------------------------------------------------------------------------------------------ the four mistakes

@check
def training_memory(c: _Ctx) -> Iterator[Check]:
    """(1) Training sized with inference numbers: the requested devices hold less than the training estimate."""
    for j, p in _training(c):
        f = p.facts
        need, budget, inf = (f.get("verdict_need_per_device"), f.get("verdict_budget_per_device"),
                             f.get("inference_need"))
        if p.hardware.origin == "none":
            slow = f.get("practical_limit_rejected")
            yield c.check("no-hardware", "error", "No hardware for this job",
                          "no resources are named and no catalog option fits the run within its constraints"
                          + (f"; no deadline is given, so the {format_seconds(PRACTICAL_TRAINING_SECONDS)} practical "
                             f"limit of a training run stands in for one and rejects {slow} option"
                             f"{'s' if slow > 1 else ''} as too slow" if slow else ""),
                          j, "resources", "name resources (device, count) or relax the deadline or budget"
                          + (" (a deadline longer than the practical limit allows a longer run)" if slow else ""))
            continue
        if need is None or budget is None or need <= budget:
            continue
        field = "resources.memory" if j.resources.memory else "resources"
        where = "requested" if p.hardware.origin == "requested" else "suggested"
        if inf is not None and inf <= budget:
            yield c.check(
                "training-sized-with-inference-numbers", "error", "Training sized with inference numbers",
                f"the {where} {p.hardware.label} gives {format_bytes(budget)} per device, enough to serve the model "
                f"({format_bytes(inf)}), but training needs {format_bytes(need)} per device ({need / inf:.1f}x): "
                "gradients, optimizer states and activations come on top of the weights",
                j, field, _levers(f))
        else:
            yield c.check(
                "training-memory-does-not-fit", "error", "Training does not fit the requested devices",
                f"training needs {format_bytes(need)} per device; the {where} {p.hardware.label} gives "
                f"{format_bytes(budget)} per device after headroom", j, field, _levers(f))


def _levers(facts: dict[str, Any]) -> str:
    """The advice of a training run that does not fit: the levers it has not pulled (estimate/training/levers.py
    ``memory_levers``, in the plan's facts)."""
    levers = list(facts.get("memory_levers") or ["devices with more memory", "more devices"])
    return "ask for " + (", ".join(levers[:-1]) + ", or " + levers[-1] if len(levers) > 1 else levers[0])


@check
def checkpoint_storage(c: _Ctx) -> Iterator[Check]:
    """(2) Checkpoint storage missing or too small; the disk filling half-way when nothing is pruned."""
    for j, p in _training(c):
        f, ck = p.facts, j.checkpoints
        one, kept, secs = f.get("checkpoint_bytes"), f.get("checkpoints_bytes"), f.get("seconds")
        if ck.interval is None:
            sev = "error" if (secs or 0) > LONG_INTERVAL_SECONDS or j.method == "full" else "warning"
            yield c.check("no-checkpoints", sev, "No checkpoints planned",
                          "no checkpoints.interval: an interruption "
                          + (f"after {fmt_time(secs)} of training " if secs is not None else "at any point ")
                          + f"restarts from zero; one checkpoint is {fmt_disk(one)}", j, "checkpoints",
                          "set checkpoints.interval, keep and storage")
            continue
        if ck.storage is None and j.resources.storage is None:
            yield c.check("checkpoint-storage-missing", "error", "Checkpoint storage missing",
                          f"no storage is stated for checkpoints: one checkpoint is {fmt_disk(one)} and keeping "
                          f"{ck.keep if ck.keep is not None else 'all'} needs {fmt_disk(kept)}", j, "checkpoints",
                          f"set checkpoints.storage to at least {fmt_disk(kept)}")
            continue
        fill = f.get("disk_fill")
        if ck.storage is not None and kept is not None and ck.storage < kept:
            given, needed = compared_bytes(ck.storage, kept, binary=False)
            yield c.check("checkpoint-storage-too-small", "error", "Checkpoint storage too small",
                          f"checkpoints.storage {given} is below the {needed} that keeping "
                          f"{ck.keep if ck.keep is not None else 'every'} checkpoint(s) of {fmt_disk(one)} needs "
                          "(one more is on disk while the newest is written)", j, "checkpoints.storage",
                          f"raise checkpoints.storage to {fmt_disk(kept)} or keep fewer")
        if fill is not None and (ck.keep is None or (ck.storage is not None and kept is not None
                                                      and ck.storage < kept)):
            n, t = fill
            steps = f.get("step_seconds")
            at_step = f" (step {int(t / steps):,})" if steps else ""
            yield c.check("disk-fills", "error", "The disk fills during the run",
                          f"without pruning, checkpoint {n} fails after {fmt_time(t)}{at_step} of a "
                          f"{fmt_time(secs)} run: a full disk half-way is a common cause of failed runs", j,
                          "checkpoints.keep", "set checkpoints.keep (and prune older checkpoints) or add storage")
        total, req_total = f.get("storage_total"), j.resources.storage
        if req_total is not None and total is not None and req_total < total:
            given, needed = compared_bytes(req_total, total, binary=False)
            yield c.check("storage-too-small", "error", "Storage too small for the job",
                          f"resources.storage {given} is below the {needed} the job needs "
                          "(datasets, base model, checkpoints, final files, logs and headroom)", j, "resources.storage",
                          f"ask for at least {fmt_disk(total)}")


@check
def shared_resources(c: _Ctx) -> Iterator[Check]:
    """(3) Training and serving placed on the same resources."""
    pools: dict[str, list[Job]] = {}
    for j in c.req.jobs:
        if j.resources.pool:
            pools.setdefault(j.resources.pool.strip().lower(), []).append(j)
    for jobs in pools.values():
        trains = [j for j in jobs if isinstance(j, TrainingJob)]
        serves = [j for j in jobs if isinstance(j, InferenceJob)]
        for s in serves:
            for t in trains:
                yield c.check("training-and-serving-share-resources", "error", "Training and serving on the same "
                              "resources", f"training job '{t.name}' and service '{s.name}' both run on pool "
                              f"'{s.resources.pool}': heavy training load undermines a live service", s,
                              "resources.pool", "give the service its own pool (or reserve devices for it)")


@check
def handover(c: _Ctx) -> Iterator[Check]:
    """(4) No hand-over at the end of training."""
    for j, _ in _training(c):
        h = j.handover
        if h.model_destination is None:
            yield c.check("no-handover", "error", "No hand-over at the end of training",
                          "handover.model_destination is not stated: agree up front where the model files, data and "
                          "logs go when training ends", j, "handover",
                          "set handover.model_destination, logs_destination, data_disposal and cleanup")
            continue
        missing = [k for k in ("cleanup", "logs_destination", "data_disposal") if getattr(h, k) is None]
        if missing:
            yield c.check("handover-incomplete", "warning", "Hand-over incomplete",
                          f"handover has no {', '.join(missing)}: say how the environment is cleaned up and where "
                          "logs and data copies go", j, "handover")


# ------------------------------------------------------------------------------------------ careful reviewer

@check
def sensitive_data(c: _Ctx) -> Iterator[Check]:
    for j, _ in _training(c):
        d = j.dataset
        if d.sensitivity is None and not d.personal_data:
            yield c.check("dataset-sensitivity-missing", "warning", "Data sensitivity not stated",
                          "dataset.sensitivity is not stated (public, internal, confidential, restricted)", j,
                          "dataset")
            continue
        if d.sensitivity in SENSITIVE or d.personal_data:
            what = "personal" if d.personal_data else str(d.sensitivity)
            missing = [k for k in ("location", "access") if getattr(d, k) is None]
            if missing:
                yield c.check("sensitive-data-unplaced", "error", "Sensitive data with no location or access",
                              f"{what} data, but dataset {' and '.join(missing)} not stated", j, "dataset",
                              "state where the data lives and is read from, and who may read it")
            if d.offsite_allowed is None:
                yield c.check("offsite-unconfirmed", "warning", "Off-site storage not confirmed",
                              f"{what} data: confirm whether it may sit in a partner data center "
                              "(dataset.offsite_allowed)", j, "dataset")
            if j.handover.data_disposal is None and j.handover.model_destination is not None:
                yield c.check("sensitive-data-disposal", "warning", "Disposal of sensitive data not stated",
                              f"{what} data: say what happens to its copies after training (handover.data_disposal)",
                              j, "handover")


@check
def maintenance_window(c: _Ctx) -> Iterator[Check]:
    for j, _ in _inference(c):
        sv = j.service
        long_running = sv.ongoing or sv.duration is None or sv.duration >= LONG_SERVICE_SECONDS
        if long_running and not sv.maintenance_windows:
            yield c.check("no-maintenance-window", "warning", "No maintenance window",
                          "a long-running service needs agreed maintenance windows (updates, driver and model "
                          "changes); none is stated", j, "service", "set service.maintenance_windows")
        if sv.duration is None and not sv.ongoing:
            yield c.check("service-duration-missing", "warning", "Service duration not stated",
                          "service.duration is not stated (or ongoing: true)", j, "service")


@check
def peak_load(c: _Ctx) -> Iterator[Check]:
    for j, _ in _inference(c):
        t = j.traffic
        if t.concurrency.peak is None and t.concurrency.typical is not None:
            yield c.check("peak-concurrency-missing", "warning", "Peak concurrency missing",
                          f"only a typical concurrency ({t.concurrency.typical:g}) is given: the service is sized for "
                          "it and peaks will queue or fail", j, "traffic.concurrency",
                          "give traffic.concurrency.peak")
        if t.context.peak is None:
            yield c.check("peak-context-missing", "warning", "Peak context length missing",
                          "no peak context length: KV cache memory grows with it", j, "traffic.context",
                          "give traffic.context.peak")
        if t.output.typical is None and t.output.peak is None:
            yield c.check("output-length-missing", "info", "Output length not stated",
                          "traffic.output is not stated: speed and traffic use a default", j, "traffic")


def _does_not_fit_remedy(f: dict[str, Any]) -> str:
    """The remedy of a service that does not fit, from what binds fit's verdict (the facts ``binding`` and
    ``refused_window``: estimate/fit.py ``FitResult.binding``): an engine that will not start past the model's window
    needs a context within it or its override (render/fit_text.py ``window_remedy``, fit's hint); memory or a rate,
    more devices, a smaller format or a lower peak."""
    if f.get("binding") == "context window" and f.get("refused_window"):
        from ..render.fit_text import window_remedy
        return "give " + window_remedy(f["refused_window"], rerun=False)
    return ("more devices (for memory: a tensor-parallel degree dividing the attention heads, or pipeline stages "
            "(pipeline_parallel); for a rate: replicas), a smaller weight format, or a lower peak")


@check
def fit_and_latency(c: _Ctx) -> Iterator[Check]:
    for j, p in _inference(c):
        f = p.facts
        if p.hardware.origin == "none":
            why = (f"no resources are named and no catalog option could be searched: {f['search_error']}"
                   if f.get("search_error") else
                   "no resources are named and no catalog option fits the peak load and latency limits")
            yield c.check("no-hardware", "error", "No hardware for this service", why, j, "resources")
            continue
        if f.get("fit_error"):
            yield c.check("cannot-fit", "error", "Cannot be fitted", str(f["fit_error"]), j, "resources")
            continue
        if f.get("fits") is False or f.get("rate_refusal"):  # (a stated rate past the capacity: fit's answer)
            fig = p.section("memory").get("fits")
            why = f.get("rate_refusal") or (fig.formula if fig is not None else "over the memory budget")
            yield c.check("service-does-not-fit", "error", "Peak load does not fit", f"{p.hardware.label}: {why}",
                          j, "resources", _does_not_fit_remedy(f))
        lat = j.latency
        # fit's warnings of the peak rate, as fit gives them (estimate/rate_capacity.py rate_warnings); the first
        # token past a stated latency.ttft is the latency-ttft check's
        said = f.get("rate_warnings_peak") or {}
        if said.get("slow_first_token") and lat.ttft is None:
            yield c.check("slow-first-token", "warning", "First token slower than a user waits",
                          f"{p.hardware.label} at the peak rate: {said['slow_first_token']}", j,
                          "traffic.requests_per_second")
        elif f.get("slow_first_token_peak") and lat.ttft is None:  # (at the peak concurrency: fit's, the same)
            yield c.check("slow-first-token", "warning", "First token slower than a user waits",
                          f"{p.hardware.label} at the peak load: {f['slow_first_token_peak']}", j,
                          "traffic.concurrency")
        if said.get("near_capacity"):
            yield c.check("near-capacity", "warning", "Peak rate near the capacity",
                          f"{p.hardware.label}: {said['near_capacity']}", j, "traffic.requests_per_second")
        # a request's first token at peak as recommend checks it (estimate/fit.py first_token_seconds: the TTFT at
        # the peak load plus the wait of a queued request, formulas/serving_queue.py eq. Q3)
        ttft, tps, wait = f.get("first_token_peak", f.get("ttft_peak")), f.get("tps_user_peak"), f.get("queue_wait_peak")
        if lat.ttft is not None and ttft is not None and ttft > lat.ttft:
            yield c.check("latency-ttft", "warning", "Time to first token above the limit",
                          f"about {ttft:.2f} s at the peak load"
                          + (f" ({wait:.2f} s of it waiting in the engine's queue)" if wait else "")
                          + f" against {lat.ttft:g} s required", j, "latency.ttft")
        if lat.tokens_per_second_per_user is not None and tps is not None and tps < lat.tokens_per_second_per_user:
            yield c.check("latency-speed", "warning", "Generation speed below the limit",
                          f"about {tps:.1f} tokens/s per user at peak against {lat.tokens_per_second_per_user:g} "
                          "required", j, "latency.tokens_per_second_per_user")


@check
def operations(c: _Ctx) -> Iterator[Check]:
    for j, _ in _inference(c):
        op = j.operations
        if not op.incident_contacts:
            yield c.check("no-incident-contacts", "warning", "No incident contacts",
                          "operations.incident_contacts is empty: who is called when the service breaks?", j,
                          "operations")
        if op.monitoring is None:
            yield c.check("no-monitoring", "warning", "Monitoring not stated",
                          "operations.monitoring is not stated", j, "operations")
        if j.access.method is None:
            yield c.check("access-method-missing", "warning", "Access method not stated",
                          "access.method is not stated (who connects, and how)", j, "access")
        if j.access.fixed_address is None:
            yield c.check("fixed-address-unstated", "info", "Fixed address not stated",
                          "say whether clients need a fixed address (allow-lists, firewall rules)", j, "access")


@check
def deadline(c: _Ctx) -> Iterator[Check]:
    ends: dict[str, float] = {}
    for j, p in _training(c):
        secs, dl = p.facts.get("seconds"), p.facts.get("deadline_seconds")
        if secs is not None:
            ends[j.name] = secs
        if secs is not None and dl is not None and secs > dl:
            yield c.check("deadline-missed", "error", "The deadline cannot be met",
                          f"the run is estimated at {fmt_time(secs)} but the deadline leaves {fmt_time(dl)}", j,
                          "deadline", "more devices, fewer tokens, or a later deadline")
        if secs is not None and j.expected_duration is not None and secs > 1.5 * j.expected_duration:
            yield c.check("expected-duration-short", "warning", "Expected duration looks short",
                          f"the request expects {fmt_time(j.expected_duration)}; the estimate is {fmt_time(secs)}",
                          j, "expected_duration")
    for ij, _ in _inference(c):
        src = ij.model.from_job
        if src not in ends or ij.deadline is None:
            continue
        sj = c.req.job(src)
        train_start = sj.start or c.req.start
        own_start = ij.start or c.req.start
        available = None
        if ij.deadline.date is not None and train_start is not None:
            available = (ij.deadline.date - train_start).days * 86400.0
        elif ij.deadline.seconds is not None:
            gap = (own_start - train_start).days * 86400.0 if own_start and train_start else 0.0
            available = gap + ij.deadline.seconds
        if available is not None and ends[src] > available:
            yield c.check("deadline-missed", "error", "The service cannot go live on time",
                          f"it serves the model of '{src}', whose training is estimated at {fmt_time(ends[src])}, "
                          f"but the service must be live {fmt_time(available)} after that training starts", ij,
                          "deadline", "start the training earlier or make it faster")


@check
def budget(c: _Ctx) -> Iterator[Check]:
    total_cost, total_month, unknown = 0.0, 0.0, []
    for j in c.req.jobs:
        p = c.plans[j.name]
        f = p.facts
        cost, month, price = f.get("cost_total"), f.get("cost_month"), f.get("price_per_hour")
        if cost is None:
            unknown.append(j.name)
        else:
            total_cost += cost
        total_month += month or 0.0
        b = j.budget
        if (b.total or b.per_month or b.per_hour) and price is None:
            yield c.check("price-unknown", "warning", "Cost unknown", "no price for the hardware, so the budget cannot "
                          "be checked", j, "resources", "give resources.price_per_hour")
            continue
        if b.total is not None and cost is not None and cost > b.total:
            yield c.check("budget-exceeded", "error", "Over budget",
                          f"estimated {format_usd(cost)} against a budget of {format_usd(b.total)}", j, "budget.total",
                          "a cheaper option (see the cost per option), "
                          + ("fewer tokens" if j.kind == "training" else "fewer service hours or a lower peak load")
                          + ", or a larger budget")
        if b.per_month is not None and month is not None and month > b.per_month:
            yield c.check("budget-exceeded", "error", "Over the monthly budget",
                          f"estimated {format_usd(month)} per month against {format_usd(b.per_month)}", j, "budget.per_month")
        if b.per_hour is not None and price is not None and price > b.per_hour:
            yield c.check("budget-exceeded", "error", "Over the hourly budget",
                          f"{format_usd(price)}/h against {format_usd(b.per_hour)}/h", j, "budget.per_hour")
    tb = c.req.budget
    if tb.total is not None and total_cost > tb.total:
        yield c.check("budget-exceeded", "error", "The request is over budget",
                      f"all jobs together are estimated at {format_usd(total_cost)}"
                      + (f" (not counting {', '.join(unknown)}, unpriced)" if unknown else "")
                      + f" against {format_usd(tb.total)}", None, "budget.total")
    if tb.per_month is not None and total_month > tb.per_month:
        yield c.check("budget-exceeded", "error", "The request is over its monthly budget",
                      f"services cost {format_usd(total_month)} per month against {format_usd(tb.per_month)}", None,
                      "budget.per_month")


@check
def run_risks(c: _Ctx) -> Iterator[Check]:
    for j, p in _training(c):
        f, ck = p.facts, j.checkpoints
        secs, interval = f.get("seconds"), f.get("interval_seconds")
        if ck.interval is not None and ck.resume is None:
            yield c.check("resume-unstated", "warning", "Resuming not stated",
                          "say whether the run can resume from a checkpoint (checkpoints.resume)", j, "checkpoints")
        elif ck.resume is False and secs is not None and secs > 86400:
            yield c.check("no-resume", "warning", "A long run that cannot resume",
                          f"an interruption of this {fmt_time(secs)} run restarts it from zero", j,
                          "checkpoints.resume")
        if interval is not None and interval > LONG_INTERVAL_SECONDS and secs and interval < secs:
            yield c.check("checkpoint-interval-long", "warning", "Long checkpoint interval",
                          f"an interruption loses up to {fmt_time(interval)} of progress", j, "checkpoints.interval")
        if j.settings.train_tokens is None and j.dataset.tokens is None and j.dataset.size is None \
                and j.dataset.examples is None:
            yield c.check("dataset-size-missing", "error", "Dataset size missing",
                          "no dataset.tokens, size or examples: duration, storage and cost cannot be estimated", j,
                          "dataset")
        bound = f.get("comm_bound")  # the duration's own warning (estimate/duration.py comm_bound_warning)
        if bound:  # its remedy as plan/training.py set it beside it; else the duration's rule for an unknown step
            yield c.check("network-bound", "warning", "Communication-bound", bound, j, "resources",
                          f.get("comm_bound_remedy") or comm_bound_remedy(None))
        if f.get("network_unknown"):
            yield c.check("network-unknown", "warning", "Interconnect bandwidth unknown",
                          f"no bandwidth for {', '.join(f['network_unknown'])}: communication time not estimated", j,
                          "resources", "give resources.network (and resources.interconnect)")
        rd = p.value("network", "data_read_rate")
        if rd is not None and j.dataset.read_speed is not None and rd > j.dataset.read_speed:
            yield c.check("data-read-slow", "warning", "Data storage too slow",
                          "training reads the dataset faster than dataset.read_speed allows", j, "dataset.read_speed")


@check
def model_size(c: _Ctx) -> Iterator[Check]:
    for j in c.req.jobs:
        p = c.plans[j.name]
        stated = j.model.size
        counted = p.estimate.details.get("params_total") if p.estimate is not None else None
        if stated and counted and abs(stated - counted) / counted > MODEL_SIZE_TOLERANCE:
            yield c.check("model-size-mismatch", "warning", "Model size differs from the model",
                          f"model.size says {stated / 1e9:.2f}B parameters; {j.model.name} has {counted / 1e9:.2f}B",
                          j, "model.size")


@check
def faq(c: _Ctx) -> Iterator[Check]:
    for j, _ in _training(c):
        if j.purpose == "knowledge" and not j.baseline_tried:
            yield c.check("training-may-not-be-needed", "warning", "Is training needed?",
                          "the training is meant to add knowledge, and no baseline with retrieval was tried: an "
                          "existing model with retrieval over the documents often does this without training", j,
                          "purpose", "try inference with retrieval first (baseline_tried: true once done)")
    for ij, _ in _inference(c):
        src = ij.model.from_job
        if src is not None:
            sj = c.req.job(src)
            if isinstance(sj, TrainingJob) and sj.method != "full" and ij.adapters.mode is None:
                yield c.check("lora-deployment-undecided", "info", "How is the LoRA deployed?",
                              f"'{ij.name}' serves the adapter of '{src}': merged into the weights (assumed) or "
                              "loaded dynamically by the server; see the job's notes for the memory of each", ij,
                              "adapters")
    for job in c.req.jobs:
        model = job.pricing.model or c.req.pricing.model
        p = c.plans[job.name]
        if model in (None, "undecided") and not owned_hardware(p.hardware, job.resources):
            be = p.value("cost", "break_even_discount")
            extra = ""
            if be is not None and be < 0.005:
                extra = ("; the resources are busy for the whole period, so any reservation discount pays off "
                         + ("if the run fits the reserved period" if isinstance(job, TrainingJob)
                            else "over the reserved term"))
            elif be is not None:
                extra = f"; a reservation pays off above a {be:.0%} discount"
            tail = (" Whether training can use hourly resources depends on the provider; confirm case by case."
                    if isinstance(job, TrainingJob) else " Confirm the discount and term with the provider.")
            yield c.check("pricing-undecided", "info", "Hourly or reserved?", f"pricing is undecided{extra}.{tail}",
                          job, "pricing")


def run_checks(req: Request, plans: dict[str, JobPlan]) -> tuple[Check, ...]:
    """Every check on ``req`` and its job plans, errors first, then in request order."""
    c = _Ctx(req, plans)
    out: list[Check] = []
    for fn in CHECKS:
        out.extend(fn(c))
    order = {s: i for i, s in enumerate(("error", "warning", "info"))}
    return tuple(sorted(out, key=lambda k: (order[k.severity], k.line or 0)))
