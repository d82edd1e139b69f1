"""TiledMLP (Arctic Long Sequence Training) against a live-tensor trace of a real CPU forward and backward: eqs. TM1
(what the tiled MLP saves) and TM2 (the most bytes alive inside its backward), formulas/training_activations.py.

The truth is the MLP of one transformers Llama layer run through ``TiledMLP.apply``: DeepSpeed's own class
(deepspeed 0.19.8, the test extra's pin) and, beside it, the re-implementation below, a line-for-line copy of
``deepspeed/runtime/sequence_parallel/ulysses_sp.py`` @edaa7221 ``TiledMLP`` (lines 943-1062) less the ZeRO
``ds_grad_is_ready`` flags (0.19.8 differs only in ``reshape`` for ``view`` in the backward): both give the same
bytes. ArcticTraining's ``tiled_mlp_forward_common`` (arctic_training/model/tiled_compute.py
@b28638e6 lines 48-81) calls it with ``num_shards = ceil(seqlen / hidden)``.

- TM1: ``saved_tensors_hooks`` see every tensor autograd saves in the forward: the tiled MLP saves its input x and
  nothing else (the untiled MLP saves its input and four [t, I] tensors: the A3 test's case).
- TM2: the CPU allocator's bytes (tests/training/measure_step.py ``AllocatorBytes``), the mark set when the gradient
  of the MLP's output arrives; the fresh peak after it plus the incoming gradient is eq. A3 with the tiled MLP, to the
  byte (weights frozen: the weight gradients are counted apart in A3).
"""

from __future__ import annotations

import math
from typing import Any

import pytest

torch = pytest.importorskip("torch")

from tests.training.measure_step import AllocatorBytes  # noqa: E402

from llmsizer.formulas.training_activations import (  # noqa: E402
    ActivationSetup,
    layer_backward_transient,
    layer_saved_terms,
    tiled_mlp_shards,
)
from llmsizer.readers.hf_config import spec_from_config  # noqa: E402
from oracle_utils import build  # noqa: E402

pytestmark = pytest.mark.slow

CFG = {"model_type": "llama", "vocab_size": 256, "hidden_size": 64, "intermediate_size": 1024, "num_hidden_layers": 1,
       "num_attention_heads": 4, "num_key_value_heads": 4, "max_position_embeddings": 4096}
DTYPES = {"fp32": (torch.float32, 4), "bf16": (torch.bfloat16, 2)}


class TiledMLPCopy(torch.autograd.Function):
    """DeepSpeed ulysses_sp.py @edaa7221 TiledMLP (lines 943-1062), without the ZeRO ``ds_grad_is_ready`` flags."""

    @staticmethod
    def forward(ctx: Any, fn: Any, self: Any, x: Any, shards: int, compute_params: Any) -> Any:  # type: ignore[override]
        ctx.fn = fn
        ctx.self = self
        ctx.shards = shards
        ctx.save_for_backward(x)
        x_shards = list(torch.chunk(x, chunks=shards, dim=-2))
        with torch.no_grad():
            output_shards = [fn(self, x_shard) for x_shard in x_shards]
        return torch.cat(output_shards, dim=-2)

    @staticmethod
    def backward(ctx: Any, *grads: Any) -> Any:  # type: ignore[override]
        fn, self, shards = ctx.fn, ctx.self, ctx.shards
        (x,) = ctx.saved_tensors
        x_requires_grad = x.requires_grad
        x = x.detach()
        x.requires_grad_(x_requires_grad)
        hidden_size = x.shape[-1]
        x_shape_orig = x.shape
        x = x.view(-1, hidden_size)
        incoming_grad = grads[0].view(-1, hidden_size)
        x_grad = torch.zeros_like(x)
        x_shards = list(torch.chunk(x, chunks=shards, dim=0))
        for i, x_shard in enumerate(x_shards):
            x_shard.requires_grad_(x_requires_grad)
            shard_step = x_shards[i].shape[0]
            shard_offset = i * x_shards[0].shape[0]
            x_shard.grad = x_grad.narrow(0, shard_offset, shard_step).view_as(x_shard)
            incoming_grad_shard = incoming_grad.narrow(0, shard_offset, shard_step).view_as(x_shard)
            with torch.enable_grad():
                output = fn(self, x_shard)
            torch.autograd.backward(output, incoming_grad_shard)
        return (None, None, x_grad.view(x_shape_orig), None, None)


