"""The unpinned climb of a fit at a rate with no degree given (estimate/fit.py ``fit``, after
``rate_layout_seconds``' pinned climbs), two shortcuts that must be exact, each checked against that climb run in
full (the pinned climbs not handed to it):

- every layout refused pinned, and eq. Q13 refusing every pair of layouts (under vLLM each degree's share on each
  smaller degree's grid): the fit is answered without the climb (``_refused_on_every_layout``), a refusal-only one
  refused, any other with the refusal on the layout carrying most (``most_carried``); the full climb ends alike (every
  field of the answer), and where the skip does not fire the two outcomes are the same;
- a layout answered pinned: the climb reads the quickest layout's pinned fits in place of its own wherever that layout
  fits (``replay``), and makes its own only where it answers; its answer (``to_dict()``, every field) is the full
  climb's, refusal-only or not."""

from __future__ import annotations

import math
import os
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import llmsizer.estimate.fit as F
from llmsizer.catalog.models import find
from llmsizer.errors import InputError
from llmsizer.estimate.fit import RateOverloadError, fit

MODELS = ["llama-3.1-8b", "qwen2.5-7b", "qwen3-0.6b", "gemma-2-9b-it", "qwen3-30b-a3b"]
DEVICES = ["h100-sxm", "a100-40gb", "l4", "a10g", "t4"]


def _outcome(refusal_only: bool = True, **kw: Any) -> tuple[Any, ...]:
    """A fit as its caller reads it: refused, or the answer in full; any other error by its words."""
    try:
        return ("answer", fit(refusal_only=refusal_only, fits_at=False, **kw).to_dict())
    except RateOverloadError:
        return ("refused",)
    except InputError as e:
        return (type(e).__name__, str(e))


def _skipped_and_full(refusal_only: bool = True, **kw: Any) -> tuple[tuple[Any, ...], tuple[Any, ...], Counter[str]]:
    """The fit with the skip (the skips that fired, the fits it made) and without it (the full climb)."""
    seen: Counter[str] = Counter()
    certain, fit_at = F._refused_on_every_layout, F._fit_at

    def counted(*a: Any) -> Any:
        out = certain(*a)
        seen["skips"] += out is not None
        return out

    def fits(*a: Any, **k: Any) -> Any:
        seen["fits"] += 1
        return fit_at(*a, **k)

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(F, "_refused_on_every_layout", counted)
        mp.setattr(F, "_fit_at", fits)
        early = _outcome(refusal_only, **kw)
        seen["skipped fits"], seen["fits"] = seen["fits"], 0
        mp.setattr(F, "_refused_on_every_layout", lambda *a: None)
        full = _outcome(refusal_only, **kw)
    return early, full, seen


def _answers(refusal_only: bool, **kw: Any) -> tuple[tuple[Any, ...], tuple[Any, ...], Counter[str]]:
    """The fit with the pinned climbs handed to the unpinned one and with none handed (``rate_layout_seconds``
    called without ``climbs``: no replay, no skip), and the fits each made."""
    seen: Counter[str] = Counter()
    layouts, fit_at = F.rate_layout_seconds, F._fit_at

    def fits(*a: Any, **k: Any) -> Any:
        seen["fits"] += 1
        return fit_at(*a, **k)

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(F, "_fit_at", fits)
        handed = _outcome(refusal_only, **kw)
        seen["handed fits"], seen["fits"] = seen["fits"], 0
        mp.setattr(F, "rate_layout_seconds", lambda *a: layouts(*a[:6]))
        full = _outcome(refusal_only, **kw)
    return handed, full, seen


@settings(max_examples=60, deadline=None)
@given(model=st.sampled_from(MODELS), device=st.sampled_from(DEVICES), count=st.sampled_from([2, 4, 8]),
       engine=st.sampled_from(["vllm", "vllm", "sglang"]), weights=st.sampled_from([None, "fp8", "awq-int4"]),
       context=st.sampled_from([2048, 4096, 16384]), output=st.sampled_from([128, 512]),
       log_rate=st.floats(math.log(0.5), math.log(150.0)), refusal_only=st.booleans())
