"""`models --fits-on DEVICE --memory M --headroom H` is `fit MODEL --device DEVICE --memory M --headroom H` for every
listed model: the memory rule (estimate/device.py `usable_memory`: the given memory replaces the catalog's, an Apple
GPU keeps its Metal working-set share of it) and the headroom rule (estimate/verdict.py: budget = memory x (1 -
headroom)) have one home each, and the flags are refused in the same one line as `fit` refuses them."""

from __future__ import annotations

import json
from typing import Any

import pytest

from cli_capture import run
from llmsizer.estimate.fit import fit

GiB = 2**30


def fits_on(*argv: str) -> tuple[int, dict[str, Any]]:
    code, out, err = run("models", *argv, "--json")
    assert code in (0, 1), err
    return code, json.loads(out)


@pytest.mark.parametrize(("query", "device", "memory", "headroom", "engine"), [
    ("qwen3", "rtx-4090", "12GiB", "0.3", None),          # llama.cpp on a desktop GPU: less than the card holds
    ("llama-3.1-8b", "h100-sxm", "40GiB", None, "vllm"),  # vLLM: its pool is utilization x the given memory
    ("qwen2.5", "apple-m3-max-36gb", "24GiB", "0.05", None),  # Apple: the working-set share of the given memory
    ("qwen2.5-0.5b", "intel-xeon-spr-8ch", "16GiB", None, None),  # a CPU with no sourced memory: answered now
    ("qwen3-8b", "g6.xlarge", "20GiB", "0.2", None),      # an instance: its device, count and price
])
def test_each_model_is_what_fit_answers_with_that_memory_and_headroom(query: str, device: str, memory: str,
                                                                      headroom: str | None, engine: str | None) -> None:
    argv = [query, "--fits-on", device, "--memory", memory, "--context", "4k", "--concurrency", "2"]
    argv += [*(["--headroom", headroom] if headroom else []), *(["--engine", engine] if engine else [])]
    _, data = fits_on(*argv)
    mem = int(memory.removesuffix("GiB")) * GiB
    assert data["memory"] == mem and data.get("headroom") == (float(headroom) if headroom else None)
    meets = [m for m in data["models"] if m["status"] == "meets"]
    assert meets, data["models"]
    for m in meets:
        r = fit(m["id"], device, memory=mem, headroom=float(headroom) if headroom else None, engine=m["engine"],
                weights=m["weights_format"], context=4096, concurrency=2)
        assert r.fits and r.memory_per_device == m["memory_per_device"], m["id"]
        assert r.budget_per_device == m["budget_per_device"], m["id"]
        assert r.speed is not None and r.speed.tokens_per_second_per_user == pytest.approx(
            m["tokens_per_second_per_user"])
        # and the budget is the given memory's, not the catalog's (vLLM sizes its pool from the whole device)
        assert any(a["name"] == "device_memory" and a["value"] == f"{mem / GiB:.2f} GiB" and not a["default"]
                   for a in r.to_dict()["assumptions"]), m["id"]


def test_memory_and_headroom_change_the_list_as_they_change_fit() -> None:
    """Less memory or more headroom: fewer models fit, and the largest that fits at the catalog's 24 GiB but not at
    12 GiB is refused by `fit --memory 12GiB` too."""
    base = [m for m in fits_on("qwen3", "--fits-on", "rtx-4090")[1]["models"] if m["status"] == "meets"]
    small = [m for m in fits_on("qwen3", "--fits-on", "rtx-4090", "--memory", "12GiB")[1]["models"]
             if m["status"] == "meets"]
    tight = [m for m in fits_on("qwen3", "--fits-on", "rtx-4090", "--headroom", "0.6")[1]["models"]
             if m["status"] == "meets"]
    assert len(small) < len(base) and len(tight) < len(base)
    lost = {m["id"]: m for m in base}.keys() - {m["id"] for m in small}
    assert lost
    for mid in lost:
        m = next(b for b in base if b["id"] == mid)
        assert not fit(mid, "rtx-4090", memory=12 * GiB, weights=m["weights_format"], engine=m["engine"]).fits


@pytest.mark.parametrize("flags", [
    ["--memory", "1KiB"], ["--memory", "12"], ["--memory", "1e30GiB"], ["--headroom", "1"], ["--headroom", "-0.1"],
    ["--engine", "sglang", "--headroom", "0.2"],
])
def test_bad_memory_or_headroom_is_fits_line(flags: list[str]) -> None:
    code, out, err = run("models", "qwen3-8b", "--fits-on", "rtx-4090", *flags)
    assert (code, out) == (2, "") and len(err.strip().splitlines()) == 1, err
    assert run("fit", "qwen3-8b", "--device", "rtx-4090", *flags)[2] == err


@pytest.mark.parametrize("flag", [["--memory", "24GiB"], ["--headroom", "0.2"]])
def test_memory_and_headroom_need_fits_on(flag: list[str]) -> None:
    code, out, err = run("models", "qwen3", *flag)
    assert (code, out) == (2, "") and f"{flag[0]} needs --fits-on" in err and len(err.strip().splitlines()) == 1


def test_unknown_memory_points_at_the_flag() -> None:
    code, out, err = run("models", "--fits-on", "intel-xeon-spr-8ch")
    assert (code, out) == (2, "") and "give it with --memory" in err
