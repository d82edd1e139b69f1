"""Checkpointing policies of torchtitan against real CPU training steps (#12).

Each case runs ``measure_step.py`` (a fresh process; transformers + peft + torch, random weights) with the
decoder layers wrapped as torchtitan wraps them: op-level ``SelectiveAC`` through the real policy API
``torch.utils.checkpoint.create_selective_checkpoint_contexts`` (the policy copied from torchtitan
``torchtitan/distributed/activation_checkpoint.py``, see ``measure_step._torchtitan_checkpointing``), or full
checkpointing of every N-th layer (torchtitan's ``selective_ac_option = "N"``). The measured peak of live tensor
bytes is the truth; llmsizer's ``grad_checkpointing='selective-op'`` / ``checkpoint_every`` must land within 10%,
and the same run estimated without the policy must miss by more than that (the case discriminates).
"""

from __future__ import annotations

from typing import Any

import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")

from test_measured import PEAK_TOLERANCE, _measure  # noqa: E402

from llmsizer.estimate.training import estimate_training  # noqa: E402
from llmsizer.readers.hf_config import spec_from_config  # noqa: E402

MiB = 2**20
LLAMA = {"model_type": "llama", "vocab_size": 2000, "hidden_size": 320, "intermediate_size": 864,
         "num_hidden_layers": 4, "num_attention_heads": 10, "num_key_value_heads": 2,
         "max_position_embeddings": 1024, "tie_word_embeddings": False}
QWEN2_BIAS = {"model_type": "qwen2", "vocab_size": 2048, "hidden_size": 256, "intermediate_size": 512,
              "num_hidden_layers": 4, "num_attention_heads": 4, "num_key_value_heads": 2,
              "max_position_embeddings": 1024, "tie_word_embeddings": True}

# name: (measure_step case, llmsizer workload fields)
CASES: dict[str, tuple[dict[str, Any], dict[str, Any]]] = {
    "llama fp32 adamw, op-level SAC": (
        dict(config=LLAMA, batch=2, seq=512, sac="op"),
        dict(precision="fp32", micro_batch=2, seq_len=512, optimizer_impl="foreach", grad_checkpointing="selective-op")),
    "qwen2 (q/k/v biases: addmm, always saved) fp32 sgd, op-level SAC": (
        dict(config=QWEN2_BIAS, batch=2, seq=512, sac="op", optimizer="sgd"),
        dict(precision="fp32", micro_batch=2, seq_len=512, optimizer="sgd", grad_checkpointing="selective-op")),
    "llama LoRA q,v bf16-mixed, op-level SAC (adapter matmuls shift the count)": (
        dict(config=LLAMA, batch=2, seq=512, sac="op", autocast="bf16", lora=dict(r=8, targets=["q_proj", "v_proj"])),
        dict(precision="bf16-mixed", method="lora", rank=8, targets="q,v", base_dtype="fp32", micro_batch=2,
             seq_len=512, optimizer_impl="foreach", grad_checkpointing="selective-op")),
    "llama pure bf16 sgd, op-level SAC": (
        dict(config=LLAMA, batch=2, seq=512, sac="op", dtype="bf16", optimizer="sgd"),
        dict(precision="bf16", micro_batch=2, seq_len=512, optimizer="sgd", grad_checkpointing="selective-op")),
    "llama fp32 adamw, every 2nd layer checkpointed": (
        dict(config=LLAMA, batch=2, seq=512, sac=2),
        dict(precision="fp32", micro_batch=2, seq_len=512, optimizer_impl="foreach", grad_checkpointing="full",
             checkpoint_every=2)),
    "llama bf16-mixed sgd, every 3rd layer checkpointed": (
        dict(config=LLAMA, batch=2, seq=512, sac=3, autocast="bf16", optimizer="sgd"),
        dict(precision="bf16-mixed", micro_batch=2, seq_len=512, optimizer="sgd", grad_checkpointing="full",
             checkpoint_every=3)),
}


@pytest.fixture(scope="module")
def measured() -> dict[str, dict[str, Any]]:
    return {name: _measure(case) for name, (case, _) in CASES.items()}


@pytest.mark.parametrize("name", list(CASES))
def test_checkpoint_policy_peak(name: str, measured: dict[str, dict[str, Any]]) -> None:
    case, fields = CASES[name]
    spec = spec_from_config(case["config"], name=name)
    est = estimate_training(spec, **fields)
    pred, meas = est.details["tensor_peak_bytes"], measured[name]["peak_bytes"]
    err = (pred - meas) / meas
    plain = dict(fields, grad_checkpointing="none", checkpoint_every=1)
    without = estimate_training(spec, **plain).details["tensor_peak_bytes"]
    print(f"\n{name}: predicted {pred / MiB:.2f} MiB, measured {meas / MiB:.2f} MiB ({err:+.2%}); "
          f"without the policy {without / MiB:.2f} MiB ({(without - meas) / meas:+.1%})")
    assert abs(err) <= PEAK_TOLERANCE
    assert abs(without - meas) / meas > PEAK_TOLERANCE
