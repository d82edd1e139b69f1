#!/usr/bin/env python3
"""Regenerate the documentation that is program output: docs/cli.md (every command's --help), the example
outputs in README.md (each fenced block that starts with ``$ llmsizer ...`` is re-run and replaced), the outputs in
docs/python-api.md (its ```python blocks run in order in one namespace; a ```text block right after one is replaced by
what that block printed) and docs/openapi.json (the web API's OpenAPI document, as ``llmsizer serve`` serves it; when the web extra is installed).
Without --check it first re-derives the calibrated bands from the validation rows (scripts/rederive_bands.py, so the
examples quote bands that match the rows after a merge that moved predictions) and rewrites docs/accuracy.md (as
``llmsizer validate --no-store --markdown docs/accuracy.md --force``; it carries its date, so --check leaves it out).

    python scripts/gen_docs.py          # rewrite both files
    python scripts/gen_docs.py --check  # exit 1 and name the stale file when either differs (tests/docs)

Commands run in-process through ``llmsizer.cli.main.main`` with a fixed terminal width, in a scratch folder
that holds a copy of examples/ (so ``-o report.html`` writes nothing into the repository).
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import io
import os
import re
import shlex
import shutil
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
WIDTH = "120"
FENCE = "```"


def run(argv: list[str], cwd: Path) -> str:
    from llmsizer.cli.main import main

    out, err = io.StringIO(), io.StringIO()
    old = Path.cwd()
    os.chdir(cwd)
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err), contextlib.suppress(SystemExit):
            main(argv)
    finally:
        os.chdir(old)
    return out.getvalue() + err.getvalue()


def _commands() -> list[list[str]]:
    """Every command and sub-action, as argv prefixes: [], [infer], [hardware, list], ..."""
    from llmsizer.cli.main import build_parser

    parser = build_parser([], all_commands=True)
    found: list[list[str]] = [[]]

    def walk(p: argparse.ArgumentParser, prefix: list[str]) -> None:
        for action in p._actions:
            if isinstance(action, argparse._SubParsersAction):
                for name, sub in action.choices.items():
                    found.append([*prefix, name])
                    walk(sub, [*prefix, name])

    walk(parser, [])
    return found


def cli_reference(cwd: Path) -> str:
    out = ["# CLI reference", "",
           "Generated from `--help` by `scripts/gen_docs.py`; `tests/docs/test_generated_docs.py` fails when it is "
           "stale. Exit codes: 0 answered and it fits / holds, 1 answered and it does not fit or a stated "
           "constraint fails, 2 bad input (README, \"Exit codes\").", ""]
    for argv in _commands():
        title = " ".join(["llmsizer", *argv])
        out += [f"## `{title}`", "", FENCE, run([*argv, "--help"], cwd).rstrip(), FENCE, ""]
    return "\n".join(out)


def readme_examples(text: str, cwd: Path) -> str:
    def replace(m: re.Match[str]) -> str:
        cmd = m.group(1)
        argv = shlex.split(cmd)[1:]
        return f"{FENCE}\n$ {cmd}\n{run(argv, cwd).rstrip()}\n{FENCE}"

    return re.sub(rf"{FENCE}\n\$ (llmsizer [^\n]*)\n.*?\n{FENCE}", replace, text, flags=re.S)


def python_api_outputs(text: str, cwd: Path) -> str:
    """Run every ```python block of ``text`` in order in one namespace (in ``cwd``); the ```text block that follows
    one (after a blank line) becomes what it printed."""
    ns: dict[str, object] = {"__name__": "__doc_session__"}
    pattern = re.compile(rf"{FENCE}python\n(.*?)\n{FENCE}\n(\n{FENCE}text\n.*?\n{FENCE}\n)?", re.S)

    def replace(m: re.Match[str]) -> str:
        out = io.StringIO()
        old = Path.cwd()
        os.chdir(cwd)
        try:
            with contextlib.redirect_stdout(out):
                exec(compile(m.group(1), "docs/python-api.md", "exec"), ns)
        finally:
            os.chdir(old)
        block = f"{FENCE}python\n{m.group(1)}\n{FENCE}\n"
        if m.group(2) is None:
            return block
        return f"{block}\n{FENCE}text\n{out.getvalue().rstrip()}\n{FENCE}\n"

    return pattern.sub(replace, text)


def generate() -> dict[Path, str]:
    os.environ["COLUMNS"] = WIDTH
    with tempfile.TemporaryDirectory() as tmp:
        cwd = Path(tmp)
        shutil.copytree(ROOT / "examples", cwd / "examples")
        readme = ROOT / "README.md"
        out = {ROOT / "docs" / "cli.md": cli_reference(cwd) + "\n",
               readme: readme_examples(readme.read_text("utf-8"), cwd)}
        api = ROOT / "docs" / "python-api.md"
        out[api] = python_api_outputs(api.read_text("utf-8"), cwd)
    if importlib.util.find_spec("fastapi") is not None:
        out[ROOT / "docs" / "openapi.json"] = openapi_text()
    return out


def openapi_text() -> str:
    """The OpenAPI document the app serves at /api/v1/openapi.json, as published in docs/."""
    import json

    from llmsizer.web.app import create_app
    return json.dumps(create_app().openapi(), indent=2, ensure_ascii=False) + "\n"


def rederive_bands_and_accuracy() -> None:
    """scripts/rederive_bands.py, then docs/accuracy.md from the same rows (run from the repository root, so the
    report names its data files relative to it)."""
    sys.path.insert(0, str(ROOT / "scripts"))
    import rederive_bands

    from llmsizer.cli import validate_cmd

    rederive_bands.main()
    old = Path.cwd()
    os.chdir(ROOT)
    try:
        with contextlib.redirect_stdout(io.StringIO()):
            rc = validate_cmd.main(["--no-store", "--markdown", "docs/accuracy.md", "--force"])
    finally:
        os.chdir(old)
    if rc:
        raise SystemExit(f"llmsizer validate exited {rc}")


_GENERATED_ON = re.compile(r"^Generated \d{4}-\d{2}-\d{2} by ", re.MULTILINE)


def accuracy_is_stale() -> bool:
    """Whether docs/accuracy.md differs from what ``llmsizer validate`` writes now, its ``Generated <date>`` aside
    (the date is the only line that moves by itself; a merge that moves a prediction must regenerate the page)."""
    from llmsizer.cli import validate_cmd

    path = ROOT / "docs" / "accuracy.md"
    with tempfile.TemporaryDirectory() as tmp:
        fresh = Path(tmp) / "accuracy.md"
        old = Path.cwd()
        os.chdir(ROOT)
        try:
            with contextlib.redirect_stdout(io.StringIO()):
                rc = validate_cmd.main(["--no-store", "--markdown", str(fresh)])
        finally:
            os.chdir(old)
        if rc:
            raise SystemExit(f"llmsizer validate exited {rc}")
        new = fresh.read_text("utf-8")
    committed = path.read_text("utf-8") if path.exists() else ""
    return _GENERATED_ON.sub("Generated by ", committed) != _GENERATED_ON.sub("Generated by ", new)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true", help="report stale files instead of writing them")
    args = ap.parse_args(argv)
    if not args.check:
        rederive_bands_and_accuracy()
    stale = []
    for path, text in generate().items():
        old = path.read_text("utf-8") if path.exists() else ""
        if old != text:
            stale.append(path)
            if not args.check:
                path.write_text(text, "utf-8")
    if args.check and accuracy_is_stale():
        stale.append(ROOT / "docs" / "accuracy.md")
    if args.check and stale:
        print("stale: " + ", ".join(str(p.relative_to(ROOT)) for p in stale) + " (run scripts/gen_docs.py)")
        return 1
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT / "src"))
    sys.exit(main())
