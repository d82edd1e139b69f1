"""The web error renderer (static/js/problems.js) and the assumptions' values (static/js/format.js
assumptionValue), run through node on the pages' own modules; skipped where node is not installed.

- formMessage keeps the CLI's line (the one ``llmsizer`` prints, from a separate process) and only names each flag the
  form has a control for by the control's label, the flag after it, and leaves out "(see --help)"; a flag the form
  has no control for stays as it is.
- controlOf finds the form control of the API's ``field`` (web/problems.py from_error): its own name, the form's
  name for it on the tab (the training tab's device is train_device), or the control whose flag is the field's
  (the serving tab's --tp is tensor_parallel).
- assumptionValue writes each value of real estimates' assumptions as render/text.py does (Python's str of it)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

JS = Path(__file__).resolve().parents[2] / "src" / "llmsizer" / "web" / "static" / "js"

pytestmark = pytest.mark.skipif(shutil.which("node") is None, reason="node is not installed")


def _node(module: str, names: str, expr: str) -> Any:
    script = (f"import {{ {names} }} from {json.dumps((JS / module).as_uri())};\n"
              f"process.stdout.write(JSON.stringify({expr}));")
    out = subprocess.run(["node", "--input-type=module", "-e", script], capture_output=True, text=True, timeout=60,
                         check=True).stdout
    return json.loads(out)


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "llmsizer.cli.main", *args], capture_output=True, text=True,
                          timeout=60)


def _line(*args: str) -> str:
    r = _cli(*args)
    assert r.returncode == 2, r.stderr
    return r.stderr.strip().removeprefix("llmsizer: error: ")


LABELS = {"--context": "Context", "--output-tokens": "Output tokens", "--engine": "Engine",
          "--engine-version": "Release", "--tp": "Tensor parallel"}


def test_the_clis_line_in_the_forms_words() -> None:
    lines = [_line("infer", "llama-3.1-8b", "--context", "abc"),
             _line("infer", "llama-3.1-8b", "--context", "8k", "--output-tokens", "99999"),
             _line("infer", "llama-3.1-8b", "--engine-version", "abc"),
             _line("infer", "llama-3.1-8b", "--tp", "0"),
             _line("infer", "llama-3.1-8b", "--n-cpu-moe", "-1")]
    assert lines[0].startswith("argument --context: cannot read 'abc'") and lines[0].endswith(" (see --help)")
    said = _node("problems.js", "formMessage", f"{json.dumps(lines)}.map((l) => formMessage(l, {json.dumps(LABELS)}))")
    assert said[0] == "Context (--context): " + lines[0].removeprefix("argument --context: ").removesuffix(" (see --help)")
    assert said[1] == lines[1].replace("--output-tokens", "Output tokens (--output-tokens)")
    assert said[2] == lines[2].replace("--engine-version", "Release (--engine-version)").replace(
        "--engine ", "Engine (--engine) ")
    assert lines[3].startswith("argument --tp/--tensor-parallel: ")  # argparse names every spelling
    assert said[3] == "Tensor parallel (--tp): " + lines[3].removeprefix("argument --tp/--tensor-parallel: ").removesuffix(
        " (see --help)")
    assert "--n-cpu-moe" in said[4] and "(see --help)" not in said[4]  # no control labelled for it: the flag stays


def test_the_control_of_the_field_the_api_names() -> None:
    infer = ["model", "memory", "headroom", "engine", "context", "device", "tensor_parallel", "infer_gpus"]
    train = ["model", "memory", "headroom", "method", "tp", "train_device", "train_attention"]
    flags = {"tensor_parallel": "--tp", "infer_gpus": "--gpus", "train_device": "--device", "tp": "--tp"}
    cases = [("context", infer, {}), ("tp", infer, {"gpus": "infer_gpus"}), ("gpus", infer, {"gpus": "infer_gpus"}),
             ("device", train, {"device": "train_device", "attention": "train_attention"}), ("tp", train, {}),
             ("body", infer, {}), (None, infer, {})]
    got = _node("problems.js", "controlOf", json.dumps(cases) + f".map(([f, n, a]) => controlOf(f, n, a, {json.dumps(flags)}))")
    assert got == ["context", "tensor_parallel", "infer_gpus", "train_device", "tp", None, None]


def test_assumption_values_as_the_cli_text_writes_them() -> None:
    values: list[Any] = []
    for args in (("infer", "qwen3-30b-a3b", "--engine", "llamacpp", "--weights", "q4_k_m", "--context", "8k"),
                 ("infer", "llama-3.1-8b", "--engine", "vllm", "--context", "8k"),
                 ("train", "qwen2.5-7b", "--method", "lora")):
        values += [a["value"] for a in json.loads(_cli(*args, "--json").stdout)["assumptions"]]
    assert True in values or False in values  # the premise: booleans among them
    got = _node("format.js", "assumptionValue", f"{json.dumps(values)}.map(assumptionValue)")
    assert got == [str(v) for v in values]


def test_the_apis_line_in_the_forms_words() -> None:
    """The API's detail names the body field ("field 'context': ...", probe24 C4); the form says it as it said the
    CLI's "argument --context: ...": the control's label, the flag after it, the CLI's reason word for word."""
    pytest.importorskip("fastapi")
    from web_capture import post_api

    cases = [({"context": "abc"}, ("--context", "abc"), "Context (--context): "),
             ({"tp": 0}, ("--tp", "0"), "Tensor parallel (--tp): "),
             ({"tensor_parallel": 0}, ("--tensor-parallel", "0"), "Tensor parallel (--tp): ")]
    details, reasons = [], []
    for body, flags, _ in cases:
        r = post_api("/api/v1/infer", {"model": "llama-3.1-8b", **body})
        key = next(iter(body))
        assert r.status_code == 400 and r.json()["field"] == key
        details.append(r.json()["detail"])
        line = _line("infer", "llama-3.1-8b", *flags).removesuffix(" (see --help)")
        reasons.append(line.split(": ", 1)[1])
        assert details[-1] == f"field '{key}': {reasons[-1]}"
    # the serving tab's control tensor_parallel has the flag --tp (calculator.js passes the control's flag)
    said = _node("problems.js", "formMessage", f"{json.dumps(details)}.map((l, i) => formMessage(l, "
                 f"{json.dumps(LABELS)}, i === 2 ? '--tp' : null))")
    assert said == [prefix + reason for (_, _, prefix), reason in zip(cases, reasons, strict=True)]
