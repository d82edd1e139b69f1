"""probe23 D1: `recommend --request-rate` over several copies and `fit --count` of the same deployment gave two
answers (7 x aws-g6e.xlarge, llama-3.1-8b fp8 on vLLM, 8k context, 512 output tokens, 5 requests/s: recommend
TTFT 6.2425 s, 17.747 tok/s/user, running_sequences 21 per copy; fit 6.2498 s, 17.150, 152 over every replica).
fit splits the requests in flight over its replicas and times the busiest (the rounded-up share); recommend timed
one copy at rate / 7. Now every option is fit's answer for its layout and count: the same speed, queue and
`running_sequences` (over every replica, as fit's)."""

from __future__ import annotations

import pytest

from llmsizer.estimate.fit import fit
from llmsizer.recommend import recommend_inference

KW = dict(context=8192, output_tokens=512, request_rate=5)


@pytest.fixture(scope="module")
def rec():
    return recommend_inference("llama-3.1-8b", **KW)


def test_every_option_is_fit_with_its_layout_and_count(rec) -> None:
    assert rec.options
    first = rec.options[0]
    assert (first.target, first.count, first.engine, first.weights_format) == ("aws-g6e.xlarge", 7, "vllm", "fp8")
    for o in rec.options[:12]:
        r = fit("llama-3.1-8b", o.target, o.count, engine=o.engine, weights=o.weights_format,
                tensor_parallel=o.tensor_parallel, **KW)
        assert r.fits and r.speed is not None, o.target
        assert o.replicas == r.replicas, o.target
        assert o.ttft_seconds == r.speed.ttft_seconds, o.target
        assert o.tokens_per_second_per_user == r.speed.tokens_per_second_per_user, o.target
        assert o.running_sequences == r.details["running_sequences"], o.target
        assert o.queue_wait_seconds == r.details.get("queue_wait_seconds"), o.target
        assert o.tokens_per_second == pytest.approx(r.tokens_per_second_total, rel=1e-12), o.target


def test_the_probe_case_times_the_busiest_replica(rec) -> None:
    o = rec.options[0]
    r = fit("llama-3.1-8b", "aws-g6e.xlarge", 7, engine="vllm", weights="fp8", **KW)
    # fit's deployment: 152 running over 7 replicas, the busiest at ceil(152 / 7) = 22 (a copy alone at 5/7: 21)
    assert r.details["running_sequences"] == 152 and r.speed.load["concurrency"] == 22
    assert o.running_sequences == 152 and o.ttft_seconds == r.speed.ttft_seconds
