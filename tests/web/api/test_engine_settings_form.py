"""The calculator's serving tab offers every engine setting (specs/workload.py ENGINE_SETTINGS: the fields only some
engines read), in a collapsed "Engine settings" section generated from ``llmsizer infer``'s parser (web/pages.py
engine_settings), or this file says why one is not a control of the tab (NOT_APPLICABLE). A setting added to the
CLI and the workload but offered nowhere, a control whose flag ``infer`` does not take, a select whose options are
not the CLI's, or a control shown for engines other than the ones that read it fails here. The settings reach the
estimate: the API answers as ``infer --json`` for the same flags (a separate CLI process), and differently from the
answer without them (so a setting dropped on the way fails).

Before, the serving tab had engine_version only: vLLM --max-num-seqs, SGLang --mem-fraction-static, llama.cpp -ngl
... were reachable through the API field only."""

from __future__ import annotations

import argparse
from html.parser import HTMLParser
from typing import Any

import pytest
from web_api_helpers import command_flags, fed_page, run_cli_json

from llmsizer.specs.workload import ENGINE_SETTINGS

pytest.importorskip("httpx")
pytest.importorskip("fastapi")

# ENGINE_SETTINGS fields that no control of the serving tab offers, and why (web/pages.py NOT_ON_SERVING_TAB; anything
# else must be a control of the tab)
NOT_APPLICABLE: dict[str, str] = {
    "attention": "transformers' attn_implementation: the form's one attention control is the training tab's "
                 "(state.js TRAIN_AS), whose choices hold flex, which serving refuses; the API field takes it"}
# flags of `infer` whose --help says they are one engine's but are not ENGINE_SETTINGS fields: dest -> the section's
# control for it (llama.cpp --gpus, the GPUs -sm / -ts split over; named apart from the training tab's 'gpus'; the
# other engines' --tp, named by its dest apart from the training tab's 'tp': test_web_serving_tensor_parallel.py;
# vLLM's and SGLang's --pp, named by its dest apart from the training tab's 'pp', web/pages.py ENGINE_COUNTS:
# tests/web/browser/test_browser_serving_pipeline_parallel.py; their --dp and --enable-expert-parallel, named by their
# dests, web/pages.py ENGINE_COUNTS: tests/web/browser/test_browser_serving_data_parallel.py)
ENGINE_FLAG_NOT_A_SETTING = {"gpus": "infer_gpus", "tensor_parallel": "tensor_parallel",
                             "pipeline_parallel": "pipeline_parallel", "data_parallel": "data_parallel",
                             "expert_parallel": "expert_parallel"}
ENGINE_WORDS = ("vLLM", "vllm", "SGLang", "sglang", "llama.cpp", "assume vLLM", "paged KV")


class _Form(HTMLParser):
    """Each named control of the page: its tag, its attributes, its options, whether it sits in the serving tab
    panel and in <details id=engine-settings>, and the data-engines of the field <div> around it."""

    def __init__(self) -> None:
        super().__init__()
        self.stack: list[dict[str, str | None]] = []
        self.controls: dict[str, dict[str, Any]] = {}
        self.select: str | None = None
        self.section_open: bool | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = dict(attrs)
        if tag in ("div", "details"):
            self.stack.append(a)
            if a.get("id") == "engine-settings":
                self.section_open = "open" in a
        ids = [d.get("id") for d in self.stack]
        engines = next((d.get("data-engines") for d in reversed(self.stack) if "data-engines" in d), None)
        if tag in ("select", "input") and a.get("name"):
            name = a["name"] or ""
            self.controls[name] = {"tag": tag, "attrs": a, "options": [], "infer": "panel-infer" in ids,
                                   "section": "engine-settings" in ids, "engines": engines}
            if tag == "select":
                self.select = name
        elif tag == "option" and self.select:
            self.controls[self.select]["options"].append(a.get("value") or "")

    def handle_endtag(self, tag: str) -> None:
        if tag in ("div", "details") and self.stack:
            self.stack.pop()
        elif tag == "select":
            self.select = None


def _infer_actions() -> dict[str, argparse.Action]:
    """The flags of `infer` as the CLI parses them, by dest."""
    return {a.dest: a for a in command_flags("infer")}


def _form(client) -> _Form:
    return fed_page(client, _Form())


def test_every_engine_setting_is_a_control_of_the_serving_tab(client) -> None:
    form = _form(client)
    actions = _infer_actions()
    assert set(NOT_APPLICABLE) <= set(ENGINE_SETTINGS)
    missing = [n for n in ENGINE_SETTINGS if n not in NOT_APPLICABLE
               and not (n in form.controls and form.controls[n]["infer"])]
    assert not missing, f"engine settings the serving tab does not offer: {missing}"
    dest_of = {v: k for k, v in ENGINE_FLAG_NOT_A_SETTING.items()}
    for name, c in form.controls.items():
        if not c["section"]:
            continue
        dest = dest_of.get(name, name)
        a = actions[dest]  # a control of the section is an infer flag, named by its dest (the API's field)
        assert c["attrs"]["data-flag"] in a.option_strings, name  # the copied command's flag
        if dest in ENGINE_SETTINGS:
            assert c["engines"] == " ".join(ENGINE_SETTINGS[name]), name  # shown for the engines that read it only
        else:
            assert dest in ENGINE_FLAG_NOT_A_SETTING, name
        if isinstance(a, argparse.BooleanOptionalAction):  # said either way: --kv-unified / --no-kv-unified
            assert c["options"] == ["", "true", "false"], name
        elif a.choices is not None:
            assert c["options"] == ["", *map(str, a.choices)], name
        elif isinstance(a, argparse._StoreTrueAction):
            assert c["attrs"]["type"] == "checkbox", name
        else:
            assert c["tag"] == "input" and c["attrs"]["type"] == "text", name


