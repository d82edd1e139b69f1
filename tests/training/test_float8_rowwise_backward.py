"""The backward of one torchao ``Float8Linear`` per float8 recipe (tensorwise, ROWWISE, ROWWISE_WITH_GW_HP), run
eagerly on CPU (torchao 0.18.0, torch 2.13.0) and traced by live tensor bytes (not the allocator: CPU ``_scaled_mm``
emulates in fp32, tests/training/test_activation_offload_float8.py), against formulas/float8_training.py
``float8_backward_bytes`` (``grad_weight_fp8`` False for ROWWISE_WITH_GW_HP: no grad_weight casts)."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("torchao")

from llmsizer.formulas.float8_training import TORCHAO_RECIPES, float8_backward_bytes, float8_gemms  # noqa: E402

TORCHAO_NAME = {"torchao": "tensorwise", "torchao-rowwise": "rowwise", "torchao-rowwise-gw-hp": "rowwise_with_gw_hp"}


# The peak is a sum of tensor sizes, each a product of two of (tokens, d_in, d_out): scaling all three by 1/4 (from
# 2048 x 512 -> 1408 and 4096 x 1024 -> 256) scales every term of float8_backward_bytes by 1/16, so the same step is
# the largest and the check is the same one. What the formula leaves out, the rowwise recipes' fp32 scales (one per
# row or column: linear in the sizes), grows 4x relative to it: measured 0.13-0.64% below at these shapes (0.25-1.27%
# at 1/8), inside the 2%. The CPU float8 matmul (aten::_scaled_mm's emulation) costs tokens x d_in x d_out: 1/64 of
# the time (the six cases took 490 s in CI, 2026-12-06).
@pytest.mark.parametrize("recipe", TORCHAO_RECIPES)
@pytest.mark.parametrize(("tokens", "d_in", "d_out"), [(512, 128, 352), (1024, 256, 64)])
def test_backward_peak_per_recipe(recipe: str, tokens: int, d_in: int, d_out: int) -> None:
    """The backward's live bytes above its inputs: float8_backward_bytes's largest step (eager), or the weight
    gradient (2 i o, made last) beside the casts still alive, as tests/training/test_activation_offload_float8.py
    checks the tensorwise recipe."""
    from measure_step import LiveTensorBytes
    from torchao.float8 import Float8LinearConfig, convert_to_float8_training

    torch.manual_seed(0)
    lin = torch.nn.Sequential(torch.nn.Linear(d_in, d_out, bias=False)).to(torch.bfloat16)
    convert_to_float8_training(lin, config=Float8LinearConfig.from_recipe_name(TORCHAO_NAME[recipe]))
    x = torch.randn(tokens, d_in, dtype=torch.bfloat16, requires_grad=True)
    g = torch.randn(tokens, d_out, dtype=torch.bfloat16)
    y = lin(x)
    tracker = LiveTensorBytes(lambda live: {})
    for t in [*lin.parameters(), x, g, y]:
        tracker.track(t)
    tracker.peak = base = tracker.current
    with tracker.mode:
        y.backward(g)
    measured = tracker.peak - base
    gw = float8_gemms(recipe) == 3
    pred = max(float8_backward_bytes(tokens, d_in, d_out, 2, compiled=False, grad_weight_fp8=gw),
               float8_backward_bytes(tokens, d_in, d_out, 2, compiled=True, grad_weight_fp8=gw) + 2 * d_in * d_out)
    print(f"\n{recipe} {tokens}x{d_in}->{d_out}: backward {measured} B measured, {pred} B predicted")
    assert pred == pytest.approx(measured, rel=0.02)
