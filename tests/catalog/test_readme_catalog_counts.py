"""The README's numbers that other files decide: every "the catalogs: N models" / "N catalog models" it states
equals the number of model files the catalog ships (catalog/models.py ``entries``; line 42 said 66 while line 268
said 75 after the StableLM-2-12B row), and its decode, batched-decode and prefill figures are docs/accuracy.md's."""

from __future__ import annotations

import re
from pathlib import Path

from llmsizer.catalog.models import entries

README = Path(__file__).resolve().parents[2] / "README.md"


def test_every_model_count_in_the_readme_is_the_catalogs() -> None:
    text = README.read_text(encoding="utf-8")
    stated = [int(a or b) for a, b in re.findall(r"the catalogs: (\d+) models|\b(\d+) catalog models", text)]
    assert len(stated) == 2, stated  # the command table's and the accuracy table's
    assert set(stated) == {len(entries())}, stated


def test_the_readme_speed_figures_are_the_accuracy_tables() -> None:
    """The README's decode, batched-decode and prefill figures ('N held-out rows' ... 'median M%, 90th percentile
    P%') are docs/accuracy.md's lines of those kinds (written by scripts/gen_docs.py from ``llmsizer validate``).
    Hand-kept, they had gone stale: one-sequence decode '35 rows, median 5.3 %, worst +50 % (H100-PCIe Q4_0)' after
    that row moved to +23.5 %, prefill '18 rows, 11.9 %' at 27 rows, 9.0 %."""
    text = README.read_text(encoding="utf-8")
    accuracy = (README.parent / "docs" / "accuracy.md").read_text(encoding="utf-8")
    stated = {
        "decode throughput": r"decode tokens/s, one sequence \((\d+) held-out rows.*?\| median (\d+\.\d)%, 90th percentile (\d+\.\d)%",
        "batched decode throughput": r"decode tokens/s, 2–32 sequences \((\d+) held-out rows.*?\| median (\d+\.\d)%, "
                                     r"90th percentile (\d+\.\d)% /",
        "prefill throughput": r"/ prefill \((\d+) held-out rows\).*?/ median (\d+\.\d)%, 90th percentile (\d+\.\d)% \|",
    }
    for kind, pattern in stated.items():
        found = re.search(pattern, text)
        line = re.search(rf"^\| {kind} \| (\d+) \| (\d+\.\d)% \| (\d+\.\d)% \|", accuracy, re.M)
        assert found is not None and line is not None, kind
        assert found.groups() == line.groups(), kind
