"""The calculator's training tab in a real browser offers flex (torch FlexAttention, training only) and every other
choice ``llmsizer train`` accepts on the tab's selects, as the CLI's parser lists them; picking flex gives the total
and duration ``train --attention flex`` prints for the same settings, and the copied command says flex. A flex on a
CPU is refused with the CLI's one line. Before, the tab had no attention select (flex only through the API)."""

from __future__ import annotations

import argparse
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
from browser_helpers import CHROMIUM, ROOT, SKIP, cli_env
from playwright.sync_api import Page
from playwright.sync_api import TimeoutError as PlaywrightTimeout

sys.path.insert(0, str(Path(__file__).parent))
from test_browser_pages import cli, copy_command, ready, wait_attr  # noqa: E402

from llmsizer.cli.main import build_parser  # noqa: E402

pytestmark = pytest.mark.skipif(not CHROMIUM.exists(), reason=SKIP)

DEST_OF = {"train_attention": "attention", "train_device": "device"}  # state.js TRAIN_AS


def _train_choices() -> dict[str, list[str]]:
    p = build_parser(["train"])
    sub = next(a for a in p._actions if isinstance(a, argparse._SubParsersAction))
    return {a.dest: [str(c) for c in a.choices] for a in sub.choices["train"]._actions if a.choices is not None}


def test_every_select_of_the_training_tab_offers_what_train_accepts(page: Page) -> None:
    ready(page, "/?model=qwen2.5-0.5b&tab=train")
    accepted = _train_choices()
    shown = page.eval_on_selector_all("#panel-train select[name]", "ss => ss.map((s) => "
                                      "[s.name, [...s.options].map((o) => o.value).filter((v) => v !== '')])")
    offered = {DEST_OF.get(name, name): values for name, values in shown}
    assert "attention" in offered and "flex" in offered["attention"]
    assert "lion-8bit" in offered["optimizer"]
    assert page.locator("#panel-train input[type=checkbox][name=tf32]").count() == 1
    for dest, values in offered.items():
        if dest in accepted:  # zero: a range, not a closed set of names
            assert values == accepted[dest], dest
    # serving keeps its list: no flex offered on the serving tab
    assert "flex" not in page.eval_on_selector_all("#panel-infer option", "os => os.map((o) => o.value)")


def test_flex_picked_on_the_form_is_trains_answer(page: Page) -> None:
    # 2 sequences of 4096: a device-bound step (one sequence's is bound by its kernel launches, which flex leaves)
    flags = ("--seq", "4096", "--batch", "2", "--device", "h100-sxm", "--tokens", "10M")
    want = cli("train", "qwen2.5-0.5b", "--attention", "flex", *flags)
    sdpa = cli("train", "qwen2.5-0.5b", *flags)
    assert want["duration"]["seconds"] != sdpa["duration"]["seconds"]  # flex changes the answer
    ready(page, "/?model=qwen2.5-0.5b&tab=train&seq_len=4096&micro_batch=2&train_device=h100-sxm&tokens=10M&memory=")
    wait_attr(page, "#total", "bytes", sdpa["totals"]["device"]["bytes"], "the default (sdpa) answer")
    page.get_by_label("Attention", exact=True).select_option("flex")
    wait_attr(page, "#duration-card", "seconds", want["duration"]["seconds"], "train --attention flex's duration")
    assert page.locator("#total").get_attribute("data-bytes") == str(want["totals"]["device"]["bytes"])
    command = copy_command(page)
    assert "--attention flex" in command, command
    assert cli(*shlex.split(command)[1:])["totals"] == want["totals"]  # the copied command answers the same


def test_flex_on_a_cpu_is_the_clis_line(page: Page) -> None:
    done = subprocess.run([sys.executable, "-m", "llmsizer.cli.main", "train", "qwen2.5-0.5b", "--attention", "flex",
                           "--device", "cpu"], env=cli_env(), cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert done.returncode == 2
    line = done.stderr.strip().removeprefix("llmsizer: error: ").removesuffix(" (see --help)")
    # the web shows the CLI's own line, its flag included (web/API.md: detail is the CLI's line)
    assert line.startswith("--attention flex: ")
    ready(page, "/?model=qwen2.5-0.5b&tab=train&train_device=cpu&memory=")
    page.get_by_label("Attention", exact=True).select_option("flex")
    # the answer to flex (a problem shown before, to the sdpa default's request, does not count: a warm server can
    # answer that one before flex is picked)
    try:
        page.wait_for_function("(l) => { const p = document.querySelector('#problem'); return !p.hidden && "
                               "p.textContent === l; }", arg=line)
    except PlaywrightTimeout:
        assert page.locator("#problem").inner_text() == line
