"""Plain-text rendering of a ``Recommendation``: what ``llmsizer recommend`` prints and what ``str(rec)`` shows."""

from __future__ import annotations

from ..numbers import DEFAULT_TOP
from ..recommend import Option, Recommendation
from ..units import format_bytes, format_count, format_rate, format_seconds, format_usd
from .markdown import format_value
from .text import table


def _price(o: Option) -> str:
    if o.price_per_hour is None:
        return "-"
    return f"${o.price_per_hour:,.2f}/h" + (" (power)" if o.cost_basis == "power" else "")


def option_name(o: Option) -> str:
    """The option's name as the table and the rejections show it: its target, and whose the hardware is where
    recommend says (``Option.ownership``: 'your hardware', 'to buy'), as the JSON's ``ownership`` and the web's
    compare page give it."""
    return f"{o.target} ({o.ownership})" if o.ownership else o.target




def option_rows(rec: Recommendation, top: int = DEFAULT_TOP) -> tuple[list[list[str]], list[str]]:
    """The options table (rows, header) the terminal and the notebook HTML both show."""
    def hw(o: Option) -> str:  # a pipeline option with the flags it was sized at (Option.layout_flags)
        return o.devices_text + (f" {o.layout_flags}" if o.layout_flags else "")

    if rec.kind == "inference":
        rows = [[o.status, option_name(o), hw(o), o.weights_format.removeprefix("gguf:"), _price(o),
                 (format_seconds(o.ttft_seconds)
                  + (f" (+{format_seconds(o.queue_wait_seconds)} queue)" if o.queue_wait_seconds
                     and not o.queue_wait_in_ttft else ""))
                 if o.ttft_seconds is not None else "?",
                 format_rate(o.tokens_per_second_per_user) if o.tokens_per_second_per_user else "?",
                 format_rate(o.tokens_per_second) if o.tokens_per_second else "?",
                 f"${o.cost_per_million_tokens:.2f}" if o.cost_per_million_tokens is not None else "-"]
                for o in rec.options[:top]]
        return rows, ["", "option", "hardware", "weights", "cost", "TTFT", "decode tok/s/user", "tok/s total incl. TTFT",
                      "$/M tokens"]
    # durations as every renderer says one (units.format_seconds: '7.5 min', not '0.1 h'; a 20-minute run was
    # '0.3 h' and a 2-minute one '0.0 h'), the cost as format_usd ('$0.23', not '$0'), the device-hours as the plan
    # and `train` spell a count (format_value 'count': 3 significant figures below 100, '0.128', not '0')
    rows = [[o.status, option_name(o), hw(o), _price(o),
             format_seconds(o.training_seconds) if o.training_seconds is not None else "?",
             format_value(o.device_hours, "count"), format_usd(o.run_cost) if o.run_cost is not None else "-"]
            for o in rec.options[:top]]
    return rows, ["", "option", "hardware", "cost", "wall clock", "device-h", "run cost"]


def workload_line(rec: Recommendation) -> str:
    """The training search's FLOP count: tokens x FLOP/token = total."""
    wl = rec.workload
    return (f"{format_count(wl['tokens'])} tokens x {wl['flops_per_token']:.3g} FLOP/token ({wl.get('flops_formula', '')}) "
            f"= {wl['total_flops']:.3g} FLOP")


def render_recommendation(rec: Recommendation, top: int = DEFAULT_TOP) -> str:
    out = [f"{rec.model}: {rec.kind} options ({len(rec.options)} meet the constraints, {len(rec.rejected)} rejected)"]
    rows, header = option_rows(rec, top)
    if rec.kind != "inference":
        out.append(workload_line(rec))
    if rows:
        out.append(table(rows, header))
    if rec.refusal is not None:
        out.append("no option: " + rec.refusal)
    if rec.chosen is not None:
        c = rec.chosen
        queue = (f"; {c.running_sequences:,} run at once, the other requests wait {c.queue_wait_seconds:.2f} s for a "
                 "slot on average (formulas/serving_queue.py eq. Q3)" if c.queue_wait_seconds and c.running_sequences
                 and not c.queue_wait_in_ttft else "")
        quality = (f"; weights {c.weights_format.removeprefix('gguf:')}: quality {c.quality} (models --fits-on's rating)"
                   if c.quality else "")
        out.append("chosen: " + option_name(c) + " - " + "; ".join(c.reasons) + queue + quality)
    for a in rec.advice:
        out.append("advice: " + a)
    for q in rec.quantization:
        out.append("quantization: " + q)
    if rec.rejected:
        out.append("rejected (cheapest first):")
        for o in rec.rejected[:top]:
            mem = f" [{format_bytes(o.memory_per_device)}]" if o.memory_per_device else ""
            out.append(f"  {option_name(o)}: {'; '.join(o.reasons)}{mem}")
        if len(rec.rejected) > top:
            out.append(f"  ... {len(rec.rejected) - top} more (--top N or --json)")
    if rec.assumptions:  # a training search with none chosen states none (each option's are its fit's)
        out.append("assumptions: " + "; ".join(f"{a.name}={a.value}{a.mark}" for a in rec.assumptions))
    for w in rec.warnings:
        out.append(f"warning: {w}")
    return "\n".join(out)
