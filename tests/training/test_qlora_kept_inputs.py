"""What a QLoRA layer keeps for its backward with LoRA dropout and bitsandbytes' 4-bit matmul, before and after
bitsandbytes 0.43.2 (formulas/nf4_quantization.py eq. 4, formulas/training_activations.py eqs. D1 and G1), against
the CPU allocator's bytes (tests/training/measure_step.py ``AllocatorBytes``) over real bitsandbytes ``Linear4bit``
layers on the CPU (issue #12: the litgpt QLoRA rows).

The layer is litgpt's LoRA block (litgpt/lora.py @ 00af8b0d: ``LoRAQKVLinear`` over the fused q/k/v linear, one dropout
on its input, line 426; ``LoRALinear`` for the projection and the two MLP inputs and the MLP projection, line 171:
``pretrained + (dropout(x) @ A^T @ B^T) * scaling``) written with torch operators, its frozen linears the installed
bitsandbytes' ``Linear4bit`` (NF4, bf16 compute, quantized on the CPU). bitsandbytes 0.42.0 (litgpt's pin) does not
install here, so its ``MatMul4Bit`` is the installed one with the single line 0.42.0 had in addition
(bitsandbytes/autograd/_functions.py @ 0.42.0 lines 522-523: ``ctx.tensors = (A, B)`` when an input needs a gradient;
pull 1270 made it ``(None, B)`` in 0.43.2). What is measured, independently of the formulas: which storages autograd
and the ``ctx`` really keep alive (the dropout's copy and noise, shared inputs, the kept graph after the backward).
"""

from __future__ import annotations

from typing import Any

import pytest

torch = pytest.importorskip("torch")
bnb = pytest.importorskip("bitsandbytes")
F = torch.nn.functional

from tests.training.measure_step import AllocatorBytes  # noqa: E402

from llmsizer.formulas.training_activations import (  # noqa: E402
    ActivationSetup,
    graph_kept_matmul_inputs,
    layer_saved_terms,
)
from llmsizer.readers.hf_config import spec_from_config  # noqa: E402

B, T, H, HEADS, INTER, R = 2, 64, 128, 4, 256, 8
CONFIG = dict(model_type="llama", vocab_size=256, hidden_size=H, intermediate_size=INTER, num_hidden_layers=1,
              num_attention_heads=HEADS, num_key_value_heads=HEADS, max_position_embeddings=256)
ADAPTED = frozenset({"attn_q", "attn_k", "attn_v", "attn_output", "ffn_gate", "ffn_up", "ffn_down"})
BF16 = torch.bfloat16


class _MatMul4Bit042(bnb.autograd._functions.MatMul4Bit):  # type: ignore[misc,name-defined]
    """The installed MatMul4Bit plus bitsandbytes 0.42.0's line 523."""

    @staticmethod
    def forward(ctx: Any, A: Any, B: Any, out: Any = None, bias: Any = None, quant_state: Any = None) -> Any:
        output = bnb.autograd._functions.MatMul4Bit.forward(ctx, A, B, out, bias, quant_state)
        if any(ctx.needs_input_grad[:2]):
            ctx.tensors = (A, B)
        return output


def _linear4(n_in: int, n_out: int) -> Any:
    lin = bnb.nn.Linear4bit(n_in, n_out, bias=False, compute_dtype=BF16, quant_type="nf4")
    w = torch.randn(n_out, n_in, dtype=BF16) * 0.05
    lin.weight = bnb.nn.Params4bit(w, requires_grad=False, quant_type="nf4")._quantize("cpu")
    return lin


class _LoRA(torch.nn.Module):
    def __init__(self, n_in: int, n_out: int, p: float) -> None:
        super().__init__()
        self.linear = _linear4(n_in, n_out)
        self.lora_A = torch.nn.Parameter(torch.randn(R, n_in, dtype=BF16) * 0.05)
        self.lora_B = torch.nn.Parameter(torch.randn(n_out, R, dtype=BF16) * 0.05)
        self.drop = torch.nn.Dropout(p) if p > 0 else torch.nn.Identity()

    def forward(self, x: Any) -> Any:
        return self.linear(x) + (self.drop(x) @ self.lora_A.transpose(0, 1) @ self.lora_B.transpose(0, 1)) * 2.0


