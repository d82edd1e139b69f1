"""The Python API as a notebook user meets it (issue #11): what dir() and help() show, what mypy sees, how results
print and render in Jupyter.

Truth here is the CLI's own output (run in a subprocess), the items the estimate is made of, and the escaping rules
of HTML; none of it is computed by the code under test's HTML renderer.
"""

from __future__ import annotations

import ast
import dataclasses
import html
import inspect
import json
import os
import pydoc
import subprocess
import sys
import typing
from html.parser import HTMLParser
from pathlib import Path

import pytest

import llmsizer
from cli_capture import run_cli
from llmsizer.units import GiB, format_bytes

ROOT = Path(__file__).resolve().parents[2]
ENV = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
HOSTILE = '<script>alert("x")</script> & <b>'
HEAVY = ("torch", "transformers", "numpy", "safetensors", "jinja2", "fastapi", "flask", "starlette", "aiohttp",
         "requests", "httpx", "IPython")


def cli(*args: str) -> str:
    p = run_cli(*args, cwd=ROOT)
    assert p.returncode in (0, 1), p.stderr
    return p.stdout


# ------------------------------------------------------------------------------------ dir, help, typing, import

def test_dir_shows_every_public_name_without_loading_it():
    code = ("import sys, llmsizer; names = dir(llmsizer); "
            "print(sorted(set(llmsizer.__all__) - set(names))); "
            f"print(sorted(m for m in sys.modules if m.split('.')[0] in {HEAVY!r})); "
            "print(sorted(m for m in ('llmsizer.estimate.inference', 'llmsizer.estimate.fit', 'llmsizer.plan', "
            "'llmsizer.estimate.training', 'llmsizer.render.notebook') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=ENV, check=True,
                         timeout=60).stdout.splitlines()
    assert out == ["[]", "[]", "[]"], out  # nothing missing from dir(); nothing heavy or lazy imported


def test_all_and_lazy_table_agree_and_resolve():
    eager = {"Assumption", "Estimate", "HubUnavailableError", "InputError", "Item", "LlmsizerError",
             "ModelFileError", "UnknownNameError", "UnsupportedArchitectureError", "__version__"}
    assert len(llmsizer.__all__) == len(set(llmsizer.__all__))
    assert set(llmsizer.__all__) == eager | set(llmsizer._LAZY)
    for name in ("FitResult", "Recommendation", "Plan"):  # the result types are public too
        assert name in llmsizer.__all__
    for name in llmsizer.__all__:
        assert getattr(llmsizer, name) is not None


def test_type_checkers_see_every_lazy_name_from_its_module():
    """mypy and IDEs cannot follow __getattr__: every lazy name must be imported under TYPE_CHECKING, from the
    module _LAZY loads it from."""
    tree = ast.parse((ROOT / "src/llmsizer/__init__.py").read_text())
    seen: dict[str, str] = {}
    for node in tree.body:
        if isinstance(node, ast.If) and isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING":
            for imp in node.body:
                assert isinstance(imp, ast.ImportFrom) and imp.level == 1
                for alias in imp.names:
                    seen[alias.asname or alias.name] = imp.module or ""
    assert seen == llmsizer._LAZY


@pytest.mark.parametrize("name", [n for n in llmsizer.__all__ if n != "__version__"])
def test_every_public_name_is_documented_and_typed(name):
    obj = getattr(llmsizer, name)
    doc = inspect.getdoc(obj) or ""
    assert len(doc) > 20 and not doc.startswith(f"{name}("), f"{name}: no docstring of its own"
    if inspect.isfunction(inspect.unwrap(obj)):
        fn = inspect.unwrap(obj)
        sig = inspect.signature(fn)
        for p in sig.parameters.values():
            assert p.annotation is not inspect.Parameter.empty, f"{name}({p.name}) has no type hint"
        assert sig.return_annotation is not inspect.Signature.empty, f"{name} has no return type"
        typing.get_type_hints(fn)  # the hints resolve


def test_help_of_estimate_inference_is_useful():
    text = pydoc.render_doc(llmsizer.estimate_inference, renderer=pydoc.plaintext)
    assert "Estimate the memory to serve" in text and "InferenceWorkload" in text and "-> 'Estimate'" in text
    text = pydoc.render_doc(llmsizer.Estimate, renderer=pydoc.plaintext)
    assert "to_dict" in text and "str(est)" in text


