"""probe15 D2, D4, D7, D9, D10 and two findings beside them: the search surfaces (``models --fits-on`` /
``best_option_on``, recommend) answer as fit does, each compared with the other surfaces asking the same question
(fit, fit --weights / --tp at the format or layout the search names) and, where a rule gives it, with a hand
derivation (Little's law for a rate's layout, the device memory of the catalog for a budget)."""

from __future__ import annotations

import dataclasses
import math

import pytest

from llmsizer import estimate_inference, fit
from llmsizer.catalog.hardware import HardwareCatalog, load_catalog
from llmsizer.errors import InputError
from llmsizer.estimate.format_search import READING_FLOOR, next_ladder_engine
from llmsizer.estimate.training import estimate_training
from llmsizer.recommend import Constraints, best_option_on, recommend_inference

GiB = 2**30


def test_d2_fits_on_walks_llamacpp_ladder_as_fit_hint():
    """Llama-3.3-70B on 2 x RTX 3090, 8k x 2, no engine named: fit (vLLM) does not fit and names llama.cpp q4_k_m;
    `models --fits-on` (best_option_on) now meets at that format on that engine, with fit's own numbers."""
    kw = dict(context=8192, concurrency=2)
    r = fit("llama-3.3-70b-instruct", "rtx-3090", 2, **kw)
    assert not r.fits and r.engine == "vllm"
    at = r.fits_at
    assert at is not None and at["engine"] == "llamacpp" and at["weights"] == "gguf:q4_k_m"
    assert at["same_engine"] is False and at["none_on"]["engine"] == "vllm"
    opt = best_option_on("llama-3.3-70b-instruct", "rtx-3090", 2, **kw)
    assert opt.status == "meets", opt.reasons
    assert (opt.engine, opt.weights_format) == (at["engine"], at["weights"])
    assert opt.memory_per_device == at["memory_per_device"]
    # the rung fit answers when asked for it directly
    direct = fit("llama-3.3-70b-instruct", "rtx-3090", 2, engine="llamacpp", weights="q4_k_m", **kw)
    assert direct.fits and direct.memory_per_device == opt.memory_per_device
    assert opt.tokens_per_second_per_user == direct.speed.tokens_per_second_per_user
    assert opt.tokens_per_second_per_user >= READING_FLOOR
    # an engine named: that engine's ladder only (the user asked for it); the hint still names llama.cpp
    named = best_option_on("llama-3.3-70b-instruct", "rtx-3090", 2, engine="vllm", **kw)
    assert named.status == "rejected" and named.engine == "vllm"


def test_d2_one_rule_for_the_next_ladder():
    cat = load_catalog()
    opt = best_option_on("llama-3.3-70b-instruct", "rtx-3090", 2, context=8192, concurrency=2, engine="vllm")
    from llmsizer.estimate.format_search import FormatPick
    rejected = FormatPick("rejected", "vllm", 2, "", ("x",))
    assert next_ladder_engine(cat.devices["rtx-3090"], rejected) == "llamacpp"
    assert next_ladder_engine(cat.devices["rtx-3090"], dataclasses.replace(rejected, engine="llamacpp")) is None
    assert opt.status == "rejected"


