"""The calculator's KV cache dtype select in a real browser: it offers the chosen engine's list from
/pages/choices.json (the CLI's, tests/web/api/test_kv_dtype_choices.py), ``auto`` included, follows the engine
as it changes, and a choice the new engine refuses goes back to the engine's default."""

from __future__ import annotations

import json
import sys
import urllib.request
from pathlib import Path

import pytest
from browser_helpers import CHROMIUM, SKIP
from playwright.sync_api import Page

sys.path.insert(0, str(Path(__file__).parent))
from test_browser_pages import ready  # noqa: E402

pytestmark = pytest.mark.skipif(not CHROMIUM.exists(), reason=SKIP)


def _offered(page: Page) -> list[str]:
    return page.eval_on_selector_all("#kv_dtype option", "os => os.map((o) => o.value)")


def test_the_select_follows_the_engine(page: Page, server: str) -> None:
    with urllib.request.urlopen(f"{server}/pages/choices.json") as r:
        c = json.load(r)
    by = c["kv_dtypes_by_engine"]
    ready(page, "/?model=qwen2.5-0.5b")
    assert _offered(page) == ["", *c["choices"]["kv_dtypes"]]  # the engine left to the device: every name
    engine, kv = page.get_by_label("Engine"), page.get_by_label("KV cache dtype")
    engine.select_option("llamacpp")
    assert _offered(page) == ["", *by["llamacpp"]] and "auto" in by["llamacpp"] and "fp8" not in by["llamacpp"]
    kv.select_option("q4_0")
    engine.select_option("vllm")  # vLLM has no q4_0 cache: back to the engine's default
    assert _offered(page) == ["", *by["vllm"]] and kv.input_value() == ""
    kv.select_option("auto")
    engine.select_option("sglang")  # auto is every engine's: kept
    assert kv.input_value() == "auto"
    ready(page, "/?model=qwen2.5-0.5b&engine=llamacpp&kv_dtype=q8_0")  # a link keeps a choice its engine takes
    assert _offered(page) == ["", *by["llamacpp"]] and kv.input_value() == "q8_0"
