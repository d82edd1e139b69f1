"""The calculator's serving tab in a real browser: the Engine settings section (``llmsizer infer``'s engine flags,
generated from the CLI's parser and specs/workload.py ENGINE_SETTINGS) is collapsed at first; opened, with engine
SGLang picked, ``--mem-fraction-static 0.5`` gives the answer ``infer --engine sglang --mem-fraction-static 0.5
--json`` prints (a separate CLI process): its KV pool, its total and what the workload needs of it; the copied command
carries the flag and answers the same. A setting the chosen engine does not read is hidden and not sent (vLLM: the
answer and the command are vLLM's without it). Before, the serving tab had no engine setting but the release."""

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

KV = "#breakdown tr[data-name='kv_cache'] td.num"  # the KV cache row's bytes (its first number cell)


def _kv(answer: dict) -> int:
    return next(it["bytes"] for it in answer["items"] if it["name"] == "kv_cache")


def test_sglang_mem_fraction_static_picked_on_the_form_is_infers_answer(page: Page) -> None:
    base = ("infer", "qwen2.5-0.5b", "--memory", "24GiB", "--engine", "sglang")
    want = cli(*base, "--mem-fraction-static", "0.5")
    plain = cli(*base)
    assert _kv(want) != _kv(plain)  # the setting changes the answer (SGLang's pool; its total is the whole budget)
    ready(page, "/?model=qwen2.5-0.5b&memory=24GiB")
    section = page.locator("#engine-settings")
    assert section.get_attribute("open") is None  # collapsed by default
    mfs = page.locator("#mem_fraction_static")
    assert not mfs.is_visible()
    section.locator("summary").click()
    page.locator("#engine").select_option("sglang")
    wait_attr(page, KV, "bytes", _kv(plain), "infer --engine sglang's KV pool")
    assert page.locator("#n_gpu_layers").is_hidden()  # llama.cpp's -ngl: not SGLang's
    assert page.locator("#max_num_seqs").is_visible()  # vLLM's and SGLang's
    mfs.fill("0.5")
    wait_attr(page, KV, "bytes", _kv(want), "infer --engine sglang --mem-fraction-static 0.5's KV pool")
    wait_attr(page, "#total", "bytes", want["totals"]["device"]["bytes"], "its total")
    wait_attr(page, "#need-bytes", "bytes", want["details"]["workload_bytes"], "what the workload needs of it")
    assert "(1 set)" in section.locator("summary").inner_text()
    command = copy_command(page)
    assert "--mem-fraction-static 0.5" in command, command
    assert cli(*shlex.split(command)[1:])["items"] == want["items"]  # the copied command answers the same
    # vLLM does not read it: hidden, and neither sent nor in the command
    vllm = cli("infer", "qwen2.5-0.5b", "--memory", "24GiB", "--engine", "vllm")
    page.locator("#engine").select_option("vllm")
    assert mfs.is_hidden()
    wait_attr(page, KV, "bytes", _kv(vllm), "infer --engine vllm's KV pool")
    assert "--mem-fraction-static" not in copy_command(page)
