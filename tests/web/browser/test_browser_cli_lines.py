"""The web pages show the figures the CLI prints, in its words (probe11 defects 1, 2, 7): the calculator's calibrated
range with its coverage and warning (the range the verdict's "calibrated high end" is of), the training Duration
card's every factor, per-micro-step breakdown and calibrated range (so the card's factors give its total), and the
/fits table's rates rounded and labelled as the CLI's. Each is checked against the text a separate ``llmsizer``
process prints for the same input."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest
from browser_helpers import CHROMIUM, ROOT, SKIP, cli_env
from playwright.sync_api import Page

pytestmark = pytest.mark.skipif(not CHROMIUM.exists(), reason=SKIP)


def cli_text(*args: str) -> list[str]:
    r = subprocess.run([sys.executable, "-m", "llmsizer.cli.main", *args], env=cli_env(), cwd=ROOT,
                       capture_output=True, text=True, timeout=60)
    assert r.returncode in (0, 1), r.stderr
    return r.stdout.splitlines()


def shown_lines(page: Page, selector: str, first: str) -> list[str]:
    """The lines a block shows once its first line starts with ``first`` (the page answered)."""
    page.wait_for_function("([s, f]) => document.querySelector(s)?.innerText.startsWith(f)", arg=[selector, first],
                           timeout=30_000)
    return [line for line in page.locator(selector).inner_text().split("\n") if line.strip()]


def test_calculator_shows_the_calibrated_range_the_verdict_cites(page: Page) -> None:
    page.goto("/?model=llama-3.1-8b&context=8k&concurrency=1&memory=24GiB")
    text = cli_text("infer", "llama-3.1-8b", "--context", "8k", "--concurrency", "1", "--memory", "24GiB")
    start = next(i for i, line in enumerate(text) if line.startswith("calibrated range:"))
    shown = shown_lines(page, "#calibrated-range", "calibrated range:")
    assert [s.strip() for s in shown] == [t.strip() for t in text[start:start + len(shown)]]
    assert any(s.strip().startswith("warning") for s in shown)  # this range is less sure than its 90 % target
    high = re.search(r" - ([\d.]+ GiB) per device", shown[0])
    assert high and f"calibrated high end {high.group(1)}" in page.locator("#verdict-text").inner_text()


def test_duration_card_gives_the_cli_breakdown_and_range(page: Page) -> None:
    page.goto("/?tab=train&model=qwen2.5-7b&method=lora&rank=16&micro_batch=4&seq_len=2048"
              "&train_device=a100-sxm-80gb&count=1&tokens=100M")
    text = cli_text("train", "qwen2.5-7b", "--method", "lora", "--rank", "16", "--batch", "4", "--seq", "2048",
                    "--device", "a100-sxm-80gb", "--count", "1", "--tokens", "100M")
    start = next(i for i, line in enumerate(text) if line.startswith("duration:"))
    shown = shown_lines(page, "#duration-lines", "duration:")
    assert [s.strip() for s in shown] == [t.strip() for t in text[start:start + len(shown)]]
    line = shown[0]
    assert "GEMM shape efficiency" in line and "per micro-step" in line and "calibrated range" in line
    # the factors shown give the total shown: tokens / (tokens/s of the breakdown) = the wall clock
    rate = float(re.search(r"-> ([\d,]+) tokens/s", line).group(1).replace(",", ""))  # type: ignore[union-attr]
    hours = float(re.search(r"= ([\d.]+) h wall clock", line).group(1))  # type: ignore[union-attr]
    assert abs(100e6 / rate / 3600 - hours) <= 0.05 + 1e-9
    assert "calibrated range" in page.locator("#duration-card p").first.inner_text()


def test_fits_rates_are_labelled_and_rounded_as_the_cli(page: Page) -> None:
    """One answer, one table: the page's columns are ``models --fits-on``'s, and every cell of every row is the CLI
    table's cell (both made from the same JSON field), but where the page has room the CLI has not: a model that does
    not fit shows its whole reason under its name (the CLI cuts it at 90 characters after "no: "), and a model that
    fits with experts in host memory has that line in its row (the CLI's is "below" the table)."""
    page.goto("/fits?fits_on=rtx-4090&count=1&context=8k&concurrency=1")
    page.wait_for_function("() => document.querySelectorAll('#fits-table tbody tr[data-status=meets]').length > 0",
                           timeout=60_000)
    text = cli_text("models", "--fits-on", "rtx-4090", "--context", "8k", "--concurrency", "1")
    header = next(line for line in text if line.startswith("name "))
    columns = re.split(r"\s{2,}", header)
    shown = page.evaluate("[...document.querySelectorAll('#fits-table thead th')].map((h) => h.textContent)")
    assert shown == columns == ["name", "params", "format", "quality", "engine", "memory/device", "decode tok/s/user",
                                "tok/s total incl. TTFT", "fits"]
    cli_rows = {}  # name -> the CLI table's cells
    for line in text[text.index(header) + 2:]:
        if not line.strip():
            break
        cells = re.split(r"\s{2,}", line.strip())
        if len(cells) != len(columns):
            break  # the count line after the table
        cli_rows[cells[0]] = cells
    # the total names the TTFT it counts, which puts it below the decode rate at one sequence (probe20 C1)
    assert page.locator("#col-user").inner_text() == "decode tok/s/user"
    assert page.locator("#col-total").inner_text() == "tok/s total incl. TTFT"
    assert "TTFT (its prompt's prefill) counted" in page.locator("#rates-note").inner_text()
    page_rows = page.evaluate("""[...document.querySelectorAll('#fits-table tbody tr')].map((r) => [
        r.cells[0].firstChild.textContent, r.querySelector('.reason')?.textContent ?? null,
        ...[...r.cells].slice(1).map((c) => c.textContent)])""")
    assert [r[0] for r in page_rows] == list(cli_rows)  # the same models in the same order
    kinds = set()
    for name, reason, *cells in page_rows:
        want = cli_rows[name]
        assert cells[:-1] == want[1:-1], name  # params ... tok/s total, cell for cell
        fits, cli_fits = cells[-1], want[-1]
        if fits == "yes":
            assert cli_fits == "yes", name
        elif fits == "experts in host memory":
            assert cli_fits == "experts in host memory (below)", name
        else:
            assert fits == "no" and reason and cli_fits == f"no: {reason[:90]}".rstrip(), name
        kinds.add(fits)
    assert kinds == {"yes", "no", "experts in host memory"}, kinds