# ------------------------------------------------------------------------------------ str() = the CLI's text

def test_str_of_an_estimate_is_what_llmsizer_infer_prints():
    est = llmsizer.estimate_inference("llama-3.1-8b", context=8192, concurrency=4, weights="awq-int4")
    printed = cli("infer", "llama-3.1-8b", "--context", "8192", "--concurrency", "4", "--weights", "awq-int4")
    assert "TOTAL per device" in printed
    assert str(est) == printed.rstrip("\n")


def test_str_of_a_training_estimate_is_what_llmsizer_train_prints():
    est = llmsizer.estimate_training("qwen2.5-0.5b", method="lora", micro_batch=2, seq_len=1024)
    printed = cli("train", "qwen2.5-0.5b", "--method", "lora", "--micro-batch", "2", "--seq-len", "1024")
    assert str(est) in printed and str(est).splitlines()[0] == printed.splitlines()[0]


def test_str_of_a_fit_is_what_llmsizer_fit_prints():
    r = llmsizer.fit("llama-3.1-8b", "rtx-4090", concurrency=4)
    printed = cli("fit", "llama-3.1-8b", "--device", "rtx-4090", "--concurrency", "4")
    assert "FITS" in printed
    assert printed.startswith(str(r) + "\n")  # the CLI may add a cost line after the table


def test_str_of_a_recommendation_is_what_llmsizer_recommend_prints():
    rec = llmsizer.recommend_inference("qwen2.5-1.5b-instruct", constraints=llmsizer.Constraints(laptop=True))
    printed = cli("recommend", "qwen2.5-1.5b-instruct", "--laptop")
    assert "chosen:" in printed
    assert str(rec) == printed.rstrip("\n")


def test_str_of_a_plan_is_what_llmsizer_plan_prints():
    plan = llmsizer.plan_file(str(ROOT / "examples/cpu-internal-tool.yaml"))
    printed = cli("plan", str(ROOT / "examples/cpu-internal-tool.yaml"))
    assert "totals:" in printed
    assert str(plan) == printed.rstrip("\n")


# ------------------------------------------------------------------------------------ _repr_html_

VOID = {"br", "hr", "img", "meta", "input", "col", "wbr", "link", "source"}


class Strict(HTMLParser):
    """Collects tables (rows of cell texts, by table class), all text, and checks every element is closed in order."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.stack: list[str] = []
        self.tags: list[str] = []
        self.attrs: list[tuple[str, str | None]] = []
        self.tables: list[tuple[str, list[list[str]]]] = []
        self.text: list[str] = []
        self._cell: list[str] | None = None

    def handle_starttag(self, tag, attrs):
        self.tags.append(tag)
        self.attrs += attrs
        if tag not in VOID:
            self.stack.append(tag)
        if tag == "table":
            self.tables.append((dict(attrs).get("class") or "", []))
        elif tag == "tr":
            self.tables[-1][1].append([])
        elif tag in ("td", "th"):
            self._cell = []

    def handle_endtag(self, tag):
        assert self.stack and self.stack[-1] == tag, f"</{tag}> closes <{self.stack[-1] if self.stack else None}>"
        self.stack.pop()
        if tag in ("td", "th") and self._cell is not None:
            self.tables[-1][1][-1].append("".join(self._cell))
            self._cell = None

    def handle_data(self, data):
        self.text.append(data)
        if self._cell is not None:
            self._cell.append(data)


def parse(fragment: str) -> Strict:
    p = Strict()
    p.feed(fragment)
    p.close()
    assert p.stack == [], f"unclosed: {p.stack}"
    return p


def self_contained(fragment: str, p: Strict) -> None:
    assert "script" not in p.tags and "link" not in p.tags and "iframe" not in p.tags and "img" not in p.tags
    assert not any(k.startswith("on") or k in ("src", "href") for k, _ in p.attrs)
    low = fragment.lower()
    assert "http://" not in low and "https://" not in low and "@import" not in low and "url(" not in low


def table(p: Strict, cls: str) -> list[list[str]]:
    found = [rows for c, rows in p.tables if c == cls]
    assert len(found) == 1, [c for c, _ in p.tables]
    return found[0]


def check_breakdown(rows: list[list[str]], est) -> None:
    """Header, one row per item with its expected bytes, then TOTAL rows whose figures are the items' sums."""
    assert rows[0][:4] == ["component", "where", "expected", "range"]
    body = rows[1:]
    assert [r[0] for r in body[: len(est.items)]] == [it.name for it in est.items]
    for r, it in zip(body, est.items, strict=False):
        assert r[1] == it.location and r[2] == format_bytes(it.bytes)
    totals = {r[0]: r for r in body[len(est.items):]}
    for loc, label in (("device", "TOTAL per device"), ("host", "TOTAL host")):
        at = [it for it in est.items if it.location == loc]
        if not at:
            assert label not in totals
            continue
        lo = sum(it.range[0] for it in at)
        mid = sum(it.bytes for it in at)
        hi = sum(it.range[2] for it in at)
        assert est.total(loc) == (lo, mid, hi)
        assert totals[label][2:4] == [format_bytes(mid), f"{format_bytes(lo)} - {format_bytes(hi)}"]


