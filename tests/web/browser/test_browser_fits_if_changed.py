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


def test_a_training_cell_lists_the_alternatives_fit_prints(page: Page) -> None:
    ready(page, "/?model=llama-3.1-8b&tab=train&method=full&memory=")
    wait_grid(page)
    command = shlex.split(copy_command(page))  # llmsizer train llama-3.1-8b --method full ...
    assert command[1] == "train" and "--method" in command, command
    text = cli("fit", *command[2:], "--train", "--device", "rtx-4090", "--count", "1", json_out=False)
    printed = [ln.strip() for ln in text.splitlines() if ln.strip().startswith(("hint: nothing", "alternative:"))]
    assert len(printed) >= 2, text  # 8B full training on one 24 GB card: nothing keeping the settings fits
    cell = page.locator("#cell-rtx-4090-1")
    assert cell.get_attribute("data-fits") == "false"
    shown = " ".join(cell.inner_text().split())
    for line in printed:
        assert line in shown, (line, shown)
