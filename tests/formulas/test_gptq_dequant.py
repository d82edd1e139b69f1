"""QLoRA over a GPTQ int4 checkpoint (formulas/training_time.py eq. 9b), against PyTorch (#12).

auto-gptq is not installable on this CPU-only machine (its build needs CUDA), so the test replays, op for op, the
eager branch of ``QuantLinear.forward`` (auto_gptq/nn_modules/qlinear/qlinear_cuda_old.py @179776bd, 4-bit: the
``bitwise_right_shift`` of the expanded ``qweight`` and ``qzeros``, ``.to(torch.int8)``, ``bitwise_and(..., out=)``,
``zeros + 1``, ``scales * (weight - zeros)``, ``torch.matmul(x.half(), weight)``) on real packed tensors under the
``TorchDispatchMode`` byte counter of tests/formulas/test_elementwise_traffic.py. What is independent of the formula:
the bytes PyTorch's kernels actually touch (element sizes, broadcasts, the int32 intermediate), that the replay
decodes the packed weights exactly, and what autograd does in the backward (eq. 9b's single pass per forward).
"""

from __future__ import annotations

from typing import Any

import pytest

torch = pytest.importorskip("torch")

from test_elementwise_traffic import _physical_bytes  # noqa: E402

from llmsizer.formulas.training_time import (  # noqa: E402
    GPTQ_DEQUANT_BYTES_PER_WEIGHT,
    dequantization_passes,
)

BITS, GROUP = 4, 128


def _pack(q: Any) -> Any:
    """int4 values [rows, cols] packed 8 per int32 along rows (auto-gptq's qweight layout), or along cols (qzeros)."""
    rows = q.shape[0] // 8
    out = torch.zeros(rows, q.shape[1], dtype=torch.int64)
    for j in range(8):
        out |= q[j::8].to(torch.int64) << (4 * j)
    return out.to(torch.int32)  # wraps like numpy's uint32 -> int32 view


