"""Eqs. K11/K12 (formulas/megatron_layer_kernels.py): the kernels of a Megatron-Core TransformerEngine decoder layer,
against the layer's kernels listed one by one in launch order as the modules run them (NVIDIA/Megatron-LM @d7288711
transformer_layer.py ``_forward_attention`` / ``_forward_mlp``; TransformerEngine @27486e03), and their use for
Megatron runs in the micro-step's launch count (estimate/duration.py kernels_per_micro_step) and eq. K10's span."""

from __future__ import annotations

import math

import pytest

from llmsizer.formulas.megatron_layer_kernels import (
    megatron_layer_kernels,
    megatron_recompute_kernels,
    qkv_layout_copies,
)


def _te_layout_supported(q, k, v) -> bool:
    """TransformerEngine @27486e03 dot_product_attention/utils.py ``get_qkv_layout``'s ``run_iteratively`` (lines
    2337-2435, transcribed; not in ONNX export): whether q, k, v as given fit one of its layouts (else TE makes all
    three contiguous, lines 2440-2442). Returns the layout family: '3' (sb3hd / sbh3d), '2', 'hd' or ''."""
    data_ptr = q.untyped_storage().data_ptr()
    ptrs_qkv = all(x.untyped_storage().data_ptr() == data_ptr for x in [q, k, v])
    ptrs_qk = all(x.untyped_storage().data_ptr() == data_ptr for x in [q, k])
    data_ptr = k.untyped_storage().data_ptr()
    ptrs_kv = all(x.untyped_storage().data_ptr() == data_ptr for x in [k, v])
    shapes_qkv = all(q.shape == x.shape for x in [q, k, v])
    shapes_kv = k.shape[:-1] == v.shape[:-1]
    strides_qkv = all(q.stride() == x.stride() for x in [q, k, v])
    strides_kv = (tuple(sk / k.shape[-1] for sk in k.stride()[:-1])
                  == tuple(sv / v.shape[-1] for sv in v.stride()[:-1]))
    hd = q.shape[-1] * q.shape[-2]
    off_3hd = all(x.storage_offset() == i * hd for i, x in enumerate([q, k, v]))
    off_h3d = all(x.storage_offset() == i * q.shape[-1] for i, x in enumerate([q, k, v]))
    prods = [math.prod(x.shape) for x in [q, k]]
    offset = prods[0] if ptrs_qkv else 0
    hd = k.shape[-1] * k.shape[-2]
    off_2hd = all(x.storage_offset() == offset + i * hd for i, x in enumerate([k, v]))
    off_h2d = all(x.storage_offset() == offset + i * k.shape[-1] for i, x in enumerate([k, v]))
    off_qkv = (all(x.storage_offset() == sum(prods[:i]) for i, x in enumerate([q, k, v])) if ptrs_qkv
               else all(x.storage_offset() == 0 for x in [q, k, v]))
    off_qk = (all(x.storage_offset() == sum(prods[:i]) for i, x in enumerate([q, k])) if not ptrs_qkv and ptrs_qk
              else all(x.storage_offset() == 0 for x in [q, k]))
    off_kv = (all(x.storage_offset() == sum(prods[1:i + 1]) for i, x in enumerate([k, v]))
              if not ptrs_qkv and ptrs_kv else all(x.storage_offset() == 0 for x in [k, v]))
    if ptrs_qkv and strides_qkv and shapes_qkv and (off_3hd or off_h3d):
        return "3"
    if ptrs_kv and strides_kv and shapes_kv and (off_2hd or off_h2d):
        return "2"
    return "hd" if strides_kv and shapes_kv and (off_qkv or off_qk or off_kv) else ""