class _Block(torch.nn.Module):
    """litgpt's Block (RMSNorm, fused q/k/v, causal SDPA, projection; RMSNorm, LLaMAMLP) with LoRA everywhere."""

    def __init__(self, p: float) -> None:
        super().__init__()
        self.attn, self.proj = _LoRA(H, 3 * H, p), _LoRA(H, H, p)
        self.fc_1, self.fc_2, self.mlp_proj = _LoRA(H, INTER, p), _LoRA(H, INTER, p), _LoRA(INTER, H, p)
        self.norm_w = torch.nn.Parameter(torch.ones(H, dtype=BF16), requires_grad=False)

    def norm(self, x: Any) -> Any:
        x32 = x.float()
        return (x32 * torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + 1e-5)).to(BF16) * self.norm_w

    def forward(self, x: Any) -> tuple[Any, Any]:
        q, k, v = self.attn(self.norm(x)).view(B, T, 3, HEADS, H // HEADS).permute(2, 0, 3, 1, 4)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True).transpose(1, 2)
        o_in = y.reshape(B, T, H)
        x = x + self.proj(o_in)
        n2 = self.norm(x)
        return x + self.mlp_proj(F.silu(self.fc_1(n2)) * self.fc_2(n2)), y


def _trace(p: float, bnb042: bool, monkeypatch: Any) -> tuple[int, int, bool]:
    """(bytes the forward left alive, bytes alive after the backward with the loss still referenced, whether the
    o-projection input is a copy of the attention output) above what existed before the forward."""
    if bnb042:
        monkeypatch.setattr(bnb, "matmul_4bit", lambda A, B, quant_state, out=None, bias=None:
                            _MatMul4Bit042.apply(A, B, out, bias, quant_state))
    torch.manual_seed(0)
    block = _Block(p)
    x = torch.randn(B, T, H, dtype=BF16, requires_grad=True)
    with AllocatorBytes() as alloc:  # the block and x exist before: the bytes above them
        alloc.mark()
        out, y = block(x)
        copied = not y.is_contiguous()  # CUDA's flash/efficient kernels return a [B, T, H, D] view: no copy there
        del y
        loss = out.float().sum()
        alloc.mark()
        loss.backward()
        grads = sum(q.grad.untyped_storage().nbytes() for q in [x, *block.parameters()] if q.grad is not None)
        alloc.mark()
    return alloc.level(1) - alloc.level(0), alloc.level(2) - alloc.level(0) - grads, copied


def _saved(st: ActivationSetup) -> int:
    spec = spec_from_config(CONFIG, name="tiny")
    return sum(t.bytes for t in layer_saved_terms(spec, 0, st))


def _setup(dropout: str, keeps: bool) -> ActivationSetup:
    # a CPU dropout keeps its scaled noise in the input dtype (2 B), not CUDA's bool mask
    return ActivationSetup(batch=B, seq=T, residual=2, compute=2, full=False, adapted=ADAPTED, rank=R,
                           dropout=dropout, dropout_mask=2, frozen_keeps_input=keeps)


def test_lora_dropout_keeps_a_copy_and_its_noise_per_adapter(monkeypatch: Any) -> None:
    """Eq. D1: with dropout each adapter keeps its dropped-out copy and noise, q/k/v one adapter (litgpt's fused
    linear), instead of sharing its input; the formula's difference equals the trace's."""
    none, _, _ = _trace(0.0, False, monkeypatch)
    drop, _, _ = _trace(0.1, False, monkeypatch)
    want = _saved(_setup("fused-qkv", False)) - _saved(_setup("none", False))
    assert drop - none == want
    per_module = _saved(_setup("per-module", False)) - _saved(_setup("none", False))
    assert per_module - want == 2 * B * T * H * (2 + 2)  # PEFT's separate q, k, v: two more copies + noise


def test_bitsandbytes_042_keeps_every_quantized_input(monkeypatch: Any) -> None:
    """Eq. 4: bitsandbytes 0.42's MatMul4Bit keeps its input; with dropout no adapter saves the raw inputs, so the
    q/k/v input, the MLP input (once for fc_1 and fc_2) and the MLP product come on top (the o input is the
    attention output, which SDPA keeps anyway: on the CPU the reshape copies it, on CUDA it is a view)."""
    new, _, _ = _trace(0.1, False, monkeypatch)
    old, _, copied = _trace(0.1, True, monkeypatch)
    want = _saved(_setup("fused-qkv", True)) - _saved(_setup("fused-qkv", False))
    assert want == B * T * 2 * (H + H + INTER)
    assert old - new == want + (B * T * H * 2 if copied else 0)


def test_kept_graph_holds_the_042_inputs_after_the_backward(monkeypatch: Any) -> None:
    """Eq. G1: after the backward, with the loss still referenced (litgpt's loop), a 0.42 node's ctx.tensors keep
    every quantized input alive (autograd released only the saved tensors); the installed bitsandbytes keeps none."""
    _, new, _ = _trace(0.1, False, monkeypatch)
    _, old, _ = _trace(0.1, True, monkeypatch)
    spec = spec_from_config(CONFIG, name="tiny")
    term = graph_kept_matmul_inputs(spec, _setup("fused-qkv", True), range(1), head=False)
    assert term is not None
    assert old - new == term.bytes
    assert graph_kept_matmul_inputs(spec, _setup("fused-qkv", False), range(1), head=False) is None


@pytest.mark.parametrize("source", [torch.float16, BF16], ids=["fp16 source (0.42)", "bf16 source"])
def test_dequantized_matrix_bytes(source: Any) -> None:
    """Eq. 5: MatMul4Bit's ``F.dequantize_4bit(B, quant_state).to(A.dtype)`` under bf16 compute: bitsandbytes 0.42
    quantized an fp16 copy, so the fp16 matrix and its bf16 cast coexist; a bf16-quantized weight casts nothing."""
    from llmsizer.formulas.nf4_quantization import dequant_bytes

    n_out, n_in = 256, 128
    w4, state = bnb.functional.quantize_4bit(torch.randn(n_out, n_in, dtype=source), quant_type="nf4")
    with AllocatorBytes() as alloc:  # w4 and its state exist before: the bytes above them
        w = bnb.functional.dequantize_4bit(w4, state).to(BF16)
        del w
    peak = alloc.peak()
    quantizer = "bitsandbytes-0.42" if source == torch.float16 else "bitsandbytes"
    assert peak == dequant_bytes(n_out * n_in, quantizer, 2)


@pytest.mark.parametrize("fmt", ["nf4", "nf4-dq"])
def test_4bit_matrix_bytes_with_and_without_double_quant(fmt: str) -> None:
    """``nf4_format``: a matrix quantized by bitsandbytes with fp32 block scales (litgpt's bnb.nf4, transformers'
    default) or double-quantized ones: the packed codes and every quant_state tensor, counted."""
    from llmsizer.formulas.weight_formats import bnb4_matrix_bytes

    n_out, n_in = 512, 384
    w4, qs = bnb.functional.quantize_4bit(torch.randn(n_out, n_in, dtype=BF16), quant_type="nf4",
                                          compress_statistics=fmt == "nf4-dq")
    tensors = [w4, qs.absmax, qs.code] + ([qs.offset, qs.state2.absmax, qs.state2.code] if qs.nested else [])
    assert sum(t.numel() * t.element_size() for t in tensors) == bnb4_matrix_bytes(n_out * n_in, fmt)
