"""The calculator's training tab states every open-value flag of ``llmsizer train`` too (a number, a comma list, a
name: --modules-to-save, --context-parallel, --loss-chunks, --fsdp-version, --targets, --ep, --etp,
--virtual-stages, --doc-len, --checkpoint-every, --recompute-modules ...): a text box in the Advanced section
generated from the CLI's own parser (web/pages.py train_advanced), labelled with its flag and described by its
--help, named by its dest. What is typed there reaches the API, which parses it with the CLI's own type: the answer
is what ``train ... --json`` prints (a separate CLI process), and a bad value is the CLI's exit-2 line as a 400.

Before (audit16 items 1b, 1d, 2b, 2d), the Advanced section offered closed-choice flags only: these settings were
reachable through the JSON API and the CLI, not the page."""

from __future__ import annotations

import argparse
from typing import Any

import pytest
from web_api_helpers import TrainPanelParser, cli_error_line, command_flags, fed_page, run_cli_json, web_line

from llmsizer.cli.main import build_parser

pytest.importorskip("httpx")
pytest.importorskip("fastapi")

# the settings the audit found the page could not state (audit16_report.md 1b, 1d, 2b, 2d, gap 5)
NAMED = {"modules_to_save", "context_parallel", "loss_chunks", "fsdp_version", "targets", "ep", "etp",
         "virtual_stages", "doc_len", "checkpoint_every", "recompute_modules"}
# open-value flags of `train` the training tab has no text box for in its Advanced section, and why
MANUAL_MODEL = {"params", "layers", "hidden", "heads", "kv_heads", "head_dim", "intermediate", "vocab"}
FORM_NAME = {"device": "train_device"}  # state.js TRAIN_AS, reversed
# the budget: the form's fieldset both tabs share (state.js COMMON_FIELDS)
BUDGET = {"memory", "headroom"}


class _Boxes(TrainPanelParser):
    """Each named text input of the page with where it sits (the training panel, its Advanced section), each
    label's text by its ``for``, and each hint's text by its id."""

    def __init__(self) -> None:
        super().__init__()
        self.boxes: dict[str, dict[str, Any]] = {}
        self.controls: dict[str, bool] = {}  # every named control: whether it is in the training panel
        self.labels: dict[str, str] = {}
        self.hints: dict[str, str] = {}
        self._label: str | None = None
        self._hint: str | None = None

    def start(self, tag: str, a: dict[str, Any]) -> None:
        if tag in ("input", "select") and a.get("name"):
            self.controls[a["name"] or ""] = self.where()["train"]
        if tag == "input" and a.get("type") == "text" and a.get("name"):
            self.boxes[a["name"] or ""] = {**self.where(), "described": a.get("aria-describedby"),
                                           "placeholder": a.get("placeholder")}
        elif tag == "label" and a.get("for"):
            self._label = a["for"]
            self.labels[self._label] = ""
        elif tag == "span" and (a.get("id") or "").endswith("-hint"):
            self._hint = a["id"]
            self.hints[self._hint or ""] = ""

    def handle_data(self, data: str) -> None:
        if self._label is not None:
            self.labels[self._label] += data
        if self._hint is not None:
            self.hints[self._hint] += data

    def end(self, tag: str) -> None:
        if tag == "label":
            self._label = None
        elif tag == "span":
            self._hint = None


def _open_value(a: argparse.Action) -> bool:
    return a.choices is None and a.nargs != 0


