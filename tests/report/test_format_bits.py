"""Network rates in bits per second (plan renderers, render/markdown.py format_bits): three significant digits in
the largest unit the rounded rate reaches -- a rate just under a unit boundary rounds up into the next unit instead
of printing an exponent (a plan printed 'in 124.99 KB/s (1e+03 kb/s)')."""

from __future__ import annotations

import pytest

from llmsizer.render.markdown import format_bits


@pytest.mark.parametrize(("bytes_per_second", "text"), [
    (124_990, "1 Mb/s"),        # 999,920 b/s: 3 significant digits are 1.00e6
    (124_000, "992 kb/s"),      # 992,000 b/s
    (1_249_000, "9.99 Mb/s"),   # 9,992,000 b/s
    (125_000_000, "1 Gb/s"),
    (12.5, "100 b/s"),
])
def test_rates_round_into_the_unit_they_reach(bytes_per_second: float, text: str) -> None:
    assert format_bits(bytes_per_second) == text


def test_no_rate_prints_an_exponent() -> None:
    for exp in range(0, 13):
        for mantissa in (0.99951, 0.9994, 1.0, 9.996, 99.96, 124.99):
            assert "e" not in format_bits(mantissa * 10 ** exp / 8).split()[0]
