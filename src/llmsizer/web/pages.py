"""The pages of ``llmsizer serve`` (issue #13): the calculator (``/``), compare (``/compare``), what fits (``/fits``) and request
(``/request``) pages and their static files, as a FastAPI ``router`` the app includes.

The pages are plain HTML, CSS and JavaScript modules shipped in the package: no build step, no CDN, nothing fetched
from another origin, no inline script or style (the app's Content-Security-Policy forbids them). Every number a page
shows comes from the JSON API (``/api/v1/...``), which renders the one estimator.

Each page is its ``<main>`` content in ``web/templates/`` put into the one ``layout.html`` (head, skip link, nav) at
import: the head and the nav have one copy. A body may name a shared part on a line of its own,
``<!-- include NAME.html -->`` (the model fieldset of the calculator and compare pages). CSS, JavaScript and icons
are served as they are from ``web/static/``.

No server-side path is built from user input: the static files are read once, at import, into a table keyed by
their relative name; a request names a key of that table or gets 404.
"""

from __future__ import annotations

import argparse
import dataclasses
import html
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

from fastapi import APIRouter, HTTPException
from fastapi.responses import JSONResponse, Response

from ..catalog.frameworks import framework_profiles
from ..cli.main import build_parser
from ..estimate.device import ENGINE_DEFAULT_NAME
from ..estimate.inference.compose import engine_kv_dtypes
from ..estimate.verdict import DEFAULT_HEADROOM, LLAMACPP_FIT_TARGET
from ..formulas.weight_formats import format_names
from ..numbers import ZERO_STAGE
from ..request.fields import INFERENCE as REQUEST_INFERENCE
from ..request.fields import TRAINING as REQUEST_TRAINING
from ..specs import ATTENTION_IMPLS, DEVICES, DTYPES, ENGINES, InferenceWorkload, TrainingWorkload
from ..specs.training import (
    FSDP_MODES,
    GRAD_CHECKPOINTING,
    GRAD_SYNC,
    METHODS,
    OFFLOAD,
    OPTIMIZERS,
    PRECISIONS,
    TRAIN_ATTENTION,
    default_grad_checkpointing,
)
from ..specs.workload import (
    DATA_PARALLEL_ENGINES,
    DEFAULT_OUTPUT_TOKENS,
    ENGINE_NAMES,
    ENGINE_SETTINGS,
    PIPELINE_ENGINES,
)
from .bridge import DENIED

STATIC = Path(__file__).resolve().parent / "static"

MEDIA_TYPES = {
    ".html": "text/html; charset=utf-8",
    ".css": "text/css; charset=utf-8",
    ".js": "text/javascript; charset=utf-8",
    ".svg": "image/svg+xml",
    ".png": "image/png",
    ".ico": "image/x-icon",
    ".txt": "text/plain; charset=utf-8",
}

TEMPLATES = Path(__file__).resolve().parent / "templates"


@dataclasses.dataclass(frozen=True)
class Page:
    """One page: its body (a file under ``templates/``), its title, its ES module under ``static/js/``, where the
    skip link goes, and the tagline under the nav."""

    body: str
    title: str
    script: str
    tagline: str
    skip_to: str = "results"
    skip_text: str = "Skip to the results"
    main_id: str = ""


# the pages: URL path -> Page
PAGES = {
    "/": Page("index.html", "calculator", "calculator.js",
              "every number with its formula, source and assumptions"),
    "/compare": Page("compare.html", "compare hardware", "compare.js",
                     "which hardware, how many, which format, at what cost"),
    "/request": Page("request.html", "request", "request.js",
                     "a resource request, checked line by line, planned, reported",
                     skip_to="request-text", skip_text="Skip to the editor"),
    "/fits": Page("fits.html", "what fits my machine", "fits.js",
                  "which catalog models fit this hardware, at which format and speed"),
    "/console": Page("console.html", "provider console", "console.js",
                     "the provider's inventory, bookings and audit log",
                     skip_to="console-main", skip_text="Skip to the console", main_id="console-main"),
}

# the nav of every page, in order: (URL path, label); the same links on every page (the console too: without an
# inventory it says how to start a server with one, GET /api/v1/capacity/status)
NAV = (("/", "Calculator"), ("/compare", "Compare hardware"), ("/fits", "What fits my machine"),
       ("/request", "Request"), ("/console", "Console"), ("/api/v1/openapi.json", "API"))