def test_every_open_value_flag_of_train_is_a_box_of_the_training_tab(client) -> None:
    boxes = fed_page(client, _Boxes())
    fmt = build_parser(["train"])._get_formatter()
    actions = {a.dest: a for a in command_flags("train") if _open_value(a)}
    assert MANUAL_MODEL <= set(actions)
    missing, advanced = [], set()
    for dest, a in actions.items():
        name = FORM_NAME.get(dest, dest)
        box = boxes.boxes.get(name)
        if dest in MANUAL_MODEL or dest == "hardware_file":  # a model's fields; a server file (bridge.DENIED)
            assert box is None or not box["train"], dest
            continue
        if dest in BUDGET or dest == "zero":  # the shared budget; zero, a select of its stages (numbers.ZERO_STAGE)
            assert name in boxes.controls, dest
            continue
        if box is None or not box["train"]:
            missing.append(a.option_strings[-1])
            continue
        if not box["advanced"]:
            continue  # the tab's main fieldset (rank, batch, seq ...), written by hand in index.html
        advanced.add(dest)
        flag = next(o for o in a.option_strings if o.startswith("--"))
        assert boxes.labels[name].strip() == flag, (dest, boxes.labels[name])  # labelled with its flag
        assert box["described"] == f"{name}-hint"
        assert boxes.hints[f"{name}-hint"] == fmt._expand_help(a), dest  # described by its --help, verbatim
    assert not missing, f"train flags the training tab does not offer: {missing}"
    assert NAMED <= advanced, sorted(NAMED - advanced)


def test_a_box_names_the_clis_default() -> None:
    """The empty box says the default as the CLI's --help or the workload dataclass names it, as a select's empty
    option does (pages.py default_text)."""
    from llmsizer.web.pages import PAGE_HTML

    page = PAGE_HTML["/"].decode()
    boxes = _Boxes()
    boxes.feed(page)
    # TrainingWorkload's context_parallel = 1, loss_chunks = 1, fsdp_version = 2; --recompute-modules' help
    # "(default core_attn)"; --doc-len's rule is too long for the box: its hint says it
    said = {n: boxes.boxes[n]["placeholder"] for n in ("context_parallel", "loss_chunks", "fsdp_version",
                                                      "recompute_modules", "doc_len", "modules_to_save")}
    assert said == {"context_parallel": "default 1", "loss_chunks": "default 1", "fsdp_version": "default 2",
                    "recompute_modules": "default core_attn", "doc_len": "default (see below)",
                    "modules_to_save": None}


# (the fields the form sends, the flags `train` takes for them, the field under test); the answer without that
# field must differ, so a field dropped on the way fails
MOE = "qwen3-30b-a3b"
CASES = [
    ("qwen2.5-0.5b", {"method": "lora", "modules_to_save": "embed,lm_head"},
     ["--method", "lora", "--modules-to-save", "embed,lm_head"], "modules_to_save"),
    ("qwen2.5-0.5b", {"gpus": "2", "fsdp": "full", "context_parallel": "2"},
     ["--gpus", "2", "--fsdp", "full", "--context-parallel", "2"], "context_parallel"),
    ("qwen2.5-0.5b", {"loss_chunks": "8"}, ["--loss-chunks", "8"], "loss_chunks"),
    ("qwen2.5-0.5b", {"gpus": "2", "fsdp": "full", "fsdp_version": "1"},
     ["--gpus", "2", "--fsdp", "full", "--fsdp-version", "1"], "fsdp_version"),
    ("qwen2.5-0.5b", {"method": "lora", "targets": "q,v"}, ["--method", "lora", "--targets", "q,v"], "targets"),
    (MOE, {"gpus": "8", "zero": "3", "ep": "8"}, ["--gpus", "8", "--zero", "3", "--ep", "8"], "ep"),
    (MOE, {"gpus": "8", "precision": "megatron-bf16", "tp": "2", "sequence_parallel": True, "ep": "4", "etp": "1"},
     ["--gpus", "8", "--precision", "megatron-bf16", "--tp", "2", "--sequence-parallel", "--ep", "4", "--etp", "1"],
     "etp"),
    ("qwen2.5-0.5b", {"gpus": "4", "pp": "2", "virtual_stages": "2", "device": "h100-sxm", "tokens": "10M"},
     ["--gpus", "4", "--pp", "2", "--virtual-stages", "2", "--device", "h100-sxm", "--tokens", "10M"],
     "virtual_stages"),
    ("qwen2.5-0.5b", {"packing": True, "doc_len": "512", "device": "h100-sxm", "tokens": "10M"},
     ["--packing", "--doc-len", "512", "--device", "h100-sxm", "--tokens", "10M"], "doc_len"),
    ("qwen2.5-0.5b", {"grad_checkpointing": "full", "checkpoint_every": "2"},
     ["--grad-checkpointing", "full", "--checkpoint-every", "2"], "checkpoint_every"),
    ("qwen2.5-0.5b", {"grad_checkpointing": "selective", "precision": "megatron-bf16", "recompute_modules": "core_attn,mlp"},
     ["--grad-checkpointing", "selective", "--precision", "megatron-bf16", "--recompute-modules", "core_attn,mlp"],
     "recompute_modules"),
    ("t0_3b", {"seq": "512", "precision": "fp32", "attention": "eager", "target_len": "128"},
     ["--seq", "512", "--precision", "fp32", "--attention", "eager", "--target-len", "128"], "target_len"),
    ("llama-3.1-8b", {"method": "lora", "device": "h100-sxm", "tokens": "10M", "utilization": "0.5"},
     ["--method", "lora", "--device", "h100-sxm", "--tokens", "10M", "--utilization", "0.5"], "utilization"),
    ("llama-3.1-8b", {"method": "lora", "device": "h100-sxm", "tokens": "10M", "train_metric_passes": "2"},
     ["--method", "lora", "--device", "h100-sxm", "--tokens", "10M", "--train-metric-passes", "2"],
     "train_metric_passes"),
]


