"""recommend with no latency limit says when options that meet the constraints answer the first token past the
attention limit (review34 N4): `recommend llama-3.1-8b --engine vllm --request-rate 20` listed L4 and T4 options
whose first token came after 9.4 and 3.7 min as "meets", and the table (which shows no reasons) had no line saying
so. The limit is efficiency.ATTENTION_LIMIT_SECONDS, 10 s: Nielsen, "Usability Engineering" (1993), sec. 5.5, the
third response-time limit (a written figure, not ours: the test states 10 s itself).

The options below are synthetic (only their TTFT and queue wait matter to the warning), so the truth is the count
and the slowest one, read off the numbers written here."""

from __future__ import annotations

from llmsizer.recommend import Constraints, Option, slow_first_token_warning

NIELSEN_LIMIT_S = 10.0  # Nielsen 1993, sec. 5.5


def _option(target: str, ttft: float, wait: float | None = None, in_ttft: bool = True,
            status: str = "meets") -> Option:
    return Option(target=target, name=target, provider="p", device="d", device_kind="gpu", count=1,
                  tensor_parallel=1, replicas=1, engine="vllm", weights_format="bf16", status=status, reasons=(),
                  price_per_hour=1.0, ttft_seconds=ttft, queue_wait_seconds=wait, queue_wait_in_ttft=in_ttft)


def test_other_slow_options_are_counted_when_the_chosen_is_quick() -> None:
    meets = [_option("h100", 0.37, status="chosen"), _option("l4", 567.0, 565.9), _option("t4", 221.1, 219.3),
             _option("a100", 0.66), _option("edge", NIELSEN_LIMIT_S)]  # exactly at the limit: within it
    said = slow_first_token_warning(meets, Constraints())
    assert said is not None
    assert said.startswith("2 of the other 4 options that meet the constraints answer a request's first token "
                           "after more than the 10 s attention limit"), said
    assert "the slowest, l4, after 9.4 min" in said and "no latency limit was given (--max-ttft)" in said, said
    assert "attention stays on a dialogue" not in said  # fit's own per-option words stay in each option's reasons


def test_a_queue_wait_outside_the_ttft_counts() -> None:
    """At a concurrency the wait for a running slot (eq. Q3) is not in the TTFT: 2 s + 9 s of waiting is past 10 s."""
    meets = [_option("h100", 0.4, status="chosen"), _option("l4", 2.0, 9.0, in_ttft=False)]
    said = slow_first_token_warning(meets, Constraints())
    assert said is not None and said.startswith("1 of the other 1 options"), said


def test_no_line_when_all_are_quick_or_a_limit_was_given() -> None:
    quick = [_option("h100", 0.4, status="chosen"), _option("a100", 9.99)]
    assert slow_first_token_warning(quick, Constraints()) is None
    slow = [_option("h100", 0.4, status="chosen"), _option("l4", 567.0)]
    assert slow_first_token_warning(slow, Constraints(max_ttft=600)) is None  # the user set the limit


def test_one_line_when_the_chosen_is_slow_too() -> None:
    """The chosen option's line and the others' count are one warning (tests/consistency/test_slow_first_token.py
    reads exactly one "no latency limit was given" line)."""
    meets = [_option("cpu", 4380.0, status="chosen"), _option("h100", 3.0), _option("l4", 60.0)]
    said = slow_first_token_warning(meets, Constraints())
    assert said is not None and said.count("no latency limit was given") == 1, said
    assert "the cheapest option within 10 s: h100" in said and "1 of the other 2 options" in said, said
