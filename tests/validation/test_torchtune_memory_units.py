"""Each torchtune memory row is read in the unit torchtune logged it in at the commit its number was written at:
get_memory_stats divided the bytes by 1e9 before pull 1348 and by 1024**3 from it (d0b89e2, 2024-08-15). The
commits and lines are validation_cases.TORCHTUNE_MEMORY_LOG's (read from pytorch/torchtune: torchtune/utils/memory.py
@0217d44c2 lines 198-200 '/ 1e9', torchtune/training/memory.py @30b8519 lines 210-214 '/ (1024**3)', ...); this test
holds every torchtune train_memory row of the CSV to its commit's unit, and each commit's unit to its side of
pull 1348 by the commits' dates in the table's text."""

from __future__ import annotations

import re

from llmsizer.validation_cases import (
    TORCHTUNE_MEMORY_LOG,
    TORCHTUNE_MEMORY_ROWS,
    TRAINING_UNIT,
    public_rows,
    training_measured_bytes,
)

PULL_1348 = "2024-08-15"  # d0b89e2 "Update peak memory stats to be logged in GiB (#1348)"


def test_every_torchtune_memory_row_is_read_in_its_commits_unit() -> None:
    rows = {rid: r for rid, r in public_rows().items()
            if r["kind"] == "train_memory" and r["framework"].lower().startswith("torchtune")}
    assert set(rows) == set(TORCHTUNE_MEMORY_ROWS)  # a new torchtune row names its commit
    for rid, r in rows.items():
        unit = TORCHTUNE_MEMORY_LOG[TORCHTUNE_MEMORY_ROWS[rid]][0]
        assert training_measured_bytes(r) == float(r["value"]) * TRAINING_UNIT[unit], (rid, r["unit"], unit)


def test_each_commits_unit_is_its_side_of_pull_1348() -> None:
    for commit, (unit, where) in TORCHTUNE_MEMORY_LOG.items():
        dates = re.findall(r"\d{4}-\d{2}(?:-\d{2})?", where)
        divisor = "/ 1e9" if unit == "GB" else "/ (1024**3)"
        assert divisor in where, commit
        if dates:
            assert (max(dates) < PULL_1348) is (unit == "GB"), (commit, dates)
