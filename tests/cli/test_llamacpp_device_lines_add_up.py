"""Each llama.cpp device line (infer's placement, fit --auto's table) shows every part of its total: a recurrent
model's per-sequence state (Mamba-2 conv + SSM state, llama.cpp's recurrent cells) and the runtime were left out, so
the parts shown added to 2.47 GiB of a 3.00 GiB line (new-user probe). Checked by adding the printed parts back up,
against the JSON's own component split (which the estimate tests check against llama.cpp's rules)."""

from __future__ import annotations

import re

import pytest

from cli.cli_run import answer, run
from llmsizer.units import parse_bytes

SIZE = r"(\d[\d,.]* (?:B|KiB|MiB|GiB))"
ARGS = ["mamba-codestral-7b-v0.1", "--engine", "llamacpp", "--device", "rtx-3090", "--weights", "q4_k_m",
        "--context", "32k", "--concurrency", "4"]


def _close(parts: list[int], total: int) -> bool:
    return abs(sum(parts) - total) <= 0.01 * 2**30 * len(parts)  # two printed decimals per part


def test_infer_placement_lines_add_up(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(["infer", *ARGS, "--gpus", "2"], capsys)
    assert code == 0
    _, d = answer(["infer", *ARGS, "--gpus", "2"], capsys)
    devices = {x["device"]: x for x in d["details"]["split"]["devices"]}
    assert devices["GPU0"]["recurrent_state"] > 0
    lines = [ln for ln in out.splitlines() if re.match(r"\s+(GPU\d|host)\s", ln)]
    assert len(lines) == len(devices)
    for ln in lines:
        sizes = [parse_bytes(s) for s in re.findall(SIZE, ln)]
        parts, total = sizes[:-1], sizes[-1]
        assert _close(parts, total), ln
        if devices[ln.split()[0]]["recurrent_state"]:
            assert "state" in ln


def test_fit_auto_table_rows_add_up(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["fit", *[a for a in ARGS if a not in ("--engine", "llamacpp")], "--auto", "--count", "2"]
    code, out, _ = run(argv, capsys)
    assert code == 0
    header = next(ln for ln in out.splitlines() if ln.startswith("device"))
    cols = header.split()
    assert "state" in cols and "runtime" in cols
    for ln in out.splitlines():
        if not re.match(r"(GPU\d|host)\s", ln):
            continue
        sizes = [parse_bytes(s) for s in re.findall(SIZE, ln)]
        # weights, KV, state, compute, runtime, total (then free and left on a GPU)
        parts, total = sizes[:5], sizes[5]
        assert _close(parts, total), ln
