"""The README's model counts are the catalog's: "the catalogs: N models" and "N catalog models" it states equals the number of
model files the catalog ships (catalog/models.py ``entries``). Line 42 said 66 while line 268 said 75 after the
StableLM-2-12B row (#catalog6 updated one of the two)."""

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
