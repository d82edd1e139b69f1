"""An overshoot of the budget reads "over by X", not "-X left" (issues #12/#16): `fit` of Llama-3.1-70B in Q4_K_M on
2 x RTX 3090 split 3:1 put 30.59 GiB on GPU0 against a 23.00 GiB budget and printed "-7.59 GiB left". The renderer
alone changes; the JSON keeps the signed budget_left_bytes."""

from __future__ import annotations

import json

from cli_capture import run
from llmsizer.render.text import room_left
from llmsizer.units import GiB, format_bytes

ARGS = ("fit", "llama-3.1-70b", "--engine", "llama.cpp", "--weights", "q4_k_m", "--device", "rtx-3090", "--count", "2",
        "--tensor-split", "3,1")


def test_an_overshoot_reads_over_by() -> None:
    code, out, _ = run(*ARGS)
    data = json.loads(run(*ARGS, "--json")[1])
    assert code == 1 and data["fits"] is False
    over = data["memory_per_device"] - data["budget_per_device"]
    assert over > 0 and data["budget_left_bytes"] == -over
    line = next(x for x in out.splitlines() if "memory per device" in x)
    assert line.endswith(f", over by {format_bytes(over)}") and " -" not in line


def test_room_left_words() -> None:
    assert room_left(int(1.5 * GiB)) == "1.50 GiB left"
    assert room_left(0) == f"{format_bytes(0)} left"
    assert room_left(-int(8.99 * GiB)) == "over by 8.99 GiB"
