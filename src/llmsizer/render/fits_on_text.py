"""Plain-text rendering of a ``ModelsThatFit`` (fits_on.py): what ``llmsizer models --fits-on`` prints and what
``str(llmsizer.models_that_fit(...))`` shows. It reads the answer only (its JSON fields and options)."""

from __future__ import annotations

from collections.abc import Callable

from ..fits_on import ModelsThatFit
from ..formulas.params import count_params
from ..recommend import FLOOR_UNCHECKED
from ..units import format_bytes, format_count, format_rate
from .text import table

# The columns of ``models --fits-on``'s table, the web page's (/fits) too: one answer, one table, each cell from the
# same JSON field on both (tests/web/browser/test_browser_cli_lines.py compares every cell).
FITS_ON_COLUMNS = ["name", "params", "format", "quality", "engine", "memory/device", "decode tok/s/user",
                   "tok/s total incl. TTFT", "fits"]

# the answer's fields the header names when they were given, in its order, with the word it uses
_HEADER = (("engine", "engine"), ("engine_version", "release"), ("memory", "memory"), ("host_memory", "host memory"),
           ("headroom", "headroom"), ("gpus_per_node", "devices per machine"), ("fit_target", "fit target"))
_BYTES = frozenset({"memory", "host_memory", "fit_target"})
_MEDIA = ("images", "image_size", "video_frames", "video_size", "pan_and_scan")


def fits_on_text(res: ModelsThatFit, command: Callable[[str, str], str] | None = None) -> str:
    """The header, the table (:data:`FITS_ON_COLUMNS`, in the answer's order), the count that fit, the models that
    fit with experts in host memory (each with ``command(name, weights)``: the ``fit ... --auto`` line that gives it,
    where the caller has one), the text-only models left out and the warnings."""
    data = res.answer
    unchecked = any(w.startswith(FLOOR_UNCHECKED) for w in data["warnings"])
    rows, host_lines = [], []
    host = {m["id"]: m["experts_in_host"] for m in data["models"]}
    quality = {m["id"]: m["quality"] for m in data["models"]}
    for e, o in res.options:  # in the answer's order (ranked)
        ok = o.status == "meets"
        h = host.get(e.id)
        if h:  # fit --auto's answer: the GPUs alone cannot hold it, the experts of some layers in host memory can
            fmt = h["weights"].removeprefix("gguf:").upper()
            how = f": {command(e.name, h['weights'])}  " if command else " "
            host_lines.append(f"{e.name}: fits with experts in host memory in {fmt} ({h['format_rule']}; "
                              f"{format_bytes(h['memory_per_device'])} per GPU, {format_bytes(h['host_bytes'])} of "
                              f"host RAM, {'checked' if h['host_memory_checked'] else 'unchecked'})"
                              f"{how}(llama.cpp {' '.join(h['flags'])})")
            if h["quality_warning"]:
                host_lines.append(f"  warning: {h['quality_warning']}")
        rows.append([e.name, format_count(count_params(e.spec()).total),
                     o.weights_format.removeprefix("gguf:") if ok else "-", quality[e.id] or "-",
                     # the engine the memory and speed are of (the JSON's engine), its layout's flags after
                     # (Option.engine_flags: `--tp 2`, `--tp 1 --pp 2`; none at TP 1)
                     (o.engine + (f" {o.engine_flags}" if o.engine_flags else "")) if ok else "-",
                     format_bytes(o.memory_per_device) if ok and o.memory_per_device else "-",
                     "-" if not ok else format_rate(o.tokens_per_second_per_user) if o.tokens_per_second_per_user
                     else "unknown",
                     # all sequences' output tokens per second of their whole requests, TTFT counted (fit's
                     # tokens_per_second_total; the JSON's tokens_per_second): named "incl. TTFT", for at one sequence it is below
                     # the decode rate beside it (probe20 C1: "tok/s/user 7.4, tok/s total 2.7" read as a mistake)
                     "-" if not ok else format_rate(o.tokens_per_second) if o.tokens_per_second else "unknown",
                     "yes" if ok else "experts in host memory (below)" if h else "no: " + "; ".join(o.reasons)[:90]])
    given = [(word, format_bytes(data[k]) if k in _BYTES else data[k]) for k, word in _HEADER if data.get(k) is not None]
    given += [(k.replace("_", " "), "x".join(map(str, data[k])) if isinstance(data[k], (tuple, list)) else data[k])
              for k in _MEDIA if data.get(k) is not None]
    on = "".join(f", {word} {v}" for word, v in given)
    floor = "in memory (decode speed unknown: see the warning)" if unchecked else "at reading speed or faster"
    lines = [f"models on {data['devices_text']}{on}: {data['context']:,} tokens x {data['concurrency']} sequence(s), "
             f"the highest-quality format that fits {floor}; {data['order']}", table(rows, FITS_ON_COLUMNS)]
    n, split = len(data["fitting"]), sum(1 for h in host.values() if h and h["host_memory_checked"])
    one = len(res.options) == 1  # "1 of 1 model fits", "3 of 7 models fit"
    lines.append(f"{n} of {len(res.options)} model{'' if one else 's'} fit{'s' if one else ''}" + (f" ({split} with experts in host memory, below)" if split
                                                            else ""))
    lines += host_lines
    # a row whose format is below a better one that fits in memory but misses the floor (or the limits): why, in the
    # option's own sentence (estimate/format_search.py PassedOver.words), so the row is not read as the best in memory
    lines += [f"{e.name}: {o.weights_format.removeprefix('gguf:')}, as {o.passed_over}" for e, o in res.options
              if o.status == "meets" and o.passed_over]
    if data.get("text_only_left_out"):
        lines.append(f"{data['text_only_left_out']} text-only model(s) left out: images and video do not apply to them")
    lines += [f"warning: {w}" for w in data["warnings"]]
    return "\n".join(lines)


__all__ = ["FITS_ON_COLUMNS", "fits_on_text"]
