"""Plain-text rendering of a ``FitResult``: what ``llmsizer fit`` prints and what ``str(fit_result)`` shows."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any

from ..estimate.verdict import budget_term
from ..specs.workload import ENGINE_NAMES
from ..units import compared_bytes, compared_rates, format_bytes, format_chance, format_limit, format_rate
from .text import coverage_lines, in_flight_words, pool_and_need, room_left, table

if TYPE_CHECKING:
    from ..estimate.fit import FitResult
    from ..estimate.speed import SpeedEstimate


def render_fit(r: FitResult) -> str:
    """The fit verdict, memory per device against the budget, the speed table, assumptions and warnings.

    A training fit (``r.kind == "training"``) prints the lines ``llmsizer fit --train`` prints before its optional
    training-time line: verdict, reasons, assumptions, warnings."""
    if r.kind == "training":
        lines = [f"{r.model} training on {r.devices_text}: {'FITS' if r.fits else 'DOES NOT FIT'}"]
        lines += [f"  {why}" for why in r.reasons]
        lines.append(assumptions_line(r.all_assumptions))
        lines += [f"warning: {w}" for w in r.warnings]
        hint = fits_at_line(r.fits_at)
        return "\n".join(lines + ([hint] if hint else []) + fits_if_changed_lines(r.fits_if_changed))
    out = [fit_headline(r)]
    if r.engine_flags:  # a layout with data-parallel ranks: the engine's own flags that start one replica of it
        out.append(f"  {r.engine} flags (one replica): {r.engine_flags}")
    for why in r.reasons:
        out.append(f"  {why}")
    if r.memory_per_device is not None and r.budget_per_device is not None:
        out.append(f"  {memory_line(r)}")
    host = host_weights_line(r)
    if host:
        out.append(f"  {host}")
    s = r.speed
    if s is not None:
        rows = speed_rows(s, queued_wait(r) is not None)
        if rows and not r.fits:  # a setup that cannot run: its speed is labelled so, never read as an answer
            out.append(speed_if_heading(r))
        if rows:
            out.append(table(rows, SPEED_HEADER))
            out += speed_coverage_lines(s)
        sd = s.details.get("split_decode")
        if sd and sd.get("seconds") and sd.get("exchanges") is not None:  # -sm row: the GPUs read their rows at once
            parts = ", ".join(f"{d['device']} {d['seconds'] * 1e3:.1f} ms" for d in sd["devices"])
            out.append(f"row-split decode (one sequence, eq. 8r): reads {sd['memory_seconds'] * 1e3:.1f} ms (the "
                       f"slowest GPU's rows, then KV and host one device after another; each device: {parts}) + PCIe "
                       f"and {sd['exchanges']} x 2 exchanges at llamacpp_row_split_exchange_seconds="
                       f"{sd['exchange_seconds'] * 1e6:.2f} us {sd['transfer_seconds'] * 1e3:.2f} ms + launch overhead "
                       f"{sd['overhead_seconds'] * 1e3:.1f} ms = {sd['seconds'] * 1e3:.1f} ms/token")
        elif sd and sd.get("seconds"):
            parts = " + ".join(f"{d['device']} {d['seconds'] * 1e3:.1f} ms" for d in sd["devices"])
            out.append(f"split decode (one sequence, eq. 8): {parts} + {sd.get('link', 'PCIe')} "
                       f"{sd['transfer_seconds'] * 1e3:.2f} ms + "
                       f"launch overhead {sd['overhead_seconds'] * 1e3:.1f} ms = {sd['seconds'] * 1e3:.1f} ms/token")
        if r.replicas > 1 and r.tokens_per_second_total is not None:  # the table is one replica's share
            conc, busy = int(r.details["concurrency"]), int(r.details["busy_replicas"])
            out.append(f"all {r.replicas} replicas: {format_rate(r.tokens_per_second_total)} tokens/s (the table: one replica "
                       f"running {s.concurrency} of the {int(r.details.get('running_sequences', conc))} sequences "
                       "running in all"
                       + (f"; {busy} replica{'s' if busy > 1 else ''} busy, the others idle)" if busy < r.replicas
                          else ")"))
        queued, wait = r.details.get("queued_sequences"), r.details.get("queue_wait_seconds")
        if queued and r.fits and not r.details.get("queue_wait_in_ttft"):  # (at a rate: the table's TTFT holds it)
            out.append(f"queue: {queued:,} of {int(r.details['concurrency']):,} requests wait for a running slot "
                       f"({int(r.details['running_sequences']):,} run at once)"
                       + (f"; mean wait {wait:.2f} s before the prefill, so a queued request's TTFT "
                          f"{wait + (s.ttft_seconds or 0):.2f} s (the table's is once running)"
                          if wait is not None else "")
                       + "; the tokens/s are the running sequences' (formulas/serving_queue.py eqs. Q1-Q3)")
        burst = r.details.get("burst")
        if burst:  # estimate/fit.py burst_figure: the requests sent at once pass through the slots admitted (eq. Q14)
            each = " per replica" if r.replicas > 1 else ""
            # --concurrency counts sequences running at once, so DOES NOT FIT answers that question; a burst of that
            # many still runs, in waves, said plainly where the verdict is no (probe31 section 3)
            waves = ("" if r.fits else f"the verdict counts {burst['requests']:,} running at once; a burst of them "
                     "queues and is served in waves: ")
            out.append(f"burst{each}: {waves}{burst['requests']:,} sent at once, {burst['admitted']:,} admitted at a "
                       f"time ({burst['waiting']:,} wait): TTFT {burst['ttft_seconds']:.2f} s expected (eq. Q14a), "
                       f"{burst['ttft_upper_seconds']:.2f} s at most ({burst['waves']} waves in lockstep, eq. Q14b); "
                       f"{burst['requests_per_second']:.3g} requests/s ({burst['requests_per_second_waves']:.3g} in "
                       "waves); formulas/serving_queue.py eq. Q14")
        for w in s.warnings:
            out.append(f"warning: {w}")
    layouts = layouts_line(r)
    if layouts:
        out.append(layouts)
    out.append(assumptions_line(r.all_assumptions))
    shown = set(s.warnings) if s is not None else set()
    for w in r.warnings:  # a note both the memory and the speed estimate carry (a newer release) is printed once
        if w not in shown:
            out.append(f"warning: {w}")
    c = r.cost or {}
    if c.get("price_per_hour") is not None:  # serving: estimate/fit.py serving_cost
        line = f"cost: ${c['price_per_hour']:,.2f}/h ({c['basis']})"
        if c.get("per_million_tokens") is not None:
            load = s.load if s is not None and s.load else {}
            at = (f"{load['request_rate']:g} requests/s" if "request_rate" in load else
                  f"concurrency {r.details['concurrency']}")
            line += f", ${c['per_million_tokens']:,.2f} per million output tokens at {at}"
        out.append(line)
    hint = fits_at_line(r.fits_at)
    if hint:
        out.append(hint)
    return "\n".join(out)


def training_request_key(field: str) -> str:
    """The request file's key (request/fields.py, a training job) for a field a training alternative changes
    (``fits_at`` / ``fits_if_changed`` ``changes``): ``method`` on the job, ``count`` and ``nodes`` (the machines a
    count past one spans) under ``resources``, every
    other setting under ``settings``; the CLI's flag for it is ``--`` and the field with dashes."""
    return {"method": "method", "count": "resources.count", "nodes": "resources.nodes"}.get(field, f"settings.{field}")


