"""Invariants of the memory formulas over random llama-like architectures (hypothesis).

KV cache linear in context (full attention) and in concurrency; GQA never above MHA; MLA latent never above
the expanded cache; sliding-window KV never above full KV; weight bytes strictly ordered by bits
(fp32 > bf16 > fp8 > GPTQ int4); ``estimate_inference`` totals non-decreasing in context and concurrency.
"""

from __future__ import annotations

from dataclasses import replace

from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from llmsizer import estimate_inference
from llmsizer.formulas.kv_cache import kv_cache
from llmsizer.formulas.weight_formats import weight_bytes
from llmsizer.specs import MLASpec, ModelSpec

EXACT_KV_DTYPES = ("fp32", "fp16", "bf16", "fp8")  # whole bytes per element: no rounding of the total


@st.composite
def llama_specs(draw, sliding: bool = False) -> ModelSpec:
    """A llama-like decoder: dimensions multiples of 128 (as published models use), GQA group of 1..8."""
    head_dim = draw(st.sampled_from([64, 128]))
    kv_heads = draw(st.sampled_from([1, 2, 4, 8]))
    group = draw(st.sampled_from([1, 2, 4, 8]))
    heads = kv_heads * group
    layers = draw(st.integers(1, 48))
    hidden = heads * head_dim
    kinds: tuple[str, ...] = ("full",) * layers
    window = None
    if sliding:
        kinds = tuple(draw(st.lists(st.sampled_from(["full", "sliding"]), min_size=layers, max_size=layers)))
        window = draw(st.integers(1, 8192))
    return ModelSpec(
        name="random-llama", model_type="llama", vocab_size=draw(st.integers(256, 262_144)), hidden_size=hidden,
        num_layers=layers, num_heads=heads, num_kv_heads=kv_heads, head_dim=head_dim,
        intermediate_size=128 * draw(st.integers(1, 224)), tie_word_embeddings=draw(st.booleans()),
        layer_types=kinds if "sliding" in kinds else (), sliding_window=window if "sliding" in kinds else None,  # type: ignore[arg-type]
    )


tokens = st.integers(0, 1_000_000)
seqs = st.integers(1, 512)
kv_dtypes = st.sampled_from(EXACT_KV_DTYPES)


@given(llama_specs(), tokens, tokens, seqs, kv_dtypes)
def test_kv_bytes_are_linear_in_context_for_full_attention(spec, t1, t2, n, dtype):
    kv = lambda t: kv_cache(spec, t, n, dtype).total_bytes  # noqa: E731
    assert kv(0) == 0
    assert kv(t1 + t2) == kv(t1) + kv(t2)
    assert kv(t1) == t1 * kv_cache(spec, 1, n, dtype).total_bytes


@given(llama_specs(sliding=True), tokens, seqs, seqs, kv_dtypes)
def test_kv_bytes_are_linear_in_concurrency(spec, t, n1, n2, dtype):
    assert kv_cache(spec, t, n1 + n2, dtype).total_bytes == \
        kv_cache(spec, t, n1, dtype).total_bytes + kv_cache(spec, t, n2, dtype).total_bytes


@given(llama_specs(sliding=True), tokens, seqs, kv_dtypes)
def test_gqa_never_exceeds_mha(spec, t, n, dtype):
    mha = replace(spec, num_kv_heads=spec.num_heads)
    assert kv_cache(spec, t, n, dtype).total_bytes <= kv_cache(mha, t, n, dtype).total_bytes
    if spec.num_kv_heads < spec.num_heads and t > 0:
        assert kv_cache(spec, t, n, dtype).total_bytes < kv_cache(mha, t, n, dtype).total_bytes


@given(llama_specs(sliding=True), tokens, seqs, kv_dtypes, st.integers(-1, 4096),
       st.sampled_from([None, 16, 256]))
def test_sliding_window_never_exceeds_full_attention(spec, t, n, dtype, extra, block):
    full = replace(spec, layer_types=("full",) * spec.num_layers, sliding_window=None)
    assert kv_cache(spec, t, n, dtype, window_extra=extra, block_size=block).total_bytes <= \
        kv_cache(full, t, n, dtype, window_extra=extra, block_size=block).total_bytes


@given(llama_specs(), tokens, seqs, kv_dtypes, st.integers(16, 1024), st.integers(0, 128), st.integers(16, 256))
def test_mla_latent_never_exceeds_the_expanded_cache(spec, t, n, dtype, kv_lora, rope, nope):
    # MLA compresses: the latent is narrower than the per-head keys and values it expands to (DeepSeek-V2
    # arXiv 2405.04434 section 2.1.2, d_c << d_h n_h)
    assume(kv_lora + rope <= spec.num_heads * (2 * nope + rope))
    mla = replace(spec, mla=MLASpec(q_lora_rank=None, kv_lora_rank=kv_lora, qk_nope_head_dim=nope,
                                    qk_rope_head_dim=rope, v_head_dim=nope), num_kv_heads=spec.num_heads)
    assert kv_cache(mla, t, n, dtype, mla_mode="latent").total_bytes <= \
        kv_cache(mla, t, n, dtype, mla_mode="expanded").total_bytes


@given(llama_specs())
def test_weight_bytes_strictly_ordered_by_bits(spec):
    b = {f: weight_bytes(spec, f).total for f in ("fp32", "bf16", "fp8", "gptq-int4")}
    assert b["fp32"] > b["bf16"] > b["fp8"] > b["gptq-int4"] > 0


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(llama_specs(sliding=True), st.integers(1, 65_536), st.integers(1, 65_536), st.integers(1, 64),
       st.integers(1, 64), st.sampled_from([("transformers", "gpu"), ("transformers", "cpu"), ("vllm", "gpu"),
                                            ("llamacpp", "gpu"), ("llamacpp", "cpu")]))
def test_estimate_total_is_non_decreasing_in_context_and_concurrency(spec, c1, c2, n1, n2, engine_device):
    engine, device = engine_device
    (c_lo, c_hi), (n_lo, n_hi) = sorted((c1, c2)), sorted((n1, n2))

    def total(context: int, concurrency: int) -> int:
        weights = "q4_k_m" if engine == "llamacpp" else None
        return estimate_inference(spec, context=context, concurrency=concurrency, engine=engine, device=device,
                                  weights=weights).total_bytes

    assert total(c_lo, n_lo) <= total(c_hi, n_lo) <= total(c_hi, n_hi)
    assert total(c_lo, n_lo) <= total(c_lo, n_hi)
