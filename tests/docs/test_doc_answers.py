"""Hand-written figures in the docs that are llmsizer's own answers (tokens/s, hours, GiB, ratios): each is checked
against the answer of the command the doc names beside it, at the doc's own rounding. The doc is the thing under
test: the live answer is the truth it must state (whether the answer itself is right is tested against measurements
elsewhere). Before (docnums): docs/hardware.md's CPU training table quoted the RTX 4090 at 20,254 tokens/s x 0.922,
while `train` answered 17,570 at 0.892 x 0.820 GEMM shapes, so every "vs RTX 4090" ratio was off by 15 %; its
Llama-3.1-8B sentence quoted 122.0 GiB where `train` answers 122.7 (GPU) / 122.2 (CPU host).

The commands run in this one process through the CLI's ``main`` with ``--json``."""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path
from typing import Any

import pytest

from llmsizer.cli.main import main

ROOT = Path(__file__).resolve().parents[2]
GIB = 2**30


def _answer(argv: list[str], capsys: pytest.CaptureFixture[str]) -> dict[str, Any]:
    capsys.readouterr()
    rc = main([*argv, "--json"])
    out = capsys.readouterr().out
    assert rc in (0, 1), (argv, rc, out)
    answer: dict[str, Any] = json.loads(out)
    return answer


def _decimals(figure: str) -> int:
    return len(figure.split(".", 1)[1]) if "." in figure else 0


def _states(figure: str, value: float) -> bool:
    """The doc's figure is the value at the doc's rounding (thousands separators allowed)."""
    figure = figure.replace(",", "")
    return figure == f"{value:.{_decimals(figure)}f}"


def _cpu_training_table() -> tuple[list[str], list[list[str]]]:
    page = (ROOT / "docs" / "hardware.md").read_text("utf-8")
    start = page.index("| Qwen2.5-0.5B LoRA r16, 2048 tokens, 10M tokens")
    lines = page[start:].split("\n\n", 1)[0].splitlines()
    command = re.search(r"`(train [^`]*--device X[^`]*)`", lines[0])
    assert command is not None, lines[0]
    rows = [[c.strip() for c in line.strip("|").split("|")] for line in lines[2:]]
    return shlex.split(command.group(1)), rows


def test_cpu_training_table_is_trains_answer(capsys: pytest.CaptureFixture[str]) -> None:
    """docs/hardware.md "CPU training is limited by speed": each row's peak, utilisation, tokens/s, wall clock and
    ratio to the RTX 4090 row are what the table's command answers for the row's device."""
    argv, rows = _cpu_training_table()
    assert len(rows) >= 5 and rows[0][0].startswith("RTX 4090")
    answers = []
    for label, peak, tps, wall, ratio in rows:
        device = re.search(r"\(`([^`]+)`\)", label)
        assert device is not None, label
        i = argv.index("X")
        d = _answer([*argv[:i], *shlex.split(device.group(1)), *argv[i + 1:]], capsys)["duration"]
        answers.append(d)
        m = re.fullmatch(r"([\d.]+) TFLOP/s (\w+)(?: \([^)]*\))? x ([\d.]+)(?: x ([\d.]+) GEMM shapes)?", peak)
        assert m is not None, peak
        assert _states(m.group(1), d["peak_flops"] / 1e12) and m.group(2) == d["peak_key"], (label, peak, d)
        assert _states(m.group(3), d["utilization"]), (label, peak, d["utilization"])
        shape = d["step"].get("shape_efficiency", 1.0)
        assert (m.group(4) is None and shape == 1.0) or (m.group(4) is not None and _states(m.group(4), shape)), (
            label, peak, shape)
        assert _states(tps, d["tokens_per_second"]), (label, tps, d["tokens_per_second"])
        assert wall.endswith(" h") and _states(wall[:-2], d["seconds"] / 3600), (label, wall, d["seconds"])
        assert ratio.endswith("x") and _states(ratio[:-1], answers[0]["tokens_per_second"] / d["tokens_per_second"]), (
            label, ratio)


def test_cpu_training_memory_sentence_is_trains_answer(capsys: pytest.CaptureFixture[str]) -> None:
    """The sentence under the table: Llama-3.1-8B full fine-tuning's memory and budget on the RTX 4090 and the Xeon
    host, from the two commands it names, with the verdicts it states (over / within)."""
    text = " ".join((ROOT / "docs" / "hardware.md").read_text("utf-8").split())
    claims = re.findall(r"needs ([\d.]+) GiB on the RTX 4090, over its ([\d.]+) GiB budget \(`(train [^`]+)`\), and "
                        r"([\d.]+) GiB on a 256 GB Xeon host, within its ([\d.]+) GiB budget \(`(train [^`]+)`\)", text)
    assert len(claims) == 1
    need_gpu, budget_gpu, cmd_gpu, need_cpu, budget_cpu, cmd_cpu = claims[0]
    for need, budget, cmd, fits in ((need_gpu, budget_gpu, cmd_gpu, False), (need_cpu, budget_cpu, cmd_cpu, True)):
        a = _answer(shlex.split(cmd), capsys)
        assert _states(need, a["totals"]["device"]["bytes"] / GIB), (cmd, need, a["totals"]["device"])
        assert _states(budget, a["details"]["memory_budget"] / GIB), (cmd, budget, a["details"]["memory_budget"])
        assert a["details"]["fits"] is fits, cmd
