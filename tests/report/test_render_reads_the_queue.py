"""render/text.py says the queue from the Estimate's own fields, doing no arithmetic of its own (issue #12/#16).

Before, the queue line rebuilt the requests in flight as running + queued, so the text said whatever that sum was
rather than the concurrency the estimate was sized at; now the estimate carries ``concurrency`` (the workload's, as
given) and the renderer only reads it."""

from __future__ import annotations

from llmsizer import estimate_inference
from llmsizer.render.text import estimate_facts
from llmsizer.result import Estimate

CONCURRENCY = 2000  # above vLLM's default max_num_seqs on an H200 (1024): the rest queue


def _queued() -> Estimate:
    est = estimate_inference("qwen3-0.6b", engine="vllm", device="h200", context=1024, concurrency=CONCURRENCY,
                             output_tokens=200)
    assert est.details["queued_sequences"] > 0  # the premise: some requests wait
    return est


def test_the_estimate_states_the_concurrency_it_was_sized_at() -> None:
    est = _queued()
    d = est.details
    assert d["concurrency"] == CONCURRENCY
    line = next(x for x in estimate_facts(est) if x.startswith("queue:"))
    assert f"min({CONCURRENCY:,} requests," in line, line


def test_the_queue_line_prints_the_fields_it_is_given() -> None:
    """An estimate whose fields were set by hand: the renderer prints each as given (it adds and derives nothing)."""
    est = _queued()
    d = dict(est.details)
    d.update(concurrency=7777, running_sequences=11, queued_sequences=33, need_sequences=22)
    line = next(x for x in estimate_facts(est.but(details=d)) if x.startswith("queue:"))
    assert line.startswith("queue: 11 run at once (min(7,777 requests, ") and "33 requests wait" in line, line
    assert "for the 22 it would run" in line, line
