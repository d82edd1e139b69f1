"""A KV cache grown by concatenation in the estimate (issue #12 item 3): under metric 'reserved' / 'nvidia-smi' a
transformers DynamicCache's part of the allocator reserve is eq. (G1) of estimate/allocator.py over eq. (C1') of
formulas/caching_allocator.py, checked against

- eq. (C1) derived by hand from CUDACachingAllocator.cpp in tests/formulas/test_concat_cache_fragmentation.py (not
  through the formula), and the formulas' replay of the allocator's events (eq. 4') where (C1)'s shortcuts fail
  (a prompt that does not end on a segment boundary, a class of one step, more than 2 MiB per token);
- the cache's live bytes counted here from the model's config (Llama-3.1-8B: 32 layers, 8 KV heads x 128, bf16).

'allocated' and the default device total (the fit need: the growth's segments are released by the OOM retry) are
unchanged; the CLI, the Python API and the web API give the same reserve."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from llmsizer.errors import InputError
from llmsizer.estimate import allocator as A
from llmsizer.estimate.inference import estimate_inference
from llmsizer.formulas import caching_allocator as CA

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "formulas"))
from test_concat_cache_fragmentation import concat_growth_events, eq_c1  # noqa: E402

MiB, KiB = 1 << 20, 1 << 10
R = A.RESERVE[A.INFERENCE]
# Llama-3.1-8B (config.json): 32 layers, 8 KV heads x head_dim 128, bf16: one layer's K of one token, one sequence
L8B_LAYERS, L8B_PER_TOKEN = 32, 8 * 128 * 2


@pytest.mark.parametrize(("layers", "per_token", "prompt", "steps"),
                         [(32, 2 * KiB, 8192, 256), (32, 2 * KiB, 8192, 2048), (32, 2 * KiB, 5120, 3000),
                          (32, 16 * KiB, 4096, 4096)])
def test_closed_form_is_the_hand_derived_eq_c1(layers: int, per_token: int, prompt: int, steps: int) -> None:
    assert CA.concat_growth_reserved_bytes(layers, per_token, prompt, steps) == eq_c1(layers, per_token, prompt, steps)


@pytest.mark.parametrize(("layers", "per_token", "prompt", "steps"),
                         [(32, 8 * KiB, 4064, 32),  # the prompt inside a class: one spare of the prompt's class
                          (28, 8 * KiB, 8160, 32), (32, 64 * KiB, 2016, 32),  # GP14's cache: one change at step 1
                          (3, 1000, 11000, 5000),  # a block not a multiple of 512 B
                          (4, (3 << 20) + 512, 4, 5),  # every step a new class: no spare
                          (2, 2 << 20, 6, 7), (5, 7000, 1600, 0)])
def test_closed_form_is_the_replay(layers: int, per_token: int, prompt: int, steps: int) -> None:
    events = concat_growth_events(layers, per_token, prompt, steps)
    assert CA.concat_growth_reserved_bytes(layers, per_token, prompt, steps) == CA.stream_trace_pool_bytes(events)


def test_closed_form_refuses_small_blocks() -> None:
    assert not CA.concat_growth_in_closed_form(2 * KiB, 4000)  # 7.8 MiB: 20 MiB shared segments
    with pytest.raises(InputError, match="10 MiB"):
        CA.concat_growth_reserved_bytes(32, 2 * KiB, 4000, 10)


def _dynamic_besides_kv(est: object) -> tuple[int, int]:
    items = [i for i in est.items if i.location == "device"]  # type: ignore[attr-defined]
    kv = next(i.bytes for i in items if i.name == "kv_cache")
    rest = sum(i.bytes for i in items if i.name not in A.NOT_TENSORS + A.PERSISTENT + ("kv_cache",))
    return kv, rest


def test_long_generation_reserve_is_eq_c1() -> None:
    # 8 sequences, a 4096-token prompt grown to 8192: 16 KiB per token of one layer's K, 64 MiB -> 128 MiB blocks
    # through 32 segment classes of 128 tokens each; the decode end is the peak (the whole cache live)
    seqs, prompt, context = 8, 4096, 8192
    est = estimate_inference("llama-3.1-8b", engine="transformers", context=context, concurrency=seqs,
                             output_tokens=context - prompt, metric="reserved")
    kv, rest = _dynamic_besides_kv(est)
    assert kv == 2 * L8B_LAYERS * context * seqs * L8B_PER_TOKEN  # the live cache, from the config
    pool = eq_c1(L8B_LAYERS, seqs * L8B_PER_TOKEN, prompt, context - prompt)
    assert pool > 20 * kv  # the sum of a growing sequence
    r = est.item("allocator_reserve")
    act = est.item("activations").bytes
    assert r.high == int(rest * (R.high - 1)) + pool - kv  # eq. G1 high: no block reused
    assert r.low == int(rest * (R.low - 1)) + pool - kv - act  # eq. G1 low: the peak's activation blocks reused
    assert any("torch.cat" in w and "releases them" in w for w in est.warnings)
    # 'allocated' and the default device total are untouched by the growth
    alloc = estimate_inference("llama-3.1-8b", engine="transformers", context=context, concurrency=seqs,
                               output_tokens=context - prompt, metric="allocated")
    assert alloc.total("device")[1] == est.total("device")[1] - r.bytes
    default = estimate_inference("llama-3.1-8b", engine="transformers", context=context, concurrency=seqs,
                                 output_tokens=context - prompt)
    cache = default.item("allocator_cache")
    assert cache.bytes == int((kv + rest) * (R.expected - 1)) and cache.high == int((kv + rest) * (R.high - 1))
    assert not any("torch.cat" in w for w in default.warnings)


def test_short_growth_keeps_the_calibrated_share() -> None:
    # GP13's run (Llama-3.1-8B, 4 x 16384, 32 new tokens): one spare 128 MiB segment, well inside the calibrated
    # share of the 8 GiB cache, so the reserve is the calibrated ratio's as before
    est = estimate_inference("llama-3.1-8b", engine="transformers", context=16384, concurrency=4, output_tokens=32,
                             metric="reserved")
    kv, rest = _dynamic_besides_kv(est)
    r = est.item("allocator_reserve")
    assert r.bytes == int(rest * (R.expected - 1)) + int(kv * (R.expected - 1))
    assert r.high == int(rest * (R.high - 1)) + int(kv * (R.high - 1))


def test_small_blocks_warn_and_keep_the_calibrated_reserve() -> None:
    est = estimate_inference("llama-3.1-8b", engine="transformers", context=4096, output_tokens=32,
                             metric="nvidia-smi")
    assert any("under 10 MiB" in w for w in est.warnings)
    kv, rest = _dynamic_besides_kv(est)
    assert est.item("allocator_reserve").bytes == int((kv + rest) * (R.expected - 1))


def test_engines_with_a_kv_pool_are_untouched() -> None:
    for engine in ("vllm", "sglang"):
        est = estimate_inference("llama-3.1-8b", engine=engine, memory=141 * 10**9, context=8192, concurrency=8,
                                 output_tokens=4096, metric="reserved")
        assert not any("torch.cat" in w for w in est.warnings)
        assert "eq. C1'" not in est.item("allocator_reserve").formula


def test_fit_verdict_leaves_out_the_released_segments() -> None:
    # the 193 GiB the growth leaves cached are whole free segments: a failing cudaMalloc releases them and retries
    # (CUDACachingAllocator.cpp release_cached_blocks), so the run fits an H200 though 'reserved' shows more
    fields = dict(engine="transformers", context=8192, concurrency=8, output_tokens=4096, memory=141 * 10**9)
    shown = estimate_inference("llama-3.1-8b", metric="reserved", **fields)  # type: ignore[arg-type]
    need = estimate_inference("llama-3.1-8b", metric="allocated", **fields)  # type: ignore[arg-type]
    uncapped = estimate_inference("llama-3.1-8b", metric="reserved",
                                  **{k: v for k, v in fields.items() if k != "memory"})  # type: ignore[arg-type]
    assert uncapped.total("device")[1] > 141 * 10**9 and shown.details["fits"]
    released = shown.details["kv_growth_releasable"]
    kv, rest = _dynamic_besides_kv(shown)
    assert released[1] == shown.item("allocator_reserve").bytes - int((kv + rest) * (R.expected - 1))
    verdict_need = shown.details["memory_budget"] - shown.details["budget_left_bytes"]  # type: ignore[operator]
    assert verdict_need == need.total("device")[1] + int((kv + rest) * (R.expected - 1))
    assert "not counting" in str(shown.details["verdict"])


# The device's memory as its driver reports it (nvidia-smi memory.total: catalog accelerators.json memory_usable, with
# its sources) and the CUDA context span (estimate/engines.py CUDA_CONTEXT: 250 MiB, 688 MiB measured, 1 GiB)
H200, H100 = 143771 * MiB, 81559 * MiB
CTX = (250 * MiB, 721_420_288, 1 << 30)
GROWTH = dict(engine="transformers", context=8192, concurrency=8, output_tokens=4096)


@pytest.mark.parametrize(("device", "memory"), [("h200", H200), ("h100-sxm", H100)])
def test_reserved_total_is_capped_at_the_memory_less_the_context(device: str, memory: int) -> None:
    # max_memory_reserved cannot pass what cudaMalloc gets: the memory less the CUDA context (the OOM retry releases
    # the growth's free segments first: CUDACachingAllocator.cpp release_cached_blocks), low/expected/high alike
    est = estimate_inference("llama-3.1-8b", device=device, metric="reserved", **GROWTH)  # type: ignore[arg-type]
    assert est.total("device") == (memory - CTX[2], memory - CTX[1], memory - CTX[0])
    calibrated = est.details["calibrated_range"]
    assert calibrated["low"] <= memory - CTX[2] and calibrated["high"] <= memory - CTX[0]  # type: ignore[index]
    assert "eq. G3" in est.item("allocator_reserve").formula
    # the need (fit verdict) is the uncapped estimate's: the same with or without the cap
    need = estimate_inference("llama-3.1-8b", device=device, metric="allocated", **GROWTH)  # type: ignore[arg-type]
    kv, rest = _dynamic_besides_kv(est)
    assert est.details["memory_budget"] - est.details["budget_left_bytes"] == (  # type: ignore[operator]
        need.total("device")[1] + int((kv + rest) * (R.expected - 1)))
    # what is left of the growth in the capped total is what the verdict left out, less the cut
    left = est.details["kv_growth_releasable"]
    plain = int((kv + rest) * (R.expected - 1))
    assert left[1] == est.item("allocator_reserve").bytes - plain  # type: ignore[index]
    assert est.total("device")[1] - left[1] == need.total("device")[1] + plain  # type: ignore[index]
    assert "before the cap" in str(est.details["verdict"])


@pytest.mark.parametrize(("device", "memory"), [("h200", H200), ("h100-sxm", H100)])
def test_nvidia_smi_total_is_at_most_the_memory(device: str, memory: int) -> None:
    est = estimate_inference("llama-3.1-8b", device=device, metric="nvidia-smi", **GROWTH)  # type: ignore[arg-type]
    lo, mid, hi = est.total("device")
    assert hi == memory  # the context at its high, the reserve takes the rest
    # the items' bounds are summed bound by bound: the expected reserve is the high's (it cannot pass it), so the
    # expected total is the memory less the context's and the activations' span above their expected values
    act = est.item("activations")
    assert mid == memory - (CTX[2] - CTX[1]) - (act.range[2] - act.bytes)
    assert lo == memory - (CTX[2] - CTX[0]) - (act.range[2] - act.range[0])
    calibrated = est.details["calibrated_range"]
    assert calibrated["high"] <= memory  # type: ignore[index]


def test_uncapped_without_a_memory() -> None:
    est = estimate_inference("llama-3.1-8b", metric="reserved", **GROWTH)  # type: ignore[arg-type]
    kv, rest = _dynamic_besides_kv(est)
    pool = eq_c1(L8B_LAYERS, 8 * L8B_PER_TOKEN, 4096, 4096)
    assert est.item("allocator_reserve").high == int(rest * (R.high - 1)) + pool - kv  # eq. G1 high, uncapped
    assert est.total("device")[1] > H200 and "eq. G3" not in est.item("allocator_reserve").formula
    assert "kv_growth_capped" not in est.details
    assert any("stops at the device's memory" in w for w in est.warnings)  # said so


def test_a_growth_under_the_memory_is_not_capped() -> None:
    # 8 x 4096 -> 4608 (512 new tokens, 4 segment classes): past the calibrated share, yet under an H200's memory
    fields = dict(engine="transformers", context=4608, concurrency=8, output_tokens=512, metric="reserved")
    free = estimate_inference("llama-3.1-8b", **fields)  # type: ignore[arg-type]
    on = estimate_inference("llama-3.1-8b", device="h200", **fields)  # type: ignore[arg-type]
    assert free.details["kv_growth_releasable"][2] > 0 and free.total("device")[2] < H200 - CTX[2]  # type: ignore[index]
    assert on.items == free.items and "kv_growth_capped" not in on.details


def test_the_released_segments_are_a_device_rule_with_one_home() -> None:
    """review25 D5: which location's need leaves the released growth out is ``allocator.releasable_at`` alone (device
    items: the growth is a CUDA caching-allocator reserve); the verdict's need (``verdict_need_range``) and the
    reason that names it (compose.py ``_check_fit``) read it, so both say the same bytes."""
    from llmsizer.units import format_bytes

    fields = dict(engine="transformers", context=8192, concurrency=8, output_tokens=4096, memory=141 * 10**9)
    est = estimate_inference("llama-3.1-8b", metric="reserved", **fields)  # type: ignore[arg-type]
    released = A.releasable_at(est, "device")
    assert released is not None and released == est.details["kv_growth_releasable"] and released[1] > 0
    assert A.releasable_at(est, "host") is None
    assert A.verdict_need_range(est, "host")[:3] == est.total("host")  # nothing released off the device
    assert A.verdict_need_range(est, "device")[:3] == tuple(t - r for t, r in zip(est.total("device"), released,
                                                                                  strict=True))
    assert f"not counting the {format_bytes(released[1])} of segments" in str(est.details["verdict"])
