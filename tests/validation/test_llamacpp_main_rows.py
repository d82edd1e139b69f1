"""The December 2023 rows of validation/llamacpp_bench.csv are ./main runs, not llama-bench (XiongjieDai
GPU-Benchmarks-on-LLM-Inference notebooks @ce30c07 / @3119953): each quotes its notebook's run lines, and the
validation builder expresses what ran (validation_cases.MAIN_TEST, main_decode_cells).

Independent truth: the notebooks' printed timings (quoted per row) against the README table value the row carries,
and llama.cpp's own rules @7082d24 (builds 1671-1691 share them): ``kv_self.n = min(n_ctx, max(32,
GGML_PAD(cell_max, 32)))`` (llama.cpp L6184) and main's context swapping at n_ctx (examples/main/main.cpp L503-522).
"""

from __future__ import annotations

import re
import statistics

import pytest

from llmsizer.errors import InputError
from llmsizer.validation_cases import (
    DECODE,
    MAIN_TEST,
    _speed,
    llamacpp_bench_cases,
    llamacpp_bench_rows,
    main_decode_cells,
)

DECEMBER = [r for r in llamacpp_bench_rows() if "Dec 2023" in r.table]


def _pad32(n: int) -> int:
    return -(-n // 32) * 32


def test_a_run_inside_its_context_reads_the_padded_cells_in_use() -> None:
    """No swap (prompt + evals < n_ctx): after eval k the cache holds prompt + k contiguous cells from cell 0, so the
    step attends min(n_ctx, max(32, pad32(prompt + k))) cells (llama.cpp L6184)."""
    for prompt, evals in ((100, 300), (5, 40), (494, 17)):
        expected = statistics.fmean(min(512, max(32, _pad32(prompt + k))) for k in range(1, evals + 1))
        assert main_decode_cells(prompt, evals, 512) == pytest.approx(expected)


def test_the_december_runs_attend_the_whole_512_cell_cache() -> None:
    """494-token prompt, 1023 evals, n_ctx 512: pad32(495) is already 512, and each swap (n_discard = 255 cells below
    the newest ones) frees cells under the highest one in use, so every eval reads all 512 cells: not the tokens the
    context holds (258-512, mean 385) nor a context growing to 494 + 1023."""
    assert main_decode_cells(494, 1023, 512) == 512.0
    # without the swap ceiling the same run would read pad32 of a growing context
    assert main_decode_cells(494, 1023, 2048) == pytest.approx(
        statistics.fmean(_pad32(494 + k) for k in range(1, 1024)))


def test_main_run_settings_are_checked() -> None:
    with pytest.raises(InputError):
        main_decode_cells(512, 10, 512)  # main.cpp refuses a prompt that fills the context


def test_every_december_row_quotes_its_notebook_run() -> None:
    """Every December 2023 row names its notebook and commit and quotes the run lines of ./main; the README value is
    the mean of the three runs' printed speeds, and each printed speed is the quoted count over the quoted time."""
    assert sorted(r.id for r in DECEMBER) == ["XD20", "XD21", "XD22", "XD23", "XD24", "XD25", "XD26", "XD47", "XD48",
                                             "XD49", "XD50", "XD51", "XD52", "XD53", "XD54", "XD55", "XD56", "XD57"]
    for r in DECEMBER:
        assert re.search(r"\.ipynb' @ [0-9a-f]{40}", r.notes), r.id
        assert "n_ctx 512" in r.notes or "n_ctx = 512, n_batch = 512, n_predict = 1024, n_keep = 0" in r.notes, r.id
        if r.test.startswith("tg"):
            assert r.test == "tg1023 p494 c512", r.id
            runs = re.findall(r"eval time = ([\d.]+) ms / 1023 runs \( [\d.]+ ms per token, ([\d.]+) tokens per second\)",
                              r.notes)
            assert len(runs) == 3 and "prompt eval time = " in r.notes and "/ 494 tokens" in r.notes, r.id
            for ms, tps in runs:
                assert 1023 / (float(ms) / 1e3) == pytest.approx(float(tps), abs=0.006), r.id
            assert statistics.fmean(float(t) for _, t in runs) == pytest.approx(r.value, abs=0.006), r.id
        else:
            assert r.test == "pp494", r.id
            times = re.search(r"prompt eval time = ([\d.]+) / ([\d.]+) / ([\d.]+) ms / 494 tokens", r.notes)
            assert times is not None, r.id
            assert statistics.fmean(494e3 / float(t) for t in times.groups()) == pytest.approx(r.value, rel=1e-3)


def test_the_builder_expresses_the_main_runs() -> None:
    """The decode rows are estimated at the cells their evals read (512): slower than the tg128 reading they had (65
    cells mid-generation), faster than a context growing past n_ctx (494 + 1023 / 2 cells, which the 512-cell cache
    never holds); they stay in the summary (the cold first step is not modelled: < 1 %)."""
    cases = {c.id: c for c in llamacpp_bench_cases()}
    decode = [r for r in DECEMBER if MAIN_TEST.fullmatch(r.test)]
    assert len(decode) == 16
    for r in decode:
        c = cases[r.id]
        assert c.kind == DECODE and not c.excluded and "attend 512 KV cells" in c.note, r.id
        tg128 = _speed(r.model, r.device, r.weights, 1, 128, flash=False, int8_mmq=False).tokens_per_second_per_user
        grown = _speed(r.model, r.device, r.weights, 494, 1023, flash=False, int8_mmq=False).tokens_per_second_per_user
        assert c.predicted is not None and tg128 is not None and grown is not None, r.id
        assert grown < c.predicted < tg128, r.id
