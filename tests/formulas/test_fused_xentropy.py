"""flash-attn's fused cross-entropy (``loss='fused-xentropy'``, llm-foundry's default ``loss_fn``): what it keeps and
allocates (formulas/training_activations.py eq. X1) and the bytes its kernels move (formulas/elementwise_traffic.py
eq. (E11)), against a hand count written from the kernel's own source. The kernel is a CUDA extension
(``xentropy_cuda_lib``; flash-attn 2.x: Triton) that cannot run on a CPU, so the truth here is the source, read
line by line (flash-attention @ v1.0.9 = 6d48e14a, the version llm-foundry b2a43a147's ``gpu`` extra pins,
setup.py line 89):

- flash_attn/losses/cross_entropy.py line 36: ``losses, lse = xentropy_cuda_lib.forward(logits, labels,
  smoothing)``; csrc/xentropy/xentropy_kernel.cu lines 638-639 allocate both as fp32 tensors of the labels' shape
  [t] (``at::empty_like(labels_, input.options().dtype(ScalarType::Float))``): 2 x 4 t B, the logits read as they
  are (bf16 under autocast; no fp32 copy);
- line 89: ``ctx.save_for_backward(logits, lse, labels_local)``: the [t, V] logits themselves (a reference, no
  copy), the fp32 lse and the int64 labels (8 t B) stay until the backward;
- lines 100-102 -> xentropy_kernel.cu line 697: ``Tensor gI = inplace ? logits_ : at::empty_like(logits_)``: one
  [t, V] gradient in the logits' dtype, since ``inplace_backward`` defaults to False (cross_entropy.py line 109) and
  llm-foundry builds ``FusedCrossEntropyLoss(ignore_index=-100)`` (llmfoundry/models/mpt/modeling_mpt.py @
  b2a43a147 line 730);
- traffic: the forward kernel ``cunn_SoftMaxXEntropyForward`` walks each row twice (``ilpReduce`` for the max and
  sum, line 452, then for the exp-sum, line 466), the backward ``apply`` reads each logit and writes its gradient
  once (lines 503-513).
"""

from __future__ import annotations

from llmsizer.formulas.elementwise_traffic import loss_bytes, step_bytes_per_token
from llmsizer.formulas.training_activations import ActivationSetup, head_activations
from llmsizer.readers.hf_config import spec_from_config
from llmsizer.validation_cases import mpt_config

T_BATCH, T_SEQ, V = 4, 512, 50368


def _head(**kw: bool):  # type: ignore[no-untyped-def]
    spec = spec_from_config(mpt_config("125m", T_SEQ), name="MPT-125m")
    st = ActivationSetup(batch=T_BATCH, seq=T_SEQ, residual=4, compute=2, expert=4, autocast=True, weight_copy=2,
                         full=True, attention="flash")
    return spec, head_activations(spec, st, lm_head_trained=True, **kw)


def test_kept_and_allocated_bytes_are_the_hand_count() -> None:
    t = T_BATCH * T_SEQ
    _, fused = _head(fused_xentropy=True)
    logits = t * V * 2  # bf16 [t, V]: the lm_head's output under autocast
    lse, labels, losses = t * 4, t * 8, t * 4
    loss_terms = [x for x in fused.saved if x.name.startswith("loss")]
    assert [x.bytes for x in loss_terms] == [logits + lse + labels]  # line 89
    assert fused.logits_forward == losses  # line 36 / lines 638-639: losses beside the kept lse
    assert fused.loss_backward == logits  # line 697: empty_like(logits), not in place
    assert fused.kept_logits == 0


def test_no_fp32_logits_tensor_where_the_eager_loss_has_four() -> None:
    """The eager cross-entropy of the same head keeps the fp32 log-softmax (4 t V) and allocates the fp32 upcast in
    the forward and two fp32 gradients in the backward; the fused kernel none of them."""
    t = T_BATCH * T_SEQ
    _, eager = _head()
    _, fused = _head(fused_xentropy=True)
    saved = {x.name: x.bytes for x in eager.saved}
    assert saved["loss log-softmax (fp32)"] == t * V * 4 + t * 8
    assert eager.loss_backward == 2 * t * V * 4 and fused.loss_backward == t * V * 2
    eager_peak = sum(x.bytes for x in eager.saved) + eager.loss_backward
    fused_peak = sum(x.bytes for x in fused.saved) + fused.loss_backward
    # 12 t V B of fp32 against 4 t V B of bf16, less the fused kernel's fp32 lse (4 t)
    assert eager_peak - fused_peak == t * V * (4 + 8 - 2 - 2) - t * 4


def test_traffic_is_the_kernels_reads_and_writes() -> None:
    c = 2
    assert loss_bytes(V, c, compiled=False, fused_xentropy=True) == (2 * c + 2 * c) * V  # two row walks + r/w
    assert loss_bytes(V, c, compiled=False) == (2 * c + 10 * 4) * V  # eq. (E3), the eager loss, for contrast
    spec = spec_from_config(mpt_config("125m", T_SEQ), name="MPT-125m")
    eager = step_bytes_per_token(spec, c, False, True, {}, 0, "ce")
    fused = step_bytes_per_token(spec, c, False, True, {}, 0, "fused-xentropy")
    assert eager - fused == (10 * 4 - 2 * c) * V
