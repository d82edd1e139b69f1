"""Small request files for tests: a minimal valid job of each kind, with the lines a test wants to add."""

from __future__ import annotations

import textwrap

TRAIN_DEFAULTS = {
    "model": "model: {name: qwen2.5-0.5b}",
    "method": "method: lora",
    "dataset": "dataset: {tokens: 10M tokens}",
}
INFER_DEFAULTS = {
    "model": "model: {name: qwen2.5-0.5b}",
    "traffic": "traffic: {concurrency: {typical: 2, peak: 8}, context: {typical: 2k, peak: 4k}}",
}
MARK = "#<"


def job_yaml(kind: str, body: str = "", *, name: str | None = None, top: str = "") -> str:
    """A request with one job of ``kind``; ``body`` lines (job keys, unindented) replace the defaults they name."""
    name = name or ("ft" if kind == "training" else "chat")
    body_lines = textwrap.dedent(body).strip("\n").splitlines() if body.strip() else []
    keys = {ln.split(":")[0].strip() for ln in body_lines if ln and not ln.startswith(" ")}
    lines = ["version: 1"] + (textwrap.dedent(top).strip("\n").splitlines() if top.strip() else [])
    lines += ["jobs:", f"  - name: {name}", f"    kind: {kind}"]
    defaults = TRAIN_DEFAULTS if kind == "training" else INFER_DEFAULTS
    lines += ["    " + v for k, v in defaults.items() if k not in keys]
    lines += ["    " + ln for ln in body_lines]
    return "\n".join(lines) + "\n"


def marked_line(text: str) -> int:
    """1-based line of the line carrying the ``#<`` marker."""
    for i, ln in enumerate(text.splitlines(), 1):
        if MARK in ln:
            return i
    raise AssertionError("no #< marker in the test request")
