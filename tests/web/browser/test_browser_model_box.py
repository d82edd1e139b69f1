"""The model box and the actions beside it, in real Chromium against a real server, each checked against the CLI
(a separate ``llmsizer`` process) for the same input:

- review36 N1: the suggestions are the catalog models the words name by the one name rule (``llmsizer models
  QUERY``, suggest.matches_name), not a <datalist> the browser filters by substring ('7b' offered gemma-2-27b).
- probe26 C4: a prefix typed on the way to a name ("qwen2.") is not flashed as "unknown model" while the box has focus
  and its suggestions still match; the error is said once the box is left, or when no model matches.
- probe26 C6: with no model there is no command to copy (not ``llmsizer infer MODEL ...``, "unknown model 'MODEL'").
- probe26 C2: a fits-on cell that does not fit says why, as ``llmsizer fit`` says it (its reasons), beside
  "22.26 GiB of 23.99 GiB".
"""

from __future__ import annotations

import shlex
import sys
from pathlib import Path

import pytest
from browser_helpers import CHROMIUM, SKIP
from playwright.sync_api import Page, expect

sys.path.insert(0, str(Path(__file__).parent))
from test_browser_pages import cli, copy_command, ready, wait_attr  # noqa: E402

pytestmark = pytest.mark.skipif(not CHROMIUM.exists(), reason=SKIP)


def _suggested(page: Page) -> list[str]:
    return page.locator("#model-options [role=option]").evaluate_all("(os) => os.map((o) => o.dataset.value)")


@pytest.mark.parametrize("words", ["7b", "qwen 2.5"])
def test_the_suggestions_are_the_models_the_cli_finds(page: Page, words: str) -> None:
    want = [m["name"] for m in cli("models", words)["models"]][:12]  # the CLI's answer to the same words
    assert want
    ready(page, "/")
    model = page.get_by_label("Model", exact=True)
    model.fill(words)
    expect(page.locator("#model-options")).to_be_visible()
    page.wait_for_function("(n) => document.querySelectorAll('#model-options [role=option]').length === n",
                           arg=len(want))
    assert _suggested(page) == want
    if words == "7b":
        assert "gemma-2-27b" not in _suggested(page)  # '27b' is not the word '7b' (a substring filter offered it)
    # the keyboard picks one: the box holds its name, the list closes, the page answers that model
    model.press("ArrowDown")
    model.press("Enter")
    assert model.input_value() == want[0]
    expect(page.locator("#model-options")).to_be_hidden()
    page.wait_for_selector("#status:text-matches('answered in the same way as')")
    command = copy_command(page)
    assert shlex.split(command)[:3] == ["llmsizer", "infer", want[0]], command
    total = cli(*shlex.split(command)[1:])["totals"]["device"]["bytes"]  # the page's answer is that command's
    wait_attr(page, "#total", "bytes", total, command)


def test_a_prefix_on_the_way_to_a_name_is_not_flashed_as_unknown(page: Page) -> None:
    ready(page, "/")
    page.evaluate("""() => { window.seen = []; const p = document.getElementById('problem');
        new MutationObserver(() => { if (!p.hidden && p.textContent) window.seen.push(p.textContent); })
          .observe(p, { childList: true, characterData: true, subtree: true, attributes: true }); }""")
    model = page.get_by_label("Model", exact=True)
    model.fill("qwen")
    model.press_sequentially("2.5-7b", delay=400)  # slower than the form's 250 ms debounce: each prefix is asked
    # the whole name, then a flag or nothing (an empty Context is infer's default: no flag follows, probe28 D5)
    page.wait_for_selector("#status:text-matches('answered in the same way as: llmsizer infer qwen2\\\\.5-7b( |$)')")
    command = copy_command(page)
    wait_attr(page, "#total", "bytes", cli(*shlex.split(command)[1:])["totals"]["device"]["bytes"], command)
    assert page.evaluate("window.seen") == []  # no "unknown model 'qwen2.'" on the way
    # a prefix left as it is: once the box is left, the CLI's line is said
    model.fill("qwen2.")
    model.press("Tab")
    expect(page.locator("#problem")).to_contain_text("unknown model 'qwen2.'")
    # words that name no model: said while typing (nothing to complete)
    model.fill("zzzz")
    expect(page.locator("#problem")).to_contain_text("unknown model 'zzzz'")
    expect(model).to_be_focused()


def test_no_model_no_command(page: Page) -> None:
    ready(page, "/")
    copy = page.get_by_role("button", name="Copy as CLI command")
    page.get_by_label("Model", exact=True).fill("")
    expect(page.locator("#problem")).to_contain_text("give a MODEL")
    expect(copy).to_be_disabled()
    expect(page.get_by_role("button", name="Download as request YAML")).to_be_disabled()
    expect(page.locator("#action-status")).to_have_text("give a model first: the command names one")
    page.get_by_label("Model", exact=True).fill("llama-3.1-8b")
    expect(copy).to_be_enabled()
    assert copy_command(page).startswith("llmsizer infer llama-3.1-8b")


def test_compare_with_no_model_has_no_command(page: Page) -> None:
    page.goto("/compare?model=llama-3.1-8b&context=8k&concurrency=8")
    page.wait_for_selector("body[data-ready='1']")
    page.get_by_label("Model", exact=True).fill("")
    expect(page.get_by_role("button", name="Copy as CLI command")).to_be_disabled()


def test_a_fits_on_cell_that_does_not_fit_says_why(page: Page) -> None:
    args = ("llama-3.1-8b", "--engine", "vllm", "--context", "8192", "--concurrency", "16")
    want = cli("fit", *args, "--device", "rtx-4090")
    assert want["fits"] is False and want["memory_per_device"] < want["budget_per_device"]  # less, yet no fit
    ready(page, "/?model=llama-3.1-8b&engine=vllm&context=8192&concurrency=16")
    cell = page.locator("#cell-rtx-4090-1")
    expect(cell).to_have_attribute("data-fits", "false", timeout=120_000)
    assert "; ".join(want["reasons"]) in cell.inner_text()  # e.g. "vLLM KV pool holds 4 sequence(s) ...; 16 requested"
