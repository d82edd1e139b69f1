"""A format search that names a rung below one that fits in memory says why (probe33 D1).

`fit qwen3.5-122b-a10b --device a100-pcie-80gb --context 16k --concurrency 8` named llama.cpp's Q3_K_M "the best
format on llamacpp's ladder that does" while Q4_K_M fits in memory too: Q4_K_M decodes under recommend's reading-speed
floor (format_search.READING_FLOOR), the rule the search holds each user to when no limit is given. The choice is
the rule's; the answer must say the floor is why, on every face (fit's hint, `models --fits-on`, capacity's
alternative). The truth here is the rule itself: fit at each rung of llama.cpp's ladder (estimate/formats.py
format_ladder, best first), the first that fits in memory and the first that fits at reading speed."""

from __future__ import annotations

import pytest

from cli_capture import run, run_json
from llmsizer import fit
from llmsizer.estimate.format_search import READING_FLOOR
from llmsizer.estimate.formats import format_ladder, weights_asked
from llmsizer.models import load_model

MODEL, DEVICE = "qwen3.5-122b-a10b", "a100-pcie-80gb"
LOAD = dict(context=16384, concurrency=8)
FLAGS = ("--context", "16k", "--concurrency", "8")


@pytest.fixture(scope="module")
def ladder_truth() -> tuple[str, str, float]:
    """(the best llama.cpp rung that fits in memory, the best that fits at reading speed, the former's speed per
    user), from fit at each rung."""
    spec = load_model(MODEL)
    in_memory = meets = None
    user = 0.0
    for fmt in format_ladder(spec, "llamacpp", None):
        r = fit(spec, DEVICE, engine="llamacpp", weights=weights_asked(fmt), **LOAD)
        if not r.fits:
            continue
        speed = r.speed.tokens_per_second_per_user if r.speed is not None else None
        assert speed is not None
        if in_memory is None:
            in_memory, user = fmt, speed
        if speed >= READING_FLOOR:
            meets = fmt
            break
    assert in_memory is not None and meets is not None
    assert in_memory != meets, "the premise: a better rung fits in memory but misses the floor"
    return in_memory, meets, user


def test_fit_hint_names_the_rung_that_fits_in_memory_and_the_floor(ladder_truth: tuple[str, str, float]) -> None:
    in_memory, meets, user = ladder_truth
    code, d = run_json("fit", MODEL, "--device", DEVICE, *FLAGS)
    at = d["fits_at"]
    assert code == 1 and at["weights"] == meets and at["same_engine"] is False, at
    # the cross-engine branch carries the floor as the same-engine one does (render/fit_text.py _reading_words)
    assert at["meets_reading_speed"] is True and at["reading_speed"] == READING_FLOOR, at
    assert at["tokens_per_second_per_user"] >= READING_FLOOR
    passed = at["passed_over"]
    assert passed["weights"] == in_memory and passed["tokens_per_second_per_user"] == pytest.approx(user), passed
    assert passed["tokens_per_second_per_user"] < READING_FLOOR
    code, out, _ = run("fit", MODEL, "--device", DEVICE, *FLAGS)
    hint = next(ln for ln in out.splitlines() if ln.startswith("hint:"))
    assert "at reading speed (5.29 tokens/s per user" in hint, hint
    assert passed["why"] in hint and in_memory.removeprefix("gguf:").upper() in passed["why"], hint
    assert "under the 5.29 tokens/s reading speed" in passed["why"], passed


def test_fits_on_row_says_why(ladder_truth: tuple[str, str, float]) -> None:
    in_memory, meets, _ = ladder_truth
    code, d = run_json("models", "--fits-on", DEVICE, *FLAGS, MODEL)
    (m,) = d["models"]
    assert m["weights_format"] == meets and m["status"] == "meets", m
    assert m["passed_over"] and in_memory.removeprefix("gguf:").upper() in m["passed_over"], m
    code, out, _ = run("models", "--fits-on", DEVICE, *FLAGS, MODEL)
    assert m["passed_over"] in out, out
