"""probe28's web defects, in real Chromium against a real server, checked against the CLI's own answer (a separate
``llmsizer`` process) for the same input:

- D5: the calculator's Context starts empty (it started at "8k": a bare model on the page was 17.84 GiB where
  ``llmsizer infer llama-3.1-8b`` says 16.70 GiB), its placeholder the default InferenceWorkload states, so a model
  typed alone asks what the CLI asks with no flags.
- N1: a cross-field error (gpus vs tp x pp x context_parallel) marks every field it names aria-invalid, not only
  the first, each described by the one message; fixing one field clears them all.
"""

from __future__ import annotations

import dataclasses
import subprocess
import sys
from pathlib import Path

import pytest
from browser_helpers import CHROMIUM, ROOT, SKIP, cli_env
from playwright.sync_api import Page

from llmsizer.specs.workload import InferenceWorkload

sys.path.insert(0, str(Path(__file__).parent))
from test_browser_pages import cli, ready, wait_attr  # noqa: E402

pytestmark = pytest.mark.skipif(not CHROMIUM.exists(), reason=SKIP)

MODEL = "llama-3.1-8b"


def test_a_model_typed_alone_asks_what_infer_asks_with_no_flags(page: Page) -> None:
    ready(page, f"/?model={MODEL}")
    context = page.get_by_label("Context", exact=True)
    assert context.input_value() == ""  # nothing pre-filled: the CLI's default is asked
    default = next(f.default for f in dataclasses.fields(InferenceWorkload) if f.name == "context")
    assert context.get_attribute("placeholder") == f"default {default}"
    bare = cli("infer", MODEL)
    assert bare["totals"] != cli("infer", MODEL, "--context", "8k")["totals"]  # the old pre-filled 8k differs
    wait_attr(page, "#total", "bytes", bare["totals"]["device"]["bytes"], f"llmsizer infer {MODEL}")


def _cli_line(*args: str) -> str:
    r = subprocess.run([sys.executable, "-m", "llmsizer.cli.main", *args], env=cli_env(), cwd=ROOT,
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 2, r.stderr
    return r.stderr.strip().removeprefix("llmsizer: error: ")


def _invalid(page: Page) -> list[str]:
    return sorted(page.eval_on_selector_all("#calc-form [aria-invalid=true]", "cs => cs.map((c) => c.id)"))


# the fields the message names, each a control of the training tab (tp and pp beside GPUs, context_parallel in its
# Advanced section)
MARKED = ["context_parallel", "gpus", "pp", "tp"]


@pytest.mark.parametrize(("query", "flags", "fix"), [("pp=3", ("--pp", "3"), ("gpus", "6")),
                                                     ("context_parallel=3", ("--context-parallel", "3"),
                                                      ("context_parallel", ""))])
def test_a_cross_field_error_marks_every_field_it_names(page: Page, query: str, flags: tuple[str, ...],
                                                        fix: tuple[str, str]) -> None:
    marked = MARKED
    line = _cli_line("train", MODEL, "--gpus", "8", *flags)
    assert line.startswith("--gpus (8) must be a multiple of --tp x --pp x --context-parallel")
    ready(page, f"/?model={MODEL}&tab=train&gpus=8&{query}")
    page.wait_for_selector("#problem:not([hidden])")
    assert page.locator("#problem").inner_text() == line
    page.wait_for_function("n => document.querySelectorAll('#calc-form [aria-invalid=true]').length === n",
                           arg=len(marked), timeout=15_000)
    assert _invalid(page) == marked  # each field the message names, the ones left at their default too
    message_id = page.locator("#gpus").get_attribute("aria-describedby") or ""
    shown = message_id.split()[-1]
    assert page.locator(f"#{shown}").inner_text()  # the message at the first field ...
    for name in marked:  # ... describes every field it names
        assert shown in (page.locator(f"#{name}").get_attribute("aria-describedby") or "").split()
    page.locator(f"#{fix[0]}").fill(fix[1])  # one field fixed (8 GPUs a multiple again): every mark goes
    page.wait_for_selector("#problem", state="hidden")
    assert _invalid(page) == []
    for name in marked:
        assert shown not in (page.locator(f"#{name}").get_attribute("aria-describedby") or "")
