"""recommend(): constraints respected, reasons given, CPU vs GPU per the seed's reasoning."""

from __future__ import annotations

from pathlib import Path

import pytest

from llmsizer.errors import InputError
from llmsizer.estimate.formats import format_ladder
from llmsizer.models import load_model
from llmsizer.recommend import (
    Constraints,
    recommend_inference,
    recommend_training,
)
from llmsizer.request.quantities import parse_duration

TEST_ONLY = ("test",)


def test_tiny_model_at_low_traffic_goes_to_the_cpu(hw_file: Path) -> None:
    """Seed: 'for smaller parameter scales and lower access volumes, CPU can meet inference needs'."""
    rec = recommend_inference("qwen2.5-0.5b", context=2048, concurrency=1, hardware_files=[hw_file],
                              constraints=Constraints(providers=TEST_ONLY, user_tokens_per_second=10))
    assert rec.chosen is not None and rec.chosen.target == "test-cpu-64" and rec.chosen.is_cpu
    assert any(o.device == "test-gpu" for o in rec.options)  # the GPU also works, at 10x the price
    assert rec.advice and rec.advice[0].startswith("CPU is enough")
    assert "tokens/s per user" in rec.advice[0]


def test_70b_at_high_concurrency_goes_to_gpus(hw_file: Path) -> None:
    """Seed: 'for large models, high-concurrency services ... GPU can provide higher inference efficiency'."""
    rec = recommend_inference("llama-3.1-70b-instruct", context=4096, concurrency=64, hardware_files=[hw_file],
                              constraints=Constraints(providers=TEST_ONLY, tokens_per_second=1000))
    assert rec.chosen is not None and not rec.chosen.is_cpu
    assert (rec.chosen.tokens_per_second or 0) >= 1000
    cpu = [o for o in rec.rejected if o.is_cpu]
    assert cpu and all(o.reasons for o in cpu)
    assert rec.advice[0].startswith("Use a GPU")


@pytest.mark.parametrize("cons", [
    Constraints(providers=TEST_ONLY, max_cost_per_hour=5),
    Constraints(providers=TEST_ONLY, max_ttft=0.5),
    Constraints(providers=TEST_ONLY, user_tokens_per_second=30),
    Constraints(providers=TEST_ONLY, tokens_per_second=500),
])
def test_every_option_meets_the_constraints_and_every_rejection_has_a_reason(hw_file: Path, cons: Constraints) -> None:
    rec = recommend_inference("llama-3.1-8b", context=4096, concurrency=16, hardware_files=[hw_file], constraints=cons)
    for o in rec.options:
        assert o.status in ("chosen", "meets")
        if cons.max_cost_per_hour:
            assert o.price_per_hour is not None and o.price_per_hour <= cons.max_cost_per_hour
        if cons.max_ttft:
            assert o.ttft_seconds is not None and o.ttft_seconds <= cons.max_ttft
        if cons.user_tokens_per_second:
            assert o.tokens_per_second_per_user >= cons.user_tokens_per_second
        if cons.tokens_per_second:
            assert o.tokens_per_second >= cons.tokens_per_second
    assert all(o.status == "rejected" and o.reasons and all(o.reasons) for o in rec.rejected)
    prices = [o.price_per_hour for o in rec.options if o.price_per_hour is not None]
    assert prices == sorted(prices)  # ranked by cost


def test_highest_quality_format_that_fits_is_taken_first(hw_file: Path) -> None:
    # on the 64 GiB CPU box a 0.5B model fits at the top of the llama.cpp ladder: its bf16 checkpoint as GGUF BF16
    rec = recommend_inference("qwen2.5-0.5b", hardware_files=[hw_file], constraints=Constraints(providers=TEST_ONLY))
    cpu = next(o for o in rec.options if o.target == "test-cpu-64")
    assert cpu.weights_format == "gguf:bf16" == format_ladder(load_model("qwen2.5-0.5b"), "llamacpp")[0]
    # a 70B model on the same box drops down the ladder. Published Llama 3 70B GGUF sizes (XiongjieDai README,
    # perplexity table): Q8_0 69.83 GiB, Q6_K 53.91 GiB. The budget is 64 GiB x 0.9 = 57.6 GiB, so Q8_0 cannot
    # fit and Q6_K (plus ~1.3 GiB of 4k-token KV cache) can: Q6_K is the answer.
    rec = recommend_inference("llama-3.1-70b-instruct", hardware_files=[hw_file],
                              constraints=Constraints(providers=TEST_ONLY))
    cpu = next(o for o in rec.options + rec.rejected if o.target == "test-cpu-64")
    assert cpu.weights_format == "gguf:q6_k"


