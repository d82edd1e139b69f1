"""The calculator's serving tab in a real browser: ``infer --dp`` (the data-parallel engine ranks of one replica) and
``--enable-expert-parallel`` are controls beside ``--tp`` / ``--pp`` and the Device (web/pages.py ENGINE_MAIN, made as
the Engine settings section's rows: ENGINE_COUNTS, the engines of specs/workload.py DATA_PARALLEL_ENGINES).
MiniMax-M2.7 on h100 with vLLM, TP 1, DP 8 and expert parallelism set there: the page's total per device and its
weights row are ``infer minimax-m2.7 --device h100 --engine vllm --tp 1 --dp 8 --enable-expert-parallel --json``'s (a
separate CLI process), and the copied command carries the flags and answers the same. llama.cpp and transformers
refuse them: the controls are hidden, disabled and not sent. Before, the serving tab had neither control (the API
took ``dp`` / ``enable_expert_parallel``)."""

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

WEIGHTS = "#breakdown tr[data-name='weights'] td.num"  # the weights row's bytes per device
BASE = ("infer", "minimax-m2.7", "--device", "h100", "--engine", "vllm", "--context", "4k", "--tp", "1")


def _weights(answer: dict) -> int:
    return next(it["bytes"] for it in answer["items"] if it["name"] == "weights")


def test_dp8_ep_set_on_the_form_is_infers_total(page: Page) -> None:
    tp1, ep8 = cli(*BASE), cli(*BASE, "--dp", "8", "--enable-expert-parallel")
    # the premise: DP 8 x EP 8 changes the answer per device (each holds 32 of the 256 routed experts)
    assert _weights(ep8) < _weights(tp1)
    ready(page, "/?model=minimax-m2.7&context=4k&device=h100")
    page.get_by_label("Engine").select_option("vllm")
    tp = page.get_by_label("--tp --tensor-parallel transformers, vLLM, SGLang", exact=True)
    dp = page.get_by_label("--dp --data-parallel vLLM, SGLang", exact=True)
    ep = page.get_by_label("--enable-expert-parallel --expert-parallel vLLM, SGLang", exact=True)
    assert dp.get_attribute("id") == "data_parallel" and dp.is_visible() and dp.is_enabled()
    assert ep.get_attribute("id") == "expert_parallel" and ep.is_visible() and ep.is_enabled()
    tp.fill("1")
    wait_attr(page, "#total", "bytes", tp1["totals"]["device"]["bytes"], "infer --tp 1's total per device")
    ep.check()
    dp.fill("8")
    wait_attr(page, "#total", "bytes", ep8["totals"]["device"]["bytes"],
              "infer --tp 1 --dp 8 --enable-expert-parallel's total per device")
    wait_attr(page, WEIGHTS, "bytes", _weights(ep8), "infer --dp 8 --enable-expert-parallel's weights per device")
    command = copy_command(page)
    assert " --dp 8" in command and " --enable-expert-parallel" in command, command
    assert cli(*shlex.split(command)[1:])["totals"] == ep8["totals"]  # the copied command answers the same
    # the engines that refuse data / expert parallelism: hidden, disabled, not sent
    for engine in ("llamacpp", "transformers"):
        page.get_by_label("Engine").select_option(engine)
        assert dp.is_hidden() and dp.is_disabled() and ep.is_hidden() and ep.is_disabled(), engine
        command = copy_command(page)
        assert "--dp" not in command and "--enable-expert-parallel" not in command, engine
    page.get_by_label("Engine").select_option("sglang")
    assert dp.is_visible() and dp.input_value() == "8" and ep.is_checked()