def training_setting_words(changes: dict[str, Any], rerun: bool = True) -> str:
    """``changes`` (field -> value) as the caller writes them: CLI flags (``--method lora``) when ``rerun``,
    request keys (``method: lora, settings.grad_checkpointing: full``) in a plan of a request file; a None value
    (a setting the change drops, estimate/fit.py ``_step_changes``) as 'without --flag' / 'without key'."""
    if rerun:
        return " ".join(f"without --{k.replace('_', '-')}" if v is None else f"--{k.replace('_', '-')} {v}"
                        for k, v in changes.items())
    return ", ".join(f"without {training_request_key(k)}" if v is None else f"{training_request_key(k)}: {v}"
                     for k, v in changes.items())


def fits_if_changed_lines(alts: Sequence[dict[str, Any]], rerun: bool = True) -> list[str]:
    """The lines under a training answer that does not fit, nothing that keeps the caller's settings fitting
    (``FitResult.fits_if_changed``, estimate/fit.py ``training_fits_if_changed``): each alternative with the
    settings it changes, the ones the caller gave that it overrides named as such. ``rerun``: as CLI flags; False:
    as request keys (a plan of a request file)."""
    out = []
    for at in alts:
        changes = at["changes"]
        if at.get("machines") and not rerun:  # the request's count splits evenly over its nodes (request/reader.py)
            changes = {"count": changes["count"], "nodes": at["machines"],
                       **{k: v for k, v in changes.items() if k != "count"}}
        flags = training_setting_words(changes, rerun)
        given = at.get("changes_given") or []
        named = (", ".join("--" + k.replace("_", "-") for k in given) if rerun else
                 ", ".join(training_request_key(k) for k in given))
        over = f" (changes what you gave: {named})" if given else ""
        kept = ", your other settings kept" if "count" in at["changes"] else ""
        if at.get("machines"):  # past one machine: the devices per machine it was counted with
            per = f"--gpus-per-node {at['gpus_per_node']}" if rerun else f"{at['gpus_per_node']} per node"
            kept += f"; {at['machines']} machines of {at['gpus_per_node']} devices ({per}), past one node"
        how = f"with {flags}" if rerun else f"set {flags} in the request"
        memory, budget = compared_bytes(at['memory_per_device'], at['budget_per_device'])
        out.append(f"alternative: {how}: {memory} per device of a "
                   f"{budget} budget{_host_words(at, rerun)}{over}{kept}")
    if out:
        out.insert(0, "hint: nothing that keeps the settings you gave fits these devices"
                      + ("" if rerun else " (the request's settings)"))
    return out


