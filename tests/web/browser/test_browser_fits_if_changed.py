"""review8 #7: the calculator's fits-on grid shows a training cell's ``fits_if_changed`` alternatives, the lines
``llmsizer fit --train`` prints under its answer (render/fit_text.py ``fits_if_changed_lines``, their one home),
each with what it overrides of the settings given. Before, the cell said only "does not fit": ``fits_at`` is null
in exactly the cases where ``fits_if_changed`` is filled. The truth is a separate ``llmsizer fit`` process run with
the flags the page's own "Copy as CLI command" gives."""

from __future__ import annotations

import shlex
import sys
from pathlib import Path

import pytest
from browser_helpers import CHROMIUM, SKIP
from playwright.sync_api import Page

sys.path.insert(0, str(Path(__file__).parent))
from test_browser_pages import cli, copy_command, ready, wait_grid  # noqa: E402

pytestmark = pytest.mark.skipif(not CHROMIUM.exists(), reason=SKIP)


def test_a_training_cell_names_what_fits_in_the_forms_words(page: Page) -> None:
    """8B full training on one RTX 4090: the least change that fits (fit's ``fits_at``: checkpointing + optimizer
    offload, the ladder's offload step) and any ``fits_if_changed`` alternative, each in the form's field names
    ("grad checkpointing full"), as a separate ``llmsizer fit --json`` run with the page's copied flags gives them."""
    ready(page, "/?model=llama-3.1-8b&tab=train&method=full&memory=")
    wait_grid(page)
    command = shlex.split(copy_command(page))  # llmsizer train llama-3.1-8b --method full ...
    assert command[1] == "train" and "--method" in command, command
    fit = cli("fit", *command[2:], "--train", "--device", "rtx-4090", "--count", "1")
    assert not fit["fits"] and (fit["fits_at"] or fit["fits_if_changed"]), fit
    cell = page.locator("#cell-rtx-4090-1")
    assert cell.get_attribute("data-fits") == "false"
    shown = " ".join(cell.inner_text().split())
    for at in ([fit["fits_at"]] if fit["fits_at"] else []) + list(fit["fits_if_changed"]):
        words = ", ".join(f"{k.replace('_', ' ')} {v}" for k, v in at["changes"].items())
        assert f"fits with {words}" in shown, (words, shown)
        assert "--" not in shown, shown  # no CLI flags in the form's cell
