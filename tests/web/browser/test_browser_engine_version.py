"""The calculator's engine "Release" field in a real browser: the fits-on grid's speed is the Python API's (and
`fit`'s) for the stated release, the copied command and the downloaded request carry it (the request, planned,
gives the same speed), and a bad version shows the CLI's one line."""

from __future__ import annotations

import shlex
import sys
from pathlib import Path

import pytest
from browser_helpers import CHROMIUM, SKIP
from playwright.sync_api import Page

from llmsizer import fit

sys.path.insert(0, str(Path(__file__).parent))
from test_browser_pages import cli, copy_command, ready  # noqa: E402
from test_browser_request_yaml import download_yaml  # noqa: E402

pytestmark = pytest.mark.skipif(not CHROMIUM.exists(), reason=SKIP)

QUERY = "model=qwen3-0.6b&engine=vllm&engine_version=0.5&context=640&concurrency=4&output_tokens=128&memory=80GiB"


def test_the_grid_command_and_request_carry_the_version(page: Page, server: str, tmp_path: Path) -> None:
    want = fit("qwen3-0.6b", "h100-sxm", engine="vllm", engine_version="0.5", context=640, output_tokens=128,
               concurrency=4).tokens_per_second_total
    now = fit("qwen3-0.6b", "h100-sxm", engine="vllm", context=640, output_tokens=128,
              concurrency=4).tokens_per_second_total
    assert want is not None and now is not None and want < now  # V0's serial host step, not the current release's
    ready(page, f"/?{QUERY}")
    assert page.get_by_label("Release", exact=True).input_value() == "0.5"
    page.wait_for_selector("#fits-grid[data-answered]", timeout=60_000)
    shown = page.locator("#cell-h100-sxm-1").get_attribute("data-tokens-per-second")
    assert shown is not None and float(shown) == want

    command = copy_command(page)
    assert "--engine-version 0.5" in command
    by_cli = cli(*shlex.split(command)[1:])
    assert any(a["name"] == "engine_version" and a["value"] == "0.5" for a in by_cli["assumptions"])

    text = download_yaml(page, tmp_path).read_text()
    assert '    engine_version: "0.5"' in text, text
    request = tmp_path / "h100.yaml"  # the downloaded service, placed on one H100
    request.write_text(text.replace("      memory: 80GiB  # memory per device", "      device: h100-sxm\n"
                                    "      count: 1"))
    job = cli("plan", str(request))["jobs"][0]
    speed = next(s for s in job["sections"] if s["key"] == "speed")
    assert next(f["value"] for f in speed["figures"] if f["key"] == "tps_total_typical") == want


def test_a_bad_version_shows_the_cli_line(page: Page, server: str) -> None:
    ready(page, f"/?{QUERY.replace('engine_version=0.5', 'engine_version=latest')}")
    page.wait_for_selector("#problem:not([hidden])")
    assert page.locator("#problem").inner_text() == "engine_version must look like 0.19 or 0.19.1, got 'latest'"