def _quant_linear(in_f: int, out_f: int) -> tuple[Any, Any, Any, Any, Any]:
    g = torch.Generator().manual_seed(0)
    q = torch.randint(0, 16, (in_f, out_f), generator=g)
    z = torch.randint(0, 15, (in_f // GROUP, out_f), generator=g)  # stored as zero - 1
    scales = (torch.rand(in_f // GROUP, out_f, generator=g) / 8 + 0.01).half()
    qweight = _pack(q)
    qzeros = _pack(z.t().contiguous()).t().contiguous()
    reference = (scales.float().repeat_interleave(GROUP, 0) * (q - (z + 1).repeat_interleave(GROUP, 0))).half()
    return qweight, qzeros, scales, reference, torch.tensor(list(range(0, 32, BITS)), dtype=torch.int32)[None]


def _dequantize(qweight: Any, qzeros: Any, scales: Any, wf: Any) -> Any:
    """The 4-bit eager branch of auto-gptq qlinear_cuda_old QuantLinear.forward, op for op."""
    zeros = torch.bitwise_right_shift(torch.unsqueeze(qzeros, 2).expand(-1, -1, 32 // BITS),
                                      wf.unsqueeze(0)).to(torch.int8)
    torch.bitwise_and(zeros, (2 ** BITS) - 1, out=zeros)
    zeros = zeros + 1
    zeros = zeros.reshape(-1, 1, zeros.shape[1] * zeros.shape[2])
    sc = scales.reshape(-1, 1, scales.shape[-1])
    weight = torch.bitwise_right_shift(torch.unsqueeze(qweight, 1).expand(-1, 32 // BITS, -1),
                                       wf.unsqueeze(-1)).to(torch.int8)
    torch.bitwise_and(weight, (2 ** BITS) - 1, out=weight)
    weight = weight.reshape(-1, GROUP, weight.shape[2])
    weight = sc * (weight - zeros)
    return weight.reshape(weight.shape[0] * weight.shape[1], weight.shape[2])


class _Counter:
    def __init__(self) -> None:
        self.bytes = 0
        self.ops: list[str] = []

    def mode(self) -> Any:
        from torch.utils._python_dispatch import TorchDispatchMode
        from torch.utils._pytree import tree_flatten

        counter = self

        class Count(TorchDispatchMode):
            def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # type: ignore[no-untyped-def]
                out = func(*args, **(kwargs or {}))
                name = func.overloadpacket.__name__
                counter.ops.append(name)
                if name in ("view", "expand", "unsqueeze", "reshape", "_unsafe_view", "t", "detach", "mm",
                            "matmul", "ones_like"):
                    return out
                # inputs read (an out= buffer is written, not read) and outputs written: an op writing into its
                # own input (bitwise_and(w, m, out=w)) reads and writes it
                kw = {k: v for k, v in (kwargs or {}).items() if k != "out"}
                for a in tree_flatten((args, kw))[0] + tree_flatten(out)[0]:
                    if isinstance(a, torch.Tensor):
                        counter.bytes += _physical_bytes(a)
                return out
        return Count()


@pytest.mark.parametrize("shape", [(512, 1024), (1024, 384)])
def test_dequantization_bytes_per_weight(shape: tuple[int, int]) -> None:
    in_f, out_f = shape
    qweight, qzeros, scales, reference, wf = _quant_linear(in_f, out_f)
    c = _Counter()
    with c.mode():
        weight = _dequantize(qweight, qzeros, scales, wf)
    assert torch.equal(weight, reference)  # the replay decodes the packed weights exactly
    per_weight = c.bytes / (in_f * out_f)
    # eq. (9b): 16.5 B per weight; the per-group zeros and scales add (5 + 2 + 2 + 2) / 128 B
    assert per_weight == pytest.approx(GPTQ_DEQUANT_BYTES_PER_WEIGHT, rel=0.01)
    assert per_weight > 5 * 2.640625  # far above NF4's eq. (9): the int32 intermediate dominates


def test_backward_does_not_dequantize_again() -> None:
    """torch.matmul saves the dequantized weight for the input gradient: the backward runs no bitwise op, so a
    micro-step dequantizes once per forward (and once per recomputed forward): eq. (9b)'s passes."""
    qweight, qzeros, scales, _, wf = _quant_linear(256, 256)
    x = torch.randn(200, 256, dtype=torch.float16, requires_grad=True)  # more rows than kernel_switch_threshold 128
    out = torch.matmul(x.half(), _dequantize(qweight, qzeros, scales, wf))
    c = _Counter()
    with c.mode():
        out.backward(torch.ones_like(out))
    assert x.grad is not None
    assert not [op for op in c.ops if op.startswith("bitwise")]
    assert dequantization_passes("gptq-int4", 0.0) == 1.0
    assert dequantization_passes("gptq-int4", 1.0) == 2.0
    assert dequantization_passes("nf4-dq", 1.0) == 3.0


def test_qlora_over_a_gptq_checkpoint_keeps_its_format() -> None:
    from llmsizer.catalog.hardware import builtin_catalog
    from llmsizer.errors import InputError
    from llmsizer.estimate.duration import training_duration_for
    from llmsizer.estimate.training import estimate_training
    from llmsizer.readers.hf_config import spec_from_config
    from llmsizer.specs import TrainingWorkload
    from llmsizer.validation_cases import QWEN7B_INT4, QWEN7B_V1

    gptq = spec_from_config(QWEN7B_INT4, name="int4")
    plain = spec_from_config(QWEN7B_V1, name="bf16")
    w = TrainingWorkload(method="qlora", rank=64, seq_len=2048, grad_checkpointing="full")
    est_q, est_n = estimate_training(gptq, w), estimate_training(plain, w)
    base = {a.name: a.value for a in est_q.assumptions}
    assert base["base_weights"] == "gptq-int4"
    # no model-init quantization phase: the checkpoint arrives quantized
    assert not [i for i in est_q.items if i.name == "quantization_transient"]
    dev = builtin_catalog().devices["a100-sxm-80gb"]
    dq = training_duration_for(gptq, dev, 1, 1e6, dict(method="qlora", rank=64, seq_len=2048,
                                                       grad_checkpointing="full"))
    dn = training_duration_for(plain, dev, 1, 1e6, dict(method="qlora", rank=64, seq_len=2048,
                                                        grad_checkpointing="full"))
    assert dq.step is not None and dn.step is not None
    # 16.5 B x 2 passes against NF4's 2.64 B x 3 passes per weight
    assert dq.step.dequant_seconds / dn.step.dequant_seconds == pytest.approx(16.5 * 2 / (2.640625 * 3), rel=1e-6)
    assert est_n.total_bytes != est_q.total_bytes
    awq = spec_from_config(dict(QWEN7B_V1, quantization_config={"quant_method": "awq", "bits": 4}), name="awq")
    with pytest.raises(InputError, match="awq"):
        estimate_training(awq, w)


def test_unpacking_kernels_per_forward_equal_the_replay() -> None:
    """Eq. K8 (formulas/launch_overhead.py gptq_linear_kernels): the kernels the replayed eager branch launches beside
    its ``torch.matmul``, counted by PyTorch's dispatcher (views and reshapes of contiguous tensors launch none), and
    the bias as the separate ``out + bias`` of QuantLinear.forward (qlinear_cuda_old.py:271 @ef442d9f = v0.4.2)."""
    from llmsizer.formulas.launch_overhead import GPTQ_KERNEL_SWITCH_ROWS, gptq_linear_kernels

    qweight, qzeros, scales, _, wf = _quant_linear(512, 256)
    bias = torch.randn(256, dtype=torch.float16)
    x = torch.randn(GPTQ_KERNEL_SWITCH_ROWS, 512, dtype=torch.float16, requires_grad=True)
    c = _Counter()
    with c.mode():
        out = torch.matmul(x.half(), _dequantize(qweight, qzeros, scales, wf))
        out = out.half() + bias
    launched = [op for op in c.ops if op not in ("view", "expand", "unsqueeze", "reshape", "_unsafe_view", "t",
                                                   "detach", "alias", "lift_fresh")]
    gemm = [op for op in launched if op in ("mm", "matmul")]
    assert len(gemm) == 1
    assert len(launched) - 1 == gptq_linear_kernels(GPTQ_KERNEL_SWITCH_ROWS, bias=True)[0]
    c = _Counter()
    with c.mode():
        out.backward(torch.ones_like(out))
    # the backward: the input-gradient GEMM (and its seed) only, counted with the linear: eq. K8's 0
    assert [op for op in c.ops if op not in ("view", "t", "detach", "ones_like", "mm")] == []
    assert gptq_linear_kernels(GPTQ_KERNEL_SWITCH_ROWS, bias=True)[1] == 0