def _host_words(at: dict[str, Any], rerun: bool) -> str:
    """A training alternative's host RAM (estimate/fit.py ``training_host``: what offload= keeps there per
    machine), checked against the instance's RAM or said unchecked; '' when it offloads nothing."""
    host = at.get("host_per_machine")
    if not host:
        return ""
    if at.get("host_ram") is not None:
        return f" + {format_bytes(host)} host RAM per machine of {format_bytes(at['host_ram'])}"
    give = "give an instance (--device INSTANCE)" if rerun else "give an instance as resources.device"
    return f" + {format_bytes(host)} host RAM per machine, not checked: {give}"


def speed_if_heading(r: FitResult) -> str:
    """The heading over the speed of an answer that does not fit, worded from what binds its verdict
    (``FitResult.binding``): an engine that will not start past the model's window is no matter of format or
    memory."""
    win = r.refused_window
    if win is not None:
        name = ENGINE_NAMES.get(win["engine"], win["engine"])
        return (f"speed if it started ({name} does not: the context is past the model's window "
                f"{win['tokens']:,}, whatever the memory or the weight format):")
    if r.binding == "rate":
        return f"speed if it fit (it does not carry the request rate at {r.weights_format}):"
    return f"speed if it fit (it does not, at {r.weights_format}; memory permitting):"


def window_remedy(win: dict[str, Any], rerun: bool = True) -> str:
    """What starts an engine that refuses the context past the model's window (``FitResult.refused_window``): a
    context within it, or the engine's override; the CLI's flags (``rerun``) or the request file's keys."""
    lower = (f"--context {win['tokens']} or less" if rerun else
             f"a context (prompt + output) of {win['tokens']:,} tokens or less")
    override = "--allow-long-context" if rerun else "engine_settings.allow_long_context: true"
    return (f"{lower}, the model's window, or {override} ({win['override']}; positions past the window may give "
            "wrong outputs)")


def assumptions_line(assumptions: Iterable[Any]) -> str:
    """An answer's assumptions line: each name=value, a default marked (``Assumption.mark``). The one renderer of
    ``fit``'s, ``fit --train``'s and ``fit --auto``'s (their ``all_assumptions``: each default named)."""
    return "assumptions: " + "; ".join(f"{a.name}={a.value}{a.mark}" for a in assumptions)


def fits_at_line(at: dict[str, Any] | None, rerun: bool = True) -> str | None:
    """The hint under an answer that does not fit: what does (``FitResult.fits_at`` / ``LlamaCppFit.fits_at``).
    Serving: the best format on the engine's ladder (recommend.py ``fits_at``), or, when none of that engine's fits,
    the engine and format that do; an engine that refuses the context past the model's window, that window and its
    override (estimate/context_window.py ``window_fits_at``); training: the settings changed (estimate/fit.py
    ``training_fits_at``).
    ``rerun``: end with the flags to rerun with (the CLI); False: without (a plan says its request keys)."""
    if not at:
        return None
    keep = _engine_settings_words(at.get("engine_settings") or [], rerun)
    if keep:  # engine settings that fit with the weights kept (estimate/fit.py engine_settings_fit), the format after
        rest = {k: v for k, v in at.items() if k != "engine_settings"}
        after = fits_at_line(rest, rerun) if rest.get("weights") else None
        return keep + ("; else " + after.removeprefix("hint: ") if after else "")
    mem = _hint_memory_words(at)
    if "window" in at:  # the engine refuses the context past the model's window (context_window.window_fits_at)
        win = at["window"]
        name = ENGINE_NAMES.get(win["engine"], win["engine"])
        return (f"hint: {name} refuses the context, not the memory (no weight format changes that): give "
                f"{window_remedy(win, rerun)}")
    if "changes" in at:
        flags = " ".join(f"--{k.replace('_', '-')} {v}" for k, v in at["changes"].items())
        if mem and at.get("host_per_machine"):
            mem = mem[:-1] + _host_words(at, rerun) + ")"
        return (f"hint: it fits with {flags}{mem}, the least change to the run that does"
                + (f" (rerun with {flags})" if rerun else ""))
    fmt = at["weights"].removeprefix("gguf:")
    if at.get("experts_in_host"):  # no rung fits on the GPUs alone: llama.cpp's auto-fit with experts in host memory
        return _experts_in_host_hint(at, fmt, rerun)
    # a rung met on a pipeline layout (format_search.py: fit.with_pipeline_layouts) is said with its layout's flags
    lay = f" --tp {at['tensor_parallel']} --pp {at['pipeline_parallel']}" if at.get("pipeline_parallel") else ""
    if at.get("same_engine", True):
        return (f"hint: it fits at --weights {fmt}{lay}{mem}{_rung_speed(at)}, the best format on {at['engine']}'s "
                f"ladder that does{_reading_words(at)}" + (f" (rerun with --weights {fmt}{lay})" if rerun else ""))
    none = at.get("none_on") or {}
    return (f"hint: no format on {none.get('engine')}'s ladder fits; it fits on {at['engine']} at --weights {fmt}"
            f"{lay}{mem}{_rung_speed(at)}, the best format on {at['engine']}'s ladder that does{_reading_words(at)}"
            + (f" (rerun with --engine {at['engine']} --weights {fmt}{lay})" if rerun else ""))



