"""recpp: the web's fits table and compare page show a pipeline option's layout flags (recommend.Option.layout_flags,
`--tp 4 --pp 2`) as the CLI's tables do: the fits table's engine cell, the compare page's chosen title. The truth is
the Python API's answer for the same question (best_option_on, recommend_inference), not the page's own."""

from __future__ import annotations

import pytest
from browser_helpers import CHROMIUM, SKIP
from playwright.sync_api import Page

from llmsizer.recommend import Constraints, best_option_on, recommend_inference

pytestmark = pytest.mark.skipif(not CHROMIUM.exists(), reason=SKIP)


def test_fits_table_engine_cell_names_the_stages(page: Page) -> None:
    want = best_option_on("deepseek-r1", "aws-p5.48xlarge", 16, engine="vllm", context=4096, concurrency=1)
    assert want.layout_flags == "--tp 8 --pp 2"
    page.goto("/fits?fits_on=aws-p5.48xlarge&count=16&engine=vllm&query=deepseek-r1&context=4096&concurrency=1")
    page.wait_for_function("() => document.querySelectorAll('#fits-table tbody tr').length > 0", timeout=120_000)
    page.wait_for_function("() => !document.querySelector('#status.busy')")
    row = page.locator("#fits-table tbody tr", has_text="DeepSeek-R1").first
    assert f"vllm {want.layout_flags}" in row.inner_text()


def test_compare_chosen_title_names_the_stages(page: Page) -> None:
    rec = recommend_inference("deepseek-r1", context=4096, concurrency=256, constraints=Constraints(cloud_only=True))
    chosen = rec.chosen
    assert chosen is not None and chosen.layout_flags is not None
    page.goto("/compare?model=deepseek-r1&context=4096&concurrency=256&cloud_only=true")
    page.wait_for_selector("#chosen-title", timeout=120_000)
    title = page.locator("#chosen-title").inner_text()
    assert f"{chosen.devices_text} {chosen.layout_flags}" in title
