"""The README's numbers that other files decide: every "the catalogs: N models" / "N catalog models" it states
equals the number of model files the catalog ships (catalog/models.py ``entries``; line 42 said 66 while line 268
said 75 after the StableLM-2-12B row), and its llama.cpp prefill figure is docs/accuracy.md's."""

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


def test_the_readme_prefill_figure_is_the_accuracy_tables() -> None:
    """The README's llama.cpp prefill figure ('prefill (N held-out rows) ... / median M%') is docs/accuracy.md's
    prefill throughput line (written by scripts/gen_docs.py from ``llmsizer validate``); it said 18 rows and 11.9 %
    after the prefill rows had grown to 27 at 9.0 % (today's MoE tile and RTX 6000 Ada rows among them)."""
    text = README.read_text(encoding="utf-8")
    found = re.search(r"prefill \((\d+) held-out rows\).*/ median (\d+\.\d)%", text)
    assert found is not None
    accuracy = (README.parent / "docs" / "accuracy.md").read_text(encoding="utf-8")
    line = re.search(r"^\| prefill throughput \| (\d+) \| (\d+\.\d)% \|", accuracy, re.M)
    assert line is not None
    assert found.groups() == line.groups()