def test_estimate_html_is_a_table_of_the_breakdown_with_totals_assumptions_and_warnings():
    est = llmsizer.estimate_inference("llama-3.1-8b", context=8192, concurrency=4, memory=16 * GiB)
    assert est.warnings  # does not fit in 16 GiB
    frag = est._repr_html_()
    p = parse(frag)
    self_contained(frag, p)
    check_breakdown(table(p, "breakdown"), est)
    assumed = table(p, "assumptions")
    assert [r[0] for r in assumed[1:]] == [a.name for a in est.assumptions]
    assert [r[1] for r in assumed[1:]] == [str(a.value) for a in est.assumptions]
    text = "".join(p.text)
    for w in est.warnings:
        assert w in text
    assert json.loads(json.dumps(est.to_dict()))["totals"]["device"]["bytes"] == est.total()[1]  # to_dict() kept


def test_html_escapes_a_hostile_model_name():
    from llmsizer.readers.manual import spec_from_manual
    spec = dataclasses.replace(spec_from_manual(params=1_000_000_000, layers=16, hidden=2048, heads=16,
                                                kv_heads=8, head_dim=None, intermediate=None, vocab=32000,
                                                tied=True), name=HOSTILE)
    results = [llmsizer.estimate_inference(spec, context=2048), llmsizer.fit(spec, "rtx-4090"),
               llmsizer.recommend_inference(spec, constraints=llmsizer.Constraints(laptop=True))]
    for r in results:
        frag = r._repr_html_()
        assert "<script" not in frag.lower() and "<b>" not in frag
        assert html.escape(HOSTILE) in frag
        p = parse(frag)
        self_contained(frag, p)
        assert HOSTILE in "".join(p.text)  # shown to the reader as written


def test_fit_html_has_the_verdict_speed_and_memory_breakdown():
    r = llmsizer.fit("llama-3.1-8b", "rtx-4090", concurrency=4)
    frag = r._repr_html_()
    p = parse(frag)
    self_contained(frag, p)
    text = "".join(p.text)
    assert str(r).splitlines()[0] in text  # the verdict line the CLI prints
    speed = table(p, "speed")
    cli_rows = [line for line in str(r).splitlines() if line.startswith(("prefill (", "decode x", "at 4 requests"))]
    assert [row[0] for row in speed[1:]] == [line.split("  ")[0] for line in cli_rows]
    assert r.estimate is not None
    check_breakdown(table(p, "breakdown"), r.estimate)
    # the fit's, then the memory estimate's and the speed's it does not name already (the text prints the same)
    assert [row[0] for row in table(p, "assumptions")[1:]] == list(dict.fromkeys(
        a.name for a in (*r.assumptions, *r.estimate.assumptions, *r.speed.assumptions)))
    for w in r.warnings:
        assert w in text


def test_recommendation_html_lists_the_options_the_cli_lists():
    rec = llmsizer.recommend_inference("qwen2.5-1.5b-instruct", constraints=llmsizer.Constraints(laptop=True))
    frag = rec._repr_html_()
    p = parse(frag)
    self_contained(frag, p)
    rows = table(p, "options")[1:]
    assert [r[1] for r in rows] == [o.target for o in rec.options[:8]]
    assert rows[0][0] == "chosen" and rec.chosen is not None and rec.chosen.target == rows[0][1]
    assert [r[0] for r in table(p, "rejected")[1:]] == [o.target for o in rec.rejected[:8]]
    text = "".join(p.text)
    for w in rec.warnings:
        assert w in text


