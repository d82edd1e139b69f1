"""Megatron's fused decoder layer's memory-bound traffic (formulas/elementwise_traffic.py eqs. E15/E16, #12).

Independent truth: the kernel inventory of one Megatron-Core layer as the framework code runs it, kernel by kernel,
each with the tensors it reads and writes per token (NVIDIA/Megatron-LM @d7288711, TransformerEngine @d0067d0d):

- ``TELayerNormColumnParallelLinear`` runs its norm as one kernel (TE module/layernorm_linear.py lines 257-268,
  ``apply_normalization``; csrc/extensions/normalization.cpp): forward reads x [h] and writes z [h] and the fp32
  statistics (rsigma; LayerNorm mu and rsigma); backward reads dz [h], x [h] and the statistics and writes dx [h];
- TE's fused RoPE (common/fused_rope/fused_rope.cu lines 50-75): reads src and the fp32 angles freqs[s_id, :d] of
  its position, writes dst; the same each way, once for q and once for k (transformer/attention.py lines 1104-1125);
- ``bias_swiglu_impl`` (transformer/mlp.py lines 264-300, fusions/fused_bias_swiglu.py): forward reads fc1's [2I]
  output and writes [I]; backward reads dy [I] and the saved [2I] input and writes [2I]; ``bias_gelu_impl``
  [I] -> [I], backward dy and the input -> [I];
- ``bias_dropout_add`` with no bias and no dropout: reads the block output and the residual, writes their sum; in
  the backward the residual stream's gradient and the norm's dx are summed once per block;
- ``SplitAlongDim`` splits the fused q/k/v output by views (attention.py lines 1466-1471) and concatenates dq, dk,
  dv in its backward (TE pytorch/utils.py lines 386-470); the grouped query's ``reshape`` (attention.py line 1474)
  copies the split view (checked on real torch below).

The FP8 casts of the norms' outputs are formulas/float8_training.py eq. F3c's and are not in this inventory.
"""

from __future__ import annotations

import pytest

from llmsizer.catalog.models import find
from llmsizer.formulas.elementwise_traffic import (
    F32,
    LayerWidths,
    layer_bytes,
    model_layer_widths,
    step_bytes_per_token,
)

Kernel = tuple[str, float, float, bool]  # (name, bytes read, bytes written per token, hidden-width kernel)


def _inventory(w: LayerWidths, c: float) -> tuple[list[Kernel], list[Kernel]]:
    """(forward, backward) kernels of one Megatron-Core layer with the bytes each moves per token (module
    docstring)."""
    h, i, q, k, d = w.hidden, w.intermediate, w.q_width, w.kv_width, w.head_dim
    stats = (2 if w.layernorm else 1) * F32
    fwd: list[Kernel] = [("norm_fwd (linear_qkv)", c * h, c * h + stats, True)]
    bwd: list[Kernel] = []
    if w.attends:
        if q > k:
            fwd.append(("query reshape copy", c * q, c * q, False))
        bwd.append(("SplitAlongDim backward cat", c * (q + 2 * k), c * (q + 2 * k), False))
        if w.rotary:
            for name, width in (("q", q), ("k", k)):
                fwd.append((f"fused_rope_forward {name}", c * width + F32 * d, c * width, False))
                bwd.append((f"fused_rope_backward {name}", c * width + F32 * d, c * width, False))
    fwd += [("bias_dropout_add (attention)", 2 * c * h, c * h, True),
            ("norm_fwd (linear_fc1)", c * h, c * h + stats, True)]
    if w.gated:
        fwd.append(("bias_swiglu", 2 * c * i, c * i, False))
        bwd.append(("bias_swiglu_back", c * i + 2 * c * i, 2 * c * i, False))
    else:
        fwd.append(("bias_gelu", c * i, c * i, False))
        bwd.append(("bias_gelu_back", 2 * c * i, c * i, False))
    fwd.append(("bias_dropout_add (mlp)", 2 * c * h, c * h, True))
    for block in ("mlp", "attention"):
        bwd.append((f"norm_bwd ({block})", 2 * c * h + stats, c * h, True))
        bwd.append((f"residual gradient sum ({block})", 2 * c * h, c * h, True))
    return fwd, bwd


def _total(kernels: list[Kernel], seq_shards: int = 1) -> float:
    return sum((r + wr) / (seq_shards if hidden else 1) for _, r, wr, hidden in kernels)


# Llama 3 70B on TP 4 (GQA 64/8, RMSNorm, SwiGLU, rotary); GPT-3 175B's layer on TP 8 (MHA, LayerNorm, GeLU,
# learned positions); Llama 3.1 405B on TP 8; a layer without attention (a Mamba layer's norm and MLP part)
SHAPES = {
    "llama-70b-tp4": LayerWidths(8192, 7168, 2048, 256, 128),
    "gpt3-175b-tp8": LayerWidths(12288, 6144, 1536, 1536, 128, gated=False, rotary=False, layernorm=True),
    "llama-405b-tp8": LayerWidths(16384, 6656, 2048, 128, 128),
    "no-attention": LayerWidths(2688, 1856, 4096, 256, 128, rotary=False, attends=False),
}


