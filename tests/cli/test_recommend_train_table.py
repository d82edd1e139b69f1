"""`recommend --train`'s options table says a run's wall clock as every renderer says a duration
(units.format_seconds) and its cost as format_usd. Before, a 7-minute run was '0.1 h', a 40-second one '0.0 h' and
its $0.24 cost '$0' (new-user probe)."""

from __future__ import annotations

import json

from cli_capture import run_cli
from llmsizer.units import format_seconds, format_usd

ARGS = ("recommend", "qwen2.5-0.5b", "--train", "--tokens", "10M")


def test_short_runs_print_minutes_and_seconds_not_zero_hours():
    answer = json.loads(run_cli(*ARGS, "--json", "--top", "4").stdout)
    done = run_cli(*ARGS, "--top", "4")
    assert done.returncode == 0, done.stderr
    rows = [ln for ln in done.stdout.splitlines() if ln.startswith(("chosen ", "meets "))]
    assert len(rows) == 4
    for o, row in zip(answer["options"][:4], rows, strict=True):
        assert o["training_seconds"] < 3600  # the runs this test is about: under an hour
        assert f"  {format_seconds(o['training_seconds'])}  " in row and row.endswith(format_usd(o["run_cost"])), row
        assert " h " not in row and "$0 " not in row + " "


def test_small_device_hours_keep_their_figures_not_zero():
    """The device-h column spells a count as the plan and `train` do (render/markdown.format_value 'count'): a
    7.7-minute run on one device is 0.128 device-hours, which printed '0' (smalls2 #4)."""
    answer = json.loads(run_cli(*ARGS, "--json", "--top", "4").stdout)
    done = run_cli(*ARGS, "--top", "4")
    header = next(ln for ln in done.stdout.splitlines() if "device-h" in ln)
    at = header.index("device-h") + len("device-h")  # the column is right-aligned under its header's end
    rows = [ln for ln in done.stdout.splitlines() if ln.startswith(("chosen ", "meets "))]
    for o, row in zip(answer["options"][:4], rows, strict=True):
        assert o["device_hours"] < 1  # the runs this test is about: under one device-hour
        cell = row[:at].split()[-1]
        assert cell != "0" and abs(float(cell) - o["device_hours"]) <= 0.005 * o["device_hours"], (cell, o)


def test_budget_lines_keep_cents():
    """A run cost against --max-cost is money as every renderer says it (units.format_usd: cents below $100): a
    $0.24 run against a $0.01 budget said 'run costs $0 > $0', the chosen option '($0, 7.7 min)' (smalls2 #3)."""
    answer = json.loads(run_cli(*ARGS, "--max-cost", "0.01", "--json", "--top", "3").stdout)
    assert not answer["options"] and answer["rejected"]
    for o in answer["rejected"][:3]:
        assert o["run_cost"] > 0.01 and o["reasons"] == [f"run costs {format_usd(o['run_cost'])} > $0.01"], o
    text = run_cli(*ARGS, "--max-cost", "0.01", "--top", "3").stdout
    assert "$0 " not in text and f"run costs {format_usd(answer['rejected'][0]['run_cost'])} > $0.01" in text
    chosen = json.loads(run_cli(*ARGS, "--json", "--top", "1").stdout)["chosen"]
    assert f"cheapest run that meets every constraint ({format_usd(chosen['run_cost'])}, " in chosen["reasons"][0]
