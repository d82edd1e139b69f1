"""MXFP4 quantizes a model's routed experts and nothing else (smalls3 #1): vLLM's Mxfp4Config.get_quant_method
(vllm/model_executor/layers/quantization/mxfp4.py L201-234 @ 007d5005) gives every LinearBase layer
UnquantizedLinearMethod ("MXFP4 linear layer is not implemented") and only FusedMoE layers Mxfp4MoEMethod. So
`--weights mxfp4` on a dense model is a 16-bit model under another name: before, `infer llama-3.1-8b --engine vllm
--weights mxfp4` answered weights "format mxfp4 (bf16/fp16 14.96 GiB)" with no word. It is refused now, on every
engine, and an MoE model still takes it. The expert bytes are worked here from the OCP MX layout, not read from
llmsizer: 32 FP4 values (16 B) + one E8M0 scale (1 B) per block."""

from __future__ import annotations

import pytest

from cli_capture import run
from llmsizer import estimate_inference
from llmsizer.errors import FieldError
from llmsizer.estimate.formats import engine_refuses
from llmsizer.models import load_model


@pytest.mark.parametrize("engine", ["vllm", "sglang", "transformers"])
def test_a_dense_model_in_mxfp4_is_refused_naming_the_weights(engine: str) -> None:
    with pytest.raises(FieldError, match="MXFP4 quantizes only MoE experts") as e:
        estimate_inference("llama-3.1-8b", engine=engine, weights="mxfp4", memory=24 * 2**30)
    assert e.value.field == "weights" and "has no experts" in str(e.value)
    assert engine_refuses(engine, "mxfp4", None, load_model("llama-3.1-8b")) is not None  # the ladder's one check


def test_the_cli_exits_2_with_one_line() -> None:
    code, out, err = run("infer", "llama-3.1-8b", "--engine", "vllm", "--weights", "mxfp4", "--memory", "24GiB")
    assert code == 2 and out == "" and err.count("\n") == 1 and "--weights" in err and "UnquantizedLinearMethod" in err


def test_an_moe_model_keeps_mxfp4_on_its_experts() -> None:
    spec = load_model("gpt-oss-20b")
    assert engine_refuses("vllm", "mxfp4", None, spec) is None
    est = estimate_inference(spec, engine="vllm", weights="mxfp4", memory=80 * 2**30)
    moe = spec.moe
    assert moe is not None
    # gate+up [2I, H] and down [H, I] per expert per layer: 3 H I values, 17 B per 32 of them
    values = moe.num_experts * 3 * spec.hidden_size * moe.expert_intermediate_size * spec.num_layers
    assert est.item("weights").bytes > values * 17 // 32  # the experts in MXFP4, the rest 16-bit beside them
    assert est.item("weights").bytes < values * 2  # far below the experts alone in bf16
