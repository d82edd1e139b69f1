"""Predicted training memory vs measured truth from real training steps on CPU.

Each case runs ``measure_step.py`` in a fresh subprocess (transformers 5 + peft + torch, random weights, a few
AdamW/SGD/Adafactor/8-bit-Adam steps). The truth is independent of llmsizer: a real model, a real optimizer, and
the bytes PyTorch's CPU allocator holds (``measure_step.AllocatorBytes``: torch.profiler's allocation records, no
dispatch mode that could change what autograd does in place); the one FakeTensorMode case (a full-size model whose
tensors the allocator never sees) is followed by the dispatch-mode tracker.

Asserted per case:
- the predicted peak of live tensors (``details['tensor_peak_bytes']``: every device item except the CUDA
  context and allocator reserve) within 10 % of the measured peak;
- weights, gradients and optimizer states EXACTLY equal to the bytes of the real parameters, ``.grad`` tensors
  and ``optimizer.state`` tensors;
- process peak RSS (with ``MALLOC_MMAP_THRESHOLD_=65536 MALLOC_TRIM_THRESHOLD_=0``) at least the measured peak
  over the parameters and at most that plus a fixed 80 MiB of non-tensor memory (allocator arenas, autograd
  nodes, thread pools).

Model dimensions differ from those used while the activation terms were worked out (hidden 256, 4 layers),
so these cases are held-out checks of the structure-aware formulas.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")

from llmsizer.estimate.training import estimate_training  # noqa: E402
from llmsizer.readers.hf_config import spec_from_config  # noqa: E402

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
MiB = 2**20
PEAK_TOLERANCE = 0.10
# Non-tensor memory of a training step (allocator arenas, autograd nodes, thread pools, oneDNN kernels, the
# tracker's own bookkeeping). Measured: up to 48 MiB on the AMD EPYC CI machine (2026-11), 55-74 MiB on an Intel
# Sapphire Rapids KVM guest (2026-12-01, the three checkpointing cases), 81.7 MiB on an Intel Xeon KVM guest
# (2026-12-05, LoRA q,v bf16-mixed checkpointing; e021d171's tree measured the same 101.0 MiB there, its prediction
# unchanged). The bound is the largest, rounded up.
RSS_SLACK = 96 * MiB

LLAMA = {"model_type": "llama", "vocab_size": 5000, "hidden_size": 320, "intermediate_size": 864,
         "num_hidden_layers": 3, "num_attention_heads": 10, "num_key_value_heads": 2,
         "max_position_embeddings": 1024, "tie_word_embeddings": False}
QWEN3_MOE = {"model_type": "qwen3_moe", "vocab_size": 3000, "hidden_size": 256, "num_hidden_layers": 2,
             "num_attention_heads": 8, "num_key_value_heads": 4, "head_dim": 32, "num_experts": 8,
             "num_experts_per_tok": 2, "moe_intermediate_size": 192, "intermediate_size": 512, "mlp_only_layers": [],
             "max_position_embeddings": 1024, "tie_word_embeddings": False}
MISTRAL_SLIDING = {"model_type": "mistral", "vocab_size": 4000, "hidden_size": 256, "intermediate_size": 640,
                   "num_hidden_layers": 3, "num_attention_heads": 8, "num_key_value_heads": 2,
                   "max_position_embeddings": 1024, "sliding_window": 128}
QWEN2_TIED = {"model_type": "qwen2", "vocab_size": 8192, "hidden_size": 256, "intermediate_size": 512,
              "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
              "max_position_embeddings": 1024, "tie_word_embeddings": True}
QWEN3 = {"model_type": "qwen3", "vocab_size": 4096, "hidden_size": 256, "intermediate_size": 768,
         "num_hidden_layers": 3, "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 64,
         "max_position_embeddings": 1024, "tie_word_embeddings": True}
ALL = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]


def _qwen25_05b() -> dict[str, Any]:
    path = ROOT / "src" / "llmsizer" / "catalog" / "data" / "models" / "qwen2.5-0.5b.json"
    return dict(json.loads(path.read_text("utf-8"))["config"])


# name: (measure_step case, llmsizer workload fields)
CASES: dict[str, tuple[dict[str, Any], dict[str, Any]]] = {
    "llama-gqa fp32 adamw": (
        dict(config=LLAMA, batch=2, seq=384),
        dict(precision="fp32", micro_batch=2, seq_len=384, optimizer_impl="foreach")),
    "llama-gqa fp32 checkpointing": (
        dict(config=LLAMA, batch=2, seq=384, grad_ckpt=True),
        dict(precision="fp32", micro_batch=2, seq_len=384, optimizer_impl="foreach", grad_checkpointing="full")),
    "llama-gqa bf16-mixed sgd-momentum": (
        dict(config=LLAMA, batch=1, seq=256, autocast="bf16", optimizer="sgd-momentum"),
        dict(precision="bf16-mixed", micro_batch=1, seq_len=256, optimizer="sgd-momentum")),
    "llama-gqa bf16-mixed checkpointing sgd": (
        dict(config=LLAMA, batch=1, seq=256, autocast="bf16", optimizer="sgd", grad_ckpt=True),
        dict(precision="bf16-mixed", micro_batch=1, seq_len=256, optimizer="sgd", grad_checkpointing="full")),
    "llama-gqa fp32 eager attention": (
        dict(config=LLAMA, batch=2, seq=256, attn="eager"),
        dict(precision="fp32", micro_batch=2, seq_len=256, optimizer_impl="foreach", attention="eager")),
    "llama-gqa lora all-linear fp32": (
        dict(config=LLAMA, batch=2, seq=384, lora=dict(r=16, targets=ALL)),
        dict(precision="fp32", method="lora", rank=16, targets="all-linear", micro_batch=2, seq_len=384,
             optimizer_impl="foreach")),
    # PEFT lora_dropout > 0 (eq. D1): each adapter keeps its dropped-out copy and, on a CPU, the scaled noise in the
    # input dtype (CUDA keeps a bool mask); without the term the prediction is -20.7 %, with it +2.5 % (2026-12-02)
    "llama-gqa lora all-linear fp32 dropout (CPU noise)": (
        dict(config=LLAMA, batch=2, seq=384, lora=dict(r=16, targets=ALL, dropout=0.1)),
        dict(precision="fp32", method="lora", rank=16, targets="all-linear", micro_batch=2, seq_len=384,
             optimizer_impl="foreach", lora_dropout="per-module", device="cpu")),
    "llama-gqa lora q,v bf16-mixed checkpointing": (
        dict(config=LLAMA, batch=1, seq=256, lora=dict(r=8, targets=["q_proj", "v_proj"]), autocast="bf16",
             grad_ckpt=True),
        dict(precision="bf16-mixed", method="lora", rank=8, targets="q,v", base_dtype="fp32", micro_batch=1,
             seq_len=256, optimizer_impl="foreach", grad_checkpointing="full")),
    "llama-gqa dora q,k,v,o fp32": (
        dict(config=LLAMA, batch=2, seq=256, lora=dict(r=8, targets=ALL[:4], dora=True)),
        dict(precision="fp32", method="dora", rank=8, targets="q,k,v,o", micro_batch=2, seq_len=256,
             optimizer_impl="foreach")),
    "llama-gqa fp32 adafactor": (
        dict(config=LLAMA, batch=2, seq=256, optimizer="adafactor"),
        dict(precision="fp32", micro_batch=2, seq_len=256, optimizer="adafactor", optimizer_impl="foreach")),
    "llama-gqa fp32 8-bit adamw": (
        dict(config=LLAMA, batch=2, seq=256, optimizer="adamw-8bit"),
        dict(precision="fp32", micro_batch=2, seq_len=256, optimizer="adamw-8bit")),
    "llama-gqa fp32 short sequence, for-loop adamw (step peak)": (
        dict(config=LLAMA, batch=1, seq=32, foreach=False),
        dict(precision="fp32", micro_batch=1, seq_len=32, optimizer_impl="for-loop")),
    "qwen3-moe fp32 adamw": (
        dict(config=QWEN3_MOE, batch=2, seq=256),
        dict(precision="fp32", micro_batch=2, seq_len=256, optimizer_impl="foreach")),
    "mistral sliding-window fp32 sgd-momentum": (
        dict(config=MISTRAL_SLIDING, batch=2, seq=384, optimizer="sgd-momentum"),
        dict(precision="fp32", micro_batch=2, seq_len=384, optimizer="sgd-momentum")),
    "qwen2 tied pure-bf16 sgd": (
        dict(config=QWEN2_TIED, batch=1, seq=256, dtype="bf16", optimizer="sgd"),
        dict(precision="bf16", micro_batch=1, seq_len=256, optimizer="sgd")),
    "qwen3 qk-norm fp32 adamw": (
        dict(config=QWEN3, batch=2, seq=256),
        dict(precision="fp32", micro_batch=2, seq_len=256, optimizer_impl="foreach")),
    "Qwen2.5-0.5B full size bf16-mixed (FakeTensorMode)": (
        dict(config=_qwen25_05b(), batch=1, seq=1024, autocast="bf16", fake=True),
        dict(precision="bf16-mixed", micro_batch=1, seq_len=1024, optimizer_impl="foreach")),
}


def _measure(case: Any) -> Any:
    """One case (a dict: its result) or a list of cases run in one process (a list of results)."""
    case = [dict(c, steps=c.get("steps", 2)) for c in case] if isinstance(case, list) else \
        dict(case, steps=case.get("steps", 2))
    env = dict(os.environ, MALLOC_MMAP_THRESHOLD_="65536", MALLOC_TRIM_THRESHOLD_="0", OMP_NUM_THREADS="1",
               TOKENIZERS_PARALLELISM="false")
    out = subprocess.run([sys.executable, str(HERE / "measure_step.py"), json.dumps(case)], capture_output=True,
                         text=True, env=env, timeout=600)
    if out.returncode:
        raise RuntimeError(out.stderr[-4000:])
    return json.loads(out.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def measured() -> dict[str, dict[str, Any]]:
    names = list(CASES)
    with ThreadPoolExecutor(max_workers=2) as pool:
        results = list(pool.map(lambda n: _measure(CASES[n][0]), names))
    return dict(zip(names, results, strict=True))


def _predict(name: str) -> Any:
    case, fields = CASES[name]
    spec = spec_from_config(case["config"], name=name)
    return estimate_training(spec, **fields)


@pytest.mark.parametrize("name", list(CASES))
def test_peak_within_10_percent_and_states_exact(name: str, measured: dict[str, dict[str, Any]]) -> None:
    m = measured[name]
    est = _predict(name)
    d = est.details
    pred, meas = d["tensor_peak_bytes"], m["peak_bytes"]
    err = (pred - meas) / meas
    print(f"\n{name}: predicted {pred / MiB:.2f} MiB at '{d['peak_phase']}', measured {meas / MiB:.2f} MiB, "
          f"error {err:+.2%}")
    print("  predicted parts:", {k: round(v / MiB, 2) for k, v in d["peak_parts"].items()})
    assert m["truth"] == ("tracker" if CASES[name][0].get("fake") else "allocator")
    assert abs(err) <= PEAK_TOLERANCE
    ms = d["model_states"]
    assert ms["weights"] + ms["adapter_weights"] == m["param_bytes"]
    assert ms["gradients"] == m["grad_bytes"]
    assert ms["optimizer_states"] == m["optimizer_state_bytes"]
    assert d["params_trainable"] * (2 if CASES[name][0].get("dtype") == "bf16" else 4) == m["trainable_param_bytes"]
    tensor_items = sum(i.bytes for i in est.items if i.location == "device"
                       and i.name not in ("cuda_context", "allocator_reserve", "host_runtime"))  # (device cpu)
    assert tensor_items == pred


@pytest.mark.parametrize("name", [n for n in CASES if not CASES[n][0].get("fake")])
def test_process_rss_cross_check(name: str, measured: dict[str, dict[str, Any]]) -> None:
    m = measured[name]
    pred_over_params = _predict(name).details["tensor_peak_bytes"] - m["param_bytes"]
    rss = m["rss_train_delta_bytes"]
    print(f"\n{name}: RSS growth {rss / MiB:.1f} MiB, predicted tensors over the parameters "
          f"{pred_over_params / MiB:.1f} MiB")
    assert 0.95 * pred_over_params <= rss <= pred_over_params + RSS_SLACK