@pytest.mark.parametrize("name", sorted(SHAPES))
@pytest.mark.parametrize("c", [2.0, 4.0])
@pytest.mark.parametrize("t", [1, 4, 8])
def test_equals_the_kernel_inventory(name: str, c: float, t: int) -> None:
    w = SHAPES[name]
    fwd, bwd = _inventory(w, c)
    got = layer_bytes(w, c, False, True, seq_shards=t, megatron=True)
    assert got == pytest.approx((_total(fwd, t), _total(bwd, t)), rel=1e-12)


def test_the_fusions_remove_most_of_the_eager_layers_traffic() -> None:
    """Llama 3 70B on TP 4 with sequence parallelism: the eager count (transformers' composite RMSNorm, rotate_half,
    separate q/k/v and gate/up linears) against Megatron's fused one, per token and layer, and what each fusion
    takes away (the figures are the inventory's kernels above)."""
    w = SHAPES["llama-70b-tp4"]
    eager = sum(layer_bytes(w, 2.0, False, True, seq_shards=4))
    fused = sum(layer_bytes(w, 2.0, False, True, seq_shards=4, megatron=True))
    fwd, bwd = _inventory(w, 2.0)
    assert fused == pytest.approx(_total(fwd, 4) + _total(bwd, 4))
    assert fused < 0.3 * eager


def test_a_step_counts_megatron_layers_only_when_asked() -> None:
    spec = find("llama-3.1-70b-instruct").spec()
    eager = step_bytes_per_token(spec, 2.0, False, True, {}, 0, "megatron-ce", 4, sequence_parallel=True)
    fused = step_bytes_per_token(spec, 2.0, False, True, {}, 0, "megatron-ce", 4, sequence_parallel=True,
                                 megatron=True)
    w = model_layer_widths(spec, 0, 4)
    per_layer = sum(layer_bytes(w, 2.0, False, True, seq_shards=4))
    per_layer_m = sum(layer_bytes(w, 2.0, False, True, seq_shards=4, megatron=True))
    # the loss is the same in both (megatron-ce stays eq. E3): the difference is the layers' alone
    assert eager - fused == pytest.approx(spec.num_layers * (per_layer - per_layer_m))
    # recomputed layers run the fused forward again
    again = step_bytes_per_token(spec, 2.0, False, True, {}, 80, "megatron-ce", 4, sequence_parallel=True,
                                 megatron=True)
    f = layer_bytes(w, 2.0, False, True, seq_shards=4, megatron=True)[0]
    assert again - fused == pytest.approx(spec.num_layers * f)


def test_torch_split_reshape_and_cat_as_megatron_runs_them() -> None:
    """Real torch (CPU, ``TorchDispatchMode``): the grouped query's reshape of the split fused q/k/v output is one
    copy of q_w elements (``clone``), the kv heads' splits stay views, and the split's backward writes one [q + 2k]
    gradient (``cat``); with as many kv heads as q heads (GPT-3) the query's reshape is a view and the backward's
    ``cat`` remains: the copy and cat terms of eqs. E15/E16."""
    torch = pytest.importorskip("torch")
    from torch.utils._python_dispatch import TorchDispatchMode

    class Ops(TorchDispatchMode):
        def __init__(self) -> None:
            super().__init__()
            self.ops: list[tuple[str, int]] = []

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # type: ignore[no-untyped-def]
            out = func(*args, **(kwargs or {}))
            if isinstance(out, torch.Tensor):
                self.ops.append((func.__name__.split(".")[0], out.numel()))
            return out

    sq, b, hn = 4, 2, 8
    for groups, heads in ((2, 8), (8, 8)):
        per = heads // groups
        mixed = torch.randn(sq, b, groups, (per + 2) * hn, requires_grad=True)
        with Ops() as rec:
            query, key, value = torch.split(mixed, [per * hn, hn, hn], dim=3)
            query = query.reshape(sq, b, -1, hn)
            forward = [op for op in rec.ops if op[0] not in ("view", "_unsafe_view")]
            loss = (query * 2).sum() + (key * 3).sum() + (value * 4).sum()
            rec.ops.clear()
            loss.backward()
        q_w, k_w = sq * b * heads * hn, sq * b * groups * hn
        assert forward == ([("clone", q_w)] if groups < heads else [])
        assert [op for op in rec.ops if op[0] == "cat"] == [("cat", q_w + 2 * k_w)]
