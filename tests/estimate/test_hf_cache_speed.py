"""The eager transformers decode step's cache traffic (formulas/hf_cache_traffic.py eqs. H1-H3) in the speed
estimate: what grows with the context, engine transformers only, and --attention eager's extra bytes."""

from __future__ import annotations

import pytest

from llmsizer.catalog.hardware import builtin_catalog
from llmsizer.catalog.models import find
from llmsizer.errors import InputError
from llmsizer.estimate.speed import estimate_speed

SPEC = find("llama-3.1-8b").spec()
H200 = builtin_catalog().devices["h200"]


def _decode(engine: str, prompt: int, attention: str = "sdpa") -> tuple[float, float, float]:
    """(memory seconds, K/V bytes read, the step's bytes-per-second rate: bandwidth x bandwidth_efficiency)."""
    sp = estimate_speed(SPEC, H200, prompt_tokens=prompt, output_tokens=32, concurrency=32, engine=engine,
                        attention=attention)
    assert sp.decode is not None
    eff = next(a.value for a in sp.assumptions if a.name == "bandwidth_efficiency")
    return sp.decode.memory_seconds, float(sp.details["kv_bytes_per_decode_step"]), sp.details["bandwidth"] * eff


@pytest.mark.parametrize("engine,copies", [("transformers", 3.0), ("vllm", 1.0)])
def test_the_decode_moves_the_cache_three_times_under_transformers_once_elsewhere(engine: str, copies: float) -> None:
    (t1, kv1, rate), (t2, kv2, _) = _decode(engine, 1024), _decode(engine, 8192)
    # eq. H1: the attention reads the K/V once; transformers' torch.cat reads and writes it again
    assert (t2 - t1) * rate == pytest.approx(copies * (kv2 - kv1), rel=1e-6)


def test_eager_attention_moves_more_than_sdpa_and_flash_as_sdpa() -> None:
    sdpa = estimate_speed(SPEC, H200, prompt_tokens=16384, output_tokens=32, engine="transformers")
    eager = estimate_speed(SPEC, H200, prompt_tokens=16384, output_tokens=32, engine="transformers",
                           attention="eager")
    flash = estimate_speed(SPEC, H200, prompt_tokens=16384, output_tokens=32, engine="transformers",
                           attention="flash")
    assert eager.decode.memory_seconds > 1.5 * sdpa.decode.memory_seconds  # eq. H2 (g = 4) and H3
    assert eager.prefill.seconds > 2 * sdpa.prefill.seconds  # the 16k x 16k scores of every layer (eq. H3)
    assert flash.decode.memory_seconds == sdpa.decode.memory_seconds
    assert flash.prefill.seconds == sdpa.prefill.seconds


def test_unknown_attention_is_refused() -> None:
    with pytest.raises(InputError, match="attention must be one of"):
        estimate_speed(SPEC, H200, engine="transformers", attention="paged")


def test_eager_scores_slow_an_mla_model_too() -> None:
    """Eager attention writes the score tensor whatever the cache's layout (eq. H3): an MLA model (no K/V repeat,
    eq. H2) still prefills slower under eager than under sdpa, and its decode moves more bytes."""
    mla = find("deepseek-v2-lite").spec()
    assert mla.mla is not None
    sdpa = estimate_speed(mla, H200, prompt_tokens=8192, output_tokens=32, engine="transformers")
    eager = estimate_speed(mla, H200, prompt_tokens=8192, output_tokens=32, engine="transformers", attention="eager")
    assert eager.prefill.seconds > sdpa.prefill.seconds
    assert eager.decode.memory_seconds > sdpa.decode.memory_seconds


def test_the_cache_append_counts_on_an_apple_chip() -> None:
    """Eq. H1 is bytes (the DynamicCache's torch.cat), on every device eager transformers runs on: an Apple chip's
    decode moves 3 x the K/V read (read, and the cat's read + write), as a GPU's does."""
    apple = builtin_catalog().devices["apple-m2-ultra-192gb"]
    short, long_ = (estimate_speed(SPEC, apple, prompt_tokens=p, output_tokens=32, engine="transformers")
                    for p in (1024, 16384))
    llama = (estimate_speed(SPEC, apple, prompt_tokens=p, output_tokens=32, engine="vllm") for p in (1024, 16384))
    v_short, v_long = llama
    grow_hf = long_.decode.memory_seconds - short.decode.memory_seconds
    grow_plain = v_long.decode.memory_seconds - v_short.decode.memory_seconds
    assert grow_hf == pytest.approx(3 * grow_plain, rel=0.05)
    assert any(a.name == "transformers_cache_traffic" for a in long_.assumptions)
