"""Per-step memory traffic of the optimizer and of gradient accumulation (formulas/optimizer_step.py, #12), against
torch's real optimizers (AdamW, SGD with and without momentum, Adafactor) and autograd on the CPU.

Independent truth: a ``TorchDispatchMode`` adds up the bytes of every tensor each aten op reads or writes (a tensor
passed twice to one op counted once, as a kernel loads it once) during ``torch.optim.AdamW.step()`` (the second
step: the first one also creates the moments; likewise ``torch.optim.SGD`` and ``torch.optim.Adafactor``) for each
implementation, and during the second ``backward()`` of an
accumulation (``AccumulateGrad`` adding into ``.grad``). Scalar step counters are left out (one element per tensor).
"""

from __future__ import annotations

from typing import Any

import pytest

torch = pytest.importorskip("torch")

from llmsizer.formulas.optimizer_step import (  # noqa: E402
    accumulation_bytes,
    adafactor_step_bytes,
    adam_step_bytes,
    optimizer_step_bytes,
    sgd_step_bytes,
)

SHAPES = [(256, 512), (512, 128), (1024,), (128, 128)]


def _tensors(x: Any) -> list[Any]:
    from torch.utils._pytree import tree_flatten

    return [t for t in tree_flatten(x)[0] if isinstance(t, torch.Tensor) and t.numel() > 1]


def _unique_bytes(ts: list[Any]) -> int:
    return sum({(t.untyped_storage().data_ptr(), t.storage_offset()): t.numel() * t.element_size() for t in ts}.values())


