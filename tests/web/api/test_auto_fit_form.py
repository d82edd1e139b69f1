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
