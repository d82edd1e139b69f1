"""Eqs. K11/K12 (formulas/megatron_layer_kernels.py): the kernels of a Megatron-Core TransformerEngine decoder layer,
against the layer's kernels listed one by one in launch order as the modules run them (NVIDIA/Megatron-LM @d7288711
transformer_layer.py ``_forward_attention`` / ``_forward_mlp``; TransformerEngine @27486e03), and their use for
Megatron runs in the micro-step's launch count (estimate/duration.py kernels_per_micro_step) and eq. K10's span."""

from __future__ import annotations

import pytest

from llmsizer.formulas.megatron_layer_kernels import megatron_layer_kernels, megatron_recompute_kernels

# one layer in launch order: (kernel, GEMM class) -- the TE spec's modules (gpt_layer_specs.py lines 132-151)
QUANT = ["zero amax", "amax", "scale from amax", "cast"]  # csrc/quantizer.cpp lines 988-1007


def _forward(moe: bool, qk: bool, rotary: bool, fp8: bool) -> list[tuple[str, bool]]:
    def linear(name: str) -> list[tuple[str, bool]]:
        return [(f"{name} {q}", False) for q in (QUANT if fp8 else [])] + [(f"{name} gemm", True)]

    ks = [("input rmsnorm (linear_qkv's LayerNormLinear)", False), *linear("qkv")]
    ks += [("q norm", False), ("k norm", False)] if qk else []
    ks += [("fused rope q", False), ("fused rope k", False)] if rotary else []
    ks += [("fused attention", True), *linear("proj"), ("self_attn_bda add", False)]
    if moe:
        ks += [("pre_mlp_layernorm TENorm", False)]
    else:
        ks += [("pre-mlp rmsnorm (linear_fc1's LayerNormLinear)", False), *linear("fc1"), ("bias_swiglu", False),
               *linear("fc2")]
    return ks + [("mlp_bda add", False)]


def _backward(moe: bool, qk: bool, rotary: bool, fp8: bool) -> list[tuple[str, bool]]:
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
    return ks + [*linear("qkv"), *norm_bwd]


@pytest.mark.parametrize("moe", [False, True])
@pytest.mark.parametrize("qk", [False, True])
@pytest.mark.parametrize("rotary", [False, True])
@pytest.mark.parametrize("fp8", [False, True])
def test_the_counts_are_the_listed_kernels(moe: bool, qk: bool, rotary: bool, fp8: bool) -> None:
    f, b = _forward(moe, qk, rotary, fp8), _backward(moe, qk, rotary, fp8)
    got = megatron_layer_kernels(moe, qk, rotary, fp8)
    assert got == (sum(g for _, g in f), sum(not g for _, g in f), sum(g for _, g in b), sum(not g for _, g in b))


def test_a_megatron_layer_launches_fewer_kernels_than_transformers_eager_one() -> None:
    """A Llama layer: transformers' eager 38 forward / 71 backward (eqs. K2/K3) against TE's 12 / 18 in bf16."""
    fg, fo, bg, bo = megatron_layer_kernels(False)
    assert (fg + fo, bg + bo) == (12, 18)


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
    assert kernels_per_micro_step(spec, w) == 80 * (sum(megatron_layer_kernels(False, False, True, True)) + 2) + head
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
    assert off - on == spec.num_layers * (2 + 2 * 128 // 8)
