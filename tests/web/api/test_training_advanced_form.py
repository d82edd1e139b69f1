"""The calculator's training tab offers every closed-choice flag of ``llmsizer train`` (named choices or on/off), the
rest of them in a collapsed "Advanced" section generated from the CLI's own parser (web/pages.py train_advanced), or
this file says why a flag is not a control of the tab (NOT_APPLICABLE). A flag added to the CLI and offered nowhere,
a select whose options are not what ``train`` accepts, or a default named otherwise than the CLI's --help names it
fails here. The settings picked there reach the estimate: the API answers as ``train``/``fit --train`` ``--json``
and as the Python API for the same settings (each compared with the default answer, so a setting dropped on the
way fails).

Before, the tab lacked 32 of these flags (--optimizer-impl, --checkpoint-impl, --loss, --layernorm,
--attention-kernel, --zero-grad, --compile, ...): reachable through the API field only."""

from __future__ import annotations

import argparse
import dataclasses
import re
from typing import Any

import pytest
from web_api_helpers import TrainPanelParser, command_flags, fed_page, run_cli_json

from llmsizer.cli.main import build_parser

pytest.importorskip("httpx")
pytest.importorskip("fastapi")

# closed-choice flags of `train` that no control of the training tab offers, and why (the truth this test holds the
# page to; anything else must be a control of the tab)
NOT_APPLICABLE = {
    "json": "the page always asks for JSON (bridge.DENIED)",
    "verbose": "it changes the text output only (bridge.DENIED)",
    "hub": "the model fieldset's checkbox, shared by both tabs (checked below), not a training setting",
    "tied": "a manual model's field (with --params, --layers ...); the page's model is a name or a dropped file",
    "max_batch": "asked by the page itself whenever a memory or a device is given (Largest that fits)",
    "max_seq": "asked by the page itself whenever a memory or a device is given (Largest that fits)",
}
FORM_NAME = {"attention": "train_attention", "device": "train_device"}  # state.js TRAIN_AS, reversed


class _Form(TrainPanelParser):
    """Each named select (its options: value -> text) and checkbox of the page, with where it sits: in the
    training tab panel, in its <details id=train-advanced>, and whether that details is open."""

    def __init__(self) -> None:
        super().__init__()
        self.controls: dict[str, dict[str, Any]] = {}
        self.select: str | None = None
        self.option: str | None = None
        self.advanced_open: bool | None = None

    def start(self, tag: str, a: dict[str, Any]) -> None:
        if tag in ("div", "details") and a.get("id") == "train-advanced":
            self.advanced_open = "open" in a
        if tag == "select" and a.get("name"):
            self.select = a["name"]
            self.controls[self.select] = {"kind": "select", "options": {}, "fill": a.get("data-choices"),
                                          **self.where()}
        elif tag == "input" and a.get("type") == "checkbox" and a.get("name"):
            self.controls[a["name"] or ""] = {"kind": "checkbox", **self.where()}
        elif tag == "option" and self.select:
            self.option = a.get("value") or ""
            self.controls[self.select]["options"][self.option] = ""

    def handle_data(self, data: str) -> None:
        if self.select and self.option is not None:
            self.controls[self.select]["options"][self.option] += data

    def end(self, tag: str) -> None:
        if tag == "select":
            self.select = None
        elif tag == "option":
            self.option = None


def _train_actions() -> list[argparse.Action]:
    """The flags of `train` as the CLI parses them (the whole CLI's parser, build_parser(all_commands=True))."""
    return command_flags("train")


def _closed(a: argparse.Action) -> bool:
    return a.choices is not None or isinstance(a, (argparse._StoreTrueAction, argparse.BooleanOptionalAction))


def _form(client) -> _Form:
    return fed_page(client, _Form())


def test_every_closed_choice_flag_of_train_is_on_the_training_tab(client) -> None:
    form = _form(client)
    filled = client.get("/pages/choices.json").json()["choices"]  # what the page puts in a data-choices select
    closed = [a for a in _train_actions() if _closed(a)]
    assert {a.dest for a in closed} >= set(NOT_APPLICABLE), "a not-applicable flag that train does not have"
    missing = []
    for a in closed:
        if a.dest in NOT_APPLICABLE:
            continue
        c = form.controls.get(FORM_NAME.get(a.dest, a.dest))
        if c is None or not c["train"]:
            missing.append(a.option_strings[-1])
            continue
        if isinstance(a, argparse.BooleanOptionalAction):  # said either way, its default a rule: a select of both
            assert c["kind"] == "select", a.dest
            assert [v for v in c["options"] if v] == ["true", "false"], a.dest
        elif a.choices is None:
            assert c["kind"] == "checkbox", a.dest
        elif a.dest != "zero":  # zero: a range (numbers.ZERO_STAGE), a select of its stages filled by the page
            assert c["kind"] == "select", a.dest
            offered = filled[c["fill"]] if c["fill"] else [v for v in c["options"] if v]
            assert offered == [str(x) for x in a.choices], a.dest
    assert not missing, f"train flags the training tab does not offer: {missing}"
    assert form.controls["hub"]["kind"] == "checkbox" and not form.controls["hub"]["train"]  # the model's