def _hint_memory_words(at: dict[str, Any]) -> str:
    """A hint's memory: under a pool engine what the workload needs of what the pool offers and the pool reserved
    (estimate/fit.py ``hint_memory``, as fit's own memory line says it), else the memory per device of the budget."""
    need, offered = at.get("verdict_need_per_device"), at.get("verdict_budget_per_device")
    if need and offered:
        need_said, offered_said = compared_bytes(need, offered)
        return (f" (needs {need_said} of the {offered_said} its pool offers per device, "
                f"{format_bytes(at.get('reserved_per_device') or at['memory_per_device'])} reserved)")
    if not (at.get("memory_per_device") and at.get("budget_per_device")):
        return ""
    memory, budget = compared_bytes(at["memory_per_device"], at["budget_per_device"])
    return f" ({memory} per device of a {budget} budget)"


def _engine_settings_words(keep: list[dict[str, Any]], rerun: bool) -> str:
    """The hint's first part: each engine setting that fits keeping the weights (``fits_at['engine_settings']``)."""
    said = []
    for k in keep:
        flags = " ".join(f"--{n.replace('_', '-')} {v}" for n, v in k["changes"].items())
        said.append(flags + _hint_memory_words(k))
    if not said:
        return ""
    return ("hint: it fits with the weights kept at " + " or at ".join(said) + ", engine settings only"
            + (" (rerun with " + " or ".join(f"{' '.join(f'--{n.replace(chr(95), chr(45))} {v}' for n, v in k['changes'].items())}"
                                          for k in keep) + ")" if rerun else ""))


def _speed_and_floor(at: dict[str, Any]) -> tuple[str, str]:
    """The named rung's speed per user and the reading-speed floor it is judged against, at one precision
    (units.compared_rates), so the printed pair agrees with ``meets_reading_speed``; either side alone where the
    other is unknown."""
    user, floor = at.get("tokens_per_second_per_user"), at.get("reading_speed")
    if user is not None and floor:
        return compared_rates(user, floor)
    return (format_rate(user) if user is not None else "", format_limit(floor) if floor else "")


def _rung_speed(at: dict[str, Any]) -> str:
    """The named rung's decode speed where the hint timed it (llamacpp_fit.auto_fits_at with a device)."""
    if "meets_reading_speed" not in at:
        return ""
    tps, user = at.get("decode_tokens_per_second"), at.get("tokens_per_second_per_user")
    if user is not None:  # the floor is per user (format_search.READING_FLOOR): the number it is compared with
        return f" at {_speed_and_floor(at)[0]} tokens/s per user"
    return " (decode speed unknown: give --host-device)" if tps is None else f" at {format_rate(tps)} tokens/s decode"


def _reading_words(at: dict[str, Any]) -> str:
    """Whether the named rung meets recommend's reading-speed floor (``reading_speed`` tokens/s per user)."""
    if at.get("meets_reading_speed") is None or not at.get("reading_speed"):
        return ""
    if at["meets_reading_speed"]:
        passed = at.get("passed_over")  # the better rung that fits in memory but decodes slower (PassedOver.words)
        return (f" at reading speed ({_speed_and_floor(at)[1]} tokens/s per user, recommend's floor)"
                + (f"; {passed['why']}" if passed else ""))
    return (f"; none that fits reaches reading speed ({_speed_and_floor(at)[1]} tokens/s per user, "
            "recommend's floor), so this is the best-quality one")


