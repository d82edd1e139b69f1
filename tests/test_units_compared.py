"""A printed need and its bound never contradict the verdict drawn from the exact numbers (review: a speed of 5.26
said '5.3' against a floor of 5.29, a need and a budget both said '79.00 GiB' under "does not fit"). Each pair
formatter (units.compared_rates / compared_bytes / compared_seconds / compared_usd, over units.compared_places) is
checked against the exact comparison of its inputs, the truth the verdict itself is drawn from."""
import re

from hypothesis import given
from hypothesis import strategies as st

from llmsizer.estimate.verdict import memory_verdict
from llmsizer.units import GiB, compared_bytes, compared_rates, compared_seconds, compared_usd

_NUMBER = re.compile(r"-?[\d,]+(?:\.(\d+))?")
_UNIT = {"B": 1, "KiB": 2**10, "MiB": 2**20, "GiB": 2**30, "TiB": 2**40, "PiB": 2**50,
         "KB": 10**3, "MB": 10**6, "GB": 10**9, "TB": 10**12, "PB": 10**15}


def _read(text: str) -> tuple[float, int]:
    """The number a printed quantity shows (thousands separators, '$' and a unit dropped) and its decimals."""
    m = _NUMBER.search(text)
    assert m is not None, text
    return float(m.group(0).replace(",", "")), len(m.group(1) or "")


def _sign(a: float, b: float) -> int:
    return (a > b) - (a < b)


def _agrees(pair: tuple[str, str], a: float, b: float) -> None:
    (x, px), (y, py) = _read(pair[0]), _read(pair[1])
    assert px == py, pair  # one precision on both sides
    assert _sign(x, y) == _sign(a, b), (pair, a, b)


# a rate or a limit of 0, or from a billionth up: 40 decimals (units._MOST_PLACES) tell such doubles apart
rates = st.one_of(st.just(0.0), st.floats(min_value=1e-9, max_value=1e6))


@given(rates, rates)
def test_a_rate_and_its_limit_print_in_the_verdicts_order(rate, limit):
    _agrees(compared_rates(rate, limit), rate, limit)


@given(st.floats(min_value=4.0, max_value=7.0), st.sampled_from([5.29, 7.25, 20.0]))
def test_speeds_near_the_reading_floor(rate, floor):
    # the probe's neighbourhood: per-user speeds around recommend's reading floor (format_search.READING_FLOOR)
    _agrees(compared_rates(rate, floor), rate, floor)


def test_the_reviewers_pair_no_longer_reads_met():
    assert compared_rates(5.26, 5.29) == ("5.26", "5.29")  # was '5.3' against '5.29' (format_rate's one decimal)
    assert compared_rates(5.295, 5.29) == ("5.295", "5.290")
    assert compared_rates(30, 20) == ("30.0", "20.0")


@given(st.one_of(st.just(0.0), st.floats(min_value=1e-9, max_value=1e5)), st.floats(min_value=0.001, max_value=1e5))
def test_a_time_and_its_limit_print_in_the_verdicts_order(seconds, limit):
    _agrees(compared_seconds(seconds, limit), seconds, limit)


@given(st.one_of(st.just(0.0), st.floats(min_value=1e-9, max_value=1e7)), st.one_of(st.just(0.0), st.floats(min_value=1e-9, max_value=1e7)))
def test_a_cost_and_its_budget_print_in_the_verdicts_order(cost, budget):
    _agrees(compared_usd(cost, budget), cost, budget)


sizes = st.integers(min_value=0, max_value=2**52)


def _bytes_agree(said: tuple[str, ...], exact: tuple[int, ...]) -> None:
    """Each size's printed value, read back in its printed unit, against the last (the bound): the same order."""
    read = [(_read(s)[0] * _UNIT[s.split()[-1]], s.split()[-1]) for s in said]
    for k, (value, unit) in enumerate(read[:-1]):
        n = exact[k]
        if unit == read[-1][1]:  # in one unit: one precision, the verdict's order
            assert _read(said[k])[1] == _read(said[-1])[1], said
            assert _sign(value, read[-1][0]) == _sign(n, exact[-1]), (said, exact)
        else:  # another unit already orders the pair (a smaller unit holds less than 1024 of it)
            assert _sign(_UNIT[unit], _UNIT[read[-1][1]]) == _sign(n, exact[-1]) or n == exact[-1], (said, exact)


@given(sizes, sizes, st.booleans())
def test_a_need_and_its_budget_print_in_the_verdicts_order(need, budget, binary):
    _bytes_agree(compared_bytes(need, budget, binary=binary), (need, budget))


@given(st.integers(min_value=70 * GiB, max_value=90 * GiB), st.integers(min_value=0, max_value=2 * GiB),
       st.integers(min_value=75 * GiB, max_value=85 * GiB), st.floats(min_value=0.0, max_value=0.2))
def test_the_memory_verdicts_words_agree_with_its_fits(need, extra, usable, headroom):
    """estimate/verdict.py memory_verdict: the need and the budget its reason prints compare as ``fits`` says."""
    v = memory_verdict(need, need + extra, usable, headroom)
    m = re.match(r"needs ([\d.]+ \w+) per device \(the expected value; high end ([\d.]+ \w+)\) of a ([\d.]+ \w+) "
                 "budget", v.reason)
    assert m is not None, v.reason
    need_said, high_said, budget_said = m.groups()
    _bytes_agree((need_said, high_said, budget_said), (need, need + extra, v.budget))
    if need_said.split()[-1] == budget_said.split()[-1]:
        assert (_read(need_said)[0] <= _read(budget_said)[0]) == v.fits, (v.reason, v.fits)


@given(st.integers(min_value=2**20, max_value=2**45), st.integers(min_value=-2**22, max_value=2**22), st.booleans())
def test_a_need_a_few_bytes_from_its_budget(budget, delta, binary):
    # the pairs rounding merged: a need within 4 MiB of its budget, both '79.00 GiB' at format_bytes' two decimals
    need = max(budget + delta, 0)
    _bytes_agree(compared_bytes(need, budget, binary=binary), (need, budget))


def test_one_byte_over_is_said_over():
    assert compared_bytes(79 * GiB + 1, 79 * GiB) == ("79.000000001 GiB", "79.000000000 GiB")
    assert compared_bytes(int(79.004 * GiB), 79 * GiB) == ("79.004 GiB", "79.000 GiB")
    assert compared_bytes(500 * 2**20, 79 * GiB) == ("500.00 MiB", "79.00 GiB")  # units already order them
