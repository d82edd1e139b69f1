"""The calculator's form as a first-time user meets it (probe11, defects 3, 5, 6, 9, 10, 12), in a real browser:

- a bad value is answered at its field: the message (the CLI's line in the form's words: its label for the flag, no
  "(see --help)") beside the field the API's 400 names, linked by aria-describedby, the field aria-invalid, and in
  view even for Headroom, the lowest field (before: one box at the top of the results, above the window);
- one edit asks one question: a bad context logs one 400 (before: the fits-on grid scheduled for the previous answer
  asked its 32 fits of the new, bad input);
- each engine setting whose --help states a default names it in its empty box;
- "8 x H200" is said on the serving tab (Device h200, --tp 8 beside it) and answered as ``infer --device h200
  --tp 8`` answers (a separate CLI process);
- the assumptions read as the CLI's text writes them (False, not false);
- /console on a server without an inventory says so without a failed call (the page fixture fails on a 5xx).
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from browser_helpers import CHROMIUM, SKIP
from playwright.sync_api import Page

sys.path.insert(0, str(Path(__file__).parent))
from test_browser_pages import cli, ready, wait_attr  # noqa: E402

from llmsizer.specs import InferenceWorkload  # noqa: E402
from llmsizer.web.api_capacity import NO_INVENTORY  # noqa: E402

pytestmark = pytest.mark.skipif(not CHROMIUM.exists(), reason=SKIP)

START = "/?model=llama-3.1-8b&context=8k&memory=24GiB"


def _answered(page: Page) -> None:
    page.wait_for_function("() => document.getElementById('status').innerText.startsWith('answered')")


def _cli_message(*args: str) -> str:
    import subprocess

    from browser_helpers import cli_env
    r = subprocess.run([sys.executable, "-m", "llmsizer.cli.main", *args], env=cli_env(), capture_output=True,
                       text=True, timeout=60)
    assert r.returncode == 2, r.stderr
    return r.stderr.strip().removeprefix("llmsizer: error: ").removesuffix(" (see --help)")


def test_a_bad_headroom_is_answered_at_the_field_in_view_and_in_the_forms_words(page: Page) -> None:
    ready(page, START)
    _answered(page)
    line = _cli_message("infer", "llama-3.1-8b", "--context", "8k", "--memory", "24GiB", "--headroom", "1.5")
    assert line.startswith("argument --headroom: ")  # the premise (the CLI's line, its " (see --help)" taken off)
    field = page.get_by_label("Headroom", exact=True)
    field.fill("1.5")
    page.wait_for_selector("#headroom-error")
    # the box above the results holds the API's line (the CLI's reason, the field named as the request gave it:
    # web/problems.py web_detail); at the field, the form's words for it
    assert page.locator("#problem").inner_text() == "field 'headroom': " + line.removeprefix("argument --headroom: ")
    said = page.locator("#headroom-error").inner_text()
    assert said == "Headroom (--headroom): " + line.removeprefix("argument --headroom: ").removesuffix(" (see --help)")
    assert field.get_attribute("aria-invalid") == "true"
    assert "headroom-error" in (field.get_attribute("aria-describedby") or "").split()
    box = page.evaluate("() => { const r = document.getElementById('headroom-error').getBoundingClientRect(); "
                        "return [r.top, r.bottom, innerHeight]; }")
    assert 0 <= box[0] and box[1] <= box[2] + 1, f"the message is out of the window: {box}"
    field.fill("0.2")
    page.wait_for_selector("#problem", state="hidden")
    assert page.locator(".field-error").count() == 0 and field.get_attribute("aria-invalid") is None
    assert "headroom-error" not in (field.get_attribute("aria-describedby") or "")


def test_release_and_output_tokens_name_the_forms_labels(page: Page) -> None:
    ready(page, START)
    _answered(page)
    page.get_by_label("Release").fill("abc")
    page.wait_for_selector("#engine_version-error")
    said = page.locator("#engine_version-error").inner_text()
    assert said.startswith("Release (--engine-version) is a vLLM or SGLang setting") and "Engine (--engine) vllm" in said
    page.get_by_label("Release").fill("")
    page.get_by_label("Output tokens").fill("99999")
    page.wait_for_selector("#output_tokens-error")
    line = _cli_message("infer", "llama-3.1-8b", "--context", "8k", "--output-tokens", "99999")
    assert page.locator("#output_tokens-error").inner_text() == line.replace("--output-tokens",
                                                                             "Output tokens (--output-tokens)")


def test_one_bad_edit_asks_one_question(page: Page) -> None:
    bad: list[str] = []
    # the estimates' and checks' 400s (POST); the model box's suggestions ask GET /models?query=, answered 400 where
    # the words typed name no model (model-picker.js), which is the suggestions' answer, not a second estimate
    page.on("response", lambda r: bad.append(r.url) if r.status == 400 and r.request.method == "POST" else None)
    ready(page, START)
    _answered(page)  # the grid for this answer is scheduled 400 ms later: the edit comes before it
    page.get_by_label("Context", exact=True).fill("-5")
    page.wait_for_selector("#problem:not([hidden])")
    page.wait_for_timeout(2500)  # past the grid's schedule and any retry
    assert [u.rsplit("/", 1)[-1] for u in bad] == ["infer"], bad


def test_an_unknown_model_asks_one_question(page: Page) -> None:
    """Typing a model the server cannot read logs one 400, the estimate's (before: the vision check's POST /inspect
    and the estimate each logged one); a known model afterwards is estimated and checked for images again."""
    bad: list[str] = []
    asked: list[str] = []
    # the estimates' and checks' 400s (POST); the model box's suggestions ask GET /models?query=, answered 400 where
    # the words typed name no model (model-picker.js), which is the suggestions' answer, not a second estimate
    page.on("response", lambda r: bad.append(r.url) if r.status == 400 and r.request.method == "POST" else None)
    ready(page, START)
    _answered(page)
    page.on("request", lambda r: asked.append(r.url.rsplit("/", 1)[-1]) if r.method == "POST" else None)
    model = page.get_by_label("Model", exact=True)
    model.fill("")
    model.press_sequentially("no-such-model-xyz")
    page.wait_for_selector("#problem:not([hidden])")
    page.wait_for_timeout(2500)  # past every debounce: a vision check would have answered by now
    assert [u.rsplit("/", 1)[-1] for u in bad] == ["infer"], bad
    assert "inspect" not in asked, asked
    model.fill("")
    model.press_sequentially("qwen2.5-vl-7b-instruct")
    page.wait_for_selector("#media:not([hidden])")  # a readable model: the vision check runs after its answer
    assert [u.rsplit("/", 1)[-1] for u in bad] == ["infer"], bad


def test_empty_engine_settings_name_their_default(page: Page) -> None:
    ready(page, START)
    page.locator("#engine-settings summary").click()
    rows = page.evaluate("""() => [...document.querySelectorAll('#panel-infer input[type=text][data-flag]')].map((c) =>
        [c.name, c.placeholder, document.getElementById(c.id + '-hint')?.textContent || ''])""")
    stated = [(n, p, h) for n, p, h in rows if "(default " in h or "(default: " in h]
    assert len(stated) >= 6, rows
    assert [(n, p) for n, p, _ in stated if not p.startswith("default")] == []
    page.get_by_label("Context", exact=True).fill("")
    context = next(f.default for f in InferenceWorkload.__dataclass_fields__.values() if f.name == "context")
    assert page.get_by_label("Context", exact=True).get_attribute("placeholder") == f"default {context}"


def test_eight_h200_on_the_serving_tab_is_infer_device_tp(page: Page) -> None:
    want = cli("infer", "llama-3.1-70b-instruct", "--engine", "vllm", "--context", "8k", "--concurrency", "16",
               "--device", "h200", "--tp", "8", "--max-context", "--max-concurrency")
    assert want["details"]["fits"] is True
    ready(page, "/?model=llama-3.1-70b-instruct&engine=vllm&context=8k&concurrency=16")
    tp = page.get_by_label("--tp --tensor-parallel transformers, vLLM, SGLang", exact=True)
    assert tp.is_visible()  # beside the device, not in the closed Engine settings section
    page.get_by_label("Device", exact=True).fill("h200")
    tp.fill("8")
    wait_attr(page, "#total", "bytes", want["totals"]["device"]["bytes"], "infer --device h200 --tp 8's total")
    wait_attr(page, "#rev-concurrency b", "value", want["reverse"]["max_concurrency"], "the largest concurrency")
    assert page.locator("#fits").inner_text() == "fits"


def test_assumptions_read_as_the_cli_writes_them(page: Page) -> None:
    """Each value as render/text.py writes it (f"{a.name}={a.value}": Python's str of the value the JSON holds)."""
    args = ("infer", "qwen3-30b-a3b", "--engine", "llamacpp", "--weights", "q4_k_m", "--context", "8k", "--memory",
            "24GiB")
    want = [[a["name"], str(a["value"])] for a in cli(*args)["assumptions"]]
    assert ["kv_unified", "False"] in want  # the premise: a boolean among them
    assert "kv_unified=False" in cli(*args, json_out=False)
    ready(page, "/?model=qwen3-30b-a3b&engine=llamacpp&weights=q4_k_m&context=8k&memory=24GiB")
    _answered(page)
    rows = page.evaluate("""() => [...document.querySelectorAll('#assumptions tbody tr')].map((r) =>
        [r.cells[0].textContent, r.cells[1].textContent.replace(/ \\(default\\)$/, '')])""")
    assert rows == want


def test_console_without_an_inventory_says_so_without_a_failed_call(page: Page) -> None:
    failed: list[str] = []
    page.on("response", lambda r: failed.append(f"{r.status} {r.url}") if r.status >= 400 else None)
    page.goto("/console")
    page.wait_for_selector("#problem:not([hidden])")
    assert page.locator("#problem").inner_text() == NO_INVENTORY
    assert failed == []