def _experts_in_host_hint(at: dict[str, Any], fmt: str, rerun: bool) -> str:
    """``fits_at_line`` for an MoE model no format of which fits on the GPUs alone (format_search.py
    ``experts_in_host_at``, the answer ``models --fits-on`` gives): the format and --n-cpu-moe, each side's bytes and
    whether the host RAM was checked; ``none_on``: the asked engine, whose ladder has no rung that fits either."""
    h = at["experts_in_host"]
    none = at.get("none_on")
    n = h["n_cpu_moe"]
    host = (f"{format_bytes(h['host_bytes'])} of host RAM, "
            + ("within the host memory given" if h["host_memory_checked"] else
               "unchecked: give " + ("--host-memory" if rerun else "the host's memory") + " to check it"))
    words = ("hint: no format fits on the GPUs alone" + (f" (none on {none['engine']}'s ladder either)" if none else "")
             + f"; llama.cpp fits it at {fmt.upper()} with the routed experts of {n} layers in host memory "
             f"({format_bytes(h['memory_per_device'])} per GPU, {host}; {h['format_rule']}; llama.cpp "
             f"{' '.join(h['flags'])})")
    if rerun:  # fit's own aliases of the auto-fit's layer placement, so fit sizes what it placed
        engine = "" if at.get("same_engine", True) else "--engine llamacpp "
        return words + f" (rerun with {engine}--weights {fmt} {' '.join(_placement_flags(h['flags']))})"
    return words + f", with engine_settings.n_cpu_moe: {n}"  # the plan adds "; in the request: quantization: ..."


def _placement_flags(flags: list[str]) -> list[str]:
    """The layer placement of llama.cpp's printed ``flags`` (llamacpp_fit.py ``LlamaCppFit.flags``) that ``fit``
    takes under the same names (-ngl, -sm, -ts, --n-cpu-moe: cli/workload_args.py), so the rerun sizes what the
    auto-fit placed; -c / -np / -kvu / -fit are the workload fit is already given."""
    return [w for k, v in zip(flags, flags[1:], strict=False) if k in ("-ngl", "-sm", "-ts", "--n-cpu-moe")
            for w in (k, v)]


SPEED_HEADER = ["phase", "time", "rate", "bound", "roofline (intensity / ridge at the timed rates, FLOP/B)"]


def fit_headline(r: FitResult) -> str:
    """'MODEL on N x DEVICE (TARGET): FITS  [engine, format, TP t]' for an inference fit."""
    # one copy's GPUs (a llama.cpp split: one machine's, specs/training.py llamacpp_split_gpus; the machines replicas)
    per = r.count // max(1, r.replicas)
    split = (r.estimate.details.get("split") if r.estimate is not None else None) if per > 1 else None
    par = f"{split['split_mode']} split over {per} GPUs" if split else r.layout_text
    return (f"{r.model} on {r.devices_text}: {'FITS' if r.fits else 'DOES NOT FIT'}  "
            f"[{r.engine}, {r.weights_format}, {par}"
            + (f", {r.replicas} replicas" if r.replicas > 1 else "") + "]")


def layouts_line(r: FitResult) -> str | None:
    """The tensor-parallel layouts fit ranked, fastest first (``details["tensor_parallel_layouts"]``): the rule it
    took one by, then each one's output tokens/s at the stated load and what its verdict compared per device
    (estimate/fit.py ``verdict_need``: the need against the budget; under a pool engine, what the workload needs
    of the pool against what the pool offers, beside the pool reserved): fits or does not fit, the one taken marked;
    None without a choice."""
    ranked = r.details.get("tensor_parallel_layouts")
    if not ranked:
        return None
    conc = int(r.details["concurrency"])
    # vLLM and SGLang reserve their pool whatever the load (memory_line): their verdicts compare the workload's share
    pool = r.estimate is not None and "workload_bytes" in r.estimate.details
    parts = [f"{d['layout']}: "  # (the layout in fit's words: estimate/fit.py layout_words)
             + (f"{d['tokens_per_second']:,.0f} tokens/s, " if d["tokens_per_second"] is not None else "")
             + _layout_memory(d, pool)
             + ("does not fit" if d["fits"] is False else "not sized" if not d["fits"] else "fits"
                + ("" if d.get("fits_at_high_end", True) or d.get("verdict_high_per_device") is None else
                   f" at the expected need only (high end {format_bytes(int(d['verdict_high_per_device']))})"))
             + (" (taken)" if d["tensor_parallel"] == r.tensor_parallel else "") for d in ranked]
    return (f"tensor parallel layouts (fit takes the most output tokens/s of all replicas together among those that "
            f"fit, a tie to the smaller degree that fits at its high end too; --tp pins one), at {conc} "
            f"sequence{'s' if conc != 1 else ''}, fastest first: " + "; ".join(parts))