def _implementations() -> list[Any]:
    out = [pytest.param(TiledMLPCopy, id="copy")]
    try:
        from deepspeed.runtime.sequence_parallel.ulysses_sp import TiledMLP
    except Exception:  # deepspeed absent (or unable to import on this machine): the copy alone
        out.append(pytest.param(None, id="deepspeed", marks=pytest.mark.skip(reason="deepspeed does not import")))
    else:
        out.append(pytest.param(TiledMLP, id="deepspeed"))
    return out


def _mlp_forward(self: Any, x: Any) -> Any:  # the docstring's patch of LlamaMLP (ulysses_sp.py lines 973-974)
    return self.down_proj(self.act_fn(self.gate_proj(x)) * self.up_proj(x))


def _mlp(dtype: Any) -> Any:
    torch.manual_seed(0)
    mlp = build(CFG, device="cpu", dtype=dtype, attn="sdpa").model.layers[0].mlp
    for p in mlp.parameters():
        p.requires_grad_(False)
    return mlp


def _setup(seq: int, c: int) -> ActivationSetup:
    return ActivationSetup(batch=1, seq=seq, compute=c, residual=c, attention="sdpa",
                           mlp_shards=tiled_mlp_shards(seq, CFG["hidden_size"]))


def test_shard_rule() -> None:
    # ulysses_sp.py line 965 / tiled_compute.py line 56: ceil(seqlen / hidden)
    assert tiled_mlp_shards(500_000, 4096) == 123 == math.ceil(500_000 / 4096)
    assert tiled_mlp_shards(4096, 4096) == 1 and tiled_mlp_shards(10, 4096) == 1


@pytest.mark.parametrize("impl", _implementations())
@pytest.mark.parametrize("dt", ["fp32", "bf16"])
def test_tm1_saves_the_input_only(impl: Any, dt: str) -> None:
    dtype, c = DTYPES[dt]
    seq = 300  # 5 shards of h 64 (the last one shorter: 4 x 60 + 60)
    mlp = _mlp(dtype)
    saved: list[int] = []

    def pack(t: Any) -> Any:
        if not isinstance(t, torch.nn.Parameter):
            saved.append(t.untyped_storage().nbytes())
        return t

    x = torch.randn(1, seq, CFG["hidden_size"], dtype=dtype, requires_grad=True)
    shards = tiled_mlp_shards(seq, CFG["hidden_size"])
    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        out = impl.apply(_mlp_forward, mlp, x, shards, list(mlp.parameters()))
    assert saved == [seq * CFG["hidden_size"] * c]  # x, nothing of the shards
    spec = spec_from_config(CFG, name="tiny-llama")
    mlp_terms = [tm for tm in layer_saved_terms(spec, 0, _setup(seq, c)) if tm.name.startswith("mlp ") and
                 "norm" not in tm.name]
    assert [tm.bytes for tm in mlp_terms] == saved
    # and it computes the untiled MLP's output
    torch.testing.assert_close(out, _mlp_forward(mlp, x))


@pytest.mark.parametrize("impl", _implementations())
@pytest.mark.parametrize(("seq", "dt"), [(256, "fp32"), (300, "fp32"), (256, "bf16")])
def test_tm2_is_the_live_peak_of_the_backward(impl: Any, seq: int, dt: str) -> None:
    dtype, c = DTYPES[dt]
    shards = tiled_mlp_shards(seq, CFG["hidden_size"])
    with AllocatorBytes() as alloc:
        mlp = _mlp(dtype)
        x = torch.randn(1, seq, CFG["hidden_size"], dtype=dtype, requires_grad=True)
        out = impl.apply(_mlp_forward, mlp, x, shards, list(mlp.parameters()))
        grad = torch.randn_like(out)
        out.grad_fn.register_prehook(lambda _, a=alloc: a.mark())
        out.backward(grad)
    measured = alloc.fresh_peak(0) + grad.numel() * grad.element_size()
    spec = spec_from_config(CFG, name="tiny-llama")
    assert layer_backward_transient(spec, 0, _setup(seq, c)) >= measured  # A3 is the max over the MLP and attention
    from llmsizer.formulas.training_activations import tiled_mlp_backward_bytes

    tm2 = tiled_mlp_backward_bytes(seq, CFG["hidden_size"], CFG["intermediate_size"], shards, c, c)
    assert tm2 + grad.numel() * grad.element_size() == measured
    # untiled, the same backward holds 3 [t, I] beyond the four saved [t, I]: tiling keeps a shard's worth
    assert tm2 < 3 * seq * CFG["intermediate_size"] * c
