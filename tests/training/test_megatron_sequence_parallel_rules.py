"""Megatron-Core's rules for sequence parallelism beyond the MoE one (tests/training/test_moe_layout_refusals.py): a
layout it will not train is bad input (one line naming the fields), and the scale-out search offers only the ones it
trains (estimate/training/setup.py megatron_sequence_parallel_refusal, the one rule).

Independent truth: Megatron-Core's own checks (NVIDIA/Megatron-LM @d98e8a64).

- megatron/training/arguments.py:1441-1442: ``assert args.sequence_parallel == True`` when ``--tp-comm-overlap`` is
  given.
- megatron/core/tensor_parallel/mappings.py:60-74 (``_split_along_first_dim``) and 159-178
  (``_reduce_scatter_along_first_dim``) assert that the tensor-parallel size divides the first dimension, the
  sequence of the [s, b, h] hidden states the embedding scatters under sequence parallelism
  (models/common/embeddings/language_model_embedding.py:143-147); with context parallelism a rank holds seq / cp.
- torchtitan's sequence parallelism (DTensor Shard on the sequence) has neither rule: a bf16-mixed run is not refused.
"""

from __future__ import annotations

import pytest

from llmsizer.errors import FieldError
from llmsizer.estimate.training import estimate_training
from llmsizer.models import load_model

BASE = dict(method="full", micro_batch=1, gpus=64, gpus_per_node=8, grad_checkpointing="full",
            precision="megatron-bf16")


def test_tp_comm_overlap_needs_sequence_parallelism_under_megatron() -> None:
    spec = load_model("llama-3.1-8b")
    with pytest.raises(FieldError, match=r"arguments.py:1441-1442") as e:
        estimate_training(spec, **{**BASE, "seq_len": 4096, "tp": 8, "tp_comm_overlap": True})
    assert e.value.fields == ("tp_comm_overlap", "sequence_parallel")
    assert estimate_training(spec, **{**BASE, "seq_len": 4096, "tp": 8, "tp_comm_overlap": True,
                                      "sequence_parallel": True}).total_bytes > 0


def test_sequence_parallelism_needs_tp_to_divide_a_ranks_sequence() -> None:
    spec = load_model("llama-3.1-8b")
    with pytest.raises(FieldError, match=r"mappings.py:60-74") as e:  # 4100 = 4 x 1025
        estimate_training(spec, **{**BASE, "seq_len": 4100, "tp": 8, "sequence_parallel": True})
    assert e.value.fields[0] == "seq_len"
    assert estimate_training(spec, **{**BASE, "seq_len": 4100, "tp": 4, "sequence_parallel": True}).total_bytes > 0
    assert estimate_training(spec, **{**BASE, "seq_len": 4100, "tp": 8}).total_bytes > 0  # off: no split
    with pytest.raises(FieldError, match=r"mappings.py:60-74"):  # a rank's 4100 / cp 2 = 2050 tokens: TP 4 does not
        estimate_training(spec, **{**BASE, "seq_len": 4100, "tp": 4, "context_parallel": 2,  # divide them
                                   "sequence_parallel": True})
    torchtitan = {**BASE, "precision": "bf16-mixed"}
    assert estimate_training(spec, **{**torchtitan, "seq_len": 4100, "tp": 8,
                                      "sequence_parallel": True}).total_bytes > 0


def test_the_cli_refuses_it_in_one_line_naming_the_flags() -> None:
    from cli_capture import run_cli

    done = run_cli("fit", "llama-3.1-8b", "--train", "--device", "h100-sxm", "--count", "64", "--precision",
                   "megatron-bf16", "--tp", "8", "--tp-comm-overlap")
    assert done.returncode == 2, done.stdout[-300:]
    (line,) = done.stderr.strip().splitlines()
    assert "--sequence-parallel" in line and "arguments.py:1441-1442" in line
