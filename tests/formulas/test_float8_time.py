"""Float8 training time (formulas/float8_training.py eqs. F1-F3, estimate/duration.py), against torchao's real code
(#12).

Independent truth, eager: torchao's ``Float8Linear`` (``convert_to_float8_training``, tensorwise dynamic scaling)
runs forward and backward on CPU under a ``TorchDispatchMode`` that adds up the bytes of every aten op's tensors
(GEMMs and views left out), the method of tests/formulas/test_elementwise_traffic.py. The layout copies of
``preprocess_addmm`` run inside the float8 subclass's own dispatch, below the mode, so the trace does not see them:
the comparison leaves F1's copy term out. Compiled: inductor's own byte count of a compiled transformers Llama
layer whose linears are torchao's, against F2 plus the bf16 layer's compiled count (E4/E5), which
test_elementwise_traffic checks against inductor on its own.
"""

from __future__ import annotations

from typing import Any

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("torchao")

from test_elementwise_traffic import (  # noqa: E402
    GQA,
    _inductor_bytes,
    _layer,
    _run_layer,
    _traced_bytes,
    _widths,
)

from llmsizer.formulas.elementwise_traffic import layer_bytes  # noqa: E402
from llmsizer.formulas.float8_training import float8_cast_bytes  # noqa: E402


def _traced(run: Any) -> int:
    """The traced bytes, torchao's scaled GEMMs and its scale reciprocals left out with the attention kernel."""
    return _traced_bytes(run, lambda name: "scaled" in name or name == "reciprocal")


@pytest.mark.parametrize("shape", [(512, 256, 688), (256, 688, 256)], ids=["up", "down"])
def test_eager_cast_bytes_equal_torchaos_traced_ops(shape: tuple[int, int, int]) -> None:
    from torchao.float8 import convert_to_float8_training

    t, i, o = shape
    torch.manual_seed(0)
    m = torch.nn.Sequential(torch.nn.Linear(i, o, bias=False)).to(torch.bfloat16)
    convert_to_float8_training(m)
    assert type(m[0]).__name__ == "Float8Linear"
    x = torch.randn(t, i, dtype=torch.bfloat16, requires_grad=True)

    def run() -> None:
        y = m(x)
        y.backward(torch.ones_like(y))
    traced = _traced(run)
    fwd, bwd = float8_cast_bytes(t, i, o, 2, "torchao", compiled=False)
    copies = 2 * (t * o + t * i + i * o)  # preprocess_addmm's layout copies: below the dispatch mode
    assert fwd + bwd - copies == pytest.approx(traced, rel=0.001)
    # the trace discriminates: the compiled count of the same casts is a small fraction of it
    cf, cb = float8_cast_bytes(t, i, o, 2, "torchao", compiled=True)
    assert cf + cb < 0.25 * traced


@pytest.mark.slow
def test_compiled_float8_layer_bytes_within_5_percent_of_inductors_kernels() -> None:
    from torchao.float8 import convert_to_float8_training

    model, layer = _layer(GQA)
    convert_to_float8_training(layer)
    tokens = 512
    measured = _inductor_bytes(_run_layer(model, torch.compile(layer), tokens, GQA["hidden_size"]))
    w = _widths(GQA)
    h, q, k, i = w.hidden, w.q_width, w.kv_width, w.intermediate
    linears = [(h, q, False), (h, k, True), (h, k, True), (q, h, False), (h, i, False), (h, i, True), (i, h, False)]
    cast = sum(sum(float8_cast_bytes(tokens, a, b, 2, "torchao", True, 1.0, s)) for a, b, s in linears)
    fwd, bwd = layer_bytes(w, 2, compiled=True, norms_trained=True)
    assert (fwd + bwd) * tokens + cast == pytest.approx(measured, rel=0.05)


def test_transformer_engine_casts_read_once_and_write_two_layouts() -> None:
    # eq. F3: fp8_cast_transpose_fused reads the bf16 tensor once and writes the float8 copy and its transpose
    fwd, bwd = float8_cast_bytes(1000, 300, 700, 2, "transformer-engine")
    assert fwd == 4 * (1000 * 300 + 300 * 700)
    assert bwd == 4 * 1000 * 700
    # an FSDP float8 all-gather leaves each device 1/n of the weight casts
    f8, _ = float8_cast_bytes(1000, 300, 700, 2, "torchao", True, 0.125)
    f1, _ = float8_cast_bytes(1000, 300, 700, 2, "torchao", True, 1.0)
    assert f1 - f8 == pytest.approx(5 * 300 * 700 * 0.875)


def test_float8_speeds_up_a_hopper_step_and_warns_without_compile() -> None:
    from llmsizer.catalog.hardware import builtin_catalog
    from llmsizer.catalog.models import find
    from llmsizer.estimate.duration import training_duration_for

    spec, dev = find("llama-3.1-8b").spec(), builtin_catalog().devices["h100-sxm"]
    base = dict(method="full", precision="bf16-mixed", micro_batch=2, seq_len=8192, fsdp="full", compile=True)
    bf = training_duration_for(spec, dev, 8, 1e6, base)
    f8 = training_duration_for(spec, dev, 8, 1e6, dict(base, float8=True))
    assert bf.tokens_per_second and f8.tokens_per_second
    # the linears are ~70 % of this step's FLOPs: at twice the rate the step can be at most 1/(1 - 0.35) faster
    assert 1.1 < f8.tokens_per_second / bf.tokens_per_second < 1.55
    assert f8.step is not None and f8.step.float8_cast_seconds > 0
    from llmsizer.cli.train_cmd import render_duration

    assert "float8 casts; the float8 linears at the FP8 peak" in render_duration(f8)
    names = {a.name for a in f8.assumptions}
    assert {"float8_gemm_flops_per_token", "float8_cast_bytes_per_token"} <= names
    eager = training_duration_for(spec, dev, 8, 1e6, dict(base, compile=False, float8=True))
    assert any("torch.compile" in w for w in eager.warnings)
    # a GPU without a sourced FP8 peak keeps the BF16 rate, and says so
    a100 = builtin_catalog().devices["a100-sxm-80gb"]
    d = training_duration_for(spec, a100, 8, 1e6, dict(base, float8=True))
    assert any("FP8 peak" in w for w in d.warnings)

