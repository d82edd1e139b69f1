"""The attention core's executed FLOPs (formulas/training_time.py eq. (10)) against PyTorch's own FLOP formulas for
the fused SDPA kernels, and the duration rule's use of them (#12: llm-foundry's long-sequence rows were +23-44 %
fast because the attention ran at the GEMMs' utilisation on PaLM's 12 L d s).

``torch.utils.flop_counter`` registers ``sdpa_flop_count`` for ``aten._scaled_dot_product_flash_attention`` and
``sdpa_backward_flop_count`` for its backward, which "recompute[s] the scores matrix" (five bmm: 2.5 x the forward):
an independent statement of what a fused kernel executes over the full score matrix. A causal flash kernel skips the
tiles above the diagonal (flash-attn ``benchmarks/benchmark_flash_attention.py`` ``// (2 if causal else 1)``).
"""

from __future__ import annotations

import pytest

from llmsizer.catalog.hardware import builtin_catalog
from llmsizer.errors import InputError
from llmsizer.estimate.duration import flops_per_token, training_duration_for
from llmsizer.formulas.training_time import attention_core_flops
from llmsizer.readers.hf_config import spec_from_config

torch = pytest.importorskip("torch")


@pytest.mark.parametrize(("batch", "heads", "seq", "head_dim"), [(2, 4, 256, 64), (1, 16, 4096, 128)])
def test_non_causal_flash_equals_pytorchs_sdpa_formulas(batch: int, heads: int, seq: int, head_dim: int) -> None:
    from torch.utils.flop_counter import sdpa_backward_flop_count, sdpa_flop_count

    q = (batch, heads, seq, head_dim)
    fwd = sdpa_flop_count(q, q, q)
    bwd = sdpa_backward_flop_count(q, q, q, q)
    assert bwd == 2.5 * fwd  # the backward recomputes the scores
    tokens, width = batch * seq, heads * head_dim
    per_token = (fwd + bwd) / tokens
    assert attention_core_flops(1, width, seq, causal=False) == pytest.approx(per_token)
    # a recomputed layer (full activation checkpointing) runs the forward once more
    assert attention_core_flops(1, width, seq, 1, causal=False) == pytest.approx((2 * fwd + bwd) / tokens)
    # causal: half the tiles; the eager path counts every tile and reads the saved scores (PaLM's 12 L d s)
    assert attention_core_flops(3, width, seq) == pytest.approx(3 * per_token / 2)
    assert attention_core_flops(3, width, seq, 2, kernel="eager") == pytest.approx((36 + 8) * width * seq)


def test_bad_kernel_is_one_line() -> None:
    with pytest.raises(InputError, match="unknown attention kernel 'math'"):
        attention_core_flops(1, 64, 128, kernel="math")


MPT_1B = {"model_type": "gpt_bigcode", "n_embd": 2048, "n_head": 16, "n_layer": 24, "n_inner": 8192,
          "n_positions": 32768, "vocab_size": 50368, "multi_query": False, "tie_word_embeddings": True}


def test_flash_attention_is_timed_at_its_executed_flops_and_share() -> None:
    """The duration keeps PaLM's count as the MFU FLOPs, but times the fused kernel at eq. (10)'s FLOPs (7 L d s
    causal, not 12) at FLASH_ATTENTION_SHARE x u; 'eager' attention's score GEMMs are timed by
    formulas/eager_attention_traffic.py eq. (A3) instead (the s x s matrix's traffic, no fitted share)."""
    from llmsizer.estimate import efficiency as E

    spec = spec_from_config(MPT_1B, name="MPT-1b")
    dev = builtin_catalog().devices["a100-sxm-80gb"]
    fields = dict(method="full", precision="bf16-mixed", micro_batch=1, seq_len=32768, attention="flash")
    fl = flops_per_token(spec, "full", 32768)
    assert fl.attention == 12 * 24 * 2048 * 32768 and fl.attention_executed("flash") == 7 * 24 * 2048 * 32768
    d = training_duration_for(spec, dev, 1, 1e6, fields)
    names = {a.name: a.value for a in d.assumptions}
    assert names["attention_flops_per_token"] == 7 * 24 * 2048 * 32768
    assert names[E.FLASH_ATTENTION_SHARE.name] == E.FLASH_ATTENTION_SHARE.expected
    eager = training_duration_for(spec, dev, 1, 1e6, dict(fields, attention="eager"))
    assert "attention_flops_per_token" not in {a.name for a in eager.assumptions}
    assert "eager_score_gemm_seconds_per_token" in {a.name for a in eager.assumptions}
    assert eager.step is not None and eager.step.attention_seconds > 0