def test_the_advanced_section_is_collapsed_and_names_the_clis_defaults(client) -> None:
    form = _form(client)
    assert form.advanced_open is False  # collapsed by default
    actions = {a.dest: a for a in _train_actions()}
    fmt = build_parser(["train"])._get_formatter()
    advanced = {n: c for n, c in form.controls.items() if c["advanced"]}
    # the flags the brief named, among the 32 the tab lacked before
    assert {"optimizer_impl", "checkpoint_impl", "loss", "layernorm", "attention_kernel", "zero_grad"} <= set(advanced)
    assert len(advanced) >= 30, sorted(advanced)
    for name, c in advanced.items():
        a = actions[name]
        assert f"--{name.replace('_', '-')}" in a.option_strings, name  # state.js flagOf: the field's flag
        if c["kind"] != "select":
            continue
        empty = c["options"][""]
        # "(default X)" in the CLI's --help, X one of the choices: the page's empty choice says the same X
        said = re.findall(r"\(default:? ([\w+.-]+)\)", fmt._expand_help(a) if a.help else "")
        if said and said[-1] in [str(x) for x in a.choices]:
            assert empty == f"default ({said[-1]})", (name, empty, said)
        else:
            assert empty.startswith("default"), (name, empty)


def test_the_page_names_each_default_once(client) -> None:
    """The page's script names defaults too (ui.js fillChoices, from /pages/choices.json's defaults, serving's first):
    for an Advanced select it must say what the server wrote, training's default; and every id is the page's once
    (a generated control's id is its field name)."""
    page = client.get("/").text
    ids = re.findall(r'\sid="([^"]+)"', page)
    assert len(ids) == len(set(ids)), sorted({i for i in ids if ids.count(i) > 1})
    defaults = client.get("/pages/choices.json").json()["defaults"]
    for name, c in _form(client).controls.items():
        if c["advanced"] and c["kind"] == "select" and defaults.get(name) is not None:
            assert c["options"][""] == f"default ({defaults[name]})", name


def test_the_advanced_fields_are_the_python_apis_and_the_request_files(client) -> None:
    """Each Advanced control is named by the TrainingWorkload field the Python API takes; the request file's
    settings (served in /pages/choices.json for the calculator's YAML) take the same names."""
    from llmsizer import TrainingWorkload
    from llmsizer.request.fields import TRAINING
    fields = {f.name for f in dataclasses.fields(TrainingWorkload)}
    advanced = {n for n, c in _form(client).controls.items() if c["advanced"]}
    assert advanced <= fields, sorted(advanced - fields)
    settings = [f.name for f in next(f for f in TRAINING if f.name == "settings").fields]
    assert client.get("/pages/choices.json").json()["request_settings"] == settings
    assert {"loss", "checkpoint_impl", "layernorm", "attention_kernel", "compile", "zero_grad"} <= set(settings)


# settings of the Advanced section, the flags train takes for them, and the flags of the answer without them
CASES = [
    ({"loss": "cut-ce"}, ("--loss", "cut-ce"), ()),
    ({"zero_grad": "zeros"}, ("--zero-grad", "zeros"), ()),
    ({"compile": True}, ("--compile",), ()),
    ({"metric": "reserved"}, ("--metric", "reserved"), ()),
    ({"optimizer_impl": "for-loop", "device": "h100-sxm", "tokens": "10M"},
     ("--optimizer-impl", "for-loop", "--device", "h100-sxm", "--tokens", "10M"), ("--device", "h100-sxm", "--tokens", "10M")),
]


@pytest.mark.parametrize(("body", "flags", "without"), CASES, ids=[" ".join(f) for _, f, _ in CASES])
def test_an_advanced_setting_is_trains_answer(client, body: dict[str, Any], flags: tuple[str, ...],
                                             without: tuple[str, ...]) -> None:
    model = "qwen2.5-0.5b"
    cli = run_cli_json("train", model, *flags)
    r = client.post("/api/v1/train", json={"model": model, **body})
    assert r.status_code == 200, r.text
    web = r.json()
    assert web == cli
    # the setting reached the estimate: without it the answer differs (for-loop: its optimizer step, in the duration)
    default = run_cli_json("train", model, *without)
    changed = web["duration"]["seconds"] != default["duration"]["seconds"] if web.get("duration") \
        else web["totals"]["device"] != default["totals"]["device"]
    assert changed, f"{body} did not change train's answer"


def test_the_fits_on_grid_cell_is_fit_trains_answer(client) -> None:
    """The calculator's grid asks fit --train with the tab's fields, Advanced ones included."""
    model, body = "qwen2.5-0.5b", {"loss": "cut-ce", "compile": True, "zero_grad": "zeros"}
    cli = run_cli_json("fit", model, "--train", "--device", "l4", "--loss", "cut-ce", "--compile", "--zero-grad", "zeros")
    r = client.post("/api/v1/fit", json={"model": model, "train": True, "device": "l4", **body})
    assert r.status_code == 200, r.text
    assert r.json() == cli
    plain = run_cli_json("fit", model, "--train", "--device", "l4")
    assert cli["memory_per_device"] != plain["memory_per_device"]


def test_the_python_api_gives_the_same_bytes(client) -> None:
    from llmsizer import TrainingWorkload, estimate_training, load_model
    body = {"loss": "cut-ce", "layernorm": "low-precision", "optimizer_impl": "for-loop", "zero_grad": "zeros"}
    est = estimate_training(load_model("qwen2.5-0.5b"), TrainingWorkload(**body))
    web = client.post("/api/v1/train", json={"model": "qwen2.5-0.5b", **body}).json()
    assert web["totals"]["device"]["bytes"] == est.total("device")[1]
