"""One device, one router dtype on every surface: vLLM's Nemotron-H router is fp32 off Hopper/Blackwell (vllm 0.19.1
layers/fused_moe/router/gate_linear.py:45-55: bf16 only on CUDA compute capability 9.0 exactly or any 10.x), so on an
A100 (8.0) each rank holds 2 more bytes per router element than on an H100 (9.0). The capability comes from one home
(estimate/device.py ``inference_device_fields`` puts it in the workload; ``weights_capability`` /
``device_weights_capability`` read it), so `infer --device`, fit (memory and speed), recommend's option and its
weights-alone check, `models --fits-on`'s row and plan's service (its estimate, speed and memory charts) report the
same weights on the same device. Before, the speed model, the format search's weights-alone check and plan's charts
sized the router as on Hopper whatever the device.

The expected difference is from config.json alone (the truth is independent of our code): one [n_routed_experts,
hidden_size] GateLinear per 'E' layer of hybrid_override_pattern, replicated (ReplicatedLinear: nemotron_h.py:151-157),
so every tensor-parallel rank holds the whole difference, 23 x 128 x 2688 x (4 - 2) = 15,826,944 B.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from cli_capture import run_json
from llmsizer.catalog.models import entries
from router_dtype_case import A100, H100, MODEL, ONE_CARD, REQUEST


def _router_extra_bytes() -> int:
    cfg = entries()[MODEL].config
    moe_layers = cfg["hybrid_override_pattern"].count("E")
    assert (moe_layers, cfg["n_routed_experts"], cfg["hidden_size"], cfg["torch_dtype"]) == (
        23, 128, 2688, "bfloat16")
    return moe_layers * cfg["n_routed_experts"] * cfg["hidden_size"] * (4 - 2)


def _json(*argv: str) -> Any:
    code, out = run_json(*argv)
    assert code == 0, (argv, out)
    return out


def _weights(d: dict[str, Any]) -> int:
    return next(int(i["bytes"]) for i in d["items"] if i["name"] == "weights")


@pytest.fixture(scope="module")
def infer() -> dict[tuple[str, int], int]:
    """`infer --device D --tensor-parallel TP`'s weights per rank: the figure every other surface must give."""
    return {(d, tp): _weights(_json("infer", MODEL, "--engine", "vllm", "--device", d, "--tensor-parallel", str(tp)))
            for d in (A100, H100) for tp in (1, 2)}


def test_a100_is_h100_plus_the_fp32_router_per_rank(infer: dict[tuple[str, int], int]) -> None:
    for tp in (1, 2):
        assert infer[A100, tp] - infer[H100, tp] == _router_extra_bytes() == 15_826_944, tp


@pytest.mark.parametrize("device", [A100, H100])
@pytest.mark.parametrize("tp", [1, 2])
def test_fit_memory_and_speed_read_infers_weights(infer: dict[tuple[str, int], int], device: str, tp: int) -> None:
    """fit's estimate and its speed model (the bytes a decode step reads) hold the same weights per rank."""
    f = _json("fit", MODEL, "--engine", "vllm", "--device", device, "--count", str(tp), "--tensor-parallel", str(tp))
    assert f["tensor_parallel"] == tp
    assert f["memory"]["details"]["weights_bytes"] == infer[device, tp]
    assert f["speed"]["details"]["weights_bytes_per_device"] == infer[device, tp]


@pytest.mark.parametrize("device", [A100, H100])
def test_recommend_and_fits_on_give_fits_answer(infer: dict[tuple[str, int], int], device: str) -> None:
    """recommend's one-card option and `models --fits-on`'s row are fit's answer on that card (its memory and the
    decode speed its weight reads give), and the weights-alone check ranks the rung by the estimate's weights."""
    from llmsizer.catalog.hardware import builtin_catalog
    from llmsizer.estimate.device import device_weights_capability
    from llmsizer.estimate.formats import rung_bytes, rung_group_size
    from llmsizer.models import load_model

    spec = load_model(MODEL)
    dev = builtin_catalog().devices[device]
    assert rung_bytes(spec, "bf16", rung_group_size(spec, "bf16", None), "vllm",
                      device_weights_capability(dev, "vllm", spec.model_type)) == infer[device, 1]
    target = ONE_CARD[device]
    rec = _json("recommend", MODEL, "--engine", "vllm", "--top", "200")
    opt = next(o for o in rec["options"] if o["target"] == target)
    assert (opt["device"], opt["count"], opt["tensor_parallel"], opt["weights_format"]) == (device, 1, 1, "bf16")
    f = _json("fit", MODEL, "--engine", "vllm", "--device", target, "--weights", "bf16")
    assert f["memory"]["details"]["weights_bytes"] == infer[device, 1]
    assert opt["memory_per_device"] == f["memory_per_device"]
    assert opt["tokens_per_second_per_user"] == f["speed"]["tokens_per_second_per_user"]
    row = next(m for m in _json("models", MODEL, "--fits-on", device, "--engine", "vllm")["models"])
    assert (row["tensor_parallel"], row["weights_format"]) == (1, "bf16")
    f1 = _json("fit", MODEL, "--engine", "vllm", "--device", device, "--weights", "bf16")
    assert f1["memory"]["details"]["weights_bytes"] == infer[device, 1]
    assert row["memory_per_device"] == f1["memory_per_device"]
    assert row["tokens_per_second_per_user"] == f1["speed"]["tokens_per_second_per_user"]




def test_plan_service_holds_infers_weights(infer: dict[tuple[str, int], int], tmp_path: Path) -> None:
    """plan's service on each card: its estimate and speed hold `infer --device`'s weights, and its memory charts
    (sized without the device's memory: plan/inference.py ``_need``) differ between the cards by the router alone."""
    charts: dict[str, list[list[float]]] = {}
    for device in (A100, H100):
        req = tmp_path / f"{device}.yaml"
        req.write_text(REQUEST.format(model=MODEL, device=device))
        job = _json("plan", str(req))["jobs"][0]
        assert job["memory_estimate"]["details"]["weights_bytes"] == infer[device, 1]
        assert job["speed_estimate"]["details"]["weights_bytes_per_device"] == infer[device, 1]
        chart = next(c for c in job["charts"] if c["title"].endswith("memory per device vs context"))
        charts[device] = chart["series"][0]["points"]
    assert [x for x, _ in charts[A100]] == [x for x, _ in charts[H100]]
    assert {a[1] - h[1] for a, h in zip(charts[A100], charts[H100], strict=True)} == {_router_extra_bytes()}