@pytest.mark.parametrize(("model", "body", "flags", "field"), CASES, ids=[c[3] for c in CASES])
def test_an_open_value_typed_on_the_form_is_trains_answer(client, model: str, body: dict[str, Any], flags: list[str],
                                                         field: str) -> None:
    """The form sends what is typed as text (state.js formValues); the API's answer is ``train --json``'s."""
    cli = run_cli_json("train", model, *flags)
    r = client.post("/api/v1/train", json={"model": model, **body})
    assert r.status_code == 200, r.text
    assert r.json() == cli
    without = client.post("/api/v1/train", json={"model": model, **{k: v for k, v in body.items() if k != field}})
    assert without.status_code == 200, without.text
    moved = ("totals", "duration")
    assert any(without.json().get(k) != cli.get(k) for k in moved), f"{field} did not change train's answer"


def test_alpha_is_trains_answer(client) -> None:
    """--alpha: recorded, no memory effect (its --help): the same answer as the CLI's, with it or without."""
    cli = run_cli_json("train", "qwen2.5-0.5b", "--method", "lora", "--alpha", "64")
    r = client.post("/api/v1/train", json={"model": "qwen2.5-0.5b", "method": "lora", "alpha": "64"})
    assert r.status_code == 200 and r.json() == cli


# a bad value typed in a box: the CLI's exit-2 line (its type's or the workload's), as the 400's detail, naming the
# field (problems.js shows it at that box)
BAD = [
    ({"context_parallel": "x"}, ["--context-parallel", "x"]),
    ({"loss_chunks": "0"}, ["--loss-chunks", "0"]),
    ({"fsdp_version": "3", "gpus": "2", "fsdp": "full"}, ["--fsdp-version", "3", "--gpus", "2", "--fsdp", "full"]),
    ({"method": "lora", "modules_to_save": "embed,bogus"}, ["--method", "lora", "--modules-to-save", "embed,bogus"]),
    ({"modules_to_save": "embed"}, ["--modules-to-save", "embed"]),  # full training trains every module already
    ({"method": "lora", "targets": "q,bogus"}, ["--method", "lora", "--targets", "q,bogus"]),
    ({"grad_checkpointing": "selective", "precision": "megatron-bf16", "recompute_modules": "bogus"},
     ["--grad-checkpointing", "selective", "--precision", "megatron-bf16", "--recompute-modules", "bogus"]),
    ({"ep": "two"}, ["--ep", "two"]),
]


@pytest.mark.parametrize(("body", "flags"), BAD, ids=[" ".join(f) for _, f in BAD])
def test_a_bad_open_value_is_the_clis_line(client, body: dict[str, Any], flags: list[str]) -> None:
    line = cli_error_line("train", "qwen2.5-0.5b", *flags)
    r = client.post("/api/v1/train", json={"model": "qwen2.5-0.5b", **body})
    assert r.status_code == 400, r.text
    problem = r.json()
    assert problem["detail"] == web_line(line, problem["field"])
    bad = next(k for k in body if k in NAMED)
    assert problem["field"] == bad, (problem["field"], line)
