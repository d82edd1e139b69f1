"""Rewrite the BANDS of src/llmsizer/estimate/ranges.py from the repository's validation rows.

Run after a change that moves predictions (tests/validation/test_ranges.py fails and prints the same lines), then
regenerate docs/accuracy.md with `llmsizer validate --no-store --markdown docs/accuracy.md`:

    PYTHONPATH=src python scripts/rederive_bands.py
"""

from __future__ import annotations

import math
from pathlib import Path

from llmsizer.estimate import ranges as R
from llmsizer.validation_cases import band_rows, repo_cases


def main() -> None:
    lines = []
    for (kind, engine), rows in sorted(band_rows(repo_cases()).items()):
        lo, hi = R.band([c.measured / c.predicted for c in rows])
        lines.append(f'_add("{kind}", "{engine}", {math.floor(lo * 1e4) / 1e4:.4f}, '
                     f'{math.ceil(hi * 1e4) / 1e4:.4f}, {len(rows)})')
    path = Path(R.__file__)
    text = path.read_text(encoding="utf-8")
    start, end = text.index('_add("'), text.index("\n\n\ndef band_for")
    path.write_text(text[:start] + "\n".join(lines) + text[end:], encoding="utf-8")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
