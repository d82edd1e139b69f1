"""probe26's web defects, each in real Chromium against a real server, checked against the CLI's own answer (a
separate ``llmsizer`` process) for the same input:

- D1: the Memory field is empty by default, so a chosen device's own memory is the budget (as ``infer --device
  h100``); a memory typed beside the device is named as overriding the device's in the assumptions.
- D6: a CPU's whole answer is in host RAM: the headline is the host total (``TOTAL host``), not 0 B; the page
  renders the core's ``headline`` (review36 N2), the CLI's first TOTAL row, on a CPU and on a GPU.
- D5: llama.cpp's auto-fit with the Device left at its placeholder sends infer's default device, so its command is
  one ``fit`` answers (fit requires --device).
- D3: at a 375 px viewport no page scrolls sideways (the top nav wraps).
- D4: Escape in the Model box leaves the model (it closes the suggestions only).
- D7: a /compare 400 is marked at its field, the CLI's line beside it.
(D2, the plan's JSON download = the bytes of ``plan -o report.json``: test_browser_pages.py
test_open_the_report_and_download_it.)
"""

from __future__ import annotations

import json
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
from browser_helpers import CHROMIUM, ROOT, SKIP, cli_env
from playwright.sync_api import Browser, Page

sys.path.insert(0, str(Path(__file__).parent))
from test_browser_pages import cli, ready, wait_attr  # noqa: E402

pytestmark = pytest.mark.skipif(not CHROMIUM.exists(), reason=SKIP)

MODEL = "llama-3.1-8b"


def _assumption_row(page: Page, name: str) -> str:
    row = page.locator("#assumptions tbody tr", has=page.locator(f"code:text-is('{name}')"))
    return row.inner_text()


def test_a_chosen_device_is_sized_by_its_own_memory_unless_one_is_typed(page: Page) -> None:
    ready(page, "/")
    memory = page.locator("#memory")
    assert memory.input_value() == ""  # no default memory: it would override any device chosen
    assert "24GiB" in (memory.get_attribute("placeholder") or "")  # an example, not a value
    want = cli("infer", MODEL, "--device", "h100", "--max-context", "--max-concurrency")
    own = cli("hardware", "show", "h100-sxm")["memory_bytes"]  # the catalog's figure for the device
    assert want["details"]["device_memory"] == own
    page.get_by_label("Device", exact=True).fill("h100")
    wait_attr(page, "#total", "bytes", want["totals"]["device"]["bytes"], "infer --device h100")
    assert "given" not in _assumption_row(page, "device_memory")

    # a memory typed beside the device: the answer of infer --device h100 --memory 24GiB, which says it overrides
    typed = cli("infer", MODEL, "--device", "h100", "--memory", "24GiB", "--max-context", "--max-concurrency")
    assert typed["totals"] != want["totals"]
    memory.fill("24GiB")
    wait_attr(page, "#total", "bytes", typed["totals"]["device"]["bytes"], "infer --device h100 --memory 24GiB")
    row = _assumption_row(page, "device_memory")
    assert "overrides h100-sxm's own" in row, row

    # the training tab: the device's memory is the budget, as train --device h100
    memory.fill("")
    page.get_by_role("tab", name="Training").click()
    page.get_by_label("Device or instance").fill("h100")
    trained = cli("train", MODEL, "--device", "h100", "--max-batch", "--max-seq")
    wait_attr(page, "#total", "bytes", trained["totals"]["device"]["bytes"], "train --device h100")
    assert page.locator("#verdict-text").inner_text() == trained["details"]["verdict"]
    assert "24.00 GiB" not in page.locator("#verdict-text").inner_text()


HEADLINES = [  # (the CLI's options, the page's link): a CPU (host only) and llama.cpp on a GPU (device + host)
    (("--device", "cpu", "--weights", "Q4_K_M", "--context", "4096", "--memory", "32GB"),
     "device=cpu&weights=Q4_K_M&context=4096&memory=32GB"),
    (("--device", "rtx-4090", "--engine", "llama.cpp", "--weights", "Q4_K_M"),
     "device=rtx-4090&engine=llamacpp&weights=Q4_K_M"),
]


@pytest.mark.parametrize(("opts", "link"), HEADLINES, ids=["cpu", "gpu-llamacpp"])
def test_the_headline_is_the_clis_first_total_row(page: Page, opts: tuple[str, ...], link: str) -> None:
    """review36 N2: the big number is the core's ``headline`` (Estimate.headline), rendered as is: the CLI's first
    TOTAL row (its words, expected bytes and range), the host total on a CPU (D6: not 0 B), the device total on a GPU
    even where llama.cpp keeps some bytes on the host."""
    args = ("infer", MODEL, *opts, "--max-context", "--max-concurrency")
    text = cli(*args, json_out=False)
    row = next(line for line in text.splitlines() if line.startswith("TOTAL "))
    m = re.fullmatch(r"TOTAL (.+?)\s{2,}(device|host)\s+(\S+ \S+)\s+(\S+ \S+ - \S+ \S+)", row)
    assert m is not None, row
    scope, loc, expected, rng = m.groups()
    want = cli(*args)
    same = {k: want["totals"][loc][k] for k in ("low", "bytes", "high")}
    assert want["headline"] == {"location": loc, "scope": scope, **same}
    ready(page, f"/?model={MODEL}&{link}")
    wait_attr(page, "#total", "bytes", want["headline"]["bytes"], f"the first TOTAL row of {' '.join(args)}")
    assert page.locator("#total").inner_text() == expected
    assert page.locator("#total-scope").inner_text() == f"{scope}, expected"
    assert page.locator("#total-range").inner_text() == f"range {rng.replace(' - ', ' – ')}"


