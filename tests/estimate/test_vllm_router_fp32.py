"""vLLM's Nemotron-H router dtype depends on the GPU (formulas/weight_formats.py ``vllm_gate_fp32``).

vllm 0.19.1 (PyPI wheel) models/nemotron_h.py:151-157 builds the router as ``GateLinear(hidden, n_routed_experts,
out_dtype=torch.float32, force_fp32_compute=True)``, no bias; layers/fused_moe/router/gate_linear.py:45-55 stores it in
fp32 (``params_dtype = torch.float32``) unless ``current_platform.is_cuda()`` and the device is compute capability 9.0
exactly or any 10.x (``is_device_capability((9, 0)) or is_device_capability_family(100)``; platforms/interface.py
:337-349). Else the weight takes the model dtype (bf16 here). The capability is the catalog row's
(estimate/device.py ``cuda_capability``).
"""

from __future__ import annotations

import pytest

from llmsizer import estimate_inference, fit
from llmsizer.catalog.models import entries

MODEL = "nvidia-nemotron-3-nano-30b-a3b-bf16"


def _router_bytes_per_element_more() -> int:
    """The router weights' elements, from config.json: one [n_routed_experts, hidden_size] gate per 'E' (MoE) layer
    of hybrid_override_pattern; fp32 holds 4 - 2 = 2 more bytes per element than bf16 (torch_dtype bfloat16)."""
    cfg = entries()[MODEL].config
    moe_layers = cfg["hybrid_override_pattern"].count("E")
    assert (moe_layers, cfg["n_routed_experts"], cfg["hidden_size"]) == (23, 128, 2688)
    return moe_layers * cfg["n_routed_experts"] * cfg["hidden_size"] * (4 - 2)


def _weights(device: str, tp: int = 1) -> tuple[int, str]:
    est = estimate_inference(MODEL, engine="vllm", device=device, tensor_parallel=tp)
    router = next(a for a in est.assumptions if a.name == "router_dtype")
    return next(i.bytes for i in est.items if i.name == "weights"), str(router.value)


@pytest.mark.parametrize("tp", [1, 2])
def test_a100_holds_the_router_in_fp32_and_h100_in_bf16(tp: int) -> None:
    """A100 (8.0): no specialized router kernels, fp32; H100 (9.0): bf16. The router is replicated (GateLinear is a
    ReplicatedLinear), so every tensor-parallel rank holds the whole difference: 23 x 128 x 2688 x 2 = 15,826,944 B."""
    a100, a_dtype = _weights("a100-sxm-80gb", tp)
    h100, h_dtype = _weights("h100-sxm", tp)
    assert (a_dtype, h_dtype) == ("fp32", "model dtype")
    assert a100 - h100 == _router_bytes_per_element_more() == 15_826_944


@pytest.mark.parametrize(("device", "fp32"), [("b200", False), ("l40s", True), ("mi300x", True)])
def test_the_rule_follows_the_capability(device: str, fp32: bool) -> None:
    """B200 (10.0): Blackwell's kernels, bf16; L40S (8.9): fp32; MI300X (ROCm, ``is_cuda()`` False): fp32."""
    h100, _ = _weights("h100-sxm")
    got, dtype = _weights(device)
    assert dtype == ("fp32" if fp32 else "model dtype")
    assert got - h100 == (_router_bytes_per_element_more() if fp32 else 0)


def test_fit_sizes_the_device_it_is_given_as_infer_does() -> None:
    """fit on an A100 composes the same weights as estimate_inference(device='a100-sxm-80gb') (one rule, the
    capability from the catalog row)."""
    est = fit(MODEL, "a100-sxm-80gb", engine="vllm").estimate
    assert next(i.bytes for i in est.items if i.name == "weights") == _weights("a100-sxm-80gb")[0]


def test_sglang_holds_nemotron_h_router_in_the_model_dtype() -> None:
    """sglang 0.5.23 (the release the SGLang profile follows) models/nemotron_h.py:265-271: ``ReplicatedLinear(
    hidden_size, n_routed_experts, bias=False, quant_config=None)``, no params_dtype, so the model dtype
    (layers/linear.py:264-265 ``torch.get_default_dtype()``; 0.5.6's :141-148 passed ``params_dtype=torch.float32``),
    plus :272-274 the fp32 e_score_correction_bias. From config.json (torch_dtype bfloat16, 2 B): the router component
    is E-layers x n_routed_experts x (hidden_size x 2 + 4) B, whole on each of 2 TP ranks (review34 D1: before,
    hidden_size x 4)."""
    from llmsizer.formulas.tensor_parallel import shard_weights
    from llmsizer.formulas.weight_formats import weight_bytes
    from llmsizer.models import load_model

    cfg = entries()[MODEL].config
    assert cfg["torch_dtype"] == "bfloat16"
    layers, experts, hidden = cfg["hybrid_override_pattern"].count("E"), cfg["n_routed_experts"], cfg["hidden_size"]
    want = layers * experts * (hidden * 2 + 4)
    assert want == 23 * 128 * (2688 * 2 + 4)
    spec = load_model(MODEL)
    wb = weight_bytes(spec, "bf16", 128, 2, False, "sglang")
    assert wb.by_component["router"] == want
    assert shard_weights(spec, wb, 2, 2, "sglang", 128, False).by_component["router"] == want


def test_other_engines_and_families_do_not_take_it() -> None:
    """SGLang's and transformers' Nemotron-H routers, and vLLM's other GateLinears (no force_fp32_compute), do not
    change with the device."""
    for engine in ("sglang", "transformers"):
        a, h = (estimate_inference(MODEL, engine=engine, device=d) for d in ("a100-sxm-80gb", "h100-sxm"))
        assert next(i.bytes for i in a.items if i.name == "weights") == next(
            i.bytes for i in h.items if i.name == "weights"), engine
        assert not any(x.name == "router_dtype" for x in a.assumptions)
    a, h = (estimate_inference("deepseek-v2-lite", engine="vllm", device=d) for d in ("a100-sxm-80gb", "h100-sxm"))
    assert next(i.bytes for i in a.items if i.name == "weights") == next(i.bytes for i in h.items if i.name == "weights")


@pytest.mark.parametrize("device", ["a100-sxm-80gb", "h100-sxm", "l40s", "mi300x", None])
def test_the_router_dtype_is_a_default_on_every_device(device: str | None) -> None:
    """No surface takes a router dtype or a capability from the user (the device decides it): the assumption is a
    default on a CUDA GPU whose capability the catalog gives (A100, H100, L40S) as on ROCm (MI300X, no capability)
    and with no device (review33 N1: before, False on the first three and True on the last two)."""
    est = estimate_inference(MODEL, engine="vllm", **({"device": device} if device else {}))
    router = next(a for a in est.assumptions if a.name == "router_dtype")
    assert router.default is True
