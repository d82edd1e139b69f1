"""ratedp: `fit --request-rate R` takes data-parallel (expert-parallel) layouts by the rule `fit --concurrency C`
takes them (estimate/fit.py ``with_pipeline_layouts``: where eq. TP5 refuses a tensor-parallel degree or tensor
parallelism does not fit within a machine), ranked at a rate by the mean request seconds. Before, the rate path
tried tensor and pipeline layouts only: MiniMax-M2.7 (FP8 blocks, TP 8 refused by eq. TP5) on 8 x H100 under vLLM
took TP 2 x DP 4 (EP 8) at 64 in flight but TP 4 x PP 2 at the rate that puts 64 in flight (224 in flight there).
The truths are fit's own answers at the layouts written by hand (`--tp T --dp D --enable-expert-parallel`), with and
without the rate, and Little's law (formulas/serving_queue.py eq. Q10c): no number is copied from llmsizer."""

from __future__ import annotations

import math

import pytest

from llmsizer import fit

M = "minimax-m2.7"
OUT = 256


def _at(**kw: object):
    return fit(M, "h100-sxm", 8, engine="vllm", output_tokens=OUT, fits_at=False, **kw)


@pytest.fixture(scope="module")
def closed():
    return _at(concurrency=64)


def test_premise_at_64_in_flight_fit_takes_a_data_parallel_layout(closed) -> None:
    assert closed.fits and closed.data_parallel > 1 and closed.expert_parallel


def test_the_rate_that_puts_as_many_in_flight_takes_the_same_layout(closed) -> None:
    """Little's law: the concurrency answer's requests/s (its output tokens/s / the output tokens) puts about its
    64 requests in flight; the rate's own ranking (mean request seconds) then takes the same layout, since the
    layout with the most tokens/s at C in flight has the shortest request time there."""
    rate = closed.tokens_per_second_total / OUT
    r = _at(request_rate=rate)
    assert r.fits and (r.layout_text, r.replicas) == (closed.layout_text, closed.replicas)
    in_flight = float(r.speed.load["in_flight"]) * r.ranks
    assert abs(in_flight - 64) / 64 < 0.1  # the equivalence: about the concurrency's count in flight


def test_the_rate_answer_is_fit_pinned_to_its_layout(closed) -> None:
    rate = closed.tokens_per_second_total / OUT  # a load where the expert-parallel layout is the fastest
    r = _at(request_rate=rate)
    assert r.data_parallel > 1 and r.expert_parallel
    pinned = _at(request_rate=rate, tensor_parallel=r.tensor_parallel, data_parallel=r.data_parallel,
                 expert_parallel=True)
    assert (r.memory_per_device, r.tokens_per_second_total, r.details["concurrency"]) == (
        pinned.memory_per_device, pinned.tokens_per_second_total, pinned.details["concurrency"])
    (a,) = [a for a in r.estimate.assumptions if a.name == "data_parallel"]
    assert a.default and "fit's choice" in a.why and "shortest mean request time" in a.why


def test_data_parallel_ranks_given_at_a_rate_choose_each_ranks_degree() -> None:
    """`--dp 4 --enable-expert-parallel --request-rate 1`: each rank's degree is chosen among those of 8 / 4 devices
    (integ48 offered TP 4 and refused its own choice: 'data_parallel 4 x tensor_parallel 4 does not divide')."""
    r = _at(request_rate=1.0, data_parallel=4, expert_parallel=True)
    assert r.fits and r.data_parallel == 4 and r.tensor_parallel * 4 * r.replicas == 8


def test_the_requests_in_flight_count_every_rank() -> None:
    """The speed is one rank's at its share of the rate (eq. EP3): the requests in flight in all are its mean x the
    ranks (Little's law over the whole deployment: rate x the mean request seconds)."""
    r = _at(request_rate=4.0, tensor_parallel=2, data_parallel=4, expert_parallel=True)
    load = r.speed.load
    assert r.ranks == 4
    assert math.isclose(float(load["in_flight"]) * r.ranks, 4.0 * float(load["request_seconds"]), rel_tol=1e-6)
    assert r.details["concurrency"] >= float(load["in_flight"]) * r.ranks


def test_the_capacity_is_every_ranks() -> None:
    """A refused rate states the layout's capacity (all ranks); a rate 3 % under it is carried, 3 % over refused."""
    past = _at(request_rate=200.0, tensor_parallel=2, data_parallel=4, expert_parallel=True)
    cap = float(past.details["rate_capacity"])
    assert not past.fits and cap > 0 and "per data-parallel rank" in str(past)
    under = _at(request_rate=0.97 * cap, tensor_parallel=2, data_parallel=4, expert_parallel=True)
    over = _at(request_rate=1.03 * cap, tensor_parallel=2, data_parallel=4, expert_parallel=True)
    assert under.fits and not over.fits


def test_the_layouts_line_names_each_full_layout(closed) -> None:
    """Inside a data-parallel answer each ranked degree is named with its ranks ('TP 2 x DP 4 (EP 8) x 1'), not as
    one rank's 'TP 2 x 1'."""
    rows = closed.details["tensor_parallel_layouts"]
    assert {d["layout"] for d in rows} >= {f"{closed.layout_text} x {closed.replicas}"}
    line = next(ln for ln in str(closed).splitlines() if ln.startswith("tensor parallel layouts"))
    for d in rows:
        assert f"{d['layout']}: " in line and d["layout"].startswith(f"TP {d['tensor_parallel']} x DP ")
    assert "TP 2 x 1:" not in line and "TP 1 x 2:" not in line