def _layout_memory(d: dict[str, Any], pool: bool) -> str:
    """One layout's memory words: its need of its budget per device, or under a pool engine (``pool``: the verdict
    compares the workload's share with what the pool offers, not the device total) that and the pool reserved."""
    need, budget = d.get("verdict_need_per_device"), d.get("verdict_budget_per_device")
    if need is None or budget is None:
        return ""
    need_said, budget_said = compared_bytes(need, budget)
    if not pool:
        return f"{need_said} of {budget_said} per device, "
    return (f"needs {need_said} of the {budget_said} its pool offers per device "
            f"({format_bytes(d.get('reserved_per_device', d['memory_per_device']))} reserved"
            + (", does not start" if d.get("pool_shortfall_per_device") else "") + "), ")


def memory_line(r: FitResult) -> str:
    """Memory per device against the budget (call only when both are known)."""
    details = r.estimate.details if r.estimate is not None else {}
    return memory_words(r.engine, r.memory_per_device or 0, r.budget_per_device or 0, details)


def memory_words(engine: str, memory: int, budget: int, details: dict[str, Any]) -> str:
    """fit's memory line from its numbers: ``memory`` (``memory_per_device``) of ``budget`` (``budget_per_device``,
    under a pool engine the device memory: ``budget_term`` of the estimate's ``verdict_basis``) and what it leaves
    (``budget_left_bytes``); under vLLM/SGLang (``details`` with ``workload_bytes``) the pool reserved and what this
    workload needs of what the pool offers (``pool_and_need``). `fit` and the plan's summary print it."""
    term = budget_term(str(details.get("verdict_basis", "expected")))  # a pool engine's is the device memory
    memory_said, budget_said = compared_bytes(memory, budget)
    of = f"a {budget_said} {term}" if term == "budget" else f"{budget_said} {term}"
    line = f"memory per device {memory_said} of {of}, {room_left(budget - memory)}"
    need, offered = details.get("workload_bytes"), details.get("workload_budget_bytes")
    if need is not None:  # vLLM and SGLang reserve their pool whatever the load: say what this workload needs of it
        line += "; " + pool_and_need(engine, int(details.get("reserved_bytes", memory)), int(need), offered,
                                     details.get("pool_shortfall_bytes"), memory)
    return line


def host_weights_line(r: FitResult) -> str | None:
    """The weights llama.cpp keeps in host memory beside those on the devices (the estimate's ``weights_host``
    item: the token embeddings always, layers or experts not offloaded), outside the device budget; on Apple (the
    working-set assumption of estimate/device.py) the same unified memory, outside the Metal working set the budget
    is; None when no weight is on the host."""
    items = {it.name: it for it in r.estimate.items} if r.estimate is not None else {}
    host, dev = items.get("weights_host"), items.get("weights")
    if host is None or not host.bytes or dev is None:
        return None
    if any(a.name == "apple_gpu_working_set" for a in r.assumptions):  # Apple: one unified memory (device.py)
        return (f"weights {format_bytes(dev.bytes)} in Metal buffers + {format_bytes(host.bytes)} in llama.cpp's CPU "
                f"buffers ({host.formula}): the same unified memory, but outside the GPU working set the budget "
                "counts, so not in it")
    per = r.count // max(1, r.replicas)  # one replica's devices (a llama.cpp split: one machine's GPUs)
    on = (f"the {per} devices" if per > 1 else "the device") + (f" of each of {r.replicas} replicas"
                                                                 if r.replicas > 1 else "")
    return (f"weights {format_bytes(dev.bytes)} on {on} + "
            f"{format_bytes(host.bytes)} in host memory ({host.formula}; not in the device budget)")


def queued_wait(r: FitResult) -> float | None:
    """The mean wait of a queued request before its prefill (estimate/fit.py ``queue_details``: formulas/serving_queue.py
    eq. Q3) where a fitting setup queues requests, else None: the speed table's TTFT is then the running request's
    ('TTFT once running'), the queue line's the queued one's (wait + it), so the two never read as one figure."""
    wait = r.details.get("queue_wait_seconds")
    return float(wait) if r.fits and r.details.get("queued_sequences") and wait and \
        not r.details.get("queue_wait_in_ttft") else None


