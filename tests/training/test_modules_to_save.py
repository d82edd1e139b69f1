"""PEFT ``modules_to_save`` (trainable embeddings / lm_head beside LoRA) against real CPU training steps (#12).

``measure_step.py`` builds the PEFT model with ``LoraConfig(modules_to_save=...)``: PEFT wraps each named module in
``ModulesToSaveWrapper`` (a frozen original and a trained deep copy). Checked: parameter, gradient and optimizer
state bytes exactly, the peak of live tensor bytes within 10%, and that the same run estimated without
``modules_to_save`` misses by more than that.
"""

from __future__ import annotations

from typing import Any

import pytest

pytest.importorskip("torch")
pytest.importorskip("peft")

from test_measured import PEAK_TOLERANCE, _measure  # noqa: E402

from llmsizer.estimate.training import estimate_training  # noqa: E402
from llmsizer.readers.hf_config import spec_from_config  # noqa: E402

LLAMA = {"model_type": "llama", "vocab_size": 5000, "hidden_size": 320, "intermediate_size": 864,
         "num_hidden_layers": 3, "num_attention_heads": 10, "num_key_value_heads": 2,
         "max_position_embeddings": 1024, "tie_word_embeddings": False}
QWEN2_TIED = {"model_type": "qwen2", "vocab_size": 8192, "hidden_size": 256, "intermediate_size": 512,
              "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
              "max_position_embeddings": 1024, "tie_word_embeddings": True}
LORA = dict(precision="fp32", method="lora", rank=8, targets="q,v", micro_batch=2, seq_len=256,
            optimizer_impl="foreach")

CASES: dict[str, tuple[dict[str, Any], dict[str, Any]]] = {
    "llama LoRA q,v + embed_tokens, lm_head": (
        dict(config=LLAMA, batch=2, seq=256, lora=dict(r=8, targets=["q_proj", "v_proj"],
                                                       modules_to_save=["embed_tokens", "lm_head"])),
        dict(LORA, modules_to_save="embed_tokens,lm_head")),
    "llama LoRA q,v + lm_head": (
        dict(config=LLAMA, batch=2, seq=256, lora=dict(r=8, targets=["q_proj", "v_proj"], modules_to_save=["lm_head"])),
        dict(LORA, modules_to_save="lm_head")),
    "qwen2 tied LoRA q,v + lm_head (a copy of the shared matrix)": (
        dict(config=QWEN2_TIED, batch=2, seq=256, lora=dict(r=8, targets=["q_proj", "v_proj"],
                                                            modules_to_save=["lm_head"])),
        dict(LORA, modules_to_save="lm_head")),
}


@pytest.fixture(scope="module")
def measured() -> dict[str, dict[str, Any]]:
    return {name: _measure(case) for name, (case, _) in CASES.items()}


@pytest.mark.parametrize("name", list(CASES))
def test_modules_to_save(name: str, measured: dict[str, dict[str, Any]]) -> None:
    case, fields = CASES[name]
    m = measured[name]
    spec = spec_from_config(case["config"], name=name)
    est = estimate_training(spec, **fields)
    pred, meas = est.details["tensor_peak_bytes"], m["peak_bytes"]
    without = estimate_training(spec, **dict(fields, modules_to_save=())).details["tensor_peak_bytes"]
    print(f"\n{name}: predicted {pred / 2**20:.2f} MiB, measured {meas / 2**20:.2f} MiB ({(pred - meas) / meas:+.2%}); "
          f"without modules_to_save {(without - meas) / meas:+.1%}")
    ms = est.details["model_states"]
    assert ms["weights"] + ms["adapter_weights"] == m["param_bytes"]
    assert ms["gradients"] == m["grad_bytes"]
    assert ms["optimizer_states"] == m["optimizer_state_bytes"]
    assert abs(pred - meas) / meas <= PEAK_TOLERANCE
    assert abs(without - meas) / meas > PEAK_TOLERANCE
