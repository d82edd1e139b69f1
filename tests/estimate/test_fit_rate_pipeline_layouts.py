"""pplists 2: `fit --request-rate R` takes its layout by the rule `fit` without a rate takes (estimate/fit.py
``with_pipeline_layouts``: tensor parallelism where it fits within a machine, else the pipeline layouts too). Before,
the rate path tried tensor parallelism only: Qwen3.5-122B-A10B FP8 on 2 x H100, vLLM, 256k was DOES NOT FIT at
0.01 requests/s (TP 1 x 2 replicas) where `fit` without a rate answers TP 1 x PP 2. The truths are fit's answers at
the layouts written by hand (`--pp 1`, `--pp 2`), with and without the rate; no number is copied."""

from __future__ import annotations

import pytest

from llmsizer import fit

M = "qwen3.5-122b-a10b"
LOW = 0.01  # requests/s: well under one request in flight


def _at(context: int, **kw: object):
    return fit(M, "h100-sxm", 2, weights="fp8", engine="vllm", context=context, fits_at=False, **kw)


def test_premise_at_256k_tensor_parallelism_alone_does_not_fit_at_the_rate() -> None:
    tp = _at(262144, pipeline_parallel=1, request_rate=LOW)
    pp = _at(262144, pipeline_parallel=2, request_rate=LOW)
    assert not tp.fits and pp.fits and (pp.tensor_parallel, pp.pipeline_parallel) == (1, 2)


@pytest.mark.parametrize("context", [32768, 262144])
def test_a_low_rate_lands_on_the_layout_fit_takes_without_one(context: int) -> None:
    free = _at(context)
    rated = _at(context, request_rate=LOW)
    assert rated.fits and free.fits
    assert (rated.tensor_parallel, rated.pipeline_parallel, rated.replicas) == (
        free.tensor_parallel, free.pipeline_parallel, free.replicas)
    pinned = _at(context, pipeline_parallel=free.pipeline_parallel, request_rate=LOW)  # `fit --pp P` at the rate
    assert (rated.tensor_parallel, rated.memory_per_device, rated.tokens_per_second_total) == (
        pinned.tensor_parallel, pinned.memory_per_device, pinned.tokens_per_second_total)


def test_the_stages_are_said_as_fits_choice_at_the_rate() -> None:
    r = _at(262144, request_rate=LOW)
    (a,) = [a for a in r.estimate.assumptions if a.name == "pipeline_parallel"]
    assert a.default and "fit's choice" in a.why and "shortest mean request time" in a.why


def test_async_scheduling_on_0_13_leaves_the_stages_out_at_the_rate_and_says_so() -> None:
    """The flag's refusal of stages (vLLM 0.10-0.14) holds at a rate too: the answer names the layouts left out
    and the layout that fits without the flag, as fit without a rate does."""
    r = _at(262144, request_rate=LOW, engine_version="0.13", async_scheduling=True)
    assert not r.fits and r.pipeline_parallel == 1
    (line,) = [w for w in r.warnings if w.startswith("pipeline layouts not tried (PP 2)")]
    assert "without it TP 1 x PP 2 fits on these 2 devices" in line


HIGH = 0.2  # requests/s: past what any layout of 2 x H100 carries at 256k (review41 D2)


def _capacity(r) -> float:
    return float(r.details.get("rate_capacity") or 0.0)


def test_a_rate_no_layout_carries_names_the_rate_on_the_layout_that_carries_the_most() -> None:
    """review41 D2: at 0.2 requests/s no layout carries the rate. Before, fit fell back to TP 2, whose memory fits no
    request ("does not start, fix the memory first"), where TP 1 x PP 2 starts. The truth is each layout pinned by
    hand at the rate (`--pp 1`, `--pp 2`): fit takes the one with the most capacity and its refusal names the rate."""
    pinned = {p: _at(262144, pipeline_parallel=p, request_rate=HIGH) for p in (1, 2)}
    assert not any(r.fits for r in pinned.values())
    best = max(pinned, key=lambda p: _capacity(pinned[p]))
    assert _capacity(pinned[best]) > 0 and best == 2  # (the premise: only the stages start)
    r = _at(262144, request_rate=HIGH)
    assert not r.fits and r.pipeline_parallel == best
    assert (r.tensor_parallel, r.memory_per_device) == (pinned[best].tensor_parallel, pinned[best].memory_per_device)
    assert _capacity(r) == _capacity(pinned[best])
    text = str(r)
    assert "fix the memory first" not in text and "does not carry the rate" in text
    assert "TP 1 x PP 2 x 1 replica" in text  # the layout named with its stages (review41 nit)
    (a,) = [a for a in r.estimate.assumptions if a.name == "pipeline_parallel"]
    assert "carries the most of the layouts" in a.why and f"not {HIGH:g}" in a.why
