"""Published AMD Instinct training rows added with their settings (validation/public_measurements.csv PM1350-PM1355):
SemiAnalysis's Llama 3 8B FSDP runs on 8 x MI300X (ROCm/TransformerEngine issue #79, model TFLOP/s per GPU) and AMD's
torchtune Llama 3.1 70B fine-tunes on 8 x MI300X (AMD-AIG-AIMA/pytorch-training-benchmark README). Every row is
expressed or says why; the issue's rows are held out (settings assumed: the sequence length and recomputation are not
in the readable issue text) and test CDNA3's utilisation and float8 share, fitted on torchtitan's PM1341 and PM1343."""
from __future__ import annotations

import re

import pytest

from llmsizer import validation_cases as vc

ROWS = ("PM1350", "PM1351", "PM1352", "PM1353", "PM1354", "PM1355")


@pytest.fixture(scope="module")
def rows() -> dict[str, dict[str, str]]:
    return vc.public_rows()


@pytest.fixture(scope="module")
def cases(rows: dict[str, dict[str, str]]) -> dict[str, vc.Case | vc.NotExpressed]:
    return {rid: vc.speed_case(rows[rid]) for rid in ROWS}


def test_each_value_is_the_number_its_quote_prints(rows: dict[str, dict[str, str]]) -> None:
    """The value column is read from the quoted line (the issue's 'batch size N): X' / the README's log line)."""
    for rid in ROWS:
        r = rows[rid]
        if r["unit"] == "TFLOP/s/GPU":
            m = re.search(r"\(batch size (\d+)\): ([\d.]+)", r["quote"])
            assert m is not None, rid
            assert (int(m.group(1)), float(m.group(2))) == (int(r["batch_size"]), float(r["value"])), rid
        else:
            m = re.search(r"Average tokens/s/gpu: ([\d.]+)", r["quote"])
            assert m is not None and float(m.group(1)) == float(r["value"]), rid


def test_every_row_is_expressed_or_says_why(cases: dict[str, vc.Case | vc.NotExpressed]) -> None:
    for rid in ("PM1350", "PM1351", "PM1352", "PM1353"):
        c = cases[rid]
        assert isinstance(c, vc.Case) and c.predicted is not None, rid
        assert c.excluded == vc.ASSUMED and c.unit == "TFLOP/s/GPU", rid
        assert rid not in vc.TRAINING_SPEED_CALIBRATION  # held out: CDNA3's utilisation is PM1341's
    for rid in ("PM1354", "PM1355"):
        c = cases[rid]
        assert isinstance(c, vc.NotExpressed) and "SEQ_LEN=null" in c.why, rid


def test_the_script_flop_count_is_eq_1_on_every_parameter() -> None:
    """The issue's script: flops_per_token = 6 N + 12 n_layers n_heads head_dim max_seq_len with N the sum of every
    parameter's numel. Llama 3.1 8B's safetensors hold 8,030,261,248 parameters (untied embedding and head), so at the
    assumed 4096 tokens one token costs 6 x 8,030,261,248 + 12 x 32 x 4096 x 4096 FLOP."""
    from llmsizer.catalog.models import find
    from llmsizer.formulas.params import count_params
    from llmsizer.formulas.training_time import training_flops_per_token

    spec = find("llama-3.1-8b").spec()
    n = count_params(spec).total
    assert n == 8_030_261_248
    expected = 6 * 8_030_261_248 + 12 * 32 * 4096 * 4096
    assert training_flops_per_token(n, spec.num_layers, spec.num_heads * spec.head_dim, 4096) == expected


def test_fixed_float8_rows_keep_the_measured_speed_up(cases: dict[str, vc.Case | vc.NotExpressed]) -> None:
    """Held out, the TransformerEngine float8 runs with ROCm TE pull 66 (PM1352/PM1353) at CDNA3's float8 share
    (efficiency.FLOAT8_GEMM_SHARE_CDNA3, fitted on torchtitan's PM1343): their FP8-over-BF16 speed-up at batch 4,
    PM1353 / PM1350 = 474 / 410.42 = 1.155 measured, is predicted within 10 % (measured 2026-12: 1.090, -5.6 %; at
    Hopper's share 1.325, +14.7 %). Their absolute TFLOP/s sit below the measurement with their bf16 twin's (PM1350,
    -15.1 %: this stack's bf16 GEMMs beat CDNA3's u fitted on torchtitan), within 25 % (-14.4 %, -19.8 %; +3.9 %,
    -2.6 % at Hopper's share, two errors cancelling). PM1351, the same run before pull 66 (the maintainer: the dev
    branch lacked NVTE's FSDP optimisations), is over-predicted (+16.8 %): a software gap, not a setting llmsizer
    models."""
    err = {rid: c.predicted / c.measured - 1 for rid, c in cases.items()  # type: ignore[union-attr,operator]
           if isinstance(c, vc.Case)}
    c50, c53 = cases["PM1350"], cases["PM1353"]
    assert isinstance(c50, vc.Case) and isinstance(c53, vc.Case)
    speed_up = (c53.predicted / c50.predicted) / (c53.measured / c50.measured)  # type: ignore[operator]
    assert abs(speed_up - 1) < 0.10
    assert -0.20 < err["PM1350"] < 0
    assert -0.25 < err["PM1352"] < 0 and -0.25 < err["PM1353"] < 0
    assert err["PM1351"] > 0.10
