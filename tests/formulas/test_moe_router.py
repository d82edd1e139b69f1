"""Eq. E19 (formulas/moe_router.py): Megatron-Core's unfused router, its kernels and bytes per token against the lines
of NVIDIA/Megatron-LM @d7288711 megatron/core/transformer/moe/moe_utils.py run on CPU tensors under
``TorchDispatchMode`` (each op that launches a kernel, its reads and writes: a factory op reads nothing, a gather the
elements it picks, a broadcast input its storage)."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from torch.utils._python_dispatch import TorchDispatchMode  # noqa: E402
from torch.utils._pytree import tree_flatten  # noqa: E402

from llmsizer.formulas.moe_router import forced_balance_terms, unfused_router_terms  # noqa: E402

VIEWS = {"view", "_unsafe_view", "expand", "t", "detach", "alias", "unsqueeze", "squeeze", "as_strided", "slice",
         "select", "reshape", "permute", "transpose", "split", "lift_fresh"}
FACTORIES = {"zeros_like", "new_zeros", "ones", "ones_like", "empty_like", "zeros"}


class _Bytes(TorchDispatchMode):
    def __init__(self) -> None:
        super().__init__()
        self.kernels, self.bytes = 0, 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # type: ignore[no-untyped-def]
        out = func(*args, **(kwargs or {}))
        name = func.overloadpacket.__name__
        if name in VIEWS:
            return out
        ins = [a for a in tree_flatten((args, kwargs))[0] if isinstance(a, torch.Tensor)]
        outs = [o for o in tree_flatten(out)[0] if isinstance(o, torch.Tensor)]
        written = sum(o.nbytes for o in outs)
        if name in FACTORIES:
            read = 0
        elif name == "gather":
            read = written + ins[-1].nbytes  # the picked elements and the index
        else:
            read = sum(min(a.nbytes, a.untyped_storage().nbytes()) for a in ins)
        self.kernels += 1
        self.bytes += read + written
        return out


def _route(logits, topk: int, aux: bool):  # type: ignore[no-untyped-def]
    """moe_utils.py lines 805-808, 817-822 (softmax after the top-k, unfused), and with ``aux`` lines 857-868, 233,
    143-146 (the aux loss's scores, token counts and loss)."""
    scores, top_indices = torch.topk(logits, k=topk, dim=1)
    probs = torch.softmax(scores, dim=-1, dtype=torch.float32).type_as(logits)
    routing_probs = torch.zeros_like(logits).scatter(1, top_indices, probs)
    _ = torch.zeros_like(logits).int().scatter(1, top_indices, 1).bool()
    if not aux:
        return routing_probs, None
    s = torch.softmax(logits, dim=-1, dtype=torch.float32)
    _, ti = torch.topk(s, k=topk, dim=1)
    rm = torch.zeros_like(logits).int().scatter(1, ti, 1).bool()
    tokens_per_expert = rm.sum(dim=0)
    loss = torch.sum(s.sum(dim=0) * tokens_per_expert) * 1e-3
    return routing_probs, loss


@pytest.mark.parametrize(("experts", "top_k", "dtype", "aux"), [
    (128, 8, "bfloat16", True), (128, 8, "bfloat16", False), (128, 8, "float32", True), (64, 6, "float32", False),
    (32, 4, "bfloat16", True)])
def test_the_terms_are_the_traced_ops(experts: int, top_k: int, dtype: str, aux: bool) -> None:
    t = 4096
    dt = getattr(torch, dtype)
    logits = torch.randn(t, experts, dtype=dt, requires_grad=True)
    fwd = _Bytes()
    with fwd:
        probs, loss = _route(logits, top_k, aux)
    grads = [torch.randn(t, experts, dtype=dt)]
    scale = torch.tensor(1.0)
    bwd = _Bytes()
    with bwd:
        if aux:  # MoEAuxLossAutoScaler.backward (moe_utils.py lines 269-285): the aux loss's gradient ones_like x scale
            grads.append(torch.ones_like(loss) * scale)
        torch.autograd.backward([probs] + ([loss] if aux else []), grads)
    terms = unfused_router_terms(experts, top_k, 4.0 if dtype == "float32" else 2.0, aux)
    for phase, got in (("forward", fwd), ("backward", bwd)):
        assert got.kernels == sum(k for p, k, _ in terms.values() if p == phase), phase
        # the scalar ops (the loss, its gradient, the [E] sums' outputs) spread over the tokens: under 0.5 %
        assert got.bytes / t == pytest.approx(sum(b for p, _, b in terms.values() if p == phase), rel=5e-3), phase


def test_forced_balance_is_a_clone_and_a_normal_fill() -> None:
    logits = torch.randn(1024, 128, dtype=torch.bfloat16)
    got = _Bytes()
    with got:
        logits.clone().normal_()
    # normal_ writes in place (its input is its output: counted once as written here, read by nothing)
    assert got.kernels == forced_balance_terms(128)[0]
    assert (got.bytes - 1024 * 128 * 2) / 1024 == forced_balance_terms(128, 2.0)[1]


@pytest.mark.parametrize(("experts", "top_k", "dtype"), [(128, 4, "bfloat16"), (128, 8, "bfloat16"), (64, 6, "float32")])
def test_the_unfused_extra_is_the_traced_routing_less_the_fused_topk(experts: int, top_k: int, dtype: str) -> None:
    """``unfused_routing_extra``: the traced ops of Megatron-Core's unfused routing without the aux loss (moe_utils.py
    lines 805-808, 817-822 @d7288711, run above) less eq. K9's one fused top-k kernel each way (TE's
    fused_topk_with_score_function and its backward); the bytes the traced ones'."""
    from llmsizer.formulas.moe_router import FUSED_TOPK_KERNELS, unfused_routing_extra

    t = 4096
    dt = getattr(torch, dtype)
    logits = torch.randn(t, experts, dtype=dt, requires_grad=True)
    fwd = _Bytes()
    with fwd:
        probs, _ = _route(logits, top_k, False)
    grad = torch.randn(t, experts, dtype=dt)
    bwd = _Bytes()
    with bwd:
        torch.autograd.backward([probs], [grad])
    kf, kb, bf, bb = unfused_routing_extra(experts, top_k, 4.0 if dtype == "float32" else 2.0)
    assert FUSED_TOPK_KERNELS == (1, 1)
    assert (kf, kb) == (fwd.kernels - 1, bwd.kernels - 1)
    assert (bf, bb) == (pytest.approx(fwd.bytes / t, rel=5e-3), pytest.approx(bwd.bytes / t, rel=5e-3))


def test_an_unfused_megatron_router_adds_its_launches_and_traffic() -> None:
    """moe_router_fusion off (Megatron-Core's TransformerConfig default, transformer_config.py line 792 @d7288711) on
    GPT-OSS-120B under Bridge's PM1361 fields (which set it on): per MoE layer eq. E19's routing ops without the aux
    loss in place of eq. K9's fused top-k. gpt-oss-120b config.json: 36 layers, all MoE, 128 experts, top-4; bf16
    logits (c = 2, one fp32 cast each way of the top-k softmax). Kernels from eq. E19's table: forward topk 1, top-k
    softmax 1 + 2, probs scatter 2, map scatter 4 = 10 (- 1 fused); backward gather 1, softmax 1 + 2, scatter 2 = 6
    (- 1). Bytes per token: forward E c + k (c + 8) = 296, 8k + 2 (k c + 4k) = 80, 3 E c + k (c + 8) = 808,
    2 E c + 17 E + 8k = 2,720; backward 2k c + 8k = 48, 12k + 2 (k c + 4k) = 96, 3 E c + k (c + 8) = 808."""
    from llmsizer.catalog.hardware import builtin_catalog
    from llmsizer.estimate.duration import elementwise_bytes_per_token, kernels_per_micro_step, training_duration_for
    from llmsizer.models import load_model
    from llmsizer.specs import TrainingWorkload
    from llmsizer.validation_cases import MEGATRON_BRIDGE_RUNS

    model, device, fields, _ = MEGATRON_BRIDGE_RUNS["PM1361"]
    assert fields["moe_router_fusion"] is True
    spec = load_model(model)
    kw = {k: v for k, v in fields.items() if k not in ("network", "moe_router_fusion")}
    on, off = TrainingWorkload(**kw, moe_router_fusion=True), TrainingWorkload(**kw)
    assert off.moe_router_fusion is None
    layers = 36
    assert (spec.num_layers, sum(spec.moe_layers), spec.moe.num_experts, spec.moe.experts_per_token) == (36, 36, 128, 4)
    assert kernels_per_micro_step(spec, off) - kernels_per_micro_step(spec, on) == layers * ((10 - 1) + (6 - 1))
    forward, backward = 296 + 80 + 808 + 2720, 48 + 96 + 808
    # PM1361's selective recompute ('layernorm', 'moe_act') does not re-run the router; no sequence parallelism
    assert elementwise_bytes_per_token(spec, off) - elementwise_bytes_per_token(spec, on) == pytest.approx(
        layers * (forward + backward), rel=1e-12)
    dev = builtin_catalog().devices[device]
    d_off = training_duration_for(spec, dev, fields["gpus"], 1e9, dict(kw))
    d_on = training_duration_for(spec, dev, fields["gpus"], 1e9, dict(kw, moe_router_fusion=True))
    a_off = {a.name: a for a in d_off.assumptions}["moe_router_fusion"]
    a_on = {a.name: a for a in d_on.assumptions}["moe_router_fusion"]
    assert (a_off.value, a_off.default, a_on.value, a_on.default) == (False, True, True, False)
    assert "transformer_config.py line 792" in a_off.why
    assert d_off.step is not None and d_on.step is not None and d_off.step.step_seconds > d_on.step.step_seconds


def test_the_field_is_megatron_only_and_the_sigmoid_router_is_not_charged() -> None:
    from llmsizer.errors import InputError
    from llmsizer.estimate.launch import megatron_router_unfused
    from llmsizer.models import load_model
    from llmsizer.specs import TrainingWorkload

    with pytest.raises(InputError, match="moe_router_fusion.*megatron-bf16"):
        TrainingWorkload(precision="bf16-mixed", moe_router_fusion=True)
    with pytest.raises(InputError, match="moe_router_fusion"):
        TrainingWorkload(precision="megatron-bf16", moe_router_fusion="yes")  # type: ignore[arg-type]
    w = TrainingWorkload(method="full", precision="megatron-bf16", optimizer="adamw", zero=1, gpus=8, ep=8)
    assert megatron_router_unfused(load_model("qwen3-30b-a3b"), w)
    # GLM-4.5-Air's sigmoid router with its expert bias: not eq. E19's softmax top-k, kept as eq. K9 counts it
    assert not megatron_router_unfused(load_model("glm-4.5-air"), w)
    assert not megatron_router_unfused(load_model("llama-3.1-8b"), w)  # dense
