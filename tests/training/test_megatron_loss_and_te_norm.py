"""Megatron-Core's loss and Transformer Engine's RMSNorm under the megatron precisions.

Independent truth:

- what the real ``vocab_parallel_cross_entropy`` (NVIDIA/Megatron-LM @d98e8a64 megatron/core/tensor_parallel/
  cross_entropy.py, loaded from a checkout) saves for its backward, measured with autograd's saved-tensor hooks on
  one gloo rank by tests/training/megatron_ce_step.py: 128 tokens x a 1,000-word vocabulary shard of bf16 logits ->
  three storages, 512,000 + 1,024 + 128 bytes (the fp32 softmax made in place of the one fp32 copy, the int64 masked
  targets, the bool target mask). Recorded below; re-measured live when LLMSIZER_MEGATRON_LM names a checkout.
- Transformer Engine's RMSNorm (NVIDIA/TransformerEngine @d0067d0 transformer_engine/pytorch/ops/basic/rmsnorm.py
  lines 188-209: ``ctx.save_for_backward(x, rstdevs)``, x in the compute dtype, rstdevs fp32 per row) with
  DeepSeek-V3's config (hidden 7168) at TP 2 with sequence parallelism: 2048 tokens x 7168 x 2 B + 2048 x 4 B.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from llmsizer.estimate.inference.common import Acc
from llmsizer.estimate.training.setup import resolve
from llmsizer.formulas.training_activations import head_activations, layer_saved_terms
from llmsizer.models import load_model
from llmsizer.specs import TrainingWorkload

MEASURED = {"tokens": 128, "vocab": 1000, "saved_bytes": 513152, "storages": [128, 1024, 512000]}


def _ce_kept(tokens_batch: int, seq: int, vocab: int) -> int:
    spec = replace(load_model("llama-3.2-1b"), vocab_size=vocab)
    w = TrainingWorkload(method="full", precision="megatron-bf16", micro_batch=tokens_batch, seq_len=seq)
    assert w.loss == "megatron-ce"
    st = resolve(spec, w, Acc()).act
    head = head_activations(spec, st, True, megatron_ce=True)
    return next(t.bytes for t in head.saved if t.name.startswith("loss softmax"))


def test_megatron_ce_keeps_what_the_real_loss_saves() -> None:
    assert _ce_kept(2, 64, MEASURED["vocab"]) == MEASURED["saved_bytes"]


@pytest.mark.skipif(not os.environ.get("LLMSIZER_MEGATRON_LM"), reason="needs a NVIDIA/Megatron-LM checkout "
                    "(@d98e8a64) in LLMSIZER_MEGATRON_LM")
def test_recorded_measurement_is_the_real_loss() -> None:
    out = subprocess.run([sys.executable, str(Path(__file__).with_name("megatron_ce_step.py")),
                          os.environ["LLMSIZER_MEGATRON_LM"]], capture_output=True, text=True, check=True, timeout=120)
    assert json.loads(out.stdout.strip().splitlines()[-1]) == MEASURED


def test_megatron_precisions_default_to_megatrons_loss() -> None:
    w = TrainingWorkload(method="full", precision="megatron-bf16")
    assert w.loss == "megatron-ce"
    assert replace(w, precision="bf16-mixed").loss == "ce"  # a default, resolved again for the copy's precision
    assert TrainingWorkload(method="full", precision="megatron-bf16", loss="ce").loss == "ce"  # a stated loss stays
    assert TrainingWorkload(method="full").loss == "ce"


def test_te_rmsnorm_keeps_its_bf16_input_and_fp32_rsigma() -> None:
    spec = load_model("deepseek-v3")
    w = TrainingWorkload(method="full", precision="megatron-bf16", micro_batch=1, seq_len=4096, gpus=16, tp=2,
                         sequence_parallel=True)
    terms = {t.name: t.bytes for t in layer_saved_terms(spec, 0, resolve(spec, w, Acc()).act)}
    norm = [b for n, b in terms.items() if n.startswith("attention norm")]
    assert norm == [2048 * 7168 * 2 + 2048 * 4]
