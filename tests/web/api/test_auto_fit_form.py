"""The calculator's inference tab asks llama.cpp's auto-fit (``llmsizer fit ... --auto``): a ``--auto`` checkbox made
from fit's own flag (web/pages.py llamacpp_auto), shown for the engine ``fit --auto`` fits only; what the page then
asks (POST /api/v1/fit with ``auto``, llama.cpp's GPUs as fit's ``count``) is ``fit --auto --json``'s answer, byte
for byte (a separate CLI process). Before (audit16 B3b), the auto-fit was reachable through the JSON API only."""

from __future__ import annotations

import argparse
from html.parser import HTMLParser

import pytest
from web_api_helpers import command_flags, fed_page, run_cli

pytest.importorskip("httpx")
pytest.importorskip("fastapi")


class _Auto(HTMLParser):
    """The fit_auto checkbox: its row's attributes, where it sits, its label's and hint's text."""

    def __init__(self) -> None:
        super().__init__()
        self.stack: list[str] = []
        self.row: dict[str, str | None] = {}
        self.box: dict[str, str | None] | None = None
        self.in_panel = False
        self.text = {"label": "", "hint": ""}
        self._in: str | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = dict(attrs)
        if tag == "div":
            self.stack.append(a.get("id") or "")
            if a.get("id") == "fit_auto-field":
                self.row = a
        if tag == "input" and a.get("name") == "fit_auto":
            self.box = a
            self.in_panel = "panel-infer" in self.stack
        elif tag == "label" and a.get("for") == "fit_auto":
            self._in = "label"
        elif tag == "span" and a.get("id") == "fit_auto-hint":
            self._in = "hint"

    def handle_data(self, data: str) -> None:
        if self._in:
            self.text[self._in] += data

    def handle_endtag(self, tag: str) -> None:
        if tag == "div" and self.stack:
            self.stack.pop()
        if (tag, self._in) in (("label", "label"), ("span", "hint")):
            self._in = None


def test_the_serving_tab_has_fits_auto_flag_for_llamacpp_only(client) -> None:
    page = fed_page(client, _Auto())
    assert page.box is not None and page.box["type"] == "checkbox" and page.in_panel
    assert "hidden" in page.row  # shown by the script once llama.cpp is chosen
    auto = next(a for a in command_flags("fit") if a.dest == "auto")
    assert page.text["label"] == "--auto auto-fit -ngl / --n-cpu-moe / context"
    fmt = argparse.HelpFormatter("fit")
    assert page.text["hint"].startswith(fmt._expand_help(auto))  # described by fit's --help
    # the engine it is shown for is the one `fit --auto` fits: the CLI refuses another
    engine = page.row["data-auto-engine"]
    assert run_cli("fit", "qwen2.5-0.5b", "--device", "rtx-4090", "--engine", engine, "--auto").returncode == 0
    refused = run_cli("fit", "qwen2.5-0.5b", "--device", "rtx-4090", "--engine", "vllm", "--auto")
    assert refused.returncode == 2 and "--auto fits llama.cpp" in refused.stderr


def test_the_auto_fit_the_page_asks_is_fits(client) -> None:
    """The page's body: the serving fields (engine settings included), llama.cpp's two GPUs as ``count``, ``auto``."""
    body = {"model": "llama-3.1-8b", "engine": "llamacpp", "context": "16k", "device": "rtx-3090", "count": "2",
            "ubatch": "1024", "auto": True}  # --ubatch: state.js apiFields names it by its flag
    cli = run_cli("fit", "llama-3.1-8b", "--engine", "llamacpp", "--context", "16k", "--device", "rtx-3090",
                  "--count", "2", "--ubatch", "1024", "--auto", "--json")
    assert cli.returncode == 0, cli.stderr
    r = client.post("/api/v1/fit", json=body)
    assert r.status_code == 200 and r.text == cli.stdout
    text = run_cli("fit", "llama-3.1-8b", "--engine", "llamacpp", "--context", "16k", "--device", "rtx-3090",
                   "--count", "2", "--ubatch", "1024", "--auto").stdout
    # the line the page shows, "flags: " + command, is the text answer's flags line
    assert f"flags: {r.json()['command']}" in text.splitlines()
    assert len(r.json()["free"]) == 2  # both GPUs


def test_fits_own_auto_fit_flags_are_boxes_beside_it(client) -> None:
    """fit's flags of the auto-fit (its "llama.cpp auto-fit" group, and --host-device) are rows shown with the
    checkbox, each labelled with its flag; infer has none of them (so the estimate's request never carries them)."""
    from llmsizer.web.pages import AUTO_FIT_GROUP, PAGE_HTML, _command_parser
    page = PAGE_HTML["/"].decode()
    fit = _command_parser("fit")
    group = next(g for g in fit._action_groups if g.title == AUTO_FIT_GROUP)
    infer = {a.dest for a in command_flags("infer")}
    for a in [*group._group_actions, next(a for a in fit._actions if a.dest == "host_device")]:
        name = "fit_auto" if a.dest == "auto" else a.dest
        flag = next(o for o in a.option_strings if o.startswith("--"))
        assert f'id="{name}-field" data-auto-engine="llamacpp" hidden><label for="{name}"><code>{flag}</code>' in page
        assert a.dest not in infer, a.dest


def test_the_auto_fit_with_host_memory_and_host_device_is_fits(client) -> None:
    """An MoE model on a small GPU: the auto-fit keeps experts on the CPU (--n-cpu-moe), checks them against
    --host-memory and times them on --host-device's bandwidth; the page's body answers as the CLI."""
    flags = ["--engine", "llamacpp", "--weights", "q4_k_m", "--context", "32k", "--device", "rtx-5060",
             "--host-memory", "64GiB", "--host-device", "intel-core-i9-13900k", "--auto"]
    cli = run_cli("fit", "qwen3-30b-a3b", *flags, "--json")
    assert cli.returncode == 0, cli.stderr
    body = {"model": "qwen3-30b-a3b", "engine": "llamacpp", "weights": "q4_k_m", "context": "32k",
            "device": "rtx-5060", "host_memory": "64GiB", "host_device": "intel-core-i9-13900k", "auto": True}
    r = client.post("/api/v1/fit", json=body)
    assert r.status_code == 200 and r.text == cli.stdout
    got = r.json()
    assert got["n_cpu_moe"] > 0 and got["host_memory"] == 64 * 2**30 and got["speed"]["tokens_per_second"] > 0
