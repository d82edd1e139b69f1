"""The calculator's training tab in a real browser: the Advanced section (the rest of ``llmsizer train``'s
closed-choice flags, generated from the CLI's parser) is collapsed at first; opened, picking ``--loss cut-ce`` gives
the total ``train --loss cut-ce --json`` prints (a separate CLI process), the summary counts the setting, the copied
command carries the flag and answers the same, and a link with the setting opens the section with it picked.
Before, these flags had no control on the page."""

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


def test_an_advanced_setting_picked_on_the_form_is_trains_answer(page: Page) -> None:
    want = cli("train", "qwen2.5-0.5b", "--loss", "cut-ce")
    plain = cli("train", "qwen2.5-0.5b")
    assert want["totals"]["device"]["bytes"] != plain["totals"]["device"]["bytes"]  # the setting changes the answer
    ready(page, "/?model=qwen2.5-0.5b&tab=train&memory=")
    wait_attr(page, "#total", "bytes", plain["totals"]["device"]["bytes"], "train's default answer")
    section = page.locator("#train-advanced")
    assert section.get_attribute("open") is None  # collapsed by default
    loss = page.get_by_label("--loss", exact=True)
    assert not loss.is_visible()
    assert loss.locator("option").first.text_content() == "default (ce)"  # the CLI's default, as its --help names it
    section.locator("summary").click()
    loss.select_option("cut-ce")
    wait_attr(page, "#total", "bytes", want["totals"]["device"]["bytes"], "train --loss cut-ce's total")
    assert "(1 set)" in section.locator("summary").inner_text()
    command = copy_command(page)
    assert "--loss cut-ce" in command, command
    assert cli(*shlex.split(command)[1:])["totals"] == want["totals"]  # the copied command answers the same
    page.goto(page.url)  # the link: the section opens with the setting
    page.wait_for_selector("body[data-ready='1']")
    wait_attr(page, "#total", "bytes", want["totals"]["device"]["bytes"], "the link's answer")
    assert section.get_attribute("open") is not None and loss.input_value() == "cut-ce"


def test_the_framework_select_names_each_profiles_pinned_version(page: Page) -> None:
    """Each option's text is the profile's name and the repository @ commit of frameworks.json's 'pinned' (read raw
    here); its value stays the name `train --framework` takes."""
    import json
    from importlib import resources

    raw = json.loads((resources.files("llmsizer.catalog.data") / "frameworks.json").read_text("utf-8"))
    ready(page, "/?model=qwen2.5-0.5b&tab=train")
    sel = page.locator("#framework")
    for name, p in raw.items():
        if name.startswith("_"):
            continue
        opt = sel.locator(f"option[value='{name}']")
        assert opt.text_content() == (f"{name} ({p['pinned']})" if "pinned" in p else name)


def test_a_chosen_profile_names_its_defaults_in_the_advanced_options(page: Page) -> None:
    """The Advanced section's empty options said the CLI's own default ("default (ce)") even with a framework profile
    chosen, whose default the estimate applies instead: llm-foundry's loss is fused-xentropy (frameworks.json, read
    raw here). With the profile, the empty option says the profile's value and the total is `train --framework
    llm-foundry`'s (a separate CLI process); back to no profile, the CLI's default again."""
    import json
    from importlib import resources

    raw = json.loads((resources.files("llmsizer.catalog.data") / "frameworks.json").read_text("utf-8"))
    foundry_loss = raw["llm-foundry"]["workload"]["loss"]["value"]
    want = cli("train", "qwen2.5-0.5b", "--framework", "llm-foundry")
    ready(page, "/?model=qwen2.5-0.5b&tab=train&memory=")
    loss_default = page.get_by_label("--loss", exact=True).locator("option").first
    assert loss_default.text_content() == "default (ce)"
    page.locator("#framework").select_option("llm-foundry")
    wait_attr(page, "#total", "bytes", want["totals"]["device"]["bytes"], "train --framework llm-foundry's total")
    assert loss_default.text_content() == f"default (llm-foundry: {foundry_loss})"
    # the profile's attention (the main form's select) and its kernel (Advanced), as the estimate applies them
    workload = raw["llm-foundry"]["workload"]
    attention = page.locator("#train_attention option[value='']")
    kernel = page.get_by_label("--attention-kernel", exact=True).locator("option").first
    assert attention.text_content() == f"default (llm-foundry: {workload['attention']['value']})"
    assert kernel.text_content() == f"default (llm-foundry: {workload['attention_kernel']['value']})"
    # an attention the user chooses brings its own kernel (train --framework llm-foundry --attention sdpa:
    # attention_kernel=sdpa (default)), so the profile's kernel is no longer the default
    page.locator("#train_attention").select_option("sdpa")
    assert "llm-foundry" not in (kernel.text_content() or "")
    page.locator("#train_attention").select_option("")
    page.locator("#framework").select_option("")
    assert loss_default.text_content() == "default (ce)"
    assert "llm-foundry" not in (attention.text_content() or "") + (kernel.text_content() or "")
