"""Rewrite the BANDS of src/llmsizer/estimate/ranges.py from the repository's validation rows, and the held-out
ratios its MLA + MoE no-band note quotes (MLA_MOE_MEASURED, validation_cases.mla_moe_measured).

scripts/gen_docs.py runs this first (so regenerating the docs after a merge that moves predictions also re-derives
the bands, and the README examples quote the new ones); tests/validation/test_ranges.py fails with the same lines
when they are stale. Then regenerate docs/accuracy.md with `llmsizer validate --no-store --markdown docs/accuracy.md --force`
(scripts/gen_docs.py does that too):

    PYTHONPATH=src python scripts/rederive_bands.py
"""

from __future__ import annotations

from pathlib import Path

from llmsizer.estimate import ranges as R
from llmsizer.validation_cases import (
    band_of,
    band_rows,
    inside_share,
    loso_share,
    mla_moe_measured,
    repo_cases,
    setup_of,
)

Derived = dict[tuple[str, str], tuple[float, float, int, int, float | None, float | None, tuple[str, ...]]]


def derived() -> Derived:
    """(kind, engine) -> (low, high, rows, setups, inside, loso, devices) as estimate/ranges.py states them, from the
    rows at this commit (``validation_cases.band_of``: each setup weighing as one; inside: ``validation_cases.
    inside_share`` to 3 decimals; loso: ``validation_cases.loso_share`` to 3 decimals, None with one setup; devices: the catalog devices of the rows where every row names one, the serving
    engines' rows)."""
    out: Derived = {}
    for (kind, engine), rows in sorted(band_rows(repo_cases()).items()):
        lo, hi = band_of(rows)
        devices = tuple(sorted({c.device for c in rows})) if all(c.device for c in rows) else ()
        loso = loso_share(rows)
        out[(kind, engine)] = (lo, hi, len(rows), len({setup_of(c) for c in rows}), round(inside_share(rows), 3),
                               None if loso is None else round(loso, 3), devices)
    return out


def stated_bands() -> Derived:
    """The bands estimate/ranges.py states now, in ``derived``'s form."""
    return {k: (b.low, b.high, b.rows, b.setups, b.inside, b.loso, b.devices) for k, b in R.BANDS.items()}


def lines(bands: Derived) -> list[str]:
    out = []
    for (k, e), (lo, hi, n, s, inside, loso, d) in bands.items():
        head = (f'_add("{k}", "{e}", {lo:.4f}, {hi:.4f}, {n}, {s}, {inside or 0:.3f}, '
                f'{"None" if loso is None else f"{loso:.3f}"}')
        tail = f", {d!r})" if d else ")"
        out.append(head + tail if len(head + tail) <= 120 else head + ",\n     " + tail[2:])
    return out


MEASURED_START, MEASURED_END = "MLA_MOE_MEASURED = {", "\nMLA_MOE_MULTI_GPU_NO_BAND = "


def measured_text(measured: dict[str, tuple[float, float, tuple[str, ...]]]) -> str:
    """``MLA_MOE_MEASURED = {...}`` as ranges.py states it."""
    pad = " " * len(MEASURED_START)
    items = [f"{k!r}: ({lo:.2f}, {hi:.2f}, {ids!r})".replace("'", '"') for k, (lo, hi, ids) in measured.items()]
    return MEASURED_START + f",\n{pad}".join(items) + "}"


def rewrite_measured() -> bool:
    """Rewrite ranges.MLA_MOE_MEASURED (and the loaded dict) from the held-out rows; True when it changed. The note
    that quotes it (MLA_MOE_MULTI_GPU_NO_BAND) is built at import: the next run reads it (gen_docs runs twice)."""
    measured = mla_moe_measured()
    if measured == R.MLA_MOE_MEASURED:
        return False
    path = Path(R.__file__)
    text = path.read_text(encoding="utf-8")
    start, end = text.index(MEASURED_START), text.index(MEASURED_END)
    path.write_text(text[:start] + measured_text(measured) + text[end:], encoding="utf-8")
    R.MLA_MOE_MEASURED.clear()
    R.MLA_MOE_MEASURED.update(measured)
    print(measured_text(measured))
    return True


def main() -> bool:
    """Rewrite ranges.py (and the loaded BANDS) when they differ from the rows; True when something changed."""
    changed = rewrite_measured()
    bands = derived()
    if stated_bands() == bands:
        return changed
    path = Path(R.__file__)
    text = path.read_text(encoding="utf-8")
    start, end = text.index('_add("'), text.index("\n\n\ndef band_for")
    path.write_text(text[:start] + "\n".join(lines(bands)) + text[end:], encoding="utf-8")
    R.BANDS.clear()
    for (k, e), (lo, hi, n, s, inside, loso, d) in bands.items():
        R.BANDS[(k, e)] = R.Band(k, e, lo, hi, n, d, s, loso, inside)
    print("\n".join(lines(bands)))
    return True


if __name__ == "__main__":
    main()
