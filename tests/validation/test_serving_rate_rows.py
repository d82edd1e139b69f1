"""validation/serving_rate.csv: published OPEN-loop runs (requests sent at a rate, a Poisson process) against
fit's rate path, the one `fit --request-rate` users get (formulas/serving_queue.py eq. Q10; its core is
estimate/serving_load.py under_rate, tested below), held out: no constant is fitted on them."""

from __future__ import annotations

import math

import pytest

from llmsizer.catalog.hardware import builtin_catalog
from llmsizer.catalog.models import find
from llmsizer.errors import InputError
from llmsizer.estimate import efficiency as E
from llmsizer.estimate import engines as ENG
from llmsizer.estimate.inference.vllm import vllm_batch_defaults
from llmsizer.estimate.serving_load import under_rate
from llmsizer.estimate.speed import estimate_speed
from llmsizer.validation_cases import SERVING_TTFT, serving_rate_cases

H100 = builtin_catalog().devices["h100-sxm"]
CHUNK = vllm_batch_defaults(H100.memory_bytes)[1]


def _speed_at(c: int) -> object:
    """SR01's speed (Qwen3-0.6B bf16 on one H100 SXM, 512 + 128 tokens, vLLM 0.19.0) at ``c`` sequences."""
    return estimate_speed(find("qwen3-0.6b").spec(), H100, 1, weights_format="bf16", prompt_tokens=512,
                          output_tokens=128, concurrency=c, kv_dtype="bf16", engine="vllm", engine_version="0.19.0")


def test_the_rows_are_held_out_and_estimated() -> None:
    cases = {c.id: c for c in serving_rate_cases()}
    assert set(cases) == {"SR01"}
    c = cases["SR01"]
    assert c.kind == SERVING_TTFT and c.predicted and not c.excluded
    assert c.measured == pytest.approx(0.03893)
    assert c.within  # a factor of 2 either way (the kind's tolerance)
    # the server time per request is SL01's, the same named parameter fit uses: nothing fitted on this row
    assert ENG.API_SERVER_SECONDS["vllm"] == E.VLLM_API_SERVER_SECONDS.expected
    # scored through fit (review32 N4); the bare fixed point over the idle speeds gives the same figure today, so a
    # drift between fit's rate search and serving_load.under_rate shows here
    s = under_rate(_speed_at, "vllm", 16.0, CHUNK)
    assert s is not None and c.predicted == s.ttft_seconds


def test_the_requests_in_flight_are_a_fixed_point() -> None:
    """The decode step is timed at the requests in flight that Little's law gives at that step (eq. Q10c)."""
    s = under_rate(_speed_at, "vllm", 16.0, CHUNK)
    assert s is not None and s.load is not None
    assert s.load["concurrency"] == math.ceil(s.load["in_flight"]) == s.concurrency
    assert s.load["decode_step_seconds"] == _speed_at(s.concurrency).decode.seconds
    assert s.load["requests_per_second"] == 16.0
    assert s.tokens_per_second == pytest.approx(16.0 * 128)
    # more traffic: more in flight, a longer wait for the first token
    more = under_rate(_speed_at, "vllm", 32.0, CHUNK)
    assert more.load["in_flight"] > s.load["in_flight"] and more.ttft_seconds > s.ttft_seconds


def test_a_rate_above_the_capacity_is_refused() -> None:
    with pytest.raises(InputError, match="capacity"):
        under_rate(_speed_at, "vllm", 1.0 / E.VLLM_API_SERVER_SECONDS.expected + 1.0, CHUNK)


def test_a_static_batch_engine_has_no_rate_model() -> None:
    assert under_rate(_speed_at, "transformers", 4.0) is None


def test_the_closed_loop_model_at_the_derived_concurrency_agrees() -> None:
    """The closed model (eqs. Q6', Q9a) at the requests in flight the open one derives serves about the same rate and
    first-token time: a fixed population of C and a varying one of mean C differ only by their spread (SR01's case:
    closed at 6 requests 17.3 requests/s and 37.5 ms, open at 16/s 5.6 in flight and 39.3 ms)."""
    from llmsizer.estimate.serving_load import under_load

    opened = under_rate(_speed_at, "vllm", 16.0, CHUNK)
    closed = under_load(_speed_at(opened.concurrency), "vllm", CHUNK)
    assert closed.load["requests_per_second"] == pytest.approx(16.0, rel=0.15)
    assert closed.ttft_seconds == pytest.approx(opened.ttft_seconds, rel=0.15)