def test_the_auto_fit_with_the_device_at_its_placeholder_is_a_command_fit_answers(page: Page) -> None:
    ready(page, "/?model=qwen3-30b-a3b&engine=llamacpp&weights=Q4_K_M&context=16384&memory=12GiB&fit_auto=1")
    assert page.get_by_label("Device", exact=True).input_value() == ""
    page.wait_for_selector("#auto-fit[data-flags]")
    assert page.locator("#auto-fit-problem").count() == 0
    command = page.locator("#auto-fit").get_attribute("data-command") or ""
    assert "--device gpu" in command, command
    r = subprocess.run([sys.executable, "-m", "llmsizer.cli.main", *shlex.split(command)[1:], "--json"],
                       env=cli_env(), cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert r.returncode in (0, 1), r.stderr  # a runnable command (before: exit 2, --device required)
    assert page.locator("#auto-fit").get_attribute("data-flags") == json.loads(r.stdout)["command"]


@pytest.mark.parametrize("path", ["/", "/fits", "/compare", "/request", "/console"])
def test_no_page_scrolls_sideways_at_375_px(browser: Browser, server: str, path: str) -> None:
    ctx = browser.new_context(viewport={"width": 375, "height": 800}, base_url=server)
    try:
        pg = ctx.new_page()
        pg.goto(path)
        pg.wait_for_load_state("networkidle")
        nav = pg.locator("header.top nav")
        right = nav.evaluate("n => Math.max(...[...n.querySelectorAll('a')].map((a) => a.getBoundingClientRect().right))")
        assert right <= 375, f"{path}: the nav's last link ends at {right} px"
        width = pg.evaluate("document.documentElement.scrollWidth")
        assert width <= 375, f"{path}: the page is {width} px wide at a 375 px viewport"
    finally:
        ctx.close()


def test_escape_in_the_model_box_keeps_the_model(page: Page) -> None:
    ready(page, "/?model=llama-3.1-8b&tab=train&method=lora&memory=24GiB")
    model = page.get_by_label("Model", exact=True)
    model.fill("")
    model.press_sequentially("qwen2.5-7b-instruct")
    model.press("Escape")
    assert model.input_value() == "qwen2.5-7b-instruct"
    want = cli("train", "qwen2.5-7b-instruct", "--method", "lora", "--memory", "24GiB", "--max-batch", "--max-seq")
    wait_attr(page, "#total", "bytes", want["totals"]["device"]["bytes"], "the model kept after Escape")


def test_a_compare_error_is_marked_at_its_field(page: Page) -> None:
    page.goto("/compare?model=llama-3.1-8b&context=8k&concurrency=8&top=12")
    page.wait_for_selector("#chosen-title")
    r = subprocess.run([sys.executable, "-m", "llmsizer.cli.main", "recommend", MODEL, "--context", "8k",
                        "--concurrency", "8", "--max-cost-per-hour", "-3"],
                       env=cli_env(), cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert r.returncode == 2
    line = r.stderr.strip().removeprefix("llmsizer: error: ").removesuffix(" (see --help)")
    box = page.get_by_label("Max $ per hour")
    box.fill("-3")
    page.wait_for_selector("#max_cost_per_hour[aria-invalid='true']")
    # the CLI's reason word for word; the CLI names its flag, the web the field (web/problems.py web_detail)
    assert line.startswith("argument --max-cost-per-hour: ")
    assert page.locator("#problem").inner_text().startswith(
        "field 'max_cost_per_hour': " + line.removeprefix("argument --max-cost-per-hour: "))
    beside = page.locator("#max_cost_per_hour-error")
    assert beside.inner_text() == page.locator("#problem").inner_text()
    assert "max_cost_per_hour-error" in (box.get_attribute("aria-describedby") or "")
    box.fill("")  # a good value again: the mark goes
    page.wait_for_selector("#max_cost_per_hour:not([aria-invalid])")
    assert page.locator("#max_cost_per_hour-error").count() == 0


def test_a_refused_value_leaves_no_verdict_badge_on_the_previous_answer(page: Page) -> None:
    """C5: after a value the CLI refuses, the previous answer stays dimmed, without its fits badge (it is not the
    verdict of what the form now says); the next good value brings the badge back."""
    ready(page, f"/?model={MODEL}&context=8k&memory=24GiB")
    page.wait_for_selector("#fits")
    assert page.locator("#fits").is_visible()
    page.locator("#memory").fill("24 parsecs")
    page.wait_for_selector("#problem:not([hidden])")
    assert not page.locator("#fits").is_visible()
    page.locator("#memory").fill("24GiB")
    page.wait_for_selector("#problem", state="hidden")
    assert page.locator("#fits").is_visible()


def test_compare_dims_the_previous_options_while_it_searches(page: Page) -> None:
    """C5: the options on show answer the previous input while the catalog is searched for the new one."""
    page.goto("/compare?model=llama-3.1-8b&context=8k&concurrency=8&top=12")
    page.wait_for_selector("#chosen-title")
    page.wait_for_selector("#results:not(.stale)")
    # the class may come and go between two polls of a selector wait: a mutation observer sees every change
    page.evaluate("""() => { window.staleSeen = false; const r = document.getElementById("results");
        new MutationObserver(() => { if (r.classList.contains("stale")) window.staleSeen = true; })
            .observe(r, { attributes: true, attributeFilter: ["class"] }); }""")
    page.get_by_label("Concurrency").fill("4")
    page.wait_for_function("() => window.staleSeen === true")
    page.wait_for_selector("#results:not(.stale)", timeout=60_000)
