"""The calculator's request rate in a real browser: a "Request rate" field beside Concurrency, sent to each cell of
the fits-on grid as the web API's request_rate (fit --request-rate): the h100-sxm x 1 cell shows the TTFT and the
tokens/s `fit qwen3-0.6b --device h100-sxm --request-rate 16` prints (a separate CLI process), and says the requests
in flight it derives. A rate with a concurrency is fit's one line, once for the whole grid; a rate past the
capacity is fit's line in that cell. Before, the page had no rate field."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from browser_helpers import CHROMIUM, SKIP
from playwright.sync_api import Page

sys.path.insert(0, str(Path(__file__).parent))
from test_browser_pages import cli, ready, wait_grid  # noqa: E402

pytestmark = pytest.mark.skipif(not CHROMIUM.exists(), reason=SKIP)

FLAGS = ("--engine", "vllm", "--context", "640", "--output-tokens", "128")
CELL = "#cell-h100-sxm-1"


def test_a_rate_sizes_the_grid_as_fit_does(page: Page) -> None:
    want = cli("fit", "qwen3-0.6b", "--device", "h100-sxm", *FLAGS, "--request-rate", "16")
    ready(page, "/?model=qwen3-0.6b&engine=vllm&context=640&output_tokens=128")
    rate = page.get_by_label("Request rate", exact=True)
    assert rate.get_attribute("id") == "request_rate"
    rate.fill("16")
    page.wait_for_function("() => location.search.includes('request_rate=16')")
    wait_grid(page)
    cell = page.locator(CELL)
    assert cell.get_attribute("data-ttft") == str(want["speed"]["ttft_seconds"])
    assert float(cell.get_attribute("data-tokens-per-second") or 0) == want["tokens_per_second_total"]
    in_flight = want["speed"]["under_load"]["in_flight"]
    assert f"at 16 requests/s ({in_flight:.1f} in flight)" in cell.inner_text()
    # with a concurrency too: fit's one line, said once for the grid
    page.get_by_label("Concurrency", exact=True).fill("4")
    page.wait_for_selector("#grid-problem", timeout=60_000)
    assert "give --request-rate or --concurrency, not both" in page.locator("#grid-problem").inner_text()
