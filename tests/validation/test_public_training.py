"""Training memory vs the published measurements in validation/public_measurements.csv (kind train_memory).

Every row is listed: expressed rows print predicted vs measured with the assumptions they needed; rows that
cannot be expressed say why. Only rows whose batch, sequence length, method and device count are published
are asserted ("fully specified"), with one tolerance fixed up front (TOLERANCE below); the rest are printed.

What is compared: torchtune logs ``max_memory_allocated``, ``max_memory_reserved`` and the active peak, each / 1e9
(torchtune ``utils/memory.py get_memory_stats`` @ 0217d44c2 lines 198-200). Rows of allocated memory compare
``details['tensor_peak_bytes']`` (every device item except the CUDA context and the allocator reserve); the README
tables report reserved memory (validation_cases.py ``TT_RESERVED`` quotes why), so those rows compare the tensors
plus the allocator reserve of ``--metric reserved`` (what == 'reserved').

Assumptions shared by the torchtune rows (the recipes of the week the 2024-05 README table was made, torchtune
@ 0217d44c2, 2024-05-09; earlier configs read @04dc3801, 0031bfb0, 03a19788, 03317787):
- ``dtype: bf16`` is pure bf16 (weights, gradients, AdamW states, LoRA adapters);
- activation checkpointing on (the single-device, QLoRA and full configs set it; without it 4 x 2048 tokens of
  Llama-2-7B activations exceed the 24 GB of the RTX 4090 the rows ran on), non-reentrant
  (torchtune/utils/activations.py: CheckpointImpl.NO_REENTRANT);
- SDPA attention, the loss over fp32 logits without chunking (``torch.nn.CrossEntropyLoss``), and the loop keeps
  the shifted fp32 logits through the backward (loss 'ce-kept-logits': recipes/*.py ``logits =
  logits[..., :-1, :].contiguous()``, tests/training/test_kept_logits.py);
- rows without a published length: the alpaca datasets' ``max_seq_len=512`` default, batches padded to the
  longest sample;
- LoRA targets/rank from the config of that recipe; the single-device full recipe uses bitsandbytes PagedAdamW
  (README footnote) with ``optimizer_in_bwd: True``; distributed recipes shard with FSDP FULL_SHARD.
The README's 'Seq Length' for the 70B rows cannot be the per-GPU token count: keeping only the checkpointed
layer inputs of 4 x 4096 tokens (80 x 16384 x 8192 x 2 B = 21.5 GB) plus the 17.2 GB weight shard already
exceeds the 26.4 GB measured, so those rows are printed, not asserted.
"""

from __future__ import annotations

import csv
import statistics
from pathlib import Path

from llmsizer.validation_cases import (
    TRAINING_HOST_RSS_NOT_MODELLED,
    TRAINING_NOT_EXPRESSIBLE,
    TRAINING_ROWS,
    TRAINING_TOLERANCE,
    training_measured_bytes,
    training_prediction,
)

DATA = Path(__file__).resolve().parents[2] / "validation" / "public_measurements.csv"
# The row expressions (model, workload fields, assumptions, asserted?, what is compared) are shared with
# `llmsizer validate`: src/llmsizer/validation_cases.py. TOLERANCE was fixed before comparing.
ROWS = TRAINING_ROWS
NOT_EXPRESSIBLE = TRAINING_NOT_EXPRESSIBLE
TOLERANCE = TRAINING_TOLERANCE


def _rows() -> list[dict[str, str]]:
    with DATA.open(newline="", encoding="utf-8") as f:
        return [r for r in csv.DictReader(f) if r["kind"] == "train_memory"]


def test_every_train_memory_row() -> None:
    errors: dict[str, float] = {}
    failures: list[str] = []
    lines: list[str] = []
    for row in _rows():
        rid = row["id"]
        if rid not in ROWS:
            why = next((v for k, v in NOT_EXPRESSIBLE.items() if k in row["model"]), None)
            if why is None and "host" in row["hardware"]:
                why = TRAINING_HOST_RSS_NOT_MODELLED
            lines.append(f"{rid} {row['model']} {row['method']} ({row['framework']}): not expressed - "
                         f"{why or 'settings not published'}")
            continue
        _, _, note, asserted, what = ROWS[rid]
        pred = training_prediction(rid)
        if what == "oom":
            ok = pred > 80e9
            lines.append(f"{rid} {row['model']} full FT: predicted {pred / 1e9:.1f} GB vs 80 GB device -> "
                         f"{'OOM as measured' if ok else 'would fit (disagrees)'} [{note}]")
            if not ok:
                failures.append(rid)
            continue
        measured = training_measured_bytes(row)
        err = (pred - measured) / measured
        tag = "ASSERTED" if asserted else "printed"
        lines.append(f"{rid} {row['model']} {row['method']} x{row['num_gpus']} ({what}): predicted "
                     f"{pred / 1e9:.2f} GB, measured {measured / 1e9:.2f} GB, error {err:+.1%} [{tag}; {note}]")
        if asserted:
            errors[rid] = err
            if abs(err) > TOLERANCE:
                failures.append(rid)
    absolute = sorted(abs(e) for e in errors.values())
    lines.append(f"fully specified rows: {len(errors)}; median |error| {statistics.median(absolute):.1%}, "
                 f"worst |error| {max(absolute):.1%} ({max(errors, key=lambda k: abs(errors[k]))})")
    print("\n" + "\n".join(lines))
    assert not failures, failures
