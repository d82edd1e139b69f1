"""Network rates in bits per second (units.py format_bits: the plan renderers and the provider's placement messages): three significant digits in
the largest unit the rounded rate reaches -- a rate just under a unit boundary rounds up into the next unit instead
of printing an exponent (a plan printed 'in 124.99 KB/s (1e+03 kb/s)')."""

from __future__ import annotations

import pytest

from llmsizer.units import format_bits


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


@pytest.mark.parametrize(("bytes_per_second", "text"), [
    (400e9 / 8, "400 Gb/s"),      # an inventory fabric as written: 400 Gb/s
    (3200e9 / 8, "3200 Gb/s"),    # an EFA instance network, kept in Gb/s (not 3.2 Tb/s) where the unit is fixed
    (12.5e9 / 8, "12.5 Gb/s"),
    (0, "0 Gb/s"),
])
def test_a_fixed_unit_is_said_in_that_unit(bytes_per_second: float, text: str) -> None:
    """``unit``: the placement messages' form (provider/placement.py, before: ``* 8 / 1e9:g Gb/s`` inline)."""
    assert format_bits(bytes_per_second, "Gb/s") == text