def test_d4_rate_layout_unpinned_equals_pinned_and_littles_law():
    """Qwen3-235B-A22B fp8 on 8 x H100 (aws-p5.48xlarge), 32k, 1 request/s: fit's own layout and the same layout
    pinned (--tp) give one answer; the layout taken is the quickest of the layouts each at its own answer."""
    kw = dict(engine="vllm", context="32k", request_rate=1, weights="fp8")
    free = fit("qwen3-235b-a22b", "aws-p5.48xlarge", **kw)
    pinned = fit("qwen3-235b-a22b", "aws-p5.48xlarge", tensor_parallel=free.tensor_parallel, **kw)
    for a, b in ((free.speed.tokens_per_second_per_user, pinned.speed.tokens_per_second_per_user),
                 (free.speed.ttft_seconds, pinned.speed.ttft_seconds),
                 (free.memory_per_device, pinned.memory_per_device),
                 (free.details["concurrency"], pinned.details["concurrency"])):
        assert a == b
    load = free.speed.load
    # Little's law per replica: requests in the system (running + waiting for admission) = rate share x seconds each
    assert load["in_flight"] == pytest.approx(load["request_rate_per_replica"] * load["request_seconds"], rel=1e-6)
    # the fixed point: the running mean (in flight less those waiting) within the sequences the step is timed at
    running_mean = load["in_flight"] - load.get("waiting", 0.0)
    assert math.ceil(running_mean) <= load["concurrency"]
    # the least such: one sequence fewer per replica would be exceeded by the running mean
    assert running_mean > load["concurrency"] - 1
    # the layout taken is the quickest at its own answer among those fit --tp gives
    other = {t: fit("qwen3-235b-a22b", "aws-p5.48xlarge", tensor_parallel=t, **kw) for t in (2, 8)}
    for t, r in other.items():
        if r.fits and r.speed is not None:
            assert r.speed.load["request_seconds"] >= load["request_seconds"], t


def test_d4_recommend_rate_options_reproduce_with_fit_tp():
    rec = recommend_inference("qwen3-235b-a22b", engine="vllm", context="32k", request_rate=2)
    checked = 0
    for o in rec.options[:4]:
        r = fit("qwen3-235b-a22b", o.target, o.count, engine="vllm", context="32k", request_rate=2,
                weights=o.weights_format, tensor_parallel=o.tensor_parallel)
        assert r.speed.tokens_per_second_per_user == o.tokens_per_second_per_user, o.target
        assert r.speed.ttft_seconds == o.ttft_seconds, o.target
        checked += 1
    assert checked


def test_d7_hint_under_the_reading_floor_matches_fits_on_row():
    """Llama-3.1-70B 8k x 4 on a DGX Spark: bf16 does not fit; q8_0 fits in memory below the reading floor. fit's
    hint names q8_0 and its speed below the floor; the fits-on row rejects the same format at the same speed."""
    kw = dict(context=8192, concurrency=4)
    r = fit("llama-3.1-70b-instruct", "dgx-spark", **kw)
    assert not r.fits
    at = r.fits_at
    assert at is not None and at["weights"] == "gguf:q8_0" and at["meets_reading_speed"] is False
    assert at["reading_speed"] == READING_FLOOR and at["tokens_per_second_per_user"] < READING_FLOOR
    row = best_option_on("llama-3.1-70b-instruct", "dgx-spark", **kw)
    assert row.status == "rejected" and row.weights_format == at["weights"]
    assert row.tokens_per_second_per_user == at["tokens_per_second_per_user"]
    direct = fit("llama-3.1-70b-instruct", "dgx-spark", weights="q8_0", **kw)
    assert direct.fits and direct.memory_per_device == at["memory_per_device"]
    assert direct.speed.tokens_per_second_per_user == at["tokens_per_second_per_user"]
    from llmsizer.render.fit_text import fits_at_line
    line = fits_at_line(at)
    assert "q8_0" in line and "reading speed" in line and "per user" in line