def _traced_layout_copies(rotary: bool, qk: bool, groups: int, per_group: int) -> tuple[int, int]:
    """The copy kernels (clone, copy_, cat) torch dispatches, traced on CPU (TorchDispatchMode), for Megatron's split
    q/k/v path (Megatron-LM @d7288711 attention.py lines 1458-1474: TE's SplitAlongDim over the fused q/k/v output,
    the query's reshape; q/k norms and fused rotary as kernels that return new tensors) into TE's attention (its
    layout rule above; the fused attention's gradients one sliced dQKV buffer for the interleaved layout,
    csrc/extensions/attention.cpp lines 405-415, else apart, lines 448-454) and back through SplitAlongDim's backward
    (pytorch/utils.py lines 504-532: its buffer where the gradients tile it, else torch.cat)."""
    torch = pytest.importorskip("torch")
    from torch.utils._python_dispatch import TorchDispatchMode

    copies = {"clone", "copy_", "cat", "_to_copy"}

    class Log(TorchDispatchMode):
        def __init__(self) -> None:
            super().__init__()
            self.ops: list[str] = []

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            self.ops.append(func.overloadpacket.__name__)
            return func(*args, **(kwargs or {}))

    class Split(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x, sizes):
            ctx.sizes = sizes
            return tuple(torch.split(x, sizes, dim=3))

        @staticmethod
        def backward(ctx, *gs):
            g0, shape = gs[0], list(gs[0].shape)
            for i, t in enumerate(gs):  # pytorch/utils.py lines 504-517: the no-op test, transcribed
                shape_i = list(shape)
                shape_i[3] = ctx.sizes[i]
                if (t.stride() != g0.stride() or list(t.shape) != shape_i
                        or t.untyped_storage().data_ptr() != g0.untyped_storage().data_ptr()
                        or t.storage_offset() != sum(ctx.sizes[:i])):
                    return torch.cat(gs, dim=3), None
            whole = list(shape)
            whole[3] = sum(ctx.sizes)
            return g0.new_empty(0).set_(g0.untyped_storage(), g0.storage_offset(), whole, g0.stride()), None

    class NewTensor(torch.autograd.Function):  # a fused kernel with a new output (TE's norm, fused rope)
        @staticmethod
        def forward(ctx, t):
            return t.mul(1.0).contiguous()

        @staticmethod
        def backward(ctx, g):
            return g.mul(1.0)

    class Attention(torch.autograd.Function):
        @staticmethod
        def forward(ctx, q, k, v, interleaved):
            ctx.shapes, ctx.interleaved = (q.shape, k.shape, v.shape), interleaved
            return q.mul(1.0)

        @staticmethod
        def backward(ctx, g):
            if ctx.interleaved:  # one dQKV [..., h, 3, d], sliced
                buf = g.new_ones((*ctx.shapes[0][:-1], 3, ctx.shapes[0][-1]))
                return buf[..., 0, :], buf[..., 1, :], buf[..., 2, :], None
            return (*(g.new_ones(s) for s in ctx.shapes), None)

    s, b, d = 3, 2, 4
    x = torch.randn(s, b, 8, requires_grad=True)
    w = torch.randn(groups * (per_group + 2) * d, 8, requires_grad=True)
    mixed = torch.nn.functional.linear(x, w).view(s, b, groups, (per_group + 2) * d)
    with Log() as fwd:
        q, k, v = Split.apply(mixed, [per_group * d, d, d])
        q = q.reshape(s, b, -1, d)
        if qk:
            q, k = NewTensor.apply(q), NewTensor.apply(k)
        if rotary:
            q, k = NewTensor.apply(q), NewTensor.apply(k)
        layout = _te_layout_supported(q, k, v)
        if not layout:
            q, k, v = (t.contiguous() for t in (q, k, v))
        out = Attention.apply(q, k, v, layout == "3")
    loss = out.sum()
    with Log() as bwd:
        loss.backward()
    return sum(o in copies for o in fwd.ops), sum(o in copies for o in bwd.ops)


@pytest.mark.parametrize("rotary", [False, True])
@pytest.mark.parametrize("qk", [False, True])
@pytest.mark.parametrize(("groups", "per_group"), [(1, 1), (1, 8), (2, 8), (4, 1), (8, 8)])
def test_the_layout_copies_are_the_traced_ones(rotary: bool, qk: bool, groups: int, per_group: int) -> None:
    """Eq. K11c against a CPU trace of the split q/k/v path (review30 D2): e.g. Llama 3 70B at TP 4 (2 groups of 8
    heads a rank) copies the query and the value forward and concatenates the gradients backward."""
    assert qkv_layout_copies(rotary or qk, groups, per_group) == _traced_layout_copies(rotary, qk, groups, per_group)

