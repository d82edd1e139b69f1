"""`llmsizer validate`: llmsizer's own error against published and measured runs, per row and per kind."""

from __future__ import annotations

import argparse
import glob
import sys
from pathlib import Path
from typing import Any

from ..render.safe import say
from ..result import envelope
from .commands import COMMAND_HELP
from .common import add_force, check_output_file, emit_json, write_atomic

GENERATOR = "llmsizer validate --no-store --markdown docs/accuracy.md --force"

EPILOG = f"""examples:
  llmsizer validate                       # public set + validation/measured/*.jsonl + local results store
  llmsizer validate --no-store --json
  {GENERATOR}

Error = (predicted - measured) / measured. The summary gives the median and 90th percentile of |error| per kind
(inference memory, training memory, throughput); calibration rows (ones that fed a constant), rows whose settings
had to be assumed and lower bounds (out-of-memory runs) are listed but kept out of it.
"""


# The loaded TTFT's two arrival patterns (formulas/serving_queue.py eq. Q9), stated as bounds beside the expected
# figure, not as a calibrated range: no constant is fitted to their width, and the high end takes all of the server's
# time per request as serial work (an upper bound by construction). The longest training sequence's: the length at
# the estimate's memory range's two ends (estimate/training/reverse.py max_seq_len at level 'high' and 'low').
SPAN_TITLE = ("bounds the estimate states, not a calibrated range (the loaded TTFT: independent arrivals, the "
              "expected figure whose error the summary gives, .. arriving together, eq. Q9b's upper bound with all of "
              "the server's time per request serial; formulas/serving_queue.py eq. Q9; the longest training sequence: "
              "the length that fits at the high end of the estimate's memory range .. at its low end)")

