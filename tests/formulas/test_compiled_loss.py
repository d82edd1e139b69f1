"""What the cross-entropy keeps for its backward under ``torch.compile`` (formulas/training_activations.py eqs.
C1/C2), against inductor itself on the CPU.

torchtune's recipes compile the loss when ``compile`` is set (``training.compile_loss``, torchtune/training/
_compile.py @ 1814feb lines 58-82): for ``CEWithChunkedOutputLoss`` only ``compute_cross_entropy`` =
``F.cross_entropy(logits.float(), labels, reduction="sum")`` (ce_chunked_output_loss.py), called once per chunk of
the model's half-precision logits; otherwise the whole loss module, on the logits the model already upcast
(torchtune/modules/transformer.py @ 1814feb line 652, ``self.output(h).float()``). Both are written here from those
lines with plain torch (torchtune is not installed) and compiled with the default inductor backend; the tensors the
compiled forward saves are recorded with ``torch.autograd.graph.saved_tensors_hooks`` (AOTAutograd's compiled
function saves them through ``ctx.save_for_backward``). Discrimination: chunked, the eager loss keeps the fp32
log-softmax, twice the compiled bytes; unchunked, the eager log-softmax is a new fp32 [t, V] tensor beside the
caller's fp32 logits (both alive until the caller drops its logits) where the compiled loss keeps the input itself.
"""

from __future__ import annotations

from typing import Any

import pytest

torch = pytest.importorskip("torch")
F = torch.nn.functional

from llmsizer.formulas.training_activations import ActivationSetup, head_activations  # noqa: E402
from llmsizer.readers.hf_config import spec_from_config  # noqa: E402

pytestmark = pytest.mark.slow

B, S, V, CHUNKS = 2, 128, 2048, 8
CONFIG = dict(model_type="llama", vocab_size=V, hidden_size=64, intermediate_size=128, num_hidden_layers=1,
              num_attention_heads=4, num_key_value_heads=4, max_position_embeddings=4096)


def _ce(logits: Any, labels: Any) -> Any:
    return F.cross_entropy(logits.float(), labels, ignore_index=-100, reduction="sum")


def _saved_bytes(chunks: int, compiled: bool, upcast_inside: bool = False) -> tuple[int, bool]:
    """Bytes of the distinct storages the loss saves for its backward, over all chunks, and whether they include
    the loss's input logits (the unchunked case's fp32 upcast)."""
    torch.manual_seed(0)
    torch._dynamo.reset()
    fn = torch.compile(_ce) if compiled else _ce
    logits = torch.randn(B, S, V, dtype=torch.bfloat16, requires_grad=True)
    labels = torch.randint(0, V, (B, S))
    seen: dict[Any, int] = {}

    def pack(t: Any) -> Any:
        seen[t.untyped_storage().data_ptr()] = t.untyped_storage().nbytes()
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        if chunks > 1:  # the model's bf16 chunks, each upcast inside the compiled function
            loss = sum(fn(lg.reshape(-1, V), lb.reshape(-1))
                       for lg, lb in zip(logits.chunk(chunks, dim=1), labels.chunk(chunks, dim=1), strict=True))
        elif upcast_inside:  # torchtitan e7c0cae: the bf16 logits go into the compiled loss, which upcasts them
            up = logits
            loss = fn(up.reshape(-1, V), labels.reshape(-1))
        else:  # the model upcasts first (outside the compiled loss); the loss receives fp32 logits
            up = logits.float()
            loss = fn(up.reshape(-1, V), labels.reshape(-1))
    kept_input = chunks == 1 and up.untyped_storage().data_ptr() in seen
    if upcast_inside:
        loss.backward()
        assert logits.grad is not None and logits.grad.dtype == torch.bfloat16
        torch._dynamo.reset()
        return sum(seen.values()), kept_input
    loss.backward()
    torch._dynamo.reset()
    return sum(seen.values()), kept_input


@pytest.mark.parametrize("chunks", [CHUNKS, 1])
def test_compiled_loss_keeps_its_input_logits(chunks: int) -> None:
    spec = spec_from_config(CONFIG, name="tiny-llama")
    st = ActivationSetup(batch=B, seq=S, residual=2, compute=2, full=False)
    head = head_activations(spec, st, lm_head_trained=False, loss_chunks=chunks, compiled_loss=True)
    pred = next(t.bytes for t in head.saved if t.name.startswith("loss input logits"))
    meas, kept_input = _saved_bytes(chunks, compiled=True)
    eager, eager_kept_input = _saved_bytes(chunks, compiled=False)
    print(f"\nchunks {chunks}: compiled loss saves {meas} B, predicted {pred} B; eager saves {eager} B")
    assert pred == pytest.approx(meas, rel=0.02)
    if chunks > 1:
        assert abs(eager - meas) / meas > 0.10
    else:  # the compiled loss keeps the caller's fp32 logits; the eager one makes its own [t, V] log-softmax
        assert kept_input and not eager_kept_input
        assert head.logits_forward == B * S * V * 2  # only the bf16 head output beside it, during the cast


def test_compiled_loss_with_the_upcast_inside_keeps_half_logits() -> None:
    """Eq. C3: torchtitan e7c0cae compiles cross_entropy(pred.flatten(0, 1).float(), ...) on the model's bf16
    logits: inductor keeps the bf16 input (t V 2, half the fp32 eq. C2) and returns a bf16 gradient."""
    spec = spec_from_config(CONFIG, name="tiny-llama")
    st = ActivationSetup(batch=B, seq=S, residual=2, compute=2, full=False)
    head = head_activations(spec, st, lm_head_trained=False, compiled_loss=True, upcast_in_loss=True)
    pred = next(t.bytes for t in head.saved if t.name.startswith("loss input logits"))
    meas, kept_input = _saved_bytes(1, compiled=True, upcast_inside=True)
    eager, _ = _saved_bytes(1, compiled=False, upcast_inside=True)
    print(f"\nupcast inside: compiled loss saves {meas} B, predicted {pred} B; eager saves {eager} B")
    assert kept_input and pred == pytest.approx(meas, rel=0.02)
    assert eager > 1.5 * meas  # eager keeps the fp32 log-softmax: discriminates
    assert head.logits_forward == 0 and head.loss_backward == B * S * V * 2
