"""torchao's rowwise float8 recipes (float8_recipe 'torchao-rowwise' / 'torchao-rowwise-gw-hp', formulas/
float8_training.py eqs. F4-F5), against torchao's own code run on CPU (torchao 0.18.0, torch 2.13.0):

- the recipe configs (``Float8LinearConfig.from_recipe_name``): which of the three GEMMs take float8 operands
  (``float8_gemms``) and that FSDP2's float8 all-gather is refused for the rowwise weight scaling
  (``float8_gathers_in_float8``);
- one ``Float8Linear`` run forward and backward per recipe under a ``TorchDispatchMode``: the eager cast bytes
  (eq. F1's per-cast kernels over each recipe's casts; the layout copies of ``preprocess_addmm`` run below the
  mode, as in tests/formulas/test_float8_time.py) and what autograd saves for the backward (the same bf16 input and
  weight view for every recipe); the backward's live-byte peak per recipe: tests/training/
  test_float8_rowwise_backward.py.
"""

from __future__ import annotations

from typing import Any

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("torchao")

from test_elementwise_traffic import _traced_bytes  # noqa: E402

from llmsizer.formulas.float8_training import (  # noqa: E402
    TORCHAO_RECIPES,
    float8_cast_bytes,
    float8_gathers_in_float8,
    float8_gemms,
)

# llmsizer's recipe -> torchao's Float8LinearRecipeName value
TORCHAO_NAME = {"torchao": "tensorwise", "torchao-rowwise": "rowwise", "torchao-rowwise-gw-hp": "rowwise_with_gw_hp"}


def _config(recipe: str) -> Any:
    from torchao.float8 import Float8LinearConfig

    return Float8LinearConfig.from_recipe_name(TORCHAO_NAME[recipe])


def _linear(recipe: str, i: int, o: int) -> Any:
    from torchao.float8 import convert_to_float8_training

    torch.manual_seed(0)
    m = torch.nn.Sequential(torch.nn.Linear(i, o, bias=False)).to(torch.bfloat16)
    convert_to_float8_training(m, config=_config(recipe))
    assert type(m[0]).__name__ == "Float8Linear"
    return m


def test_every_torchao_recipe_is_named() -> None:
    from torchao.float8.config import Float8LinearRecipeName

    assert {n.value for n in Float8LinearRecipeName} == set(TORCHAO_NAME.values())
    assert set(TORCHAO_NAME) == set(TORCHAO_RECIPES)


@pytest.mark.parametrize("recipe", TORCHAO_RECIPES)
def test_float8_gemms_and_all_gather_are_the_configs(recipe: str) -> None:
    from torchao.float8 import Float8LinearConfig
    from torchao.float8.config import ScalingType

    c = _config(recipe)
    fp8 = [cfg.scaling_type is not ScalingType.DISABLED for cfg in (
        c.cast_config_input, c.cast_config_grad_output, c.cast_config_input_for_grad_weight)]
    # output: input x weight; grad_input: grad_output x weight; grad_weight: grad_output x input (both operands
    # of a GEMM share their precision: Float8LinearConfig.__post_init__'s compatibility asserts)
    assert sum(fp8) == float8_gemms(recipe)
    kwargs = {k: getattr(c, k) for k in ("cast_config_input", "cast_config_weight", "cast_config_grad_output",
                                          "cast_config_input_for_grad_weight", "cast_config_weight_for_grad_input",
                                          "cast_config_grad_output_for_grad_weight")}
    if float8_gathers_in_float8(recipe):
        assert Float8LinearConfig(**kwargs, enable_fsdp_float8_all_gather=True).enable_fsdp_float8_all_gather
    else:
        with pytest.raises(AssertionError, match="tensorwise"):
            Float8LinearConfig(**kwargs, enable_fsdp_float8_all_gather=True)


@pytest.mark.parametrize("recipe", TORCHAO_RECIPES)
@pytest.mark.parametrize("shape", [(512, 256, 688), (256, 688, 256)], ids=["up", "down"])
def test_eager_cast_bytes_per_recipe(recipe: str, shape: tuple[int, int, int]) -> None:
    t, i, o = shape
    m = _linear(recipe, i, o)
    x = torch.randn(t, i, dtype=torch.bfloat16, requires_grad=True)

    def run() -> None:
        y = m(x)
        y.backward(torch.ones_like(y))
    traced = _traced_bytes(run, lambda name: "scaled" in name or name == "reciprocal")
    fwd, bwd = float8_cast_bytes(t, i, o, 2, recipe, compiled=False)
    gw = float8_gemms(recipe) == 3
    copies = 2 * ((t * o + t * i if gw else 0) + i * o)  # preprocess_addmm's layout copies: below the mode
    # the rowwise casts' per-row amax and scale tensors (t or o floats) are left out of F4/F5: within 1 %
    assert fwd + bwd - copies == pytest.approx(traced, rel=0.01)
    if recipe == "torchao-rowwise-gw-hp":  # discriminates: the grad_weight casts are gone
        assert traced < 0.7 * _traced_bytes(lambda: _run(_linear("torchao-rowwise", i, o), t, i),
                                             lambda name: "scaled" in name or name == "reciprocal")


def _run(m: Any, t: int, i: int) -> None:
    x = torch.randn(t, i, dtype=torch.bfloat16, requires_grad=True)
    y = m(x)
    y.backward(torch.ones_like(y))


@pytest.mark.parametrize("recipe", TORCHAO_RECIPES)
def test_saved_tensors_are_the_bf16_input_and_weight(recipe: str) -> None:
    """float8_linear.py line 45 for every recipe: the forward saves the bf16 input and the weight (a view of the
    parameter), t i + i o elements at 2 B, no float8 copy and no scale."""
    t, i, o = 512, 256, 688
    m = _linear(recipe, i, o)
    x = torch.randn(t, i, dtype=torch.bfloat16, requires_grad=True)
    saved: list[Any] = []
    with torch.autograd.graph.saved_tensors_hooks(lambda s: saved.append(s) or s, lambda s: s):
        m(x)
    assert sorted((s.dtype, s.numel()) for s in saved) == sorted([(torch.bfloat16, t * i), (torch.bfloat16, i * o)])