def test_the_settings_left_off_the_tab_are_the_pages_own_list() -> None:
    from llmsizer.web.pages import NOT_ON_SERVING_TAB
    assert set(NOT_ON_SERVING_TAB) == set(NOT_APPLICABLE)


def test_every_engine_flag_of_infer_is_a_setting_or_said_why_not(client) -> None:
    """A flag whose --help names it one engine's (vLLM, SGLang, llama.cpp) is an ENGINE_SETTINGS field, so the test
    above holds the page to it; the exceptions are named."""
    for dest, a in _infer_actions().items():
        if (a.help or "").startswith(ENGINE_WORDS) and dest not in ENGINE_FLAG_NOT_A_SETTING:
            assert dest in ENGINE_SETTINGS, f"{a.option_strings[0]}: an engine's flag not in ENGINE_SETTINGS"


@pytest.mark.parametrize("engine", ["vllm", "sglang", "transformers"])
def test_the_serving_gpu_count_is_llamacpps_only(client, engine: str) -> None:
    """The section shows llama.cpp's --gpus for llama.cpp only: infer refuses --gpus 2 on every other engine (the CLI
    in a separate process), and takes it on llama.cpp."""
    from web_api_helpers import cli_error_line
    c = _form(client).controls["infer_gpus"]
    assert c["section"] and c["engines"] == "llamacpp" and c["attrs"]["data-flag"] == "--gpus"
    assert "--gpus applies to engine llamacpp" in cli_error_line("infer", "qwen2.5-0.5b", "--engine", engine,
                                                                   "--gpus", "2")
    run_cli_json("infer", "qwen2.5-0.5b", "--engine", "llamacpp", "--gpus", "2", "--tensor-split", "3,1")


def test_the_section_is_collapsed_and_offers_the_request_files_engine_settings(client) -> None:
    from llmsizer.request.fields import INFERENCE
    form = _form(client)
    assert form.section_open is False  # collapsed by default
    taken = [f.name for f in next(f for f in INFERENCE if f.name == "engine_settings").fields]
    assert client.get("/pages/choices.json").json()["request_engine_settings"] == taken
    assert all(form.controls[n]["section"] for n in taken), taken  # each a control of the section
    # the flags the brief named
    assert {"max_num_seqs", "mem_fraction_static", "max_mamba_cache_size", "mamba_full_memory_ratio", "n_gpu_layers",
            "split_mode", "tensor_split", "n_cpu_moe", "n_ubatch", "kv_unified", "allow_long_context"} \
        <= {n for n, c in form.controls.items() if c["section"]}


# the section's fields as the form sends them (text), the flags `infer` takes for them, and the rest of the workload
CASES = [
    ({"mem_fraction_static": "0.5"}, ("--mem-fraction-static", "0.5"),
     {"engine": "sglang", "device": "h100-sxm"}, ("--engine", "sglang", "--device", "h100-sxm")),
    ({"max_num_seqs": "8"}, ("--max-num-seqs", "8"),
     {"engine": "vllm", "device": "h100-sxm"}, ("--engine", "vllm", "--device", "h100-sxm")),
    ({"n_gpu_layers": "10"}, ("--n-gpu-layers", "10"),
     {"engine": "llamacpp", "memory": "24GiB"}, ("--engine", "llamacpp", "--memory", "24GiB")),
    ({"gpus": "2", "tensor_split": "3,1", "split_mode": "layer"},
     ("--gpus", "2", "--tensor-split", "3,1", "--split-mode", "layer"),
     {"engine": "llamacpp", "memory": "24GiB"}, ("--engine", "llamacpp", "--memory", "24GiB")),
    ({"n_cpu_moe": "8", "kv_unified": False}, ("--n-cpu-moe", "8", "--no-kv-unified"),
     {"engine": "llamacpp", "weights": "q4_k_m", "concurrency": "4", "memory": "24GiB"},
     ("--engine", "llamacpp", "--weights", "q4_k_m", "--concurrency", "4", "--memory", "24GiB")),
]


@pytest.mark.parametrize(("setting", "flags", "base", "base_flags"), CASES, ids=[" ".join(c[1]) for c in CASES])
def test_an_engine_setting_is_infers_answer(client, setting: dict[str, Any], flags: tuple[str, ...],
                                            base: dict[str, Any], base_flags: tuple[str, ...]) -> None:
    model = "qwen3-30b-a3b" if "n_cpu_moe" in setting else "qwen2.5-0.5b"  # --n-cpu-moe: an MoE model
    cli = run_cli_json("infer", model, *base_flags, *flags)
    r = client.post("/api/v1/infer", json={"model": model, **base, **setting})
    assert r.status_code == 200, r.text
    assert r.json() == cli
    default = run_cli_json("infer", model, *base_flags)
    # SGLang reserves the whole device whatever --mem-fraction-static says (its total stays): the split differs
    assert cli["items"] != default["items"], f"{setting} did not change infer's answer"
