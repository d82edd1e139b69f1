"""Plain-text rendering of a ``Plan``: what ``llmsizer plan`` prints and what ``str(plan)`` shows."""

from __future__ import annotations

from ..estimate.verdict import binding_pool
from ..plan import Plan
from ..plan.result import JobPlan
from ..specs.workload import ENGINE_NAMES
from ..units import format_usd
from .fit_text import memory_words
from .markdown import SEVERITY_LABEL, check_line, format_value


def _v(j: JobPlan, section: str, key: str) -> str:
    f = j.section(section).get(key)
    return format_value(f.value, f.unit) if f is not None else "-"


def _job_lines(j: JobPlan) -> list[str]:
    hw = j.hardware
    out = [f"{j.name} ({j.kind}): {j.summary}"]
    mem = j.section("memory")
    if j.kind == "training":
        fits = mem.value("fits")
        ratio = (f"; {_v(j, 'memory', 'ratio')} the inference estimate ({_v(j, 'memory', 'inference_need')})"
                 if mem.value("ratio") is not None else "")  # None: no serving estimate (an encoder-decoder)
        out.append(f"  memory    {_v(j, 'memory', 'need')} per device of a {_v(j, 'memory', 'budget')} budget"
                   f" ({'fits' if fits else 'DOES NOT FIT' if fits is False else 'budget unknown'}{_budget_is(j)})"
                   + ratio)
        out.append(f"  storage   {_v(j, 'storage', 'total')} to provision (requested {_v(j, 'storage', 'requested')});"
                   f" one checkpoint {_v(j, 'storage', 'checkpoint_one')}, checkpoints at peak "
                   f"{_v(j, 'storage', 'checkpoints')}")
        if j.hardware.count > 1 and j.section("network").get("tp_seconds") is not None:
            out.append(f"  network   tensor-parallel {_v(j, 'network', 'tp_seconds')}, pipeline point-to-point "
                       f"{_v(j, 'network', 'pp_seconds')}, data-parallel {_v(j, 'network', 'mp_dp_seconds')} "
                       f"per step beside {_v(j, 'network', 'compute_seconds')} of compute "
                       f"({_v(j, 'network', 'comm_share')} of the step not hidden by compute); pipeline bubble "
                       f"{_v(j, 'network', 'bubble')}")
        elif j.hardware.count > 1:
            out.append(f"  network   {_v(j, 'network', 'dp_bytes')} per step between data-parallel ranks; "
                       f"communication {_v(j, 'network', 'comm_seconds')} beside {_v(j, 'network', 'compute_seconds')} "
                       f"of compute ({_v(j, 'network', 'comm_share')} of the step not hidden by compute)")
        lost_cost = j.section("duration").value("lost_cost")
        out.append(f"  duration  {_v(j, 'duration', 'seconds')} wall-clock, {_v(j, 'duration', 'device_hours')} "
                   f"device-hours, {_v(j, 'duration', 'steps')} steps"
                   + (f", MFU {_v(j, 'duration', 'mfu')}" if j.section("duration").value("mfu") is not None else "")
                   + "; an interruption loses up to "
                   + f"{_v(j, 'duration', 'lost_per_interruption')}"
                   + (f" ({_v(j, 'duration', 'lost_cost')})" if lost_cost is not None else ""))
        budget = f"; budget {_v(j, 'cost', 'budget')}" if j.section("cost").value("budget") else ""
        if j.section("cost").value("price_per_hour") is None:
            out.append(f"  cost      unknown: no price for {hw.label} (give resources.price_per_hour){budget}")
        else:
            out.append(f"  cost      {_v(j, 'cost', 'hourly_total')} by the hour at {_v(j, 'cost', 'price_per_hour')}"
                       + budget)
    else:
        fits = mem.value("fits")
        unfitted = "not fitted: see the error above" if j.facts.get("fit_error") else "budget unknown"
        room, running = mem.get("kv_room"), mem.get("running")
        verdict = ('fits' if fits else 'does not carry the peak rate (see the error above);'
                   if j.facts.get("rate_refusal") else
                   # what binds fit's verdict (estimate/fit.py FitResult.binding): not the memory
                   "DOES NOT START (the engine refuses the context past the model's window: see the error above); "
                   "the memory alone" if j.facts.get("binding") == "context window" else
                   'DOES NOT FIT' if fits is False else unfitted)
        # the pool whose room binds: SGLang's MambaPool on a hybrid model where its slots // s are fewer
        # (estimate/inference/sglang.py eq. 4b, ``admits_bound``), else the KV pool
        bound = (binding_pool(j.estimate.details) if j.estimate is not None else None) or "KV pool"
        sequences = (f"; {ENGINE_NAMES.get(j.hardware.engine or '', 'the engine')} runs {running.value} "
                     f"sequence{'s' if running.value != 1 else ''} at once per replica ({bound} room for {room.value} "
                     "of the peak context)"
                     if room is not None and running is not None else "")
        per_device, of_budget = j.facts.get("memory_per_device"), j.facts.get("budget_per_device")
        if per_device is not None and of_budget is not None:
            # fit's memory line for the same devices at the peak load (render/fit_text.py memory_words): memory per
            # device of the budget (a pool engine's: the device memory), what it leaves, and under vLLM/SGLang the
            # pool reserved and what this workload needs of what the pool offers
            words = memory_words(j.hardware.engine or "", int(per_device), int(of_budget),
                                 j.estimate.details if j.estimate is not None else {})
            out.append(f"  memory    {verdict} at peak: {words}{_budget_is(j)}{sequences}")
        else:
            out.append(f"  memory    at peak: {_v(j, 'memory', 'need_peak')} per device, budget "
                       f"{_v(j, 'memory', 'budget')} ({verdict}{_budget_is(j)}){sequences}")
        out.append(f"  speed     TTFT {_v(j, 'speed', 'ttft_typical')} typical / {_v(j, 'speed', 'ttft_peak')} peak; "
                   f"{_v(j, 'speed', 'tps_user_typical')} typical / {_v(j, 'speed', 'tps_user_peak')} peak per user"
                   + (f"; at peak, requests above the engine's running cap wait {_v(j, 'speed', 'queue_wait_peak')} "
                      "for a slot" if j.section("speed").get("queue_wait_peak") is not None else "")
                   + _host_step(j))
        net = j.section("network")
        extras = [x for x in (net.value("isolation"), "fixed address" if net.value("fixed_address") else None) if x]
        out.append(f"  network   in {_v(j, 'network', 'ingress_typical')}, out {_v(j, 'network', 'egress_typical')} "
                   f"typical" + (f"; {', '.join(str(x) for x in extras)}" if extras else ""))
        out.append(f"  storage   {_v(j, 'storage', 'total')} to provision (requested {_v(j, 'storage', 'requested')})")
        if j.section("cost").value("price_per_hour") is None:
            out.append(f"  cost      unknown: no price for {hw.label} (give resources.price_per_hour)")
        else:
            out.append(f"  cost      {_v(j, 'cost', 'monthly_hourly')}/month by the hour ({_v(j, 'cost', 'hourly_total')}"
                       f" over {_v(j, 'cost', 'months')} {'month' if j.section('cost').value('months') == 1 else 'months'}"
                       f"); {_v(j, 'cost', 'per_million_tokens')} per million "
                       "output tokens")
    if hw.origin == "suggested":
        out.append(f"  hardware  suggested: {hw.label}" + (f" at {format_usd(hw.price_per_hour)}/h"
                                                         if hw.price_per_hour is not None else ""))
    return out


