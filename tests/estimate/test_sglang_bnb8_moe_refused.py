"""SGLang does not load an MoE model in bitsandbytes llm.int8, as vLLM does not (issues #12/#16): its bitsandbytes
method is adapted from vLLM's, and a FusedMoE layer gets BitsAndBytesMoEMethod (get_quant_method), whose
create_weights calls ``_create_weights_8bit`` when ``load_in_8bit``, and that raises NotImplementedError (sglang
0.5.23, PyPI wheel, sglang/srt/layers/quantization/bitsandbytes.py L165-166, L459-460, L571-580). Before, SGLang was
refused only through its nested vLLM pool estimate, with vLLM's name. A dense model in llm.int8 still runs on SGLang
(BitsAndBytesLinearMethod.create_weights has an 8-bit path, ``create_qweight_for_8bit``, same file L205-270)."""

from __future__ import annotations

import pytest

import llmsizer
from llmsizer.catalog.hardware import builtin_catalog
from llmsizer.errors import InputError
from llmsizer.estimate.formats import engine_refuses
from llmsizer.models import load_model

MOE = "qwen3-30b-a3b"  # Qwen3MoeForCausalLM: its experts are a FusedMoE on SGLang


def test_sglang_refuses_an_moe_model_in_llm_int8_in_its_own_name() -> None:
    with pytest.raises(InputError) as e:
        llmsizer.estimate_inference(MOE, engine="sglang", weights="llm.int8")
    assert str(e.value).startswith("SGLang does not load the MoE model") and "_create_weights_8bit" in str(e.value)
    why = engine_refuses("sglang", "llm.int8", builtin_catalog().device("h100-sxm"), load_model(MOE))
    assert why is not None and why.startswith("SGLang does not load")


def test_sglang_still_runs_a_moe_model_in_nf4_and_a_dense_model_in_llm_int8() -> None:
    assert llmsizer.estimate_inference(MOE, engine="sglang", weights="nf4").total()[0] > 0
    assert llmsizer.estimate_inference("llama-3.1-8b", engine="sglang", weights="llm.int8").total()[0] > 0
