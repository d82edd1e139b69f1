"""`infer --device NAME --max-concurrency` asks the estimate's own question: the named device's memory and CUDA's
total of it (estimate/device.py), not that memory handed on as a given budget (whose CUDA total is taken as the whole
memory, 479 MiB more on an H100). Before, deepseek-r1 at TP 16 on h100 answered 'largest concurrency that fits: 96'
while the same `infer --concurrency 96` said 'fits: NO ... vLLM admits 94' (found by servepp), and SGLang's
qwen3-30b-a3b on h100 23 beside 22. The truth is the other command's verdict: the largest concurrency fits, one more
does not."""

from __future__ import annotations

import pytest

from cli_capture import run_json

CASES = [
    ("deepseek-r1", "--device", "h100", "--tp", "16", "--engine", "vllm"),
    ("qwen3-30b-a3b", "--device", "h100", "--engine", "sglang"),
    ("llama-3.1-8b", "--device", "a100-40gb", "--engine", "vllm"),
]


@pytest.mark.parametrize("flags", CASES, ids=lambda f: f"{f[0]}-{f[-1]}")
def test_largest_concurrency_is_the_estimates_own_verdict(flags: tuple[str, ...]) -> None:
    _, rev = run_json("infer", *flags, "--max-concurrency")
    largest = rev["reverse"]["max_concurrency"]
    assert largest > 0
    code_at, at = run_json("infer", *flags, "--concurrency", str(largest))
    code_past, past = run_json("infer", *flags, "--concurrency", str(largest + 1))
    assert (code_at, at["details"]["fits"]) == (0, True)
    assert (code_past, past["details"]["fits"]) == (1, False)


def test_given_memory_stays_a_given_budget() -> None:
    """--memory is still the budget the reverse question grows in (CUDA's total taken as it): the same answer as
    the estimate asked with that memory."""
    flags = ("llama-3.1-8b", "--memory", "24GiB", "--engine", "vllm")
    _, rev = run_json("infer", *flags, "--max-concurrency")
    largest = rev["reverse"]["max_concurrency"]
    assert run_json("infer", *flags, "--concurrency", str(largest))[1]["details"]["fits"] is True
    assert run_json("infer", *flags, "--concurrency", str(largest + 1))[1]["details"]["fits"] is False