_INCLUDE = re.compile(r"^<!-- include ([a-z0-9-]+\.html) -->$", re.MULTILINE)
_GENERATE = re.compile(r"^ *<!-- generate ([a-z0-9-]+) -->$", re.MULTILINE)
_NAME = re.compile(r'\sname="([a-z0-9_]+)"')

# ------------------------------------------------------------------ the training tab's Advanced section (generated)

# the training tab's controls named apart from the serving tab's (one form holds both; state.js TRAIN_AS): flag dest
# -> form name
TRAIN_FORM_NAME = {"attention": "train_attention", "device": "train_device"}
# closed-choice flags of `train` the page itself sets: the reverse questions, asked whenever a budget is given (the
# calculator's "Largest that fits" cards)
PAGE_ASKS = {"max_batch": "the page asks it whenever a memory or a device is given (Largest that fits)",
             "max_seq": "the page asks it whenever a memory or a device is given (Largest that fits)"}
# closed-choice flags of `train` that are not workload settings of the form
NOT_A_SETTING = {"tied": "a manual model's field (with --params, --layers ...): the page's model is a catalog name, "
                         "Hub id or a dropped config.json / GGUF / safetensors header, which state it"}
# the title of the parser's group of a manual model's fields (cli/common.py): a model, not a workload setting
MANUAL_MODEL_GROUP = "manual model"
_DEFAULT = re.compile(r"\(default:? ([^()]*(?:\([^()]*\)[^()]*)*)\)|default: ([^()]*)$")


def _command_parser(command: str) -> argparse.ArgumentParser:
    """The parser of ``llmsizer COMMAND``: the one home of each of its flags, their choices and their help."""
    top = build_parser([command])
    sub = next(a for a in top._actions if isinstance(a, argparse._SubParsersAction))
    return sub.choices[command]


def _train_parser() -> argparse.ArgumentParser:
    return _command_parser("train")


def _options(choices: Any) -> str:
    """The <option>s of a select offering ``choices`` (after its empty default option)."""
    return "".join(f'<option value="{html.escape(str(c))}">{html.escape(str(c))}</option>' for c in choices)


def _details(sid: str, summary: str, legend: str, rows: list[str]) -> str:
    """A collapsed <details> section of generated form ``rows`` (closed by default; ``summary`` is HTML)."""
    body = "\n".join(f"      {r}" for r in rows)
    return (f'    <details id="{sid}">\n      <summary>{summary} <span id="{sid}-set"></span></summary>\n'
            f'      <fieldset>\n      <legend class="sr-only">{legend}</legend>\n{body}\n      </fieldset>\n'
            "    </details>")


def closed_choice(action: argparse.Action) -> bool:
    """A flag with a closed set of values: named choices, or on/off."""
    return action.choices is not None or isinstance(action, (argparse._StoreTrueAction, argparse.BooleanOptionalAction))


def default_text(field: str, help_text: str) -> str:
    """What a setting's empty choice says: the default as the CLI names it, the workload dataclass's value (the one
    `fillChoices` names too), else the rule its --help states ('(default ...)'), else plain 'default'."""
    d = next((f.default for f in dataclasses.fields(TrainingWorkload) if f.name == field), None)
    if d is not None and d is not dataclasses.MISSING and not isinstance(d, (tuple, bool)):
        return f"default ({d})"
    found = _DEFAULT.findall(help_text)
    phrase = next((a or b for a, b in reversed(found)), "")
    phrase = phrase.strip()
    # a long rule stays in the hint under the select, which states it in full
    return "default" if not phrase else f"default ({phrase})" if len(phrase) <= 24 else "default (see below)"


def manual_model_flags(p: argparse.ArgumentParser) -> set[str]:
    """The dests of the parser's manual-model group (--params, --layers ... --tied): a model's fields, not workload
    settings (NOT_A_SETTING's reason), read from the parser's own group so a field added there stays off the form."""
    return {a.dest for g in p._action_groups if (g.title or "").startswith(MANUAL_MODEL_GROUP) for a in g._group_actions}


