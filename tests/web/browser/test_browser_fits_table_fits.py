"""The /fits table shows all of its columns (the CLI's nine) inside its card at a 1400 px window, with no sideways
scroll: before, it was 1,087 px in an 874 px card and hid tok/s/user, tok/s total and fits (static/style.css
``#fits-table``). Checked on a few answers whose longest cells differ (ids, reasons, "not rated (re-quantized from
fp8-block)", "transformers", "experts in host memory")."""

from __future__ import annotations

import pytest
from browser_helpers import CHROMIUM, SKIP
from playwright.sync_api import Page

pytestmark = pytest.mark.skipif(not CHROMIUM.exists(), reason=SKIP)


@pytest.mark.parametrize("query", ["fits_on=rtx-4090&context=8k&concurrency=2",
                                   "fits_on=h100-sxm&count=8&context=8k&concurrency=2",
                                   "fits_on=apple-m3-max-36gb"])
def test_the_fits_table_needs_no_sideways_scroll_at_1400_px(page: Page, query: str) -> None:
    assert page.viewport_size == {"width": 1400, "height": 1000}
    page.goto(f"/fits?{query}")
    page.wait_for_function("() => document.querySelectorAll('#fits-table tbody tr').length > 0", timeout=60_000)
    page.wait_for_function("() => !document.querySelector('#status.busy')")
    table, card = page.evaluate("(() => { const t = document.getElementById('fits-table'); "
                                "return [t.scrollWidth, t.parentElement.clientWidth]; })()")
    assert table <= card, (query, table, card)
    # the last column is in view, not past the card's right edge
    right = page.evaluate("(() => { const t = document.getElementById('fits-table'); return ["
                          "t.tHead.rows[0].lastElementChild.getBoundingClientRect().right, "
                          "t.parentElement.getBoundingClientRect().right]; })()")
    assert right[0] <= right[1], (query, right)