# one layer in launch order: (kernel, GEMM class) -- the TE spec's modules (gpt_layer_specs.py lines 132-151)
QUANT = ["zero amax", "amax", "scale from amax", "cast"]  # csrc/quantizer.cpp lines 988-1007


def _forward(moe: bool, qk: bool, rotary: bool, fp8: bool, groups: int, per: int) -> list[tuple[str, bool]]:
    def linear(name: str) -> list[tuple[str, bool]]:
        return [(f"{name} {q}", False) for q in (QUANT if fp8 else [])] + [(f"{name} gemm", True)]

    ks = [("input rmsnorm (linear_qkv's LayerNormLinear)", False), *linear("qkv")]
    ks += [("q norm", False), ("k norm", False)] if qk else []
    ks += [("fused rope q", False), ("fused rope k", False)] if rotary else []
    ks += [("q/k/v layout copy (traced)", False)] * _traced_layout_copies(rotary, qk, groups, per)[0]
    ks += [("fused attention", True), *linear("proj"), ("self_attn_bda add", False)]
    if moe:
        ks += [("pre_mlp_layernorm TENorm", False)]
    else:
        ks += [("pre-mlp rmsnorm (linear_fc1's LayerNormLinear)", False), *linear("fc1"), ("bias_swiglu", False),
               *linear("fc2")]
    return ks + [("mlp_bda add", False)]


def _backward(moe: bool, qk: bool, rotary: bool, fp8: bool, groups: int, per: int) -> list[tuple[str, bool]]:
    def linear(name: str) -> list[tuple[str, bool]]:
        return [(f"{name} dgrad", True), (f"{name} wgrad", True)] + [(f"{name} grad {q}", False)
                                                                      for q in (QUANT if fp8 else [])]

    norm_bwd = [("rmsnorm bwd", False), ("rmsnorm bwd finalize", False)]
    ks = [("residual grad sum (mlp fork)", False)]
    if moe:
        ks += norm_bwd
    else:
        ks += [*linear("fc2"), ("bias_swiglu bwd", False), *linear("fc1"), *norm_bwd]
    ks += [("residual grad sum (attention fork)", False), *linear("proj"), ("fused attention bwd", True)]
    ks += [("fused rope q bwd", False), ("fused rope k bwd", False)] if rotary else []
    ks += norm_bwd * 2 if qk else []
    ks += [("SplitAlongDim backward cat (traced)", False)] * _traced_layout_copies(rotary, qk, groups, per)[1]
    return ks + [*linear("qkv"), *norm_bwd]


@pytest.mark.parametrize("moe", [False, True])
@pytest.mark.parametrize("qk", [False, True])
@pytest.mark.parametrize("rotary", [False, True])
@pytest.mark.parametrize("fp8", [False, True])
@pytest.mark.parametrize(("groups", "per"), [(1, 8), (2, 8), (4, 1)])
def test_the_counts_are_the_listed_kernels(moe: bool, qk: bool, rotary: bool, fp8: bool, groups: int, per: int) -> None:
    f, b = _forward(moe, qk, rotary, fp8, groups, per), _backward(moe, qk, rotary, fp8, groups, per)
    got = megatron_layer_kernels(moe, qk, rotary, fp8, groups, per)
    assert got == (sum(g for _, g in f), sum(not g for _, g in f), sum(g for _, g in b), sum(not g for _, g in b))


def test_a_megatron_layer_launches_fewer_kernels_than_transformers_eager_one() -> None:
    """A Llama layer: transformers' eager 38 forward / 71 backward (eqs. K2/K3) against TE's 14 / 19 in bf16 (Llama 3
    70B at TP 4: 2 query groups of 8 heads a rank, so the query's reshape copies too, eq. K11c)."""
    fg, fo, bg, bo = megatron_layer_kernels(False, groups=2, per_group=8)
    assert (fg + fo, bg + bo) == (14, 19)


