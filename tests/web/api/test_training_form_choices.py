"""Every choice ``llmsizer train`` accepts on a closed-set flag that the calculator's training tab offers is offered
there, read from the specs' lists (/pages/choices.json), and the tab offers the training choices added this session:
``--attention flex`` (torch FlexAttention, training only), the ``lion-8bit`` optimizer and the ``--tf32`` checkbox.

Before, the training tab had no attention select at all (flex, like sdpa/flash/eager, only through the API field),
and /pages/choices.json's one attention list was serving's (no flex). The truth is the CLI's own ``train`` parser
(``cli.main.build_parser``), whose choices are what the command line accepts. A flex the estimator refuses (a CPU,
serving) is the CLI's one line on the web too, the field written where the CLI writes the flag."""

from __future__ import annotations

import argparse
from html.parser import HTMLParser

import pytest
from web_api_helpers import cli_error_line, run_cli_json

from llmsizer.cli.main import build_parser

pytest.importorskip("httpx")
pytest.importorskip("fastapi")

# the form's names of the training tab's controls that differ from the CLI's dest (state.js TRAIN_AS)
DEST_OF = {"train_attention": "attention", "train_device": "device"}
# the training choices the tab must offer (the brief of this change: flex, lion-8bit, tf32 beside the earlier ones)
MUST_OFFER = {"method", "optimizer", "precision", "tf32", "attention", "grad_checkpointing", "zero", "fsdp", "offload",
              "grad_sync"}


class _Controls(HTMLParser):
    """The named selects and checkboxes of each tab panel: panel id -> {name: data-choices key or 'checkbox'}."""

    def __init__(self) -> None:
        super().__init__()
        self.panel = ""
        self.depth = 0
        self.found: dict[str, dict[str, str]] = {}

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = dict(attrs)
        if tag == "div":
            if a.get("role") == "tabpanel":
                self.panel, self.depth = a["id"] or "", 0
            if self.panel:
                self.depth += 1
        if not self.panel or not a.get("name"):
            return
        if tag == "select":
            self.found.setdefault(self.panel, {})[a["name"] or ""] = a.get("data-choices") or ""
        elif tag == "input" and a.get("type") == "checkbox":
            self.found.setdefault(self.panel, {})[a["name"] or ""] = "checkbox"

    def handle_endtag(self, tag: str) -> None:
        if tag == "div" and self.panel:
            self.depth -= 1
            if self.depth == 0:
                self.panel = ""


def _train_actions() -> dict[str, argparse.Action]:
    p = build_parser(["train"])
    sub = next(a for a in p._actions if isinstance(a, argparse._SubParsersAction))
    return {a.dest: a for a in sub.choices["train"]._actions}


def _panels(client) -> dict[str, dict[str, str]]:
    page = client.get("/")
    assert page.status_code == 200
    c = _Controls()
    c.feed(page.text)
    return c.found


def test_the_training_tab_offers_every_choice_train_accepts(client) -> None:
    choices = client.get("/pages/choices.json").json()["choices"]
    actions = _train_actions()
    train = _panels(client)["panel-train"]
    offered = {DEST_OF.get(name, name): key for name, key in train.items()}
    assert MUST_OFFER <= set(offered), sorted(MUST_OFFER - set(offered))
    for dest, key in offered.items():
        action = actions[dest]
        if key == "checkbox":
            assert isinstance(action, argparse._StoreTrueAction), dest
        elif isinstance(action, argparse.BooleanOptionalAction):  # a select of --x / --no-x (pages.train_advanced)
            continue
        elif action.choices is not None and key:  # zero is a range (numbers.ZERO_STAGE), checked by
            # test_zero_stage_one_rule; a select of the Advanced section has its options in the HTML, from the parser
            # (checked by test_training_advanced_form.py)
            assert choices[key] == [str(c) for c in action.choices], dest
    assert "flex" in choices[offered["attention"]] and "lion-8bit" in choices[offered["optimizer"]]


def test_serving_keeps_its_attention_list(client) -> None:
    c = client.get("/pages/choices.json").json()
    assert c["choices"]["attention"] == ["sdpa", "flash", "eager"]  # specs/workload.py ATTENTION_IMPLS
    assert c["defaults"]["train_attention"] == "sdpa"
    infer_tab = _panels(client)["panel-infer"]
    assert all(key != "train_attention" for key in infer_tab.values())


def test_flex_from_the_form_is_trains_answer(client) -> None:
    # 2 sequences of 4096: the step is device-bound (one sequence's is bound by its kernel launches, which flex
    # does not change), so the attention kernel's time shows in the duration
    flags = ["--attention", "flex", "--seq", "4096", "--batch", "2", "--device", "h100-sxm", "--tokens", "10M"]
    cli = run_cli_json("train", "qwen2.5-0.5b", *flags)
    sdpa = run_cli_json("train", "qwen2.5-0.5b", *flags[2:])
    # the body calculator.js sends for the training tab (state.js apiFields: train_attention -> attention)
    web = client.post("/api/v1/train", json={"model": "qwen2.5-0.5b", "attention": "flex", "seq_len": "4096",
                                             "micro_batch": "2", "device": "h100-sxm", "tokens": "10M"})
    assert web.status_code == 200, web.text
    assert web.json()["totals"] == cli["totals"] and web.json()["duration"] == cli["duration"]
    assert cli["duration"]["seconds"] != sdpa["duration"]["seconds"]  # flex reached the estimate


@pytest.mark.parametrize(("path", "body", "argv"), [
    ("/api/v1/train", {"attention": "flex", "device": "cpu"}, ("train", "--attention", "flex", "--device", "cpu")),
    ("/api/v1/train", {"attention": "flex", "device": "intel-xeon-spr-8ch"},
     ("train", "--attention", "flex", "--device", "intel-xeon-spr-8ch")),
])
def test_a_refused_flex_is_the_clis_line(client, path: str, body: dict, argv: tuple[str, ...]) -> None:
    r = client.post(path, json={"model": "qwen2.5-0.5b", **body})
    assert r.status_code == 400, r.text
    line = cli_error_line(argv[0], "qwen2.5-0.5b", *argv[1:])
    detail = r.json()["detail"]
    # the CLI's line on the web too (test_web_field_errors.py; API.md "Errors")
    assert detail == line, (detail, line)


def test_infer_offers_servings_attention_list_as_the_page_does(client) -> None:
    """`infer --attention` takes serving's list (specs/workload.py ATTENTION_IMPLS, the serving page's): flex, a
    training kernel, is not offered by --help and is refused as fit refuses it (the serving workload's own line: a
    training choice), on the command line and the web alike (the web's detail is the CLI's line, its field the body's key)."""
    from llmsizer.specs.workload import ATTENTION_IMPLS
    assert "flex" not in ATTENTION_IMPLS
    r = client.post("/api/v1/infer", json={"model": "qwen2.5-0.5b", "attention": "flex"})
    assert r.status_code == 400, r.text
    line = cli_error_line("infer", "qwen2.5-0.5b", "--attention", "flex")
    assert line == cli_error_line("fit", "qwen2.5-0.5b", "--device", "h100-sxm", "--attention", "flex")
    assert "is a training choice" in line and r.json()["field"] == "attention"
    assert r.json()["detail"] == line, (r.json()["detail"], line)