def speed_rows(s: SpeedEstimate, queued: bool = False) -> list[list[str]]:
    """Rows of the speed table (prefill, decode), in ``SPEED_HEADER`` order; ``queued`` (``queued_wait``): requests
    wait before their prefill, so the prefill row is the TTFT once running."""
    rows = []
    load = s.load
    if s.prefill is not None:
        label = "prefill (one prompt, idle)" if load else "prefill (TTFT once running)" if queued else "prefill (TTFT)"
        rows.append([label, f"{s.ttft_idle_seconds:.3f} s",
                     f"{s.prefill_tokens_per_second:,.0f} tokens/s{_range(s.prefill_range, '{:,.0f}'.format)}",
                     s.prefill.bound, _roof(s.roofline_prefill)])
    if s.decode is not None:
        rows.append([f"decode x{s.concurrency}" + (" only (no prompts)" if load else ""),
                     f"{s.decode.seconds * 1e3:.1f} ms/step",
                     f"{format_rate(s.decode_tokens_per_second or 0.0)} tokens/s{_range(s.decode_range, format_rate)} "
                     f"({format_rate(s.decode_tokens_per_second_per_user or 0.0)} per user)",
                     s.decode.bound, _roof(s.roofline_decode)])
    if load:  # what the users see at this concurrency (estimate/serving_load.py: formulas/serving_queue.py Q4-Q9)
        # the total is requests/s x output tokens (eq. Q7): each request's TTFT included, so one request's total is
        # below its decode rate per user; "arriving together" only where there are others to arrive with; a
        # prefill-only service (no output tokens) has requests/s, no token rate
        many = s.concurrency > 1
        rate = load.get("request_rate")  # an open load (eq. Q10): requests at a rate, those in flight derived
        # each figure named for what it is (probe31: "at 1000 requests ... 8,720.8 tokens/s (47.8 per user at this
        # load)" read as 1000 x 47.8, and a TTFT "at this load" above "arriving together"): the TTFT of requests
        # each sent as another ends (eqs. Q6, Q9a) beside that of all C sent at once (eqs. Q8, Q9b); the total
        # output with each request's TTFT counted (eq. Q7) beside the rate one running sequence decodes at (eq. Q5b)
        together = (f"all {s.concurrency:,} sent at once: {load['ttft_burst_seconds']:.3f} s; " if many and rate is None
                    else "")
        per_user = ("" if not s.tokens_per_second_per_user else
                    f"{format_rate(s.tokens_per_second_per_user)} per running sequence" if many else
                    f"decoding at {format_rate(s.tokens_per_second_per_user)}")
        several = int(load.get("replicas", 1)) > 1  # the rate typed, each replica's share and in flight beside it
        # in flight named per replica or in all, and split into running and waiting for admission (probe33 D5:
        # "114.6 in flight" per replica read beside "103 of the 206 sequences" in all)
        flight = (in_flight_words(float(load["in_flight"]), s.concurrency, float(load.get("waiting") or 0.0),
                                  " per replica" if several else "") if rate is not None else "")
        at = (f"at {rate:g} requests/s ({flight}" + (
              f"; {load['request_rate_per_replica']:g}/s per replica)" if several else ")")
              if rate is not None else
              f"at {s.concurrency} request" + ("s" if many else "") + (" running" if queued else ""))
        # the wait for admission where the engine admits fewer than could be in flight (eq. Q13)
        admission = (f"; waits for admission {format_chance(load['admission_wait_probability'])} of the time, "
                     f"{load['admission_wait_seconds']:.3f} s on average" if "admitted" in load else "")
        rows.append([at,
                     f"TTFT {load['ttft_seconds']:.3f} s"
                     + (", each request sent as one ends " if many and rate is None else " at this load ")
                     + f"({together}idle {s.ttft_idle_seconds:.3f} s{admission})",
                     # one request: its decode rate first, then its total, named as one that counts the TTFT (a
                     # total below the rate beside it read as a mistake: probe20 C1)
                     (f"{format_rate(s.tokens_per_second or 0.0)} tokens/s in all, TTFT counted ({per_user})"
                      if many else
                      f"{per_user} tokens/s; {format_rate(s.tokens_per_second or 0.0)} tokens/s total incl. TTFT")
                     if s.tokens_per_second_per_user else
                     f"{load['requests_per_second']:,.2f} requests/s (prefill only)",
                     f"prefill {load['prefill_share']:.0%}", "queue eqs. Q4-Q9" if rate is None else
                     "queue eqs. Q10, Q13" if "admitted" in load else "queue eq. Q10"])
    return rows


def speed_coverage_lines(s: SpeedEstimate) -> list[str]:
    """The coverage of each calibrated range in the speed table (``SpeedEstimate.range_coverage``), under it, named
    by its row (text.coverage_lines); nothing for a rate printed without a range."""
    cov = s.range_coverage
    return [*(coverage_lines(c, "prefill range") if (c := cov["prefill_tokens_per_second"]) and s.prefill else []),
            *(coverage_lines(c, "decode range") if (c := cov["decode_tokens_per_second"]) and s.decode else [])]


