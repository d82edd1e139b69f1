"""The calculator's serving tab in a real browser: ``infer --pp`` (the pipeline stages of one replica) is a control
beside ``--tp`` and the Device (web/pages.py ENGINE_MAIN, made as the Engine settings section's rows: ENGINE_COUNTS,
the engines of specs/workload.py PIPELINE_ENGINES). DeepSeek-R1 on h100 with vLLM, TP 8 and PP 2 typed there: the
page's total per device is ``infer deepseek-r1 --device h100 --engine vllm --tp 8 --pp 2 --json``'s (a separate CLI
process), as is the weights row (the binding stage's), and the copied command carries ``--tp 8 --pp 2`` and answers
the same. llama.cpp and transformers refuse pipeline stages: the control is hidden, disabled and not sent. Before,
the serving tab had no pipeline control (the API took ``pp``)."""

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
BASE = ("infer", "deepseek-r1", "--device", "h100", "--engine", "vllm", "--context", "4k")


def _weights(answer: dict) -> int:
    return next(it["bytes"] for it in answer["items"] if it["name"] == "weights")


def test_tp8_pp2_typed_on_the_form_is_infers_total(page: Page) -> None:
    tp8, staged = cli(*BASE, "--tp", "8"), cli(*BASE, "--tp", "8", "--pp", "2")
    # the premise: the stages change the answer per device (each holds about half the layers)
    assert _weights(staged) < _weights(tp8)
    assert len(staged["details"]["pipeline_stages"]) == 2
    ready(page, "/?model=deepseek-r1&context=4k&device=h100")
    page.get_by_label("Engine").select_option("vllm")
    tp = page.get_by_label("--tp --tensor-parallel transformers, vLLM, SGLang", exact=True)
    pp = page.get_by_label("--pp --pipeline-parallel vLLM, SGLang", exact=True)
    assert pp.get_attribute("id") == "pipeline_parallel" and pp.is_visible() and pp.is_enabled()
    tp.fill("8")
    wait_attr(page, "#total", "bytes", tp8["totals"]["device"]["bytes"], "infer --tp 8's total per device")
    pp.fill("2")
    wait_attr(page, "#total", "bytes", staged["totals"]["device"]["bytes"], "infer --tp 8 --pp 2's total per device")
    wait_attr(page, WEIGHTS, "bytes", _weights(staged), "infer --tp 8 --pp 2's weights per device")
    command = copy_command(page)
    assert " --tp 8" in command and " --pp 2" in command, command
    assert cli(*shlex.split(command)[1:])["totals"] == staged["totals"]  # the copied command answers the same
    # the engines that refuse pipeline stages: hidden, disabled, not sent
    for engine in ("llamacpp", "transformers"):
        page.get_by_label("Engine").select_option(engine)
        assert pp.is_hidden() and pp.is_disabled(), engine
        assert "--pp" not in copy_command(page), engine
    page.get_by_label("Engine").select_option("sglang")
    assert pp.is_visible() and pp.input_value() == "2"
