"""Units as written in request files, each value worked out by hand."""

import datetime as dt

import pytest

from llmsizer.errors import InputError
from llmsizer.request import quantities as Q


@pytest.mark.parametrize("text, expected", [
    ("2 TB", 2 * 10**12),            # decimal terabytes
    ("80GiB", 80 * 2**30),           # binary gibibytes: 85,899,345,920 B
    ("500 GB", 500 * 10**9),
    ("512 MiB", 512 * 2**20),
    (2_000_000, 2_000_000),          # a plain number is bytes
    ("4294967296", 2**32),
])
def test_sizes(text, expected):
    assert Q.parse_size(text) == expected


@pytest.mark.parametrize("text, expected", [
    ("500k tokens", 500_000),        # dataset sizes use decimal suffixes
    ("2B tokens", 2_000_000_000),
    ("60M", 60_000_000),
    ("1.5M tokens", 1_500_000),
    (123456, 123456),
])
def test_token_counts(text, expected):
    assert Q.parse_token_count(text) == expected


@pytest.mark.parametrize("text, expected", [("8k", 8192), ("4k tokens", 4096), ("128k", 131072), (4096, 4096)])
def test_context_lengths_are_binary_thousands(text, expected):
    assert Q.parse_context(text) == expected


@pytest.mark.parametrize("text, expected", [
    ("3 days", 3 * 86400),
    ("12h", 12 * 3600),
    ("90 min", 90 * 60),
    ("2 weeks", 14 * 86400),
    ("6 months", 6 * 730 * 3600),    # a month is 730 h (8760 / 12)
    ("1 year", 8760 * 3600),
    ("500 ms", 0.5),
    ("1.5 hours", 5400),
])
def test_durations(text, expected):
    assert Q.parse_duration(text) == pytest.approx(expected)


@pytest.mark.parametrize("text, fragment", [
    (3, "no unit"), ("3", "cannot read"), ("5 m", "minutes or months"), ("2 fortnights", "unknown unit"),
    ("-1 h", "must be positive"), ("-1d", "must be positive"),  # a sign is read: not a length of time
])
def test_bad_durations(text, fragment):
    with pytest.raises(InputError, match=fragment):
        Q.parse_duration(text)


def test_intervals_in_time_or_steps():
    assert Q.parse_interval("2h") == (7200.0, None)
    assert Q.parse_interval("500 steps") == (None, 500)
    assert Q.parse_interval("1k steps") == (None, 1000)
    with pytest.raises(InputError, match="step count"):
        Q.parse_interval("often")


@pytest.mark.parametrize("text, period, expected", [
    (20000, None, 20000.0), ("20000 USD", None, 20000.0), ("$20k", None, 20000.0), ("USD 1.5M", None, 1.5e6),
    ("$20,000", None, 20000.0), ("$6.88/h", "h", 6.88), ("$5k/month", "month", 5000.0),
])
def test_money(text, period, expected):
    assert Q.parse_money(text, period) == pytest.approx(expected)


def test_other_currencies_are_refused():
    with pytest.raises(InputError, match="US dollars"):
        Q.parse_money("5000 EUR")
    with pytest.raises(InputError, match="US dollars"):
        Q.parse_money("€5000")


@pytest.mark.parametrize("text, expected", [
    ("10 Gb/s", 10e9 / 8),           # bits: 1.25 GB/s
    ("400 Gbps", 50e9),
    ("500 MB/s", 500e6),
    ("2 GiB/s", 2 * 2**30),
])
def test_bandwidth(text, expected):
    assert Q.parse_bandwidth(text) == pytest.approx(expected)


def test_bandwidth_needs_a_rate_unit():
    for bad in ("10 Gb", 10, "fast"):
        with pytest.raises(InputError):
            Q.parse_bandwidth(bad)


@pytest.mark.parametrize("text, expected", [(5, 5.0), ("5/s", 5.0), ("300/min", 5.0), ("300 per minute", 5.0),
                                            ("8640/day", 0.1), ("2 rps", 2.0), ("7200 requests/h", 2.0)])
def test_rates(text, expected):
    assert Q.parse_rate(text) == pytest.approx(expected)


def test_shares_and_dates():
    assert Q.parse_share("40%") == pytest.approx(0.4)
    assert Q.parse_share(0.35) == 0.35
    with pytest.raises(InputError):
        Q.parse_share("140%")
    assert Q.parse_date("2025-07-01") == dt.date(2025, 7, 1)
    assert Q.parse_date_or_duration("3 weeks") == (None, 21 * 86400)
    assert Q.parse_date_or_duration(dt.date(2025, 7, 1)) == (dt.date(2025, 7, 1), None)


@pytest.mark.parametrize("parse", [Q.parse_size, Q.parse_plain_count, Q.parse_token_count, Q.parse_context],
                         ids=lambda f: f.__name__)
def test_a_misread_quantity_gets_one_hint(parse):
    """True (YAML's `yes`) and a word are misread alike, so both messages give the same way to write the value."""
    with pytest.raises(InputError) as as_bool:
        parse(True)
    with pytest.raises(InputError) as as_word:
        parse("lots")
    assert str(as_bool.value).removeprefix("cannot read True") == str(as_word.value).removeprefix("cannot read 'lots'")