def register(sub: Any) -> None:
    p = sub.add_parser("validate", help=COMMAND_HELP["validate"],
                       description="Compare llmsizer's estimates with every published measurement it can express "
                                   "(validation/*.csv), the committed measured runs (validation/measured/*.jsonl) "
                                   "and the local results store of `llmsizer measure`.",
                       epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_arguments(p)
    p.set_defaults(func=cmd_validate)


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--data", help="validation data folder (default: the repository's validation/)")
    p.add_argument("--store", help="results store to include (default ~/.cache/llmsizer/results.sqlite)")
    p.add_argument("--no-store", action="store_true", help="leave the local results store out")
    p.add_argument("--no-public", action="store_true", help="measured runs only")
    p.add_argument("--markdown", metavar="PATH", help="also write the report as Markdown")
    add_force(p, "the --markdown file")
    p.add_argument("--json", action="store_true", help="cases and summary as JSON")


def _shown(path: Path) -> str:
    """A data file as the report names it: relative to the working folder when inside it, so a report written in
    one clone (docs/accuracy.md) does not carry that clone's absolute path."""
    try:
        return str(Path(path).resolve().relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(path)


def gather(args: argparse.Namespace) -> dict[str, Any]:
    from .. import validation_cases as V
    from ..measure.store import ResultStore, read_jsonl

    data = V.data_dir(args.data)
    cases: list[V.Case] = []
    missing: list[V.NotExpressed] = []
    sources = []
    if not args.no_public:
        c, m = V.public_cases(data)
        cases += c
        missing += m
        sources.append(f"{_shown(data / 'public_measurements.csv')} and {_shown(data / 'vllm_startup_logs.csv')}")
    files = sorted(glob.glob(str(data / "measured" / "*.jsonl")))
    if files:
        c, m = V.measured_cases(read_jsonl(files))
        cases += c
        missing += m
        sources += files
    if not args.no_store:
        store = ResultStore(args.store)
        recs = store.records()
        if recs:
            c, m = V.measured_cases(recs)
            cases += c
            missing += m
            sources.append(f"{store.path} ({len(recs)} records)")
    return {"cases": cases, "missing": missing, "summary": V.summarize(cases), "sources": sources,
            "by_origin": {o: V.summarize(cases, o) for o in ("published", "measured")},
            "coverage": V.coverage(cases), "known_misses": V.known_misses(cases), "spans": V.span_coverage(cases)}


def _fmt(v: float | None) -> str:
    if v is None:
        return "-"
    return f"{v:,.0f}" if abs(v) >= 1000 else f"{v:.3g}" if abs(v) < 10 else f"{v:,.1f}"


def _pct(e: float | None) -> str:
    return "-" if e is None else f"{e:+.1%}"


def _within(c: Any) -> str:
    if c.excluded:
        ok = {True: ", met", False: ", not met", None: ""}[c.within]
        return f"({c.excluded}{ok})"
    return {True: "yes", False: "NO", None: ""}[c.within]


def render_text(g: dict[str, Any]) -> str:
    from .. import validation_cases as V
    from ..render.text import table

    out = []
    for kind in V.KINDS:
        mine = [c for c in g["cases"] if c.kind == kind]
        if not mine:
            continue
        out.append(f"== {kind} ==")
        rows = [[c.id, c.what[:64], _fmt(c.predicted), _fmt(c.measured), c.unit, _pct(c.error), _within(c)]
                for c in mine]
        out.append(table(rows, ["id", "case", "predicted", "measured", "unit", "error", "within tolerance"]))
        out.append("")
    out.append("summary (|error|; calibration, assumed-settings and lower-bound rows excluded):")
    rows = []
    for s in g["summary"]:
        if not s.n and not s.excluded_rows:
            continue
        rows.append([s.kind, str(s.n), _pct(s.median).lstrip("+") if s.median is not None else "-",
                     _pct(s.p90).lstrip("+") if s.p90 is not None else "-", f"{s.within_10}/{s.n}",
                     f"{s.within}/{s.with_tolerance}" if s.with_tolerance else "-", str(s.excluded_rows)])
    out.append(table(rows, ["kind", "rows", "median", "p90", "within 10%", "within tolerance", "excluded rows"]))
    out.append("")
    if g.get("spans"):
        out.append(f"{SPAN_TITLE}: rows whose measured value lies between them, and their width (high / low):")
        out.append(table([[k, f"{i}/{n}", f"{ia}/{na}", f"{wm:.1f}x", f"{wx:.1f}x"]
                          for k, i, n, ia, na, wm, wx in g["spans"]],
                         ["kind", "summarised rows inside", "all rows inside (excluded ones too)", "median width",
                          "widest"]))
        out.append("")
    out.append("calibrated ranges (estimate/ranges.py): summarised rows whose measured value lies inside "
               "[expected x low, expected x high], by row and by setup (each setup as one); target >= 90% per kind "
               "and engine:")
    out.append(table([[c.kind, c.engine, _band(c), str(c.rows), f"{c.inside}/{c.rows}", f"{c.inside_loo}/{c.rows}",
                       str(c.setups), _setups(c.inside_setups, c.setups),
                       _setups(c.inside_loso, c.setups, c.setups > 1)]
                      for c in g["coverage"]],
                     ["kind", "engine", "band (measured/expected)", "rows", "inside", "inside, leave-one-out",
                      "setups", "setups inside", "setups inside, leave-one-setup-out"]))
    if g["known_misses"]:
        out.append("known misses in the bands (each kept in its band and in the medians above; why in its row's note): "
                   + "; ".join(f"{m.id} {m.ratio:.3f} ({m.kind}, moves {m.moves or 'nothing'})"
                               for m in g["known_misses"]))
    if g["missing"]:
        out.append(f"not expressed: {len(g['missing'])} rows (see --markdown or --json for why)")
    return "\n".join(out)


# a band's leave-one-setup-out coverage is guaranteed (split conformal over setups, floor(0.05 (n + 1)) >= 1) from
# this many setups; below it the column is published evidence only (the accuracy page's words)
GUARANTEED_SETUPS = 20


def _band(c: Any) -> str:
    return "-" if c.low is None else f"{c.low:.3f} .. {c.high:.3f}"


def _setups(inside: float, setups: int, shown: bool = True) -> str:
    """Setups inside (each the share of its rows inside, summed) out of ``setups``; '-' where not ``shown``."""
    return f"{inside:.2f}/{setups}" if shown else "-"


def render_markdown(g: dict[str, Any], command: str = GENERATOR) -> str:
    from .. import validation_cases as V
    from .._version import __version__
    from ..measure.probe import now_iso

    lines = [f"<!-- generated by `{command}`; do not edit by hand -->", "", "# Accuracy: llmsizer against measured runs",
             "", f"Generated {now_iso()[:10]} by `{command}` (llmsizer {__version__}). Error = (predicted - measured) "
             "/ measured; positive means llmsizer over-estimates. Calibration rows (those that fed a constant), rows "
             "whose unpublished settings had to be assumed, and lower bounds (runs that ran out of memory) are "
             "listed but kept out of the summary. Sources: every public row carries its source in "
             "`validation/*.csv`; measured runs carry their settings, device, versions and date in "
             "`validation/measured/*.jsonl`. The same command without the main CLI: "
             "`python -m llmsizer.cli.validate_cmd --no-store --markdown docs/accuracy.md --force`.", "", "## Summary", "",
             "| kind | rows | median abs error | 90th percentile abs error | within 10 % | within tolerance | "
             "excluded rows |",
             "|---|---:|---:|---:|---:|---:|---:|"]
    for s in g["summary"]:
        if not s.n and not s.excluded_rows:
            continue
        lines.append(f"| {s.kind} | {s.n} | {_pct(s.median).lstrip('+')} | {_pct(s.p90).lstrip('+')} | "
                     f"{s.within_10}/{s.n} | {f'{s.within}/{s.with_tolerance}' if s.with_tolerance else '-'} | "
                     f"{s.excluded_rows} |")
    if g.get("spans"):
        lines += ["", f"{SPAN_TITLE[0].upper()}{SPAN_TITLE[1:]}. Rows whose measured value lies between them, and "
                  "their width (high / low):", "",
                  "| kind | summarised rows inside | all rows inside (excluded ones too) | median width | widest |",
                  "|---|---:|---:|---:|---:|"]
        lines += [f"| {k} | {i}/{n} | {ia}/{na} | {wm:.1f}x | {wx:.1f}x |" for k, i, n, ia, na, wm, wx in g["spans"]]
    lines += ["", "By origin (published measurements in `validation/*.csv`; runs measured with `llmsizer measure`):",
              "", "| kind | origin | rows | median abs error | 90th percentile abs error |", "|---|---|---:|---:|---:|"]
    for origin, summ in g.get("by_origin", {}).items():
        for s in summ:
            if s.n:
                lines.append(f"| {s.kind} | {origin} | {s.n} | {_pct(s.median).lstrip('+')} | "
                             f"{_pct(s.p90).lstrip('+')} |")
    # the bands of at least GUARANTEED_SETUPS setups, from the coverage rows the table below prints (review18 D9:
    # the sentence was written by hand and went stale)
    many = [f"{c.engine} {c.kind}" for c in g["coverage"] if c.setups >= GUARANTEED_SETUPS]
    few_setups = f"every band but {', '.join(many[:-1]) + ' and ' if len(many) > 1 else ''}{many[-1]}" if many \
        else "every band"
    lines += ["", "## Calibrated ranges", "",
              "Each estimate's range is [expected x low, expected x high] with the band of its kind and engine "
              "(for vLLM and SGLang: of its release scope, `ranges.SERVING_SCOPES`, applied only where its rows are "
              "representative: rows of at least two devices, or of the estimate's device; a held-out scope only on "
              "its own devices; elsewhere the pooled serving-engine band, named in the estimate's assumptions; "
              "for llama.cpp prefill and one-sequence decode: of its device's backend, `llama.cpp on CUDA` / "
              "`Metal` / `CPU` (`ranges.llamacpp_band`, each row feeding its backend's band and the engine-wide "
              "one, but a known miss of a backend with a band of its own that band alone), where that band's rows "
              "measured at least two setups, else the engine-wide `llama.cpp` band, "
              "named in the estimate's assumptions) "
              "(`src/llmsizer/estimate/ranges.py`, written from these rows by `scripts/rederive_bands.py`, which "
              "`scripts/gen_docs.py` runs, and re-derived by `tests/validation/test_ranges.py`). Each setup weighs "
              "as one, whatever its row count (`validation_cases.setup_of`: one device measured by one author's "
              "procedure -- a measured run's file of runs, or a published row's source document without its commit "
              "plus the device its CSV names; each row weighs 1 / the rows of its setup, the pooled CDF of Dunn, "
              "Wasserman & Ramdas 2022), so one setup's many rows cannot decide a band alone. From 19 effective "
              "rows (Kish's (sum w)^2 / sum w^2: n with equal weights, between the setups and n otherwise) the band "
              "is the weighted split-conformal order statistic (with equal weights the floor(0.05 (n + 1))-th most "
              "extreme ratio on each side: a new run exchangeable with the rows lies inside with probability >= "
              "90 %); with fewer it is the weighted 90 % log-normal prediction interval (never narrower than each "
              "setup's shortest range holding 90 % of its rows: the rows' span with one row per setup), whose "
              "coverage rests on that assumption. The 90 % is of a new run of one of the band's setups, each "
              "equally likely; for a run of a new setup the evidence is the leave-one-setup-out column (also in "
              "the `coverage` every printed calibrated range carries: its target, in-sample and leave-one-setup-out "
              "coverage, setups and rows, from `ranges.Band.coverage`), below 90 % for several bands, where that "
              "`coverage` carries a warning in words. *Leave-one-out* judges each row by the band "
              "of the other rows; *leave-one-setup-out* each setup's rows by the band of the other setups (the "
              f"coverage of a new setup: with fewer than {GUARANTEED_SETUPS} setups, as {few_setups} has today, it "
              "is published, not guaranteed). A measured run feeds a memory band with the figure predicted by the live tensors, the "
              "part the band multiplies (peak allocated on CUDA, the tracker's peak tensors on a CPU); its device "
              "total or process RSS is summarised but feeds none. A CUDA device total is judged (*within*, tolerance "
              "'calibrated range') against the memory range a GPU estimate prints: the live tensors x the band + the "
              "CUDA context and the allocator reserve at their own low..high (`estimate/allocator.py` "
              "`calibrated_need`, eq. C1); a CPU run's process RSS by no range, as a CPU estimate prints none. The "
              "inference runs whose reserved/allocated pairs set the allocator reserve's span (`allocator.RESERVE`, "
              "GP rows of `validation/allocator_pairs.csv`) are inside that range by construction: they are "
              "calibration rows, excluded from the summary, and judged instead by the ratio of the other rows "
              "(leave-one-out, `tests/estimate/test_calibrated_need.py`). The fit "
              "verdict decides on the "
              "expected value and names the high end it quotes (the components' or this calibrated one, whichever "
              "is higher). CPU training "
              "rows feed no GPU band. Tolerances (the *within tolerance* column) "
              "are per kind: inference memory 5-15 %, training memory 35 %, decode 25 %, prefill and training "
              "speed 50 %, so a 300 % miss passes none.", "",
              "| kind | engine | band (measured / expected) | rows | inside | inside, leave-one-out | setups | "
              "setups inside | setups inside, leave-one-setup-out |",
              "|---|---|---|---:|---:|---:|---:|---:|---:|"]
    for c in g["coverage"]:
        lines.append(f"| {c.kind} | {c.engine} | {_band(c)} | {c.rows} | {c.inside}/{c.rows} | "
                     f"{c.inside_loo}/{c.rows} | {c.setups} | {_setups(c.inside_setups, c.setups)} | "
                     f"{_setups(c.inside_loso, c.setups, c.setups > 1)} |")
    if g["known_misses"]:
        lines += ["", "### Known misses in the bands", "",
                  "Rows missed beyond their tolerance by a mechanism not established (`validation_cases.KNOWN_MISSES`, "
                  "the why in each row's note). They stay in the summary and in their band, weighing as their "
                  "setup's share like any row, and may set a band end: the band states how far measured runs lie "
                  "from the estimate, the runs the model cannot yet explain included (`estimate/ranges.py`). The "
                  "last column is the band of the other rows.", "",
                  "| id | kind | engine | measured / expected | weight (of one setup) | moves | band without it |",
                  "|---|---|---|---:|---:|---|---|"]
        lines += [f"| {m.id} | {m.kind} | {m.engine} | {m.ratio:.3f} | {m.weight:.3f} | {m.moves or 'no'} | "
                  f"{m.without[0]:.3f} .. {m.without[1]:.3f} |" for m in g["known_misses"]]
    for kind in V.KINDS:
        mine = [c for c in g["cases"] if c.kind == kind]
        if not mine:
            continue
        lines += ["", f"## {kind[0].upper() + kind[1:]}", "",
                  "| id | case | predicted | measured | unit | error | within tolerance | note |",
                  "|---|---|---:|---:|---|---:|---|---|"]
        for c in mine:
            tol = _within(c) + (f" ({c.tolerance})" if c.tolerance and not c.excluded else "")
            lines.append(f"| {c.id} | {c.what} | {_fmt(c.predicted)} | {_fmt(c.measured)} | {c.unit} | "
                         f"{_pct(c.error)} | {tol} | {c.note.replace('|', '/')} |")
    if g["missing"]:
        lines += ["", "## Rows not expressed", "", "| id | kind | why |", "|---|---|---|"]
        lines += [f"| {m.id} | {m.kind} | {m.why.replace('|', '/')} |" for m in g["missing"]]
    lines += ["", "## Data", ""] + [f"- `{_rel(s)}`" for s in g["sources"]]
    return "\n".join(lines) + "\n"


def _rel(path: str) -> str:
    try:
        return str(Path(path.split(" ")[0]).resolve().relative_to(Path.cwd())) + (
            " " + path.split(" ", 1)[1] if " " in path else "")
    except ValueError:
        return path


def cmd_validate(args: argparse.Namespace) -> int:
    if args.markdown:
        check_output_file(args.markdown, force=args.force)  # a folder, a device or an existing file (without
        # --force) is refused before the cases run
    g = gather(args)
    if args.markdown:
        write_atomic(Path(args.markdown), render_markdown(g), force=args.force)
    if args.json:
        emit_json(envelope("validate", {"cases": [c.to_dict() for c in g["cases"]],
                   "not_expressed": [{"id": m.id, "kind": m.kind, "why": m.why} for m in g["missing"]],
                   "summary": [s.to_dict() for s in g["summary"]],
                   "coverage": [c.to_dict() for c in g["coverage"]],
                   # the loaded TTFT's bounds (SPAN_TITLE): not a calibrated range
                   "bounds": [{"kind": k, "summarised_inside": i, "summarised": n, "all_inside": ia, "all": na,
                               "median_width": wm, "widest": wx} for k, i, n, ia, na, wm, wx in g["spans"]],
                   "known_misses": [m.to_dict() for m in g["known_misses"]], "sources": g["sources"]}))
    else:
        say(render_text(g))
        if args.markdown:
            say(f"report written to {args.markdown}")
    return 0


def main(argv: list[str] | None = None) -> int:
    """``python -m llmsizer.cli.validate_cmd``: the command without the main CLI."""
    from ..errors import LlmsizerError
    from .main import _Parser

    p = _Parser(prog="llmsizer validate", epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_arguments(p)
    args = p.parse_args(argv)
    try:
        return cmd_validate(args)
    except LlmsizerError as e:
        say(f"llmsizer: error: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