def _bytes(run: Any) -> int:
    """Bytes read (every tensor argument) + written (the arguments the op's schema marks as mutated, or its
    outputs) by the aten ops ``run`` dispatches."""
    from torch.utils._python_dispatch import TorchDispatchMode

    total = [0]

    class Count(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # type: ignore[no-untyped-def]
            kwargs = kwargs or {}
            out = func(*args, **kwargs)
            schema = func._schema.arguments
            written = [a for a, arg in zip(args, schema, strict=False)  # args: the positional ones only
                       if arg.alias_info is not None and arg.alias_info.is_write]
            written += [kwargs[arg.name] for arg in schema if arg.name in kwargs and arg.alias_info is not None
                        and arg.alias_info.is_write]
            if (func.overloadpacket.__name__ in ("_fused_adam_", "_fused_adamw_", "_fused_sgd_")
                    and kwargs.get("grad_scale") is None):
                # the schema marks grads mutable (unscaled in place with a GradScaler), but the kernel stores them
                # only when grad_scale is given (aten/src/ATen/native/cuda/fused_adam_utils.cuh:
                # ``if (i != kGradIdx || grad_scale_ptr) load_store(...)``; FusedSgdKernel.cu @064f50b lines 95-97:
                # ``if (grad_scale_ptr) load_store(args[1], ...)``)
                written = [w for w in written if w is not args[1]]
            total[0] += _unique_bytes(_tensors((args, kwargs)))
            total[0] += _unique_bytes(_tensors(written)) if written else _unique_bytes(_tensors(out))
            return out

    with Count():
        run()
    return total[0]


@pytest.mark.parametrize("dtype", ["bf16", "fp32"])
@pytest.mark.parametrize("impl", ["fused", "foreach", "for-loop"])
def test_adamw_step_bytes_equal_torch(impl: str, dtype: str) -> None:
    dt = {"bf16": torch.bfloat16, "fp32": torch.float32}[dtype]
    torch.manual_seed(0)
    params = [torch.nn.Parameter(torch.randn(s, dtype=dt)) for s in SHAPES]
    kw = {"fused": dict(fused=True), "foreach": dict(foreach=True), "for-loop": dict(foreach=False)}[impl]
    opt = torch.optim.AdamW(params, lr=1e-3, weight_decay=0.01, **kw)
    for p in params:
        p.grad = torch.randn_like(p)
    opt.step()  # creates exp_avg / exp_avg_sq
    measured = _bytes(opt.step)
    n = sum(p.numel() for p in params)
    e = params[0].element_size()
    assert adam_step_bytes(impl, e, e, e) * n == pytest.approx(measured, rel=0.01)


def _second_step_bytes(make: Any, shapes: list[tuple[int, ...]], dt: Any) -> tuple[int, int, int]:
    """(bytes torch's second step of the optimizer ``make(params)`` moves, trained elements, element size)."""
    torch.manual_seed(0)
    params = [torch.nn.Parameter(torch.randn(s, dtype=dt)) for s in shapes]
    opt = make(params)
    for p in params:
        p.grad = torch.randn_like(p)
    opt.step()  # creates the momentum buffers / the factored statistics
    return _bytes(opt.step), sum(p.numel() for p in params), params[0].element_size()


IMPL_KW = {"fused": dict(fused=True), "foreach": dict(foreach=True), "for-loop": dict(foreach=False)}


@pytest.mark.parametrize("dtype", ["bf16", "fp32"])
@pytest.mark.parametrize("momentum", [0.0, 0.9])
@pytest.mark.parametrize("impl", ["fused", "foreach", "for-loop"])
def test_sgd_step_bytes_equal_torch(impl: str, momentum: float, dtype: str) -> None:
    """Eqs. (O6)-(O8) against torch.optim.SGD's own step (its defaults: no weight decay, no Nesterov). Before, SGD's
    step had no byte count and took 0 s."""
    dt = {"bf16": torch.bfloat16, "fp32": torch.float32}[dtype]
    measured, n, e = _second_step_bytes(
        lambda ps: torch.optim.SGD(ps, lr=1e-3, momentum=momentum, **IMPL_KW[impl]), SHAPES, dt)
    assert sgd_step_bytes(impl, momentum > 0, e, e, e) * n == pytest.approx(measured, rel=0.01)
    name = "sgd-momentum" if momentum else "sgd"
    assert optimizer_step_bytes(name, impl, e, e, e) == sgd_step_bytes(impl, momentum > 0, e, e, e)


# Adafactor factors matrices only: (O9)/(O10) count a matrix's elements; the row and column statistics (rows +
# columns elements per op) are the 0.5 % left
MATRICES = [(256, 512), (512, 128), (128, 384)]


@pytest.mark.parametrize("dtype", ["bf16", "fp32"])
@pytest.mark.parametrize("impl", ["fused", "foreach", "for-loop"])
def test_adafactor_step_bytes_equal_torch(impl: str, dtype: str) -> None:
    """Eqs. (O9)/(O10) against torch.optim.Adafactor's own step. torch's Adafactor has no ``fused`` argument: the
    estimate's 'fused' is what it runs without ``foreach`` (measure's make_optimizer passes none), the for-loop."""
    dt = {"bf16": torch.bfloat16, "fp32": torch.float32}[dtype]
    kw = {"foreach": dict(foreach=True), "for-loop": dict(foreach=False), "fused": {}}[impl]
    measured, n, e = _second_step_bytes(lambda ps: torch.optim.Adafactor(ps, lr=1e-3, **kw), MATRICES, dt)
    assert adafactor_step_bytes(impl, e, e, e) * n == pytest.approx(measured, rel=0.01)
    assert optimizer_step_bytes("adafactor", impl, e, e, e) == adafactor_step_bytes(impl, e, e, e)


def test_master_weights_update_the_master_then_copy_back() -> None:
    """Eq. (O4) for every torch optimizer: the update on the m-byte master, then m + p to copy it to the model."""
    for name in ("adamw", "sgd", "sgd-momentum", "adafactor"):
        plain = optimizer_step_bytes(name, "fused", 4, 2, 4)
        assert optimizer_step_bytes(name, "fused", 2, 2, 4, master=4) == plain + 4 + 2, name


def test_gradient_accumulation_bytes_equal_autograd() -> None:
    torch.manual_seed(0)
    lin = torch.nn.Linear(512, 256, bias=False, dtype=torch.bfloat16)
    x = torch.randn(64, 512, dtype=torch.bfloat16)
    lin(x).sum().backward()  # the first micro-step stores .grad

    def second() -> None:
        lin(x).sum().backward()
    from torch.utils._python_dispatch import TorchDispatchMode

    adds: list[int] = []

    class Count(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # type: ignore[no-untyped-def]
            out = func(*args, **(kwargs or {}))
            if func.overloadpacket.__name__ in ("add_", "add") and args[0].shape == lin.weight.shape:
                adds.append(3 * args[0].numel() * args[0].element_size())  # reads .grad and the new one, writes
            return out

    with Count():
        second()
    assert sum(adds) == accumulation_bytes(2) * lin.weight.numel()


@pytest.mark.parametrize("impl", ["foreach", "for-loop"])
def test_adafactor_step_temporaries_equal_the_cpu_allocator(impl: str) -> None:
    """The transient bytes torch's Adafactor step allocates above its states (formulas/training_states.py
    ``step_temporary_bytes``), read from the CPU allocator's own records (tests/training/measure_step.py
    ``AllocatorBytes``): foreach keeps every matrix's full-size estimate until the update, n x s; the for-loop one
    tensor's, plus the previous tensor's still bound to the loop's local variable while the next is computed (the
    largest last here, so largest + its predecessor), which the count bounds by 2 x largest (it does not know the
    order). Before, foreach was sized as the largest tensor alone (1/4 of
    the measured 2 MB here; Llama 3.2 1B bf16-mixed: 0.98 GiB instead of 4.6 GiB)."""
    from tests.training.measure_step import AllocatorBytes

    from llmsizer.formulas.training_states import step_temporary_bytes

    shapes = [(256, 512), (512, 128), (128, 384), (1024, 256)]
    torch.manual_seed(0)
    params = [torch.nn.Parameter(torch.randn(s)) for s in shapes]
    opt = torch.optim.Adafactor(params, lr=1e-3, foreach=impl == "foreach")
    for p in params:
        p.grad = torch.randn_like(p)
    opt.step()
    with AllocatorBytes() as a:
        a.mark()
        opt.step()
    measured = a.peak(0) - a.level(0)
    n = sum(p.numel() for p in params)
    predicted = step_temporary_bytes("adafactor", impl, n, max(p.numel() for p in params), 4)
    if impl == "foreach":
        assert predicted == pytest.approx(measured, rel=0.01)  # + the row/column statistics
    else:  # measured: the largest (1024 x 256) and its predecessor (128 x 384); counted: the bound 2 x largest
        assert measured == pytest.approx((1024 * 256 + 128 * 384) * 4, rel=0.01)
        assert measured <= predicted == 2 * 1024 * 256 * 4
