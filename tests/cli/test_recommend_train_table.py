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
