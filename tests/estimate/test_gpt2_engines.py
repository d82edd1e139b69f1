"""GPT-2 on each engine: vLLM (vllm/model_executor/models/gpt2.py GPT2LMHeadModel), SGLang
(python/sglang/srt/models/gpt2.py, EntryClass = GPT2LMHeadModel), llama.cpp (LLM_ARCH_GPT2) and transformers serve
it; vLLM's and SGLang's GPT2Model.__init__ assert ``not config.scale_attn_by_inverse_layer_idx`` and ``not
config.reorder_and_upcast_attn`` (vllm @e7dffa68, sglang @00b08c49), so a config that sets either is refused there
(one line naming the engines that load it) and a device whose default engine is vLLM takes transformers.
"""

from __future__ import annotations

import pytest

from llmsizer import estimate_inference
from llmsizer.errors import FieldError
from llmsizer.models import load_model
from llmsizer.readers.hf_config import spec_from_config

_BASE = {"model_type": "gpt2", "vocab_size": 300, "n_embd": 64, "n_layer": 3, "n_head": 4, "n_positions": 128}


@pytest.mark.parametrize("engine", ["transformers", "vllm", "sglang", "llamacpp"])
def test_catalog_gpt2_is_served_on_every_engine(engine: str) -> None:
    est = estimate_inference(load_model("gpt2"), engine=engine, device="h100", context=1024)
    assert est.total_bytes > 0


@pytest.mark.parametrize("flag", ["scale_attn_by_inverse_layer_idx", "reorder_and_upcast_attn"])
@pytest.mark.parametrize("engine", ["vllm", "sglang"])
def test_asserted_flags_refused_on_vllm_and_sglang(engine: str, flag: str) -> None:
    spec = spec_from_config({**_BASE, flag: True}, name="gpt2-flag")
    assert spec.gpt2_attention_flags == (flag,)
    with pytest.raises(FieldError, match=f"asserts not config.{flag}.*transformers or llamacpp"):
        estimate_inference(spec, engine=engine, device="h100", context=128)
    for other in ("transformers", "llamacpp"):
        assert estimate_inference(spec, engine=other, device="h100", context=128).total_bytes > 0


def test_default_engine_falls_back_to_transformers() -> None:
    spec = spec_from_config({**_BASE, "reorder_and_upcast_attn": True}, name="gpt2-flag")
    plain = spec_from_config(_BASE, name="gpt2")
    engine = {a.name: a.value for a in estimate_inference(plain, device="h100", context=128).assumptions}["engine"]
    assert engine == "vllm"
    engine = {a.name: a.value for a in estimate_inference(spec, device="h100", context=128).assumptions}["engine"]
    assert engine == "transformers"
