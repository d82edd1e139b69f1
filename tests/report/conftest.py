from __future__ import annotations

from pathlib import Path

import pytest

from llmsizer.plan import plan_file

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = sorted((ROOT / "examples").glob("*.yaml"))


@pytest.fixture(scope="session")
def plans():
    """The plans of the three examples (computed once)."""
    return {p.stem: plan_file(p) for p in EXAMPLES}
