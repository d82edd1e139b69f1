"""Text for people: a measurement record as a table of measured vs estimated (no torch, no I/O)."""

from __future__ import annotations

from typing import Any

from ..render.text import table
from ..units import format_bytes


def fmt_value(v: float | None, unit: str) -> str:
    if v is None:
        return "-"
    if unit == "bytes":
        return format_bytes(v)
    return f"{v:,.1f}"


def fmt_error(e: float | None) -> str:
    return "" if e is None else f"{e:+.1%}"


def render_record(rec: dict[str, Any]) -> str:
    s, dev, t = rec.get("settings", {}), rec.get("device", {}), rec.get("timing", {})
    out = []
    what = (f"{s.get('context')} tokens x {s.get('concurrency')} sequences ({s.get('output_tokens')} decoded), "
            f"{s.get('weights') or s.get('dtype')}" if rec.get("kind") == "inference" else
            f"{s.get('method')} {s.get('precision')} {s.get('optimizer')}, micro-batch {s.get('micro_batch')} x "
            f"{s.get('seq_len')} tokens, checkpointing {s.get('grad_checkpointing')}")
    out.append(f"{rec['model']['name']} - measured {rec.get('kind')}: {what}")
    out.append(f"device: {dev.get('type', '?')} {dev.get('name', '')}; status: {rec.get('status')}")
    if rec.get("status") == "oom":
        from .runner import oom_message

        out.append(oom_message(rec))
    elif rec.get("status") != "ok":
        out.append(f"failed: {rec.get('error', '?')}")
    rows = []
    for r in rec.get("comparison", []):
        rng = ""
        if r.get("low") is not None and r.get("high") is not None and r["low"] != r["high"]:
            rng = f"{fmt_value(r['low'], r['unit'])} - {fmt_value(r['high'], r['unit'])}"
        inside = {True: "yes", False: "no", None: ""}[r.get("within_range")]
        rows.append([r["component"], fmt_value(r["measured"], r["unit"]), fmt_value(r["estimated"], r["unit"]),
                     fmt_error(r["error"]), rng, inside, r.get("note", "")])
    if rows:
        out.append(table(rows, ["component", "measured", "estimated", "error", "estimate range", "in range", "note"]))
    timing = []
    if t.get("prefill_seconds") is not None:
        timing.append(f"prefill {t['prefill_seconds'] * 1e3:.1f} ms")
    if t.get("decode_tokens_per_second"):
        timing.append(f"decode {t['decode_tokens_per_second']:,.1f} tokens/s")
    elif rec.get("kind") == "inference" and s.get("output_tokens") == 0:
        timing.append("decode not timed (output tokens 0: prefill only)")
    if t.get("step_seconds"):
        timing.append(f"step {t['step_seconds']:.3f} s ({t['tokens_per_second']:,.0f} tokens/s)")
    if t.get("total_seconds"):
        timing.append(f"whole run {t['total_seconds']:.1f} s")
    if timing:
        out.append("timing: " + ", ".join(timing))
    if rec.get("estimate_note"):
        out.append(f"note: {rec['estimate_note']}")
    for d in rec.get("defaults", []):
        out.append(f"default: {d['name']}={d['value']} ({d['why']})")
    for w in rec.get("warnings", []):
        out.append(f"warning: {w}")
    return "\n".join(out)
