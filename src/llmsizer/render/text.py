"""Plain-text tables for the terminal.

The lines under an estimate (its calibrated range with the coverage and warning: ``estimate_facts``,
``coverage_lines``) have one copy on the web: the calculator writes them from the answer's JSON
(web/static/js/estimate_text.js, Python's number formats in web/static/js/pyformat.js), compared word for word with
this module's text on real answers by tests/web/test_estimate_text_js.py."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from ..estimate.verdict import MAMBA_POOL, binding_pool
from ..result import Estimate, Location
from ..specs.workload import ENGINE_NAMES
from ..units import compared_bytes, format_bytes, format_count

_QUANTITY = re.compile(r"-?[\d.,]+(\s?[A-Za-z%$/]{1,6})?")


def table(rows: Sequence[Sequence[str]], header: Sequence[str]) -> str:
    """Left-aligned columns; the first column is padded, numbers right-aligned when they look numeric."""
    cols = [list(map(str, header))] + [list(map(str, r)) for r in rows]
    widths = [max(len(r[i]) for r in cols) for i in range(len(header))]
    lines = []
    for k, r in enumerate(cols):
        cells = []
        for i, c in enumerate(r):
            numeric = k > 0 and i > 0 and _QUANTITY.fullmatch(c) is not None
            cells.append(c.rjust(widths[i]) if numeric else c.ljust(widths[i]))
        lines.append("  ".join(cells).rstrip())
        if k == 0:
            lines.append("  ".join("-" * w for w in widths))
    return "\n".join(lines)


def estimate_heading(est: Estimate) -> str:
    """'MODEL - KIND memory  (N params, attention)': the first line of ``render_estimate``."""
    d = est.details
    head = f"{est.model} - {est.kind} memory"
    if "params_total" in d:
        head += f"  ({format_count(d['params_total'])} params"
        if d.get("params_active") and d["params_active"] != d["params_total"]:
            head += f", {format_count(d['params_active'])} active"
        head += f", {d.get('attention', '')})"
    return head


def render_estimate(est: Estimate, *, verbose: bool = False) -> str:
    out: list[str] = []
    out.append(estimate_heading(est))
    rows = []
    for it in est.items:
        lo, mid, hi = it.range
        rng = "" if lo == mid == hi else f"{format_bytes(lo)} - {format_bytes(hi)}"
        rows.append([it.name, it.location, format_bytes(mid), rng, it.formula if verbose else _short(it.formula)])
    first = est.headline()[0]  # the first TOTAL row is the headline's (device when any, else host)
    order: tuple[Location, ...] = (first, "host") if first == "device" else (first, "device")
    for loc in order:
        if any(i.location == loc for i in est.items):
            lo, mid, hi = est.total(loc)
            rows.append([f"TOTAL {est.total_label(loc)}", loc, format_bytes(mid), f"{format_bytes(lo)} - {format_bytes(hi)}", ""])
    out.append(table(rows, ["component", "where", "expected", "range", "how"]))
    out += estimate_facts(est)
    out.append("assumptions: " + "; ".join(
        f"{a.name}={a.value}{a.mark}" for a in est.assumptions))
    for w in est.warnings:
        out.append(f"warning: {w}")
    return "\n".join(out)


def estimate_facts(est: Estimate) -> list[str]:
    """The lines under the breakdown (what vLLM admits, the need, the peak moment, the fit verdict): the terminal
    and the notebook HTML print the same ones."""
    d = est.details
    out: list[str] = []
    if "recurrent_state_pages" in d:  # no attention layer: the pool counts sequences, not tokens (vllm.py)
        out.append(f"vLLM admits {d['admitted_sequences']} sequences at once (the pool holds the recurrent state of "
                   f"{d['recurrent_state_pages']:,} sequences, one page per layer each whatever their length; no "
                   "attention layer, so no KV blocks)")
    elif "admitted_sequences" in d and "kv_blocks" in d:
        out.append(f"vLLM admits {d['admitted_sequences']} sequences at once (KV pool room for "
                   f"{d['max_concurrency_at_context']} of this length; its \"GPU KV cache size\": {d['kv_tokens']:,} tokens, "
                   f"{d['kv_blocks']:,} blocks)")
    if "max_total_num_tokens" in d and not d.get("sglang_too_small"):  # too small: the verdict says why
        out.append(f"SGLang: max_total_num_tokens {d['max_total_num_tokens']:,} (mem_fraction_static "
                   f"{d['mem_fraction_static']}), max_running_requests {d['max_running_requests']:,}; admits "
                   f"{d['admitted_sequences']} sequences of this length at once"
                   # one word, one number (probe20 C3): where the running cap or the MambaPool (sglcap: its room,
                   # verdict.binding_pool) admits fewer than the token pool holds, both, as fit's line gives them
                   + _sglang_admits_why(d))
        if "max_mamba_cache_size" in d:  # hybrid models: the recurrent-state pool (estimate/inference/sglang.py eq. 2b)
            out.append(f"SGLang MambaPool: max_mamba_cache_size {d['max_mamba_cache_size']:,} requests' recurrent "
                       f"state ({d['mamba_cache_per_req']:,} B each), taken from the token pool; running requests "
                       f"<= {d['max_mamba_cache_size']:,} // {d['mamba_requests_ratio']} state slots each "
                       + ("(radix cache disabled)" if d.get("mamba_radix_cache_strategy") == "none" else
                          f"(mamba_radix_cache_strategy {d.get('mamba_radix_cache_strategy')})"))
        if "engines_differ_because" in d:
            out.append(f"vs vLLM on the same memory: {d['engines_differ_because']}")
    if d.get("queued_sequences"):  # not run at once (estimate/inference/common.py eq. R1, compose.py)
        room = f", pool room {d['max_concurrency_at_context']:,}" if "max_concurrency_at_context" in d else ""
        out.append(f"queue: {d['running_sequences']:,} run at once (min({d['concurrency']:,} requests, "
                   f"{d['running_cap_name']} "
                   f"{d['running_cap']:,}{room})), {d['queued_sequences']:,} requests wait in the engine's queue; "
                   f"memory is sized for the {d['need_sequences']:,} it would run with room for them")
    if "split" in d:
        sp = d["split"]
        out.append(f"llama.cpp placement (-sm {sp['split_mode']}, -ngl {sp['n_gpu_layers']}"
                   + (f", --n-cpu-moe {sp['n_cpu_moe']}" if sp["n_cpu_moe"] else "") + "):")
        for dev in sp["devices"]:
            state = f", state {format_bytes(dev['recurrent_state'])}" if dev.get("recurrent_state") else ""
            if dev.get("vision_compute_buffer"):
                state += f", vision compute {format_bytes(dev['vision_compute_buffer'])}"
            out.append(f"  {dev['device']:<5} {dev['layers']:<22} weights {format_bytes(dev['weights'])}, KV "
                       f"{format_bytes(dev['kv_cache'])}{state}, compute {format_bytes(dev['compute_buffer'])}, "
                       f"runtime {format_bytes(dev['runtime'])} = {format_bytes(dev['total'])}")
    if "workload_bytes" in d:  # vLLM / SGLang: the pool is reserved whatever the load
        engine = next((str(a.value) for a in est.assumptions if a.name == "engine"), "the engine")
        offered = d.get("workload_budget_bytes")
        out.append(pool_and_need(engine, int(d.get("reserved_bytes", est.total("device")[1])),
                                 int(d["workload_bytes"]), int(offered) if offered is not None else None,
                                 d.get("pool_shortfall_bytes"), est.total("device")[1]))
    if "memory_needed" in d:
        out.append(f"GPU memory needed: {format_bytes(d['memory_needed'])}")
    if "peak_phase" in d:
        out.append(f"peak at: {d['peak_phase']}")
    if "calibrated_range" in d:
        c = d["calibrated_range"]
        out.append(f"calibrated range: {format_bytes(c['low'])} - {format_bytes(c['high'])} per device (live tensors x "
                   f"measured/predicted {c['band_low']:g}-{c['band_high']:g} of {c['rows']} {c['kind']} validation "
                   f"rows of {c['setups']} setup{'' if c['setups'] == 1 else 's'}"
                   f"{', each weighing as one' if c['setups'] != 1 else ''}, {c['engine']}; + the context, reserve "
                   "and runtime at their own low-high; estimate/ranges.py, allocator.py eq. C1)")
        out.extend(coverage_lines(c["coverage"]))
    if "fits" in d:
        left = (f"; {format_bytes(d['budget_left_bytes'])} of the budget left" if d.get("verdict_basis") == "expected"
                and d["fits"] else "")
        out.append(f"fits: {'yes' if d['fits'] else 'NO'} ({d['verdict']}{left})")
    return out


def coverage_lines(cov: dict[str, Any], of: str = "") -> list[str]:
    """The coverage a calibrated range has, in words (estimate/ranges.py ``Band.coverage``: the band's own figures):
    its target, the share of its setups' runs inside in sample, the leave-one-setup-out share where there is more
    than one setup; then the band's warning, if any. Every renderer of a calibrated range prints these under it (the
    memory range, the training duration's, fit's prefill and decode ranges); ``of`` names the range where one line
    carries more than one ("decode range": "  decode range coverage: ...", "  warning (decode range): ...")."""
    pct = "{:.1%}".format
    line = f"  {of + ' ' if of else ''}coverage: target {cov['target']:.0%} (of {cov['of']})"
    if cov.get("in_sample") is not None:
        line += f"; in sample {pct(cov['in_sample'])} of the setups' runs inside"
    if cov.get("leave_one_setup_out") is not None:
        other = cov["setups"] - 1
        line += (f"; leave one setup out {pct(cov['leave_one_setup_out'])} (each setup's runs against the range "
                 f"fitted on the other {other} setup{'' if other == 1 else 's'})")
    else:
        line += "; no leave-one-setup-out check (one setup)"
    return [line] + ([f"  warning{f' ({of})' if of else ''}: {cov['warning']}"] if cov.get("warning") else [])


def room_left(left: int) -> str:
    """Room left of a budget in words: "1.20 GiB left", or for an overshoot (a negative room) "over by 8.99 GiB"
    (before, "-8.99 GiB left")."""
    return f"{format_bytes(left)} left" if left >= 0 else f"over by {format_bytes(-left)}"


def in_flight_words(in_flight: float, running: int, waiting: float, where: str = "") -> str:
    """The requests in flight at a request rate and their split, the one sentence fit's rate row and plan's summary
    say (probe33 D5): '114.6 in flight per replica: 103 running, 11.6 waiting for admission'. ``in_flight`` the
    mean in flight (fit's ``speed.load['in_flight']``, eq. Q10c, with the wait for admission), ``running`` the
    sequences run at once (eq. R1, ``running_sequences``), ``waiting`` the mean number waiting for admission
    (lambda W_q, eq. Q12: ``load['waiting']``, ``details['queued_sequences']``), all over the same replicas
    (``where``: ' per replica', or '' for all); the split is left out where fewer than 0.05 wait (said as 0.0)."""
    split = f": {running} running, {waiting:.1f} waiting for admission" if waiting >= 0.05 else ""
    return f"{in_flight:.1f} in flight{where}{split}"


def pool_and_need(engine: str, reserved: int, need: int, offered: int | None = None,
                  shortfall: int | None = None, held: int | None = None) -> str:
    """The one wording of what a pool-reserving engine (vLLM, SGLang) takes of a device and what the workload needs of
    it (``estimate/inference/vllm.py`` / ``sglang.py`` ``workload_bytes``, compared with ``workload_budget_bytes``,
    what the pool offers; ``reserved``: the details' ``reserved_bytes``, the pool it holds once started, never the
    weights and activations beyond it; ``shortfall``: vLLM's ``pool_shortfall_bytes``, by how much the weights,
    activations and overhead alone exceed its pool, so it does not start): `infer`, `fit`, the plan and the web
    calculator (static/js/calculator.js) say the same. ``held``: the memory per device printed beside it (the
    estimate's device total); where the pool has no room for a KV cache (``shortfall``) that total holds none, so
    the need (which adds the cache its sequences need) is said as that total plus the cache, two figures named
    apart (probe33 D8: "memory per device 380.54 GiB ... needs 380.72 GiB" in one line)."""
    name = ENGINE_NAMES.get(engine, engine)
    need_said, bound_said = compared_bytes(need, offered if offered is not None else reserved)
    of = f" of the {bound_said} it offers (with the CUDA context)" if offered is not None else ""
    over = " (more than it offers)" if need > (offered if offered is not None else reserved) else ""
    if shortfall and held is not None and need > held:
        over += (f": the {format_bytes(held)} it holds before the KV cache + {format_bytes(need - held)} of KV "
                 "cache for its sequences")
    start = (f"; {name} does not start: what it holds before the KV cache exceeds its pool by "
             f"{format_bytes(shortfall)}" if shortfall else "")
    reserved_said = bound_said if offered is None else format_bytes(reserved)
    return (f"reserved {reserved_said} per device{' once started' if shortfall else ''} ({name} takes its "
            f"pool whatever the load); this workload needs {need_said}{of or ' of it'}{over}{start}")


def _short(text: str, n: int = 70) -> str:
    return text if len(text) <= n else text[: n - 3] + "..."


def _sglang_admits_why(d: dict[str, Any]) -> str:
    """Why an SGLang estimate admits fewer sequences than its token pool holds (``token_pool_room``, sglang.py): the
    MambaPool's room when it binds (``binding_pool``), else the running cap; "" where the token pool binds."""
    holds = int(d.get("token_pool_room", d.get("max_concurrency_at_context", 0)))
    if holds <= d["admitted_sequences"]:
        return ""
    why = f"the {MAMBA_POOL}'s room" if binding_pool(d) is not None else "its running cap"
    return f" ({why}; the token pool holds {holds:,})"
