"""The calculator's serving tab in a real browser: ``infer --tp`` (the tensor-parallel devices of one replica) is a
control beside the Device (web/pages.py ENGINE_MAIN, made as the Engine settings section's rows: ENGINE_COUNTS),
labelled with its flags. With vLLM picked on
24 GiB per device, typing 2 there gives the answer ``infer ... --tp 2 --json`` prints (a separate CLI process): the
weights per device halve, the workload needs less of vLLM's pool, more sequences fit; the copied command carries
``--tp 2`` and answers the same; the fits-on grid still chooses each cell's layout as fit does (a pinned degree would
refuse the 1-device cells). A bad degree shows the CLI's line at the control. llama.cpp does not take it: hidden and
not sent. Before, the serving tab had no tensor-parallel control."""

from __future__ import annotations

import shlex
import sys
from pathlib import Path

import pytest
from browser_helpers import CHROMIUM, SKIP
from playwright.sync_api import Page

sys.path.insert(0, str(Path(__file__).parent))
from test_browser_pages import cli, copy_command, ready, wait_attr, wait_grid  # noqa: E402

pytestmark = pytest.mark.skipif(not CHROMIUM.exists(), reason=SKIP)

WEIGHTS = "#breakdown tr[data-name='weights'] td.num"  # the weights row's bytes per device
BASE = ("infer", "llama-3.1-8b", "--engine", "vllm", "--context", "8k", "--memory", "24GiB", "--max-context",
        "--max-concurrency")


def _weights(answer: dict) -> int:
    return next(it["bytes"] for it in answer["items"] if it["name"] == "weights")


def test_vllm_tp2_typed_on_the_form_is_infers_answer_per_gpu(page: Page) -> None:
    one, two = cli(*BASE), cli(*BASE, "--tp", "2")
    assert _weights(two) < _weights(one)  # the premise: the degree changes the answer per device
    ready(page, "/?model=llama-3.1-8b&context=8k&memory=24GiB")
    section = page.locator("#engine-settings")
    page.get_by_label("Engine").select_option("vllm")
    tp = page.get_by_label("--tp --tensor-parallel transformers, vLLM, SGLang", exact=True)
    assert tp.get_attribute("id") == "tensor_parallel" and tp.is_visible()
    wait_attr(page, WEIGHTS, "bytes", _weights(one), "infer --engine vllm's weights per device")
    tp.fill("2")
    wait_attr(page, WEIGHTS, "bytes", _weights(two), "infer --engine vllm --tp 2's weights per device")
    wait_attr(page, "#need-bytes", "bytes", two["details"]["workload_bytes"], "what the workload needs per device")
    wait_attr(page, "#rev-concurrency b", "value", two["reverse"]["max_concurrency"], "the largest concurrency")
    assert "set)" not in section.locator("summary").inner_text()  # not one of the section's (it is closed)
    command = copy_command(page)
    assert " --tp 2" in command, command
    assert cli(*shlex.split(command)[1:])["items"] == two["items"]  # the copied command answers the same
    wait_grid(page)  # every cell a verdict: the grid leaves the degree to fit, as its caption says
    # a bad degree: the CLI's line, at the control
    tp.fill("0")
    page.wait_for_selector("#problem:not([hidden])")
    # the API names the field the form sent, tp (the CLI says "argument --tp/--tensor-parallel: ", web_detail)
    assert "field 'tp': 0 is out of range" in page.locator("#problem").inner_text()
    assert tp.get_attribute("aria-invalid") == "true"
    tp.fill("2")
    page.wait_for_selector("#problem[hidden]", state="attached")
    # llama.cpp splits layers over --gpus instead: the control is hidden and not sent
    page.get_by_label("Engine").select_option("llamacpp")
    assert tp.is_hidden()
    assert "--tp" not in copy_command(page)
