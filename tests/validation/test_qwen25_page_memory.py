"""Inference memory vs the Qwen2.5 speed benchmark page's transformers tables (public_measurements.csv PM1200-PM1301).

QwenLM/Qwen2.5 docs/source/benchmark/speed_benchmark.rst @a912d23: one sequence, an input of 1 / 6144 / 14336 / 30720
tokens and 2048 generated tokens, transformers 4.46.0 with flash_attention_2 on one A100 80GB, BF16 / GPTQ-Int8 /
GPTQ-Int4 / AWQ checkpoints of Qwen2.5-0.5B..72B-Instruct. The memory cell is the page's script
(examples/speed-benchmark/speed_benchmark_transformers.py @8205ba2): torch.cuda.max_memory_allocated summed over the
GPUs, / 1024**3 (GiB; the column says 'GB'); only the one-GPU rows are copied. The prediction lives in
``llmsizer.validation_cases`` (so ``llmsizer validate`` reports the same figures); the tolerance is held here.
"""

from __future__ import annotations

import pytest

from llmsizer.units import GiB
from llmsizer.validation_cases import (
    QWEN25_PAGE_FORMAT,
    QWEN25_PAGE_IDS,
    QWEN25_PAGE_KNOWN_MISSES,
    QWEN25_PAGE_MODEL,
    QWEN25_PAGE_TOLERANCE,
    public_cases,
    public_rows,
    qwen25_page_prediction,
)

KNOWN_MISSES = QWEN25_PAGE_KNOWN_MISSES  # each with what is seen; a fix turns its strict xfail into a failure


def test_every_page_row_is_in_the_csv_and_quotes_its_cells() -> None:
    rows = public_rows()
    assert QWEN25_PAGE_IDS <= set(rows)
    for rid in QWEN25_PAGE_IDS:
        r = rows[rid]
        cells = [c.strip() for c in r["quote"].strip("|").split("|")]
        assert r["kind"] == "infer_memory" and r["num_gpus"] == "1", rid
        assert cells[2] == r["precision"] and cells[3] == "1" and cells[5] == r["value"], rid
        assert r["model"] in QWEN25_PAGE_MODEL and r["precision"] in QWEN25_PAGE_FORMAT, rid
        assert int(r["seq_len"]) in (1, 6144, 14336, 30720), rid


def test_every_page_row_is_expressed() -> None:
    cases, missing = public_cases()
    assert QWEN25_PAGE_IDS <= {c.id for c in cases}
    assert not QWEN25_PAGE_IDS & {m.id for m in missing}


@pytest.mark.parametrize(
    "row_id",
    [
        pytest.param(rid, marks=pytest.mark.xfail(reason=KNOWN_MISSES[rid], strict=True))
        if rid in KNOWN_MISSES
        else rid
        for rid in sorted(QWEN25_PAGE_IDS)
    ],
)
def test_peak_allocated(row_id: str) -> None:
    row = public_rows()[row_id]
    measured = float(row["value"]) * GiB
    predicted = qwen25_page_prediction(row)
    err = (predicted - measured) / measured
    print(
        f"{row_id} {row['model']} {row['precision']} p{row['seq_len']}: predicted {predicted / GiB:.2f} GiB, "
        f"measured {measured / GiB:.2f} GiB, error {err:+.1%}"
    )
    assert abs(err) <= QWEN25_PAGE_TOLERANCE