def test_the_skipped_climb_answers_as_the_full_one(model: str, device: str, count: int, engine: str,
                                                   weights: str | None, context: int, output: int,
                                                   log_rate: float, refusal_only: bool) -> None:
    early, full, seen = _skipped_and_full(
        refusal_only, model=find(model).spec(), hardware=device, count=count, engine=engine, weights=weights, context=context,
        output_tokens=output, request_rate=round(math.exp(log_rate), 3))
    assert early == full
    if seen["skips"]:  # every tensor-parallel layout refused: refused, or answered on a layout beyond them (stages,
        # data-parallel ranks: fit._rate_with_stages tries them by the one rule where eq. TP5 or a machine rules out TP)
        beyond = early[0] == "answer" and (early[1].get("data_parallel", 1) > 1
                                           or early[1].get("pipeline_parallel", 1) > 1)
        assert beyond or (early == ("refused",) if refusal_only else early[0] == "answer" and not early[1]["fits"])


@pytest.mark.parametrize("refusal_only", [True, False])
@pytest.mark.parametrize(("device", "count", "rate"), [
    # llama-3.1-8b bf16, 4k/512: every degree's admitted sequences serve less than its share (TP 1: 8 replicas of
    # ~1.6/s each at 2.5/s; TP 8: one of ~12.7/s at 20/s), as the bench's a100-sxm-40gb x 8 at 20/s
    ("a100-40gb", 8, 20.0),
    ("l4", 4, 5.0),
])
def test_the_skip_fires_and_saves_the_climb(device: str, count: int, rate: float, refusal_only: bool) -> None:
    early, full, seen = _skipped_and_full(
        refusal_only, model=find("llama-3.1-8b").spec(), hardware=device, count=count, engine="vllm", weights="bf16",
        context=4096, output_tokens=512, request_rate=rate)
    assert early == full
    assert early == ("refused",) if refusal_only else early[0] == "answer" and "rate_capacity" in early[1]["details"]
    assert seen["skips"] == 1
    assert seen["skipped fits"] < seen["fits"]  # the pinned climbs only; the full fit climbs again unpinned


@settings(max_examples=40, deadline=None)
@given(model=st.sampled_from(MODELS), device=st.sampled_from(DEVICES), count=st.sampled_from([2, 4, 8]),
       engine=st.sampled_from(["vllm", "vllm", "sglang"]), context=st.sampled_from([2048, 4096, 16384]),
       output=st.sampled_from([128, 512]), log_rate=st.floats(math.log(0.2), math.log(40.0)),
       refusal_only=st.booleans())
def test_the_replayed_climb_answers_as_the_full_one(model: str, device: str, count: int, engine: str, context: int,
                                                    output: int, log_rate: float, refusal_only: bool) -> None:
    handed, full, _ = _answers(refusal_only, model=find(model).spec(), hardware=device, count=count, engine=engine,
                               context=context, output_tokens=output, request_rate=round(math.exp(log_rate), 3))
    assert handed == full


@pytest.mark.parametrize("refusal_only", [True, False])
def test_the_replay_answers_in_full_and_saves_the_climb(refusal_only: bool) -> None:
    """llama-3.1-8b on 8 x H100 at 20 requests/s (the bench's p5 shape): TP 1 x 8 answers pinned, and the unpinned
    climb makes only its answer's fit and admission's."""
    handed, full, seen = _answers(refusal_only, model=find("llama-3.1-8b").spec(), hardware="h100-sxm", count=8,
                                  engine="vllm", context=4096, output_tokens=512, request_rate=20.0)
    assert handed == full and handed[0] == "answer"
    assert seen["handed fits"] < seen["fits"]