def test_selective_recompute_reruns_only_the_separate_modules() -> None:
    assert megatron_recompute_kernels(("layernorm", "moe_act"), moe=True) == 2
    assert megatron_recompute_kernels(("layernorm", "moe_act"), moe=False) == 0  # both norms fused into linears
    assert megatron_recompute_kernels(("core_attn",), moe=False) == 1
    assert megatron_recompute_kernels(("moe",), moe=True) == 0  # the block: eq. K9, counted by the caller


def test_megatron_runs_count_the_te_layer_and_others_the_eager_one() -> None:
    """Megatron-Bridge's Llama 3 70B FP8 row (PM1360): 80 layers of eq. K11/K12 (rotary, no q/k norms, FP8) plus the
    head; the same workload under torch's bf16 recipe keeps eqs. K2/K3; a hybrid Mamba stack (PM1367) keeps them too."""
    from llmsizer.catalog.models import find
    from llmsizer.estimate.duration import kernels_per_micro_step
    from llmsizer.estimate.launch import megatron_te_layers
    from llmsizer.formulas.launch_overhead import head_kernels
    from llmsizer.specs import TrainingWorkload
    from llmsizer.validation_cases import MEGATRON_BRIDGE_RUNS

    model, _, fields, _ = MEGATRON_BRIDGE_RUNS["PM1360"]
    spec = find(model).spec()
    w = TrainingWorkload(**{k: v for k, v in fields.items() if k not in ("network",)})
    assert megatron_te_layers(spec, w)
    head = head_kernels(False, True, True, False, True, w.loss, True)
    # and eq. K12h: the two norm weights' main_grad adds per layer (the linear weights fused into their wgrad GEMMs)
    # Llama 3 70B: 64 query heads in 8 groups, TP 4: 2 groups of 8 heads a rank (eq. K11c)
    assert (spec.num_heads, spec.num_kv_heads, w.tp) == (64, 8, 4)
    layer = sum(megatron_layer_kernels(False, False, True, True, groups=2, per_group=8))
    # outside the layers (eq. K12h, review31 D3): the word embedding's and the final norm's adds; the untied output
    # layer's weight is accumulated by its fused wgrad (gradient_accumulation_fusion on under a megatron precision)
    assert kernels_per_micro_step(spec, w) == 80 * (layer + 2) + head + 2
    bf16 = TrainingWorkload(**{k: v for k, v in fields.items() if k not in (
        "network", "precision", "float8", "float8_recipe", "fp8_param_gather", "tp_comm_overlap", "overlap_grad_reduce",
        "overlap_param_gather")}, precision="bf16-mixed")
    assert not megatron_te_layers(spec, bf16)
    nano, _, nfields, _ = MEGATRON_BRIDGE_RUNS["PM1367"]
    assert not megatron_te_layers(find(nano).spec(), TrainingWorkload(
        **{k: v for k, v in nfields.items() if k not in ("network",)}))


def test_the_hook_adds_follow_the_parameters_megatrons_ddp_accumulates() -> None:
    """Eq. K12h on GPT-OSS 120B at EP 8 (PM1361): per MoE layer its two norms, the q/k/v and output biases, the router
    weight and bias, the attention sinks and the fc1 / fc2 biases of its 16 local experts add into main_grad (39);
    without gradient_accumulation_fusion its q/k/v and output weights and the 32 local expert weights add too."""
    from llmsizer.catalog.models import find
    from llmsizer.estimate.duration import kernels_per_micro_step
    from llmsizer.specs import TrainingWorkload
    from llmsizer.validation_cases import MEGATRON_BRIDGE_RUNS

    model, _, fields, _ = MEGATRON_BRIDGE_RUNS["PM1361"]
    spec = find(model).spec()
    kw = {k: v for k, v in fields.items() if k != "network"}
    on, off = (kernels_per_micro_step(spec, TrainingWorkload(**kw, gradient_accumulation_fusion=f)) for f in (True, False))
    # + 1: gpt-oss's untied output layer weight (config.json tie_word_embeddings false), added by the hook unfused
    assert not spec.tie_word_embeddings and off - on == spec.num_layers * (2 + 2 * 128 // 8) + 1
