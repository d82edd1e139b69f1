"""FSDP1 flat-parameter gradients against a real ``FullyShardedDataParallel`` LoRA step on two gloo ranks (#12).

``fsdp1_step.py`` wraps a PEFT LoRA model (adapters and base in bf16: one flat parameter has one dtype) with FSDP1,
``use_orig_params=True``, one unit per decoder layer plus the root, and reads every ``flat_param.grad`` after the
backward: FSDP1 gives the whole flat parameter a gradient, frozen base included (torch
``torch/distributed/fsdp/_flat_param.py`` lines 804-836). llmsizer's ``fsdp_version=1`` gradient bytes per rank must
agree within 2%; ``fsdp_version=2`` (gradients of the adapters only) must miss by far.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")
pytest.importorskip("peft")

from ranks import run_ranks  # noqa: E402

from llmsizer.estimate.training import estimate_training  # noqa: E402
from llmsizer.readers.hf_config import spec_from_config  # noqa: E402

pytestmark = pytest.mark.slow

HERE = Path(__file__).resolve().parent
LLAMA = {"model_type": "llama", "vocab_size": 2000, "hidden_size": 256, "intermediate_size": 512,
         "num_hidden_layers": 3, "num_attention_heads": 4, "num_key_value_heads": 2,
         "max_position_embeddings": 1024, "tie_word_embeddings": False}


def test_fsdp1_lora_flat_gradients() -> None:
    case: dict[str, Any] = dict(config=LLAMA, batch=2, seq=128, lora=dict(r=8, targets=["q_proj", "v_proj"]))
    m = run_ranks(HERE / "fsdp1_step.py", case, 2)
    spec = spec_from_config(LLAMA, name="llama-tiny")
    common = dict(method="lora", rank=8, targets="q,v", base_dtype="bf16", adapter_dtype="bf16", precision="bf16",
                  micro_batch=2, seq_len=128, gpus=2, fsdp="full")
    v1 = estimate_training(spec, fsdp_version=1, **common).details["model_states"]["gradients"]
    v2 = estimate_training(spec, **common).details["model_states"]["gradients"]
    meas = m["flat_grad_bytes"]
    print(f"\nFSDP1 LoRA over 2 ranks: flat gradient shards {meas} B (all params {m['param_bytes']} B, trained "
          f"{m['trained_param_bytes']} B, {m['units']} units); fsdp_version 1 predicts {v1} B "
          f"({(v1 - meas) / meas:+.2%}), fsdp_version 2 {v2} B ({(v2 - meas) / meas:+.1%})")
    assert abs(v1 - meas) / meas <= 0.02
    assert abs(v2 - meas) / meas > 0.5