@pytest.mark.parametrize(("model", "device", "count", "engine", "context"), [
    ("llama-3.1-8b", "h100-sxm", 8, "vllm", 4096),
    ("qwen3-30b-a3b", "a100-40gb", 4, None, 8192),
    ("gemma-2-9b-it", "l4", 2, "sglang", 16384),
    ("llama-3.1-8b", "apple-m3-max-64gb", 2, "vllm", 4096),  # vLLM on an Apple chip: the stage refuses (None)
])
def test_the_rate_engine_is_the_memory_stages_at_every_rate(model: str, device: str, count: int,
                                                            engine: str | None, context: int) -> None:
    """``_rate_engine`` kept from one rate answers another as the memory stage asked anew at that rate does."""
    spec = find(model).spec()
    kw: dict[str, Any] = dict(headroom=None, engine=engine, weights=None, context=context, output_tokens=256,
                              memory=None, kv_dtype=None, hardware_files=(), host_device=None, engine_version=None,
                              kwh_price=None, tensor_parallel=None, host_memory=None, fits_at=False)
    first = F._rate_engine(spec, device, count, 0.5, {}, kw)
    assert (first is None) == (device.startswith("apple"))
    for rate in (0.5, 3.0, 40.0, 900.0):
        try:
            fresh: str | None = F.fit_memory(spec, device, count, **{k: v for k, v in kw.items() if k != "fits_at"},
                                             concurrency=1, request_rate=rate).result(False).engine
        except InputError:
            fresh = None
        assert F._rate_engine(spec, device, count, rate, {}, kw) == fresh == first


def test_the_refusal_on_the_layout_carrying_most_reads_the_pinned_climbs() -> None:
    """llama-3.1-8b bf16 on 8 x A100-40GB at 20 requests/s (every layout refused, the skip fires): ``most_carried``'s
    pinned fits climb the fits ``rate_layout_seconds`` made; the answer is the one with none handed over (the full
    unpinned climb, then each layout's pinned fit made anew), every field, with fewer fits."""
    handed, full, seen = _answers(False, model=find("llama-3.1-8b").spec(), hardware="a100-40gb", count=8,
                                  engine="vllm", weights="bf16", context=4096, output_tokens=512, request_rate=20.0)
    assert handed == full and handed[0] == "answer" and "rate_capacity" in handed[1]["details"]
    assert seen["handed fits"] < seen["fits"]


def test_the_rate_engine_reads_an_edited_hardware_file_again(tmp_path: Path) -> None:
    """The kept engine is keyed by the hardware file as ``load_catalog`` keys it (its path and modification time):
    the same path edited from a GPU to a CPU box gives the engine a fresh memory stage gives (fit's engine rule: a
    CPU runs llama.cpp, a GPU vLLM), not the one kept for the old file."""
    spec = find("llama-3.1-8b").spec()
    box = tmp_path / "box.yaml"
    kw: dict[str, Any] = dict(headroom=None, engine=None, weights=None, context=4096, output_tokens=256,
                              memory=None, kv_dtype=None, hardware_files=[str(box)], host_device=None,
                              engine_version=None, kwh_price=None, tensor_parallel=None, host_memory=None,
                              fits_at=False)
    engines = []
    for at, kind in ((1_000_000_000, "gpu"), (1_000_000_100, "cpu")):
        box.write_text(f"devices:\n  - {{id: box, name: Box, kind: {kind}, memory: 80GiB, "
                       "memory_bandwidth: 2000 GB/s}\n", "utf-8")
        os.utime(box, (at, at))
        fresh = F.fit_memory(spec, "box", 1, **{k: v for k, v in kw.items() if k != "fits_at"}, concurrency=1,
                             request_rate=1.0).result(False).engine
        engines.append(F._rate_engine(spec, "box", 1, 1.0, {}, kw))
        assert engines[-1] == fresh
    assert engines[0] != engines[1]