def test_laptop_and_cloud_only_filters(hw_file: Path) -> None:
    rec = recommend_inference("qwen2.5-0.5b", hardware_files=[hw_file], constraints=Constraints(laptop=True),
                              quantization_advice=False)
    assert rec.options and all(o.provider in ("owned", "local") for o in rec.options)
    assert "test-laptop" in {o.target for o in rec.options}
    rec = recommend_inference("qwen2.5-0.5b", hardware_files=[hw_file], constraints=Constraints(cloud_only=True),
                              quantization_advice=False)
    assert rec.options and all(o.provider not in ("owned", "local") for o in rec.options)
    rec = recommend_inference("qwen2.5-0.5b", constraints=Constraints(providers=("azure",)), quantization_advice=False)
    assert {o.provider for o in rec.options + rec.rejected} == {"azure"}
    with pytest.raises(InputError):
        Constraints(laptop=True, cloud_only=True)


def test_owned_hardware_is_priced_by_power_when_a_kwh_price_is_given(hw_file: Path) -> None:
    rec = recommend_inference("qwen2.5-0.5b", hardware_files=[hw_file], quantization_advice=False,
                              constraints=Constraints(laptop=True, kwh_price=0.30))
    lap = next(o for o in rec.options if o.target == "test-laptop")
    # 45 W x 1 h = 0.045 kWh x $0.30 = $0.0135 per hour
    assert lap.cost_basis == "power" and lap.price_per_hour == pytest.approx(0.0135)


def test_quantization_advice_is_monotone_in_memory() -> None:
    rec = recommend_inference("llama-3.1-8b", context=8192, constraints=Constraints(providers=("aws",)))
    assert rec.quantization
    levels = []
    ladder = format_ladder(load_model("llama-3.1-8b"), "llamacpp")
    for line in rec.quantization:
        assert line.startswith("fits a ") and "with 8k context" in line
        fmt = line.split(" at ")[1].split(" ")[0].lower()
        levels.append(ladder.index("gguf:" + fmt))
    assert levels == sorted(levels, reverse=True)  # more memory, same or better format


def test_training_meets_the_deadline_and_picks_the_cheapest_run(hw_file: Path) -> None:
    rec = recommend_training("llama-3.1-8b", tokens=2e10, seq_len=4096, hardware_files=[hw_file],
                             constraints=Constraints(providers=TEST_ONLY, deadline=parse_duration("2d")))
    assert rec.options
    for o in rec.options:
        assert o.training_seconds <= 2 * 86400 + 1e-6
    costs = [o.run_cost for o in rec.options]
    assert costs == sorted(costs)
    assert rec.workload["total_flops"] == pytest.approx(2e10 * rec.workload["flops_per_token"])


def test_durations() -> None:
    """recommend's --deadline / --max-ttft read a duration as request files do (one parser: request/quantities.py),
    and a bare number as seconds, as the flags' help says."""
    import argparse

    from llmsizer.cli.common import duration_arg
    assert duration_arg("3d") == parse_duration("3d") == 3 * 86400
    assert duration_arg("3 days") == parse_duration("3 days") == 3 * 86400  # the request's words: refused before
    assert duration_arg("90 min") == 5400 and duration_arg("45") == 45 and duration_arg("0.5") == 0.5
    for bad in ("soon", "90m", "-3", "0"):  # 'm': minutes or months? refused, as in a request file
        with pytest.raises(argparse.ArgumentTypeError):
            duration_arg(bad)
    with pytest.raises(InputError):
        parse_duration("soon")


@pytest.mark.parametrize("engine, advised", [(None, True), ("llamacpp", True), ("llama.cpp", True),
                                             ("vllm", False), ("sglang", False)])
def test_gguf_quantization_advice_only_where_gguf_runs(engine: str | None, advised: bool) -> None:
    """The quantization lines name GGUF formats on llama.cpp ('fits a 24 GB card at Q4_K_M on llama.cpp'): advice
    for a request that pinned vLLM or SGLang, which serve no GGUF file, it was not (probe4: `recommend qwen3-8b
    --engine sglang` printed two llama.cpp lines under an SGLang answer)."""
    rec = recommend_inference("qwen3-8b", context=32768, concurrency=16, engine=engine,
                              constraints=Constraints(providers=("azure",)))
    assert bool(rec.quantization) is advised, rec.quantization
    assert all("on llama.cpp" in line for line in rec.quantization)