def train_advanced(names_on_page: set[str]) -> tuple[list[argparse.Action], str]:
    """The flags of ``llmsizer train`` that the page has no control for (``names_on_page``) and that are settings,
    in the parser's order, and the HTML of the Advanced section offering them: a select of the parser's choices
    (the empty option names the CLI's default), a checkbox for an on/off flag, else a text input for an open value
    (a number, a comma list, a name: the API parses it with the CLI's own type, so a bad value gets the CLI's
    one-line message), each labelled with its flag and described by its --help, each named by its dest, the field
    the API, the request file's settings and the Python API take. Generated at import, so a flag added to the CLI
    is offered here too."""
    p = _train_parser()
    fmt = p._get_formatter()
    manual = manual_model_flags(p)
    actions = [a for a in p._actions if a.option_strings and (closed_choice(a) or a.nargs != 0)
               and TRAIN_FORM_NAME.get(a.dest, a.dest) not in names_on_page
               and a.dest not in DENIED and a.dest not in PAGE_ASKS and a.dest not in NOT_A_SETTING
               and a.dest not in manual]
    rows = []
    for a in actions:
        name, flag = a.dest, next(o for o in a.option_strings if o.startswith("--"))
        if "--" + name.replace("_", "-") not in a.option_strings:  # state.js flagOf writes the field's flag so
            raise ValueError(f"train {flag}: its dest {name} is not its flag's name; give state.js FLAG a row")
        text = fmt._expand_help(a) if a.help else ""
        hint = f'<span class="hint" id="{name}-hint">{html.escape(text)}</span>' if text else ""
        described = f' aria-describedby="{name}-hint"' if text else ""
        label = f'<label for="{name}"><code>{html.escape(flag)}</code></label>'
        if isinstance(a, argparse.BooleanOptionalAction):  # said either way, its default a rule: --x / --no-x
            no = next(o for o in a.option_strings if o.startswith("--no-"))
            rows.append(f'<div class="field">{label}<select id="{name}" name="{name}"{described} data-boolean="">'
                        f'<option value="">{html.escape(default_text(name, text))}</option>'
                        f'<option value="true">{html.escape(flag)}</option>'
                        f'<option value="false">{html.escape(no)}</option></select>{hint}</div>')
            continue
        if a.choices is None and a.nargs == 0:  # on/off
            note = f' <span class="small muted" id="{name}-hint">{html.escape(text)}</span>' if text else ""
            rows.append(f'<div class="field check">{label}<span><input type="checkbox" id="{name}" name="{name}"'
                        f"{described}>{note}</span></div>")
            continue
        if a.choices is None:  # an open value: a number, a comma list, a name
            attrs = f'id="{name}" name="{name}"{described}'
            rows.append(f'<div class="field">{label}{text_input(attrs, default_text(name, text))}{hint}</div>')
            continue
        rows.append(f'<div class="field">{label}<select id="{name}" name="{name}"{described}><option value="">'
                    f"{html.escape(default_text(name, text))}</option>{_options(a.choices)}</select>{hint}</div>")
    section = _details("train-advanced", f"Advanced: {len(actions)} more <code>llmsizer train</code> settings "
                       "(empty: the CLI's default)", "Advanced training settings", rows)
    return actions, section


# ------------------------------------------------------------------ the serving tab's Engine settings section (generated)

# flags of `infer` that are one engine's but not ENGINE_SETTINGS fields, with the engines that read them: --gpus, the
# GPUs llama.cpp splits one model over (-sm / -ts split over them); specs/workload.py refuses gpus > 1 on another
# engine (its llamacpp_only list: vLLM and SGLang shard with --tp); --tp, the tensor-parallel devices of one replica,
# which every engine but llama.cpp shards the weights over (estimate/inference/compose.py refuses tensor_parallel > 1
# on llama.cpp: it splits layers or rows over --gpus instead); --pp, the pipeline stages of one replica, which vLLM and
# SGLang run (specs/workload.py PIPELINE_ENGINES, refuse_pipeline_engine: not llama.cpp, not transformers); --dp, the
# data-parallel engine ranks of one replica, and --enable-expert-parallel, an MoE's routed experts whole per device
# over dp x tp devices, which vLLM and SGLang run (specs/workload.py DATA_PARALLEL_ENGINES, refuse_data_parallel)
ENGINE_COUNTS = {"gpus": ("llamacpp",), "tensor_parallel": tuple(e for e in ENGINES if e != "llamacpp"),
                 "pipeline_parallel": PIPELINE_ENGINES, "data_parallel": DATA_PARALLEL_ENGINES,
                 "expert_parallel": DATA_PARALLEL_ENGINES}
