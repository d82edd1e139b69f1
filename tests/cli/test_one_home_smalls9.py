"""smalls9: rules that lived in several places, each with one home now.

1. host RAM (--host-memory) on a device whose memory is its own: fit and `models --fits-on` refused it in two
   wordings; one now (estimate/device.py own_memory_refusal).
2. recommend's reading-speed floor: rounded in three callers and written by each surface itself; one value
   (format_search.READING_FLOOR) and one writer (units.format_limit). The floor's truth: Brysbaert (2019) 238 words a
   minute x 4/3 tokens per word, stated to two decimals (5.29); a floor given (7.25) is written as given."""

from __future__ import annotations

import re

from cli_capture import run

STATED = f"{238 / 60 * 4 / 3:.2f}"  # 5.29: the floor as stated, independent of llmsizer


def _error_line(err: str) -> str:
    return next(line for line in err.splitlines() if line.startswith("llmsizer: error:"))


def test_host_memory_on_a_mac_is_refused_in_one_wording_by_fit_and_models_fits_on() -> None:
    code, _, fit_err = run("fit", "qwen3-8b", "--device", "apple-m3-max-64gb", "--host-memory", "64GiB")
    code2, _, list_err = run("models", "--fits-on", "apple-m3-max-64gb", "--host-memory", "64GiB")
    assert code == code2 == 2
    assert _error_line(fit_err) == _error_line(list_err)  # before: "... (llama.cpp's experts in host memory); ..."
    assert "--host-memory" in _error_line(fit_err) and "--memory" in _error_line(fit_err)


def test_the_reading_floor_reads_the_same_on_fit_auto_recommend_and_the_search() -> None:
    _, auto, _ = run("fit", "qwen2.5-72b", "--device", "rtx-4090", "--engine", "llamacpp", "--auto",
                     "--host-memory", "64GiB", "--host-device", "amd-epyc-9654")
    _, rec, _ = run("recommend", "qwen3-8b", "--top", "1")
    hint = re.findall(r"reading speed \(([0-9.]+) tokens/s per user, recommend's floor\)", auto)
    assumed = re.findall(r"user_tokens_per_second=([0-9.]+) \(default\)", rec)
    missed = re.findall(r"tokens/s per user < ([0-9.]+)", rec)  # a candidate the search rejects (format_search)
    assert hint and assumed and missed
    assert set(hint) == set(assumed) == set(missed) == {STATED}


def test_a_non_integer_floor_given_is_written_as_given() -> None:
    _, rec, _ = run("recommend", "qwen3-8b", "--top", "1", "--user-tokens-per-second", "7.25")
    missed = re.findall(r"tokens/s per user < ([0-9.]+)", rec)
    assert missed and set(missed) == {"7.25"}