def test_d9_budget_per_device_is_fits_budget():
    """Llama-3.1-70B on one L4 (vLLM): the weights-alone rejection reports fit's budget_per_device (the device
    memory a pool engine sizes its pool from), the pool named apart in the reason."""
    opt = best_option_on("llama-3.1-70b-instruct", "l4", context=8192, concurrency=1, engine="vllm")
    assert opt.status == "rejected" and "weights alone" in opt.reasons[0]
    r = fit("llama-3.1-70b-instruct", "l4", engine="vllm", weights="awq-int4", context=8192)
    assert opt.budget_per_device == r.budget_per_device
    usable = r.details["usable_memory_per_device"]
    assert opt.budget_per_device == usable
    # the pool named as vLLM reserves it (probe32 D8): gpu_memory_utilization (1 - headroom) x CUDA's total, the
    # catalog's memory_cuda where sourced, else the memory taken as it (vllm 0.19.1 v1/worker/utils.py:408-410
    # request_memory), as fit's own reasons say it
    from llmsizer.catalog.hardware import load_catalog
    from llmsizer.units import format_bytes
    l4 = load_catalog().devices["l4"]
    cuda = int(l4.memory_cuda.base) if l4.memory_cuda is not None and l4.memory_cuda.base else usable
    assert (f"vLLM's pool, gpu_memory_utilization 0.90 x {format_bytes(cuda)} (CUDA's total) = "
            f"{format_bytes(int(0.9 * cuda))}") in opt.reasons[0]


def test_d10_infer_on_a_device_of_no_memory_warns():
    est = estimate_inference("qwen2.5-7b", device="intel-xeon-spr-8ch")
    assert any(w.startswith("no memory budget was checked") for w in est.warnings)
    given = estimate_inference("qwen2.5-7b", device="intel-xeon-spr-8ch", memory=64 * GiB)
    assert not any(w.startswith("no memory budget was checked") for w in given.warnings)
    with pytest.raises(InputError):
        fit("qwen2.5-7b", "intel-xeon-spr-8ch")


def test_recommend_rate_option_states_fits_slow_first_token():
    """recommend --request-rate 5 (Llama-3.1-8B, 4k, 512 out) on gcp-g2-standard-4 copies: an option whose first
    token comes after the attention limit says fit's own slow_first_token warning in its reasons."""
    cat = load_catalog()
    inst = cat.instances["gcp-g2-standard-4"]
    one = HardwareCatalog({inst.device.id: inst.device}, {inst.id: inst}, dict(cat.interconnects),
                          dict(cat.sources))
    rec = recommend_inference("llama-3.1-8b", context=4096, output_tokens=512, request_rate=5, catalog=one,
                              quantization_advice=False)
    opt = next(o for o in rec.options if o.target == inst.id)
    # the same option asked of fit (its count of instances, the whole rate): its warning, said in the option
    r = fit("llama-3.1-8b", inst.id, opt.count, context=4096, output_tokens=512, request_rate=5,
            weights=opt.weights_format)
    slow = r.details.get("rate_warnings", {}).get("slow_first_token")
    assert slow, "the probe's 567 s first token: fit warns"
    assert r.speed.ttft_seconds == opt.ttft_seconds
    # (fit states the whole rate, the option its copy's share: the rest is the same words and numbers)
    same = slow.split("this deployment", 1)[1]
    assert any(same in x and "no --max-ttft" in x for x in opt.reasons), opt.reasons
    # with a TTFT limit the option is held to it instead
    limited = recommend_inference("llama-3.1-8b", context=4096, output_tokens=512, request_rate=5, catalog=one,
                                  quantization_advice=False, constraints=Constraints(max_ttft=10))
    assert all(not any("no --max-ttft" in x for x in o.reasons) for o in limited.options)


def test_qlora_on_apple_eight_bit_optimizer_warned():
    kw = dict(method="qlora", device="apple-m4-max-128gb")
    plain = estimate_training("llama-3.1-8b", **kw)
    assert not any("8-bit optimizer step for MPS" in w for w in plain.warnings)
    assert any(a.name == "nf4_on_mps" for a in plain.assumptions)
    eight = estimate_training("llama-3.1-8b", optimizer="adamw-8bit", **kw)
    assert any("8-bit optimizer step for MPS" in w for w in eight.warnings)
    cuda = estimate_training("llama-3.1-8b", optimizer="adamw-8bit", method="qlora", device="h100-sxm")
    assert not any("8-bit optimizer step for MPS" in w for w in cuda.warnings)