# ENGINE_SETTINGS fields the serving tab does not offer: attention (transformers' attn_implementation; the form's one
# attention control is the training tab's, state.js TRAIN_AS, whose choices hold flex, which serving refuses). The
# API, the CLI and Python take it, and refuse it on an engine that does not read it (request files do not: a serving
# job's engine_settings have no attention field, request/spec.py EngineSettings; request/fields.py's attention is
# the training job's).
NOT_ON_SERVING_TAB = ("attention",)
# the serving tab's controls named apart from the training tab's (one form holds both; state.js SERVE_AS): flag dest
# -> form name
SERVE_FORM_NAME = {"gpus": "infer_gpus"}
# engine flags the serving tab shows in its main fieldset, beside the device, not in the Engine settings section:
# --tp, so "8 x H200" is said where the device is (`infer --device h200 --tp 8`), and --pp beside it (a replica of
# tp x pp devices: `infer --device h100 --tp 8 --pp 2` is 16 x H100), and --dp / --enable-expert-parallel (a replica
# of tp x pp x dp devices: `infer --device h100 --dp 8 --enable-expert-parallel` is 8 x H100, experts split 8 ways)
ENGINE_MAIN = ("tensor_parallel", "pipeline_parallel", "data_parallel", "expert_parallel")


def _infer_parser() -> argparse.ArgumentParser:
    return _command_parser("infer")


def engine_settings(names_on_page: set[str]) -> tuple[list[argparse.Action], str]:
    """The flags of ``llmsizer infer`` whose field is an engine setting (specs/workload.py ``ENGINE_SETTINGS``, the
    one table of which engine reads what) and that the page has no control for (``names_on_page``), in the parser's
    order (and ENGINE_COUNTS: llama.cpp's --gpus, which -sm / -ts split over, named ``infer_gpus`` apart from the
    training tab's ``gpus``; the other engines' --tp, named by its dest ``tensor_parallel`` apart from the training
    tab's ``tp``), and the HTML of the serving tab's Engine settings section offering them: each labelled
    with its flags
    and the engines that read it (``data-engines``; the calculator shows and sends a control only for those
    engines), described by its --help, named by its dest (the field the API, the request file and the Python API
    take), with the flag the copied command writes (``data-flag``). A select of the parser's choices, a checkbox for
    an on/off flag, a select of the flag and its ``--no-`` form for a flag that is said either way, else a text
    input (the API parses it as the CLI does). Generated at import, so a setting added to the CLI is offered here."""
    p = _infer_parser()
    owned = {**ENGINE_COUNTS, **ENGINE_SETTINGS}
    actions = [a for a in p._actions if a.option_strings and a.dest in owned and a.dest not in NOT_ON_SERVING_TAB
               and a.dest not in ENGINE_MAIN and SERVE_FORM_NAME.get(a.dest, a.dest) not in names_on_page]
    rows = _engine_rows(p, actions)
    section = _details("engine-settings", f"Engine settings: {len(actions)} <code>llmsizer infer</code> engine flags "
                       "(empty: the engine's default; shown for the engine chosen)", "Engine settings", rows)
    return actions, section


def engine_main() -> str:
    """The rows of ENGINE_MAIN (``infer --tp``, ``--pp``, ``--dp``, ``--enable-expert-parallel``) for the serving tab's main fieldset, made as the Engine settings
    section makes its rows (labelled with their flags and the engines that read them, shown for those engines)."""
    p = _infer_parser()
    return "\n".join("      " + r for r in _engine_rows(p, [a for a in p._actions if a.dest in ENGINE_MAIN]))


