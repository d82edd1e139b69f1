"""The calculator in a real browser states the settings the CLI takes as open values and asks llama.cpp's auto-fit:

- the training tab's Advanced section has text boxes for ``train``'s open-value flags (generated from the CLI's
  parser, web/pages.py train_advanced): typing ``--modules-to-save embed,lm_head`` and ``--context-parallel 2``
  gives the total ``train ... --json`` prints for them (a separate CLI process), and the copied command carries
  both flags;
- the serving tab has a ``--auto`` checkbox, shown for llama.cpp only (web/pages.py llamacpp_auto): checked, the
  page shows the flags line ``llmsizer fit ... --auto`` prints (its text output, a separate CLI process) and the
  command it shows prints the same line.

Before, both were reachable through the JSON API only (audit16 items 1b, 1d, B3b)."""

from __future__ import annotations

import shlex
import sys
from pathlib import Path

import pytest
from browser_helpers import CHROMIUM, SKIP
from playwright.sync_api import Page

sys.path.insert(0, str(Path(__file__).parent))
from test_browser_pages import cli, copy_command, ready, wait_attr  # noqa: E402

pytestmark = pytest.mark.skipif(not CHROMIUM.exists(), reason=SKIP)

MODEL = "qwen2.5-0.5b"
BASE = ("--method", "lora", "--gpus", "2", "--fsdp", "full")


def test_modules_to_save_and_context_parallel_typed_on_the_form_are_trains_answer(page: Page) -> None:
    want = cli("train", MODEL, *BASE, "--modules-to-save", "embed,lm_head", "--context-parallel", "2")
    plain = cli("train", MODEL, *BASE)
    assert want["totals"]["device"]["bytes"] != plain["totals"]["device"]["bytes"]  # the settings move the answer
    ready(page, f"/?model={MODEL}&tab=train&memory=&method=lora&gpus=2&fsdp=full")
    wait_attr(page, "#total", "bytes", plain["totals"]["device"]["bytes"], "train's answer without them")
    page.locator("#train-advanced summary").click()
    save = page.get_by_label("--modules-to-save", exact=True)
    cp = page.get_by_label("--context-parallel", exact=True)
    assert cp.get_attribute("placeholder") == "default 1"  # the CLI's default, as the workload names it
    save.fill("embed,lm_head")
    cp.fill("2")
    wait_attr(page, "#total", "bytes", want["totals"]["device"]["bytes"], "train --modules-to-save --context-parallel")
    assert "(2 set)" in page.locator("#train-advanced summary").inner_text()
    command = copy_command(page)
    assert "--modules-to-save embed,lm_head" in command and "--context-parallel 2" in command, command
    assert cli(*shlex.split(command)[1:])["totals"] == want["totals"]  # the copied command answers the same


def test_a_bad_open_value_is_shown_at_its_box(page: Page) -> None:
    """A value the CLI refuses: its exit-2 line above the results and at the box (problems.js)."""
    ready(page, f"/?model={MODEL}&tab=train&memory=")
    page.locator("#train-advanced summary").click()
    page.get_by_label("--context-parallel", exact=True).fill("x")
    page.wait_for_selector("#problem:not([hidden])")
    # the API names the field the form sent (the CLI says "argument --context-parallel/--cp: ", web_detail)
    assert "field 'context_parallel': cannot read 'x' as a number" in page.locator("#problem").inner_text()
    assert page.get_by_label("--context-parallel", exact=True).get_attribute("aria-invalid") == "true"


def _flags_line(text: str) -> str:
    return next(line for line in text.splitlines() if line.startswith("flags: "))


def test_the_auto_fit_shows_the_flags_line_fit_prints(page: Page) -> None:
    typed = cli("fit", "qwen2.5-7b", "--device", "rtx-4090", "--engine", "llamacpp", "--context", "32k",
                "--ubatch", "2048", "--auto", json_out=False)
    ready(page, "/?model=qwen2.5-7b&engine=vllm&device=rtx-4090&context=32k&memory=")
    box = page.get_by_label("--auto auto-fit -ngl / --n-cpu-moe / context")
    assert not box.is_visible()  # vLLM: no auto-fit
    page.locator("#engine").select_option("llamacpp")
    assert box.is_visible()
    # an engine setting named by its dest, n_ubatch, whose flag is --ubatch (before: a 400, "--n-ubatch")
    page.locator("#engine-settings summary").click()
    page.locator("#n_ubatch").fill("2048")
    box.check()
    page.wait_for_selector("#auto-fit[data-flags]")
    shown = page.locator("#auto-fit-lines").inner_text()
    assert page.locator("#problem").is_hidden(), page.locator("#problem").inner_text()  # infer --ubatch answered
    assert _flags_line(shown) == _flags_line(typed), (shown, typed)
    command = page.locator("#auto-fit").get_attribute("data-command") or ""
    assert command.startswith("llmsizer fit qwen2.5-7b ") and command.endswith(" --auto"), command
    assert _flags_line(cli(*shlex.split(command)[1:], json_out=False)) == _flags_line(typed)
    # fit's own flag of the auto-fit, beside it: in the command and the answer (host RAM checked)
    page.get_by_label("--host-memory", exact=True).fill("64GiB")
    page.wait_for_function("() => (document.querySelector('#auto-fit').dataset.command || '').includes('--host-memory 64GiB')"
                           " && document.querySelector('#auto-fit').dataset.flags")
    command = page.locator("#auto-fit").get_attribute("data-command") or ""
    assert _flags_line(cli(*shlex.split(command)[1:], json_out=False)) == _flags_line(page.locator("#auto-fit-lines").inner_text())
    page.goto(page.url)  # the link keeps it
    page.wait_for_selector("#auto-fit[data-flags]")
    assert box.is_checked() and page.get_by_label("--host-memory", exact=True).input_value() == "64GiB"
    page.locator("#engine").select_option("sglang")  # another engine: hidden, and no auto-fit shown
    page.wait_for_selector("#auto-fit", state="hidden")
