"""The one number-validation layer (src/llmsizer/numbers.py): finite, integral where it must be, in range,
booleans refused, and a one-line message naming the field, where it came from and the allowed range."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from llmsizer.errors import InputError
from llmsizer.numbers import LAYERS, TOKENS, check_number


@pytest.mark.parametrize("bad", [True, False, None, "32", math.nan, math.inf, -math.inf, 32.5, 0, -1, 10**30, 1e400])
def test_bad_values_are_refused_in_one_line(bad: object) -> None:
    with pytest.raises(InputError) as e:
        check_number(bad, "num_hidden_layers", LAYERS, "config.json")
    msg = str(e.value)
    assert "\n" not in msg and msg.startswith("num_hidden_layers (config.json): ") and "expected an integer" in msg


@given(st.integers(min_value=1, max_value=2**31))
def test_every_value_in_range_passes_unchanged(n: int) -> None:
    assert check_number(n, "context", TOKENS) == n
    assert check_number(float(n), "context", TOKENS) == n