def _engine_rows(p: argparse.ArgumentParser, actions: list[argparse.Action]) -> list[str]:
    """One form row per engine flag of ``infer`` (engine_settings' rows)."""
    fmt = p._get_formatter()
    owned = {**ENGINE_COUNTS, **ENGINE_SETTINGS}
    rows = []
    for a in actions:
        name = SERVE_FORM_NAME.get(a.dest, a.dest)
        flags = [o for o in a.option_strings if not o.startswith("--no-")]
        flag = next(o for o in flags if o.startswith("--"))
        owners = owned[a.dest]
        text = fmt._expand_help(a) if a.help else ""
        hint = f'<span class="hint" id="{name}-hint">{html.escape(text)}</span>' if text else ""
        described = f' aria-describedby="{name}-hint"' if text else ""
        attrs = f'id="{name}" name="{name}" data-flag="{html.escape(flag)}"{described}'
        label = (f'<label for="{name}">' + " ".join(f"<code>{html.escape(o)}</code>" for o in flags)
                 + f' <span class="small muted">{html.escape(", ".join(ENGINE_NAMES[e] for e in owners))}</span>'
                 "</label>")
        div = f'<div class="field{{cls}}" data-engines="{" ".join(owners)}">'
        if isinstance(a, argparse._StoreTrueAction):
            note = f' <span class="small muted" id="{name}-hint">{html.escape(text)}</span>' if text else ""
            rows.append(div.format(cls=" check") + f'{label}<span><input type="checkbox" {attrs}>{note}</span></div>')
            continue
        if isinstance(a, argparse.BooleanOptionalAction):  # said either way: --kv-unified / --no-kv-unified
            no = next(o for o in a.option_strings if o.startswith("--no-"))
            options = (f'<option value="true">{html.escape(flag)}</option>'
                       f'<option value="false">{html.escape(no)}</option>')
            rows.append(div.format(cls="") + f'{label}<select {attrs} data-boolean=""><option value="">'
                        f"{html.escape(default_text(name, text))}</option>{options}</select>{hint}</div>")
            continue
        if a.choices is not None:
            rows.append(div.format(cls="") + f'{label}<select {attrs}><option value="">'
                        f"{html.escape(default_text(name, text))}</option>{_options(a.choices)}</select>{hint}</div>")
            continue
        rows.append(div.format(cls="") + f"{label}{text_input(attrs, default_text(name, text))}{hint}</div>")
    return rows


def text_input(attrs: str, default: str) -> str:
    """The text input of an open-value flag (the Engine settings' and the training Advanced section's): the empty
    box names its default as a select's empty option does (``default``: default_text's words, the CLI's --help
    "(default 0.9)" as "default 0.9"); the API reads what is typed with the flag's own type."""
    said = default if default in ("default", "default (see below)") else "default " + default[len("default ("):-1]
    holder = f' placeholder="{html.escape(said)}"' if said != "default" else ""
    return f'<input type="text" {attrs}{holder} spellcheck="false">'


# ------------------------------------------------------------------ the serving tab's llama.cpp auto-fit (generated)

# the engine `fit --auto` fits (cli/fit_cmd.py _auto refuses another: "--auto fits llama.cpp"), and the control's words
AUTO_FIT_ENGINE = "llamacpp"
AUTO_FIT_WORDS = "auto-fit -ngl / --n-cpu-moe / context"
# fit's group of the auto-fit's flags (cli/fit_cmd.py: --auto, --free, --host-memory), and --host-device, the host CPU
# whose bandwidth times the layers and experts the auto-fit keeps on the CPU (fit's, outside the group)
AUTO_FIT_GROUP = "llama.cpp auto-fit"
AUTO_FIT_MORE = ("host_device",)


def llamacpp_auto() -> str:
    """The serving tab's rows asking ``llmsizer fit --auto`` (llama.cpp's auto-fit) beside the estimate, made from
    fit's own flags (AUTO_FIT_GROUP and AUTO_FIT_MORE: each labelled with its flag, described by its --help): the
    ``--auto`` checkbox, then a text box per open value (``--free``, ``--host-memory``, ``--host-device``), shown
    for the engine it fits only (``data-auto-engine``; calculator.js asks POST /api/v1/fit with ``auto`` and shows
    the flags line the CLI prints). The checkbox is named ``fit_auto`` and the boxes by their dests, none an
    ``infer`` field: the estimate's request never carries them."""
    p = _command_parser("fit")
    fmt = p._get_formatter()
    group = next(g for g in p._action_groups if g.title == AUTO_FIT_GROUP)
    actions = [*group._group_actions, *(a for a in p._actions if a.dest in AUTO_FIT_MORE)]
    rows = []
    for a in actions:
        text = html.escape(fmt._expand_help(a))
        flag = next(o for o in a.option_strings if o.startswith("--"))
        name = "fit_auto" if a.dest == "auto" else a.dest
        div = f'<div class="field{{cls}}" id="{name}-field" data-auto-engine="{AUTO_FIT_ENGINE}" hidden>'
        if a.dest == "auto":
            rows.append(div.format(cls=" check") + f'<label for="{name}"><code>{flag}</code> '
                        f'{html.escape(AUTO_FIT_WORDS)}</label><span><input type="checkbox" id="{name}" name="{name}" '
                        f'data-flag="{flag}" aria-describedby="{name}-hint"> <span class="small muted" '
                        f'id="{name}-hint">{text} (llmsizer fit)</span></span></div>')
            continue
        attrs = f'id="{name}" name="{name}" data-flag="{flag}" aria-describedby="{name}-hint"'
        rows.append(div.format(cls="") + f'<label for="{name}"><code>{flag}</code></label>'
                    f'{text_input(attrs, default_text(name, fmt._expand_help(a)))}'
                    f'<span class="hint" id="{name}-hint">{text} (sent with --auto)</span></div>')
    return "\n".join("      " + r for r in rows)