def test_plan_html_has_checks_totals_and_escapes_the_request(tmp_path):
    from llmsizer.render.markdown import format_value
    src = (ROOT / "examples/cpu-internal-tool.yaml").read_text()
    req = tmp_path / "hostile.yaml"
    req.write_text(src.replace('title: "Contract drafting helper on an on-premises CPU server"',
                               "title: '" + HOSTILE.replace("'", "''") + "'"))
    plan = llmsizer.plan_file(str(req))
    assert plan.title == HOSTILE
    frag = plan._repr_html_()
    assert "<script" not in frag.lower() and html.escape(HOSTILE) in frag
    p = parse(frag)
    self_contained(frag, p)
    totals = table(p, "totals")[1:]
    assert [r[:2] for r in totals] == [[f.label, format_value(f.value, f.unit)] for f in plan.totals.figures
                                       if f.value is not None]
    assert len(totals) >= 3


def test_str_of_a_training_fit_is_what_llmsizer_fit_train_prints():
    from llmsizer.estimate.fit import fit_training
    r = fit_training("qwen2.5-0.5b", "rtx-4090")
    printed = cli("fit", "qwen2.5-0.5b", "--device", "rtx-4090", "--train")
    assert "training on rtx-4090: " in printed  # one device named by its id (fit.devices_text)
    assert str(r) == printed.rstrip("\n")
    frag = r._repr_html_()
    p = parse(frag)
    self_contained(frag, p)
    assert r.estimate is not None
    check_breakdown(table(p, "breakdown"), r.estimate)


def test_training_recommendation_html_lists_the_options():
    rec = llmsizer.recommend_training("qwen2.5-0.5b", tokens=1e9, constraints=llmsizer.Constraints(cloud_only=True))
    frag = rec._repr_html_()
    p = parse(frag)
    self_contained(frag, p)
    rows = table(p, "options")
    assert rows[0][1:4] == ["option", "hardware", "cost"]
    assert [r[1] for r in rows[1:]] == [o.target for o in rec.options[:8]]
    assert str(rec).splitlines()[1] in "".join(p.text)  # the FLOP line the CLI prints


@pytest.mark.parametrize("example", sorted(p.name for p in (ROOT / "examples").glob("*.yaml")))
def test_every_example_plan_prints_as_the_cli_and_renders(example):
    plan = llmsizer.plan_file(str(ROOT / "examples" / example))
    assert str(plan) == cli("plan", str(ROOT / "examples" / example)).rstrip("\n")
    frag = plan._repr_html_()
    p = parse(frag)
    self_contained(frag, p)
    checks = [c for c, _ in p.tables].count("checks")
    assert checks == (1 if plan.checks else 0)
    text = "".join(p.text)
    for j in plan.jobs:
        assert j.summary in text
        for w in j.warnings:
            assert w in text


def test_a_training_word_given_to_an_inference_question_points_at_training() -> None:
    """``llmsizer.fit(..., train=True)`` or ``method='lora'``: an inference workload has no such field, and the error
    says where training is sized instead of a bare 'no field'."""
    import llmsizer
    from llmsizer.errors import InputError

    for kw in ({"train": True}, {"method": "lora"}, {"micro_batch": 4}):
        with pytest.raises(InputError, match="fit_training / estimate_training"):
            llmsizer.fit("qwen2.5-7b", "h100-sxm", 1, **kw)
        # the words the CLI and the web API say to `infer --method lora` (tests/cli/test_wrong_mode_input.py)
        # (train: fit's --train first, the flag it names)
        with pytest.raises(InputError, match=f"has no field '{next(iter(kw))}'; a training option: training is "
                                             "sized by `llmsizer (train|fit --train)` or `llmsizer (fit --train|train)`"):
            llmsizer.estimate_inference("qwen2.5-7b", **kw)
    with pytest.raises(InputError, match="did you mean 'context'"):
        llmsizer.fit("qwen2.5-7b", "h100-sxm", 1, contxt=4096)
    # a LoRA rank: training's fields, which TrainingWorkload has (method='lora', rank=N)
    from dataclasses import fields

    from llmsizer.specs import TrainingWorkload
    assert {"method", "rank"} <= {f.name for f in fields(TrainingWorkload)}
    with pytest.raises(InputError, match=r"has no field 'lora'; .*with method='lora', rank=N\)$"):
        llmsizer.estimate_inference("qwen2.5-7b", lora=8)

