"""The committed regression corpus of issue #15 (tests/fuzz/corpus/, written by make_corpus.py): every hostile input
the issue lists, fed to the real CLI in a child process capped at 1 GiB of address space and 10 s. Each must end in
exit 2 with one-line errors on stderr naming the file (a request may list several problems, one line each), no
traceback, nothing on stdout. Before #15 these crashed
(RecursionError, ZeroDivisionError, OverflowError), exhausted memory, or answered nonsense with exit 0."""

from __future__ import annotations

import resource
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
CORPUS = Path(__file__).resolve().parent / "corpus"
CASES = sorted(p for p in CORPUS.glob("*/*") if p.suffix != ".py")  # a file, or a model folder
MEMORY_CAP = 1 << 30
COMMAND = {"config": ["infer"], "safetensors": ["infer"], "gguf": ["infer"], "request": ["plan"]}


def _cap() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_CAP, MEMORY_CAP))


def test_the_corpus_holds_every_kind() -> None:
    assert {p.parent.name for p in CASES} == set(COMMAND) and len(CASES) >= 20


@pytest.mark.parametrize("path", CASES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_each_hostile_input_ends_in_one_clean_line(path: Path) -> None:
    argv = [sys.executable, "-m", "llmsizer.cli.main", *COMMAND[path.parent.name], str(path)]
    r = subprocess.run(argv, capture_output=True, text=True, timeout=10, preexec_fn=_cap,
                       env={"PYTHONPATH": str(ROOT / "src"), "PATH": "/usr/bin:/bin"})
    lines = r.stderr.strip().splitlines()
    assert r.returncode == 2, (r.returncode, r.stdout[-500:], r.stderr[-2000:])
    assert lines and "Traceback" not in r.stderr, r.stderr[-2000:]
    assert all(line.startswith("llmsizer: error: ") and path.name in line for line in lines), r.stderr[-2000:]
    assert len(lines) == 1 or path.parent.name == "request", r.stderr[-2000:]
    assert "\x1b" not in r.stderr and r.stdout == "", (r.stderr, r.stdout[:300])
