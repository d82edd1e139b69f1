"""Sequence parallelism's memory-bound kernels on real tensor-parallel ranks (formulas/elementwise_traffic.py eq.
(E10)): ``sequence_parallel_step.py`` runs one bf16 forward + backward of a GPT-style pre-norm block on one rank and
tensor-parallel over two gloo ranks with PyTorch's own styles as torchtitan applies them (``SequenceParallel`` on the
norms, column/row-parallel linears, Shard(1) residual stream) and adds up the bytes each kernel reads and writes.
Each rank's layer norms (forward and backward, ``layernorm_bytes``: 2c h + 2f and 3c h + 2f per token) and residual
adds move 1/t of the one-rank bytes, as eq. (E10) divides them; the GeLU, on the intermediate width that tensor
parallelism already splits, 1/t without sequence parallelism too (``model_layer_widths``: I / t)."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("torch")

from ranks import run_ranks  # noqa: E402

from llmsizer.formulas.elementwise_traffic import LayerWidths, layer_bytes, layernorm_bytes  # noqa: E402

pytestmark = pytest.mark.slow

HERE = Path(__file__).resolve().parent
CASE = dict(hidden=64, inter=256, batch=2, seq=16)
TP = 2


def test_sequence_parallel_norms_and_residual_adds_move_one_tth_of_the_bytes() -> None:
    one = run_ranks(HERE / "sequence_parallel_step.py", dict(CASE, tp=False), 1)["totals"]
    tp = run_ranks(HERE / "sequence_parallel_step.py", dict(CASE, tp=True), TP)["totals"]
    tokens = CASE["batch"] * CASE["seq"]
    fwd, bwd = layernorm_bytes(CASE["hidden"], 2.0)
    # two layer norms per block, the llmsizer count per token, on one rank; the CPU kernel keeps mean and rstd in
    # bf16 (2 x 2 B per token) where CUDA's keeps them in fp32 (layernorm_bytes' 2f)
    stats = 2 * (4.0 - 2.0)
    assert one["native_layer_norm"] == 2 * (fwd - stats) * tokens
    assert one["native_layer_norm_backward"] == 2 * (bwd - stats) * tokens
    for op in ("native_layer_norm", "native_layer_norm_backward", "add", "gelu", "gelu_backward"):
        assert tp[op] * TP == one[op], (op, tp[op], one[op])
    # eq. (E10) on the same widths: the hidden-width terms / t, the GeLU's unchanged from tensor parallelism alone
    w = LayerWidths(CASE["hidden"], CASE["inter"] // TP, CASE["hidden"] // TP, CASE["hidden"] // TP, 16,
                    gated=False, rotary=False, layernorm=True)
    f_tp, b_tp = layer_bytes(w, 2.0, compiled=False, norms_trained=True)
    f_sp, b_sp = layer_bytes(w, 2.0, compiled=False, norms_trained=True, seq_shards=TP)
    gelu = 2.0 * 2 * CASE["inter"] // TP, 3.0 * 2 * CASE["inter"] // TP
    assert f_sp - gelu[0] == pytest.approx((f_tp - gelu[0]) / TP)
    assert b_sp - gelu[1] == pytest.approx((b_tp - gelu[1]) / TP)
