"""Every example of every ``--help`` text (docs/cli.md is those texts) and every ``$ llmsizer`` example of the README
runs as a user copying it runs it, today: in one scratch folder holding a copy of examples/, in the order the help
texts list them (so ``request new -o my-request.yaml`` writes the file later examples read). An example answers
(exit 0) unless its comment states the exit code (``# exit 1, does not fit: ...``); one that names a file the user
is to supply (PLACEHOLDERS) may instead stop with a line per problem, each naming it (exit 2). Before: `capacity book` of the shipped
examples exited 2 (their 2025 windows had passed) and the top-level `fit` example exited 1 without saying so."""

from __future__ import annotations

import contextlib
import io
import re
import shlex
import shutil
from pathlib import Path

import pytest
from gen_docs_loader import gen_docs

ROOT = Path(__file__).resolve().parents[2]
#: names in examples that stand for the user's own files, ids and servers
PLACEHOLDERS = ("./my-model", "my-hardware.json", "saved-outputs/", "my-server.json", "our-servers.yaml", "inv.yaml",
                "3f2a9c0d1e4b")
#: commands that need what a test machine lacks: a GPU and model downloads (measure), a server that keeps running
#: (serve), a shell (completion)
NOT_RUN = ("measure", "serve", "completion")
STATED = re.compile(r"#.*\bexit (\d)\b")


def run(argv: list[str]) -> tuple[int, str, str]:
    from llmsizer.cli.main import main

    out, err = io.StringIO(), io.StringIO()
    rc: object = 0
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            rc = main(argv) or 0
        except SystemExit as e:
            rc = e.code if isinstance(e.code, int) else 1
    assert isinstance(rc, int)
    return rc, out.getvalue(), err.getvalue()


def help_examples(gen) -> list[str]:  # type: ignore[no-untyped-def]
    seen: list[str] = []
    for argv in gen._commands():
        for line in gen.run([*argv, "--help"], ROOT).splitlines():
            if line.startswith("  llmsizer ") and line.strip() not in seen:
                seen.append(line.strip())
    return seen


@pytest.fixture
def scratch(tmp_path, monkeypatch):  # type: ignore[no-untyped-def]
    shutil.copytree(ROOT / "examples", tmp_path / "examples")
    (tmp_path / "docs").mkdir()  # `validate --markdown docs/accuracy.md` is run from the repository root
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("COLUMNS", "120")
    return tmp_path


def test_every_help_example_answers_or_exits_as_stated(scratch) -> None:  # type: ignore[no-untyped-def]
    examples = help_examples(gen_docs())
    assert len(examples) > 60 and any("capacity book" in e for e in examples)
    wrong = []
    for line in examples:
        argv = shlex.split(line.split("#", 1)[0])[1:]
        if argv[0] in NOT_RUN:
            continue
        rc, _, err = run(argv)
        stated = STATED.search(line)
        expected = int(stated.group(1)) if stated else 0
        named = [p for p in PLACEHOLDERS if p in line]
        if rc == expected:
            continue
        lines = err.splitlines()
        if named and rc == 2 and lines and all(any(p.rstrip("/") in e for p in named) for e in lines):
            continue  # the user's own file is not there: a line per problem, each naming it
        wrong.append(f"{line}: exit {rc}, expected {expected}: {err.strip()[:300]}")
    assert not wrong, "\n".join(wrong)


def test_readme_examples_answer_and_a_no_says_so(scratch) -> None:  # type: ignore[no-untyped-def]
    """A README example exits 0, or 1 where its shown answer says it does not fit: never a failure (exit 2)."""
    text = (ROOT / "README.md").read_text("utf-8")
    blocks = re.findall(r"```\n\$ (llmsizer [^\n]*)\n(.*?)\n```", text, flags=re.S)
    assert len(blocks) >= 5
    for cmd, shown in blocks:
        rc, _, err = run(shlex.split(cmd)[1:])
        assert rc in (0, 1), f"{cmd}: exit {rc}: {err.strip()}"
        if rc == 1:
            assert "DOES NOT FIT" in shown or "does not fit" in shown, cmd


def test_a_stated_exit_code_is_read() -> None:
    assert STATED.search("  llmsizer fit x --count 2     # exit 1, does not fit").group(1) == "1"  # type: ignore[union-attr]
    assert STATED.search("  llmsizer serve --port 8080") is None