def _range(r: tuple[float, float] | None, fmt: Callable[[float], str]) -> str:
    """' (low-high)': the calibrated range (estimate/ranges.py), each bound written by ``fmt``, or nothing without one."""
    return "" if r is None else f" ({fmt(r[0])}-{fmt(r[1])})"


def _roof(rf: Any) -> str:
    """Intensity / ridge at the rates the phase is timed with (formulas/speed.py eq. 3r: its label is the bound
    column's comparison), the peaks' ridge beside it where they differ."""
    if rf is None:
        return ""
    peak = f" (peak ridge {rf.peak_ridge:,.0f})" if rf.peak_ridge and f"{rf.peak_ridge:,.0f}" != f"{rf.ridge:,.0f}" else ""
    return f"{rf.intensity:,.1f} / {rf.ridge:,.0f} -> {rf.bound}-bound{peak}"


def llamacpp_speed_line(sp: dict[str, Any]) -> str:
    """The auto-fit's speed line, labelled by what it shows: under a modelled serving load (``loaded``) the output
    rate at that many sequences, each request's TTFT counted (as `fit`'s "at N requests" row), and the idle decode
    beside it; else the decode rate."""
    if sp["tokens_per_second"] is None:
        return f"speed: tokens/s unknown ({sp['why']})"
    n, how = sp["concurrency"], "as `fit` with these flags times it"
    if not sp.get("loaded"):
        return (f"decode: {format_rate(sp['tokens_per_second'])} tokens/s ({format_rate(sp['tokens_per_second_per_user'])} per "
                f"sequence, {n} at once; {sp['bound']}), {how}")
    alone = f"decode alone {format_rate(sp['decode_tokens_per_second'])} tokens/s ({sp['bound']}), {how}"
    if n > 1:
        return (f"at {n} sequences: {format_rate(sp['tokens_per_second'])} tokens/s output "
                f"({format_rate(sp['tokens_per_second_per_user'])} per sequence at this load); {alone}")
    # one sequence: the decode rate first, then the total named as one that counts the TTFT, which puts it below
    # the decode rate (probe20 C1: "2.2 tokens/s output (decoding at 23.2 ...)" read as a mistake)
    return (f"at 1 sequence: decoding at {format_rate(sp['tokens_per_second_per_user'])} tokens/s; "
            f"{format_rate(sp['tokens_per_second'])} tokens/s output incl. TTFT; {alone}")


def render_llamacpp_fit(r: Any) -> str:
    """The auto-fit of llama.cpp: the flags, each device's memory against its target, the steps taken."""
    copies = next((a for a in r.assumptions if a.name == "llamacpp_split"), None)  # fit --auto past one machine
    out = [f"{r.model}: llama.cpp auto-fit on {len(r.free)} GPU(s)"
           + (f" of one machine, each machine a replica ({copies.value})" if copies is not None else "")
           + f": {'FITS' if r.fits else 'DOES NOT FIT'}"
           + ("" if r.full_offload else f" (partial offload: {r.n_gpu_layers}/{r.n_layer + 1} layers on GPUs)"),
           "flags: " + " ".join(r.flags())]
    rows = []
    devices = r.devices()
    state = any(d.get("recurrent_state") for d in devices)  # a recurrent model's per-sequence state (conv + SSM)
    for d in devices:
        rows.append([d["device"], d["layers"], format_bytes(d["weights"]), format_bytes(d["kv_cache"]),
                     *([format_bytes(d.get("recurrent_state", 0))] if state else []),
                     format_bytes(d["compute_buffer"]), format_bytes(d["runtime"]), format_bytes(d["total"]),
                     format_bytes(d["free"]) if "free" in d else "", room_left(d["left"]).removesuffix(" left") if "left" in d else ""])
    out.append(table(rows, ["device", "holds", "weights", "KV", *(["state"] if state else []), "compute", "runtime", "total",
                            "free", "left"]))
    kept = sorted(set(r.margins))
    out.append("margin kept free on each GPU: " + (format_bytes(kept[0]) if len(kept) == 1 else
                                                   ", ".join(format_bytes(m) for m in r.margins)))
    sp = getattr(r, "speed", None)
    if sp is not None:  # the printed flags' speed, as `fit` with them times it (llamacpp_fit.with_speed)
        out.append(llamacpp_speed_line(sp))
    out += [f"  {s}" for s in r.steps]
    out.append(assumptions_line(r.all_assumptions))
    out += [f"warning: {w}" for w in r.warnings]
    hint = fits_at_line(r.fits_at)
    return "\n".join(out + ([hint] if hint else []))
