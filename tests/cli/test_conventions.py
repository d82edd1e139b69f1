"""CLI conventions users expect (issue #11): "did you mean", variant names, engine aliases, stdin requests,
a fast --version, shell completion, output file permissions. Run through the real entry point."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SRC = str(ROOT / "src")


def run(*args: str, stdin: str | None = None, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    e = dict(os.environ, PYTHONPATH=SRC, **(env or {}))
    return subprocess.run([sys.executable, "-m", "llmsizer.cli.main", *args], capture_output=True, text=True,
                          env=e, input=stdin, timeout=120)


def one_line_error(r: subprocess.CompletedProcess) -> str:
    assert r.returncode == 2, (r.returncode, r.stderr)
    assert r.stderr.count("\n") == 1 and "Traceback" not in r.stderr, r.stderr
    return r.stderr


# ------------------------------------------------------------------------------------------ did you mean

@pytest.mark.parametrize(("args", "meant"), [
    (["trian"], "'train'"),
    (["request", "chek", "x.yaml"], "'check'"),
    (["infer", "llama-3.1-8b", "--contxt", "8k"], "'--context'"),
    (["infer", "llama-3.1-8b", "--concurency=2"], "'--concurrency'"),
    (["infer", "llama-3.1-8b", "--engine", "vlm"], "'vllm'"),
    (["infer", "llama-3.1-8bb"], "'llama-3.1-8b'"),
    (["inspect", "qwen3-8"], "'qwen3-8b'"),
])
def test_mistyped_names_get_one_line_with_did_you_mean(args, meant):
    err = one_line_error(run(*args))
    assert "did you mean" in err and meant in err, err


def test_nothing_close_suggests_nothing():
    err = one_line_error(run("xyzzy-frobnicate"))
    assert "did you mean" not in err
    err = one_line_error(run("infer", "totally-unknown-thing"))
    assert "unknown model 'totally-unknown-thing'" in err and "did you mean" not in err


def test_close_matches_helper_is_case_insensitive_and_keeps_spelling():
    from llmsizer.suggest import close_matches, did_you_mean
    assert close_matches("LLAMACP", ["transformers", "vllm", "llamacpp"]) == ["llamacpp"]
    assert did_you_mean("--contxt", ["--context", "--concurrency"], n=1) == "; did you mean '--context'?"
    assert did_you_mean("zzz", ["--context"]) == ""