def render_page(path: str, templates: Path = TEMPLATES) -> bytes:
    """The HTML of the page at ``path``: its body, with its shared parts included and its generated parts
    (``<!-- generate train-advanced -->``: ``train_advanced``; ``<!-- generate engine-settings -->``:
    ``engine_settings``; ``<!-- generate llamacpp-auto -->``: ``llamacpp_auto``) made, in the one layout."""
    page = PAGES[path]
    body = _INCLUDE.sub(lambda m: (templates / m.group(1)).read_text(encoding="utf-8").rstrip("\n"),
                        (templates / page.body).read_text(encoding="utf-8"))
    generated = {"train-advanced": lambda: train_advanced(set(_NAME.findall(body)))[1],
                 "engine-settings": lambda: engine_settings(set(_NAME.findall(body)))[1],
                 "engine-main": engine_main, "llamacpp-auto": llamacpp_auto}
    body = _GENERATE.sub(lambda m: generated[m.group(1)](), body)
    current = ' aria-current="page"'
    nav = "\n".join(f'    <li><a href="{href}"{current if href == path else ""}>{label}</a></li>'
                     for href, label in NAV)
    layout = (templates / "layout.html").read_text(encoding="utf-8")
    return layout.format(title=page.title, script=page.script, skip_to=page.skip_to, skip_text=page.skip_text,
                         nav=nav, tagline=page.tagline, main_id=f' id="{page.main_id}"' if page.main_id else "",
                         body=body).encode("utf-8")


PAGE_HTML = {path: render_page(path) for path in PAGES}


def _load(root: Path) -> dict[str, tuple[bytes, str]]:
    """Every shippable file under ``root`` (by its posix path relative to ``root``) with its media type."""
    table: dict[str, tuple[bytes, str]] = {}
    for p in sorted(root.rglob("*")):
        media = MEDIA_TYPES.get(p.suffix.lower())
        if p.is_file() and media is not None and "__pycache__" not in p.parts:
            table[p.relative_to(root).as_posix()] = (p.read_bytes(), media)
    return table


FILES = _load(STATIC)

router = APIRouter(include_in_schema=False)


def _send(name: str) -> Response:
    entry = FILES.get(name)
    if entry is None:
        raise HTTPException(status_code=404, detail="no such page or file")
    body, media = entry
    return Response(content=body, media_type=media, headers={"Cache-Control": "no-cache",
                                                               "X-Content-Type-Options": "nosniff"})


def _page_route(path: str) -> Callable[[], Response]:
    body = PAGE_HTML[path]

    def page() -> Response:
        return Response(content=body, media_type=MEDIA_TYPES[".html"],
                        headers={"Cache-Control": "no-cache", "X-Content-Type-Options": "nosniff"})
    page.__name__ = "page_" + PAGES[path].body.split(".")[0]
    return page


for _path in PAGES:
    router.add_api_route(_path, _page_route(_path), methods=["GET"], response_class=Response)