def _job_warnings(j: JobPlan) -> list[str]:
    """The job's warnings the lines above do not already say (the plan marks them: ``said_in_figures``)."""
    return [w for w in j.warnings if w not in j.said_in_figures]


def render_plan_text(plan: Plan) -> str:
    out = [f"Plan: {plan.title}  ({plan.source})", plan.summary_line(figures_apart=True)]
    for c in plan.checks:
        out.append(f"  {SEVERITY_LABEL[c.severity]:<7} {check_line(c, plan.source)}")
        if c.advice:
            out.append(f"          -> {c.advice}")
    out.append("")
    for j in plan.jobs:
        out += _job_lines(j)
        for n in j.notes:
            out.append(f"  note: {n}")
        out += [f"  warning: {x}" for x in _job_warnings(j)]
        out.append("")
    t = plan.totals
    out.append("totals: " + "; ".join(f"{f.label} {format_value(f.value, f.unit)}" for f in t.figures
                                      if f.value is not None))
    return "\n".join(out)


def _budget_is(j: JobPlan) -> str:
    """'; budget = WHAT': the budget figure's own words (device memory x (1 - headroom), or what a pool engine's pool
    offers: estimate/verdict.py), so the one word reads the same in `fit`, `plan` and the glossary."""
    f = j.section("memory").get("budget")
    return f"; budget = {f.formula}" if f is not None and f.value is not None and f.formula else ""


def _host_step(j: JobPlan) -> str:
    """The engine release's host time per decode step (plan/inference.py), when the plan's speed applied one."""
    f = next((x for x in j.section("speed").figures if x.key == "engine_host_seconds_per_step"), None)
    if f is None:
        return ""
    shown = "not established (0 s used)" if "not established" in f.formula else f"{f.value * 1e3:.3g} ms"
    return (f"; engine host step {shown} "
            f"{f.label.removeprefix('engine host time per decode step ')}")
