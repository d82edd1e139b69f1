"""The gradients row states every term of its bytes (probe4 defect 8): at the lm_head-backward peak of a TE float8
bf16-mixed run the row also holds the lm_head's half-precision weight gradient and its fp32 cast (eq. H1, one loss
chunk), which the text used to leave out ("8.03B trained x 4 B" beside bytes 3.15 GB larger).

Independent counts: Llama-3.1-8B's config (meta-llama/Llama-3.1-8B config.json: vocab_size 128256, hidden_size
4096, untied lm_head) gives the lm_head 128256 x 4096 elements; trained elements are the published 8,030,261,248
parameters; the fp32 .grads are 4 B each, the lm_head's bf16 gradient 2 B and its fp32 cast 4 B."""

from __future__ import annotations

from llmsizer import estimate_training

PARAMS = 8_030_261_248
HEAD = 128256 * 4096


def _grad_row(**kw):
    est = estimate_training("llama-3.1-8b", micro_batch=1, seq_len=2048, grad_accumulation=4,
                            grad_checkpointing="full", **kw)
    return next(i for i in est.items if i.name == "gradients"), est


def test_te_float8_gradients_row_states_the_lm_head_term() -> None:
    row, est = _grad_row(float8=True, float8_recipe="transformer-engine")
    assert est.details["peak_phase"].startswith("lm_head backward")
    # the fp32 term is the estimate's head_grads (states.py), which also holds the final norm's 4096 x 4 B grad
    assert 0 <= row.bytes - (PARAMS * 4 + HEAD * (2 + 4)) <= 4096 * 4
    assert "lm_head backward's weight gradient" in row.formula and "fp32 cast" in row.formula
    assert "trained x 4 B" in row.formula


def test_without_the_head_peak_the_row_is_the_kept_grads_only() -> None:
    row, est = _grad_row()
    assert not est.details["peak_phase"].startswith("lm_head backward")
    assert row.bytes == PARAMS * 4
    assert "lm_head" not in row.formula