def choices() -> dict[str, Any]:
    """The closed sets the forms offer and the defaults they name, read from their one home (the specs' tuples
    and dataclasses, the format and KV dtype tables, the headroom rule), so a page cannot drift from the CLI."""
    defaults: dict[str, Any] = {}
    for cls in (InferenceWorkload, TrainingWorkload):
        for f in dataclasses.fields(cls):
            if f.default is not None and f.default is not dataclasses.MISSING and not isinstance(f.default, (tuple, bool)):
                defaults.setdefault(f.name, f.default)
    defaults["headroom"] = DEFAULT_HEADROOM
    # the method decides it (specs/training.py default_grad_checkpointing: QLoRA's peft k-bit preparation)
    defaults["grad_checkpointing"] = (f"{default_grad_checkpointing('full')}; {default_grad_checkpointing('qlora')} "
                                      "for qlora")
    defaults["fit_target"] = LLAMACPP_FIT_TARGET  # llama.cpp on a GPU keeps it instead (estimate/verdict.py margin_rule)
    defaults["engine"] = ENGINE_DEFAULT_NAME  # the device's (estimate/device.py engine_rule), as infer and fit choose
    defaults["output_tokens"] = f"min({DEFAULT_OUTPUT_TOKENS}, context / 2)"  # specs/workload.py default_output_tokens
    # the training tab's attention select (a name of its own: the serving list has no flex), TrainingWorkload's default
    defaults["train_attention"] = next(f.default for f in dataclasses.fields(TrainingWorkload) if f.name == "attention")
    return {
        "choices": {
            "engines": list(ENGINES), "devices": list(DEVICES), "dtypes": list(DTYPES),
            # serving's attention (specs/workload.py) and training's, which adds flex (specs/training.py), as
            # `infer` and `train` accept them (a flex infer is refused: training only)
            "attention": list(ATTENTION_IMPLS), "train_attention": list(TRAIN_ATTENTION),
            "methods": list(METHODS), "optimizers": list(OPTIMIZERS), "precisions": list(PRECISIONS),
            "grad_checkpointing": list(GRAD_CHECKPOINTING), "fsdp": list(FSDP_MODES), "offload": list(OFFLOAD),
            "grad_sync": list(GRAD_SYNC),
            # the training framework profiles (catalog/data/frameworks.json), as `train --framework` takes them
            "frameworks": list(framework_profiles()),
            # each option's text: the profile's name with the repository @ commit it was read at
            "frameworks_labels": {n: p.label for n, p in framework_profiles().items()},
            "zero_stages": list(range(int(ZERO_STAGE.low), int(ZERO_STAGE.high) + 1)),
            "kv_dtypes": list(engine_kv_dtypes(None)), "weight_formats": list(format_names()),
        },
        # the KV dtypes each engine takes, as the CLI (estimate/inference/compose.py engine_kv_dtypes): the
        # calculator offers the chosen engine's, and "kv_dtypes" with the engine left to the device
        "kv_dtypes_by_engine": {e: list(engine_kv_dtypes(e)) for e in ENGINES},
        # each framework profile's workload defaults (catalog/data/frameworks.json): the training form's empty options
        # say the profile's value when one is chosen, as the estimate applies it to the settings left empty
        # (named as the form names its controls: TRAIN_FORM_NAME)
        # (the unconditional ones: a default with a 'when' applies only in its setup, named in the estimate's
        # assumptions)
        "framework_defaults": {n: {TRAIN_FORM_NAME.get(d.field, d.field): d.value for d in p.workload
                                   if d.when is None}
                               for n, p in framework_profiles().items()},
        "defaults": defaults,
        "engine_names": dict(ENGINE_NAMES),  # what the answers call each engine (render/text.py pool_and_need)
        # the training settings a request file takes (request/fields.py): the calculator's request YAML writes the
        # Advanced section's other settings as comments, with their flags
        "request_settings": [f.name for f in next(f for f in REQUEST_TRAINING if f.name == "settings").fields],
        # ... and the parameter-efficient ones it takes under peft (rank, alpha, targets, modules_to_save, the adapter
        # and base dtypes): the calculator's request YAML writes those of the form under peft:
        "request_peft": [f.name for f in next(f for f in REQUEST_TRAINING if f.name == "peft").fields],
        # the engine settings a request file takes under engine_settings (request/fields.py): the calculator's
        # request YAML writes the Engine settings section's other settings as comments, with their flags
        "request_engine_settings": [f.name for f in next(f for f in REQUEST_INFERENCE
                                                         if f.name == "engine_settings").fields],
    }


CHOICES = choices()


@router.get("/pages/choices.json")
def page_choices() -> JSONResponse:
    return JSONResponse(CHOICES, headers={"Cache-Control": "no-cache"})


@router.get("/static/{name:path}", response_class=Response)
def static_file(name: str) -> Response:
    """A file of the pages (CSS, JavaScript modules, licences): looked up by name in FILES, never opened by it."""
    return _send(name)
