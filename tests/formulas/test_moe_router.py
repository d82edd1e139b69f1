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
